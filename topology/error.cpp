#include "topology/error.hpp"

namespace collsim {

std::string format_diagnostic(const Diagnostic& d) {
  std::string out;
  if (!d.file.empty()) out += d.file;
  if (!d.where.empty()) {
    if (!out.empty()) out += ": ";
    out += d.where;
  }
  if (!out.empty()) out += ": ";
  out += d.message;
  return out;
}

namespace {
std::string join(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const Diagnostic& d : ds) {
    if (!out.empty()) out += '\n';
    out += format_diagnostic(d);
  }
  return out;
}
}  // namespace

InputError::InputError(std::vector<Diagnostic> diagnostics)
    : std::runtime_error(join(diagnostics)), diagnostics_(std::move(diagnostics)) {}

InputError::InputError(std::string file, std::string where, std::string message)
    : InputError(std::vector<Diagnostic>{{std::move(file), std::move(where), std::move(message)}}) {
}

void DiagnosticSink::error(std::string where, std::string message) {
  if (full())
    ++hidden_;
  else
    diagnostics_.push_back({file_, std::move(where), std::move(message)});
}

void DiagnosticSink::append(const DiagnosticSink& other) {
  for (const Diagnostic& d : other.diagnostics_) {
    if (full())
      ++hidden_;
    else
      diagnostics_.push_back(d);
  }
  hidden_ += other.hidden_;
}

void DiagnosticSink::throw_if_any() const {
  if (diagnostics_.empty()) return;
  if (hidden_ == 0) throw InputError(diagnostics_);
  std::vector<Diagnostic> shown = diagnostics_;
  shown.push_back({file_, "",
                   std::to_string(hidden_) + " more problem" + (hidden_ == 1 ? "" : "s") +
                       " not shown; fix the ones above and run again"});
  throw InputError(std::move(shown));
}

}  // namespace collsim
