#pragma once
// Every shared thing a flow can drain through, numbered densely so the engine indexes flat arrays:
//   [0, L)        one direction of each link (topology LinkId)
//   [L, L+N)      the memory bandwidth of node n (used by GPUs: d2d copies, reductions)
//   [L+N, L+2N)   the host memcpy bandwidth of node n (used by CPUs)
// where L is the number of directed links and N the number of nodes.
#include <cstdint>
#include <string>

#include "topology/topology.hpp"

namespace collsim::sim {

using ResourceId = std::uint32_t;

enum class ResourceKind : std::uint8_t { link, memory, memcpy };

class ResourceMap {
 public:
  ResourceMap() = default;
  explicit ResourceMap(const topo::Topology& t)
      : links_(static_cast<std::uint32_t>(t.num_links())),
        nodes_(static_cast<std::uint32_t>(t.num_nodes())) {}

  std::uint32_t size() const { return links_ + 2 * nodes_; }
  ResourceId link(topo::LinkId l) const { return l; }
  ResourceId memory(topo::NodeId n) const { return links_ + n; }
  ResourceId memcpy(topo::NodeId n) const { return links_ + nodes_ + n; }

  ResourceKind kind(ResourceId r) const {
    return r < links_ ? ResourceKind::link
                      : (r < links_ + nodes_ ? ResourceKind::memory : ResourceKind::memcpy);
  }
  // The link of a link resource, or the node of a memory/memcpy resource.
  std::uint32_t index(ResourceId r) const {
    return r < links_ ? r : (r < links_ + nodes_ ? r - links_ : r - links_ - nodes_);
  }
  // Capacity in bytes/s as the topology states it (kUnlimited when absent).
  double capacity(const topo::Topology& t, ResourceId r) const;
  // "gpu0->nvswitch0", "gpu3 memory", "cpu0 memcpy": for traces and reports.
  std::string name(const topo::Topology& t, ResourceId r) const;

 private:
  std::uint32_t links_ = 0;
  std::uint32_t nodes_ = 0;
};

}  // namespace collsim::sim
