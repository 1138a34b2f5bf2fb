#pragma once
// Replays a plan on a topology and reports when it finishes (docs/cost-model.md).
//
//   sim::Result r = sim::simulate(router, plan);        // r.time in seconds
//
// The engine is a discrete-event loop over a (time, sequence)-ordered heap: runs repeat bit for
// bit. Transfers, copies and reductions are flows that share bandwidth max-min fairly
// (sim/flow_model.hpp); compute and delay ops take fixed time. Errors in the plan (unmatched or
// mismatched send/recv, ranks without GPUs, dependency cycles, ops that can never run) are
// InputErrors naming the op, its rank, stream and kind.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "schedules/generate.hpp"
#include "schedules/plan.hpp"
#include "sim/flow_model.hpp"
#include "sim/observer.hpp"
#include "sim/resources.hpp"
#include "topology/routing.hpp"

namespace collsim::sim {

// A link's bandwidth becomes `bandwidth` at `time` (degradation, failure at 0, recovery).
struct CapacityChange {
  double time = 0;                // seconds from the start of the run
  double bandwidth = kUnlimited;  // bytes/s; 0 stalls the flows crossing the link
};

struct CapacityTrace {
  topo::LinkId link = 0;                // one direction of a link
  std::vector<CapacityChange> changes;  // any order; equal times apply in the given order
};

// Traffic of another job: `bytes` from node `from` to node `to` along their route, starting at
// `start`. It pays the route latency, then shares bandwidth like any transfer.
struct BackgroundFlow {
  topo::NodeId from = topo::kNoNode;
  topo::NodeId to = topo::kNoNode;
  Bytes bytes = 0;
  double start = 0;
};

// How far a run has got, for a progress display.
struct RunProgress {
  std::uint64_t events = 0;
  double now = 0;  // simulated seconds reached
  std::uint64_t ops_done = 0;
  std::uint64_t ops_total = 0;  // 0 while a streamed plan is still being generated
  // Flows re-shared so far, summed over every filling (SharingStats::filled): per event, how
  // heavy the bandwidth sharing is.
  std::uint64_t flows_filled = 0;
};

struct Options {
  std::vector<CapacityTrace> capacity;
  std::vector<BackgroundFlow> background;
  bool record_ops = false;       // fill Result::ops
  Observer* observer = nullptr;  // not owned; may be null
  // Limits: the run stops early, with Result::stop saying why. 0 / kUnlimited / null: none.
  std::uint64_t max_events = 0;
  double max_time = kUnlimited;               // simulated seconds
  const std::atomic<bool>* cancel = nullptr;  // polled after every event
  // Called once the plan (its first window or batch) is registered and its first ops are
  // ready, every 2^16 events after that, and after every 2^22 flows re-shared (heavy sharing
  // makes events slow), for a progress display on long runs; may be empty.
  std::function<void(const RunProgress&)> progress;
  // The run stops (StopReason::sharing_limit) once bandwidth sharing has re-shared this many
  // flows (SharingStats::filled; a filling takes 0.1 to 2 µs a flow), or earlier on its pace:
  // checked at a 2048th, a 1024th, ... of it, when the flows re-shared so far, plus those
  // re-shared per op finished since the last check times the ops left, reach 4 times it (the
  // pace overstates the rest by about 2 where flows end one by one, each leaving fewer to
  // re-share). Where thousands of flows share a few resources and end one by one, every event
  // re-shares them all, and a run that would take hours stops within seconds or minutes instead
  // (docs/performance.md, "Known limits"). The pace is read only once the plan's op count is
  // known (a whole plan, or a streamed one generated to its end), and only from checks between
  // which an op finished. Decided from counts only: a run stops at the same event everywhere.
  // 0: no limit.
  std::uint64_t max_reshared = 0;
  // The run stops (StopReason::memory_limit) once it holds the records of more than this many
  // ops at once (Result::ops_held), checked as each batch of a streamed plan or window of a whole
  // one is registered. A streamed plan holds the ops from its oldest unfinished one to its newest
  // step: a window that grows during the run where ranks upstream of a slower link run ahead of
  // it, up to a quarter or more of the plan, where the same fabric with uniform links holds a
  // few percent (tools/resource_guard.hpp). Decided from counts only. 0: no limit.
  std::uint64_t max_ops_held = 0;
  std::string plan_file;  // names the plan in error messages; may be empty
  // Re-share arrivals and departures by region (sim/flow_model.hpp); off, by whole component.
  // The same rates to 1e-9 either way: off is for tests and measurements.
  bool sharing_regions = true;
  // Re-share once per instant, after every arrival and departure of that instant, instead of
  // after each (FlowModel::set_deferred). The same rates to 1e-9 either way, and the same
  // completion times unless two events tie on one later instant, whose order it can change.
  bool share_per_instant = true;
  // Flows hold one link per class of links that every route crosses together, the one of least
  // capacity (sim/tied_links.hpp): the same rates, for less work. Off is for tests and
  // measurements; an observer always sees every link.
  bool tie_links = true;
  // simulate(router, request): when rotating the ranks by some s maps the plan and the topology
  // onto themselves, simulate ranks [0, s) only (sched::rotation_unit, sim/rotation.hpp): p / s
  // times fewer events, the same times to 1e-9 relative. The smallest such s is used; without
  // one, or with capacity traces, background traffic, an observer or record_ops, every rank.
  bool rank_symmetry = false;
  // simulate(router, request): called before each run it tries, with the ranks that run will
  // hold: s for one rank per orbit of a rotation by s, every rank otherwise. It may throw to
  // refuse the run, as the command line's memory limit does; may be empty.
  std::function<void(sched::RankId held)> before_run;
  // simulate(router, plan): register a plan built whole in windows of at least this many ops
  // where the plan allows it (sim/plan_windows.hpp), holding records for the ops between the
  // first unfinished one and the last window registered instead of for every op. 0: every op at
  // the start. The same results either way. Plans read from files (plan_file set) and runs with
  // an observer are registered at the start, so that every error in them is reported first.
  std::size_t window_ops = std::size_t{1} << 20;
  // Prefetch what the next queued events will touch once the records an event may touch (ops
  // held, flows, resources) exceed this many bytes, a core's second-level cache: below it
  // nothing misses, and the prefetching only costs instructions (a tenth of an 8-GPU run's).
  // The same results either way: 0 prefetches always, for tests and measurements.
  std::size_t prefetch_above = std::size_t{1} << 20;
};

// The flow key a transfer from rank `from` to rank `to` is routed with (topo::Router::route):
// under ECMP, one path per ordered pair of ranks.
constexpr std::uint64_t transfer_flow_key(sched::RankId from, sched::RankId to) {
  return std::uint64_t{from} << 32 | to;
}

enum class StopReason : std::uint8_t {
  finished,
  event_limit,
  time_limit,
  cancelled,
  sharing_limit,
  memory_limit
};
std::string_view to_string(StopReason s);

struct OpTiming {
  double ready = 0;  // stream predecessor and dependencies done
  double start = 0;  // began consuming time (both ends ready; copy engine acquired)
  double end = 0;
};

struct ResourceUsage {
  ResourceKind kind = ResourceKind::link;
  std::uint32_t index = 0;  // LinkId for links, NodeId otherwise
  double bytes = 0;         // weight × bytes drained (a reduce counts 3 × its bytes in memory)
  double busy_time = 0;     // seconds with at least one flow draining through it
  double utilisation = 0;   // bytes / (capacity × time) for a limited resource, else busy / time
};

struct CopyEngineUsage {
  topo::NodeId gpu = topo::kNoNode;
  std::uint32_t engines = 0;  // 0: unlimited
  double busy_time = 0;       // engine-seconds held
  double max_wait = 0;        // longest a copy waited for a free engine
};

struct Result {
  double time = 0;           // completion of the last op, seconds
  std::uint64_t events = 0;  // events processed (stale ones excluded)
  std::uint64_t flows = 0;   // flows started (transfers, copies, reductions, background)
  // The most ops the engine held records for at once: the unfinished ops and those above them
  // that were registered (a streamed run's batches, a whole plan's windows), else every op.
  std::uint64_t ops_held = 0;
  std::uint64_t ops_done = 0;
  std::uint64_t ops_total = 0;  // 0 when a streamed plan was stopped before its last batch
  StopReason stop = StopReason::finished;
  // 0, or the run simulated one rank per orbit of this rotation of the ranks (sim/rotation.hpp):
  // events and flows count the representatives' only; per-resource figures hold for every
  // resource of an orbit, copy engines for the representatives' GPUs only.
  sched::RankId rotation = 0;
  // When Options::rank_symmetry was asked for but every rank was simulated: why.
  std::string symmetry_refused;

  std::vector<Bytes> link_bytes;              // by LinkId
  std::vector<double> link_busy;              // by LinkId, seconds with at least one flow
  std::vector<ResourceUsage> resources;       // every resource that carried a flow, by ResourceId
  std::vector<CopyEngineUsage> copy_engines;  // GPUs that ran copies, by NodeId
  std::vector<double> background_end;         // by background index; kUnlimited if unfinished
  std::vector<OpTiming> ops;                  // by OpId when Options::record_ops
  SharingStats sharing;
  // When the run stopped on its pace for Options::max_reshared: the flows it was on pace to
  // re-share in all. 0 otherwise (it also stops at the count itself).
  double sharing_pace = 0;
};

Result simulate(const topo::Router& router, const sched::Plan& plan, const Options& options = {});

// Simulates a plan while it is built: `build(batch)` adds ops to `plan` and calls batch() after
// each batch (sched::Builder::end_batch says where a batch may end) and once at the end. The
// engine registers each batch, drops its rows from `plan` (ids stay absolute), and runs it
// until an op of it is about to finish, so that memory follows the ops in flight, not the
// plan's size: the engine's own records of them, and the plan only the batch being written. Same
// result, bit for bit, as simulate() on the whole plan. Not with an observer, which needs the whole
// plan.
Result simulate_streaming(const topo::Router& router, sched::Plan& plan,
                          const std::function<void(std::function<void()>)>& build,
                          const Options& options = {});

// Whether a streamed run of `request` is the whole plan's, bit for bit: whether the generator
// streams it (sched::streams). Times are the same to the last digit, per op too; the one
// difference is a count: on GPUs with an event latency, a batch's op that waits across streams
// for an op finished more than the latency before the batch existed (hier's last phase does:
// Plan::waits_on_finished) has nothing left to wait for, so the streamed run queues no release
// event for it.
bool streams_exactly(const topo::Router& router, const sched::PlanRequest& request);

// Generates and simulates `request`: streamed where streams_exactly() and no observer is set,
// else as a whole plan (in windows where it allows).
Result simulate(const topo::Router& router, const sched::PlanRequest& request,
                const Options& options = {});

}  // namespace collsim::sim
