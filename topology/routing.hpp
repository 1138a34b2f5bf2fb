#pragma once
// Routes between nodes: deterministic shortest path by total latency, then hop count, then the
// names of the nodes along the way; optionally ECMP over equal-cost paths chosen by a hash of a
// flow key. Routes are computed on demand and cached; the cache is safe to use from many threads.
//
// Latencies are compared in whole picoseconds, so that "equal cost" is exact and does not depend
// on the order in which floating-point latencies were summed. A route may transit any node,
// GPUs included. Among equal paths the one whose node names, read from the source, sort first
// wins; parallel links between the same two nodes are taken in file order. With ECMP, each hop
// picks among its equal-cost next links (sorted the same way) by a hash of the flow key, the
// pair and the hop index, as a switch hashing a flow's header would.
//
// Cost, searching: a query runs Dijkstra backwards from the destination and stops as soon as the
// source's distance is final, so neighbours in a huge graph are cheap. A destination whose searches
// have settled half the graph gets a complete distance table (the last search carried on to the
// end; 20 bytes per node, within RoutingOptions::table_memory), after which each new source costs
// only a walk along its path: all-pairs over 1024 GPUs takes well under a second.
//
// Cost, by cells: on a fabric of servers a route needs the distances inside the two servers
// (servers that links join directly count as one) and one table per switch it may enter the
// destination's server from, each a search over the switches alone (cell_routing.hpp). The
// automatic method takes it when there are at least two such cells.
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

// How routes are computed; every method gives the same routes (cell_routing.hpp).
enum class RoutingMethod : std::uint8_t {
  automatic,  // cells when the topology has two cells or more (cell_routing.hpp), else search
  search,     // one search of the whole graph per destination
  cells,      // per-server and per-switch tables; InputError if latencies are too large
};

struct RoutingOptions {
  bool ecmp = false;  // spread flows over equal-cost paths by flow key
  RoutingMethod method = RoutingMethod::automatic;
  // Bytes the router may spend on distance tables (per destination when searching, per switch by
  // cells); beyond it, queries search again each time. Only speed depends on it, never the routes.
  std::size_t table_memory = std::size_t{1} << 30;
};

// The NCCL path class of a route (docs/topology-format.md): NET if it uses a network link; else
// SYS if it crosses a cpu_interconnect link or two CPUs; else PHB if it passes a CPU; else PXB if
// it passes two or more PCIe switches; else PIX if it uses a PCIe link; else NVL; LOC if empty.
PathClass classify(const Topology& topology, const std::vector<LinkId>& links);

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
  // The same route, computed without storing it: for one-off sweeps over many pairs
  // (`collsim topo show`) that would otherwise fill the cache.
  Route compute(NodeId from, NodeId to, std::uint64_t flow_key = 0) const;

  const Topology& topology() const { return topology_; }
  const RoutingOptions& options() const { return options_; }

 private:
  struct Cache;
  const Topology& topology_;
  RoutingOptions options_;
  Cache* cache_;
};

}  // namespace collsim::topo
