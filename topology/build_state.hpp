#pragma once
// State shared by the parts of the loader while a Topology is being built from a document.
// Internal to topology/.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "topology/error.hpp"
#include "topology/topology.hpp"

namespace collsim::topo {

// Where a node came from, for messages: "/nodes/3", "/servers/2" (a template instance) or
// "/fabric". Kept compact because a templated file may expand to hundreds of thousands of nodes.
struct NodeOrigin {
  enum class Section : std::uint8_t { nodes, servers, fabric };
  Section section = Section::nodes;
  std::uint32_t index = 0;
};

struct BuildState {
  explicit BuildState(DiagnosticSink& s) : sink(s) {}
  Topology topology;
  DiagnosticSink& sink;
  std::vector<NodeOrigin> origin;  // per node
  std::uint32_t next_source_index = 0;

  std::string where(NodeId node) const;
  NodeId add_node(Node node, NodeOrigin from);
  // One physical link of the file: two directed Links when duplex, one otherwise.
  void add_link(NodeId from, NodeId to, LinkKind kind, double bandwidth, double latency,
                bool duplex);
};

// The "fabric" section (fabric.cpp): leaf and spine switches joining the servers' NICs.
void build_fabric(const nlohmann::json& fabric, BuildState& state);
// Nodes and directed links the fabric section adds to `servers` servers, an upper bound read
// from its numbers alone, before anything is expanded; malformed values count as 1.
struct ExpansionSize {
  double nodes = 0;
  double links = 0;
  double groups = 0;  // racks and servers
};
ExpansionSize estimate_fabric(const nlohmann::json& fabric, double servers);
// Every GPU must reach every other GPU (validate.cpp).
void check_gpu_connectivity(BuildState& state);

}  // namespace collsim::topo
