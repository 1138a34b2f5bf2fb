#include "sim/flow_model.hpp"

#include <algorithm>
#include <cmath>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "topology/error.hpp"

namespace collsim::sim {

void FlowModel::reset(std::vector<double> capacity) {
  flows_.clear();
  slots_ = 0;
  free_.clear();
  res_.assign(capacity.size(), Resource{});
  settled_in_.assign(capacity.size(), 0);
  flushes_ = 0;
  bytes_.assign(capacity.size(), 0.0);
  for (std::size_t r = 0; r < capacity.size(); ++r) res_[r].capacity = capacity[r];
  epoch_ = 0;
  skip_ = 0;
  fallen_back_ = 0;
  running_ = 0;
}

FlowId FlowModel::create() {
  FlowId f;
  if (!free_.empty()) {
    f = free_.back();
    free_.pop_back();
  } else {
    f = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
    slots_ = f + 1;
  }
  Flow& flow = flows_[f];
  flow.uses.clear();  // keeps its capacity: no allocation once warm
  flow.active = false;
  flow.scheduled = false;
  return f;
}

void FlowModel::add_use(FlowId f, ResourceId r, double weight) {
  flows_[f].uses.push_back(Use{r, 0, weight});
}

void FlowModel::add_use_merged(FlowId f, ResourceId r, double weight) {
  for (Use& use : flows_[f].uses)
    if (use.resource == r) {
      use.weight += weight;
      return;
    }
  add_use(f, r, weight);
}

std::vector<ResourceId> FlowModel::resources(FlowId f) const {
  std::vector<ResourceId> out;
  for (const Use& u : flows_[f].uses) out.push_back(u.resource);
  return out;
}

double FlowModel::bound_of(const Flow& flow) const {
  double bound = kUnlimited;
  for (const Use& use : flow.uses) {
    const double c = res_[use.resource].capacity;
    if (c < kUnlimited) bound = std::min(bound, c / use.weight);
  }
  return bound;
}

void FlowModel::add_demand(const Flow& flow, double sign) {
  if (!(flow.bound < kUnlimited)) return;  // no limited resource
  for (const Use& use : flow.uses) {
    Resource& res = res_[use.resource];
    if (res.capacity < kUnlimited) res.demand += sign * use.weight * flow.bound;
  }
}

void FlowModel::settle_demand(ResourceId r) {
  // With at most one flow the running sum is replaced by its exact value, so that rounding
  // never accumulates over a resource's lifetime.
  Resource& res = res_[r];
  if (res.flows.size() > 1) return;
  res.demand = 0;
  if (res.flows.empty() || !(res.capacity < kUnlimited)) return;
  const Entry& e = res.flows.front();
  res.demand = e.weight * flows_[e.flow].bound;
}

void FlowModel::touch_slack(const Flow& flow) {
  // The flow's resources whose load changed without a re-share: observers still see them.
  if (!report_touched_) return;
  for (const Use& use : flow.uses)
    if (res_[use.resource].capacity < kUnlimited && res_[use.resource].stamp != epoch_)
      comp_res_.push_back(use.resource);
}

bool FlowModel::defer(const Flow& flow) {
  if (!deferred_) return false;
  // Each arrival or departure keeps its seeds together, as one region, as when not deferred.
  pending_groups_.push_back(static_cast<std::uint32_t>(pending_seeds_.size()));
  pending_seeds_.insert(pending_seeds_.end(), seeds_.begin(), seeds_.end());
  if (report_touched_)
    for (const Use& use : flow.uses)
      if (res_[use.resource].capacity < kUnlimited) pending_touched_.push_back(use.resource);
  return true;
}

void FlowModel::note_rescheduled() {
  // A flow two regions re-timed is scheduled once, with its last completion time.
  for (FlowId f : rescheduled_)
    if (!flows_[f].listed) {
      flows_[f].listed = true;
      flushed_.push_back(f);
    }
  if (report_touched_) flushed_res_.insert(flushed_res_.end(), comp_res_.begin(), comp_res_.end());
}

bool FlowModel::reshared_since(ResourceId r, std::uint32_t epoch) const {
  // Epochs only grow within a flush, unless they wrap (new_epoch), which clears every stamp:
  // then nothing counts as re-shared and the seed gets its own region, which is always safe.
  for (const Entry& e : res_[r].flows)
    if (flows_[e.flow].stamp < epoch) return false;
  return true;
}

bool FlowModel::settled(ResourceId r, std::uint32_t first) {
  if (settled_in_[r] == flushes_) return true;
  if (!reshared_since(r, first)) return false;
  settled_in_[r] = flushes_;
  return true;
}

void FlowModel::flush(double now) {
  rescheduled_.clear();
  comp_res_.clear();
  if (pending_seeds_.empty()) return;
  if (++flushes_ == 0) {  // wrapped: no mark left may match
    std::fill(settled_in_.begin(), settled_in_.end(), 0);
    flushes_ = 1;
  }
  flushed_.clear();
  flushed_res_.clear();
  std::vector<ResourceId> pending;
  pending.swap(pending_seeds_);
  pending_groups_.push_back(static_cast<std::uint32_t>(pending.size()));
  const std::size_t groups = pending_groups_.size() - 1;
  if (local_ && groups > 1 && running_ < whole_instant_below_) {
    seeds_.assign(pending.begin(), pending.end());
    if (gather_component(kFlowsPerChange * groups)) {
      ++stats_.components;
      ++stats_.instants;
      fill();
      commit(now);
      note_rescheduled();
      finish_flush(pending);
      return;
    }
  }
  // A seed all of whose flows a region of this flush re-shared is settled: that region saw the
  // seed as it is now, and the regions after it checked every flow they touched. (A component
  // gathered above and given up stamped its flows before `first`.)
  const std::uint32_t first = epoch_ + 1;
  for (std::size_t g = 0; g < groups; ++g) {
    seeds_.clear();
    for (std::uint32_t i = pending_groups_[g]; i < pending_groups_[g + 1]; ++i)
      if (epoch_ < first || !settled(pending[i], first)) seeds_.push_back(pending[i]);
    if (seeds_.empty()) continue;
    // Each region's own reschedulings: kept from one region to the next, the list grew with the
    // instant and the scan below was quadratic in its arrivals (65,536 at once on the
    // 131,072-GPU tree's first instant).
    rescheduled_.clear();
    reshare(now);
    note_rescheduled();
  }
  finish_flush(pending);
}

void FlowModel::finish_flush(std::vector<ResourceId>& pending) {
  pending_groups_.clear();
  pending.clear();
  pending_seeds_.swap(pending);  // keeps its capacity
  for (FlowId f : flushed_) flows_[f].listed = false;
  rescheduled_.swap(flushed_);
  comp_res_.clear();
  if (report_touched_) {
    flushed_res_.insert(flushed_res_.end(), pending_touched_.begin(), pending_touched_.end());
    std::sort(flushed_res_.begin(), flushed_res_.end());
    flushed_res_.erase(std::unique(flushed_res_.begin(), flushed_res_.end()), flushed_res_.end());
    comp_res_.swap(flushed_res_);
  }
  pending_touched_.clear();
}

void FlowModel::start(FlowId f, double bytes, double now) {
  Flow& flow = flows_[f];
  flow.active = true;
  flow.bytes = bytes;
  flow.remaining = bytes;
  flow.rate = 0;
  flow.last = now;
  flow.scheduled = false;
  rescheduled_.clear();
  comp_res_.clear();
  if (bytes <= 0) {
    // Nothing to drain: done now, and the resources never see it.
    flow.uses.clear();
    flow.bound = kUnlimited;
    flow.finish = now;
    ++flow.version;
    flow.scheduled = true;
    rescheduled_.push_back(f);
    return;
  }
  stats_.held += flow.uses.size();
  ++running_;
  if (const double bound = reserve(f, now); bound > 0) {
    // Alone on every resource: what the slack path below would do, without the lists.
    flow.reserved = true;
    flow.bound = bound;
    new_epoch();
    flow.rate = flow.bound;
    flow.bottleneck = kNoResource;
    flow.marked = kNoResource;
    flow.finish = flow.rate == kUnlimited ? now : now + bytes / flow.rate;
    ++flow.version;
    flow.scheduled = true;
    rescheduled_.push_back(f);
    return;
  }
  for (const Use& use : flow.uses) enter_reserved(use.resource);
  // The entries mark the bottleneck the record holds, as check_region() read it from the record
  // before the marks existed: a reused record still names its last flow's bottleneck until this
  // flow's first re-share, which at worst makes a check in the same flush take it in.
  flow.marked = flow.bottleneck;
  for (std::uint32_t u = 0; u < flow.uses.size(); ++u) {
    Use& use = flow.uses[u];
    Resource& res = res_[use.resource];
    if (res.flows.empty()) res.busy_since = now;
    use.slot = static_cast<std::uint32_t>(res.flows.size());
    res.flows.push_back(Entry{f, u, use.weight, flow.rate, 0, use.resource == flow.bottleneck});
  }
  flow.bound = bound_of(flow);
  add_demand(flow, +1);
  seeds_.clear();
  for (const Use& use : flow.uses) {
    settle_demand(use.resource);
    if (binding(res_[use.resource])) seeds_.push_back(use.resource);
  }
  if (!seeds_.empty()) {
    if (defer(flow)) return;
    reshare(now);
    touch_slack(flow);
    return;
  }
  // Slack everywhere (always so when alone on every limited resource): the flow runs at its
  // bound and nobody else's share changes.
  new_epoch();
  touch_slack(flow);
  set_rate(flow, flow.bound);
  flow.bottleneck = kNoResource;
  mark_bottleneck(flow);
  flow.finish = flow.rate == kUnlimited ? now
                : flow.rate > 0         ? now + bytes / flow.rate
                                        : kUnlimited;
  ++flow.version;
  flow.scheduled = true;
  rescheduled_.push_back(f);
}

void FlowModel::release(FlowId f, double now, bool completed) {
  Flow& flow = flows_[f];
  if (!flow.active) throw InternalError("FlowModel::release of an inactive flow");
  if (!completed && flow.rate > 0 && flow.rate < kUnlimited)
    flow.remaining -= flow.rate * (now - flow.last);
  const double drained = completed ? flow.bytes : std::max(0.0, flow.bytes - flow.remaining);
  if (flow.bytes > 0) --running_;
  if (flow.reserved) {
    // What the path below does for a flow alone on every resource.
    for (const Use& use : flow.uses) {
      Resource& res = res_[use.resource];
      bytes_[use.resource] += drained * use.weight;
      res.reserved = kNoFlow;
      res.busy_total += now - res.busy_since;
    }
    flow.reserved = false;
    flow.active = false;
    flow.scheduled = false;
    ++flow.version;
    rescheduled_.clear();
    comp_res_.clear();
    new_epoch();
    flow.uses.clear();
    free_.push_back(f);
    return;
  }
  // Only resources that bound somebody can pass bandwidth on to the flows left there.
  seeds_.clear();
  for (const Use& use : flow.uses)
    if (binding(res_[use.resource])) seeds_.push_back(use.resource);
  add_demand(flow, -1);
  for (const Use& use : flow.uses) {
    Resource& res = res_[use.resource];
    bytes_[use.resource] += drained * use.weight;
    // Swap-remove, then tell the moved flow where its entry went.
    const Entry moved = res.flows.back();
    res.flows[use.slot] = moved;
    flows_[moved.flow].uses[moved.use].slot = use.slot;
    res.flows.pop_back();
    if (res.flows.empty()) res.busy_total += now - res.busy_since;
    settle_demand(use.resource);
  }
  flow.active = false;
  flow.scheduled = false;
  ++flow.version;  // any event still queued for it is now stale
  rescheduled_.clear();
  comp_res_.clear();
  if (seeds_.empty()) {
    new_epoch();
    touch_slack(flow);
  } else if (!defer(flow)) {
    reshare(now);
    touch_slack(flow);
  }
  flow.uses.clear();
  free_.push_back(f);
}

double FlowModel::reserve(FlowId f, double now) {
  // Observers are told of every resource whose load changed, which reservations skip.
  if (!reserve_ || report_touched_) return 0;
  const Flow& flow = flows_[f];
  double bound = kUnlimited;  // bound_of(), in the same order
  std::size_t u = 0;
  for (; u < flow.uses.size(); ++u) {
    const Use& use = flow.uses[u];
    Resource& res = res_[use.resource];
    // A resource held by another flow, or one this flow lists twice, whose bound would take one
    // weight only where the flow takes both: in the lists, a filling sees both entries.
    if (!res.flows.empty() || res.reserved != kNoFlow) break;
    res.reserved = f;
    res.busy_since = now;
    if (res.capacity < kUnlimited) bound = std::min(bound, res.capacity / use.weight);
  }
  // A stalled flow (a resource without bandwidth) takes the ordinary path too.
  if (u == flow.uses.size() && bound > 0) return bound;
  for (std::size_t v = 0; v < u; ++v) res_[flow.uses[v].resource].reserved = kNoFlow;
  return 0;
}

void FlowModel::enter(FlowId f) {
  // As start() would have left it: in each list, with its demand; its rate, completion and
  // version stay as they are.
  Flow& flow = flows_[f];
  for (std::uint32_t u = 0; u < flow.uses.size(); ++u) {
    Use& use = flow.uses[u];
    Resource& res = res_[use.resource];
    res.reserved = kNoFlow;
    use.slot = static_cast<std::uint32_t>(res.flows.size());
    res.flows.push_back(Entry{f, u, use.weight, flow.rate, 0, false});
  }
  flow.reserved = false;
  // Alone on each of them: settling sets their demand exactly.
  for (const Use& use : flow.uses) settle_demand(use.resource);
}

void FlowModel::set_capacity(ResourceId r, double capacity, double now) {
  enter_reserved(r);
  // Every flow on r gets a new bound, which changes the demand on its other resources; a flow
  // that lists r twice has two entries here and changes once.
  const auto first_entry = [&](const Entry& e) {
    const Flow& flow = flows_[e.flow];
    for (std::uint32_t u = 0; u < e.use; ++u)
      if (flow.uses[u].resource == r) return false;
    return true;
  };
  for (const Entry& e : res_[r].flows)
    if (first_entry(e)) add_demand(flows_[e.flow], -1);
  res_[r].capacity = capacity;
  seeds_.clear();
  seeds_.push_back(r);
  for (const Entry& e : res_[r].flows) {
    if (!first_entry(e)) continue;
    Flow& flow = flows_[e.flow];
    flow.bound = bound_of(flow);
    add_demand(flow, +1);
    for (const Use& use : flow.uses) seeds_.push_back(use.resource);
  }
  for (ResourceId s : seeds_) settle_demand(s);
  if (!(capacity < kUnlimited)) res_[r].demand = 0;
  rescheduled_.clear();
  comp_res_.clear();
  reshare_component(now);
}

void FlowModel::split_tied(ResourceId from, ResourceId tied) {
  enter_reserved(from);
  Resource& to = res_[tied];
  const Resource& src = res_[from];
  if (!to.flows.empty()) throw InternalError("FlowModel::split_tied onto a resource in use");
  to.busy_since = src.busy_since;
  to.busy_total = src.busy_total;
  bytes_[tied] = bytes_[from];
  to.demand = src.demand;
  // Running flows in the order `from` lists them, so that `tied` scans them in the same order.
  for (const Entry& e : src.flows) {
    Flow& flow = flows_[e.flow];
    const auto u = static_cast<std::uint32_t>(flow.uses.size());
    flow.uses.push_back(Use{tied, static_cast<std::uint32_t>(to.flows.size()), e.weight});
    to.flows.push_back(Entry{e.flow, u, e.weight, e.rate, 0, false});
  }
  // Flows created but not started yet (paying their latency) join it when they start.
  for (Flow& flow : flows_) {
    if (flow.active) continue;
    for (std::size_t u = 0, n = flow.uses.size(); u < n; ++u)
      if (flow.uses[u].resource == from) flow.uses.push_back(Use{tied, 0, flow.uses[u].weight});
  }
}

double FlowModel::load(ResourceId r) const {
  double sum = 0;
  if (const FlowId f = res_[r].reserved; f != kNoFlow) {
    for (const Use& use : flows_[f].uses)
      if (use.resource == r && flows_[f].rate < kUnlimited) sum += use.weight * flows_[f].rate;
  }
  for (const Entry& e : res_[r].flows) {
    const Flow& flow = flows_[e.flow];
    if (flow.rate < kUnlimited) sum += e.weight * flow.rate;
  }
  return sum;
}

double FlowModel::busy_time(ResourceId r, double now) const {
  const Resource& res = res_[r];
  const bool busy = !res.flows.empty() || res.reserved != kNoFlow;
  return res.busy_total + (busy ? now - res.busy_since : 0.0);
}

void FlowModel::add_to_component(ResourceId r) {
  res_[r].stamp = epoch_;
  comp_res_.push_back(r);
  prefetch_list(res_[r]);  // for fill()
}

namespace {

// The first position from `i` on whose value equals `x` (zeros of either sign are equal), or
// `n`: four values to a comparison where vector instructions allow.
std::size_t next_equal(const double* v, std::size_t n, std::size_t i, double x) {
#if defined(__SSE2__)
  const __m128d target = _mm_set1_pd(x);
  for (; i + 4 <= n; i += 4) {
    const int low = _mm_movemask_pd(_mm_cmpeq_pd(_mm_loadu_pd(v + i), target));
    const int high = _mm_movemask_pd(_mm_cmpeq_pd(_mm_loadu_pd(v + i + 2), target));
    if ((low | high) != 0) break;
  }
#endif
  while (i < n && v[i] != x) ++i;
  return i;
}

}  // namespace

double FlowModel::lowest_by_scan(ResourceId& bottleneck, bool ties_by_id) const {
  // The first lowest in the set's order, as a scan that keeps the first strictly lower share
  // finds it, or with `ties_by_id` the lowest with the least resource id, as lowest_in_heap()
  // finds it. Two passes: the lowest value, as a minimum that vector instructions take four
  // shares at a time (a share that is not a number never wins, as in the comparison), then its
  // position (next_equal, four at a time too). Zeros of either sign compare equal there, as they
  // do in the scan.
  const double* fair = fair_.data();
  const std::size_t n = fair_.size();
  double best = kUnlimited;
  std::size_t i = 0;
#if defined(__SSE2__)
  __m128d low = _mm_set1_pd(kUnlimited);
  __m128d high = low;
  for (; i + 4 <= n; i += 4) {
    // min_pd(a, b) is a < b ? a : b, lane by lane.
    low = _mm_min_pd(_mm_loadu_pd(fair + i), low);
    high = _mm_min_pd(_mm_loadu_pd(fair + i + 2), high);
  }
  low = _mm_min_pd(low, high);
  best = std::min(_mm_cvtsd_f64(low), _mm_cvtsd_f64(_mm_unpackhi_pd(low, low)));
#endif
  for (; i < n; ++i) best = fair[i] < best ? fair[i] : best;
  if (!(best < kUnlimited)) return kUnlimited;
  i = next_equal(fair, n, 0, best);
  bottleneck = comp_res_[i];
  if (ties_by_id)
    for (std::size_t j = next_equal(fair, n, i + 1, best); j < n;
         j = next_equal(fair, n, j + 1, best))
      if (comp_res_[j] < bottleneck) bottleneck = comp_res_[j];
  return best;
}

double FlowModel::lowest_in_heap(ResourceId& bottleneck) {
  // Keys are the shares resources had when pushed. A share only rises as flows freeze below it,
  // so every key is a lower bound of its resource's share: a top whose share rose goes back with
  // the new one, and a top whose share is still its key is the lowest. One re-push per stale
  // top, instead of one per frozen flow per resource it crosses.
  while (!heap_.empty()) {
    const Level top = heap_.front();
    const double fair = fair_[top.local];
    const bool unfrozen = share_[top.local].unfrozen > 0;
    if (unfrozen && !(fair > top.share)) {
      bottleneck = top.resource;
      return fair;
    }
    if (unfrozen)
      sift_down(Level{fair, top.resource, top.local});
    else
      pop_lowest();
  }
  return kUnlimited;
}

void FlowModel::sift_down(Level item) {
  // The top's place is free: the earlier child moves up until `item` is no later than either.
  // It stops where `item` belongs instead of sinking to a leaf and climbing back, as
  // std::pop_heap does: a stale top's new share is mostly a little above the old one, and the
  // descent's comparisons were a quarter of a tree's time at 32 chunks. Keys are distinct
  // (one entry per resource, ties broken by id), so the tops come in the order of any heap.
  Level* heap = heap_.data();
  const std::size_t n = heap_.size();
  std::size_t hole = 0;
  for (std::size_t child = 1; child < n; child = 2 * hole + 1) {
    if (child + 1 < n && kLater(heap[child], heap[child + 1])) ++child;
    if (!kLater(item, heap[child])) break;
    heap[hole] = heap[child];
    hole = child;
  }
  heap[hole] = item;
}

void FlowModel::pop_lowest() {
  std::pop_heap(heap_.begin(), heap_.end(), kLater);
  heap_.pop_back();
}

void FlowModel::freeze(Flow& flow, double rate, ResourceId bottleneck) {
  flow.frozen = true;
  flow.new_rate = rate;
  flow.bottleneck = bottleneck;
  for (const Use& use : flow.uses) {
    Resource& res = res_[use.resource];
    if (res.stamp != epoch_) continue;
    Share& sh = share_[res.local];
    --sh.unfrozen;
    sh.weight_sum -= use.weight;
    sh.remaining -= use.weight * rate;
    fair_[res.local] = fair_share(sh);
  }
}

void FlowModel::set_rate(Flow& flow, double rate) {
  if (rate == flow.rate) return;
  flow.rate = rate;
  for (const Use& use : flow.uses) entry_of(use).rate = rate;
}

void FlowModel::mark_bottleneck(Flow& flow) {
  if (flow.bottleneck == flow.marked) return;
  // Every use of the resource: a flow may list one resource twice.
  for (const Use& use : flow.uses) {
    if (use.resource == flow.marked) entry_of(use).bottleneck = false;
    if (use.resource == flow.bottleneck) entry_of(use).bottleneck = true;
  }
  flow.marked = flow.bottleneck;
}

void FlowModel::new_epoch() {
  scanned_ = 0;
  flows_scanned_ = 0;
  if (++epoch_ == 0) {
    // The stamps wrapped around: clear them so that no stale stamp matches the new epoch.
    for (Resource& res : res_) {
      res.stamp = 0;
      for (Entry& e : res.flows) e.stamp = 0;
    }
    for (Flow& flow : flows_) flow.stamp = 0;
    epoch_ = 1;
  }
}

void FlowModel::reshare(double now) {
  if (local_ && skip_ == 0) {
    if (fill_region()) {
      fallen_back_ = 0;
      commit(now);
      return;
    }
    if (++fallen_back_ > 1) skip_ = kSkipAfterFallback;
  } else if (skip_ > 0) {
    --skip_;
  }
  reshare_component(now);
}

void FlowModel::reshare_component(double now) {
  ++stats_.components;
  gather_component(~std::size_t{0});
  fill();
  commit(now);
}

bool FlowModel::gather_component(std::size_t max_flows) {
  new_epoch();
  comp_res_.clear();
  comp_flows_.clear();
  // Seeds join even when slack or unlimited (a capacity that became unlimited frees its flows);
  // from there the component grows through binding resources only.
  for (ResourceId s : seeds_)
    if (res_[s].stamp != epoch_) add_to_component(s);
  for (std::size_t i = 0; i < comp_res_.size(); ++i)
    for (const Entry& e : res_[comp_res_[i]].flows)
      if (flows_[e.flow].stamp != epoch_) {
        if (comp_flows_.size() == max_flows) return false;
        add_to_region(e.flow);
      }
  return true;
}

// The flow joins the set being filled, and its binding resources with it.
void FlowModel::add_to_region(FlowId f) {
  Flow& flow = flows_[f];
  flow.stamp = epoch_;
  comp_flows_.push_back(f);
  // Its entries on the set's resources say so. A resource joins the set with the first of its
  // flows to join (binding() does not change while a set grows), so every entry of a set flow
  // on a set resource is marked.
  for (const Use& use : flow.uses) {
    Resource& res = res_[use.resource];
    if (res.stamp != epoch_) {
      if (!binding(res)) continue;
      add_to_component(use.resource);
    } else if (res.local < scanned_ && comp_res_[res.local] == use.resource) {
      rescan_[res.local] = 1;  // a filling of this set scanned it without this flow
    }
    res.flows[use.slot].stamp = epoch_;
  }
}

void FlowModel::prefetch_entries(const std::vector<ResourceId>& resources) const {
  for (ResourceId r : resources) prefetch_list(res_[r]);
}

void FlowModel::prefetch_flows_on(const std::vector<ResourceId>& resources) const {
  for (ResourceId r : resources)
    for (const Entry& e : res_[r].flows) prefetch_flow(e.flow);
}

void FlowModel::prefetch_resources_of(const std::vector<FlowId>& flows) const {
  for (FlowId f : flows) prefetch_resources(f);
}

bool FlowModel::fill_region() {
  ++stats_.regions;
  new_epoch();
  comp_res_.clear();
  comp_flows_.clear();
  // The region is gathered breadth first through three levels of pointers (a seed's entries,
  // their flows with their uses, the resources used); at 100,000 GPUs nearly every one is a
  // cache miss. Prefetching level by level overlaps the misses of a level.
  prefetch_entries(seeds_);
  prefetch_flows_on(seeds_);
  joining_.clear();
  for (ResourceId s : seeds_)
    for (const Entry& e : res_[s].flows) joining_.push_back(e.flow);
  prefetch_resources_of(joining_);
  for (ResourceId s : seeds_)
    for (const Entry& e : res_[s].flows)
      if (flows_[e.flow].stamp != epoch_) add_to_region(e.flow);
  if (comp_res_.empty()) {
    // No binding resource left among them (a departure left one flow on a resource two
    // shared): each runs at its own bound, as a filling would find.
    stats_.filled += comp_flows_.size();
    for (FlowId f : comp_flows_) {
      flows_[f].new_rate = flows_[f].bound;
      flows_[f].bottleneck = kNoResource;
    }
    return true;
  }
  std::size_t work = 0;  // flows filled, summed over the region's fillings
  for (unsigned growth = 0;; ++growth) {
    fill();
    work += comp_flows_.size();
    const Check check = check_region();
    if (check == Check::settled) return true;
    const bool long_cascade = growth >= kMaxGrowth || comp_flows_.size() > kMaxRegionFlows;
    if (check == Check::too_wide || (long_cascade && kComponentRatio * work >= running_)) {
      ++stats_.fallbacks;
      return false;
    }
    ++stats_.refills;
  }
}

void FlowModel::fill() {
  // Flows outside the set (a region's neighbours) keep their rates: each resource offers the
  // set what they leave. A component has no flow outside it on its resources.
  stats_.filled += comp_flows_.size();
  // The entries were prefetched as each resource joined (add_to_component).
  const std::size_t n = comp_res_.size();
  fair_.resize(n);
  share_.resize(n);
  scanned_share_.resize(n);
  scanned_fair_.resize(n);
  rescan_.resize(n);
  to_check_.clear();
  for (std::size_t i = 0; i < n; ++i) {
    // A region filled again after it grew: a resource none of the joining flows holds is as the
    // last filling found it, entry for entry.
    if (i < scanned_ && !rescan_[i]) {
      share_[i] = scanned_share_[i];
      fair_[i] = scanned_fair_[i];
    } else {
      Resource& res = res_[comp_res_[i]];
      res.local = static_cast<std::uint32_t>(i);
      Share& sh = share_[i];
      sh.remaining = res.capacity;
      sh.unfrozen = 0;
      sh.weight_sum = 0;
      sh.level = kUnlimited;
      sh.outside_fastest = 0;
      sh.outsiders = false;
      sh.outside_bottlenecked = false;
      sh.limited = res.capacity < kUnlimited;
      for (const Entry& e : res.flows) {
        if (e.stamp == epoch_) {
          ++sh.unfrozen;
          sh.weight_sum += e.weight;
          continue;
        }
        if (e.rate < kUnlimited) sh.remaining -= e.weight * e.rate;
        sh.outside_fastest = std::max(sh.outside_fastest, e.rate);
        sh.outsiders = true;
        sh.outside_bottlenecked = sh.outside_bottlenecked || e.bottleneck;
      }
      fair_[i] = fair_share(sh);
      scanned_share_[i] = sh;
      scanned_fair_[i] = fair_[i];
      rescan_[i] = 0;
    }
    if (share_[i].outsiders && share_[i].outside_bottlenecked)
      to_check_.push_back(static_cast<std::uint32_t>(i));
  }
  scanned_ = n;
  // The flows of an earlier filling of this set are in by_bound_ already, or not: a resource
  // joins the set with its first flow, so their resources in the set are the same.
  if (flows_scanned_ == 0) by_bound_.clear();
  for (std::size_t k = 0; k < comp_flows_.size(); ++k) {
    Flow& flow = flows_[comp_flows_[k]];
    flow.frozen = false;
    flow.new_rate = kUnlimited;
    flow.bottleneck = kNoResource;
    if (k < flows_scanned_) continue;
    // A bound set by a resource of the set is enforced by that resource itself; only a bound
    // from a slack resource outside it needs a level of its own.
    double inside = kUnlimited;
    for (const Use& use : flow.uses)
      if (res_[use.resource].stamp == epoch_)
        inside = std::min(inside, res_[use.resource].capacity / use.weight);
    if (flow.bound < inside) by_bound_.push_back(comp_flows_[k]);
  }
  flows_scanned_ = comp_flows_.size();
  std::sort(by_bound_.begin(), by_bound_.end(), [&](FlowId a, FlowId b) {
    return flows_[a].bound < flows_[b].bound || (flows_[a].bound == flows_[b].bound && a < b);
  });

  // Progressive filling: the lowest level, a resource's fair share or flows' own bounds, freezes
  // its flows there; repeat. The first rounds scan the set's resources; a set with many distinct
  // levels then moves them into a heap (lowest_in_heap).
  std::size_t next_bound = 0;
  bool heaped = false;
  // Once every flow is frozen the rest would only empty the heap of resources with none left.
  std::size_t unfrozen = comp_flows_.size();
  for (unsigned round = 0; unfrozen > 0; ++round) {
    if (!heaped && round == kScanRounds && n > heap_above_) {
      heaped = true;
      heap_.clear();
      for (std::size_t i = 0; i < n; ++i) {
        if (share_[i].unfrozen > 0 && share_[i].limited)
          heap_.push_back(Level{fair_[i], comp_res_[i], static_cast<std::uint32_t>(i)});
      }
      std::make_heap(heap_.begin(), heap_.end(), kLater);
    }
    ResourceId bottleneck = kNoResource;
    const double level =
        heaped ? lowest_in_heap(bottleneck) : lowest_by_scan(bottleneck, round >= kScanRounds);
    while (next_bound < by_bound_.size() && flows_[by_bound_[next_bound]].frozen) ++next_bound;
    if (next_bound < by_bound_.size() && flows_[by_bound_[next_bound]].bound < level) {
      // Flows held below every shared level by a resource of their own freeze at their bounds.
      for (; next_bound < by_bound_.size(); ++next_bound) {
        Flow& flow = flows_[by_bound_[next_bound]];
        if (!(flow.bound < level)) break;
        if (!flow.frozen) {
          freeze(flow, flow.bound, kNoResource);
          --unfrozen;
        }
      }
      continue;
    }
    if (bottleneck == kNoResource) break;  // the rest cross unlimited resources only
    if (heaped) pop_lowest();
    Share& frozen_at = share_[res_[bottleneck].local];
    frozen_at.level = level;
    if (frozen_at.outsiders && !frozen_at.outside_bottlenecked &&
        frozen_at.outside_fastest > level * (1 + kTolerance))
      to_check_.push_back(res_[bottleneck].local);
    for (const Entry& e : res_[bottleneck].flows) {
      if (e.stamp != epoch_) continue;  // outside the set: its record is not read
      Flow& flow = flows_[e.flow];
      if (!flow.frozen) {
        freeze(flow, level, bottleneck);
        --unfrozen;
      }
    }
  }
}

FlowModel::Check FlowModel::check_region() {
  // The region's flows have bottlenecks by construction, unless an outside flow on one is faster
  // than the level it set. An outside flow whose bottleneck is in the region must find it still
  // saturated and itself still the fastest there. Anything else kept its bottleneck: no rate on
  // its resources changed.
  joining_.clear();
  // In the set's order, as the joining flows enter it in the order they are found.
  std::sort(to_check_.begin(), to_check_.end());
  for (const std::uint32_t i : to_check_) {
    const Share& sh = share_[i];
    const Resource& res = res_[comp_res_[i]];
    double load = 0;
    double fastest = 0;
    for (const Entry& e : res.flows) {
      const double x = e.stamp == epoch_ ? flows_[e.flow].new_rate : e.rate;
      load += e.weight * x;
      fastest = std::max(fastest, x);
    }
    const bool saturated = load >= res.capacity * (1 - kTolerance);
    for (const Entry& e : res.flows) {
      if (e.stamp == epoch_) continue;
      const bool above_level = sh.level < kUnlimited && e.rate > sh.level * (1 + kTolerance);
      const bool lost_bottleneck =
          e.bottleneck && (!saturated || e.rate < fastest * (1 - kTolerance));
      if (above_level || lost_bottleneck) joining_.push_back(e.flow);
    }
  }
  if (joining_.empty()) return Check::settled;
  if (joining_.size() > comp_flows_.size() && comp_flows_.size() > kSmallRegion)
    return Check::too_wide;
  for (FlowId f : joining_) prefetch_flow(f);
  prefetch_resources_of(joining_);
  for (FlowId f : joining_)
    if (flows_[f].stamp != epoch_) add_to_region(f);
  return Check::grown;
}

void FlowModel::commit(double now) {
  for (FlowId f : comp_flows_) {
    Flow& flow = flows_[f];
    if (flow.rate > 0 && flow.rate < kUnlimited) flow.remaining -= flow.rate * (now - flow.last);
    flow.last = now;
    mark_bottleneck(flow);
    if (flow.scheduled && flow.new_rate == flow.rate) continue;
    set_rate(flow, flow.new_rate);
    if (flow.remaining <= 0 || flow.rate == kUnlimited)
      flow.finish = now;
    else if (flow.rate <= 0)
      flow.finish = kUnlimited;  // stalled until some capacity returns
    else
      flow.finish = now + flow.remaining / flow.rate;
    flow.scheduled = true;
    ++flow.version;
    rescheduled_.push_back(f);
    // Its slack resources were not re-shared, but their load moved with its rate.
    if (report_touched_)
      for (const Use& use : flow.uses)
        if (res_[use.resource].capacity < kUnlimited && res_[use.resource].stamp != epoch_)
          add_to_component(use.resource);
  }
}

}  // namespace collsim::sim
