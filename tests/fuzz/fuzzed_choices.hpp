#pragma once
// A replay's choices (tests/common/choices.hpp) taken from a fuzzer's input.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>

#include "tests/common/choices.hpp"

namespace collsim::test {

class FuzzedChoices final : public Choices {
 public:
  FuzzedChoices(const std::uint8_t* data, std::size_t size) : in_(data, size) {}
  std::uint32_t below(std::uint32_t n) override {
    return n <= 1 ? 0 : in_.ConsumeIntegralInRange<std::uint32_t>(0, n - 1);
  }
  bool exhausted() const override { return in_.remaining_bytes() == 0; }

 private:
  mutable FuzzedDataProvider in_;  // remaining_bytes() is not const
};

}  // namespace collsim::test
