#include "topology/adjacency.hpp"

namespace collsim::topo {

Adjacency::Adjacency(const Topology& topology, Direction direction)
    : begin_(topology.num_nodes() + 1, 0), links_(topology.num_links()) {
  const auto end_of = [&](const Link& l) { return direction == Direction::out ? l.from : l.to; };
  for (const Link& l : topology.links()) ++begin_[end_of(l) + 1];
  for (std::size_t i = 1; i < begin_.size(); ++i) begin_[i] += begin_[i - 1];
  std::vector<std::uint32_t> next(begin_.begin(), begin_.end() - 1);
  for (LinkId id = 0; id < topology.num_links(); ++id)
    links_[next[end_of(topology.link(id))]++] = id;
}

}  // namespace collsim::topo
