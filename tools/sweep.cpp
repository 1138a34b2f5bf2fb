#include "tools/sweep.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <thread>

#include "sim/engine.hpp"
#include "topology/error.hpp"
#include "topology/loader.hpp"

namespace collsim::cli {
namespace {

bool cancelled(const Context& context) {
  return context.cancel != nullptr && context.cancel->load(std::memory_order_relaxed);
}

struct Simulated {
  double time = 0;
  bool slower = false;  // stopped at the time bound given: its time is past `time`
  std::uint64_t events = 0;
  ModelTerms terms;
  std::string symmetry;  // Evaluation::symmetry
  Usage usage;           // when Context::usage
};

// `bound`: the run may stop once past this simulated time (Simulated::slower).
Simulated simulate_one(const Context& context, const Point& point, sched::Algorithm algorithm,
                       std::uint32_t chunks, double bound = kUnlimited) {
  const sched::PlanRequest request = make_request(context, point, algorithm, chunks);
  // Ring collectives and hier are simulated while they are generated (the model terms are
  // summed batch by batch); the other plans come whole, registered in windows where they allow.
  const bool streamed = sim::streams_exactly(*context.router, request);
  // The model terms read every rank's ops, which a run of one rank per orbit does not build.
  const bool symmetric = context.symmetry && !context.model_terms;
  sim::Options options;
  if (symmetric) {
    // Checked once the run knows how many ranks it holds: a rotation by s holds s / p of the
    // plan, and refusing it for every rank's memory refused runs that fit many times over.
    options.before_run = [&](sched::RankId held) {
      check_request_memory(context, request, streamed, {}, held);
    };
  } else {
    check_request_memory(context, request, streamed);
  }
  options.cancel = context.cancel;
  options.max_reshared = context.max_reshared;
  // What the memory guard counts as taken by the topology: the budget below and its message.
  const double topology_bytes = topo::estimated_bytes(context.router->topology());
  if (streamed)
    options.max_ops_held = max_ops_held(context.max_memory, context.concurrent, topology_bytes);
  options.max_time = bound;
  sched::Plan plan;
  ModelTermsSum terms(*context.router);
  options.rank_symmetry = symmetric;
  // Names the run in progress reports and in the messages of a run stopped early.
  const std::string what = fmt::format("{} {} k={}", sched::to_string(algorithm),
                                       sched::to_string(point.collective), chunks);
  // Before a whole plan's first event there is nothing for the engine to report.
  const auto stage = [&](std::string text) {
    if (context.progress) context.progress(SimulationProgress{what, {}, -1, std::move(text)});
  };
  if (context.progress) {
    // A streamed plan's op count is known only once it is generated: until then the estimate
    // stands in. A run of one rank per orbit holds fewer ops than it counts, and waits.
    double expected = 0;
    if (streamed && !symmetric) {
      const topo::Topology& topology = context.router->topology();
      expected = estimate(request.collective, request.algorithm, request.ranks.size(),
                          request.chunks, count_servers(topology, request.ranks),
                          staged_transfers(topology, request.ranks), true)
                     .ops;
    }
    options.progress = [&context, what, expected](const sim::RunProgress& at) {
      double fraction = -1;
      if (at.ops_total > 0)
        fraction = static_cast<double>(at.ops_done) / static_cast<double>(at.ops_total);
      else if (expected > 0)
        fraction = std::min(0.99, static_cast<double>(at.ops_done) / expected);
      context.progress(SimulationProgress{what, at, fraction, {}});
    };
  }
  auto whole = [&] {
    stage("generating the plan");
    plan = sched::generate(*context.router, request);
    if (context.model_terms) terms.add(plan);
    stage(fmt::format("registering its {} ops (checks, stream order, routes)", plan.num_ops()));
    return sim::simulate(*context.router, plan, options);
  };
  auto stream = [&] {
    return sim::simulate_streaming(
        *context.router, plan,
        [&](const std::function<void()>& batch) {
          sched::generate(*context.router, request, plan, [&] {
            if (context.model_terms) terms.add(plan);
            batch();
          });
        },
        options);
  };
  if (symmetric) stage("generating and registering the plan");
  const sim::Result result = symmetric  ? sim::simulate(*context.router, request, options)
                             : streamed ? stream()
                                        : whole();
  if (result.stop == sim::StopReason::cancelled)
    throw Interrupted(
        fmt::format("interrupted (Ctrl-C) after {} events, at simulated time {}, of {}",
                    result.events, format_duration(result.time), what));
  if (result.stop == sim::StopReason::time_limit && bound < kUnlimited) {
    Simulated past;
    past.time = bound;
    past.slower = true;
    return past;
  }
  if (result.stop == sim::StopReason::sharing_limit) {
    const double filled = static_cast<double>(result.sharing.filled);
    const std::string pace = result.sharing_pace > 0
                                 ? fmt::format(", on pace for {:.2g}", result.sharing_pace)
                                 : std::string();
    throw SharingLimit(
        "", "--max-reshared",
        fmt::format("{} stopped at simulated {} after re-sharing {:.2g} flows for {} of "
                    "{} ops{}, against the limit of {:.2g}: each arrival or departure "
                    "re-shares the flows coupled to it, and where thousands of flows share a "
                    "few resources and end one by one a run takes hours (docs/performance.md, "
                    "\"Known limits\"); use fewer ranks or another algorithm, or raise "
                    "--max-reshared (0: no limit; 10^7 flows take 1 to 20 s)",
                    what, format_duration(result.time), filled, result.ops_done,
                    result.ops_total == 0 ? std::string("?") : std::to_string(result.ops_total),
                    pace, static_cast<double>(context.max_reshared)));
  }
  if (result.stop == sim::StopReason::memory_limit) {
    throw InputError(
        "", "--max-memory",
        fmt::format("{} stopped at simulated {} holding {} ops at once (about {} at {} B "
                    "each{}{}) after {} ops done, more than the limit of {} allows: a streamed run "
                    "holds the ops from its oldest unfinished one to its newest step, and where "
                    "links differ the ranks upstream of a slower link run ahead of it, so that "
                    "window grows past the estimate that admitted the run (docs/errors.md); use "
                    "fewer chunks or ranks{}, or raise --max-memory if the machine has the memory",
                    what, format_duration(result.time), result.ops_held,
                    format_size_estimate(static_cast<double>(result.ops_held) *
                                         static_cast<double>(kStreamedBytesPerOp)),
                    kStreamedBytesPerOp, on_each_thread(context.concurrent),
                    beside_topology(topology_bytes), result.ops_done,
                    format_size_estimate(static_cast<double>(context.max_memory)),
                    context.concurrent > 1 ? " or fewer --jobs" : ""));
  }
  if (result.stop != sim::StopReason::finished)
    throw InternalError(fmt::format("simulation of {} k={} stopped early ({}) without a limit set",
                                    sched::to_string(algorithm), chunks,
                                    sim::to_string(result.stop)));
  if (!std::isfinite(result.time) || result.time < 0)
    throw InternalError(fmt::format("simulation of {} k={} finished at time {}",
                                    sched::to_string(algorithm), chunks, result.time));
  Simulated s;
  s.time = result.time;
  s.events = result.events;
  if (context.model_terms) s.terms = terms.terms();
  if (context.usage)
    s.usage = Usage{result.time, result.resources, result.copy_engines, result.rotation};
  const auto p = static_cast<sched::RankId>(request.ranks.size());
  if (result.rotation != 0)
    s.symmetry = fmt::format(
        "one rank per orbit of a rotation by {} ranks: {} of {} ranks simulated, events "
        "counted for them only",
        result.rotation, result.rotation, p);
  else if (context.symmetry)
    s.symmetry = "every rank simulated: " + (context.model_terms
                                                 ? std::string("--terms needs every rank's ops")
                                                 : result.symmetry_refused);
  return s;
}

double copy_bandwidth(const topo::Router& router, const topo::Topology& topology, topo::NodeId gpu,
                      sched::CopyKind kind, sched::HostMemory host_memory) {
  const topo::NodeId cpu = topology.host_cpu(gpu);
  // A pageable buffer is staged through the host's memcpy as well, at its weight
  // (docs/cost-model.md).
  const auto staging = [&](std::size_t direction) {
    return host_memory == sched::HostMemory::pageable
               ? topology.node(cpu).memcpy_bandwidth /
                     topology.node(cpu).pageable_traffic[direction]
               : kUnlimited;
  };
  switch (kind) {
    case sched::CopyKind::d2d:
      // A device copy reads and writes every byte.
      return topology.node(gpu).memory_bandwidth / 2;
    case sched::CopyKind::d2h:
      return cpu == topo::kNoNode ? kUnlimited
                                  : std::min(router.route(gpu, cpu).bandwidth, staging(0));
    case sched::CopyKind::h2d:
      return cpu == topo::kNoNode ? kUnlimited
                                  : std::min(router.route(cpu, gpu).bandwidth, staging(1));
    case sched::CopyKind::host:
      return cpu == topo::kNoNode ? kUnlimited : topology.node(cpu).memcpy_bandwidth;
  }
  return kUnlimited;
}

}  // namespace

void check_request_memory(const Context& context, const sched::PlanRequest& request, bool streamed,
                          std::string_view purpose, sched::RankId held) {
  if (context.max_memory == 0) return;
  const topo::Topology& topology = context.router->topology();
  const std::size_t p = request.ranks.size();
  Estimate e = estimate(request.collective, request.algorithm, p, request.chunks,
                        count_servers(topology, request.ranks),
                        staged_transfers(topology, request.ranks), streamed);
  std::string what =
      fmt::format("{}{} {} on {} ranks with k = {}", purpose, sched::to_string(request.algorithm),
                  sched::to_string(request.collective), p, request.chunks);
  if (held != 0 && held < p) {
    // One rank per orbit: that rank's ops and events, s of every p.
    e = scaled(e, static_cast<double>(held) / static_cast<double>(p));
    what +=
        fmt::format(", tried as one rank per orbit of a rotation by {} ({} of the {} simulated),",
                    held, held, p);
  }
  check_memory(e, context.concurrent, context.max_memory, what, topo::estimated_bytes(topology));
}

void ModelTermsSum::add(const sched::Plan& plan) {
  const topo::Topology& topology = router_.topology();
  copy_.resize(plan.num_ranks(), 0.0);
  link_.resize(plan.num_ranks(), 0.0);
  for (sched::OpId op = next_; op < plan.num_ops(); ++op) {
    const sched::RankId rank = plan.rank(op);
    const topo::NodeId gpu = plan.rank_gpu[rank];
    const double bytes = static_cast<double>(plan.bytes(op));
    if (plan.kind(op) == sched::OpKind::copy) {
      const double bw = copy_bandwidth(router_, topology, gpu,
                                       sched::copy_kind(plan.src(op).buffer, plan.dst(op).buffer),
                                       plan.host_memory);
      if (std::isfinite(bw) && bw > 0) copy_[rank] += bytes / bw;
    } else if (plan.kind(op) == sched::OpKind::send) {
      const topo::NodeId peer = plan.rank_gpu[plan.peer(op)];
      const double bw = router_.route(gpu, peer).bandwidth;
      if (std::isfinite(bw) && bw > 0) link_[rank] += bytes / bw;
    }
  }
  next_ = static_cast<sched::OpId>(plan.num_ops());
}

ModelTerms ModelTermsSum::terms() const {
  ModelTerms t;
  for (double c : copy_) t.copy = std::max(t.copy, c);
  for (double l : link_) t.link = std::max(t.link, l);
  return t;
}

ModelTerms model_terms(const topo::Router& router, const sched::Plan& plan) {
  ModelTermsSum sum(router);
  sum.add(plan);
  return sum.terms();
}

std::vector<std::uint32_t> auto_chunk_counts(std::uint64_t elements) {
  std::vector<std::uint32_t> out;
  for (std::uint32_t k = 1; k <= 64 && k <= elements; k *= 2) out.push_back(k);
  return out;
}

sched::PlanRequest make_request(const Context& context, const Point& point,
                                sched::Algorithm algorithm, std::uint32_t chunks) {
  const std::size_t element = sched::dtype_size(point.dtype);
  if (point.size % element != 0)
    throw InputError("", "--size",
                     fmt::format("{} bytes is not a whole number of {} elements ({} bytes each); "
                                 "use a multiple of {}",
                                 point.size, sched::to_string(point.dtype), element, element));
  const std::uint64_t count = point.size / element;
  if (chunks > count)
    throw InputError(
        "", "--chunks",
        fmt::format("k = {} is larger than the element count {} of a {} {} buffer; "
                    "every chunk needs at least one element, so use k <= {}",
                    chunks, count, format_size(point.size), sched::to_string(point.dtype), count));
  if (point.nranks > context.ranks.size())
    throw InputError("", "--nranks",
                     fmt::format("{} ranks were asked for but only {} GPUs are selected; use at "
                                 "most {}",
                                 point.nranks, context.ranks.size(), context.ranks.size()));
  sched::PlanRequest request;
  request.collective = point.collective;
  request.algorithm = algorithm;
  request.size = point.size;
  request.dtype = point.dtype;
  request.chunks = chunks;
  request.root = context.root;
  request.host_memory = context.host_memory;
  const std::size_t n = point.nranks == 0 ? context.ranks.size() : point.nranks;
  request.ranks.assign(context.ranks.begin(), context.ranks.begin() + static_cast<long>(n));
  if (context.root >= n)
    throw InputError("", "--root",
                     fmt::format("root rank {} does not exist among {} ranks; use 0 to {}",
                                 context.root, n, n - 1));
  return request;
}

Evaluation evaluate_or_throw(const Context& context, const Point& point,
                             const std::string& topology_name) {
  Evaluation ev;
  Row& row = ev.row;
  row.collective = point.collective;
  row.algo = to_string(point.algo);
  row.topology = topology_name;
  row.ranks = static_cast<std::uint32_t>(point.nranks == 0 ? context.ranks.size() : point.nranks);
  row.size = point.size;
  row.dtype = point.dtype;
  row.chunks = point.chunks;
  const auto start = std::chrono::steady_clock::now();
  if (point.algo && point.chunks != kAutoChunks) {
    const Simulated s = simulate_one(context, point, *point.algo, point.chunks);
    row.time = s.time;
    row.events = s.events;
    ev.terms = s.terms;
    ev.symmetry = s.symmetry;
    ev.usage = s.usage;
  } else {
    std::vector<sched::Algorithm> algorithms;
    if (point.algo)
      algorithms.push_back(*point.algo);
    else  // auto: every algorithm that implements the collective
      algorithms = sched::algorithms_for(point.collective, 1);
    std::vector<std::uint32_t> ks{point.chunks};
    if (point.chunks == kAutoChunks) {
      // The size check comes first, so that a bad size is not reported as "no k fits".
      make_request(context, point, algorithms.front(), 1);
      ks = auto_chunk_counts(point.size / sched::dtype_size(point.dtype));
    }
    // The notes on a pick name the winner, the runner-up and the best pair of another algorithm
    // (cmd_run.cpp, auto_notes). Once two algorithms have pairs at or under some time, a pair
    // past it can be none of the three, so it is simulated only that far: `bound`, the least
    // such time so far.
    std::vector<std::pair<double, sched::Algorithm>> finished;
    double bound = kUnlimited;
    const auto tighten = [&] {
      std::sort(finished.begin(), finished.end(),
                [](const auto& x, const auto& y) { return x.first < y.first; });
      for (const auto& [time, algorithm] : finished)
        if (algorithm != finished.front().second) {
          bound = time;
          return;
        }
    };
    // Pairs are kept in the notes' order, algorithm by algorithm and k upwards, where ties go to
    // the earlier pair, whatever the order they are simulated in.
    const bool fast = context.fast_auto && point.chunks == kAutoChunks;
    const std::size_t nk = ks.size();
    std::vector<std::optional<Candidate>> tried(algorithms.size() * nk);
    std::vector<std::optional<double>> previous(algorithms.size());
    std::vector<bool> ended(algorithms.size(), false);
    std::optional<Simulated> best;
    std::size_t best_at = 0;
    const auto run_pair = [&](std::size_t ai, std::size_t ki) {
      const sched::Algorithm a = algorithms[ai];
      const std::uint32_t k = ks[ki];
      const std::size_t at = ai * nk + ki;
      Candidate c{std::string(sched::to_string(a)), k, 0, {}, false};
      try {
        // The fast search compares each k with the one before, so it must know which is slower:
        // the first k runs to its end, a later one past the bound and the k before.
        const double limit = !fast           ? bound
                             : !previous[ai] ? kUnlimited
                                             : std::max(bound, *previous[ai]);
        const Simulated s = simulate_one(context, point, a, k, limit);
        c.time = s.time;
        c.slower = s.slower;
        const bool rising = previous[ai] && (s.slower || s.time > *previous[ai]);
        previous[ai] = s.time;
        if (rising && fast) ended[ai] = true;
        if (!s.slower) {
          finished.emplace_back(s.time, a);
          tighten();
          if (!best || s.time < best->time || (s.time == best->time && at < best_at)) {
            best = s;
            best_at = at;
            row.algo = c.algo;
            row.chunks = k;
          }
        }
      } catch (const SharingLimit& e) {
        c.error = e.what();
        ended[ai] = true;
      } catch (const InputError& e) {
        c.error = e.what();
      }
      tried[at] = std::move(c);
    };
    if (fast) {
      for (std::size_t ai = 0; ai < algorithms.size(); ++ai)
        for (std::size_t ki = 0; ki < nk && !ended[ai]; ++ki) run_pair(ai, ki);
    } else {
      // The first k of every algorithm first: the bound needs two algorithms, and the first
      // algorithm's larger k (a 1024-GPU ring at k = 64: 400 M events) would otherwise all run to
      // their ends.
      for (std::size_t ai = 0; ai < algorithms.size(); ++ai) run_pair(ai, 0);
      for (std::size_t ai = 0; ai < algorithms.size(); ++ai)
        for (std::size_t ki = 1; ki < nk && !ended[ai]; ++ki) run_pair(ai, ki);
    }
    for (auto& c : tried)
      if (c) ev.candidates.push_back(std::move(*c));
    if (!best) {
      std::string why;
      for (const Candidate& c : ev.candidates)
        if (why.find(c.error) == std::string::npos)
          why += fmt::format("\n  {} k={}: {}", c.algo, c.chunks, c.error);
      throw InputError(
          "", "--algo",
          fmt::format("no algorithm and chunk count fit this point; tried {} {}, "
                      "refused because:{}",
                      ev.candidates.size(), ev.candidates.size() == 1 ? "pair" : "pairs", why));
    }
    row.time = best->time;
    row.events = best->events;
    ev.terms = best->terms;
    ev.symmetry = best->symmetry;
    ev.usage = best->usage;
  }
  row.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return ev;
}

Evaluation evaluate(const Context& context, const Point& point, const std::string& topology_name) {
  const auto start = std::chrono::steady_clock::now();
  auto failed = [&](std::string message, bool internal, bool interrupted = false) {
    Evaluation ev;
    Row& row = ev.row;
    row.collective = point.collective;
    row.algo = to_string(point.algo);
    row.topology = topology_name;
    row.ranks = static_cast<std::uint32_t>(point.nranks == 0 ? context.ranks.size() : point.nranks);
    row.size = point.size;
    row.dtype = point.dtype;
    row.chunks = point.chunks;
    row.error = std::move(message);
    row.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ev.internal_error = internal;
    ev.interrupted = interrupted;
    return ev;
  };
  if (cancelled(context)) return failed("interrupted (Ctrl-C) before it started", false, true);
  try {
    return evaluate_or_throw(context, point, topology_name);
  } catch (const Interrupted&) {
    return failed("interrupted (Ctrl-C) while it ran", false, true);
  } catch (const InputError& e) {
    return failed(e.what(), false);
  } catch (const std::bad_alloc&) {
    return failed("out of memory; try a smaller point or fewer --jobs", false);
  } catch (const std::exception& e) {
    return failed(fmt::format("internal error (a bug in collsim, please report it): {}", e.what()),
                  true);
  }
}

std::vector<double> estimated_costs(const Context& context, const std::vector<Point>& points) {
  const topo::Topology& topology = context.router->topology();
  // Servers spanned and staging depend only on the rank count: worked out once for each.
  struct Shape {
    std::uint64_t servers = 0;
    bool staged = false;
  };
  std::map<std::size_t, Shape> shapes;
  std::vector<double> cost(points.size(), 0.0);
  for (std::size_t i = 0; i < points.size(); ++i) {
    const Point& p = points[i];
    const std::size_t n = std::min<std::size_t>(p.nranks == 0 ? context.ranks.size() : p.nranks,
                                                context.ranks.size());
    auto [it, added] = shapes.try_emplace(n);
    if (added) {
      const std::span<const topo::NodeId> ranks(context.ranks.data(), n);
      it->second = Shape{count_servers(topology, ranks), staged_transfers(topology, ranks)};
    }
    std::vector<sched::Algorithm> algorithms;
    if (p.algo)
      algorithms.push_back(*p.algo);
    else
      algorithms = sched::algorithms_for(p.collective, 1);
    const std::vector<std::uint32_t> ks =
        p.chunks == kAutoChunks ? auto_chunk_counts(p.size / sched::dtype_size(p.dtype))
                                : std::vector<std::uint32_t>{p.chunks};
    cost[i] = 1;
    for (sched::Algorithm a : algorithms)
      for (std::uint32_t k : ks)
        cost[i] += estimate(p.collective, a, n, k, it->second.servers, it->second.staged).events;
  }
  return cost;
}

Dispenser::Dispenser(std::vector<double> costs, std::size_t parts)
    : cost_(std::move(costs)), order_(cost_.size()), parts_(std::max<std::size_t>(1, parts)) {
  for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = i;
  std::stable_sort(order_.begin(), order_.end(),
                   [&](std::size_t a, std::size_t b) { return cost_[a] > cost_[b]; });
  for (double c : cost_) left_cost_ += c;
}

std::vector<std::size_t> Dispenser::take(std::size_t wanted) {
  std::vector<std::size_t> batch;
  const double share = left_cost_ / (2.0 * static_cast<double>(parts_));
  double cost = 0;
  while (next_ < order_.size()) {
    const std::size_t i = order_[next_];
    if (batch.size() >= wanted && cost + cost_[i] > share) break;
    batch.push_back(i);
    cost += cost_[i];
    ++next_;
  }
  // Only a batch size depends on it, never a result: rounding may leave a little above 0.
  left_cost_ = next_ < order_.size() ? std::max(0.0, left_cost_ - cost) : 0.0;
  return batch;
}

std::vector<std::size_t> start_order(const std::vector<double>& costs) {
  return Dispenser(costs, 1).take(costs.size());
}

namespace {
// The point a pool's thread is evaluating, for the progress reports that come from inside it.
thread_local std::size_t current_point = 0;
}  // namespace

PointPool::PointPool(const Context& context, const std::vector<Point>& points,
                     std::string topology_name, unsigned threads, bool track_running)
    : context_(context), points_(points), topology_name_(std::move(topology_name)) {
  if (track_running) {
    running_.assign(points_.size(), 0.0);
    context_.progress = [this, passed = context.progress](const SimulationProgress& p) {
      const std::size_t i = current_point;
      const Point& point = points_[i];
      if (p.fraction >= 0 && point.algo && point.chunks != kAutoChunks) {
        const std::lock_guard lock(mutex_);
        running_[i] = p.fraction;
      }
      if (passed) passed(p);
    };
  }
  threads_.reserve(std::max(1u, threads));
  for (unsigned t = 0; t < std::max(1u, threads); ++t) threads_.emplace_back([this] { work(); });
}

PointPool::~PointPool() {
  {
    // Before every point is back only when an exception is on its way: the points still queued
    // are dropped, so that it does not wait for them.
    std::lock_guard lock(mutex_);
    queue_.clear();
    closed_ = true;
  }
  added_.notify_all();
  threads_.clear();  // joins, once the points running now are done
}

void PointPool::add(std::size_t index) {
  {
    std::lock_guard lock(mutex_);
    if (closed_) throw InternalError("a point was added to a closed pool");
    queue_.push_back(index);
    ++unfinished_;
  }
  added_.notify_one();
}

void PointPool::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  added_.notify_all();
}

std::size_t PointPool::unfinished() const {
  std::lock_guard lock(mutex_);
  return unfinished_;
}

std::vector<std::pair<std::size_t, Evaluation>> PointPool::finished(
    std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  done_.wait_for(lock, timeout, [&] { return !finished_.empty(); });
  std::vector<std::pair<std::size_t, Evaluation>> out;
  out.swap(finished_);
  unfinished_ -= out.size();
  return out;
}

double PointPool::running() const {
  std::lock_guard lock(mutex_);
  double sum = 0;
  for (const double share : running_) sum += share;
  return sum;
}

void PointPool::work() {
  for (;;) {
    std::size_t i;
    {
      std::unique_lock lock(mutex_);
      added_.wait(lock, [&] { return !queue_.empty() || closed_; });
      if (queue_.empty()) return;
      i = queue_.front();
      queue_.pop_front();
    }
    current_point = i;
    Evaluation ev = evaluate(context_, points_[i], topology_name_);
    {
      std::lock_guard lock(mutex_);
      if (!running_.empty()) running_[i] = 0;
      finished_.emplace_back(i, std::move(ev));
    }
    done_.notify_one();
  }
}

void run_points(const Context& context, const std::vector<Point>& points,
                const std::string& topology_name, unsigned jobs,
                const std::function<void(std::size_t, const Evaluation&)>& emit,
                const std::function<void(std::size_t, std::size_t, double)>& progress) {
  const std::size_t total = points.size();
  const auto threads = static_cast<unsigned>(std::min<std::size_t>(std::max(1u, jobs), total));
  PointPool pool(context, points, topology_name, threads, static_cast<bool>(progress));
  for (std::size_t i : start_order(threads > 1 ? estimated_costs(context, points)
                                               : std::vector<double>(total, 1.0)))
    pool.add(i);
  pool.close();
  // Rows go out in input order as soon as their prefix is done, so that a long sweep streams its
  // results.
  std::vector<std::optional<Evaluation>> results(total);
  std::size_t done = 0;
  std::size_t emitted = 0;
  while (emitted < total) {
    for (auto& [i, ev] : pool.finished(std::chrono::milliseconds(200))) {
      results[i] = std::move(ev);
      ++done;
    }
    for (; emitted < total && results[emitted]; ++emitted) {
      emit(emitted, *results[emitted]);
      results[emitted].reset();
    }
    if (progress) progress(done, total, pool.running());
  }
}

}  // namespace collsim::cli
