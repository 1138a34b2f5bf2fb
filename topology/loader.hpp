#pragma once
// Reads a topology from JSON (docs/topology-format.md), validates it and expands the compact
// templated form. Every problem found is reported at once as an InputError whose diagnostics
// name the file, the JSON pointer, what was found and what was expected.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "topology/topology.hpp"

namespace collsim::topo {

struct LoadOptions {
  // Memory the expanded topology may use, in bytes; 0: no limit. A "count" of a few bytes can
  // stand for millions of nodes, so the nodes, links, racks and servers are counted and their
  // memory estimated (kBytesPerNode, kBytesPerLink, kBytesPerGroup) before anything is expanded,
  // and a document above the limit is an InputError naming the estimate and the limit. The CLI
  // passes --max-memory.
  std::uint64_t max_memory = 0;
};
// Peak memory per node and per directed link of loading and validating a topology: peak RSS of
// `collsim topo validate` on stars of 1 and 2 million GPUs with one and two links each gave
// 326 B per node and 148 B per directed link, rounded up (docs/errors.md).
inline constexpr std::uint64_t kBytesPerNode = 384;
inline constexpr std::uint64_t kBytesPerLink = 160;
// A rack or a server costs its record, its name and its index entry: 1 and 2 million empty racks,
// or servers, gave 137 and 144 B each.
inline constexpr std::uint64_t kBytesPerGroup = 160;
// The same estimate for a topology already loaded: what the memory guard of a simulation counts
// as taken before the simulation's own estimate (tools/resource_guard.hpp).
inline double estimated_bytes(const Topology& topology) {
  return static_cast<double>(topology.num_nodes()) * kBytesPerNode +
         static_cast<double>(topology.num_links()) * kBytesPerLink +
         static_cast<double>(topology.racks().size() + topology.servers().size()) * kBytesPerGroup;
}

Topology load_topology(const std::string& path, const LoadOptions& options = {});
// `file` labels diagnostics; it is not opened.
Topology parse_topology(std::string_view text, const std::string& file,
                        const LoadOptions& options = {});
Topology build_topology(const nlohmann::json& document, const std::string& file,
                        const LoadOptions& options = {});

}  // namespace collsim::topo
