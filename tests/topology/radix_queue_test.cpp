// The core tables' search queue: what it pops must be what a binary heap pops, key for key.
#include "topology/radix_queue.hpp"

#include <catch2/catch.hpp>
#include <functional>
#include <queue>
#include <random>
#include <utility>
#include <vector>

using collsim::topo::detail::RadixQueue;

TEST_CASE("the radix queue pops keys in the order a heap does, as a search pushes them") {
  // A search's pattern: pop the least, push keys at or above it (equal ones often, far ones
  // now and then), until empty; the same run on a heap gives the keys to expect.
  for (std::uint32_t seed = 1; seed <= 50; ++seed) {
    std::mt19937_64 rng(seed);
    RadixQueue<std::uint32_t> queue;
    queue.clear();
    std::priority_queue<std::uint64_t, std::vector<std::uint64_t>, std::greater<>> heap;
    std::vector<std::uint32_t> values_in(1000, 0), values_out(1000, 0);
    queue.push(0, 0);
    heap.push(0);
    ++values_in[0];
    std::size_t pops = 0;
    std::uint32_t next_value = 1;
    while (!heap.empty()) {
      REQUIRE(!queue.empty());
      const auto [key, value] = queue.pop();
      INFO("seed " << seed << ", pop " << pops);
      REQUIRE(key == heap.top());
      heap.pop();
      ++values_out[value];
      ++pops;
      const int children = next_value < 1000 ? 1 + static_cast<int>(rng() % 3) : 0;
      for (int c = 0; c < children && next_value < 1000; ++c) {
        const std::uint64_t step = rng() % 3 == 0 ? 0 : (rng() % 2 ? rng() % 100 : rng() >> 20);
        queue.push(key + step, next_value);
        heap.push(key + step);
        ++values_in[next_value++];
      }
    }
    CHECK(queue.empty());
    CHECK(values_in == values_out);  // each value came out once, with its key
    CHECK(pops > 100);
  }
}

TEST_CASE("a cleared radix queue starts again from key 0") {
  // Keys are filed by how they differ from the last key popped: after 8, a 9 would come out
  // before a 3 had the queue not forgotten it.
  RadixQueue<int> queue;
  queue.push(8, 1);
  CHECK(queue.pop() == std::pair<std::uint64_t, int>{8, 1});
  queue.push(1ull << 41, 2);
  queue.clear();
  CHECK(queue.empty());
  queue.push(9, 3);
  queue.push(3, 4);
  CHECK(queue.pop() == std::pair<std::uint64_t, int>{3, 4});
  CHECK(queue.pop() == std::pair<std::uint64_t, int>{9, 3});
  CHECK(queue.empty());
}
