#pragma once
// The same run in other units. A machine whose every bandwidth is multiplied by b / t and every
// duration by t, running a plan whose every size is multiplied by b, must give the first run's
// times multiplied by t and its bytes by b. With b and t powers of two every product is exact
// and every sum, ratio and comparison the engine makes is the first run's scaled without
// rounding, so the runs must agree to the bit: a threshold in seconds or bytes that does not
// scale with the run, or a unit mixed up (a latency added to a size), shows as a difference.
// Without Catch2, so that the simulate fuzz target checks it too (tests/common/run_checks.hpp).
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "schedules/plan.hpp"
#include "sim/engine.hpp"
#include "tests/common/run_differences.hpp"
#include "topology/error.hpp"
#include "topology/routing.hpp"
#include "topology/topology.hpp"

namespace collsim::test {

struct Scale {
  std::uint32_t bytes = 1;  // sizes, of ops and of background flows
  double time = 1;          // durations: latencies, α, event latency, compute, trace times
  double bandwidth() const { return static_cast<double>(bytes) / time; }
};

// Twice the bytes over twice the bandwidth: the same times.
inline constexpr Scale kTwiceTheBytes{2, 1};
// Every duration twice as long and every bandwidth half: twice the times.
inline constexpr Scale kTwiceTheTime{1, 2};

inline topo::Topology scaled(topo::Topology t, Scale s) {
  const double bw = s.bandwidth();
  for (topo::NodeId n = 0; n < t.num_nodes(); ++n) {
    topo::Node& node = t.node(n);
    node.memory_bandwidth *= bw;
    node.memcpy_bandwidth *= bw;
    node.alpha *= s.time;
    node.launch_latency *= s.time;
    node.event_latency *= s.time;
  }
  for (topo::LinkId l = 0; l < t.num_links(); ++l) {
    t.link(l).bandwidth *= bw;
    t.link(l).latency *= s.time;
  }
  topo::finalize(t);
  return t;
}

inline sched::Plan scaled(const sched::Plan& plan, Scale s) {
  sched::Plan out;
  out.collective = plan.collective;
  out.algorithm = plan.algorithm;
  out.dtype = plan.dtype;
  out.size = plan.size * s.bytes;
  out.chunks = plan.chunks;
  out.root = plan.root;
  out.host_memory = plan.host_memory;
  out.rank_gpu = plan.rank_gpu;
  out.rotation = plan.rotation;
  out.waits_on_finished = plan.waits_on_finished;
  const auto n = static_cast<sched::OpId>(plan.num_ops());
  for (sched::OpId id = plan.first_op(); id < n; ++id) {
    sched::Op op = plan.op(id);
    op.bytes *= s.bytes;
    op.src.offset *= s.bytes;
    op.src2.offset *= s.bytes;
    op.dst.offset *= s.bytes;
    op.seconds *= s.time;
    out.add(op, plan.deps(id));
  }
  for (sched::OpId id = plan.first_op(); id < n; ++id)
    if (plan.kind(id) == sched::OpKind::send && plan.partner(id) != sched::kNoOp)
      out.match(id, plan.partner(id));
  return out;
}

inline sim::Options scaled(sim::Options o, Scale s) {
  for (sim::CapacityTrace& trace : o.capacity)
    for (sim::CapacityChange& c : trace.changes) {
      c.time *= s.time;
      c.bandwidth *= s.bandwidth();
    }
  for (sim::BackgroundFlow& b : o.background) {
    b.bytes *= s.bytes;
    b.start *= s.time;
  }
  o.max_time *= s.time;
  return o;
}

// The machine `t` in the units of `s`, with its router: built once, as a router's routes are
// (a fuzz target keeps one for every input). Not movable: the router holds the topology.
struct ScaledMachine {
  ScaledMachine(const topo::Topology& t, Scale s, topo::RoutingOptions routing = {})
      : scale(s), topology(scaled(t, s)), router(topology, routing) {}
  ScaledMachine(const ScaledMachine&) = delete;
  ScaledMachine& operator=(const ScaledMachine&) = delete;
  Scale scale;
  topo::Topology topology;
  topo::Router router;
};

// One line per field of `b` that is not `a`'s in the units of `s`; empty when b is a scaled to
// the bit. Utilisation is a ratio of bytes to capacity × time, the same in any units.
inline std::vector<std::string> scaled_differences(const sim::Result& a, const sim::Result& b,
                                                   Scale s) {
  std::vector<std::string> out;
  const double bytes = s.bytes;
  const auto same_times = [&](double x, double y) { return same_double(x * s.time, y); };
  if (a.stop != b.stop)
    out.push_back(
        fmt::format("stopped: {} against {}", sim::to_string(b.stop), sim::to_string(a.stop)));
  if (!same_times(a.time, b.time))
    out.push_back(fmt::format("time {} against {} × {}", b.time, a.time, s.time));
  if (a.events != b.events) out.push_back(fmt::format("{} events against {}", b.events, a.events));
  if (a.flows != b.flows) out.push_back(fmt::format("{} flows against {}", b.flows, a.flows));
  const sim::SharingStats& x = a.sharing;
  const sim::SharingStats& y = b.sharing;
  if (x.regions != y.regions || x.refills != y.refills || x.fallbacks != y.fallbacks ||
      x.components != y.components || x.instants != y.instants || x.filled != y.filled ||
      x.held != y.held)
    out.emplace_back("bandwidth sharing's counts");
  bool links_same =
      a.link_bytes.size() == b.link_bytes.size() && a.link_busy.size() == b.link_busy.size();
  for (std::size_t i = 0; links_same && i < a.link_bytes.size(); ++i)
    links_same = a.link_bytes[i] * s.bytes == b.link_bytes[i];
  for (std::size_t i = 0; links_same && i < a.link_busy.size(); ++i)
    links_same = same_times(a.link_busy[i], b.link_busy[i]);
  if (!links_same) out.emplace_back("link bytes or busy times");
  bool resources_same = a.resources.size() == b.resources.size();
  for (std::size_t i = 0; resources_same && i < a.resources.size(); ++i) {
    const sim::ResourceUsage& u = a.resources[i];
    const sim::ResourceUsage& v = b.resources[i];
    resources_same =
        u.index == v.index && u.kind == v.kind && same_times(u.busy_time, v.busy_time) &&
        same_double(u.bytes * bytes, v.bytes) && same_double(u.utilisation, v.utilisation);
  }
  if (!resources_same) out.emplace_back("resource bytes, busy times or utilisation");
  bool engines_same = a.copy_engines.size() == b.copy_engines.size();
  for (std::size_t i = 0; engines_same && i < a.copy_engines.size(); ++i)
    engines_same = a.copy_engines[i].gpu == b.copy_engines[i].gpu &&
                   same_times(a.copy_engines[i].busy_time, b.copy_engines[i].busy_time) &&
                   same_times(a.copy_engines[i].max_wait, b.copy_engines[i].max_wait);
  if (!engines_same) out.emplace_back("copy engines' busy or waiting times");
  bool background_same = a.background_end.size() == b.background_end.size();
  for (std::size_t i = 0; background_same && i < a.background_end.size(); ++i)
    background_same = same_times(a.background_end[i], b.background_end[i]);
  if (!background_same) out.emplace_back("background flows' ends");
  std::size_t ops_differing = a.ops.size() == b.ops.size() ? 0 : a.ops.size();
  for (std::size_t i = 0; a.ops.size() == b.ops.size() && i < a.ops.size(); ++i)
    ops_differing += !same_times(a.ops[i].ready, b.ops[i].ready) ||
                     !same_times(a.ops[i].start, b.ops[i].start) ||
                     !same_times(a.ops[i].end, b.ops[i].end);
  if (ops_differing != 0) out.push_back(fmt::format("times of {} ops", ops_differing));
  return out;
}

// Runs `plan` with `options` on `machine` and returns how the result differs from `base`, the
// run on the machine it scales, in its units; a run the engine refuses is a difference too.
inline std::vector<std::string> scaled_run_differences(const ScaledMachine& machine,
                                                       const sched::Plan& plan,
                                                       const sim::Options& options,
                                                       const sim::Result& base) {
  sim::Result r;
  try {
    r = sim::simulate(machine.router, scaled(plan, machine.scale), scaled(options, machine.scale));
  } catch (const InputError& e) {
    return {fmt::format("refused what the run it scales ran: {}", e.what())};
  }
  return scaled_differences(base, r, machine.scale);
}

}  // namespace collsim::test
