#pragma once
// What differs between two runs that must be the same to the bit: total time, counts, every
// link's and resource's bytes and busy time, copy engines, background flows and, when recorded,
// every op's ready, start and end. Without Catch2, so that the fuzz targets use it too
// (tests/common/run_checks.hpp); tests/common/same_run.hpp checks it in the test suite.
#include <fmt/format.h>

#include <cstring>
#include <string>
#include <vector>

#include "sim/engine.hpp"

namespace collsim::test {

inline bool same_double(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// One line per field of `b` that differs from `a`; empty when the runs are the same.
// `b_fewer_events`: b may count fewer events than a (a streamed run does not count the releases
// it resolves as it registers a batch, sim/engine.cpp).
inline std::vector<std::string> run_differences(const sim::Result& a, const sim::Result& b,
                                                bool b_fewer_events = false) {
  std::vector<std::string> out;
  if (a.stop != b.stop)
    out.push_back(
        fmt::format("stopped: {} against {}", sim::to_string(b.stop), sim::to_string(a.stop)));
  if (!same_double(a.time, b.time))
    out.push_back(fmt::format("time {} against {}", b.time, a.time));
  if (b_fewer_events ? a.events < b.events : a.events != b.events)
    out.push_back(fmt::format("{} events against {}", b.events, a.events));
  if (a.flows != b.flows) out.push_back(fmt::format("{} flows against {}", b.flows, a.flows));
  if (a.link_bytes != b.link_bytes) out.emplace_back("link bytes");
  if (a.link_busy != b.link_busy) out.emplace_back("link busy times");
  bool resources_same = a.resources.size() == b.resources.size();
  for (std::size_t i = 0; resources_same && i < a.resources.size(); ++i)
    resources_same = a.resources[i].index == b.resources[i].index &&
                     a.resources[i].kind == b.resources[i].kind &&
                     same_double(a.resources[i].busy_time, b.resources[i].busy_time) &&
                     same_double(a.resources[i].bytes, b.resources[i].bytes);
  if (!resources_same) out.emplace_back("resource bytes or busy times");
  bool engines_same = a.copy_engines.size() == b.copy_engines.size();
  for (std::size_t i = 0; engines_same && i < a.copy_engines.size(); ++i)
    engines_same = a.copy_engines[i].gpu == b.copy_engines[i].gpu &&
                   same_double(a.copy_engines[i].busy_time, b.copy_engines[i].busy_time) &&
                   same_double(a.copy_engines[i].max_wait, b.copy_engines[i].max_wait);
  if (!engines_same) out.emplace_back("copy engines' busy or waiting times");
  if (a.background_end != b.background_end) out.emplace_back("background flows' ends");
  std::size_t ops_differing = a.ops.size() == b.ops.size() ? 0 : a.ops.size();
  for (std::size_t i = 0; a.ops.size() == b.ops.size() && i < a.ops.size(); ++i)
    ops_differing += !same_double(a.ops[i].ready, b.ops[i].ready) ||
                     !same_double(a.ops[i].start, b.ops[i].start) ||
                     !same_double(a.ops[i].end, b.ops[i].end);
  if (ops_differing != 0) out.push_back(fmt::format("times of {} ops", ops_differing));
  return out;
}

}  // namespace collsim::test
