// RingColumn: a window of indices that grows at the end and is dropped from the front reads back
// what was pushed, across drops, growth with the window wrapped round the ring, copies and moves.
#include "schedules/ring_column.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <deque>
#include <random>

using collsim::sched::RingColumn;

namespace {

// The values of [front, end) in `column` against a reference window starting at `front`.
void check_window(const RingColumn<std::uint64_t>& column, const std::deque<std::uint64_t>& ref,
                  std::uint64_t front) {
  REQUIRE(column.front() == front);
  REQUIRE(column.size() == ref.size());
  REQUIRE(column.end() == front + ref.size());
  std::uint64_t wrong = 0;
  for (std::uint64_t i = 0; i < ref.size(); ++i) wrong += column[front + i] != ref[i];
  REQUIRE(wrong == 0);
}

}  // namespace

TEST_CASE("a ring column reads back its window through drops and growth", "[plan][window]") {
  for (std::uint32_t seed = 1; seed <= 4; ++seed) {
    std::mt19937_64 rng(seed);
    RingColumn<std::uint64_t> column;
    std::deque<std::uint64_t> ref;
    std::uint64_t front = 0;
    // Windows that grow, shrink and grow again, so that growth happens with the window wrapped.
    for (int round = 0; round < 60; ++round) {
      const std::uint64_t adds = rng() % (round < 30 ? 3000 : 300);
      for (std::uint64_t i = 0; i < adds; ++i) {
        const std::uint64_t v = rng();
        column.push_back(v);
        ref.push_back(v);
      }
      const std::uint64_t drops = ref.empty() ? 0 : rng() % (ref.size() + 1);
      front += drops;
      ref.erase(ref.begin(), ref.begin() + static_cast<std::ptrdiff_t>(drops));
      column.drop_before(front);
      check_window(column, ref, front);
    }
  }
}

TEST_CASE("a ring column copies and moves with its window", "[plan][window]") {
  RingColumn<std::uint64_t> column;
  std::deque<std::uint64_t> ref;
  for (std::uint64_t i = 0; i < 5000; ++i) {
    column.push_back(i * 7);
    ref.push_back(i * 7);
  }
  column.drop_before(4000);
  ref.erase(ref.begin(), ref.begin() + 4000);
  // Wrap the window round the ring before copying.
  for (std::uint64_t i = 5000; i < 8000; ++i) {
    column.push_back(i * 7);
    ref.push_back(i * 7);
  }
  const RingColumn<std::uint64_t> copy = column;
  check_window(copy, ref, 4000);
  RingColumn<std::uint64_t> moved = std::move(column);
  check_window(moved, ref, 4000);
  RingColumn<std::uint64_t> assigned;
  assigned = copy;
  check_window(assigned, ref, 4000);
  // Reserving room keeps the window and its indices.
  assigned.reserve(1 << 16);
  check_window(assigned, ref, 4000);
}

TEST_CASE("a ring column grows on its own mapping with the window wrapped", "[plan][window]") {
  // Windows of several MiB, so that the rings are mappings whose pages growth moves rather than
  // copies (topology/huge_pages.hpp), grown by doubling and by reserving several doublings at
  // once, each time with the window wrapped round the ring at a different place.
  constexpr std::uint64_t kBig = std::uint64_t{1} << 20;  // 8 MiB of values
  for (std::uint64_t shift : {kBig / 3, kBig / 2, kBig - 5}) {
    RingColumn<std::uint64_t> column;
    std::deque<std::uint64_t> ref;
    std::uint64_t next = 0;
    const auto push = [&](std::uint64_t n) {
      for (std::uint64_t i = 0; i < n; ++i, ++next) {
        column.push_back(next * 0x9E3779B97F4A7C15);
        ref.push_back(next * 0x9E3779B97F4A7C15);
      }
    };
    push(kBig);
    // Move the window `shift` values round the ring without growing it.
    column.drop_before(shift);
    ref.erase(ref.begin(), ref.begin() + static_cast<std::ptrdiff_t>(shift));
    push(shift);
    check_window(column, ref, shift);
    push(1);  // full: doubles, the window wrapped
    check_window(column, ref, shift);
    // Wrap it again in the doubled ring and fill it, then reserve four doublings at once.
    const std::uint64_t drop = kBig / 2 + shift / 3;
    column.drop_before(shift + drop);
    ref.erase(ref.begin(), ref.begin() + static_cast<std::ptrdiff_t>(drop));
    push(2 * kBig - ref.size());
    check_window(column, ref, shift + drop);
    // Move the full window on by three times the ring, so that its indices have bits set above
    // the ring's size, as growth by several doublings must account for.
    std::uint64_t front = shift + drop;
    for (int step = 0; step < 12; ++step) {
      front += kBig / 2;
      column.drop_before(front);
      ref.erase(ref.begin(), ref.begin() + static_cast<std::ptrdiff_t>(kBig / 2));
      push(kBig / 2);
    }
    check_window(column, ref, front);
    column.reserve(32 * kBig);
    check_window(column, ref, front);
    push(3 * kBig);
    check_window(column, ref, front);
  }
}
