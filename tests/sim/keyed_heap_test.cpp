#include "sim/keyed_heap.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <tuple>

#include "sim/event_queue.hpp"

using namespace collsim::sim;

namespace {

// A small linear congruential generator: the same sequence on every platform.
struct Random {
  std::uint64_t state;
  std::uint64_t operator()(std::uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  }
};

}  // namespace

TEST_CASE("a keyed heap pops in (time, sequence) order under moves and erasures", "[sim][queue]") {
  const std::uint64_t times = GENERATE(4, 1024);
  Random next{7};
  KeyedHeap heap;
  std::set<std::tuple<double, std::uint64_t, std::uint32_t>> reference;
  std::map<std::uint32_t, std::pair<double, std::uint64_t>> key;  // by id
  std::uint64_t seq = 0;
  std::uint64_t moved = 0;
  for (int step = 0; step < 20000; ++step) {
    const auto id = static_cast<std::uint32_t>(next(300));
    const std::uint64_t what = next(10);
    if (what < 6) {
      // Insert, or move it earlier or later: a later sequence number either way.
      const double t = 0.5 * static_cast<double>(next(times));
      if (auto it = key.find(id); it != key.end()) {
        reference.erase({it->second.first, it->second.second, id});
        ++moved;
      }
      heap.set(id, t, seq);
      key[id] = {t, seq};
      reference.emplace(t, seq++, id);
    } else if (what == 6 && key.count(id) != 0) {
      heap.erase(id);
      reference.erase({key[id].first, key[id].second, id});
      key.erase(id);
    } else if (!reference.empty()) {
      const KeyedHeap::Entry e = heap.pop();
      const auto& [t, s, i] = *reference.begin();
      REQUIRE(std::bit_cast<double>(e.time_bits) == t);
      REQUIRE(e.seq == s);
      REQUIRE(e.id == i);
      key.erase(i);
      reference.erase(reference.begin());
    }
    REQUIRE(heap.size() == reference.size());
    REQUIRE(heap.contains(id) == (key.count(id) != 0));
  }
  CHECK(moved > 1000);
  while (!reference.empty()) {
    REQUIRE(heap.pop().id == std::get<2>(*reference.begin()));
    reference.erase(reference.begin());
  }
  CHECK(heap.empty());
}

TEST_CASE("events kept in a keyed heap run where a push would have put them", "[sim][queue]") {
  // Pushes to the event queue and entries given take_seq() numbers, merged with front_before,
  // come out as one queue would give them: ties at one time in the order of their numbers.
  Random next{3};
  EventQueue queue;
  KeyedHeap heap;
  std::set<std::pair<double, std::uint64_t>> reference;  // (time, sequence)
  std::uint64_t seq = 0;  // what the queue hands out, push or take_seq alike
  std::uint32_t heap_id = 0;
  int from_heap = 0;
  for (int step = 0; step < 20000; ++step) {
    if (reference.empty() || next(3) != 0) {
      const double t = 0.25 * static_cast<double>(next(16));
      if (next(2) == 0) {
        queue.push(t, EventKind::op_done, static_cast<std::uint32_t>(seq));
        reference.emplace(t, seq++);
      } else {
        heap.set(heap_id++, t, queue.take_seq());
        reference.emplace(t, seq++);
      }
      continue;
    }
    std::pair<double, std::uint64_t> got;
    if (!heap.empty() &&
        (queue.empty() || !queue.front_before(heap.top().time_bits, heap.top().seq))) {
      const KeyedHeap::Entry e = heap.pop();
      got = {std::bit_cast<double>(e.time_bits), e.seq};
      ++from_heap;
    } else {
      const Event e = queue.pop();
      got = {e.time(), e.seq_kind >> 8};
    }
    REQUIRE(got == *reference.begin());
    reference.erase(reference.begin());
  }
  CHECK(from_heap > 1000);
  CHECK(queue.scheduled() == seq);
}
