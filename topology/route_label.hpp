#pragma once
// The pieces every route computation shares, so that two ways of computing a route agree to the
// bit: distances as integer (picoseconds, hops) labels, the order of equal-cost next links, and
// the hash ECMP picks among them with.
#include <compare>
#include <cstdint>
#include <limits>

#include "topology/topology.hpp"

namespace collsim::topo::detail {

// Distance to a destination: total latency in picoseconds, then hops.
struct Label {
  std::uint64_t ps = std::numeric_limits<std::uint64_t>::max();
  std::uint32_t hops = std::numeric_limits<std::uint32_t>::max();
  // clang-tidy 14 flags the literal 0 a defaulted <=> compares its result with; no pointer here.
  // NOLINTNEXTLINE(modernize-use-nullptr)
  auto operator<=>(const Label&) const = default;
  bool finite() const { return hops != std::numeric_limits<std::uint32_t>::max(); }
};

// One more link of `ps` picoseconds in front of a path labelled `l`.
inline Label extend(Label l, std::uint64_t ps) {
  // Saturates: a path of several 1e6 s links is absurd but must not wrap around.
  const std::uint64_t sum = l.ps > std::numeric_limits<std::uint64_t>::max() - ps
                                ? std::numeric_limits<std::uint64_t>::max() - 1
                                : l.ps + ps;
  return {sum, l.hops + 1};
}

// Two path pieces end to end; infinite if either is. Callers keep totals far below overflow.
inline Label join(Label a, Label b) {
  if (!a.finite() || !b.finite()) return Label{};
  return {a.ps + b.ps, a.hops + b.hops};
}

inline std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline std::uint64_t pair_key(NodeId from, NodeId to) {
  return (std::uint64_t{from} << 32) | to;
}

// The hash with which ECMP picks the next link at hop `hop` of a route.
inline std::uint64_t hop_hash(std::uint64_t flow_key, NodeId from, NodeId to, std::uint32_t hop) {
  return mix(flow_key ^ mix(pair_key(from, to) ^ mix(hop)));
}

// An equal-cost next link; candidates are ordered by the next node's name, then link id.
struct Candidate {
  std::uint32_t name_rank;
  LinkId link;
  NodeId next;
  bool operator<(const Candidate& o) const {
    return name_rank != o.name_rank ? name_rank < o.name_rank : link < o.link;
  }
};

}  // namespace collsim::topo::detail
