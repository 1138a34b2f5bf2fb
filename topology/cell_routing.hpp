#pragma once
// Exact shortest routes on a fabric of servers, from per-server and per-switch tables instead of
// one search of the whole graph per destination (routing.hpp explains the route rules; this
// computes the same routes, link for link, ECMP choices included).
//
// Every server is a cell, or every group of servers that links join directly (an NVLink domain
// across servers without a switch node between them); every node outside a server (leaf, spine,
// top-of-rack switch) is core. No link then joins two cells, so a path to a node of cell C last
// enters C over one of C's entry links f = (w -> x), w in the core, and a path from a node of
// cell C' first leaves it over an exit link e = (y -> z), z in the core. So, with d_C the
// distance inside C and D the distance between core nodes over the whole graph,
//
//   dist(v, to) = min( d_C(v, to) if v is in C,  min_f dist(v, w_f) + f + d_C(x_f, to) )
//   dist(v, w)  = min_e d_C'(v, y_e) + e + D(z_e, w)          for v in C', w in the core
//
// Both are exact: the first and last crossings split any path into pieces that each of these
// minima covers. D is one search per core target over a small graph: the core nodes, their
// links, and for each cell one shortcut per (entry, exit) pair costing the cheapest way through
// it. A 131,072-GPU rail-optimised cluster has 380,000 nodes but 4,112 core nodes. Cells alike
// inside (as many nodes, the same links between the same positions at the same latencies: every
// server of one template) have the same d_C by position; each such class keeps it for all pairs.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "topology/adjacency.hpp"
#include "topology/route_label.hpp"
#include "topology/routing.hpp"

namespace collsim::topo::detail {

class CellRouting {
 public:
  // nullptr, with the reason in `why`, when latencies are too large for exact sums: a core table
  // packs each distance, picoseconds and hops, in one 64-bit word, and the automatic routing
  // method then searches the whole graph instead (no shipped or generated fabric comes near:
  // 131,072 GPUs need 50 of the 63 bits). The spans must
  // outlive the result: link latencies in picoseconds, and each node's position in name order. Core
  // tables and next-link lists are kept within `memory_limit` bytes and rebuilt for each route
  // beyond it (slower, same routes).
  static std::unique_ptr<CellRouting> build(const Topology& topology, const Adjacency& out,
                                            std::span<const std::uint64_t> link_ps,
                                            std::span<const std::uint32_t> name_rank,
                                            std::size_t memory_limit, std::string& why);
  ~CellRouting();
  CellRouting(const CellRouting&) = delete;
  CellRouting& operator=(const CellRouting&) = delete;

  // The route from `from` to `to` (from != to), or nothing when `to` is unreachable. Sets
  // `chose` when ECMP had a choice to make at some hop. Safe to call from many threads.
  std::optional<Route> compute(NodeId from, NodeId to, bool ecmp, std::uint64_t flow_key,
                               bool& chose) const;
  // Cells found; with one, every route is a search of that cell and nothing is gained.
  std::size_t cells() const;

 private:
  struct Impl;
  explicit CellRouting(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace collsim::topo::detail
