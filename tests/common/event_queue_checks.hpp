#pragma once
// Replays pushes, lane pushes, pops, sweeps and moved completions on the engine's event queue
// (sim/event_queue.hpp) beside the keyed heap of moved completions (sim/keyed_heap.hpp), merged
// as the engine merges them (Engine::next_event), and lists where they part from a sorted map of
// (time, sequence): every pop must give the map's earliest event with its id, kind and version;
// sizes, sequence numbers, next_time(), front_before() and the lookahead must agree with it, the
// lookahead reaching the engine's prefetching stages after each pop and sweep; a sweep must drop
// exactly the events it names. Delays come from a palette of more than
// EventQueue::kMaxLanes values, some of them a few ulps apart, so that lanes are bound, run out
// and are reused, and times tie or nearly tie. Without Catch2: the choices come from a fuzzer's
// input (tests/fuzz/fuzz_event_queue.cpp) or from a fixed sequence
// (tests/sim/event_queue_checks_test.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sim/event_queue.hpp"
#include "sim/keyed_heap.hpp"
#include "tests/common/choices.hpp"

namespace collsim::test {

class EventQueueReplay {
 public:
  explicit EventQueueReplay(Choices& choose) : choose_(choose) {}

  // Runs up to `max_steps` operations (or until the choices run out); the first difference
  // found, or nothing.
  std::vector<std::string> run(std::size_t max_steps) {
    for (step_ = 0; step_ < max_steps && !choose_.exhausted() && out_.empty(); ++step_) {
      switch (choose_.below(12)) {
        case 0:
        case 1:
        case 2:
          push(false);
          break;
        case 3:
        case 4:
        case 5:
          push(true);
          break;
        case 6:
          pop();
          break;
        case 7:
          for (std::uint32_t n = 1 + choose_.below(40); n > 0 && out_.empty(); --n) pop();
          break;
        case 8:
          move_completion();
          break;
        case 9:
          drop_moved();
          break;
        case 10:
          sweep();
          break;
        default:
          look();
          break;
      }
      check_sizes();
    }
    while (out_.empty() && !reference_.empty()) pop();
    if (out_.empty() && !(queue_.empty() && moved_.empty()))
      fail("the reference is empty but the queue or the heap is not");
    return out_;
  }

 private:
  static constexpr std::uint32_t kMovedIds = 64;
  struct Value {
    std::uint32_t id;
    sim::EventKind kind;
    std::uint32_t version;
    bool moved;  // a moved completion, in the keyed heap
  };
  using Key = std::pair<std::uint64_t, std::uint64_t>;  // (time bits, sequence)

  void fail(const std::string& what) {
    out_.push_back(fmt::format("step {} at t = {}: {}", step_, now_, what));
  }

  double delay() {
    switch (choose_.below(5)) {
      case 0:
        return 0;
      case 1:  // route latencies: more than the queue has lanes
        return 1e-6 * (1 + choose_.below(80));
      case 2:  // a latency and a few ulps, as sums of latencies come out
        return std::nextafter(1e-6 * (1 + choose_.below(4)), 1.0) * (1 + 1e-16 * choose_.below(3));
      case 3:  // flow durations: any
        return 1e-9 * choose_.below(1'000'000);
      default:  // far ahead
        return 1.0 + choose_.below(10);
    }
  }

  void push(bool from_now) {
    const double t = now_ + delay();
    const auto kind = static_cast<sim::EventKind>(choose_.below(7));
    const std::uint32_t id = choose_.below(1000);
    const std::uint32_t version = choose_.below(4);
    if (from_now)
      queue_.push_from(now_, t, kind, id, version);
    else
      queue_.push(t, kind, id, version);
    reference_.emplace(Key{std::bit_cast<std::uint64_t>(t + 0.0), seq_++},
                       Value{id, kind, version, false});
  }

  // A flow's completion re-timed: kept in the heap under the next sequence number.
  void move_completion() {
    const std::uint32_t id = choose_.below(kMovedIds);
    const double t = now_ + delay();
    const std::uint64_t seq = queue_.take_seq();
    if (seq != seq_) fail(fmt::format("take_seq() gave {}, the next sequence is {}", seq, seq_));
    ++seq_;
    drop_reference(id);
    moved_.set(id, t, seq);
    moved_key_[id] = Key{std::bit_cast<std::uint64_t>(t + 0.0), seq};
    reference_.emplace(moved_key_[id], Value{id, sim::EventKind::flow_done, 0, true});
  }

  void drop_reference(std::uint32_t id) {
    const auto it = moved_key_.find(id);
    if (it == moved_key_.end()) return;
    reference_.erase(it->second);
    moved_key_.erase(it);
  }

  void drop_moved() {
    const std::uint32_t id = choose_.below(kMovedIds);
    if (moved_.contains(id) != (moved_key_.count(id) == 1)) {
      fail(fmt::format("the heap {} id {}, the reference {}",
                       moved_.contains(id) ? "holds" : "lacks", id,
                       moved_key_.count(id) == 1 ? "holds it" : "does not"));
      return;
    }
    if (!moved_.contains(id)) return;
    moved_.erase(id);
    drop_reference(id);
  }

  // As Engine::next_event(): the heap's top when no queued event comes before it.
  void pop() {
    if (reference_.empty()) {
      if (!queue_.empty() || !moved_.empty()) fail("the reference is empty but the queue is not");
      return;
    }
    if (queue_.empty() && moved_.empty()) {
      fail("the queue and the heap are empty but the reference is not");
      return;
    }
    const auto expected = reference_.begin();
    Key got;
    Value value{};
    if (!moved_.empty() &&
        (queue_.empty() || !queue_.front_before(moved_.top().time_bits, moved_.top().seq))) {
      const sim::KeyedHeap::Entry m = moved_.pop();
      got = Key{m.time_bits, m.seq};
      value = Value{m.id, sim::EventKind::flow_done, 0, true};
    } else {
      const sim::Event e = queue_.pop();
      got = Key{e.time_bits, e.seq_kind >> 8};
      value = Value{e.id, e.kind(), e.version, false};
      check_reach("a pop");
    }
    const Value& want = expected->second;
    if (got != expected->first || value.id != want.id || value.kind != want.kind ||
        value.version != want.version || value.moved != want.moved) {
      fail(
          fmt::format("popped {} (seq {}, id {}, kind {}, version {}{}), expected {} (seq {}, id "
                      "{}, kind {}, version {}{})",
                      std::bit_cast<double>(got.first), got.second, value.id,
                      static_cast<int>(value.kind), value.version, value.moved ? ", moved" : "",
                      std::bit_cast<double>(expected->first.first), expected->first.second, want.id,
                      static_cast<int>(want.kind), want.version, want.moved ? ", moved" : ""));
      return;
    }
    if (value.moved) moved_key_.erase(value.id);
    now_ = std::bit_cast<double>(got.first);
    reference_.erase(expected);
  }

  // Superseded events swept out, as the engine does: here those whose id has a given residue.
  void sweep() {
    const std::uint32_t modulus = 1 + choose_.below(7);
    const std::uint32_t residue = choose_.below(modulus);
    const auto stale = [&](std::uint32_t id) { return id % modulus == residue; };
    queue_.remove_if([&](const sim::Event& e) { return stale(e.id); });
    std::erase_if(reference_,
                  [&](const auto& entry) { return !entry.second.moved && stale(entry.second.id); });
    check_reach("a sweep");
  }

  // After a pop or a sweep the lookahead reaches the engine's prefetching stages, or every
  // event there is.
  void check_reach(const char* after) {
    const std::size_t want =
        std::min(queue_.size(), std::size_t{sim::EventQueue::kLookaheadReach + 1});
    std::uint32_t id = 0;
    sim::EventKind kind{};
    if (want > 0 && !queue_.lookahead().at(want - 1, id, kind))
      fail(fmt::format("after {} the lookahead reaches fewer than {} of the queue's {} events",
                       after, want, queue_.size()));
  }

  void look() {
    if (queue_.empty()) return;
    // The queue's own events in order, without the heap's.
    std::vector<std::pair<Key, Value>> queued;
    for (const auto& entry : reference_)
      if (!entry.second.moved) queued.push_back(entry);
    if (queued.empty()) {
      fail("the queue is not empty but the reference holds no queued event");
      return;
    }
    if (std::bit_cast<std::uint64_t>(queue_.next_time()) != queued.front().first.first)
      fail(fmt::format("next_time() is {}, the earliest queued event is at {}", queue_.next_time(),
                       std::bit_cast<double>(queued.front().first.first)));
    const sim::EventQueue::Lookahead ahead = queue_.lookahead();
    for (std::size_t i = 0; i < queued.size() && i < 2 * sim::EventQueue::kLookaheadReach; ++i) {
      std::uint32_t id = 0;
      sim::EventKind kind{};
      if (!ahead.at(i, id, kind)) break;
      if (id != queued[i].second.id || kind != queued[i].second.kind)
        fail(fmt::format(
            "the lookahead's event {} is id {}, kind {}; the queue's is id {}, kind {}", i, id,
            static_cast<int>(kind), queued[i].second.id, static_cast<int>(queued[i].second.kind)));
    }
    // Keys just before, at and just after the earliest.
    const Key first = queued.front().first;
    for (const Key& probe : {first, Key{first.first, first.second + 1}, Key{first.first + 1, 0},
                             Key{first.first, first.second == 0 ? 0 : first.second - 1}}) {
      const bool want = first < probe;
      if (queue_.front_before(probe.first, probe.second) != want)
        fail(fmt::format("front_before({}, {}) is {}", std::bit_cast<double>(probe.first),
                         probe.second, !want));
    }
  }

  void check_sizes() {
    if (!out_.empty()) return;
    std::size_t queued = 0;
    for (const auto& entry : reference_) queued += !entry.second.moved;
    if (queue_.size() != queued || queue_.empty() != (queued == 0))
      fail(fmt::format("the queue holds {} events, the reference {}", queue_.size(), queued));
    if (moved_.size() != moved_key_.size())
      fail(fmt::format("the heap holds {} entries, the reference {}", moved_.size(),
                       moved_key_.size()));
    if (queue_.scheduled() != seq_)
      fail(fmt::format("{} events scheduled, {} in the reference", queue_.scheduled(), seq_));
    if (queue_.lanes_in_use() > sim::EventQueue::kMaxLanes)
      fail(fmt::format("{} lanes in use", queue_.lanes_in_use()));
  }

  Choices& choose_;
  sim::EventQueue queue_;
  sim::KeyedHeap moved_;
  std::map<Key, Value> reference_;
  std::map<std::uint32_t, Key> moved_key_;  // where each moved completion is in the reference
  std::uint64_t seq_ = 0;
  double now_ = 0;
  std::size_t step_ = 0;
  std::vector<std::string> out_;
};

}  // namespace collsim::test
