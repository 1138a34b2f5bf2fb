#pragma once
// Two runs that must be the same to the bit (tests/common/run_differences.hpp), as a check.
#include <catch2/catch.hpp>

#include "sim/engine.hpp"
#include "tests/common/run_differences.hpp"

namespace collsim::test {

// `b_fewer_events`: b may count fewer events than a (a streamed run does not count the releases
// it resolves as it registers a batch, sim/engine.cpp).
inline void check_same_run(const sim::Result& a, const sim::Result& b,
                           bool b_fewer_events = false) {
  REQUIRE(a.stop == b.stop);
  REQUIRE(a.resources.size() == b.resources.size());
  REQUIRE(a.ops.size() == b.ops.size());
  const std::vector<std::string> differences = run_differences(a, b, b_fewer_events);
  std::string lines;
  for (const std::string& d : differences) lines += d + "\n";
  INFO(lines);
  CHECK(differences.empty());
}

}  // namespace collsim::test
