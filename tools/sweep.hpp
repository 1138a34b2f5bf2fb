#pragma once
// Points of a run or sweep, how one point is simulated, and how many are run on a pool of threads.
//
// A point is a pure function of (topology, point): points share the topology and its Router
// read-only and nothing else, so they can be evaluated in any order, on any thread or on any MPI
// rank (tools/mpi_sweep.hpp), and the results are still emitted in input order.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "schedules/generate.hpp"
#include "sim/engine.hpp"
#include "tools/report.hpp"
#include "tools/resource_guard.hpp"
#include "tools/value_lists.hpp"
#include "topology/error.hpp"
#include "topology/routing.hpp"

namespace collsim::cli {

struct Point {
  sched::Collective collective = sched::Collective::allreduce;
  AlgoChoice algo = sched::Algorithm::ring;  // nullopt: search every algorithm
  Bytes size = 0;
  sched::DType dtype = sched::DType::fp32;
  std::uint32_t chunks = 1;  // kAutoChunks: search k in 1, 2, 4, ..., 64
  std::uint32_t nranks = 0;  // the first n of the selected ranks; 0 means all of them
};

// What the progress line of one simulation shows.
struct SimulationProgress {
  std::string_view what;  // the algorithm, the collective and k
  sim::RunProgress at;
  // The share of the plan's ops done: exact once the whole plan is known; while a streamed plan
  // is still being generated, against resource_guard's estimate of its op count (an upper
  // bound, so the share may run low), and never above 0.99; negative when unknown.
  double fraction = -1;
  // Empty while simulating. Before a whole plan's first event, what the run is doing instead:
  // generating the plan, then registering it (checks, stream order, routes), which take seconds
  // at 100,000 GPUs with no event to report; `at` and `fraction` say nothing then.
  std::string stage;
};

// What every point shares, read-only.
struct Context {
  const topo::Router* router = nullptr;
  std::vector<topo::NodeId> ranks;  // the selected GPUs, rank order
  sched::RankId root = 0;
  sched::HostMemory host_memory = sched::HostMemory::pinned;  // --host-memory
  bool model_terms = false;  // also compute the copy and link terms of each plan (for plots)
  bool usage = false;        // also keep each evaluation's Usage (run --bottlenecks)
  // Auto searches of k stop, for each algorithm, at the first k slower than the one before
  // (--auto-search fast). Exact when time against k falls then rises, as the α-β forms of the
  // pipelined schedules do; the default tries every k.
  bool fast_auto = false;
  // --symmetry: simulate one rank per orbit where a rotation of the ranks maps the plan and the
  // topology onto themselves (sim::Options::rank_symmetry).
  bool symmetry = false;
  // Set by Ctrl-C: engines stop at their next check and points not yet started are skipped;
  // evaluate_or_throw() then throws Interrupted (tools/resource_guard.hpp).
  const std::atomic<bool>* cancel = nullptr;
  // Each (algorithm, k) is estimated before its plan is built and refused if `concurrent` of
  // them would not fit in `max_memory` bytes; 0 turns the check off.
  std::uint64_t max_memory = 0;
  unsigned concurrent = 1;
  // Each simulation stops once it has re-shared this many flows, or is on pace to
  // (sim::Options::max_reshared), and its pair is refused; 0 turns the limit off.
  std::uint64_t max_reshared = 0;
  // Called from the engine every 2^16 events of a simulation; may be called from several threads
  // at once. Empty: no progress.
  std::function<void(const SimulationProgress&)> progress;
};

// The α-β terms of a plan, without overlap or contention: for each rank the bytes it copies over
// the bandwidth of the path each copy takes (PCIe route to its host CPU for d2h/h2d, half the
// memory bandwidth for d2d, the CPU's memcpy bandwidth for host copies), and the bytes it sends
// over the bottleneck bandwidth of the route to the peer; the maximum over ranks of each sum.
struct ModelTerms {
  double copy = 0;  // seconds
  double link = 0;  // seconds
};
ModelTerms model_terms(const topo::Router& router, const sched::Plan& plan);
// The same sums op by op, for a plan that arrives in batches and forgets its finished ops
// (sim::simulate_streaming): add() after each batch, before the engine drops anything.
class ModelTermsSum {
 public:
  explicit ModelTermsSum(const topo::Router& router) : router_(router) {}
  void add(const sched::Plan& plan);  // the ops added since the last call
  ModelTerms terms() const;

 private:
  const topo::Router& router_;
  std::vector<double> copy_, link_;  // by rank
  sched::OpId next_ = 0;
};

// A simulation stopped by --max-reshared. An auto search records its pair as refused and tries
// no larger k of that algorithm: more chunks add flows to share, not fewer.
class SharingLimit : public InputError {
 public:
  using InputError::InputError;
};

// The default of --max-reshared: about 1000 s of bandwidth sharing at 10^7 flows a second.
inline constexpr double kDefaultMaxReshared = 1e10;

// One (algorithm, k) pair tried by an auto search.
struct Candidate {
  std::string algo;
  std::uint32_t chunks = 0;
  double time = 0;
  std::string error;    // why the pair was refused, if it was
  bool slower = false;  // stopped once past `time`, slower than two algorithms' best pairs
};

// Where a simulated run spent its bandwidth: what run --bottlenecks prints (tools/bottlenecks.hpp).
struct Usage {
  double time = 0;                                 // the run's simulated time, seconds
  std::vector<sim::ResourceUsage> resources;       // every resource that carried a flow
  std::vector<sim::CopyEngineUsage> copy_engines;  // GPUs that ran copies
  sched::RankId rotation = 0;  // one rank per orbit: figures are the representatives'
};

struct Evaluation {
  Row row;
  Usage usage;  // empty unless Context::usage
  ModelTerms terms;
  std::vector<Candidate> candidates;  // filled by auto searches, in the order tried
  bool internal_error = false;        // row.error comes from a bug, not from the input
  bool interrupted = false;           // Ctrl-C stopped or skipped the point
  std::string symmetry;  // with --symmetry: the rotation used, or why every rank was simulated
};

// The chunk counts an auto search tries: 1, 2, 4, ..., 64, at most the element count.
std::vector<std::uint32_t> auto_chunk_counts(std::uint64_t elements);

// The request for one (algorithm, k) of a point, validated: size a whole number of elements,
// k at most the element count. Throws InputError.
sched::PlanRequest make_request(const Context& context, const Point& point,
                                sched::Algorithm algorithm, std::uint32_t chunks);

// Refuses `request` (InputError) when its estimated memory exceeds context.max_memory (0: no
// limit), for context.concurrent requests at once. `streamed`: simulated while generated.
// `purpose` prefixes the request in the message ("the trace of "). `held`: the ranks a run of
// one rank per orbit simulates (sim::Options::before_run), which hold that share of the plan;
// 0 for every rank.
void check_request_memory(const Context& context, const sched::PlanRequest& request, bool streamed,
                          std::string_view purpose = {}, sched::RankId held = 0);

// Simulates a point; an auto point tries every fitting pair and keeps the fastest (ties go to
// the earlier pair). Throws InputError or InternalError.
Evaluation evaluate_or_throw(const Context& context, const Point& point,
                             const std::string& topology_name);
// The same, but errors land in row.error and never escape, so that one bad point does not sink
// a sweep.
Evaluation evaluate(const Context& context, const Point& point, const std::string& topology_name);

// Threads that evaluate points as their indices are added, in the order added. The thread that
// made the pool adds, closes and waits; the pool's threads only evaluate.
class PointPool {
 public:
  // Starts `threads` threads (at least one). With `track_running`, the pool follows how far its
  // running points are (running()), through the context's progress reports, which it passes on.
  PointPool(const Context& context, const std::vector<Point>& points, std::string topology_name,
            unsigned threads, bool track_running = false);
  // Drops the points not started and waits for the running ones.
  ~PointPool();
  PointPool(const PointPool&) = delete;
  PointPool& operator=(const PointPool&) = delete;

  void add(std::size_t index);
  // No point will be added any more: the threads end once the queue is empty.
  void close();
  // Points added and not yet returned by finished().
  std::size_t unfinished() const;
  // Waits up to `timeout` for a point to finish; returns the points finished since the last
  // call, in the order they finished (empty when none did in time).
  std::vector<std::pair<std::size_t, Evaluation>> finished(std::chrono::milliseconds timeout);
  // With track_running: the shares done of the points running now, summed. A point counts once
  // it has reported a share (a streamed plan's share is against an estimate of its size), and
  // only if it is one simulation: an auto search's share would start again with each (algorithm,
  // k). A point is 0 again once it is among the finished, so done + running never counts it twice.
  double running() const;

 private:
  void work();

  Context context_;  // the caller's, with the progress reports passed through the pool's
  const std::vector<Point>& points_;
  const std::string topology_name_;
  mutable std::mutex mutex_;
  std::condition_variable added_, done_;
  std::deque<std::size_t> queue_;
  std::vector<double> running_;  // per point, with track_running
  std::vector<std::pair<std::size_t, Evaluation>> finished_;
  std::size_t unfinished_ = 0;
  bool closed_ = false;
  std::vector<std::jthread> threads_;  // last: joined before the members they use go
};

// Evaluates `points` on `jobs` threads and calls `emit` from the calling thread, in input order,
// as soon as every earlier point is done. On one thread the points run in input order, so that
// rows stream as they finish; on several they start heaviest first (start_order), so that the
// sweep does not end with one thread on a long point while the others wait. `progress` (may be
// empty) gets (done, total, running): the points done, of all, and the shares done of the points
// running, summed (PointPool::running()).
void run_points(const Context& context, const std::vector<Point>& points,
                const std::string& topology_name, unsigned jobs,
                const std::function<void(std::size_t, const Evaluation&)>& emit,
                const std::function<void(std::size_t, std::size_t, double)>& progress);

// Each point's estimated cost: the events that resource_guard's estimate gives each (algorithm,
// k) the point will simulate, summed over an auto search, plus one, so that a point refused at
// once still counts.
std::vector<double> estimated_costs(const Context& context, const std::vector<Point>& points);

// The points by estimated cost, heaviest first, equal costs in input order: the order in which a
// sweep on several threads starts them.
std::vector<std::size_t> start_order(const std::vector<double>& costs);

// Hands a sweep's points out on demand to `parts` workers (threads, over all processes), heaviest
// first by estimated cost and equal costs in input order, so that the longest points start first
// and the ones left at the end are short. A worker that asks for n points gets n while any are
// left, and then more while their cost stays under half its share of what is left (guided
// self-scheduling): light points travel in about 2 × parts × ln(points) batches instead of one
// each, and the batches shrink as the sweep ends, so that no worker is left with a long tail.
class Dispenser {
 public:
  Dispenser(std::vector<double> costs, std::size_t parts);
  std::vector<std::size_t> take(std::size_t wanted);
  std::size_t left() const { return order_.size() - next_; }

 private:
  std::vector<double> cost_;
  std::vector<std::size_t> order_;
  std::size_t next_ = 0;
  double left_cost_ = 0;
  std::size_t parts_;
};

}  // namespace collsim::cli
