// libFuzzer target: pushes, lane pushes, pops, sweeps and moved completions made of the input's
// bytes, replayed on the engine's event queue and keyed heap against a sorted map
// (tests/common/event_queue_checks.hpp). The test suite replays the same checks on fixed
// sequences (tests/sim/event_queue_checks_test.cpp).
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "tests/common/event_queue_checks.hpp"
#include "tests/fuzz/fuzzed_choices.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  collsim::test::FuzzedChoices choices(data, size);
  collsim::test::EventQueueReplay replay(choices);
  const auto differences = replay.run(20000);
  if (!differences.empty()) {
    for (const auto& d : differences) std::fprintf(stderr, "broken: %s\n", d.c_str());
    std::abort();
  }
  return 0;
}
