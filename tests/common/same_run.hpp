#pragma once
// Two runs that must be the same to the bit: total time, counts, every link's and resource's
// bytes and busy time, background flows and, when recorded, every op's ready, start and end.
#include <catch2/catch.hpp>
#include <cstring>

#include "sim/engine.hpp"

namespace collsim::test {

inline bool same_double(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// `b_fewer_events`: b may count fewer events than a (a streamed run does not count the releases
// it resolves as it registers a batch, sim/engine.cpp).
inline void check_same_run(const sim::Result& a, const sim::Result& b,
                           bool b_fewer_events = false) {
  REQUIRE(a.stop == b.stop);
  CHECK(same_double(a.time, b.time));
  if (b_fewer_events)
    CHECK(a.events >= b.events);
  else
    CHECK(a.events == b.events);
  CHECK(a.flows == b.flows);
  CHECK(a.link_bytes == b.link_bytes);
  CHECK(a.link_busy == b.link_busy);
  REQUIRE(a.resources.size() == b.resources.size());
  std::size_t resources_differing = 0;
  for (std::size_t i = 0; i < a.resources.size(); ++i)
    resources_differing += a.resources[i].index != b.resources[i].index ||
                           a.resources[i].kind != b.resources[i].kind ||
                           !same_double(a.resources[i].busy_time, b.resources[i].busy_time) ||
                           !same_double(a.resources[i].bytes, b.resources[i].bytes);
  CHECK(resources_differing == 0);
  CHECK(a.background_end == b.background_end);
  REQUIRE(a.ops.size() == b.ops.size());
  std::size_t ops_differing = 0;
  for (std::size_t i = 0; i < a.ops.size(); ++i)
    ops_differing += !same_double(a.ops[i].ready, b.ops[i].ready) ||
                     !same_double(a.ops[i].start, b.ops[i].start) ||
                     !same_double(a.ops[i].end, b.ops[i].end);
  CHECK(ops_differing == 0);
}

}  // namespace collsim::test
