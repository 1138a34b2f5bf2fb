// The checks of fuzz_flow_model (tests/common/flow_model_checks.hpp) on fixed sequences of
// choices: arrivals, withdrawals, completions, capacity changes and instants on flow models set
// up in different ways, against each other and against max-min fairness from scratch.
#include "tests/common/flow_model_checks.hpp"

#include <catch2/catch.hpp>

using namespace collsim;

TEST_CASE("flow models agree with each other and with max-min from scratch", "[sim]") {
  std::uint64_t regions = 0;
  std::uint64_t refills = 0;
  std::uint64_t fallbacks = 0;
  for (std::uint64_t seed = 1; seed <= 150; ++seed) {
    test::SequenceChoices choices(seed * 7919);
    test::FlowModelReplay replay(choices);
    const auto differences = replay.run(400);
    INFO("seed " << seed);
    for (const auto& line : replay.script()) UNSCOPED_INFO(line);
    for (const auto& line : differences) UNSCOPED_INFO(line);
    REQUIRE(differences.empty());
    regions += replay.stats().regions;
    refills += replay.stats().refills;
    fallbacks += replay.stats().fallbacks;
  }
  // The sequences reached what the checks are for: regions that grew and were filled again.
  CHECK(regions > 1000);
  CHECK(refills > 100);
  INFO(fallbacks << " fallbacks");
}
