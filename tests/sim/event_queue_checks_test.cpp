// The checks of fuzz_event_queue (tests/common/event_queue_checks.hpp) on fixed sequences of
// choices: the event queue and the keyed heap of moved completions, merged as the engine merges
// them, against a sorted map of (time, sequence).
#include "tests/common/event_queue_checks.hpp"

#include <catch2/catch.hpp>

using namespace collsim;

TEST_CASE("the event queue and the moved completions pop in (time, sequence) order",
          "[sim][queue]") {
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    test::SequenceChoices choices(seed * 104729);
    test::EventQueueReplay replay(choices);
    const auto differences = replay.run(3000);
    INFO("seed " << seed);
    for (const auto& line : differences) UNSCOPED_INFO(line);
    REQUIRE(differences.empty());
  }
}
