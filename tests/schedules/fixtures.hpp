#pragma once
// Topologies built in code for schedule tests: GPUs with uniform costs, linked only where a
// plan sends (so that a 1024-rank ring needs 1024 links, not a million), or in servers.
#include <set>
#include <string>
#include <utility>

#include "schedules/closed_form.hpp"
#include "schedules/generate.hpp"
#include "schedules/plan.hpp"
#include "topology/routing.hpp"
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
    n.reduce_traffic.fill(c.reduce_traffic);  // for every dtype
    t.add_node(n);
  }
  return t;
}

// The allreduce plan of `algorithm` in k chunks of `size` bytes over every GPU of `t`, which
// must be finalised.
inline sched::Plan plan_on(const topo::Topology& t, sched::Algorithm algorithm,
                           std::uint32_t chunks, Bytes size) {
  const topo::Router router(t);
  sched::PlanRequest r;
  r.algorithm = algorithm;
  r.chunks = chunks;
  r.size = size;
  return sched::generate(router, r);
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

namespace collsim::test {

// `servers` servers of `gpus` GPUs each (GPU i of server s is named s<s>g<i>), no links yet.
inline topo::Topology server_gpus(std::uint32_t servers, std::uint32_t gpus,
                                  const sched::UniformCosts& c, bool p2p = true,
                                  bool gpudirect = true) {
  topo::Topology t;
  for (std::uint32_t s = 0; s < servers; ++s) {
    topo::Server sv;
    sv.name = std::string("s").append(std::to_string(s));
    sv.p2p = p2p;
    sv.gpudirect_rdma = gpudirect;
    const auto id = t.add_server(sv);
    for (std::uint32_t i = 0; i < gpus; ++i) {
      topo::Node n;
      n.name = sv.name;
      n.name.append("g").append(std::to_string(i));
      n.alpha = c.alpha;
      n.launch_latency = c.launch;
      n.memory_bandwidth = c.memory_bandwidth;
      n.reduce_traffic.fill(c.reduce_traffic);  // for every dtype
      n.server = id;
      t.add_node(n);
    }
  }
  return t;
}

// Links for the pairs the plan's transfers use: `intra` costs inside a server, `inter` across.
inline void link_plan_pairs(topo::Topology& t, const sched::Plan& plan,
                            const sched::UniformCosts& intra, const sched::UniformCosts& inter) {
  std::set<std::pair<topo::NodeId, topo::NodeId>> pairs;
  for (sched::OpId id = 0; id < plan.num_ops(); ++id)
    if (plan.kind(id) == sched::OpKind::send)
      pairs.insert({plan.rank_gpu[plan.rank(id)], plan.rank_gpu[plan.peer(id)]});
  std::uint32_t index = 0;
  for (auto [a, b] : pairs) {
    const bool same = t.node(a).server == t.node(b).server;
    topo::Link l;
    l.from = a;
    l.to = b;
    l.kind = same ? topo::LinkKind::nvlink : topo::LinkKind::network;
    l.bandwidth = same ? intra.bandwidth : inter.bandwidth;
    l.latency = same ? intra.latency : inter.latency;
    l.source_index = index++;
    t.add_link(l);
  }
}

}  // namespace collsim::test
