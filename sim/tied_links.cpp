#include "sim/tied_links.hpp"

#include "topology/error.hpp"

namespace collsim::sim {

void TiedLinks::reset(const std::vector<double>& capacity) {
  capacity_ = capacity;
  cls_.assign(capacity.size(), kNone);
  pos_.assign(capacity.size(), 0);
  pinned_.assign(capacity.size(), 0);
  classes_.clear();
  splits_.clear();
}

void TiedLinks::pin(ResourceId r) {
  if (cls_[r] != kNone) throw InternalError("TiedLinks::pin after a route crossed the link");
  pinned_[r] = 1;
}

std::uint32_t TiedLinks::new_class() {
  classes_.emplace_back();
  return static_cast<std::uint32_t>(classes_.size() - 1);
}

void TiedLinks::choose_rep(Class& c) const {
  ResourceId best = c.members.front();
  for (ResourceId r : c.members)
    if (capacity_[r] < capacity_[best] || (capacity_[r] == capacity_[best] && r < best)) best = r;
  c.rep = best;
}

void TiedLinks::add_route(const ResourceId* begin, const ResourceId* end) {
  // Links no route crossed before have one history, this route: they form one class.
  const auto first_new = static_cast<std::uint32_t>(classes_.size());
  std::uint32_t fresh = kNone;
  touched_.clear();
  for (const ResourceId* l = begin; l != end; ++l) {
    const std::uint32_t c = cls_[*l];
    if (c == kNone) {
      std::uint32_t to;
      if (pinned_[*l]) {
        to = new_class();
      } else {
        if (fresh == kNone) fresh = new_class();
        to = fresh;
      }
      cls_[*l] = to;
      pos_[*l] = static_cast<std::uint32_t>(classes_[to].members.size());
      classes_[to].members.push_back(*l);
      classes_[to].rep = classes_[to].members.front();
      continue;
    }
    if (c >= first_new) throw InternalError("a route crosses one link twice");
    if (classes_[c].hits++ == 0) touched_.push_back(c);
  }
  if (fresh != kNone) choose_rep(classes_[fresh]);
  for (std::uint32_t c : touched_) {
    if (classes_[c].hits > classes_[c].members.size())
      throw InternalError("a route crosses one link twice");
    const bool whole = classes_[c].hits == classes_[c].members.size();
    classes_[c].hits = 0;
    if (whole) continue;
    // The route crosses part of the class: that part has a history of its own from now on.
    const std::uint32_t part = new_class();
    for (const ResourceId* l = begin; l != end; ++l) {
      if (cls_[*l] != c) continue;
      std::vector<ResourceId>& from = classes_[c].members;
      const ResourceId last = from.back();
      from[pos_[*l]] = last;
      pos_[last] = pos_[*l];
      from.pop_back();
      cls_[*l] = part;
      pos_[*l] = static_cast<std::uint32_t>(classes_[part].members.size());
      classes_[part].members.push_back(*l);
    }
    const ResourceId old = classes_[c].rep;
    choose_rep(classes_[c]);
    choose_rep(classes_[part]);
    // The old representative is the least of whichever part holds it, so it stays that part's.
    const ResourceId tied = cls_[old] == c ? classes_[part].rep : classes_[c].rep;
    splits_.push_back(Split{tied, old});
  }
}

}  // namespace collsim::sim
