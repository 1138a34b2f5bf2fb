#pragma once
// Simulating one rank per orbit of a rotation of the ranks (sched::Plan::rotation).
//
// When rotating every rank by s (r -> r + s mod p) maps the plan onto itself and the topology
// too, rank r + i s does at every instant what rank r does, moved by the rotation: the run needs
// the ops of ranks [0, s) only, m = p / s times fewer. The topology part is what this class
// checks, from the routes themselves: the rotation must map each route the plan's flows take
// onto the route of the rotated flow, hop by hop, by one permutation π of the resources that
// keeps capacities and route latencies, together with the GPUs (and their parameters, memories,
// servers and, when copies cross it, host CPUs) of the ranks. π is built as routes come, from the m
// images of each.
//
// Max-min fairness of a symmetric state is symmetric (the allocation is unique), so the flows
// of one orbit all have the rate of its representative. A resource R whose cycle under π has
// length L is crossed, once per hop that lands in its cycle, by m / L images of each
// representative flow: the simulated flow uses the cycle's representative resource with its
// weight multiplied by that, which is the full constraint of every resource in the cycle. The
// rates are the same to rounding (sums of equal terms become products), so times agree with
// the run of every rank to 1e-9 relative, not to the bit; events and flows are counted for the
// representatives only.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "schedules/plan.hpp"
#include "sim/resources.hpp"
#include "topology/error.hpp"
#include "topology/routing.hpp"

namespace collsim::sim {

// The rotation does not map the topology or the plan's GPUs onto themselves; what() says where.
// `routes_may_fit`: whether other routing could change that (false where the refusal has
// nothing to do with routes, so that no hint about ECMP follows it).
class NotSymmetric : public InputError {
 public:
  explicit NotSymmetric(const std::string& message, bool routes_may_fit = true)
      : InputError("", "rotation", message), routes_may_fit_(routes_may_fit) {}
  bool routes_may_fit() const { return routes_may_fit_; }

 private:
  bool routes_may_fit_;
};

class Rotation {
 public:
  // Checks everything that does not depend on routes; throws NotSymmetric when the plan's
  // rotation does not map the ranks' GPUs, their parameters, memories and servers onto each
  // other.
  Rotation(const topo::Router& router, const sched::Plan& plan, const ResourceMap& map);

  sched::RankId shift() const { return shift_; }
  sched::RankId orbit_size() const { return m_; }  // p / shift
  // Rank `r` moved by i * shift.
  sched::RankId moved(sched::RankId r, sched::RankId i) const {
    return static_cast<sched::RankId>((r + std::uint64_t{i} * shift_) % rank_gpu_.size());
  }

  // Adds the route of a flow and of its images: image(i) is the route of the flow moved by
  // i * shift, for i in [0, m). Throws NotSymmetric when the images disagree with π so far.
  void add_route(const std::function<const topo::Route&(sched::RankId)>& image);

  // Adds the host CPUs' memcpy bandwidth, which a plan whose copies cross it (host copies,
  // pageable staging) needs mapped: the CPUs must rotate with their GPUs. Throws NotSymmetric.
  void add_host_memcpy();

  // The resource a flow through `r` uses instead, and by how many images of it `r` is crossed.
  ResourceId representative(ResourceId r) const { return rep_[r]; }
  double copies(ResourceId r) const { return copies_[r]; }

 private:
  // π(a) = b, both a resource of a flow and of its image; throws when that contradicts π.
  void maps_to(ResourceId a, ResourceId b);
  // Gives every resource on the cycle of `r` under π its representative and copies.
  void close(ResourceId r);
  [[noreturn]] void refuse(const std::string& why) const;

  const topo::Topology& topo_;
  const ResourceMap& map_;
  std::vector<topo::NodeId> rank_gpu_;
  sched::RankId shift_ = 0;
  sched::RankId m_ = 1;
  std::vector<ResourceId> pi_, inverse_;  // kNone where not yet known
  std::vector<ResourceId> rep_;
  std::vector<double> copies_;
  std::vector<bool> closed_;  // representative and copies set
  bool host_memcpy_ = false;
  static constexpr ResourceId kNone = ~ResourceId{0};
};

}  // namespace collsim::sim
