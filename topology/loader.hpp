#pragma once
// Reads a topology from JSON (docs/topology-format.md), validates it and expands the compact
// templated form. Every problem found is reported at once as an InputError whose diagnostics
// name the file, the JSON pointer, what was found and what was expected.
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "topology/topology.hpp"

namespace collsim::topo {

Topology load_topology(const std::string& path);
// `file` labels diagnostics; it is not opened.
Topology parse_topology(std::string_view text, const std::string& file);
Topology build_topology(const nlohmann::json& document, const std::string& file);

}  // namespace collsim::topo
