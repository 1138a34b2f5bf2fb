#pragma once
// Sizes the tests write often, in one place: test files of one area are compiled together in
// batches (COLLSIM_UNITY_TESTS), where two definitions of one name would collide.
#include "topology/units.hpp"

namespace collsim::test {
inline constexpr Bytes MiB = Bytes{1} << 20;
}  // namespace collsim::test
