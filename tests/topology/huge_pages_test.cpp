#include "topology/huge_pages.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <numeric>

using namespace collsim;

namespace {
struct alignas(64) Line {
  double v[8];
};

bool aligned_to(const void* p, std::size_t a) {
  return reinterpret_cast<std::uintptr_t>(p) % a == 0;
}
}  // namespace

TEST_CASE("huge vectors hold their values across growth and shrink") {
  HugeVector<std::uint32_t> v;
  // Past the threshold several times over, so that storage moves from the heap to mappings and
  // between mappings.
  const std::size_t n = 3 * huge_pages::kThreshold / sizeof(std::uint32_t) + 12345;
  for (std::size_t i = 0; i < n; ++i) v.push_back(static_cast<std::uint32_t>(i * 2654435761u));
  for (std::size_t i = 0; i < n; i += 4099)
    REQUIRE(v[i] == static_cast<std::uint32_t>(i * 2654435761u));
  CHECK(aligned_to(v.data(), std::size_t{2} << 20));
  v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n - 10));
  v.shrink_to_fit();
  REQUIRE(v.size() == 10);
  CHECK(v.front() == static_cast<std::uint32_t>((n - 10) * 2654435761u));
}

TEST_CASE("over-aligned elements keep their alignment, small or large") {
  HugeVector<Line> small(3);
  CHECK(aligned_to(small.data(), 64));
  HugeVector<Line> large(huge_pages::kThreshold / sizeof(Line) + 1);
  CHECK(aligned_to(large.data(), 64));
  large.back().v[7] = 1.5;
  CHECK(large.back().v[7] == 1.5);
  HugeVector<Line> copy = large;
  CHECK(copy.back().v[7] == 1.5);
}
