#pragma once
// What a run's recorded times and loads must be under the cost model's rules
// (docs/cost-model.md, "When an op runs" and "Flows and bandwidth sharing"), computed from the
// plan, the topology and the run's own op times, independently of how the engine got them:
//
// - an op is ready exactly when the last op before it (dependency or stream predecessor) has
//   ended, plus its GPU's event latency where that op's work ran on another (rank, stream);
// - a transfer starts exactly when both its ends are ready; a reduction, a compute, a delay and
//   a host memcpy at once; a copy on a GPU of unlimited copy engines at once;
// - a compute or delay ends exactly its seconds after it starts; no other op ends sooner than it
//   would alone on the fabric (latencies, then its bytes at the narrowest bandwidth it crosses);
// - on a GPU of c copy engines, at most c copies run at once, copies start in the order they
//   became ready (lowest op id first among equals), and a copy waits only while all c engines
//   are busy;
// - every limited resource carries the bytes of the flows that cross it, times their weights,
//   never more than its capacity over the time it was busy, and is busy exactly while one of
//   them drains; each GPU's copy engines are reported held as long as its copies ran, and its
//   longest wait is its copies' longest.
//
// Exact where the model's arithmetic is a maximum or one sum (ready and start times, compute
// ends); to 1e-9 relative where it integrates rates. Without Catch2, like run_checks.hpp,
// which runs these on the reference run of every plan it checks.
#include <fmt/format.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "schedules/plan.hpp"
#include "sim/engine.hpp"
#include "sim/resources.hpp"
#include "tests/common/run_differences.hpp"
#include "topology/routing.hpp"

namespace collsim::test {

namespace cost_checks_detail {

constexpr double kMargin = 1e-9;

// `got` is at least `bound`, to the model's margin and some ulps of the time it ends at (a flow
// shared with others banks its bytes at each re-share, each time rounded).
inline bool at_least(double got, double bound, double at) {
  return got >= bound - kMargin * bound - 64 * DBL_EPSILON * at;
}

// Two durations equal to the model's margin and a few ulps of the time they end at.
inline bool close_time(double a, double b, double at) {
  return std::abs(a - b) <= kMargin * std::max(a, b) + 8 * DBL_EPSILON * at;
}

struct Copy {
  sched::OpId op;
  sim::OpTiming t;
};

// The copy-engine rules for the copies of one GPU of `engines` engines, in O(n log n): a fuzz
// input may put thousands of copies on one GPU.
inline void check_engines(std::vector<Copy> copies, std::uint32_t engines, const std::string& gpu,
                          std::vector<std::string>& broken) {
  // Copies running at t, start <= t < end: a copy that ends hands its engine over at that time.
  std::vector<double> starts, ends;
  for (const Copy& c : copies) {
    starts.push_back(c.t.start);
    ends.push_back(c.t.end);
  }
  std::sort(starts.begin(), starts.end());
  std::sort(ends.begin(), ends.end());
  const auto running_at = [&](double t) {
    return static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), t) -
                                    starts.begin()) -
           static_cast<std::size_t>(std::upper_bound(ends.begin(), ends.end(), t) - ends.begin());
  };
  // The fewest running at any end in [ends[a], ends[b]): a sparse table of minima over the ends.
  std::vector<std::vector<std::size_t>> fewest(1);
  for (const double e : ends) fewest[0].push_back(running_at(e));
  for (std::size_t w = 1; 2 * w <= ends.size(); w *= 2) {
    const std::vector<std::size_t>& half = fewest.back();
    std::vector<std::size_t> level(ends.size() - 2 * w + 1);
    for (std::size_t i = 0; i < level.size(); ++i) level[i] = std::min(half[i], half[i + w]);
    fewest.push_back(std::move(level));
  }
  const auto fewest_between = [&](std::size_t a, std::size_t b) {  // a < b
    std::size_t k = 0;
    while (std::size_t{2} << k <= b - a) ++k;
    return std::min(fewest[k][a], fewest[k][b - (std::size_t{1} << k)]);
  };
  std::sort(copies.begin(), copies.end(), [](const Copy& a, const Copy& b) {
    return a.t.ready != b.t.ready ? a.t.ready < b.t.ready : a.op < b.op;
  });
  for (std::size_t i = 0; i < copies.size(); ++i) {
    const Copy& c = copies[i];
    if (running_at(c.t.start) > engines)
      broken.push_back(fmt::format("{} runs {} copies at {} s, with {} copy engines", gpu,
                                   running_at(c.t.start), c.t.start, engines));
    if (i > 0 && copies[i - 1].t.start > c.t.start)
      broken.push_back(fmt::format(
          "on {} copy op {} (ready at {} s) started at {} s, before op {}, ready at {} s, "
          "started at {} s",
          gpu, c.op, c.t.ready, c.t.start, copies[i - 1].op, copies[i - 1].t.ready,
          copies[i - 1].t.start));
    if (c.t.start == c.t.ready) continue;
    // It waited: all engines were taken when it became ready and after every copy that ended
    // while it waited (the running count falls only there).
    std::size_t least = running_at(c.t.ready);
    const auto a = static_cast<std::size_t>(std::lower_bound(ends.begin(), ends.end(), c.t.ready) -
                                            ends.begin());
    const auto b = static_cast<std::size_t>(std::lower_bound(ends.begin(), ends.end(), c.t.start) -
                                            ends.begin());
    if (a < b) least = std::min(least, fewest_between(a, b));
    if (least < engines)
      broken.push_back(fmt::format(
          "on {} copy op {} waited from {} s to {} s, while only {} of {} engines ran at times",
          gpu, c.op, c.t.ready, c.t.start, least, engines));
  }
}

}  // namespace cost_checks_detail

// Appends to `broken` one line per rule that `r`, a finished run of `plan` with `options` on
// `router` with every op recorded, breaks. Plans of one rank per orbit are not checked.
inline void check_costs(const topo::Router& router, const sched::Plan& plan,
                        const sim::Options& options, const sim::Result& r,
                        std::vector<std::string>& broken) {
  using namespace cost_checks_detail;
  using sched::OpId;
  using sched::OpKind;
  const topo::Topology& topo = router.topology();
  const auto n = static_cast<OpId>(plan.num_ops());
  if (plan.rotation != 0 || r.stop != sim::StopReason::finished || r.ops.size() != n ||
      plan.first_op() != 0)
    return;
  const sim::ResourceMap map(topo);
  // Each link's most capacity over the run: its own, or more where a trace raises it.
  std::vector<double> most(topo.num_links());
  std::vector<bool> traced(map.size(), false);
  for (topo::LinkId l = 0; l < topo.num_links(); ++l) most[l] = topo.link(l).bandwidth;
  for (const sim::CapacityTrace& trace : options.capacity) {
    traced[map.link(trace.link)] = true;
    for (const sim::CapacityChange& c : trace.changes)
      most[trace.link] = std::max(most[trace.link], c.bandwidth);
  }
  const auto capacity = [&](sim::ResourceId id) {
    return map.kind(id) == sim::ResourceKind::link ? most[map.index(id)] : map.capacity(topo, id);
  };
  const auto gpu_of = [&](sched::RankId rank) { return plan.rank_gpu[rank]; };
  const auto memory_of = [&](sched::RankId rank) {
    const topo::Node& g = topo.node(gpu_of(rank));
    return map.memory(g.memory_owner != topo::kNoNode ? g.memory_owner : gpu_of(rank));
  };
  const auto endpoint = [&](sched::RankId rank, sched::BufferId b) {
    return sched::memory_of(b) == sched::Memory::host ? topo.host_cpu(gpu_of(rank)) : gpu_of(rank);
  };

  // Every flow of the run: its op (or background flow), when it began, the latency before its
  // bandwidth phase, its bytes and the limited resources it drains through, with weights.
  struct Use {
    sim::ResourceId resource;
    double weight;
  };
  struct Flow {
    const char* what;
    std::size_t index;  // op id, or background flow
    double start = 0, end = 0, latency = 0;
    Bytes bytes = 0;
    bool finished = true;
    std::vector<Use> uses;
    double begins() const { return start + latency; }
    // Its time alone on the fabric: the latency, then its bytes at the narrowest bandwidth.
    double alone(const std::function<double(sim::ResourceId)>& cap) const {
      double rate = kUnlimited;
      for (const Use& u : uses) rate = std::min(rate, cap(u.resource) / u.weight);
      return latency + (bytes == 0 ? 0.0 : static_cast<double>(bytes) / rate);
    }
  };
  std::vector<Flow> flows;
  const auto limited = [&](Flow& f, sim::ResourceId id, double weight) {
    if (capacity(id) < kUnlimited) f.uses.push_back(Use{id, weight});
  };
  const auto route = [&](Flow& f, const topo::Route& path) {
    f.latency += path.latency;
    for (const topo::LinkId l : path.links) limited(f, map.link(l), 1.0);
  };

  std::vector<std::vector<OpId>> previous(plan.num_ranks());  // by rank, then stream
  std::vector<std::vector<Copy>> waiting_copies(topo.num_nodes());
  // By GPU, for its copies (not host memcpys): engine-seconds held, the longest wait, how many.
  struct Engines {
    double busy = 0, longest_wait = 0;
    std::size_t copies = 0;
  };
  std::vector<Engines> engines(topo.num_nodes());
  for (OpId op = 0; op < n; ++op) {
    const sim::OpTiming& t = r.ops[op];
    const sched::Plan::Fields f = plan.fields(op);
    if (f.rank >= plan.num_ranks()) return;
    const double event_latency = topo.node(gpu_of(f.rank)).event_latency;
    // Ready: the last edge in, seen through an event where the work ran on another stream.
    double ready = 0;
    const auto edge = [&](OpId from) {
      if (from >= n) return;
      const OpId ran = plan.kind(from) == OpKind::send ? plan.partner(from) : from;
      const bool same_stream = ran < n && plan.rank(ran) == f.rank && plan.stream(ran) == f.stream;
      const double end = r.ops[from].end;
      ready = std::max(ready, event_latency > 0 && !same_stream ? end + event_latency : end);
    };
    for (const OpId d : f.deps) edge(d);
    std::vector<OpId>& on_rank = previous[f.rank];
    if (on_rank.size() <= f.stream) on_rank.resize(f.stream + std::size_t{1}, sched::kNoOp);
    if (on_rank[f.stream] != sched::kNoOp) edge(on_rank[f.stream]);
    on_rank[f.stream] = op;
    if (!same_double(t.ready, ready))
      broken.push_back(fmt::format(
          "op {} ready at {} s, not when the last op before it allows, {} s", op, t.ready, ready));
    const auto starts_when_ready = [&](const char* what) {
      if (!same_double(t.start, t.ready))
        broken.push_back(
            fmt::format("{} op {} ready at {} s started at {} s", what, op, t.ready, t.start));
    };
    Flow flow{"", op, t.start, t.end, 0, f.bytes, true, {}};
    switch (f.kind) {
      case OpKind::send: {
        if (f.partner >= n) continue;
        const sim::OpTiming& recv = r.ops[f.partner];
        if (!same_double(t.start, std::max(t.ready, recv.ready)))
          broken.push_back(fmt::format(
              "transfer {} -> {} started at {} s, not when both ends were ready ({} and {} s)", op,
              f.partner, t.start, t.ready, recv.ready));
        flow.what = "transfer";
        flow.latency = topo.node(gpu_of(f.rank)).alpha;
        route(flow, router.route(endpoint(f.rank, f.src_buffer),
                                 endpoint(f.peer, plan.dst(f.partner).buffer),
                                 sim::transfer_flow_key(f.rank, f.peer)));
        break;
      }
      case OpKind::recv:
        continue;  // its send's flow
      case OpKind::compute:
      case OpKind::delay:
        starts_when_ready("compute or delay");
        if (!same_double(t.end, t.start + f.seconds))
          broken.push_back(
              fmt::format("op {} of {} s ran from {} s to {} s", op, f.seconds, t.start, t.end));
        continue;
      case OpKind::reduce: {
        starts_when_ready("reduction");
        const topo::Node& g = topo.node(gpu_of(f.rank));
        flow.what = "reduction";
        flow.latency = g.launch_latency;
        limited(flow, memory_of(f.rank), g.reduce_traffic.at(static_cast<std::size_t>(plan.dtype)));
        break;
      }
      case OpKind::copy: {
        const topo::NodeId gpu = gpu_of(f.rank);
        const topo::NodeId cpu = topo.host_cpu(gpu);
        const sched::CopyKind kind = sched::copy_kind(f.src_buffer, f.dst_buffer);
        if (kind == sched::CopyKind::host) {
          starts_when_ready("host memcpy");
          flow.what = "host memcpy";
          if (cpu != topo::kNoNode) limited(flow, map.memcpy(cpu), 1.0);
          break;
        }
        engines[gpu].busy += t.end - t.start;
        engines[gpu].longest_wait = std::max(engines[gpu].longest_wait, t.start - t.ready);
        ++engines[gpu].copies;
        if (topo.node(gpu).copy_engines == 0)
          starts_when_ready("copy on a GPU of unlimited copy engines");
        else
          waiting_copies[gpu].push_back(Copy{op, t});
        if (kind == sched::CopyKind::d2d) {
          flow.what = "device copy";
          limited(flow, memory_of(f.rank), 2.0);
          break;
        }
        if (cpu == topo::kNoNode) continue;
        flow.what = "host copy";
        const bool d2h = kind == sched::CopyKind::d2h;
        route(flow, router.route(d2h ? gpu : cpu, d2h ? cpu : gpu, 0));
        if (plan.host_memory == sched::HostMemory::pageable) limited(flow, map.memcpy(cpu), 1.0);
        break;
      }
    }
    flows.push_back(std::move(flow));
  }
  for (topo::NodeId g = 0; g < topo.num_nodes(); ++g)
    if (!waiting_copies[g].empty())
      check_engines(std::move(waiting_copies[g]), topo.node(g).copy_engines, topo.node(g).name,
                    broken);
  for (std::size_t i = 0; i < options.background.size(); ++i) {
    const sim::BackgroundFlow& b = options.background[i];
    const double end = i < r.background_end.size() ? r.background_end[i] : kUnlimited;
    Flow flow{"background flow", i, b.start, end, 0, b.bytes, end < kUnlimited, {}};
    route(flow, router.route(b.from, b.to));  // the pair's first shortest path, ECMP or not
    flows.push_back(std::move(flow));
  }

  // Durations: none shorter than alone; exactly that where no flow shared a resource with it
  // during its bandwidth phase, and no trace changed one. Each resource's flows in order of
  // their phases' begins: one overlaps another when an earlier one ends after it begins, or the
  // next begins before it ends.
  std::vector<std::vector<std::size_t>> on(map.size());  // flows by resource, by begin
  for (std::size_t i = 0; i < flows.size(); ++i)
    if (flows[i].bytes > 0)
      for (const Use& u : flows[i].uses) on[u.resource].push_back(i);
  std::vector<bool> shared(flows.size(), false);
  for (sim::ResourceId id = 0; id < map.size(); ++id) {
    std::vector<std::size_t>& list = on[id];
    std::sort(list.begin(), list.end(),
              [&](std::size_t a, std::size_t b) { return flows[a].begins() < flows[b].begins(); });
    double reach = -kUnlimited;  // the latest end of the flows before
    for (std::size_t k = 0; k < list.size(); ++k) {
      const Flow& f = flows[list[k]];
      if (traced[id] || reach > f.begins() ||
          (k + 1 < list.size() && flows[list[k + 1]].begins() < f.end))
        shared[list[k]] = true;
      reach = std::max(reach, f.end);
    }
  }
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const Flow& f = flows[i];
    if (!f.finished) continue;
    const double alone = f.alone(capacity);
    const double took = f.end - f.start;
    if (!at_least(took, alone, f.end))
      broken.push_back(
          fmt::format("{} {} took {} s, less than {} s alone", f.what, f.index, took, alone));
    if (!shared[i] && !close_time(took, alone, f.end))
      broken.push_back(fmt::format("{} {} took {} s, alone on its resources, not {} s", f.what,
                                   f.index, took, alone));
  }

  // What the run reports of copy engines: every GPU that ran copies, with the engine time they
  // held and the longest any waited.
  for (const sim::CopyEngineUsage& u : r.copy_engines) {
    if (u.gpu >= topo.num_nodes() || engines[u.gpu].copies == 0) {
      broken.push_back(fmt::format("copy engines reported for node {}, which ran no copy", u.gpu));
      continue;
    }
    const Engines& e = engines[u.gpu];
    const double rounding = 4 * DBL_EPSILON * r.time * static_cast<double>(e.copies);
    if (std::abs(u.busy_time - e.busy) > kMargin * e.busy + rounding ||
        !same_double(u.max_wait, e.longest_wait))
      broken.push_back(fmt::format(
          "{}'s copy engines reported {} s held and {} s the longest wait; its copies ran {} s "
          "and waited {} s at most",
          topo.node(u.gpu).name, u.busy_time, u.max_wait, e.busy, e.longest_wait));
    engines[u.gpu].copies = 0;
  }
  for (topo::NodeId g = 0; g < topo.num_nodes(); ++g)
    if (engines[g].copies != 0)
      broken.push_back(
          fmt::format("{} ran copies but no copy engine use is reported", topo.node(g).name));

  // Loads: weight × bytes by resource, of the flows that finished, and of those still running at
  // the end (background flows), which have carried part of theirs.
  std::vector<double> carried(map.size(), 0.0);
  std::vector<double> unfinished(map.size(), 0.0);
  for (const Flow& f : flows)
    for (const Use& u : f.uses)
      (f.finished ? carried : unfinished)[u.resource] += u.weight * static_cast<double>(f.bytes);
  std::vector<const sim::ResourceUsage*> usage(map.size(), nullptr);
  for (const sim::ResourceUsage& u : r.resources) {
    const sim::ResourceId id = u.kind == sim::ResourceKind::link     ? map.link(u.index)
                               : u.kind == sim::ResourceKind::memory ? map.memory(u.index)
                                                                     : map.memcpy(u.index);
    if (id < map.size()) usage[id] = &u;
  }
  for (sim::ResourceId id = 0; id < map.size(); ++id) {
    const double cap = capacity(id);
    if (!(cap < kUnlimited)) continue;
    const double bytes = usage[id] ? usage[id]->bytes : 0.0;
    const double busy = usage[id] ? usage[id]->busy_time : 0.0;
    // Times late in a run are rounded to its ulps, which for a flow of picoseconds is far more
    // than 1e-9 of its duration: each flow's interval, and the bytes drained over it, may be
    // off by that much.
    const double rounding = 4 * DBL_EPSILON * r.time * static_cast<double>(on[id].size() + 1);
    const double slack = cap * rounding + 1e-6;
    const double least = carried[id], at_most = carried[id] + unfinished[id];
    if (bytes < least * (1 - kMargin) - slack || bytes > at_most * (1 + kMargin) + slack)
      broken.push_back(fmt::format(
          "{} carried {} bytes, where its flows hold {} ({} of them of background flows still "
          "running at the end)",
          map.name(topo, id), bytes, at_most, unfinished[id]));
    // Busy: the union of the bandwidth phases of the flows on it (all ended by the run's end).
    if (unfinished[id] == 0) {
      double union_length = 0, reach = 0;
      for (const std::size_t i : on[id]) {  // by begin
        if (flows[i].end <= reach) continue;
        union_length += flows[i].end - std::max(flows[i].begins(), reach);
        reach = flows[i].end;
      }
      if (std::abs(busy - union_length) > kMargin * union_length + rounding)
        broken.push_back(fmt::format("{} was busy {} s, where its flows drained for {} s",
                                     map.name(topo, id), busy, union_length));
    }
    if (bytes > cap * (busy + rounding) * (1 + kMargin) + 1e-6)
      broken.push_back(fmt::format("{} carried {} bytes in {} s busy, more than its {} bytes/s",
                                   map.name(topo, id), bytes, busy, cap));
  }
}

}  // namespace collsim::test
