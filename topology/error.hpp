#pragma once
// Two kinds of failure, kept apart on purpose (docs/errors.md):
//  - InputError: the user's input is wrong (file, JSON path, value). The CLI exits with status 2.
//  - InternalError: an invariant of collsim itself broke. The CLI exits with status 3 and asks
//    for a bug report.
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

// Gathers every problem in an input so that one run reports all of them, not only the first.
class DiagnosticSink {
 public:
  explicit DiagnosticSink(std::string file) : file_(std::move(file)) {}
  void error(std::string where, std::string message);
  // Adds everything `other` gathered after what this one has.
  void append(const DiagnosticSink& other) {
    diagnostics_.insert(diagnostics_.end(), other.diagnostics_.begin(), other.diagnostics_.end());
  }
  bool empty() const { return diagnostics_.empty(); }
  const std::string& file() const { return file_; }
  // Throws InputError holding everything gathered so far, if anything was.
  void throw_if_any() const;

 private:
  std::string file_;
  std::vector<Diagnostic> diagnostics_;
};

}  // namespace collsim
