#pragma once
// What must hold of every run of a plan, whatever the plan: each op's times follow the plan's
// order, and the engine's fast paths give what the reference run gives. Without Catch2, so that
// the simulate fuzz target (tests/fuzz/fuzz_simulate.cpp) and the test suite
// (tests/model/run_checks_test.cpp) check the same properties.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "schedules/plan.hpp"
#include "sim/engine.hpp"
#include "tests/common/cost_checks.hpp"
#include "tests/common/run_differences.hpp"
#include "tests/common/scaled_runs.hpp"
#include "topology/error.hpp"
#include "topology/loader.hpp"
#include "topology/routing.hpp"

namespace collsim::test {

struct RunChecks {
  bool ran = false;                 // the reference run finished; false when the engine refused it
  std::vector<std::string> broken;  // one line per property broken; empty when all hold
};

// The machine the fuzz target and its test run plans on: configs/hetero-rack.json, whose last
// eight GPUs (the PCIe-only servers) get an event latency, so that a wait across streams there
// is delayed, and a plan registered in windows keeps the ends of finished ops for it.
inline topo::Topology checked_machine(const std::string& source_dir) {
  topo::Topology t = topo::load_topology(source_dir + "/configs/hetero-rack.json");
  const std::vector<topo::NodeId> gpus = t.gpus();
  for (std::size_t i = gpus.size() / 2; i < gpus.size(); ++i) t.node(gpus[i]).event_latency = 2e-6;
  return t;
}

// Binds rank r of `plan` to GPU r mod the machine's GPUs: plans of more ranks share GPUs, as
// configs/one-gpu-4ranks.json does, and a plan read without a topology runs anywhere.
inline void bind_ranks(sched::Plan& plan, const topo::Topology& t) {
  const std::vector<topo::NodeId>& gpus = t.gpus();
  for (sched::RankId r = 0; r < plan.num_ranks(); ++r) plan.rank_gpu[r] = gpus[r % gpus.size()];
}

namespace run_checks_detail {

inline void check_order(const sched::Plan& plan, const sim::Result& r,
                        std::vector<std::string>& broken) {
  const auto n = static_cast<sched::OpId>(plan.num_ops());
  if (r.ops_done != n) broken.push_back(fmt::format("{} of {} ops done", r.ops_done, n));
  if (r.ops.size() != n) {
    broken.push_back(fmt::format("{} op timings recorded for {} ops", r.ops.size(), n));
    return;
  }
  double last = 0;
  // The op before each on its (rank, stream), found as the ops are read in order.
  std::vector<std::vector<sched::OpId>> previous(plan.num_ranks());
  for (sched::OpId op = 0; op < n; ++op) {
    const sim::OpTiming& t = r.ops[op];
    if (!(t.ready >= 0 && t.ready <= t.start && t.start <= t.end && std::isfinite(t.end)))
      broken.push_back(
          fmt::format("op {}: ready {}, start {}, end {}", op, t.ready, t.start, t.end));
    last = std::max(last, t.end);
    for (sched::OpId d : plan.deps(op))
      if (d < n && t.ready < r.ops[d].end)
        broken.push_back(fmt::format("op {} ready at {} before its dependency {} ended at {}", op,
                                     t.ready, d, r.ops[d].end));
    const sched::RankId rank = plan.rank(op);
    const sched::StreamId stream = plan.stream(op);
    if (rank < previous.size()) {
      std::vector<sched::OpId>& on_rank = previous[rank];
      if (on_rank.size() <= stream) on_rank.resize(stream + std::size_t{1}, sched::kNoOp);
      const sched::OpId before = on_rank[stream];
      if (before != sched::kNoOp && t.ready < r.ops[before].end)
        broken.push_back(
            fmt::format("op {} ready at {} before op {}, earlier on its stream, "
                        "ended at {}",
                        op, t.ready, before, r.ops[before].end));
      on_rank[stream] = op;
    }
    const sched::OpId q = plan.partner(op);
    if (q != sched::kNoOp && q < n &&
        !(same_double(t.start, r.ops[q].start) && same_double(t.end, r.ops[q].end)))
      broken.push_back(fmt::format("op {} ran {}..{} but its matched op {} ran {}..{}", op, t.start,
                                   t.end, q, r.ops[q].start, r.ops[q].end));
  }
  if (n > 0 && !same_double(last, r.time))
    broken.push_back(fmt::format("the run took {} s but its last op ended at {} s", r.time, last));
}

// `b` is the same run as `a` to the bit.
inline void check_same(const char* what, const sim::Result& a, const sim::Result& b,
                       std::vector<std::string>& broken) {
  for (const std::string& d : run_differences(a, b))
    broken.push_back(
        fmt::format("{}: {}, where the reference run must be matched to the bit", what, d));
}

}  // namespace run_checks_detail

// Link capacity changes or traffic of another job for runs on `t`, chosen by `knob` (the fuzz
// target takes the plan's size_bytes, which its ops never read), so that changes of capacity,
// stalled flows, links no longer tied and flows outside the plan meet the plan's own: knob % 4
// is 0 for none, 1 for a link that halves at 2 µs and recovers at 20 µs, 2 for a link that
// fails at 1 µs and recovers at 50 µs, 3 for 1 MiB between two GPUs from 1 µs on.
inline void add_disturbance(sim::Options& o, const topo::Topology& t, std::uint64_t knob) {
  const std::uint64_t pick = knob / 4;
  const auto link = static_cast<topo::LinkId>(pick % t.num_links());
  const double bandwidth = t.link(link).bandwidth;
  switch (knob % 4) {
    case 1:
      o.capacity.push_back({link, {{2e-6, bandwidth / 2}, {2e-5, bandwidth}}});
      break;
    case 2:
      o.capacity.push_back({link, {{1e-6, 0}, {5e-5, bandwidth}}});
      break;
    case 3: {
      const std::vector<topo::NodeId>& gpus = t.gpus();
      const topo::NodeId from = gpus[pick % gpus.size()];
      const topo::NodeId to = gpus[(pick / gpus.size() + 1 + pick) % gpus.size()];
      if (from != to) o.background.push_back({from, to, Bytes{1} << 20, 1e-6});
      break;
    }
    default:
      break;
  }
}

// Runs `plan` on `router` with `reference` (record_ops on, every op registered at the start: the
// reference run), then again with each fast path switched, one at a time: prefetching, windows
// and tied links, which the engine documents as exact, and regions, whose rates are the same
// to 1e-9 only; and on each of `scaled`, the router's machine in other units
// (tests/common/scaled_runs.hpp), which must give the reference run in those units to the bit.
// A plan the engine refuses (InputError) is not a finding: it returns ran = false.
inline RunChecks check_runs(const topo::Router& router, const sched::Plan& plan,
                            sim::Options reference = {},
                            const std::vector<const ScaledMachine*>& scaled = {}) {
  using run_checks_detail::check_same;
  RunChecks out;
  reference.record_ops = true;
  reference.window_ops = 0;
  sim::Result base;
  try {
    base = sim::simulate(router, plan, reference);
  } catch (const InputError&) {
    return out;
  }
  if (base.stop != sim::StopReason::finished) {
    out.broken.push_back(fmt::format("the reference run stopped: {}", sim::to_string(base.stop)));
    return out;
  }
  out.ran = true;
  run_checks_detail::check_order(plan, base, out.broken);
  check_costs(router, plan, reference, base, out.broken);
  const auto variant = [&](const char* what, auto&& change) {
    sim::Options o = reference;
    change(o);
    try {
      return sim::simulate(router, plan, o);
    } catch (const InputError& e) {
      out.broken.push_back(
          fmt::format("{}: refused what the reference run ran: {}", what, e.what()));
      return sim::Result{};
    }
  };
  check_same("prefetching always", base,
             variant("prefetching always", [](sim::Options& o) { o.prefetch_above = 0; }),
             out.broken);
  check_same("untied links", base,
             variant("untied links", [](sim::Options& o) { o.tie_links = false; }), out.broken);
  const std::size_t window = std::max<std::size_t>(4, plan.num_ops() / 8);
  check_same("windows", base, variant("windows", [&](sim::Options& o) { o.window_ops = window; }),
             out.broken);
  // Components fill more flows than regions, in another order: the same rates to 1e-9, but not
  // the same times to 1e-9. Where a flow's end moves the start of others on shared links (the
  // hetero rack's PCIe-only servers, which stage every transfer through host memory), the model
  // amplifies a last-digit difference as it would a change of input: a capacity change on such a
  // ring grows one from 1e-15 to 1e-6 within a millisecond, and copies that wait for an engine
  // turn one ulp into a whole copy (docs/cost-model.md, "Copy engines" and "How far a result can
  // be trusted"). What must hold is what does not depend on times: the same events, and both
  // runs finishing.
  const sim::Result components =
      variant("components", [](sim::Options& o) { o.sharing_regions = false; });
  if (components.stop != base.stop || components.events != base.events)
    out.broken.push_back(fmt::format("components: stopped {} after {} events, against {} after {}",
                                     sim::to_string(components.stop), components.events,
                                     sim::to_string(base.stop), base.events));
  for (const ScaledMachine* machine : scaled)
    for (const std::string& d : scaled_run_differences(*machine, plan, reference, base))
      out.broken.push_back(fmt::format("{} times the bytes in {} times the time: {}",
                                       machine->scale.bytes, machine->scale.time, d));
  return out;
}

}  // namespace collsim::test
