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
#include <optional>
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

// A flow of the run: a transfer, copy or reduction of the plan, or a background flow.
struct Flow {
  const char* what;
  std::size_t index;  // op id, or background flow
  double start = 0, end = 0;
  double latency = 0;  // before its bandwidth phase
  Bytes bytes = 0;
  bool finished = true;
  struct Use {
    sim::ResourceId resource;
    double weight;
  };
  std::vector<Use> uses;  // its limited resources
  double begins() const { return start + latency; }
};

class CostChecker {
 public:
  CostChecker(const topo::Router& router, const sched::Plan& plan, const sim::Options& options,
              const sim::Result& r, std::vector<std::string>& broken)
      : router_(router),
        topo_(router.topology()),
        plan_(plan),
        options_(options),
        r_(r),
        broken_(broken),
        map_(topo_),
        most_(topo_.num_links()),
        traced_(map_.size(), false),
        engines_(topo_.num_nodes()),
        waiting_(topo_.num_nodes()),
        on_(map_.size()) {
    for (topo::LinkId l = 0; l < topo_.num_links(); ++l) most_[l] = topo_.link(l).bandwidth;
    for (const sim::CapacityTrace& trace : options.capacity) {
      traced_[map_.link(trace.link)] = true;
      for (const sim::CapacityChange& c : trace.changes)
        most_[trace.link] = std::max(most_[trace.link], c.bandwidth);
    }
  }

  void run() {
    if (!read_ops()) return;
    for (topo::NodeId g = 0; g < topo_.num_nodes(); ++g)
      if (!waiting_[g].empty())
        check_engines(std::move(waiting_[g]), topo_.node(g).copy_engines, topo_.node(g).name,
                      broken_);
    read_background();
    check_durations();
    check_engine_report();
    check_loads();
  }

 private:
  using OpId = sched::OpId;

  // A link's most capacity over the run: its own, or more where a trace raises it.
  double capacity(sim::ResourceId id) const {
    return map_.kind(id) == sim::ResourceKind::link ? most_[map_.index(id)]
                                                    : map_.capacity(topo_, id);
  }
  topo::NodeId gpu_of(sched::RankId rank) const { return plan_.rank_gpu[rank]; }
  sim::ResourceId memory_of(sched::RankId rank) const {
    const topo::Node& g = topo_.node(gpu_of(rank));
    return map_.memory(g.memory_owner != topo::kNoNode ? g.memory_owner : gpu_of(rank));
  }
  topo::NodeId endpoint(sched::RankId rank, sched::BufferId b) const {
    return sched::memory_of(b) == sched::Memory::host ? topo_.host_cpu(gpu_of(rank)) : gpu_of(rank);
  }
  void limited(Flow& f, sim::ResourceId id, double weight) const {
    if (capacity(id) < kUnlimited) f.uses.push_back(Flow::Use{id, weight});
  }
  void route(Flow& f, const topo::Route& path) const {
    f.latency += path.latency;
    for (const topo::LinkId l : path.links) limited(f, map_.link(l), 1.0);
  }
  // The latency, then the bytes at the narrowest bandwidth.
  double alone(const Flow& f) const {
    double rate = kUnlimited;
    for (const Flow::Use& u : f.uses) rate = std::min(rate, capacity(u.resource) / u.weight);
    return f.latency + (f.bytes == 0 ? 0.0 : static_cast<double>(f.bytes) / rate);
  }
  void add(std::string line) { broken_.push_back(std::move(line)); }

  // The ready and start rules of every op, and its flow; false where the plan is not one the
  // rules read (ranks out of range).
  bool read_ops() {
    const auto n = static_cast<OpId>(plan_.num_ops());
    std::vector<std::vector<OpId>> previous(plan_.num_ranks());  // by rank, then stream
    for (OpId op = 0; op < n; ++op) {
      const sim::OpTiming& t = r_.ops[op];
      const sched::Plan::Fields f = plan_.fields(op);
      if (f.rank >= plan_.num_ranks()) return false;
      const double event_latency = topo_.node(gpu_of(f.rank)).event_latency;
      // Ready: the last edge in, seen through an event where the work ran on another stream.
      double ready = 0;
      const auto edge = [&](OpId from) {
        if (from >= n) return;
        const OpId ran = plan_.kind(from) == sched::OpKind::send ? plan_.partner(from) : from;
        const bool same_stream =
            ran < n && plan_.rank(ran) == f.rank && plan_.stream(ran) == f.stream;
        const double end = r_.ops[from].end;
        ready = std::max(ready, event_latency > 0 && !same_stream ? end + event_latency : end);
      };
      for (const OpId d : f.deps) edge(d);
      std::vector<OpId>& on_rank = previous[f.rank];
      if (on_rank.size() <= f.stream) on_rank.resize(f.stream + std::size_t{1}, sched::kNoOp);
      if (on_rank[f.stream] != sched::kNoOp) edge(on_rank[f.stream]);
      on_rank[f.stream] = op;
      if (!same_double(t.ready, ready))
        add(fmt::format("op {} ready at {} s, not when the last op before it allows, {} s", op,
                        t.ready, ready));
      if (std::optional<Flow> flow = read_op(op, f, t)) flows_.push_back(std::move(*flow));
    }
    return true;
  }

  // The start rule of one op, and its flow if it has one.
  std::optional<Flow> read_op(OpId op, const sched::Plan::Fields& f, const sim::OpTiming& t) {
    const auto starts_when_ready = [&](const char* what) {
      if (!same_double(t.start, t.ready))
        add(fmt::format("{} op {} ready at {} s started at {} s", what, op, t.ready, t.start));
    };
    Flow flow{"", op, t.start, t.end, 0, f.bytes, true, {}};
    switch (f.kind) {
      case sched::OpKind::send: {
        if (f.partner >= plan_.num_ops()) return std::nullopt;
        const sim::OpTiming& recv = r_.ops[f.partner];
        if (!same_double(t.start, std::max(t.ready, recv.ready)))
          add(fmt::format(
              "transfer {} -> {} started at {} s, not when both ends were ready ({} and {} s)", op,
              f.partner, t.start, t.ready, recv.ready));
        flow.what = "transfer";
        flow.latency = topo_.node(gpu_of(f.rank)).alpha;
        route(flow, router_.route(endpoint(f.rank, f.src_buffer),
                                  endpoint(f.peer, plan_.dst(f.partner).buffer),
                                  sim::transfer_flow_key(f.rank, f.peer)));
        return flow;
      }
      case sched::OpKind::recv:
        return std::nullopt;  // its send's flow
      case sched::OpKind::compute:
      case sched::OpKind::delay:
        starts_when_ready("compute or delay");
        if (!same_double(t.end, t.start + f.seconds))
          add(fmt::format("op {} of {} s ran from {} s to {} s", op, f.seconds, t.start, t.end));
        return std::nullopt;
      case sched::OpKind::reduce: {
        starts_when_ready("reduction");
        const topo::Node& g = topo_.node(gpu_of(f.rank));
        flow.what = "reduction";
        flow.latency = g.launch_latency;
        limited(flow, memory_of(f.rank),
                g.reduce_traffic.at(static_cast<std::size_t>(plan_.dtype)));
        return flow;
      }
      case sched::OpKind::copy:
        break;
    }
    const topo::NodeId gpu = gpu_of(f.rank);
    const topo::NodeId cpu = topo_.host_cpu(gpu);
    const sched::CopyKind kind = sched::copy_kind(f.src_buffer, f.dst_buffer);
    if (kind == sched::CopyKind::host) {
      starts_when_ready("host memcpy");
      flow.what = "host memcpy";
      if (cpu != topo::kNoNode) limited(flow, map_.memcpy(cpu), 1.0);
      return flow;
    }
    Engines& e = engines_[gpu];
    e.busy += t.end - t.start;
    e.longest_wait = std::max(e.longest_wait, t.start - t.ready);
    ++e.copies;
    if (topo_.node(gpu).copy_engines == 0)
      starts_when_ready("copy on a GPU of unlimited copy engines");
    else
      waiting_[gpu].push_back(Copy{op, t});
    if (kind == sched::CopyKind::d2d) {
      flow.what = "device copy";
      limited(flow, memory_of(f.rank), 2.0);
      return flow;
    }
    if (cpu == topo::kNoNode) return std::nullopt;
    flow.what = "host copy";
    const bool d2h = kind == sched::CopyKind::d2h;
    route(flow, router_.route(d2h ? gpu : cpu, d2h ? cpu : gpu, 0));
    if (plan_.host_memory == sched::HostMemory::pageable)
      limited(flow, map_.memcpy(cpu), topo_.node(cpu).pageable_traffic[d2h ? 0 : 1]);
    return flow;
  }

  void read_background() {
    for (std::size_t i = 0; i < options_.background.size(); ++i) {
      const sim::BackgroundFlow& b = options_.background[i];
      const double end = i < r_.background_end.size() ? r_.background_end[i] : kUnlimited;
      Flow flow{"background flow", i, b.start, end, 0, b.bytes, end < kUnlimited, {}};
      route(flow, router_.route(b.from, b.to));  // the pair's first shortest path, ECMP or not
      flows_.push_back(std::move(flow));
    }
  }

  // None shorter than alone; exactly that where no flow shared a resource with it during its
  // bandwidth phase, and no trace changed one. Each resource's flows in order of their phases'
  // begins: one overlaps another when an earlier one ends after it begins, or the next begins
  // before it ends.
  void check_durations() {
    for (std::size_t i = 0; i < flows_.size(); ++i)
      if (flows_[i].bytes > 0)
        for (const Flow::Use& u : flows_[i].uses) on_[u.resource].push_back(i);
    std::vector<bool> shared(flows_.size(), false);
    for (sim::ResourceId id = 0; id < map_.size(); ++id) {
      std::vector<std::size_t>& list = on_[id];
      std::sort(list.begin(), list.end(), [&](std::size_t a, std::size_t b) {
        return flows_[a].begins() < flows_[b].begins();
      });
      double reach = -kUnlimited;  // the latest end of the flows before
      for (std::size_t k = 0; k < list.size(); ++k) {
        const Flow& f = flows_[list[k]];
        if (traced_[id] || reach > f.begins() ||
            (k + 1 < list.size() && flows_[list[k + 1]].begins() < f.end))
          shared[list[k]] = true;
        reach = std::max(reach, f.end);
      }
    }
    for (std::size_t i = 0; i < flows_.size(); ++i) {
      const Flow& f = flows_[i];
      if (!f.finished) continue;
      const double least = alone(f);
      const double took = f.end - f.start;
      if (!at_least(took, least, f.end))
        add(fmt::format("{} {} took {} s, less than {} s alone", f.what, f.index, took, least));
      if (!shared[i] && !close_time(took, least, f.end))
        add(fmt::format("{} {} took {} s, alone on its resources, not {} s", f.what, f.index, took,
                        least));
    }
  }

  // Every GPU that ran copies is reported, with the engine time they held and the longest any
  // waited.
  void check_engine_report() {
    for (const sim::CopyEngineUsage& u : r_.copy_engines) {
      if (u.gpu >= topo_.num_nodes() || engines_[u.gpu].copies == 0) {
        add(fmt::format("copy engines reported for node {}, which ran no copy", u.gpu));
        continue;
      }
      const Engines& e = engines_[u.gpu];
      if (std::abs(u.busy_time - e.busy) > kMargin * e.busy + rounding(e.copies) ||
          !same_double(u.max_wait, e.longest_wait))
        add(fmt::format(
            "{}'s copy engines reported {} s held and {} s the longest wait; its copies ran {} s "
            "and waited {} s at most",
            topo_.node(u.gpu).name, u.busy_time, u.max_wait, e.busy, e.longest_wait));
      engines_[u.gpu].copies = 0;
    }
    for (topo::NodeId g = 0; g < topo_.num_nodes(); ++g)
      if (engines_[g].copies != 0)
        add(fmt::format("{} ran copies but no copy engine use is reported", topo_.node(g).name));
  }

  // Times late in a run are rounded to its ulps, which for a flow of picoseconds is far more
  // than 1e-9 of its duration: a sum over `flows` intervals, or of the bytes drained over them,
  // may be off by this many seconds' worth.
  double rounding(std::size_t flows) const {
    return 4 * DBL_EPSILON * r_.time * static_cast<double>(flows + 1);
  }

  // Weight × bytes by resource, of the flows that finished, and of those still running at the
  // end (background flows), which have carried part of theirs; busy time; capacity.
  void check_loads() {
    std::vector<double> carried(map_.size(), 0.0);
    std::vector<double> unfinished(map_.size(), 0.0);
    for (const Flow& f : flows_)
      for (const Flow::Use& u : f.uses)
        (f.finished ? carried : unfinished)[u.resource] += u.weight * static_cast<double>(f.bytes);
    std::vector<const sim::ResourceUsage*> usage(map_.size(), nullptr);
    for (const sim::ResourceUsage& u : r_.resources) {
      const sim::ResourceId id = u.kind == sim::ResourceKind::link     ? map_.link(u.index)
                                 : u.kind == sim::ResourceKind::memory ? map_.memory(u.index)
                                                                       : map_.memcpy(u.index);
      if (id < map_.size()) usage[id] = &u;
    }
    for (sim::ResourceId id = 0; id < map_.size(); ++id) {
      const double cap = capacity(id);
      if (!(cap < kUnlimited)) continue;
      const double bytes = usage[id] ? usage[id]->bytes : 0.0;
      const double busy = usage[id] ? usage[id]->busy_time : 0.0;
      const double slack = cap * rounding(on_[id].size()) + 1e-6;
      const double least = carried[id], at_most = carried[id] + unfinished[id];
      if (bytes < least * (1 - kMargin) - slack || bytes > at_most * (1 + kMargin) + slack)
        add(fmt::format(
            "{} carried {} bytes, where its flows hold {} ({} of them of background flows still "
            "running at the end)",
            map_.name(topo_, id), bytes, at_most, unfinished[id]));
      // Busy: the union of the bandwidth phases of the flows on it (all ended by the run's end).
      if (unfinished[id] == 0) {
        double union_length = 0, reach = 0;
        for (const std::size_t i : on_[id]) {  // by begin
          if (flows_[i].end <= reach) continue;
          union_length += flows_[i].end - std::max(flows_[i].begins(), reach);
          reach = flows_[i].end;
        }
        if (std::abs(busy - union_length) > kMargin * union_length + rounding(on_[id].size()))
          add(fmt::format("{} was busy {} s, where its flows drained for {} s",
                          map_.name(topo_, id), busy, union_length));
      }
      if (bytes > cap * (busy + rounding(on_[id].size())) * (1 + kMargin) + 1e-6)
        add(fmt::format("{} carried {} bytes in {} s busy, more than its {} bytes/s",
                        map_.name(topo_, id), bytes, busy, cap));
    }
  }

  const topo::Router& router_;
  const topo::Topology& topo_;
  const sched::Plan& plan_;
  const sim::Options& options_;
  const sim::Result& r_;
  std::vector<std::string>& broken_;
  const sim::ResourceMap map_;
  std::vector<double> most_;  // by link
  std::vector<bool> traced_;  // by resource
  // By GPU, for its copies (not host memcpys): engine-seconds held, the longest wait, how many.
  struct Engines {
    double busy = 0, longest_wait = 0;
    std::size_t copies = 0;
  };
  std::vector<Engines> engines_;
  std::vector<std::vector<Copy>> waiting_;  // by GPU of limited engines
  std::vector<Flow> flows_;
  std::vector<std::vector<std::size_t>> on_;  // flows by resource, by begin once sorted
};

}  // namespace cost_checks_detail

// Appends to `broken` one line per rule that `r`, a finished run of `plan` with `options` on
// `router` with every op recorded, breaks. Plans of one rank per orbit are not checked.
inline void check_costs(const topo::Router& router, const sched::Plan& plan,
                        const sim::Options& options, const sim::Result& r,
                        std::vector<std::string>& broken) {
  if (plan.rotation != 0 || r.stop != sim::StopReason::finished || r.ops.size() != plan.num_ops() ||
      plan.first_op() != 0)
    return;
  cost_checks_detail::CostChecker(router, plan, options, r, broken).run();
}

}  // namespace collsim::test
