#include "sim/rotation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace collsim::sim {

using sched::RankId;
using topo::NodeId;

Rotation::Rotation(const topo::Router& router, const sched::Plan& plan, const ResourceMap& map)
    : topo_(router.topology()), map_(map), rank_gpu_(plan.rank_gpu), shift_(plan.rotation) {
  const RankId p = plan.num_ranks();
  if (shift_ == 0 || p % shift_ != 0)
    throw InternalError(fmt::format("rotation by {} of {} ranks", shift_, p));
  m_ = p / shift_;
  pi_.assign(map.size(), kNone);
  inverse_.assign(map.size(), kNone);
  rep_.resize(map.size());
  std::iota(rep_.begin(), rep_.end(), ResourceId{0});
  copies_.assign(map.size(), 1.0);
  closed_.assign(map.size(), false);

  std::vector<NodeId> gpus = plan.rank_gpu;
  std::sort(gpus.begin(), gpus.end());
  if (std::adjacent_find(gpus.begin(), gpus.end()) != gpus.end())
    refuse("two ranks share a GPU, whose copy engines the other orbits would need");

  // Servers follow their GPUs: same-server pairs (peer-to-peer or not) must stay so.
  std::vector<std::int32_t> server_image(topo_.servers().size(), topo::kNone);
  std::vector<std::int32_t> server_preimage(topo_.servers().size(), topo::kNone);
  std::vector<ResourceId> nodes;
  for (RankId r = 0; r < p; ++r) {
    const RankId q = moved(r, 1);
    const NodeId ga = plan.rank_gpu[r], gb = plan.rank_gpu[q];
    const topo::Node& a = topo_.node(ga);
    const topo::Node& b = topo_.node(gb);
    const auto differ = [&](const char* what) {
      refuse(fmt::format("GPUs '{}' (rank {}) and '{}' (rank {}) differ in {}", a.name, r, b.name,
                         q, what));
    };
    if (a.memory_bandwidth != b.memory_bandwidth) differ("memory bandwidth");
    if (a.copy_engines != b.copy_engines) differ("copy engines");
    if (a.alpha != b.alpha) differ("alpha");
    if (a.launch_latency != b.launch_latency) differ("launch latency");
    if (a.event_latency != b.event_latency) differ("event latency");
    if (a.reduce_traffic != b.reduce_traffic) differ("reduce traffic");
    const NodeId ma = a.memory_owner != topo::kNoNode ? a.memory_owner : ga;
    const NodeId mb = b.memory_owner != topo::kNoNode ? b.memory_owner : gb;
    maps_to(map_.memory(ma), map_.memory(mb));
    nodes.push_back(map_.memory(ma));
    const NodeId ca = topo_.host_cpu(ga), cb = topo_.host_cpu(gb);
    if ((ca == topo::kNoNode) != (cb == topo::kNoNode)) differ("reaching a CPU");
    if ((a.server == topo::kNone) != (b.server == topo::kNone)) differ("being in a server");
    if (a.server != topo::kNone) {
      const auto sa = static_cast<std::size_t>(a.server), sb = static_cast<std::size_t>(b.server);
      const topo::Server& x = topo_.servers()[sa];
      const topo::Server& y = topo_.servers()[sb];
      if (x.p2p != y.p2p || x.gpudirect_rdma != y.gpudirect_rdma) differ("their servers' p2p");
      if (server_image[sa] == topo::kNone && server_preimage[sb] == topo::kNone) {
        server_image[sa] = b.server;
        server_preimage[sb] = a.server;
      } else if (server_image[sa] != b.server) {
        differ("which GPUs share their server");
      }
    }
  }
  for (ResourceId r : nodes) close(r);
}

void Rotation::add_host_memcpy() {
  if (host_memcpy_) return;
  host_memcpy_ = true;
  const RankId p = static_cast<RankId>(rank_gpu_.size());
  for (RankId r = 0; r < p; ++r) {
    const NodeId ca = topo_.host_cpu(rank_gpu_[r]);
    const NodeId cb = topo_.host_cpu(rank_gpu_[moved(r, 1)]);
    if (topo_.node(ca).pageable_traffic != topo_.node(cb).pageable_traffic)
      refuse(fmt::format("CPUs '{}' and '{}' differ in pageable traffic", topo_.node(ca).name,
                         topo_.node(cb).name));
    maps_to(map_.memcpy(ca), map_.memcpy(cb));
  }
  for (RankId r = 0; r < p; ++r) close(map_.memcpy(topo_.host_cpu(rank_gpu_[r])));
}

void Rotation::add_route(const std::function<const topo::Route&(RankId)>& image) {
  const topo::Route& route = image(0);
  const std::vector<topo::LinkId> first = route.links;
  const double latency = route.latency;
  std::vector<topo::LinkId> prev = first;
  for (RankId i = 1; i <= m_; ++i) {
    const topo::Route* next = i < m_ ? &image(i) : nullptr;
    const std::vector<topo::LinkId>& cur = next ? next->links : first;
    const auto name = [&](topo::LinkId l) { return map_.name(topo_, map_.link(l)); };
    if (cur.size() != prev.size() || (next && next->latency != latency))
      refuse(fmt::format("a route of {} links starting on {} has an image of {} links{}",
                         prev.size(), prev.empty() ? "none" : name(prev.front()), cur.size(),
                         cur.size() == prev.size() ? " and another latency" : ""));
    for (std::size_t h = 0; h < cur.size(); ++h) maps_to(map_.link(prev[h]), map_.link(cur[h]));
    prev = cur;
  }
  for (topo::LinkId l : first) close(map_.link(l));
}

void Rotation::maps_to(ResourceId a, ResourceId b) {
  if (pi_[a] == b) return;
  const auto name = [&](ResourceId r) { return map_.name(topo_, r); };
  if (map_.capacity(topo_, a) != map_.capacity(topo_, b))
    refuse(fmt::format("{} and its image {} differ in capacity", name(a), name(b)));
  if (pi_[a] != kNone)
    refuse(fmt::format("{} is the image of {} on one route and of {} on another", name(a),
                       name(pi_[a]), name(b)));
  if (inverse_[b] != kNone)
    refuse(fmt::format("{} is the image of both {} and {}", name(b), name(inverse_[b]), name(a)));
  pi_[a] = b;
  inverse_[b] = a;
}

void Rotation::close(ResourceId r) {
  if (closed_[r]) return;
  RankId length = 0;
  ResourceId x = r;
  do {
    if (pi_[x] == kNone) throw InternalError("a resource's cycle under a rotation is open");
    x = pi_[x];
    ++length;
  } while (x != r && length <= m_);
  if (x != r || m_ % length != 0)
    refuse(fmt::format("{} comes back to itself after {} rotations, which does not divide {}",
                       map_.name(topo_, r), length, m_));
  const auto copies = m_ / length;  // exact: length divides m_
  do {
    rep_[x] = r;
    copies_[x] = static_cast<double>(copies);
    closed_[x] = true;
    x = pi_[x];
  } while (x != r);
}

void Rotation::refuse(const std::string& why) const {
  throw NotSymmetric(fmt::format(
      "rotating the ranks by {} does not map the topology onto itself: {}", shift_, why));
}

}  // namespace collsim::sim
