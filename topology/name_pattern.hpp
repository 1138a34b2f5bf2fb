#pragma once
// Names of repeated entries ("count": N): "gpu{i}" is gpu0, gpu1, ...; the index may be
// transformed by one operation with a constant ({i/2}, {i%4}, {i+1}, {i-1}, {i*2}) and padded
// with zeros ({i:03} is 000, 001, ...). Literal braces are not allowed in names.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace collsim::topo {

class NamePattern {
 public:
  // Parses `text`; on failure returns false and sets `error` to a message that says what is
  // wrong and how to write it.
  static bool parse(std::string_view text, NamePattern& out, std::string& error);
  bool indexed() const { return !slots_.empty(); }
  std::string expand(std::int64_t i) const;
  const std::string& text() const { return text_; }

 private:
  struct Slot {
    std::size_t position;  // in literal_, where the value goes
    char op = '+';
    std::int64_t operand = 0;
    int width = 0;
  };
  std::string text_;
  std::string literal_;
  std::vector<Slot> slots_;
};

}  // namespace collsim::topo
