#include <fmt/format.h>

#include "topology/adjacency.hpp"
#include "topology/build_state.hpp"

namespace collsim::topo {
namespace {

std::vector<bool> reached_from(const Topology& t, NodeId start, Adjacency::Direction direction) {
  const Adjacency adjacency(t, direction);
  std::vector<bool> seen(t.num_nodes(), false);
  std::vector<NodeId> stack{start};
  seen[start] = true;
  while (!stack.empty()) {
    const NodeId u = stack.back();
    stack.pop_back();
    for (LinkId id : adjacency.of(u)) {
      const Link& l = t.link(id);
      const NodeId v = direction == Adjacency::Direction::out ? l.to : l.from;
      if (!seen[v]) {
        seen[v] = true;
        stack.push_back(v);
      }
    }
  }
  return seen;
}

}  // namespace

// GPUs are strongly connected iff the first GPU reaches all of them and all of them reach it.
void check_gpu_connectivity(BuildState& state) {
  const Topology& t = state.topology;
  if (t.gpus().size() < 2) return;
  const NodeId first = t.gpus().front();
  const auto forward = reached_from(t, first, Adjacency::Direction::out);
  const auto backward = reached_from(t, first, Adjacency::Direction::in);
  constexpr int kMaxReported = 20;
  int reported = 0, more = 0;
  for (NodeId g : t.gpus()) {
    if (forward[g] && backward[g]) continue;
    if (reported++ >= kMaxReported) {
      ++more;
      continue;
    }
    const char* how = !forward[g] && !backward[g] ? "is not connected to"
                      : !forward[g]               ? "cannot be reached from"
                                                  : "cannot reach";
    state.sink.error(state.where(g),
                     fmt::format("gpu \"{}\" {} gpu \"{}\"; every GPU must reach every other GPU: "
                                 "add the missing links (links are duplex unless \"duplex\": "
                                 "false)",
                                 t.node(g).name, how, t.node(first).name));
  }
  if (more > 0)
    state.sink.error("", fmt::format("... and {} more GPUs with the same problem", more));
}

}  // namespace collsim::topo
