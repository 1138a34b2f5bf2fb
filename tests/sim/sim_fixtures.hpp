#pragma once
// Small hand-built topologies and plans for the engine tests. Every test states the formula its
// expected number comes from, so these helpers only build, they never compute answers.
#include <string>

#include "schedules/plan.hpp"
#include "sim/engine.hpp"
#include "tests/common/op_builders.hpp"
#include "topology/routing.hpp"
#include "topology/topology.hpp"

namespace collsim::sim::testing {

inline topo::NodeId add_gpu(topo::Topology& t, const std::string& name) {
  topo::Node n;
  n.name = name;
  n.kind = topo::NodeKind::gpu;
  return t.add_node(n);
}

inline topo::NodeId add_node(topo::Topology& t, const std::string& name, topo::NodeKind kind) {
  topo::Node n;
  n.name = name;
  n.kind = kind;
  return t.add_node(n);
}

// Both directions of a link with the same bandwidth and latency; returns the a->b direction
// (b->a is the id after it).
inline topo::LinkId add_duplex(topo::Topology& t, topo::NodeId a, topo::NodeId b, double bandwidth,
                               double latency, topo::LinkKind kind = topo::LinkKind::nvlink) {
  const auto id = t.add_link(topo::Link{a, b, kind, bandwidth, latency, 0});
  t.add_link(topo::Link{b, a, kind, bandwidth, latency, 0});
  return id;
}

// The engine tests' ops read and write offset 0 of fixed buffers: only sizes and timing matter.
inline sched::Op send_op(sched::RankId rank, sched::RankId peer, Bytes bytes,
                         sched::StreamId stream = 0) {
  return test::send_op(rank, peer, bytes, {sched::BufferId::input, 0}, stream);
}

inline sched::Op recv_op(sched::RankId rank, sched::RankId peer, Bytes bytes,
                         sched::StreamId stream = 0) {
  return test::recv_op(rank, peer, bytes, {sched::BufferId::scratch, 0}, stream);
}

using test::timed_op;

inline sched::Op copy_op(sched::RankId rank, sched::BufferId src, sched::BufferId dst, Bytes bytes,
                         sched::StreamId stream = 0) {
  return test::copy_op(rank, bytes, {src, 0}, {dst, 0}, stream);
}

inline sched::Op reduce_op(sched::RankId rank, Bytes bytes, sched::StreamId stream = 0) {
  return test::reduce_op(rank, bytes, {sched::BufferId::input, 0}, {sched::BufferId::scratch, 0},
                         {sched::BufferId::output, 0}, stream);
}

// A matched send/recv pair; returns {send, recv}.
struct Pair {
  sched::OpId send;
  sched::OpId recv;
};
inline Pair add_transfer(sched::Plan& plan, sched::RankId from, sched::RankId to, Bytes bytes,
                         std::initializer_list<sched::OpId> send_deps = {},
                         std::initializer_list<sched::OpId> recv_deps = {},
                         sched::StreamId stream = 0) {
  const auto s = plan.add(send_op(from, to, bytes, stream), send_deps);
  const auto r = plan.add(recv_op(to, from, bytes, stream), recv_deps);
  plan.match(s, r);
  return {s, r};
}

}  // namespace collsim::sim::testing
