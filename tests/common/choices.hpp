#pragma once
// Where a replay's decisions come from: a fuzzer's input (tests/fuzz/fuzzed_choices.hpp) or a
// fixed sequence for the test suite. Without Catch2.
#include <cstdint>

#include "tests/common/lcg.hpp"

namespace collsim::test {

class Choices {
 public:
  virtual ~Choices() = default;
  virtual std::uint32_t below(std::uint32_t n) = 0;  // in [0, n); 0 once exhausted
  virtual bool exhausted() const = 0;
};

// Choices from a fixed linear congruential sequence, never exhausted.
class SequenceChoices final : public Choices {
 public:
  explicit SequenceChoices(std::uint64_t seed) : next_{seed} {}
  std::uint32_t below(std::uint32_t n) override {
    return n <= 1 ? 0 : static_cast<std::uint32_t>(next_(n));
  }
  bool exhausted() const override { return false; }

 private:
  Lcg next_;
};

}  // namespace collsim::test
