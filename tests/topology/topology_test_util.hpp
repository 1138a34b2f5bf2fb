#pragma once
// Helpers shared by the topology tests.
#include <catch2/catch.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "topology/error.hpp"
#include "topology/loader.hpp"

namespace collsim::test {

inline std::string config_path(std::string_view name) {
  return std::string(COLLSIM_SOURCE_DIR) + "/configs/" + std::string(name);
}

// The diagnostics of a document that must be refused; fails the test if it loads.
inline std::vector<Diagnostic> errors_of(std::string_view text,
                                         const topo::LoadOptions& options = {}) {
  try {
    (void)topo::parse_topology(text, "t.json", options);
  } catch (const InputError& e) {
    return e.diagnostics();
  }
  FAIL("the document was accepted: " << text);
  return {};
}

// True if one diagnostic has exactly this location and contains every given piece of text.
inline bool has_error(const std::vector<Diagnostic>& ds, std::string_view where,
                      std::initializer_list<std::string_view> pieces) {
  for (const Diagnostic& d : ds) {
    if (d.where != where) continue;
    bool all = d.file == "t.json";
    for (std::string_view p : pieces) all = all && d.message.find(p) != std::string::npos;
    if (all) return true;
  }
  return false;
}

inline std::string dump(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const Diagnostic& d : ds) out += format_diagnostic(d) + "\n";
  return out;
}

}  // namespace collsim::test
