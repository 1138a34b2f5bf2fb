#include "sim/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "schedules/ring_column.hpp"
#include "sim/copy_engines.hpp"
#include "sim/event_queue.hpp"
#include "sim/flow_model.hpp"
#include "sim/keyed_heap.hpp"
#include "sim/plan_windows.hpp"
#include "sim/rotation.hpp"
#include "sim/tied_links.hpp"
#include "topology/error.hpp"
#include "topology/huge_pages.hpp"

namespace collsim::sim {

std::string_view to_string(StopReason s) {
  switch (s) {
    case StopReason::finished:
      return "finished";
    case StopReason::event_limit:
      return "event limit reached";
    case StopReason::time_limit:
      return "time limit reached";
    case StopReason::cancelled:
      return "cancelled";
    case StopReason::sharing_limit:
      return "sharing limit reached";
    case StopReason::memory_limit:
      return "memory limit reached";
  }
  return "?";
}

namespace {

using sched::BufferId;
using sched::CopyKind;
using sched::kNoOp;
using sched::kNoRank;
using sched::Memory;
using sched::OpId;
using sched::OpKind;
using sched::RankId;
using topo::NodeId;

enum class OpState : std::uint8_t { waiting, ready, running, done };
enum class Owner : std::uint8_t { transfer, copy, reduce, background };

struct RouteKey {
  NodeId from;
  NodeId to;
  std::uint64_t flow_key;
  friend bool operator==(const RouteKey&, const RouteKey&) = default;
};
struct RouteKeyHash {
  std::size_t operator()(const RouteKey& k) const {
    std::uint64_t h = (std::uint64_t{k.from} << 32 | k.to) * 0x9E3779B97F4A7C15ull;
    h ^= k.flow_key + 0x7F4A7C159E3779B9ull + (h << 6) + (h >> 2);
    return static_cast<std::size_t>(h);
  }
};

class Engine {
 public:
  // `growing`: the plan arrives in batches (add_batch), and the engine drops the ops it has
  // finished from it.
  Engine(const topo::Router& router, const sched::Plan& plan, const Options& options,
         sched::Plan* growing = nullptr)
      : router_(router),
        topo_(router.topology()),
        plan_(plan),
        options_(options),
        map_(router.topology()),
        growing_(growing) {}

  // The whole plan at once.
  Result run();
  // Takes the ops added since the last call and simulates until an op of this batch is about to
  // finish (the next batch must exist by then) or the run stops early; false once it has
  // stopped early, when the rest of the plan is not needed.
  bool add_batch();
  // After the last batch: simulates to the end.
  Result finish();

 private:
  std::string describe(OpId op) const;
  void validate_ranks() const;
  // Validates ops [from, n), n being the ops the plan has so far, and adds their records, filled
  // with what running them reads of the plan: validation reads those columns anyway, so one pass
  // does both. Returns whether some copy runs on a GPU with a limited number of copy engines.
  bool add_records(OpId from, OpId n);
  void validate_options() const;
  void setup();
  std::vector<double> capacities() const;  // by resource, as the topology states them
  // Registers ops [registered_, end).
  void add_ops(OpId end);
  // Links ops [from, to), their records added (after all of them: a dependency may name a later
  // op), to their stream predecessors and dependencies, and resolves their routes (every route of
  // a batch before it runs, so that an unreachable peer is reported before any time is spent
  // simulating it). `later`: a batch after the first, none of whose ops may be ready yet.
  void link(OpId from, OpId to, bool later);
  void add_successor(OpId op, OpId succ);
  void advance();
  // Whether `e` completes an op numbered trigger_ or more, before which the next batch must exist.
  bool completes_newest(const Event& e) const;
  void forget_finished();
  // Prefetches what the next few queued events will touch, in stages: the farthest event's flow
  // record, then its use list and op record, then its resources and the records of the op's
  // partner and successors, then the partner's successors. Without it most events wait on cache
  // misses: a ring's successor op is a ring step further on in the plan.
  void prefetch_ahead() const;
  // Whether to (Options::prefetch_above): checked as the op window and the flow records grow;
  // once on, it stays on.
  bool prefetching_ = false;
  void update_prefetching() {
    prefetching_ = prefetching_ || (registered_ - ops_base_) * sizeof(OpRecord) +
                                           flow_info_.size() * sizeof(FlowInfo) +
                                           flows_.footprint() >=
                                       options_.prefetch_above;
  }
  // The event queue and the moved completions, merged in (time, sequence) order.
  bool no_events() const { return queue_.empty() && moved_.empty(); }
  double next_time() const {
    if (moved_.empty()) return queue_.next_time();
    const double t = std::bit_cast<double>(moved_.top().time_bits);
    return queue_.empty() ? t : std::min(t, queue_.next_time());
  }
  Event next_event();
  OpId op_of(std::uint32_t id, EventKind kind) const {
    OpId op = kNoOp;
    if (kind == EventKind::op_done || kind == EventKind::release) op = id;
    if ((kind == EventKind::flow_done || kind == EventKind::latency_done) &&
        id < flows_.num_flow_slots() && flow_info_[id].owner != Owner::background)
      op = flow_info_[id].index;
    return op >= ops_base_ && op < registered_ ? op : kNoOp;
  }
  void prefetch_op(OpId op) const { collsim::prefetch(&ops_[op]); }
  NodeId endpoint(RankId rank, sched::BufferId buffer) const;
  std::uint32_t resolve(OpId op);  // sends, d2h and h2d copies
  // A resolved route, flattened: its links are route_links_[begin, end), and those its flows
  // hold in the flow model, one per class of tied links, shared_links_[share_begin, share_end).
  struct FlatRoute {
    std::uint32_t begin = 0;
    std::uint32_t end = 0;
    std::uint32_t share_begin = 0;
    std::uint32_t share_end = 0;
    double latency = 0;
  };
  const FlatRoute& route_of(OpId op) const { return flat_routes_[rec(op).route_state >> 2]; }
  std::uint32_t add_route(const topo::Route& route);
  // Ties the links of routes [from, end) and gives them their shared links; when that unties
  // links of earlier routes, their flows and shared links gain the new representatives.
  void share_routes();
  void add_uses(FlowId f, const FlatRoute& route) {
    for (std::uint32_t i = route.share_begin; i < route.share_end; ++i)
      use(f, shared_links_[i], 1.0);
  }
  // A flow of a rotated plan uses the representative of each resource's orbit, once for every
  // image of it that crosses the resource (sim/rotation.hpp).
  void use(FlowId f, ResourceId r, double weight) {
    if (rotation_)
      flows_.add_use_merged(f, rotation_->representative(r), weight * rotation_->copies(r));
    else
      flows_.add_use(f, r, weight);
  }
  // Whether a matched send and recv name each other's ranks, in a rotated plan up to moving
  // the transfer by a multiple of the rotation.
  bool ends_agree(const sched::Plan::Fields& send, const sched::Plan::Fields& recv) const;

  void ready(OpId op);
  void start_transfer(OpId send, OpId recv);
  void start_copy(OpId op);
  void complete(OpId op);
  // `from` has finished: count it off `to`'s predecessors, after the event latency of `to`'s GPU
  // when the two run on different streams.
  void release(OpId from, OpId to) {
    if (event_latency_ && delay_release(from, to)) return;
    if (--rec(to).pending == 0) ready(to);
  }
  // Queues the release instead when the edge pays an event latency.
  [[gnu::noinline]] bool delay_release(OpId from, OpId to);
  // Copy engines are handed out when the instant has no other event left: a copy_grant event
  // queued at the first copy that waits or engine that frees puts itself back at the end of the
  // instant until then. An event rather than a check in the loop, which runs without copies too.
  void queue_grant() {
    if (grant_queued_) return;
    grant_queued_ = true;
    queue_.push(now_, EventKind::copy_grant, 0);
  }
  [[gnu::noinline]] void copy_grant();
  FlowId new_flow(Owner owner, std::uint32_t index, double bytes);
  void launch(FlowId f, double latency);
  void schedule_rescheduled();
  // Re-shares what the instant's arrivals and departures left pending, if anything.
  void share_pending() {
    if (!flows_.pending()) return;
    flows_.flush(now_);
    schedule_rescheduled();
  }
  void flow_done(FlowId f);
  [[noreturn]] void report_stuck() const;
  Result collect(StopReason stop);

  const topo::Router& router_;
  const topo::Topology& topo_;
  const sched::Plan& plan_;
  const Options& options_;
  ResourceMap map_;
  sched::Plan* growing_;  // null: the plan is whole
  Observer* observer_ = nullptr;

  // Per op, indexed by OpId.
  // Everything the hot loop reads and writes about an op, in one 32-byte record so that the
  // random accesses of a large plan cost one cache miss per op, not one per field: what running
  // it reads of the plan is copied in when the op is added.
  static constexpr std::uint32_t kWideBytes = ~std::uint32_t{0};  // the size is the plan's
  struct alignas(32) OpRecord {
    std::uint32_t pending = 0;      // unfinished stream predecessor + dependencies
    OpId stream_next = kNoOp;       // next op on the same (rank, stream)
    std::uint32_t succ = kNoOp;     // the one successor, or kMany | group (see below)
    std::uint32_t route_state = 0;  // route index (sends, PCIe copies) << 2 | OpState
    OpId partner = kNoOp;           // sends and recvs
    RankId rank = 0;
    std::uint32_t bytes = 0;  // kWideBytes: in extra_
    OpKind kind = OpKind::compute;
    CopyKind copy = CopyKind::d2d;  // copies
    sched::StreamId stream = 0;
  };
  static_assert(sizeof(OpRecord) == 32);
  // What running an op reads beyond its record, for the few ops that have it: the size of one
  // that moves 4 GiB or more (not of a recv, whose send's is read), the duration of a compute
  // or delay. A streamed run drops the plan's rows once their ops are registered (add_batch()),
  // so the engine keeps its own copy; each leaves when its op completes.
  std::unordered_map<OpId, double> extra_;
  bool has_extra(const OpRecord& r) const {
    return r.kind == OpKind::compute || r.kind == OpKind::delay ||
           (r.bytes == kWideBytes && r.kind != OpKind::recv);
  }
  double bytes_of(OpId op) const {
    const std::uint32_t b = rec(op).bytes;
    return b != kWideBytes ? static_cast<double>(b) : extra_.at(op);
  }
  // Records of ops [ops_base_, registered_): a streamed run forgets the finished ones below.
  // A ring, as the plan's columns: a record is one masked index away. (Chunks of 2^17 records
  // found through a table touched less memory, but every access waited on the table's load
  // first, and the records are the hot loop's most frequent access: 5 % of the ring's time.)
  sched::RingColumn<OpRecord, huge_pages::Use::hot> ops_;
  OpId ops_base_ = 0;
  OpId registered_ = 0;  // one past the last op added
  // The next batch must exist before an op numbered this or more completes: a streamed run's
  // newest batch's first op, or the next window's trigger (sim/plan_windows.hpp).
  OpId trigger_ = 0;
  OpId unfinished_ = 0;  // every op below is done
  bool last_batch_ = true;
  bool started_ = false;
  std::optional<Event> held_;  // popped, and waiting for the next batch to exist
  StopReason stop_ = StopReason::finished;
  OpRecord& rec(OpId op) { return ops_[op]; }
  const OpRecord& rec(OpId op) const { return ops_[op]; }
  OpState state(OpId op) const {
    return op < ops_base_ ? OpState::done : static_cast<OpState>(rec(op).route_state & 3u);
  }
  void set_state(OpId op, OpState s) {
    rec(op).route_state = (rec(op).route_state & ~3u) | static_cast<std::uint32_t>(s);
  }
  bool all_done() const { return last_batch_ && done_ == registered_; }
  // Successors through dependencies. Most ops have at most one (a ring's recv feeds one reduce,
  // its reduce one send), kept in the record itself: no successor array the size of the plan and
  // no second cache miss to reach it. An op with more holds kMany | g, and its successors are
  // groups_[g], in increasing op order; a group is recycled once its op is done. An op id of
  // 2^31 or more is always put in a group, so that it never looks like kMany | g.
  static constexpr std::uint32_t kMany = 1u << 31;
  std::vector<std::vector<OpId>> groups_;
  std::vector<std::uint32_t> free_groups_;
  // The last op added on each (rank, stream) while it is unfinished (kNoOp once done): the
  // stream predecessor the next op on that stream waits for. A rank's first kInlineStreams
  // streams sit in one rank-major array, so that a step's pass over the ranks reads it in order
  // (a vector per rank cost a cache miss per op at 4096 ranks); higher streams, which only
  // multi-channel schedules use, in a vector per rank.
  static constexpr std::uint32_t kInlineStreams = 8;
  std::vector<OpId> last_on_stream_;
  std::vector<std::vector<OpId>> last_on_high_stream_;
  OpId& last_on_stream(RankId rank, sched::StreamId stream) {
    if (stream < kInlineStreams)
      return last_on_stream_[std::size_t{rank} * kInlineStreams + stream];
    std::vector<OpId>& high = last_on_high_stream_[rank];
    if (stream - kInlineStreams >= high.size()) high.resize(stream - kInlineStreams + 1u, kNoOp);
    return high[stream - kInlineStreams];
  }
  // Sends, d2h and h2d copies keep the index of their route (into flat_routes_) in their record,
  // resolved before the run: finding it again in the hot loop would read the other end of the
  // transfer, a cache miss when the plan is large.
  // The last few routes each rank looked up while resolving, the latest first: a ring's rank
  // always sends to the same peer, and a tree's rank sends to a handful (its parent and children
  // in each tree), in turn; so resolution rarely reaches the hash map, whose look-ups at
  // 131,072 GPUs were a cache miss each, a second of the tree's registration.
  struct RouteCacheEntry {
    RouteKey key{topo::kNoNode, topo::kNoNode, 0};
    std::uint32_t index = 0;
  };
  static constexpr std::size_t kRoutesPerRank = 4;
  using RankRoutes = std::array<RouteCacheEntry, kRoutesPerRank>;
  std::vector<RankRoutes> route_cache_;  // by rank
  // The route index of a transfer or copy of `op`'s rank: the rank's last one when the same, as
  // it mostly is (inline, so that the common case costs no call), else lookup_new().
  std::uint32_t lookup(NodeId from, NodeId to, std::uint64_t flow_key, OpId op) {
    const RouteKey key{from, to, flow_key};
    RankRoutes& cached = route_cache_[rec(op).rank];
    if (cached[0].key == key) return cached[0].index;
    return lookup_new(key, cached, op);
  }
  [[gnu::noinline]] std::uint32_t lookup_new(const RouteKey& key, RankRoutes& cached, OpId op);
  std::vector<OpTiming> timing_;  // only when recording or observed
  // Each rank's GPU's alpha, launch and event latency, reduce traffic for the plan's dtype and
  // memory resource: topology nodes are large records spread over the whole machine, one cache
  // miss per transfer when read in the hot loop.
  std::vector<double> rank_alpha_, rank_launch_, rank_event_, rank_reduce_traffic_;
  std::vector<ResourceId> rank_memory_;
  bool event_latency_ = false;  // some rank's is non-zero
  // A streamed run on GPUs with an event latency: a batch's op may wait, across streams, for an
  // op that finished before the batch existed (hier's last phase waits for reductions of the
  // phase before; Plan::waits_on_finished), and must still wait out the latency from that op's
  // end. So such a run keeps, by op, the end and the (rank, stream) that ran it, from before
  // the oldest unfinished op back to where every op ended more than the longest latency ago:
  // those have been released, whatever the latency. It costs a cache miss per op (rings spent
  // 20-40 % more time), so plans that do not declare such waits do without. Stream
  // predecessors need nothing of this: an op of a later batch also waits for an op of the
  // batch before, which ends after the batch is registered, so on another stream its latency
  // ends later, and on the same stream it is the stream predecessor.
  struct Finished {
    double end = -1;  // unfinished
    RankId rank = 0;
    sched::StreamId stream = 0;
  };
  bool keep_finished_ = false;
  double longest_event_latency_ = 0;
  sched::RingColumn<Finished> finished_;
  // Whether `to`, being registered, waits for the done op `from`'s release: queued then.
  bool release_pending(OpId from, OpId to);
  // Whether copies on `gpu` may have to wait for an engine, now that a copy of `rank` on `stream`
  // is added: more (rank, stream) pairs carry engine copies on the GPU than it has engines. A
  // stream runs one op at a time, so with no more pairs than engines every copy finds one free,
  // and the order in which copies are served never decides anything.
  bool copies_may_queue(topo::NodeId gpu, RankId rank, sched::StreamId stream);
  // copies_may_queue() for every engine copy of the whole plan, before its first window is
  // registered (run()).
  void note_copy_lanes();
  std::unordered_set<std::uint64_t> copy_lanes_;  // (rank, stream) pairs with engine copies
  std::vector<std::uint32_t> copy_lanes_on_;      // by GPU, the pairs above on it
  // By rank, the stream of its last engine copy: most copies are on the same stream as the one
  // before, and need no look-up in copy_lanes_.
  std::vector<std::uint32_t> last_copy_stream_;
  bool grant_queued_ = false;       // a copy_grant event is queued
  bool copies_queue_ = false;       // some GPU's copies may wait: so they may from now on
  bool share_per_instant_ = false;  // Options::share_per_instant, unless copies may queue
  bool track_ = false;
  bool progress_ = false;  // Options::progress is set

  std::unordered_map<RouteKey, std::uint32_t, RouteKeyHash> routes_;
  // Routes by index, their links copied into one array: the router's Route objects sit wherever
  // the heap put them, and following a pointer to one and then to its link list cost two cache
  // misses per transfer on the 1024-GPU cluster.
  std::vector<FlatRoute> flat_routes_;
  std::vector<ResourceId> route_links_;
  std::vector<ResourceId> shared_links_;
  std::uint32_t shared_routes_ = 0;  // routes [0, shared_routes_) have their shared links
  // Options::tie_links, unless an observer watches every link's load.
  bool tie_ = false;
  std::unique_ptr<Rotation> rotation_;  // a rotated plan's orbits of resources; else null
  TiedLinks tied_;

  // Where a flow's live completion is: in queue_, in moved_, or neither.
  enum class Queued : std::uint8_t { none, queue, moved };
  // What the engine knows of a flow slot, in one record: at 100,000 GPUs a flow's event missed
  // the cache once per array when these were five arrays. 32 bytes, so that a record never
  // straddles two lines and counting the slots is a shift.
  struct alignas(32) FlowInfo {
    double bytes = 0;
    double start = 0;         // when the flow was created (a copy's engine taken)
    std::uint32_t index = 0;  // op (send side for transfers) or background index
    Owner owner = Owner::transfer;
    Queued queued = Queued::none;
  };
  static_assert(sizeof(FlowInfo) == 32);
  // By FlowId, as many as the flow model's slots (new_flow()): the event loop's bounds checks
  // ask the model, which keeps the count, rather than divide this vector's byte size.
  HugeVector<FlowInfo, huge_pages::Use::hot> flow_info_;

  CopyEngines copies_;
  struct AppliedChange {
    ResourceId resource;
    double bandwidth;
    double time;
  };
  std::vector<AppliedChange> capacity_changes_;
  std::vector<double> background_end_;
  std::vector<std::uint32_t> background_routes_;  // flat route of each background flow

  FlowModel flows_;
  EventQueue queue_;
  // Completions moved by a re-share after they were queued (sim/keyed_heap.hpp). The next
  // event is the earlier of the two fronts (next_event()).
  KeyedHeap moved_;
  // Completion events in queue_ superseded by a rate change; swept out once they are more than
  // half the queue and more than kMinSweep.
  std::uint64_t stale_events_ = 0;
  static constexpr std::uint64_t kMinSweep = 1u << 16;
  static constexpr std::uint64_t kProgressEvery = (std::uint64_t{1} << 16) - 1;  // a mask
  // Heavy sharing can spend minutes on fewer than 2^16 events (an all-to-all re-shares most of
  // its flows at every arrival and departure): the display also hears of every 2^22 flows
  // re-shared, a few tenths of a second of filling.
  static constexpr std::uint64_t kProgressFilled = std::uint64_t{1} << 22;
  static constexpr std::uint64_t kSharingChecks = 2048;  // Options::max_reshared, first check
  static constexpr double kPaceMargin = 4;
  std::uint64_t next_progress_filled_ = kProgressFilled;
  void report_progress();
  std::uint64_t ops_total() const;  // 0 while a streamed plan is still being generated
  // Options::max_reshared: the next count of flows re-shared at which the limit is checked.
  std::uint64_t next_sharing_check_ = ~std::uint64_t{0};
  // The counts at the last check after which an op had finished: the pace is read from there.
  std::uint64_t paced_filled_ = 0;
  std::uint64_t paced_done_ = 0;
  double pace_ = 0;  // Result::sharing_pace: 0 unless the pace stopped the run
  bool over_sharing_limit(std::uint64_t filled);
  // Options::max_ops_held, read once a batch or window is registered; sets stop_.
  bool over_held_limit();
  double now_ = 0;
  double last_end_ = 0;
  std::size_t done_ = 0;
  std::uint64_t events_ = 0;
  std::uint64_t flow_count_ = 0;
  std::uint64_t ops_held_ = 0;  // the most op records held at once
};

std::string Engine::describe(OpId op) const {
  if (op >= plan_.first_op() && op < plan_.num_ops()) {
    const OpKind k = plan_.kind(op);
    std::string what(sched::to_string(k));
    if (k == OpKind::send) what = fmt::format("send to rank {}", plan_.peer(op));
    if (k == OpKind::recv) what = fmt::format("recv from rank {}", plan_.peer(op));
    if (k == OpKind::copy)
      what = fmt::format("copy {}", sched::to_string(sched::copy_kind(plan_.src(op).buffer,
                                                                      plan_.dst(op).buffer)));
    return fmt::format("op {} (rank {}, stream {}, {})", op, plan_.rank(op), plan_.stream(op),
                       what);
  }
  // A streamed run's registered op, whose row the plan dropped: what its record keeps. (The
  // peer is the partner's rank, which a rotated plan may hold as an image of the true peer.)
  const OpRecord& r = rec(op);
  std::string what(sched::to_string(r.kind));
  const bool held = r.partner >= ops_base_ && r.partner < registered_;  // unfinished, so held
  if ((r.kind == OpKind::send || r.kind == OpKind::recv) && held)
    what = fmt::format("{}, matched with op {} of rank {}", what, r.partner, rec(r.partner).rank);
  if (r.kind == OpKind::copy) what = fmt::format("copy {}", sched::to_string(r.copy));
  return fmt::format("op {} (rank {}, stream {}, {})", op, r.rank, r.stream, what);
}

void Engine::validate_ranks() const {
  DiagnosticSink sink(options_.plan_file);
  const RankId p = plan_.num_ranks();
  for (RankId r = 0; r < p; ++r) {
    const NodeId g = plan_.rank_gpu[r];
    if (g >= topo_.num_nodes() || topo_.node(g).kind != topo::NodeKind::gpu)
      sink.error(fmt::format("/rank_gpu/{}", r),
                 fmt::format("rank {} is bound to {}, which is not a GPU of topology '{}'; bind "
                             "every rank to a GPU node",
                             r,
                             g >= topo_.num_nodes() ? fmt::format("node id {}", g)
                                                    : "node '" + topo_.node(g).name + "'",
                             topo_.name()));
  }
  sink.throw_if_any();
}

bool Engine::add_records(OpId from, OpId n) {
  DiagnosticSink sink(options_.plan_file);
  const RankId p = plan_.num_ranks();
  auto error = [&](OpId op, const std::string& message) {
    if (sink.full())
      sink.error({}, {});  // counted only
    else
      sink.error(fmt::format("/ops/{}", op), describe(op) + ": " + message);
  };
  ops_.reserve(n - ops_.front());
  bool queues = false;
  const RankId held = plan_.ranks_held();
  for (OpId op = from; op < n; ++op) {
    // The row read once, the record written once: the checks below read the locals, which
    // stores into the record cannot change.
    const sched::Plan::Fields f = plan_.fields(op);
    const OpKind k = f.kind;
    const Bytes bytes = f.bytes;
    OpRecord& r = ops_.emplace_back();
    r.rank = f.rank;
    r.kind = k;
    r.partner = f.partner;
    r.stream = f.stream;
    r.bytes = bytes < kWideBytes ? static_cast<std::uint32_t>(bytes) : kWideBytes;
    if (f.rank >= p) {
      sink.error(fmt::format("/ops/{}", op),
                 fmt::format("op {} belongs to rank {}, but the plan has {} ranks (0..{})", op,
                             f.rank, p, p == 0 ? 0 : p - 1));
      continue;
    }
    if (f.rank >= held)
      throw InternalError(
          fmt::format("op {} of rank {} in a plan rotated by {}, which holds "
                      "ranks 0..{} only",
                      op, f.rank, plan_.rotation, plan_.rotation - 1));
    for (OpId d : f.deps)
      if (d >= n)
        error(op,
              fmt::format("depends on op {}, which does not exist (the plan has {} ops)", d, n));
    if (k == OpKind::compute || k == OpKind::delay)
      extra_[op] = f.seconds;
    else if (bytes >= kWideBytes && k != OpKind::recv)  // has_extra(r), from the locals
      extra_[op] = static_cast<double>(bytes);          // exact: at most kMaxSize, 2^50
    if (bytes > kMaxSize)
      error(op,
            fmt::format("moves {} bytes, more than the limit of {}", bytes, format_size(kMaxSize)));
    // Read only where needed: most ops are transfers of device buffers, which never ask.
    auto gpu = [&] { return plan_.rank_gpu[f.rank]; };
    auto host_missing = [&] { return topo_.host_cpu(gpu()) == topo::kNoNode; };
    if (k == OpKind::send || k == OpKind::recv) {
      const OpId q = f.partner;
      const char* other = k == OpKind::send ? "recv" : "send";
      if (q == kNoOp || q >= n) {
        error(op,
              fmt::format("has no matched {}; match every send with the recv of its peer", other));
        continue;
      }
      if (q < from)
        throw InternalError(
            fmt::format("{} is matched with op {} of an earlier batch; a "
                        "generator must not end a batch inside a transfer",
                        describe(op), q));
      const sched::Plan::Fields g = plan_.fields(q);
      if (g.partner != op) {
        error(op, fmt::format("is matched with {}, which is matched with op {} instead",
                              describe(q), g.partner));
        continue;
      }
      // The pair's kinds, ends and sizes are checked once, from the end with the lower id: the
      // other end, already known to name this one back, has nothing new to find.
      if (q >= op) {
        if (g.kind != (k == OpKind::send ? OpKind::recv : OpKind::send)) {
          error(op, fmt::format("is matched with {}, which is not a {}", describe(q), other));
          continue;
        }
        if (!(k == OpKind::send ? ends_agree(f, g) : ends_agree(g, f)))
          error(op,
                fmt::format("is matched with {}, but their ranks and peers disagree", describe(q)));
        if (bytes != g.bytes)
          error(op, fmt::format("moves {} bytes but its matched {} moves {} bytes; both ends of a "
                                "transfer must agree",
                                bytes, describe(q), g.bytes));
      }
      const auto buffer = k == OpKind::send ? f.src_buffer : f.dst_buffer;
      if (sched::memory_of(buffer) == Memory::host && host_missing())
        error(op, fmt::format("uses host memory, but GPU '{}' reaches no CPU; connect a CPU to it "
                              "or use a device buffer",
                              topo_.node(gpu()).name));
    } else if (k == OpKind::copy) {
      const auto ck = sched::copy_kind(f.src_buffer, f.dst_buffer);
      r.copy = ck;
      if (ck != CopyKind::host) queues |= copies_may_queue(gpu(), f.rank, f.stream);
      if (ck != CopyKind::d2d && host_missing())
        error(op, fmt::format("uses host memory, but GPU '{}' reaches no CPU; connect a CPU to it "
                              "or use a device buffer",
                              topo_.node(gpu()).name));
    } else if (k == OpKind::compute || k == OpKind::delay) {
      const double s = f.seconds;
      if (!(s >= 0 && s <= kMaxDuration))
        error(op,
              fmt::format("lasts {} s; expected a duration between 0 and {} s", s, kMaxDuration));
    }
  }
  sink.throw_if_any();
  return queues;
}

bool Engine::copies_may_queue(topo::NodeId gpu, RankId rank, sched::StreamId stream) {
  if (copies_queue_) return true;
  const std::uint32_t engines = topo_.node(gpu).copy_engines;
  if (engines == 0) return false;
  if (last_copy_stream_.empty()) {
    last_copy_stream_.assign(plan_.num_ranks(), ~std::uint32_t{0});
    copy_lanes_on_.assign(topo_.num_nodes(), 0);
  }
  if (last_copy_stream_[rank] == stream) return false;
  last_copy_stream_[rank] = stream;
  if (copy_lanes_.insert(std::uint64_t{rank} << 16 | stream).second) ++copy_lanes_on_[gpu];
  copies_queue_ = copy_lanes_on_[gpu] > engines;
  // Copies that wait are served in the order of their ready times, and one ulp between two of
  // them decides which copy waits (docs/cost-model.md, "Copy engines"). One rank per orbit
  // computes those times in another order than every rank does (a flow standing for m images
  // weighs m times on a resource they share), and a direct all-to-all of the T4 box with
  // pageable host memory then ended 0.2 % apart. Every GPU of a rotated plan holds one rank
  // (Rotation refuses two on one GPU), so its lanes are counted as in the run of every rank.
  if (copies_queue_ && plan_.rotation != 0)
    throw NotSymmetric(
        fmt::format("GPU '{}' has copies on {} (rank, stream) pairs and {} copy engines, so "
                    "copies may wait for one; which one waits turns on the last bits of their "
                    "ready times, which one rank per orbit does not compute as the run of every "
                    "rank does",
                    topo_.node(gpu).name, copy_lanes_on_[gpu], engines),
        false);
  return copies_queue_;
}

void Engine::note_copy_lanes() {
  const auto n = static_cast<OpId>(plan_.num_ops());
  for (OpId op = 0; op < n && !copies_queue_; ++op) {
    if (plan_.kind(op) != OpKind::copy) continue;
    const RankId rank = plan_.rank(op);
    if (rank >= plan_.num_ranks()) continue;  // add_records() reports it
    if (sched::copy_kind(plan_.src(op).buffer, plan_.dst(op).buffer) != CopyKind::host)
      copies_may_queue(plan_.rank_gpu[rank], rank, plan_.stream(op));
  }
}

bool Engine::ends_agree(const sched::Plan::Fields& send, const sched::Plan::Fields& recv) const {
  const RankId p = plan_.num_ranks();
  const RankId from = send.rank, to = send.peer;
  const RankId image_to = recv.rank, image_from = recv.peer;
  if (plan_.rotation == 0) return to == image_to && from == image_from;
  if (to >= p || image_from >= p) return false;
  const RankId moved = (to + p - image_to) % p;
  return moved % plan_.rotation == 0 && (from + p - image_from) % p == moved;
}

void Engine::validate_options() const {
  DiagnosticSink sink("");
  if (plan_.rotation != 0 &&
      (!options_.capacity.empty() || !options_.background.empty() || observer_ != nullptr))
    throw NotSymmetric(
        "capacity traces, background traffic and observers concern single links and ranks, "
        "which a plan of one rank per orbit does not simulate");
  for (std::size_t i = 0; i < options_.capacity.size(); ++i) {
    const auto& trace = options_.capacity[i];
    if (trace.link >= topo_.num_links())
      sink.error(fmt::format("capacity[{}].link", i),
                 fmt::format("link id {} does not exist; topology '{}' has {} directed links",
                             trace.link, topo_.name(), topo_.num_links()));
    for (std::size_t j = 0; j < trace.changes.size(); ++j) {
      const auto& c = trace.changes[j];
      if (!(c.time >= 0 && c.time <= kMaxDuration))
        sink.error(
            fmt::format("capacity[{}].changes[{}].time", i, j),
            fmt::format("found {} s; expected a time between 0 and {} s", c.time, kMaxDuration));
      // Below 1 B/s a flow could need more than the largest double to drain: call it failed.
      const bool valid = c.bandwidth == 0 || c.bandwidth == kUnlimited ||
                         (c.bandwidth >= 1 && c.bandwidth <= kMaxBandwidth);
      if (!valid)
        sink.error(fmt::format("capacity[{}].changes[{}].bandwidth", i, j),
                   fmt::format("found {} B/s; expected 0 (failed), 1 B/s up to {} B/s, or "
                               "unlimited",
                               c.bandwidth, kMaxBandwidth));
    }
  }
  for (std::size_t i = 0; i < options_.background.size(); ++i) {
    const auto& b = options_.background[i];
    if (b.from >= topo_.num_nodes() || b.to >= topo_.num_nodes())
      sink.error(fmt::format("background[{}]", i),
                 fmt::format("endpoints {} -> {} are not both nodes of topology '{}' ({} nodes)",
                             b.from, b.to, topo_.name(), topo_.num_nodes()));
    if (!(b.start >= 0 && b.start <= kMaxDuration))
      sink.error(
          fmt::format("background[{}].start", i),
          fmt::format("found {} s; expected a time between 0 and {} s", b.start, kMaxDuration));
    if (b.bytes > kMaxSize)
      sink.error(fmt::format("background[{}].bytes", i),
                 fmt::format("found {} bytes; the limit is {}", b.bytes, format_size(kMaxSize)));
  }
  sink.throw_if_any();
}

void Engine::add_successor(OpId op, OpId succ) {
  std::uint32_t& slot = rec(op).succ;
  if (slot == kNoOp && succ < kMany) {
    slot = succ;
    return;
  }
  if (slot == kNoOp || !(slot & kMany)) {
    std::uint32_t g;
    if (!free_groups_.empty()) {
      g = free_groups_.back();
      free_groups_.pop_back();
    } else {
      g = static_cast<std::uint32_t>(groups_.size());
      if (g >= kMany) throw InternalError("more than 2^31 ops with several successors in flight");
      groups_.emplace_back();
    }
    if (slot != kNoOp) groups_[g].push_back(slot);
    slot = kMany | g;
  }
  groups_[slot & ~kMany].push_back(succ);
}

void Engine::link(OpId from, OpId to, bool later) {
  // Stream order (the previous op on the same rank and stream) and dependencies, each counted
  // only while the op waited for is not done; successors are added in increasing op order, the
  // order complete() readies them in, hence the order of the run.
  for (OpId op = from; op < to; ++op) {
    // The stream predecessor and the dependency of an op a few places on are usually ops of an
    // earlier batch, far back in the records (a ring step back: 10 MiB at 1024 ranks and
    // k = 64), whose records the loop reads: fetch them now. Of the dependencies, only an op's
    // single one, read in one load: a loop over every op's list added 1.6 % to a ring's
    // instructions, this 0.8 %.
    if (const OpId ahead = op + 16; ahead < to) {
      const OpId prev = last_on_stream(rec(ahead).rank, rec(ahead).stream);
      if (prev != kNoOp && prev >= ops_base_) prefetch_op(prev);
      if (const OpId d = plan_.only_dep(ahead); d != kNoOp && d >= ops_base_) prefetch_op(d);
    }
    OpRecord& r = rec(op);
    // A stream's last op leaves this table when it completes (complete()), so an op found here
    // is unfinished without reading its record, a cache miss far back in the window.
    OpId& last = last_on_stream(r.rank, r.stream);
    if (last != kNoOp) {
      rec(last).stream_next = op;
      ++r.pending;
    }
    last = op;
    for (OpId d : plan_.deps(op))
      if (state(d) != OpState::done) {
        ++r.pending;
        add_successor(d, op);
      } else if (keep_finished_ && release_pending(d, op)) {
        ++r.pending;
      }
    // Nothing of a later batch can have been ready before it was added (Builder::end_batch).
    if (later && r.pending == 0)
      throw InternalError(
          fmt::format("{} of a batch starting at op {} waits for nothing of the "
                      "batch before; the generator ended that batch too early",
                      describe(op), from));
    if (r.kind == OpKind::send ||
        (r.kind == OpKind::copy && (r.copy == CopyKind::d2h || r.copy == CopyKind::h2d)))
      r.route_state |= resolve(op) << 2;
  }
}

NodeId Engine::endpoint(RankId rank, sched::BufferId buffer) const {
  const NodeId gpu = plan_.rank_gpu[rank];
  return sched::memory_of(buffer) == Memory::host ? topo_.host_cpu(gpu) : gpu;
}

std::uint32_t Engine::lookup_new(const RouteKey& key, RankRoutes& cached, OpId op) {
  // The rank's other recent routes; the one found, or the new one, becomes the latest.
  std::size_t way = 1;
  while (way < kRoutesPerRank && !(cached[way].key == key)) ++way;
  if (way < kRoutesPerRank) {
    const RouteCacheEntry hit = cached[way];
    std::copy_backward(cached.begin(), cached.begin() + static_cast<std::ptrdiff_t>(way),
                       cached.begin() + static_cast<std::ptrdiff_t>(way) + 1);
    cached[0] = hit;
    return hit.index;
  }
  const NodeId from = key.from, to = key.to;
  const std::uint64_t flow_key = key.flow_key;
  auto it = routes_.find(key);
  if (it == routes_.end()) {
    const topo::Route* route = nullptr;
    try {
      route = &router_.route(from, to, flow_key);
    } catch (const InputError& e) {
      throw InputError(options_.plan_file, fmt::format("/ops/{}", op),
                       fmt::format("{} cannot be routed: {}", describe(op), e.what()));
    }
    // Route indices share a 32-bit word with the op's state: 2^30 distinct routes at most.
    if (flat_routes_.size() >= (std::size_t{1} << 30))
      throw InternalError("more than 2^30 distinct routes in one plan");
    it = routes_.emplace(key, add_route(*route)).first;
  }
  std::copy_backward(cached.begin(), cached.end() - 1, cached.end());
  cached[0] = RouteCacheEntry{key, it->second};
  return it->second;
}

std::uint32_t Engine::add_route(const topo::Route& route) {
  FlatRoute flat;
  flat.begin = static_cast<std::uint32_t>(route_links_.size());
  for (topo::LinkId l : route.links) route_links_.push_back(map_.link(l));
  flat.end = static_cast<std::uint32_t>(route_links_.size());
  flat.latency = route.latency;
  flat_routes_.push_back(flat);
  return static_cast<std::uint32_t>(flat_routes_.size() - 1);
}

void Engine::share_routes() {
  const std::uint32_t from = shared_routes_;
  const auto end = static_cast<std::uint32_t>(flat_routes_.size());
  std::uint32_t first = from;
  if (tie_) {
    for (std::uint32_t i = from; i < end; ++i)
      tied_.add_route(route_links_.data() + flat_routes_[i].begin,
                      route_links_.data() + flat_routes_[i].end);
    const std::vector<TiedLinks::Split> splits = tied_.take_splits();
    for (const TiedLinks::Split& s : splits) flows_.split_tied(s.from, s.tied);
    // A split adds a representative to routes that had their shared links: rebuild them all
    // (classes only split, so this happens at most once per link in a run).
    if (!splits.empty()) {
      first = 0;
      shared_links_.clear();
    }
  }
  for (std::uint32_t i = first; i < end; ++i) {
    FlatRoute& route = flat_routes_[i];
    route.share_begin = static_cast<std::uint32_t>(shared_links_.size());
    for (std::uint32_t l = route.begin; l < route.end; ++l)
      if (!tie_ || tied_.is_representative(route_links_[l]))
        shared_links_.push_back(route_links_[l]);
    route.share_end = static_cast<std::uint32_t>(shared_links_.size());
  }
  shared_routes_ = end;
}

std::uint32_t Engine::resolve(OpId op) {
  const RankId r = rec(op).rank;
  const std::size_t known = flat_routes_.size();
  std::uint32_t index = 0;
  if (rec(op).kind == OpKind::send) {
    // The send's peer, not the recv's rank: in a rotated plan the recv may be an image's.
    const RankId peer = plan_.peer(op);
    const BufferId from = plan_.src(op).buffer, to = plan_.dst(rec(op).partner).buffer;
    index = lookup(endpoint(r, from), endpoint(peer, to), transfer_flow_key(r, peer), op);
    if (rotation_ && flat_routes_.size() != known)
      rotation_->add_route([&](RankId i) -> const topo::Route& {
        const RankId a = rotation_->moved(r, i), b = rotation_->moved(peer, i);
        return router_.route(endpoint(a, from), endpoint(b, to), transfer_flow_key(a, b));
      });
    return index;
  }
  const bool d2h = rec(op).copy == CopyKind::d2h;
  const auto ends = [&](RankId rank) {
    const NodeId gpu = plan_.rank_gpu[rank];
    return d2h ? std::pair{gpu, topo_.host_cpu(gpu)} : std::pair{topo_.host_cpu(gpu), gpu};
  };
  index = lookup(ends(r).first, ends(r).second, 0, op);
  if (rotation_ && flat_routes_.size() != known)
    rotation_->add_route([&](RankId i) -> const topo::Route& {
      const auto [a, b] = ends(rotation_->moved(r, i));
      return router_.route(a, b, 0);
    });
  return index;
}

FlowId Engine::new_flow(Owner owner, std::uint32_t index, double bytes) {
  const FlowId f = flows_.create();
  if (f >= flow_info_.size()) {
    flow_info_.resize(f + 1);
    update_prefetching();
  }
  FlowInfo& info = flow_info_[f];
  info.start = now_;
  info.owner = owner;
  info.index = index;
  info.bytes = bytes;
  ++flow_count_;
  return f;
}

void Engine::schedule_rescheduled() {
  const std::vector<FlowId>& retimed = flows_.rescheduled();
  // A re-share re-times its region's flows at once, and at 100,000 GPUs each one's queue state
  // and place among the moved completions is a miss: asked for together, they overlap.
  if (retimed.size() > 1) {
    for (FlowId f : retimed) {
      collsim::prefetch(&flow_info_[f]);
      moved_.prefetch_position(f);
    }
    for (FlowId f : retimed) moved_.prefetch_entry(f);
  }
  for (FlowId f : retimed) {
    const double t = flows_.finish_time(f);
    Queued& queued = flow_info_[f].queued;
    if (queued == Queued::queue) ++stale_events_;  // superseded
    if (!(t < kUnlimited)) {
      if (queued == Queued::moved) moved_.erase(f);
      queued = Queued::none;
    } else if (queued == Queued::none) {
      queue_.push_from(now_, t, EventKind::flow_done, f, flows_.version(f));
      queued = Queued::queue;
    } else {
      // Re-timed: from now on its completion is moved in place, under the sequence number a
      // push would have taken.
      moved_.set(f, t, queue_.take_seq());
      queued = Queued::moved;
    }
  }
  if (observer_)
    for (ResourceId r : flows_.touched()) observer_->on_resource_load(r, now_, flows_.load(r));
}

void Engine::launch(FlowId f, double latency) {
  if (latency > 0) {
    queue_.push_from(now_, now_ + latency, EventKind::latency_done, f, flows_.version(f));
    return;
  }
  flows_.start(f, flow_info_[f].bytes, now_);
  schedule_rescheduled();
}

void Engine::ready(OpId op) {
  set_state(op, OpState::ready);
  if (track_) timing_[op].ready = now_;
  const OpRecord& r = rec(op);
  const RankId rank = r.rank;
  switch (r.kind) {
    case OpKind::send:
    case OpKind::recv: {
      const OpId q = r.partner;
      if (state(q) != OpState::ready) return;  // the transfer waits for its other end
      if (r.kind == OpKind::send)
        start_transfer(op, q);
      else
        start_transfer(q, op);
      return;
    }
    case OpKind::copy:
      if (r.copy == CopyKind::host || copies_.arrive(plan_.rank_gpu[rank], op, now_))
        start_copy(op);
      else
        queue_grant();
      return;
    case OpKind::reduce: {
      set_state(op, OpState::running);
      if (track_) {
        timing_[op].start = now_;
        if (observer_) observer_->on_op_start(op, now_, now_);
      }
      const FlowId f = new_flow(Owner::reduce, op, bytes_of(op));
      // Two operands read and one result written: every byte crosses memory three times, or
      // more for a kernel slower than memory (topo::Node::reduce_traffic).
      use(f, rank_memory_[rank], rank_reduce_traffic_[rank]);
      launch(f, rank_launch_[rank]);
      return;
    }
    case OpKind::compute:
    case OpKind::delay:
      set_state(op, OpState::running);
      if (track_) {
        timing_[op].start = now_;
        if (observer_) observer_->on_op_start(op, now_, now_);
      }
      queue_.push_from(now_, now_ + extra_.at(op), EventKind::op_done, op);
      return;
  }
}

void Engine::start_transfer(OpId send, OpId recv) {
  set_state(send, OpState::running);
  set_state(recv, OpState::running);
  if (track_) {
    timing_[send].start = now_;
    timing_[recv].start = now_;
    if (observer_) {
      observer_->on_op_start(send, timing_[send].ready, now_);
      observer_->on_op_start(recv, timing_[recv].ready, now_);
    }
  }
  const FlatRoute& route = route_of(send);
  const FlowId f = new_flow(Owner::transfer, send, bytes_of(send));
  add_uses(f, route);
  launch(f, rank_alpha_[rec(send).rank] + route.latency);
}

void Engine::start_copy(OpId op) {
  set_state(op, OpState::running);
  if (track_) {
    timing_[op].start = now_;
    if (observer_) observer_->on_op_start(op, timing_[op].ready, now_);
  }
  const RankId rank = rec(op).rank;
  const NodeId gpu = plan_.rank_gpu[rank];
  const FlowId f = new_flow(Owner::copy, op, bytes_of(op));
  double latency = 0;
  switch (rec(op).copy) {
    case CopyKind::d2h:
    case CopyKind::h2d: {
      const FlatRoute& route = route_of(op);
      add_uses(f, route);
      latency = route.latency;
      // Pageable memory: the driver copies every byte between it and a pinned bounce buffer,
      // so the host's memcpy bandwidth bounds the copy and is shared with other host copies.
      if (plan_.host_memory == sched::HostMemory::pageable)
        if (const NodeId cpu = topo_.host_cpu(gpu); cpu != topo::kNoNode) {
          if (rotation_) rotation_->add_host_memcpy();
          use(f, map_.memcpy(cpu),
              topo_.node(cpu).pageable_traffic[rec(op).copy == CopyKind::d2h ? 0 : 1]);
        }
      break;
    }
    case CopyKind::d2d:
      use(f, rank_memory_[rank], 2.0);  // reads and writes every byte
      break;
    case CopyKind::host:
      if (rotation_) rotation_->add_host_memcpy();
      use(f, map_.memcpy(topo_.host_cpu(gpu)), 1.0);
      break;
  }
  launch(f, latency);
}

void Engine::copy_grant() {
  if (!no_events() && next_time() == now_) {
    queue_.push(now_, EventKind::copy_grant, 0);  // behind the events the instant still has
    return;
  }
  grant_queued_ = false;
  copies_.grant(now_, [this](OpId op) { start_copy(op); });
}

void Engine::complete(OpId op) {
  set_state(op, OpState::done);
  ++done_;
  if (!extra_.empty() && has_extra(rec(op))) extra_.erase(op);
  last_end_ = now_;
  if (keep_finished_) {
    const OpRecord& ran = rec(op).kind == OpKind::send ? rec(rec(op).partner) : rec(op);
    finished_[op] = Finished{now_, ran.rank, ran.stream};  // as delay_release() sees it
  }
  if (track_) {
    timing_[op].end = now_;
    if (observer_) observer_->on_op_end(op, now_);
  }
  const OpId next = rec(op).stream_next;
  if (next != kNoOp) {
    release(op, next);
  } else {
    // The last op of its stream so far: a later op on the stream will not wait for it.
    last_on_stream(rec(op).rank, rec(op).stream) = kNoOp;
  }
  const std::uint32_t succ = rec(op).succ;
  if (succ == kNoOp) return;
  if (!(succ & kMany)) {
    release(op, succ);
    return;
  }
  const std::uint32_t g = succ & ~kMany;
  // By index: ready() never adds successors, but the group is only ours until recycled.
  for (std::size_t i = 0; i < groups_[g].size(); ++i) release(op, groups_[g][i]);
  groups_[g].clear();  // keeps its capacity for the next op that needs a group
  free_groups_.push_back(g);
}

bool Engine::delay_release(OpId from, OpId to) {
  // A transfer runs on its receiver's stream: the sender's stream learns of its end through an
  // event, like any other stream.
  const OpId ran = rec(from).kind == OpKind::send ? rec(from).partner : from;
  const double latency = rank_event_[rec(to).rank];
  if (latency <= 0 || (rec(ran).rank == rec(to).rank && rec(ran).stream == rec(to).stream))
    return false;
  queue_.push_from(now_, now_ + latency, EventKind::release, to);
  return true;
}

bool Engine::release_pending(OpId from, OpId to) {
  if (from < finished_.front()) return false;
  const Finished& f = finished_[from];
  const double latency = rank_event_[rec(to).rank];
  if (latency <= 0 || (f.rank == rec(to).rank && f.stream == rec(to).stream) ||
      f.end + latency <= now_)
    return false;
  queue_.push(f.end + latency, EventKind::release, to);
  return true;
}

void Engine::flow_done(FlowId f) {
  flows_.release(f, now_, true);
  schedule_rescheduled();
  // A copy: starting the next copy in line below may reuse or move this slot.
  const FlowInfo info = flow_info_[f];
  const std::uint32_t index = info.index;
  switch (info.owner) {
    case Owner::transfer:
      complete(index);
      complete(rec(index).partner);
      break;
    case Owner::copy:
      if (rec(index).copy != CopyKind::host) {
        copies_.release(plan_.rank_gpu[rec(index).rank], info.start, now_);
        if (copies_.pending()) queue_grant();
      }
      complete(index);
      break;
    case Owner::reduce:
      complete(index);
      break;
    case Owner::background:
      background_end_[index] = now_;
      if (observer_) observer_->on_background_end(index, now_);
      break;
  }
}

void Engine::report_stuck() const {
  const OpId n = registered_;
  // A plan flow that can never drain: a link on its way failed for good. (A stalled background
  // flow holds up nothing of the plan, so it is not the cause.)
  for (FlowId f = 0; f < flows_.num_flow_slots(); ++f) {
    if (!flows_.active(f) || flows_.finish_time(f) < kUnlimited) continue;
    if (flow_info_[f].owner == Owner::background) continue;
    std::string dead = "a resource on its way";
    double since = 0;
    for (ResourceId r : flows_.resources(f)) {
      if (flows_.capacity(r) > 0) continue;
      dead = fmt::format("link '{}'", map_.name(topo_, r));
      for (const AppliedChange& c : capacity_changes_)
        if (c.resource == r && c.bandwidth == 0 && c.time <= now_) since = std::max(since, c.time);
    }
    throw InputError(options_.plan_file, fmt::format("/ops/{}", flow_info_[f].index),
                     fmt::format("{} can never finish: {} has no bandwidth from {} s on and the "
                                 "capacity trace never restores it; add a recovery or route "
                                 "around the link",
                                 describe(flow_info_[f].index), dead, since));
  }
  // Otherwise the remaining ops wait on each other. Follow what each one waits for until an op
  // repeats: that cycle is the deadlock.
  // What each op waits for, from the records (a streamed run's plan no longer holds the rows):
  // its stream predecessor, and the first unfinished op it depends on.
  std::unordered_map<OpId, OpId> stream_prev, dep_prev;
  for (OpId op = ops_base_; op < n; ++op) {
    const OpRecord& r = rec(op);
    if (r.stream_next != kNoOp) stream_prev[r.stream_next] = op;
    if (state(op) == OpState::done || r.succ == kNoOp) continue;
    if (!(r.succ & kMany))
      dep_prev.emplace(r.succ, op);
    else
      for (OpId s : groups_[r.succ & ~kMany]) dep_prev.emplace(s, op);
  }
  OpId cur = kNoOp;
  for (OpId op = ops_base_; op < n && cur == kNoOp; ++op)
    if (state(op) != OpState::done) cur = op;
  std::vector<OpId> path;
  std::map<OpId, std::size_t> seen;
  while (cur != kNoOp && !seen.contains(cur)) {
    seen.emplace(cur, path.size());
    path.push_back(cur);
    OpId next = kNoOp;
    if (state(cur) == OpState::ready &&
        (rec(cur).kind == OpKind::send || rec(cur).kind == OpKind::recv)) {
      next = rec(cur).partner;
    } else if (state(cur) == OpState::waiting) {
      const auto prev = stream_prev.find(cur);
      if (prev != stream_prev.end() && state(prev->second) != OpState::done) next = prev->second;
      if (const auto dep = dep_prev.find(cur); next == kNoOp && dep != dep_prev.end())
        next = dep->second;
    }
    cur = next;
  }
  std::string chain;
  const std::size_t from = cur == kNoOp ? 0 : seen.at(cur);
  for (std::size_t i = from; i < path.size() && i < from + 8; ++i)
    chain += describe(path[i]) + (i == from ? " waits for " : ", which waits for ");
  if (path.size() - from > 8) chain += "... ";
  chain += cur == kNoOp ? "an op that never runs" : describe(cur);
  const std::size_t stuck = n - done_;
  throw InputError(options_.plan_file, fmt::format("/ops/{}", path[from]),
                   fmt::format("the plan deadlocks at {} s with {} of {} ops unable to run: {}. "
                               "Check the dependencies and the order of sends and recvs on each "
                               "stream",
                               now_, stuck, n, chain));
}

Result Engine::collect(StopReason stop) {
  Result r;
  r.time = stop == StopReason::finished ? last_end_ : now_;
  r.events = events_;
  r.flows = flow_count_;
  r.ops_held = ops_held_;
  r.ops_done = done_;
  r.ops_total = ops_total();
  r.stop = stop;
  r.rotation = plan_.rotation;
  r.sharing = flows_.stats();
  r.sharing_pace = pace_;  // set only by the check that stops the run
  const std::size_t links = topo_.num_links();
  r.link_bytes.resize(links);
  r.link_busy.resize(links);
  // A tied link's flows, and so its bytes and busy time, are its representative's.
  // So is an orbit's, every resource of it carrying what its representative carries.
  const auto own = [&](ResourceId rid) {
    if (rotation_) return rotation_->representative(rid);
    return tie_ ? tied_.representative(rid) : rid;
  };
  for (std::size_t l = 0; l < links; ++l) {
    const auto rid = own(map_.link(static_cast<topo::LinkId>(l)));
    r.link_bytes[l] = static_cast<Bytes>(std::llround(flows_.bytes(rid)));
    r.link_busy[l] = flows_.busy_time(rid, now_);
  }
  for (ResourceId rid = 0; rid < map_.size(); ++rid) {
    const double busy = flows_.busy_time(own(rid), now_);
    const double bytes = flows_.bytes(own(rid));
    if (busy <= 0 && bytes <= 0) continue;
    ResourceUsage u;
    u.kind = map_.kind(rid);
    u.index = map_.index(rid);
    u.bytes = bytes;
    u.busy_time = busy;
    const double cap = map_.capacity(topo_, rid);
    if (r.time > 0)
      u.utilisation = cap < kUnlimited && cap > 0 ? bytes / (cap * r.time) : busy / r.time;
    r.resources.push_back(u);
  }
  r.copy_engines = copies_.usage();
  r.background_end = background_end_;
  if (options_.record_ops) r.ops = std::move(timing_);
  return r;
}

std::vector<double> Engine::capacities() const {
  std::vector<double> capacity(map_.size());
  for (ResourceId r = 0; r < map_.size(); ++r) capacity[r] = map_.capacity(topo_, r);
  return capacity;
}

void Engine::setup() {
  observer_ = options_.observer;
  track_ = options_.record_ops || observer_ != nullptr;
  progress_ = static_cast<bool>(options_.progress);
  if (options_.max_reshared > 0)
    next_sharing_check_ = std::max<std::uint64_t>(1, options_.max_reshared / kSharingChecks);
  rank_alpha_.resize(plan_.num_ranks());
  rank_launch_.resize(plan_.num_ranks());
  rank_event_.resize(plan_.num_ranks());
  rank_reduce_traffic_.resize(plan_.num_ranks());
  rank_memory_.resize(plan_.num_ranks());
  for (RankId r = 0; r < plan_.num_ranks(); ++r) {
    const topo::Node& gpu = topo_.node(plan_.rank_gpu[r]);
    rank_alpha_[r] = gpu.alpha;
    rank_launch_[r] = gpu.launch_latency;
    rank_event_[r] = gpu.event_latency;
    rank_reduce_traffic_[r] = gpu.reduce_traffic.at(static_cast<std::size_t>(plan_.dtype));
    event_latency_ |= gpu.event_latency > 0;
    longest_event_latency_ = std::max(longest_event_latency_, gpu.event_latency);
    if (gpu.memory_owner != topo::kNoNode &&
        (gpu.memory_owner >= topo_.num_nodes() ||
         topo_.node(gpu.memory_owner).kind != topo::NodeKind::gpu))
      throw InternalError(fmt::format("GPU '{}' shares the memory of node {}, which is not a GPU",
                                      gpu.name, gpu.memory_owner));
    rank_memory_[r] =
        map_.memory(gpu.memory_owner != topo::kNoNode ? gpu.memory_owner : plan_.rank_gpu[r]);
  }
  keep_finished_ = growing_ != nullptr && event_latency_ && plan_.waits_on_finished;

  flows_.reset(capacities());
  flows_.report_touched(observer_ != nullptr);
  flows_.local_regions(options_.sharing_regions);
  flows_.set_deferred(options_.share_per_instant);
  copies_.reset(topo_);

  // Capacity changes and background flows are events like any other; ties with plan events at
  // the same time go in the order given, after the plan's initial ops.
  for (const auto& trace : options_.capacity) {
    std::vector<CapacityChange> sorted = trace.changes;
    std::stable_sort(
        sorted.begin(), sorted.end(),
        [](const CapacityChange& a, const CapacityChange& b) { return a.time < b.time; });
    for (const auto& c : sorted) {
      queue_.push(c.time, EventKind::capacity_change,
                  static_cast<std::uint32_t>(capacity_changes_.size()));
      capacity_changes_.push_back(AppliedChange{map_.link(trace.link), c.bandwidth, c.time});
    }
  }
  background_end_.assign(options_.background.size(), kUnlimited);
  for (std::size_t i = 0; i < options_.background.size(); ++i) {
    const BackgroundFlow& b = options_.background[i];
    try {
      background_routes_.push_back(add_route(router_.route(b.from, b.to)));
    } catch (const InputError& e) {
      throw InputError("", fmt::format("background[{}]", i),
                       fmt::format("background flow {} -> {} cannot be routed: {}",
                                   topo_.node(b.from).name, topo_.node(b.to).name, e.what()));
    }
  }
  for (std::uint32_t i = 0; i < options_.background.size(); ++i)
    queue_.push(options_.background[i].start, EventKind::background_start, i);
}

void Engine::add_ops(OpId end) {
  const OpId from = registered_;
  bool queues = false;
  if (!started_) {
    validate_ranks();
    queues = add_records(from, end);
    validate_options();
    route_cache_.assign(plan_.num_ranks(), RankRoutes{});
    last_on_stream_.assign(std::size_t{plan_.num_ranks()} * kInlineStreams, kNoOp);
    last_on_high_stream_.assign(plan_.num_ranks(), {});
    // An observer is shown every link's load, so it sees them untied. A rotated plan's flows
    // use orbits of links, which tying (by the routes of the representatives only) knows
    // nothing of.
    tie_ = options_.tie_links && options_.observer == nullptr && plan_.rotation == 0;
    if (plan_.rotation != 0) rotation_ = std::make_unique<Rotation>(router_, plan_, map_);
    if (tie_) {
      tied_.reset(capacities());
      for (const auto& trace : options_.capacity) tied_.pin(map_.link(trace.link));
    }
  } else {
    queues = add_records(from, end);
  }
  link(from, end, started_);
  registered_ = end;
  ops_held_ = std::max<std::uint64_t>(ops_held_, registered_ - ops_base_);
  update_prefetching();
  // An empty batch changes nothing: the newest ops are still those of the batch before.
  if (growing_ != nullptr && from != end) trigger_ = from;
  const bool first = !started_;
  if (first) {
    started_ = true;
    setup();
    share_per_instant_ = options_.share_per_instant;
  }
  if (keep_finished_)
    while (finished_.end() < end) finished_.emplace_back();
  share_routes();
  if (share_per_instant_ && (queues || copies_queue_)) {
    // Re-sharing once per instant computes the same rates in another order, so they can differ
    // in the last digits; where copies queue for copy engines, a copy that ties with another in
    // exact arithmetic but not in floating point can then be served before instead of after it,
    // which moves the run by whole percents (docs/cost-model.md, "Copy engines"). Such runs
    // re-share after every change, as they always did, so that their results stay put.
    share_per_instant_ = false;
    share_pending();
    flows_.set_deferred(false);
  }
  if (first) {
    if (track_) timing_.assign(end, OpTiming{});
    if (observer_) observer_->on_begin(router_, plan_, map_);
    for (OpId op = from; op < end; ++op)
      if (rec(op).pending == 0 && state(op) == OpState::waiting) ready(op);
    // Registering a large plan takes seconds before the first event: a display learns here that
    // the simulation itself has begun.
    if (progress_) report_progress();
    return;
  }
  if (track_) timing_.resize(end, OpTiming{});
}

void Engine::report_progress() {
  const std::uint64_t filled = flows_.stats().filled;
  next_progress_filled_ = filled + kProgressFilled;
  options_.progress(RunProgress{events_, now_, done_, ops_total(), filled});
}

std::uint64_t Engine::ops_total() const {
  if (growing_ == nullptr) return plan_.num_ops();
  return last_batch_ ? registered_ : 0;
}

bool Engine::over_sharing_limit(std::uint64_t filled) {
  const std::uint64_t limit = options_.max_reshared;
  if (filled >= limit) return true;
  next_sharing_check_ = std::min(limit, std::max(filled + 1, next_sharing_check_ * 2));
  // The pace: the flows re-shared so far, plus those re-shared per op finished since the last
  // check (checks double, so that window holds at least half of the run so far) times the ops
  // left. Not the pace since the start: a direct allgather's first ops (its local copies and
  // lone transfers) finish almost free, and the thousands that share the fabric after them
  // finish one in hundreds of thousands of flows re-shared. Nothing is read before the plan's
  // op count is known, nor across checks between which no op finished. The margin: the pace
  // overstates the rest by about 2 where flows end one by one, each leaving fewer to re-share.
  const std::uint64_t total = ops_total();
  if (total == 0 || done_ <= paced_done_) return false;
  const double per_op =
      static_cast<double>(filled - paced_filled_) / static_cast<double>(done_ - paced_done_);
  paced_filled_ = filled;
  paced_done_ = done_;
  const double pace = static_cast<double>(filled) + per_op * static_cast<double>(total - done_);
  if (pace < kPaceMargin * static_cast<double>(limit)) return false;
  pace_ = pace;
  return true;
}

bool Engine::completes_newest(const Event& e) const {
  if (e.kind() == EventKind::op_done) return e.id >= trigger_;
  if (e.kind() != EventKind::flow_done) return false;
  const FlowInfo& info = flow_info_[e.id];
  if (info.owner == Owner::background) return false;
  // A transfer completes its recv too, which a whole plan may number past the trigger alone.
  return info.index >= trigger_ ||
         (info.owner == Owner::transfer && rec(info.index).partner >= trigger_);
}

void Engine::advance() {
  while (!all_done()) {
    if (!held_) {
      // The instant is over: share bandwidth among the flows it left, before time moves on.
      // (An event held for the next batch was popped within the instant, or nothing was
      // pending.)
      if (flows_.pending() && (no_events() || next_time() > now_)) {
        share_pending();
        continue;
      }
      if (no_events()) break;
    }
    Event e = held_ ? *held_ : next_event();
    held_.reset();
    if (prefetching_) [[likely]]
      prefetch_ahead();
    const EventKind kind = e.kind();
    if ((kind == EventKind::latency_done || kind == EventKind::flow_done) &&
        e.version != flows_.version(e.id)) {
      if (kind == EventKind::flow_done) --stale_events_;
      continue;  // superseded by a later rate change
    }
    // An op of the newest batch finishing could make ops of the next one ready: the next batch
    // must exist first.
    if (!last_batch_ && completes_newest(e)) {
      held_ = e;
      return;
    }
    if (kind == EventKind::flow_done) flow_info_[e.id].queued = Queued::none;
    if (e.time() > options_.max_time) {
      now_ = options_.max_time;
      stop_ = StopReason::time_limit;
      return;
    }
    now_ = e.time();
    if (kind == EventKind::copy_grant) {
      copy_grant();  // not an event of the plan: not counted
      continue;
    }
    ++events_;
    switch (kind) {
      case EventKind::copy_grant:  // run above
        break;
      case EventKind::op_done:
        complete(e.id);
        break;
      case EventKind::release:
        if (--rec(e.id).pending == 0) ready(e.id);
        break;
      case EventKind::latency_done:
        flows_.start(e.id, flow_info_[e.id].bytes, now_);
        schedule_rescheduled();
        break;
      case EventKind::flow_done:
        flow_done(e.id);
        break;
      case EventKind::capacity_change:
        share_pending();  // the instant's arrivals and departures first
        flows_.set_capacity(capacity_changes_[e.id].resource, capacity_changes_[e.id].bandwidth,
                            now_);
        schedule_rescheduled();
        break;
      case EventKind::background_start: {
        const FlatRoute& route = flat_routes_[background_routes_[e.id]];
        const FlowId f =
            new_flow(Owner::background, e.id, static_cast<double>(options_.background[e.id].bytes));
        add_uses(f, route);
        launch(f, route.latency);
        break;
      }
    }
    if (options_.max_events != 0 && events_ >= options_.max_events && !all_done()) {
      stop_ = StopReason::event_limit;
      return;
    }
    // Every event: one relaxed load, and a run whose events are slow (large sharing
    // components) still stops at once.
    if (options_.cancel != nullptr && options_.cancel->load(std::memory_order_relaxed)) {
      stop_ = StopReason::cancelled;
      return;
    }
    const std::uint64_t filled = flows_.stats().filled;
    if (filled >= next_sharing_check_ && over_sharing_limit(filled)) {
      stop_ = StopReason::sharing_limit;
      return;
    }
    if (progress_ && ((events_ & kProgressEvery) == 0 || filled >= next_progress_filled_))
      report_progress();
    if (stale_events_ > kMinSweep && stale_events_ > queue_.size() / 2) {
      queue_.remove_if(
          [&](const Event& ev) {
            return ev.kind() == EventKind::flow_done && ev.version != flows_.version(ev.id);
          },
          [&](const Event& ev) {
            if (ev.kind() == EventKind::flow_done) flows_.prefetch_flow(ev.id);
          });
      stale_events_ = 0;
    }
  }
}

Event Engine::next_event() {
  if (!moved_.empty() &&
      (queue_.empty() || !queue_.front_before(moved_.top().time_bits, moved_.top().seq))) {
    const KeyedHeap::Entry m = moved_.pop();
    // Out of the heap but not run yet (it may be held for the next batch): a re-timing now
    // supersedes it as it would a queued event.
    flow_info_[m.id].queued = Queued::queue;
    return Event{m.time_bits, (m.seq << 8) | static_cast<std::uint8_t>(EventKind::flow_done), m.id,
                 flows_.version(m.id)};
  }
  return queue_.pop();
}

void Engine::prefetch_ahead() const {
  // Each stage reads only what an earlier stage prefetched, so that none of them waits.
  const EventQueue::Lookahead next = queue_.lookahead();
  std::uint32_t id;
  EventKind kind;
  const auto flow_event = [&] {
    return (kind == EventKind::flow_done || kind == EventKind::latency_done) &&
           id < flows_.num_flow_slots();
  };
  if (next.at(EventQueue::kLookaheadReach, id, kind) && flow_event()) {
    flows_.prefetch_flow(id);
    collsim::prefetch(&flow_info_[id]);
  }
  if (next.at(5, id, kind)) {
    if (flow_event()) flows_.prefetch_uses(id);
    if (const OpId op = op_of(id, kind); op != kNoOp) prefetch_op(op);
  }
  if (next.at(2, id, kind)) {
    if (flow_event()) flows_.prefetch_resources(id);
    if (const OpId op = op_of(id, kind); op != kNoOp) {
      const OpRecord& r = rec(op);
      if (r.stream_next != kNoOp) prefetch_op(r.stream_next);
      if (r.succ < kMany) prefetch_op(r.succ);
      if (r.partner != kNoOp && r.partner >= ops_base_) prefetch_op(r.partner);
    }
  }
  if (next.at(0, id, kind)) {
    if (const OpId op = op_of(id, kind); op != kNoOp)
      if (const OpId q = rec(op).partner; q != kNoOp && q >= ops_base_) {
        const OpRecord& r = rec(q);
        if (r.stream_next != kNoOp) prefetch_op(r.stream_next);
        if (r.succ < kMany) prefetch_op(r.succ);
      }
  }
  // The moved completions: the next of them is the top, which an earlier call prefetched as a
  // child of the top then, and the one after it is among the top's children.
  for (std::size_t i = 1; i <= 4 && i < moved_.size(); ++i) {
    const FlowId f = moved_.at(i).id;
    flows_.prefetch_flow(f);
    collsim::prefetch(&flow_info_[f]);
  }
  if (!moved_.empty()) {
    const FlowId f = moved_.top().id;
    flows_.prefetch_uses(f);
    if (const OpId op = op_of(f, EventKind::flow_done); op != kNoOp) prefetch_op(op);
  }
}

void Engine::forget_finished() {
  while (unfinished_ < registered_ && state(unfinished_) == OpState::done) ++unfinished_;
  ops_base_ = unfinished_;
  ops_.drop_before(ops_base_);
  if (keep_finished_) {
    OpId kept = finished_.front();
    while (kept < ops_base_ && finished_[kept].end + longest_event_latency_ < now_) ++kept;
    finished_.drop_before(kept);
  }
}

Result Engine::run() {
  const bool windowed = options_.window_ops != 0 && options_.plan_file.empty() &&
                        options_.observer == nullptr && plan_.rotation == 0;
  const std::vector<PlanWindow> windows =
      windowed ? plan_windows(plan_, options_.window_ops)
               : std::vector<PlanWindow>{{static_cast<OpId>(plan_.num_ops()), 0}};
  // Where copies may wait for an engine the run re-shares after every change (add_ops()). A
  // plan registered in windows decides that from all its copies, as the run that registers
  // every op at the start does: decided window by window, it switched when the first such copy
  // was registered, and the instants before had been re-shared in another order (the last digits
  // of a run on the hetero rack moved, found by the simulate fuzz target).
  if (windows.size() > 1 && options_.share_per_instant) note_copy_lanes();
  for (std::size_t k = 0; k < windows.size(); ++k) {
    last_batch_ = k + 1 == windows.size();
    if (!last_batch_) trigger_ = windows[k + 1].trigger;
    add_ops(windows[k].end);
    if (over_held_limit()) break;
    advance();
    if (stop_ != StopReason::finished) break;
    forget_finished();
  }
  return finish();
}

bool Engine::over_held_limit() {
  const std::uint64_t limit = options_.max_ops_held;
  if (limit == 0 || registered_ - ops_base_ <= limit) return false;
  stop_ = StopReason::memory_limit;
  return true;
}

bool Engine::add_batch() {
  last_batch_ = false;
  add_ops(static_cast<OpId>(plan_.num_ops()));
  if (over_held_limit()) return false;
  // Registered, the batch's ops are read from their records (and extra_) only: the plan keeps
  // no row, and holds no more than the batch the generator is writing.
  growing_->drop_before(registered_);
  advance();
  forget_finished();
  return stop_ == StopReason::finished;
}

Result Engine::finish() {
  last_batch_ = true;
  if (stop_ == StopReason::finished) {
    advance();
    if (!all_done() && stop_ == StopReason::finished) report_stuck();
  }
  Result result = collect(stop_);
  if (observer_) observer_->on_finish(result);
  return result;
}

}  // namespace

Result simulate(const topo::Router& router, const sched::Plan& plan, const Options& options) {
  Engine engine(router, plan, options);
  return engine.run();
}

Result simulate_streaming(const topo::Router& router, sched::Plan& plan,
                          const std::function<void(std::function<void()>)>& build,
                          const Options& options) {
  if (options.observer != nullptr)
    throw InternalError("simulate_streaming: an observer needs the whole plan; use simulate");
  // Thrown through the generator when the run stops early: the rest of the plan is not needed.
  struct Stopped {};
  Engine engine(router, plan, options, &plan);
  try {
    build([&] {
      if (!engine.add_batch()) throw Stopped{};
    });
  } catch (const Stopped&) {
  }
  return engine.finish();
}

namespace {

Result simulate_generated(const topo::Router& router, const sched::PlanRequest& request,
                          const Options& options) {
  if (!streams_exactly(router, request))
    return simulate(router, sched::generate(router, request), options);
  sched::Plan plan;
  return simulate_streaming(
      router, plan,
      [&](const std::function<void()>& batch) { sched::generate(router, request, plan, batch); },
      options);
}

}  // namespace

bool streams_exactly(const topo::Router& router, const sched::PlanRequest& request) {
  const topo::Topology& t = router.topology();
  const std::vector<topo::NodeId>& ranks = request.ranks.empty() ? t.gpus() : request.ranks;
  return sched::streams(request, static_cast<sched::RankId>(ranks.size()));
}

Result simulate(const topo::Router& router, const sched::PlanRequest& request,
                const Options& options) {
  const auto p = static_cast<sched::RankId>(request.ranks.empty() ? router.topology().gpus().size()
                                                                  : request.ranks.size());
  if (options.observer != nullptr) {
    if (options.before_run) options.before_run(p);
    return simulate(router, sched::generate(router, request), options);
  }
  std::string refused;  // why the largest rotation tried does not fit
  bool routes_may_fit = true;
  sched::RankId unit = 0;
  if (options.rank_symmetry && options.capacity.empty() && options.background.empty() &&
      !options.record_ops) {
    unit = sched::rotation_unit(router, request);
    // The smallest rotation that maps the topology onto itself too; a refusal usually comes
    // with the first batch's routes, before any time is simulated.
    int tries = 12;  // a hier refusal can come after its first phase: not every divisor
    for (sched::RankId s = unit; unit != 0 && s <= p / 2 && tries > 0; s += unit) {
      if (p % s != 0) continue;
      --tries;
      sched::PlanRequest rotated = request;
      rotated.rotation = s;
      if (options.before_run) options.before_run(s);
      try {
        return simulate_generated(router, rotated, options);
      } catch (const NotSymmetric& e) {
        refused = e.diagnostics().front().message;
        routes_may_fit = e.routes_may_fit();
      }
    }
    if (unit == 0)
      refused =
          "this plan has no rotated form: only ring (allreduce, reduce_scatter, allgather), "
          "hier (allreduce, on servers of consecutive ranks) and direct (all but broadcast "
          "and reduce) have one, and only when every rank's pieces have the same sizes";
  }
  if (unit != 0 && !refused.empty() && router.options().ecmp && routes_may_fit)
    refused +=
        " (ECMP hashes each pair of ranks onto its own path, which a rotation rarely keeps; "
        "routing without it, --routing shortest, may)";
  if (options.before_run) options.before_run(p);
  Result result = simulate_generated(router, request, options);
  result.symmetry_refused = std::move(refused);
  return result;
}

}  // namespace collsim::sim
