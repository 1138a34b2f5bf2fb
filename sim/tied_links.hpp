#pragma once
// Links that every route crosses together.
//
// Two links that exactly the same routes cross carry exactly the same flows at every moment,
// each with weight one: their max-min constraints, Σ x ≤ c, differ only in c, so only the one of
// least capacity can ever bind, and the allocation with the other left out is the same. The flow
// model then needs one link per *class* of links crossed by the same routes, its
// *representative*: on a rail-optimised cluster a ring's transfer between servers crosses eight
// links, of which the ring uses none for anything else, and its flow keeps one. Starting,
// ending and re-sharing a flow cost in proportion to the resources it holds.
//
// Classes are kept by partition refinement as routes arrive (a streamed plan resolves its routes
// batch by batch): a new route splits every class it crosses in part. The part without the old
// representative gets one of its own, which from then on must carry the flows of every route
// crossing it, including those already running: split() reports it for the flow model
// (FlowModel::split_tied). Classes only split, so two links in one class at the end have been
// crossed by the same routes all along, and a link left out reports its representative's bytes
// and busy time, which are its own.
#include <cstdint>
#include <utility>
#include <vector>

#include "sim/resources.hpp"

namespace collsim::sim {

class TiedLinks {
 public:
  // `capacity` of every resource, which picks the representative (least capacity, then lowest
  // id). Forgets every route.
  void reset(const std::vector<double>& capacity);
  // Never tied to another link: a link whose capacity changes during the run.
  void pin(ResourceId r);
  // A route's links, each at most once.
  void add_route(const ResourceId* begin, const ResourceId* end);

  bool is_representative(ResourceId r) const { return cls_[r] == kNone || rep_of(r) == r; }
  // The link whose flows, bytes and busy time are r's.
  ResourceId representative(ResourceId r) const { return cls_[r] == kNone ? r : rep_of(r); }

  // New representatives since the last call, each with the representative of the class it split
  // from: (new, old). Flows on `old` from routes known before the split also cross `new`.
  struct Split {
    ResourceId tied;
    ResourceId from;
  };
  std::vector<Split> take_splits() { return std::exchange(splits_, {}); }

 private:
  static constexpr std::uint32_t kNone = ~std::uint32_t{0};
  struct Class {
    std::vector<ResourceId> members;
    ResourceId rep = 0;
    std::uint32_t hits = 0;  // members the route being added crosses
  };
  ResourceId rep_of(ResourceId r) const { return classes_[cls_[r]].rep; }
  std::uint32_t new_class();
  void choose_rep(Class& c) const;

  std::vector<double> capacity_;
  std::vector<std::uint32_t> cls_;  // by resource: its class, kNone before any route crosses it
  std::vector<std::uint32_t> pos_;  // by resource: its place in its class's members
  std::vector<std::uint8_t> pinned_;
  std::vector<Class> classes_;
  std::vector<std::uint32_t> touched_;
  std::vector<Split> splits_;
};

}  // namespace collsim::sim
