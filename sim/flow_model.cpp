#include "sim/flow_model.hpp"

#include <algorithm>
#include <cmath>

#include "topology/error.hpp"

namespace collsim::sim {

void FlowModel::reset(std::vector<double> capacity) {
  flows_.clear();
  free_.clear();
  res_.assign(capacity.size(), Resource{});
  for (std::size_t r = 0; r < capacity.size(); ++r) res_[r].capacity = capacity[r];
  epoch_ = 0;
}

FlowId FlowModel::create() {
  FlowId f;
  if (!free_.empty()) {
    f = free_.back();
    free_.pop_back();
  } else {
    f = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
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

std::vector<ResourceId> FlowModel::resources(FlowId f) const {
  std::vector<ResourceId> out;
  for (const Use& u : flows_[f].uses) out.push_back(u.resource);
  return out;
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
    flow.finish = now;
    ++flow.version;
    flow.scheduled = true;
    rescheduled_.push_back(f);
    return;
  }
  seeds_.clear();
  for (std::uint32_t u = 0; u < flow.uses.size(); ++u) {
    Use& use = flow.uses[u];
    Resource& res = res_[use.resource];
    if (res.flows.empty()) res.busy_since = now;
    use.slot = static_cast<std::uint32_t>(res.flows.size());
    res.flows.push_back(Entry{f, u});
    if (res.capacity < kUnlimited) seeds_.push_back(use.resource);
  }
  if (seeds_.empty()) {
    // Only unlimited resources: the bytes drain in no time.
    flow.rate = kUnlimited;
    flow.finish = now;
    ++flow.version;
    flow.scheduled = true;
    rescheduled_.push_back(f);
    return;
  }
  // Fast path, the common case in a well-scheduled collective: alone on every limited resource,
  // the flow is its own component and gets the smallest capacity / weight.
  double rate = kUnlimited;
  for (const Use& use : flow.uses) {
    const Resource& res = res_[use.resource];
    if (!(res.capacity < kUnlimited)) continue;
    if (res.flows.size() != 1) {
      reshare(now);
      return;
    }
    rate = std::min(rate, res.capacity / use.weight);
  }
  comp_res_.assign(seeds_.begin(), seeds_.end());
  flow.rate = rate;
  flow.finish = rate > 0 ? now + bytes / rate : kUnlimited;
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
  seeds_.clear();
  for (const Use& use : flow.uses) {
    Resource& res = res_[use.resource];
    res.bytes += drained * use.weight;
    // Swap-remove, then tell the moved flow where its entry went.
    const Entry moved = res.flows.back();
    res.flows[use.slot] = moved;
    flows_[moved.flow].uses[moved.use].slot = use.slot;
    res.flows.pop_back();
    if (res.flows.empty()) res.busy_total += now - res.busy_since;
    if (res.capacity < kUnlimited) seeds_.push_back(use.resource);
  }
  flow.active = false;
  flow.scheduled = false;
  ++flow.version;  // any event still queued for it is now stale
  flow.uses.clear();
  free_.push_back(f);
  rescheduled_.clear();
  comp_res_.clear();
  bool alone = true;
  for (ResourceId r : seeds_) alone = alone && res_[r].flows.empty();
  if (alone)
    comp_res_.assign(seeds_.begin(), seeds_.end());  // nobody left to re-share with
  else
    reshare(now);
}

void FlowModel::set_capacity(ResourceId r, double capacity, double now) {
  res_[r].capacity = capacity;
  rescheduled_.clear();
  comp_res_.clear();
  seeds_.clear();
  seeds_.push_back(r);
  reshare(now);
}

double FlowModel::load(ResourceId r) const {
  double sum = 0;
  for (const Entry& e : res_[r].flows) {
    const Flow& flow = flows_[e.flow];
    if (flow.rate < kUnlimited) sum += flow.uses[e.use].weight * flow.rate;
  }
  return sum;
}

double FlowModel::busy_time(ResourceId r, double now) const {
  const Resource& res = res_[r];
  return res.busy_total + (res.flows.empty() ? 0.0 : now - res.busy_since);
}

void FlowModel::add_to_component(ResourceId r) {
  res_[r].stamp = epoch_;
  comp_res_.push_back(r);
}

void FlowModel::reshare(double now) {
  if (++epoch_ == 0) {
    // The stamps wrapped around: clear them so that no stale stamp matches the new epoch.
    for (Resource& res : res_) res.stamp = 0;
    for (Flow& flow : flows_) flow.stamp = 0;
    epoch_ = 1;
  }
  comp_flows_.clear();
  // Seeds join even when unlimited (a capacity that became unlimited frees its flows); from
  // there the component grows through limited resources only.
  for (ResourceId s : seeds_)
    if (res_[s].stamp != epoch_) add_to_component(s);
  for (std::size_t i = 0; i < comp_res_.size(); ++i) {
    for (const Entry& e : res_[comp_res_[i]].flows) {
      Flow& flow = flows_[e.flow];
      if (flow.stamp == epoch_) continue;
      flow.stamp = epoch_;
      comp_flows_.push_back(e.flow);
      for (const Use& use : flow.uses)
        if (res_[use.resource].stamp != epoch_ && res_[use.resource].capacity < kUnlimited)
          add_to_component(use.resource);
    }
  }

  for (ResourceId r : comp_res_) {
    Resource& res = res_[r];
    res.remaining = res.capacity;
    res.unfrozen = static_cast<std::uint32_t>(res.flows.size());
    res.weight_sum = 0;
    for (const Entry& e : res.flows) res.weight_sum += flows_[e.flow].uses[e.use].weight;
  }
  for (FlowId f : comp_flows_) {
    Flow& flow = flows_[f];
    if (flow.rate > 0 && flow.rate < kUnlimited) flow.remaining -= flow.rate * (now - flow.last);
    flow.last = now;
    flow.frozen = false;
    flow.new_rate = kUnlimited;
  }

  // Progressive filling: the resource with the smallest fair share fixes its flows' rates.
  std::size_t left = comp_flows_.size();
  while (left > 0) {
    double best = kUnlimited;
    Resource* bottleneck = nullptr;
    for (ResourceId r : comp_res_) {
      Resource& res = res_[r];
      if (res.unfrozen == 0 || !(res.capacity < kUnlimited)) continue;
      const double share = res.remaining > 0 ? res.remaining / res.weight_sum : 0.0;
      if (share < best) {
        best = share;
        bottleneck = &res;
      }
    }
    if (bottleneck == nullptr) break;  // the rest cross unlimited resources only
    for (const Entry& e : bottleneck->flows) {
      Flow& flow = flows_[e.flow];
      if (flow.frozen) continue;
      flow.frozen = true;
      flow.new_rate = best;
      --left;
      for (const Use& use : flow.uses) {
        Resource& res = res_[use.resource];
        if (res.stamp != epoch_) continue;
        --res.unfrozen;
        res.weight_sum -= use.weight;
        res.remaining -= use.weight * best;
      }
    }
  }

  for (FlowId f : comp_flows_) {
    Flow& flow = flows_[f];
    if (flow.scheduled && flow.new_rate == flow.rate) continue;
    flow.rate = flow.new_rate;
    if (flow.remaining <= 0 || flow.rate == kUnlimited)
      flow.finish = now;
    else if (flow.rate <= 0)
      flow.finish = kUnlimited;  // stalled until some capacity returns
    else
      flow.finish = now + flow.remaining / flow.rate;
    flow.scheduled = true;
    ++flow.version;
    rescheduled_.push_back(f);
  }
}

}  // namespace collsim::sim
