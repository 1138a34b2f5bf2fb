#include <algorithm>
#include <cmath>
#include <compare>
#include <limits>
#include <tuple>

#include "topology/adjacency.hpp"
#include "topology/topology.hpp"

namespace collsim::topo {

// One backward Dijkstra seeded at every CPU: the label of a node is the best (latency, hops, CPU
// name) over the CPUs it reaches, which is the host CPU rule of topology.hpp for every GPU at
// once. Extending a path adds to the first two components only, so the order is preserved.
void finalize(Topology& topology) {
  const std::size_t n = topology.num_nodes();
  std::vector<NodeId> cpus;
  for (NodeId id = 0; id < n; ++id)
    if (topology.node(id).kind == NodeKind::cpu) cpus.push_back(id);
  std::sort(cpus.begin(), cpus.end(),
            [&](NodeId a, NodeId b) { return topology.node(a).name < topology.node(b).name; });

  using Key = std::tuple<std::uint64_t, std::uint32_t, std::uint32_t>;  // ps, hops, CPU order
  constexpr Key kInf{std::numeric_limits<std::uint64_t>::max(), 0, 0};
  std::vector<Key> best(n, kInf);
  std::vector<std::pair<Key, NodeId>> heap;
  const auto later = [](const auto& a, const auto& b) { return b.first < a.first; };
  for (std::uint32_t i = 0; i < cpus.size(); ++i) {
    best[cpus[i]] = Key{0, 0, i};
    heap.emplace_back(best[cpus[i]], cpus[i]);
  }
  std::make_heap(heap.begin(), heap.end(), later);
  const Adjacency in(topology, Adjacency::Direction::in);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const auto [key, u] = heap.back();
    heap.pop_back();
    if (best[u] < key) continue;
    for (LinkId id : in.of(u)) {
      const Link& l = topology.link(id);
      const auto ps = static_cast<std::uint64_t>(std::llround(l.latency * 1e12));
      const Key next{std::get<0>(key) + ps, std::get<1>(key) + 1, std::get<2>(key)};
      if (next < best[l.from]) {
        best[l.from] = next;
        heap.emplace_back(next, l.from);
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
  }
  topology.host_cpu_.assign(n, kNoNode);
  for (NodeId id = 0; id < n; ++id)
    if (topology.node(id).kind == NodeKind::gpu && best[id] != kInf)
      topology.host_cpu_[id] = cpus[std::get<2>(best[id])];
}

}  // namespace collsim::topo
