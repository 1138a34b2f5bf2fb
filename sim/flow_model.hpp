#pragma once
// Flows and max-min fair bandwidth sharing.
//
// A flow drains a number of bytes through a set of (resource, weight) pairs: at rate x it takes
// weight × x of each resource's capacity (a reduction reads two operands and writes one, so it
// weighs 3 on GPU memory). Rates are the weighted max-min fair allocation, found by progressive
// filling: every unfrozen flow's rate rises together until some resource is full; the flows on it
// freeze at that level; repeat. A resource with unlimited capacity never constrains anything and
// does not join flows into one sharing problem.
//
// Slack resources do not couple flows. Each flow has a *bound*, the rate it would get alone:
// min over its limited resources of capacity / weight. A resource whose flows' bounds cannot
// fill it (Σ weight × bound ≤ capacity, its *demand*; always so with one flow) can never be
// saturated, so its constraint is implied by the bounds: the allocation is the max-min fair one
// of the *binding* resources plus one private constraint x ≤ bound per flow, which is the same
// allocation, exactly. Flows then join one sharing problem only through binding resources: on a
// fabric whose NICs are the bottleneck, flows that cross the same switches stay independent
// instead of forming one component the size of the cluster.
//
// A capacity change recomputes the connected component, through binding resources, of what it
// touches: O(F_c·h + (R_c + F_c)·log) for F_c flows of h resources each and R_c binding
// resources. A flow that stays on slack resources only is not re-shared at all.
//
// An arrival or a departure re-shares a *region* instead, usually far smaller than its
// component: the flows on the binding resources it touches. The region is filled against what
// the flows outside it leave of each resource, their rates held, and the result is then checked
// with the characterisation of max-min fairness: an allocation is the max-min fair one if it is
// feasible and every flow has a *bottleneck*, a saturated resource on which no flow is faster
// (or its own bound). The filling gives every region flow one, provided no outside flow on it is
// faster; an outside flow keeps the bottleneck it had unless that resource is in the region, where
// it is checked again. Flows failing either check join the region and it is filled again; a
// region that keeps growing falls back to its whole component. So a departure re-shares the few
// flows its freed bandwidth can reach, not every flow coupled to them: on a cluster-wide tree,
// a dozen flows instead of hundreds. The checks allow 1e-9 relative, the margin binding() uses.
// After two fallbacks in a row the next few re-shares skip the region (kSkipAfterFallback).
//
// A flow whose rate came out exactly as before keeps its completion time, so an undisturbed flow
// ends at exactly start + bytes / rate.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/compact_list.hpp"
#include "sim/resources.hpp"
#include "topology/huge_pages.hpp"
#include "topology/prefetch.hpp"
#include "topology/units.hpp"

namespace collsim::sim {

using FlowId = std::uint32_t;

// How much re-sharing a run did, for benchmarks and tests.
struct SharingStats {
  std::uint64_t regions = 0;     // arrivals and departures re-shared as a region
  std::uint64_t refills = 0;     // extra fillings after a region grew
  std::uint64_t fallbacks = 0;   // regions that fell back to their component
  std::uint64_t components = 0;  // component re-shares (capacity changes, fallbacks, regions off)
  std::uint64_t instants = 0;    // flushes re-shared as one component (FlowModel::flush)
  std::uint64_t filled = 0;      // flows filled, summed over every filling
  std::uint64_t held = 0;        // resources held, summed over every flow started
};

class FlowModel {
 public:
  // Capacities in bytes/s per resource; kUnlimited for none. Forgets every flow.
  void reset(std::vector<double> capacity);

  // A new flow without resources yet. Ids of released flows are reused.
  FlowId create();
  void add_use(FlowId f, ResourceId r, double weight);
  // The same, adding to the weight when the flow already uses `r`.
  void add_use_merged(FlowId f, ResourceId r, double weight);
  // The flow starts draining `bytes` at `now`. Re-shares the component it joins.
  void start(FlowId f, double bytes, double now);
  // The flow leaves its resources at `now` (drained when `completed`, withdrawn otherwise); its
  // id becomes free. Re-shares the components it leaves.
  void release(FlowId f, double now, bool completed);
  void set_capacity(ResourceId r, double capacity, double now);
  // Links no longer tied (sim/tied_links.hpp): every flow holding `from`, running or waiting to
  // start, holds `tied` too, and `tied` takes over `from`'s record (flows, demand, bytes, busy
  // time), which was its own all along. No rate changes: `tied` has at least `from`'s capacity.
  void split_tied(ResourceId from, ResourceId tied);

  // Deferred (the engine's mode): an arrival or departure that needs a re-share only records
  // the resources it changed, and flush() re-shares them at the end of the instant, one
  // arrival or departure after another as they came, skipping one whose resources' flows were
  // all re-shared already by a region of the same flush. The flows of a direct allreduce start
  // together, and where each arrival re-shared them all again, most of an instant now costs
  // one region. Unrelated changes still get a region each: filled as one, they were refilled
  // together whenever one grew, which made a tree 15 % slower. Rates between the calls and
  // flush() are those of before the instant, so the caller flushes before time moves on and
  // before reading rates or completion times (capacity changes flush first). Start and release
  // do not move time, so no rate that lasts comes from a state that does not: the allocation is
  // that of the flows present at the end of the instant. In a small model an instant's changes
  // share one component at once instead (kWholeInstantBelow).
  void set_deferred(bool on) { deferred_ = on; }
  bool pending() const { return !pending_seeds_.empty(); }
  void flush(double now);

  // Flows whose completion time changed during the last start/release/set_capacity: the caller
  // schedules finish_time(f) tagged with version(f); older events of those flows are stale.
  const std::vector<FlowId>& rescheduled() const { return rescheduled_; }
  // Resources whose shares the last call recomputed and, when report_touched(true) was called,
  // every other limited resource whose load changed: those of the flow that started or left and
  // those of flows whose rate changed (for observers; off, it costs nothing).
  const std::vector<ResourceId>& touched() const { return comp_res_; }
  void report_touched(bool on) { report_touched_ = on; }
  // Off: arrivals and departures re-share their whole component, as capacity changes do (for
  // tests and measurements that compare the two; the rates agree to 1e-9).
  void local_regions(bool on) { local_ = on; }
  // Off: a flow alone on its resources joins their lists like any other (see reserve()), for
  // tests that compare the two; the same rates, times, bytes and busy times to the bit.
  void reserve_alone(bool on) { reserve_ = on; }
  // Progressive filling moves a set of more than `n` resources from scans to a heap after its
  // first rounds (kHeapAbove by default; see there), for tests that compare the two: the same
  // results to the bit.
  void heap_above(std::size_t n) { heap_above_ = n; }
  // A flush re-shares its changes' component at once while fewer than `n` flows run
  // (kWholeInstantBelow by default; 0: never), for tests that compare the two.
  void whole_instant_below(std::size_t n) { whole_instant_below_ = n; }
  const SharingStats& stats() const { return stats_; }

  double finish_time(FlowId f) const { return flows_[f].finish; }  // kUnlimited when stalled
  std::uint32_t version(FlowId f) const { return flows_[f].version; }
  double rate(FlowId f) const { return flows_[f].rate; }
  std::vector<ResourceId> resources(FlowId f) const;  // for diagnostics, not the hot loop
  std::size_t num_flow_slots() const { return slots_; }
  // Bytes of its flow and resource records, which an event may touch.
  std::size_t footprint() const {
    return flows_.size() * sizeof(Flow) + res_.size() * sizeof(Resource);
  }
  // Hints that flow `f` is about to be started or released: its record, then, once that is
  // cached, its resources.
  void prefetch_flow(FlowId f) const {
    if (f >= slots_) return;
    const char* p = reinterpret_cast<const char*>(&flows_[f]);
    for (std::size_t line = 0; line < sizeof(Flow); line += 64) collsim::prefetch(p + line);
  }
  // Uses beyond what the record holds (UseList).
  void prefetch_uses(FlowId f) const {
    if (f < slots_ && flows_[f].uses.spilled()) collsim::prefetch(flows_[f].uses.data());
  }
  void prefetch_resources(FlowId f) const {
    if (f >= slots_) return;
    for (const Use& use : flows_[f].uses) collsim::prefetch(&res_[use.resource]);
  }
  bool active(FlowId f) const { return flows_[f].active; }

  double capacity(ResourceId r) const { return res_[r].capacity; }
  std::size_t active_flows(ResourceId r) const {
    return res_[r].flows.size() + (res_[r].reserved != kNoFlow);
  }
  double load(ResourceId r) const;                        // Σ weight × rate of its flows, bytes/s
  double busy_time(ResourceId r, double now) const;       // time with at least one flow on it
  double bytes(ResourceId r) const { return bytes_[r]; }  // weight × bytes drained through it

 private:
  struct Use {
    ResourceId resource;
    std::uint32_t slot;  // position of this flow in the resource's list
    double weight;
  };
  static constexpr ResourceId kNoResource = ~ResourceId{0};
  static constexpr FlowId kNoFlow = ~FlowId{0};
  // A flow's uses, the first six of them inside the flow record: a filling reaches a flow
  // through a resource's list and goes on to its resources, and at 100,000 GPUs a separate
  // array was one more cache miss on that chain, waiting on the miss of the record before it.
  // Routes of up to six resources (every route of a two-tier fabric) never allocate.
  using UseList = CompactList<Use, 6>;
  struct alignas(64) Flow {
    double remaining = 0;
    double bytes = 0;
    double rate = 0;
    double last = 0;  // time `remaining` was last brought up to date
    double finish = kUnlimited;
    double new_rate = 0;
    double bound = kUnlimited;  // rate alone: min over limited resources of capacity / weight
    std::uint32_t version = 0;
    std::uint32_t stamp = 0;
    // Where the last filling froze it; kNoResource at its bound or when unlimited.
    ResourceId bottleneck = kNoResource;
    // The bottleneck its entries mark (Entry::bottleneck): `bottleneck` as last committed.
    ResourceId marked = kNoResource;
    bool active = false;
    bool scheduled = false;
    bool frozen = false;
    bool reserved = false;  // running alone, out of its resources' lists (reserve())
    // Already in flush()'s list of rescheduled flows. Here, not in an array by flow id: the
    // record is in the cache when the flag is read, and at 100,000 GPUs that array was not.
    bool listed = false;
    UseList uses;
  };
  static_assert(sizeof(Flow) == 192, "three cache lines");
  // A flow's place in a resource's list, with copies of what a filling reads of the flows
  // outside its set: the scan of a resource's list then reads no flow record but those of the
  // set's own flows. At 100,000 GPUs nearly every flow record is a cache miss, and about two
  // thirds of the entries a filling scans are outside flows.
  struct Entry {
    FlowId flow;
    std::uint32_t use;  // index into the flow's uses
    double weight;
    double rate;          // the flow's committed rate (Flow::rate)
    std::uint32_t stamp;  // the epoch of the last set it joined while this resource was in it
    bool bottleneck;      // this resource is the flow's committed bottleneck
  };
  static_assert(sizeof(Entry) == 32, "two entries per cache line");
  // A resource's flow list, its first two entries inside the resource record: a filling reaches a
  // resource's entries through the record, and where they lay apart, reaching them was one more
  // cache miss waiting on the record's own. Of the lists a 16,384-GPU tree's fillings read, 61 %
  // hold two entries and 19 % three; four inside (three lines) measured no better.
  using EntryList = CompactList<Entry, 2>;
  // Two cache lines: the first holds everything starting, ending or gathering a flow reads of a
  // resource but its entries, which fill the second, so that a flow alone on its resources (a
  // ring's) touches one line. The bytes drained through it are counted in bytes_, and the
  // filling's scratch in share_.
  struct alignas(64) Resource {
    double capacity = kUnlimited;
    double demand = 0;  // Σ weight × bound of its flows (limited resources only)
    double busy_since = 0;
    double busy_total = 0;
    std::uint32_t stamp = 0;
    // Its position in the set being filled, where fair_ and share_ keep its filling's state.
    std::uint32_t local = 0;
    FlowId reserved = kNoFlow;  // the flow running alone on it, out of its list (reserve())
    EntryList flows;            // its header ends the first line, its inline entries the second
  };
  static_assert(sizeof(Resource) == 128, "two cache lines");
  static_assert(offsetof(Resource, flows) + sizeof(EntryList) == 128 &&
                    offsetof(Resource, flows) + 16 == 64,
                "the list's header in the first line, its inline entries in the second");
  // What a filling keeps of each resource of its set, in the set's order.
  struct Share {
    double remaining;
    double weight_sum;
    double level;  // the share its flows froze at, kUnlimited if none
    // What the filling saw of the flows outside its set here, for check_region() to skip the
    // resources where none of them can join: the fastest, and whether this is the bottleneck
    // of any.
    double outside_fastest;
    std::uint32_t unfrozen;
    bool outsiders;
    bool outside_bottlenecked;
    bool limited;  // its capacity is not kUnlimited (capacities change only between fillings)
  };
  // Can the resource be saturated by the bounds of its flows? See the header comment. The
  // margin keeps rounding in the running demand sum from calling a binding resource slack; a
  // slack resource called binding only costs time.
  bool binding(const Resource& res) const {
    return res.capacity < kUnlimited && res.flows.size() > 1 &&
           res.demand > res.capacity * (1 - 1e-9);
  }
  // A resource waiting in the progressive-filling heap under the share it had when pushed, with
  // its position in the set: the heap reads its share there, not through its record.
  struct Level {
    double share;
    ResourceId resource;
    std::uint32_t local;
  };
  // Heap order: lowest share first, ties by resource id, so that runs repeat exactly.
  // A function object, not a function: passed to the heap algorithms as a pointer, a function
  // was called through it at every comparison instead of being inlined.
  struct Later {
    bool operator()(const Level& a, const Level& b) const {
      return a.share > b.share || (a.share == b.share && a.resource > b.resource);
    }
  };
  static constexpr Later kLater{};
  // The share, for a limited resource with flows still to freeze; kUnlimited for any other, so
  // that the filling's scan never picks it.
  static double fair_share(const Share& s) {
    if (s.unfrozen == 0 || !s.limited) return kUnlimited;
    return s.remaining > 0 ? s.remaining / s.weight_sum : 0.0;
  }
  // Rounds of progressive filling done by scanning before a set of more than kHeapAbove
  // resources goes into a heap: a scan is cheaper for the few levels of a symmetric collective
  // and for sets of up to a few hundred resources, whose rounds are about a quarter of their
  // resources on a tree; the heap for many levels among more. Later rounds break ties as the
  // heap does (Later), so that where the heap starts does not change a result.
  static constexpr unsigned kScanRounds = 8;
  static constexpr std::size_t kHeapAbove = 256;
  double lowest_by_scan(ResourceId& bottleneck, bool ties_by_id) const;
  double lowest_in_heap(ResourceId& bottleneck);
  void sift_down(Level item);  // `item` replaces the heap's top
  void pop_lowest();
  double bound_of(const Flow& flow) const;
  void add_demand(const Flow& flow, double sign);
  void settle_demand(ResourceId r);
  void touch_slack(const Flow& flow);
  // Reservations: a flow starting onto resources that hold no flow runs at its bound until
  // another starts on one of them, so it reserves them instead of joining their lists and
  // adding to their demand, and enter() puts it there, as of its start, the moment anything
  // else needs it: a start on one of its resources, a capacity change there, a split of tied
  // links. reserve() reserves the flow's resources as of `now` and returns its bound where it
  // may, else returns 0 and reserves nothing.
  double reserve(FlowId f, double now);
  void enter(FlowId f);
  void enter_reserved(ResourceId r) {
    if (res_[r].reserved != kNoFlow) enter(res_[r].reserved);
  }
  // Deferred mode: records the seeds of an arrival or departure for flush(); false otherwise.
  bool defer(const Flow& flow);
  bool reshared_since(ResourceId r, std::uint32_t epoch) const;
  // reshared_since(r, first) for the flush under way, remembered once true: it stays true until
  // the flush ends, and an instant of an all-to-all seeds each NIC once per arrival, a million
  // times at 1024 GPUs, each a scan of its thousands of flows.
  bool settled(ResourceId r, std::uint32_t first);
  // A region is filled as its whole component instead when a check would more than double it
  // (past kSmallRegion flows): where every flow shares a few resources (an all-to-all through
  // NICs), regions grow by half the component at each check. One that has grown kMaxGrowth
  // times or past kMaxRegionFlows falls back too, unless the flows it has filled so far are
  // under 1 / kComponentRatio of the running flows, which bound its component: a long cascade
  // of a 100,000-GPU tree (16 fillings of 73 flows) is still far cheaper to follow than its
  // component of 22,000 flows at 16,384 GPUs, or 180,000 at 131,072.
  static constexpr std::size_t kSmallRegion = 64;
  static constexpr unsigned kMaxGrowth = 16;
  static constexpr std::size_t kMaxRegionFlows = 4096;
  static constexpr std::size_t kComponentRatio = 8;
  static constexpr double kTolerance = 1e-9;
  // Prefetch passes, one per level of indirection, so that the misses of a level overlap
  // instead of each waiting for the one before (see fill_region()).
  void prefetch_entries(const std::vector<ResourceId>& resources) const;
  void prefetch_flows_on(const std::vector<ResourceId>& resources) const;
  // prefetch_resources() of each: the first line of each resource only, what add_to_region()
  // reads to tell whether it binds. add_to_component() asks for the list's line of those that
  // join: on the 16,384-GPU tree, 46 % of those prefetched.
  void prefetch_resources_of(const std::vector<FlowId>& flows) const;
  // The lines of a resource's flow list, up to kListLines of them: the few entries of a
  // fabric link all, while the list of a NIC that a whole all-to-all crosses is scanned from
  // its start as it comes, not flooded into the cache ahead of its turn.
  static constexpr std::size_t kListLines = 4;
  void prefetch_list(const Resource& res) const {
    if (res.flows.empty()) return;
    const char* p = reinterpret_cast<const char*>(res.flows.data());
    const char* end = reinterpret_cast<const char*>(res.flows.data() + res.flows.size()) - 1;
    const char* last = std::min(end, p + (kListLines - 1) * 64);
    for (; p < last; p += 64) collsim::prefetch(p);
    collsim::prefetch(last);
  }
  void new_epoch();
  void reshare(double now);  // start/release: the region, or the component
  void reshare_component(double now);
  // The set of every flow coupled to the seeds, unless it has more than `max_flows` flows.
  bool gather_component(std::size_t max_flows);
  void note_rescheduled();  // flush(): adds what the last re-share re-timed to flushed_
  void finish_flush(std::vector<ResourceId>& pending);
  // A flush of several arrivals and departures while fewer than kWholeInstantBelow flows run
  // re-shares their component at once when it holds at most kFlowsPerChange flows per arrival
  // or departure. In a small model one instant's changes meet on the same few resources: an
  // 8-GPU direct allreduce's 56 flows all cross the NVSwitch's 16 ports, and each of an
  // instant's arrivals re-shared a region of 9 flows and filled it twice, where one filling
  // of the 56 costs a fifth. The rule reads flow counts only, which tying links does not change.
  // In a large model an instant's changes are mostly far apart (a tree across a cluster), and
  // regions stay, with results unchanged to the bit there.
  static constexpr std::size_t kWholeInstantBelow = 256;
  static constexpr std::size_t kFlowsPerChange = 16;
  bool fill_region();  // false when it had to fall back
  void add_to_component(ResourceId r);
  void add_to_region(FlowId f);
  void fill();
  enum class Check : std::uint8_t { settled, grown, too_wide };
  Check check_region();
  void commit(double now);
  void freeze(Flow& flow, double rate, ResourceId bottleneck);
  // Keeps the entries' copies of a flow's rate and bottleneck equal to the flow's own.
  Entry& entry_of(const Use& use) { return res_[use.resource].flows[use.slot]; }
  void set_rate(Flow& flow, double rate);
  void mark_bottleneck(Flow& flow);

  HugeVector<Flow, huge_pages::Use::hot> flows_;
  // flows_.size(), kept apart: the prefetching hints ask for it several times an event, and a
  // vector of 192-byte records divides by 3 to answer.
  std::uint32_t slots_ = 0;
  std::vector<FlowId> free_;
  HugeVector<Resource, huge_pages::Use::hot> res_;
  std::vector<double> bytes_;  // by resource
  std::vector<ResourceId> seeds_;
  std::vector<ResourceId> comp_res_;
  std::vector<FlowId> comp_flows_;
  std::vector<FlowId> rescheduled_;
  std::vector<FlowId> by_bound_;
  // fair_share() of each resource of the set, in the set's order, kept up to date wherever it
  // can change: a round of filling scans one array instead of one record per resource.
  std::vector<double> fair_;
  std::vector<Share> share_;  // the rest of each set resource's filling, in the same order
  // What the last filling of the set found before its first round, for the next filling of
  // the same set once it has grown: the first scanned_ resources and flows_scanned_ flows of
  // the set, but the resources marked in rescan_, where a flow that joined holds an entry.
  std::vector<Share> scanned_share_;
  std::vector<double> scanned_fair_;
  std::vector<std::uint8_t> rescan_;  // bytes, not bits: read once per resource per filling
  std::size_t scanned_ = 0;
  std::size_t flows_scanned_ = 0;
  std::vector<Level> heap_;
  std::vector<FlowId> joining_;
  // The set positions where check_region() may find flows to join, noted as the filling learns
  // them: an outside flow bottlenecked there, or one faster than the level the filling set.
  std::vector<std::uint32_t> to_check_;
  bool deferred_ = false;
  std::vector<ResourceId> pending_seeds_;      // what the arrivals and departures since the last
  std::vector<ResourceId> pending_touched_;    // flush changed, and (observers) what they loaded
  std::vector<std::uint32_t> pending_groups_;  // where each one's seeds begin
  std::vector<FlowId> flushed_;                // flush(): rescheduled by its regions so far
  std::vector<ResourceId> flushed_res_;        // and (observers) the resources they re-shared
  std::vector<std::uint32_t> settled_in_;      // by resource, the last flush it was settled in
  std::uint32_t flushes_ = 0;
  std::uint32_t epoch_ = 0;
  bool report_touched_ = false;
  bool local_ = true;
  bool reserve_ = true;
  std::size_t heap_above_ = kHeapAbove;
  std::size_t whole_instant_below_ = kWholeInstantBelow;
  // After a region falls back a second time in a row, the next few re-shares go straight to
  // their component: where regions do not pay (an all-to-all, where each grows to half the
  // component before failing), trying each one first would cost more than the component alone.
  // One fallback alone is no sign of that: on a tree at many chunks a long cascade now and then
  // falls back and the next region settles (747 fallbacks on 1024 GPUs at k = 32, not one
  // followed by another), and skipping after each filled four components of thousands of flows
  // for nothing: 4096 GPUs at k = 32 took twice the time.
  static constexpr unsigned kSkipAfterFallback = 4;
  unsigned skip_ = 0;
  unsigned fallen_back_ = 0;  // regions in a row that fell back
  std::size_t running_ = 0;   // flows started with bytes to drain and not released
  SharingStats stats_;
};

}  // namespace collsim::sim
