#pragma once
// Routes between nodes: deterministic shortest path by total latency, then hop count, then the
// names of the nodes along the way; optionally ECMP over equal-cost paths chosen by a hash of a
// flow key. Routes are computed on demand and cached; the cache is safe to use from many threads.
#include <cstdint>
#include <vector>

#include "topology/topology.hpp"

namespace collsim::topo {

struct Route {
  std::vector<LinkId> links;      // directed links from source to destination, in order
  double latency = 0;             // sum of link latencies, seconds
  double bandwidth = kUnlimited;  // bottleneck bandwidth, bytes/s (kUnlimited for an empty route)
  PathClass path_class = PathClass::loc;
};

struct RoutingOptions {
  bool ecmp = false;  // spread flows over equal-cost paths by flow key
};

class Router {
 public:
  explicit Router(const Topology& topology, RoutingOptions options = {});
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // Route from `from` to `to`; an empty route when from == to. Throws InputError when `to` is
  // unreachable. The reference stays valid for the Router's lifetime.
  const Route& route(NodeId from, NodeId to) const;
  // The same, choosing among equal-cost paths by `flow_key` when ECMP is on.
  const Route& route(NodeId from, NodeId to, std::uint64_t flow_key) const;

  const Topology& topology() const { return topology_; }

 private:
  struct Cache;
  const Topology& topology_;
  RoutingOptions options_;
  Cache* cache_;
};

}  // namespace collsim::topo
