// libFuzzer target: arrivals, withdrawals, completions, capacity changes and instants made of the
// input's bytes, replayed on flow models set up in different ways
// (tests/common/flow_model_checks.hpp): they must agree with each other to the bit where the
// options promise it, and with max-min fairness from scratch to 1e-9. The test suite replays the
// same checks on fixed sequences (tests/sim/flow_model_checks_test.cpp); this one walks what they
// do not reach: long cascades, ties, stalls, sets past the heap's threshold.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "tests/common/flow_model_checks.hpp"
#include "tests/fuzz/fuzzed_choices.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  collsim::test::FuzzedChoices choices(data, size);
  collsim::test::FlowModelReplay replay(choices);
  const auto differences = replay.run(4000);
  if (!differences.empty()) {
    for (const auto& line : replay.script()) std::fprintf(stderr, "  %s\n", line.c_str());
    for (const auto& d : differences) std::fprintf(stderr, "broken: %s\n", d.c_str());
    std::abort();
  }
  return 0;
}
