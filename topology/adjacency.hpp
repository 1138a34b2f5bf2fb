#pragma once
// Links grouped by their source (or target) node in compressed form, for graph searches that must
// touch only the links of the nodes they visit.
#include <cstdint>
#include <span>
#include <vector>

#include "topology/topology.hpp"

namespace collsim::topo {

class Adjacency {
 public:
  enum class Direction : std::uint8_t { out, in };
  Adjacency(const Topology& topology, Direction direction);
  // Links leaving (out) or entering (in) `node`, in LinkId order.
  std::span<const LinkId> of(NodeId node) const {
    return {links_.data() + begin_[node], links_.data() + begin_[node + 1]};
  }

 private:
  std::vector<std::uint32_t> begin_;
  std::vector<LinkId> links_;
};

}  // namespace collsim::topo
