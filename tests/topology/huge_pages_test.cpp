#include "topology/huge_pages.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>

using namespace collsim;

namespace {
struct alignas(64) Line {
  double v[8];
};

bool aligned_to(const void* p, std::size_t a) {
  return reinterpret_cast<std::uintptr_t>(p) % a == 0;
}

// Whether the kernel records MADV_HUGEPAGE ("hg" in VmFlags) for the mapping holding `p`;
// nothing where /proc/self/smaps cannot say.
std::optional<bool> advised_huge(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      inside = lo <= at && at < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line.find(" hg") != std::string::npos;
    }
  }
  return std::nullopt;
}

struct AdviceRestored {
  huge_pages::Advice before = huge_pages::advice();
  ~AdviceRestored() { huge_pages::set_advice(before); }
};

using huge_pages::Advice;
using huge_pages::Use;

// Checks the kernel's record of the advice for the mapping holding `p`, where it keeps one.
void check_advice(const void* p, bool expected) {
  const std::optional<bool> flagged = advised_huge(p);
  if (!flagged) WARN("no VmFlags in /proc/self/smaps; the advice is not checked");
#if defined(__linux__)
  else
    CHECK(*flagged == expected);
#endif
}
}  // namespace

TEST_CASE("large mappings ask for huge pages only when told to, and hot ones first") {
  const AdviceRestored restore;
  CHECK(restore.before == Advice::off);  // the library's default: no advice
  for (const Advice advice : {Advice::off, Advice::hot, Advice::all}) {
    INFO("advice " << static_cast<int>(advice));
    huge_pages::set_advice(advice);
    HugeVector<std::uint64_t, Use::cold> cold(huge_pages::kThreshold / sizeof(std::uint64_t) + 1,
                                              5);
    HugeVector<std::uint64_t, Use::hot> hot(huge_pages::kThreshold / sizeof(std::uint64_t) + 1, 6);
    CHECK(aligned_to(cold.data(), std::size_t{2} << 20));
    CHECK(aligned_to(hot.data(), std::size_t{2} << 20));
    check_advice(cold.data(), advice == Advice::all);
    check_advice(hot.data(), advice != Advice::off);
    // A grown block keeps its use: extend() maps the larger block afresh.
    const std::size_t bytes = huge_pages::kThreshold;
    auto* block = static_cast<std::uint64_t*>(huge_pages::allocate(bytes, 8, Use::hot));
    block[bytes / 8 - 1] = 7;
    block = static_cast<std::uint64_t*>(huge_pages::extend(block, bytes, 2 * bytes, 8, Use::hot));
    check_advice(block, advice != Advice::off);
    CHECK(block[bytes / 8 - 1] == 7);
    huge_pages::deallocate(block, 2 * bytes, 8);
    CHECK(cold.back() == 5);
  }
}

TEST_CASE("huge vectors hold their values across growth and shrink") {
  HugeVector<std::uint32_t, Use::cold> v;
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
  HugeVector<Line, Use::hot> small(3);
  CHECK(aligned_to(small.data(), 64));
  HugeVector<Line, Use::hot> large(huge_pages::kThreshold / sizeof(Line) + 1);
  CHECK(aligned_to(large.data(), 64));
  large.back().v[7] = 1.5;
  CHECK(large.back().v[7] == 1.5);
  HugeVector<Line, Use::hot> copy = large;
  CHECK(copy.back().v[7] == 1.5);
}

TEST_CASE("extending an allocation keeps its contents, from the heap to mappings and between") {
  // Sizes below the threshold, across it, and from one mapping to a larger one whose size is not
  // a whole number of huge pages.
  const std::size_t sizes[] = {4096, huge_pages::kThreshold - 64, huge_pages::kThreshold + 4096,
                               3 * huge_pages::kThreshold + 1000, 8 * huge_pages::kThreshold};
  std::size_t bytes = 64;
  auto* p =
      static_cast<std::uint64_t*>(huge_pages::allocate(bytes, alignof(std::uint64_t), Use::cold));
  std::uint64_t filled = 0;  // words written so far, each its own index times a constant
  for (std::size_t next : sizes) {
    for (; filled < bytes / sizeof(std::uint64_t); ++filled)
      p[filled] = filled * 0x9E3779B97F4A7C15;
    p = static_cast<std::uint64_t*>(
        huge_pages::extend(p, bytes, next, alignof(std::uint64_t), Use::cold));
    std::size_t wrong = 0;
    for (std::uint64_t i = 0; i < filled; ++i) wrong += p[i] != i * 0x9E3779B97F4A7C15;
    REQUIRE(wrong == 0);
    if (next >= huge_pages::kThreshold) CHECK(aligned_to(p, std::size_t{2} << 20));
    // The new part is writable.
    p[next / sizeof(std::uint64_t) - 1] = 7;
    bytes = next;
  }
  // Asked to shrink, it keeps what fits.
  const std::size_t smaller = huge_pages::kThreshold / 2;
  p = static_cast<std::uint64_t*>(
      huge_pages::extend(p, bytes, smaller, alignof(std::uint64_t), Use::cold));
  std::size_t wrong = 0;
  for (std::uint64_t i = 0; i < smaller / sizeof(std::uint64_t); ++i)
    wrong += p[i] != i * 0x9E3779B97F4A7C15;
  CHECK(wrong == 0);
  bytes = smaller;
  huge_pages::deallocate(p, bytes, alignof(std::uint64_t));
}
