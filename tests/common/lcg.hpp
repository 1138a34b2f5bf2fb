#pragma once
// A fixed linear congruential sequence: the random tests are the same on every run and platform.
#include <cstdint>

namespace collsim::test {

struct Lcg {
  std::uint64_t state;
  // A value in [0, n).
  std::uint64_t operator()(std::uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  }
};

}  // namespace collsim::test
