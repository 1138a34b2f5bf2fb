#pragma once
// Two kinds of failure, kept apart on purpose (docs/errors.md):
//  - InputError: the user's input is wrong (file, JSON path, value). The CLI exits with status 2.
//  - InternalError: an invariant of collsim itself broke. The CLI exits with status 3 and asks
//    for a bug report.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace collsim {

// One problem found in an input, located as precisely as the input allows.
struct Diagnostic {
  std::string file;     // path as the user gave it; empty for command-line values
  std::string where;    // JSON pointer ("/links/12/bandwidth"), "line 7", or an option name
  std::string message;  // what was found, what was expected and how to fix it
};

std::string format_diagnostic(const Diagnostic& d);

class InputError : public std::runtime_error {
 public:
  explicit InputError(std::vector<Diagnostic> diagnostics);
  InputError(std::string file, std::string where, std::string message);
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  std::vector<Diagnostic> diagnostics_;
};

class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// Gathers every problem in an input so that one run reports all of them, not only the first,
// up to kShown of them: a generated file with one mistake repeated in each of a million ops
// would otherwise print a million lines (and hold them) where the first few say what to fix.
// The rest are counted, and the error ends with how many were not shown.
class DiagnosticSink {
 public:
  static constexpr std::size_t kShown = 20;
  explicit DiagnosticSink(std::string file) : file_(std::move(file)) {}
  void error(std::string where, std::string message);
  // Whether a further error() would only be counted: a caller can skip formatting it then.
  bool full() const { return diagnostics_.size() >= kShown; }
  // Adds everything `other` gathered after what this one has.
  void append(const DiagnosticSink& other);
  bool empty() const { return diagnostics_.empty(); }
  std::size_t count() const { return diagnostics_.size() + hidden_; }  // shown and hidden
  const std::string& file() const { return file_; }
  // Throws InputError holding everything gathered so far, if anything was.
  void throw_if_any() const;

 private:
  std::string file_;
  std::vector<Diagnostic> diagnostics_;
  std::size_t hidden_ = 0;
};

}  // namespace collsim
