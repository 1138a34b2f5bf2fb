#pragma once
// Weighted max-min fair rates from scratch: every active flow and every limited resource in one
// progressive filling, the definition that the flow model's regions, reservations, instants and
// heaps must agree with. Without Catch2, so that the fuzz targets use it too.
#include <cstddef>
#include <utility>
#include <vector>

#include "sim/flow_model.hpp"

namespace collsim::test {

// A flow's (resource, weight) pairs; a resource may appear twice, its weights then add up.
using FlowUses = std::vector<std::pair<sim::ResourceId, double>>;

// kUnlimited for a flow that crosses no limited resource.
inline std::vector<double> max_min_rates(const std::vector<double>& capacity,
                                         const std::vector<FlowUses>& uses,
                                         const std::vector<bool>& active) {
  const std::size_t n = uses.size();
  const std::size_t m = capacity.size();
  std::vector<double> rate(n, kUnlimited);
  std::vector<bool> frozen(n, false);
  std::vector<double> left = capacity;
  std::vector<double> weight(m, 0.0);
  std::vector<std::size_t> unfrozen(m, 0);      // uses of unfrozen flows, by resource
  std::vector<std::vector<std::size_t>> on(m);  // active flows, by resource
  for (std::size_t f = 0; f < n; ++f) {
    if (!active[f]) continue;
    for (const auto& [r, w] : uses[f]) {
      weight[r] += w;
      ++unfrozen[r];
      on[r].push_back(f);
    }
  }
  for (;;) {
    double level = kUnlimited;
    std::size_t bottleneck = m;
    for (std::size_t r = 0; r < m; ++r) {
      if (!(capacity[r] < kUnlimited) || unfrozen[r] == 0) continue;
      const double share = left[r] > 0 ? left[r] / weight[r] : 0.0;
      if (share < level) {
        level = share;
        bottleneck = r;
      }
    }
    if (bottleneck == m) break;
    for (const std::size_t f : on[bottleneck]) {
      if (frozen[f]) continue;
      frozen[f] = true;
      rate[f] = level;
      for (const auto& [r, w] : uses[f]) {
        left[r] -= w * level;
        weight[r] -= w;
        --unfrozen[r];
      }
    }
  }
  return rate;
}

}  // namespace collsim::test
