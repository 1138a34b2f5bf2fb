// libFuzzer target: arrivals, withdrawals, completions, capacity changes and instants made of the
// input's bytes, replayed on flow models set up in different ways
// (tests/common/flow_model_checks.hpp): they must agree with each other to the bit where the
// options promise it, and with max-min fairness from scratch to 1e-9. The test suite replays the
// same checks on fixed sequences (tests/sim/flow_model_checks_test.cpp); this one walks what they
// do not reach: long cascades, ties, stalls, sets past the heap's threshold.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "tests/common/flow_model_checks.hpp"

namespace {

class FuzzedChoices final : public collsim::test::FlowChoices {
 public:
  FuzzedChoices(const std::uint8_t* data, std::size_t size) : in_(data, size) {}
  std::uint32_t below(std::uint32_t n) override {
    return n <= 1 ? 0 : in_.ConsumeIntegralInRange<std::uint32_t>(0, n - 1);
  }
  bool exhausted() const override { return in_.remaining_bytes() == 0; }

 private:
  mutable FuzzedDataProvider in_;  // remaining_bytes() is not const
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedChoices choices(data, size);
  collsim::test::FlowModelReplay replay(choices);
  const auto differences = replay.run(4000);
  if (!differences.empty()) {
    for (const auto& line : replay.script()) std::fprintf(stderr, "  %s\n", line.c_str());
    for (const auto& d : differences) std::fprintf(stderr, "broken: %s\n", d.c_str());
    std::abort();
  }
  return 0;
}
