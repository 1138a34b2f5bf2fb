#pragma once
// Topologies built in code for schedule tests: GPUs with uniform costs, linked only where a
// plan sends (so that a 1024-rank ring needs 1024 links, not a million), or in servers.
#include <set>
#include <string>
#include <utility>

#include "schedules/closed_form.hpp"
#include "schedules/plan.hpp"
#include "topology/topology.hpp"

namespace collsim::test {

inline topo::Topology uniform_gpus(std::uint32_t p, const sched::UniformCosts& c) {
  topo::Topology t;
  for (std::uint32_t i = 0; i < p; ++i) {
    topo::Node n;
    n.name = "gpu" + std::to_string(i);
    n.kind = topo::NodeKind::gpu;
    n.alpha = c.alpha;
    n.launch_latency = c.launch;
    n.memory_bandwidth = c.memory_bandwidth;
    t.add_node(n);
  }
  return t;
}

// Adds one link, with the uniform bandwidth and latency, for each ordered GPU pair the plan's
// transfers use.
inline void link_plan_pairs(topo::Topology& t, const sched::Plan& plan,
                            const sched::UniformCosts& c) {
  std::set<std::pair<topo::NodeId, topo::NodeId>> pairs;
  for (sched::OpId id = 0; id < plan.num_ops(); ++id)
    if (plan.kind(id) == sched::OpKind::send)
      pairs.insert({plan.rank_gpu[plan.rank(id)], plan.rank_gpu[plan.peer(id)]});
  std::uint32_t index = 0;
  for (auto [a, b] : pairs) {
    topo::Link l;
    l.from = a;
    l.to = b;
    l.kind = topo::LinkKind::nvlink;
    l.bandwidth = c.bandwidth;
    l.latency = c.latency;
    l.source_index = index++;
    t.add_link(l);
  }
}

}  // namespace collsim::test
