#include "topology/name_pattern.hpp"

#include <fmt/format.h>

#include <charconv>

namespace collsim::topo {

bool NamePattern::parse(std::string_view text, NamePattern& out, std::string& error) {
  out = NamePattern{};
  out.text_ = std::string(text);
  const auto fail = [&](std::string_view why) {
    error = fmt::format(
        "bad name pattern \"{}\": {}; write {{i}}, {{i/2}}, {{i%4}}, {{i+1}} or "
        "{{i:03}} for zero-padding",
        text, why);
    return false;
  };
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '}') return fail("unmatched '}'");
    if (c != '{') {
      out.literal_ += c;
      ++i;
      continue;
    }
    const std::size_t close = text.find('}', i);
    if (close == std::string_view::npos) return fail("unmatched '{'");
    std::string_view body = text.substr(i + 1, close - i - 1);
    Slot slot;
    slot.position = out.literal_.size();
    if (const auto colon = body.find(':'); colon != std::string_view::npos) {
      const std::string_view w = body.substr(colon + 1);
      const auto r = std::from_chars(w.data(), w.data() + w.size(), slot.width);
      if (w.empty() || r.ec != std::errc() || r.ptr != w.data() + w.size() || slot.width < 0 ||
          slot.width > 18)
        return fail("the width after ':' must be a number up to 18");
      body = body.substr(0, colon);
    }
    if (body.empty() || body[0] != 'i') return fail("only the index {i} can be used");
    body.remove_prefix(1);
    if (!body.empty()) {
      slot.op = body[0];
      if (std::string_view("+-*/%").find(slot.op) == std::string_view::npos)
        return fail(fmt::format("unknown operation '{}'", slot.op));
      const std::string_view k = body.substr(1);
      const auto r = std::from_chars(k.data(), k.data() + k.size(), slot.operand);
      if (k.empty() || r.ec != std::errc() || r.ptr != k.data() + k.size() || slot.operand < 0 ||
          slot.operand > 1000000000)
        return fail("the constant must be a whole number from 0 to 1e9");
      if ((slot.op == '/' || slot.op == '%') && slot.operand == 0) return fail("division by zero");
    }
    out.slots_.push_back(slot);
    i = close + 1;
  }
  return true;
}

std::string NamePattern::expand(std::int64_t i) const {
  if (slots_.empty()) return literal_;
  std::string out;
  std::size_t from = 0;
  for (const Slot& s : slots_) {
    out.append(literal_, from, s.position - from);
    from = s.position;
    std::int64_t v = i;
    switch (s.op) {
      case '+':
        v = i + s.operand;
        break;
      case '-':
        v = i - s.operand;
        break;
      case '*':
        v = i * s.operand;
        break;
      case '/':
        v = i / s.operand;
        break;
      case '%':
        v = i % s.operand;
        break;
    }
    out += fmt::format("{:0{}}", v, s.width);
  }
  out.append(literal_, from, std::string::npos);
  return out;
}

}  // namespace collsim::topo
