#pragma once
// The engine's future: a 4-ary min-heap of plain events ordered by (time, insertion sequence).
//
// The sequence number breaks ties between events at the same time in the order they were
// scheduled, so a run never depends on heap internals and repeats bit for bit. Ties are the
// rule, not the exception: on a uniform machine every rank of a ring finishes a step at exactly
// the same instant.
//
// Cost: an event is 24 bytes; push is O(log4 n), pop O(4 log4 n) comparisons, and neither
// allocates once the heap has grown to its working size. Times are non-negative doubles, whose
// bit patterns order like unsigned integers, so a comparison is two integer compares with no
// NaN handling. A 4-ary heap is half as deep as a binary one and its four children share a cache
// line pair, which is what pop spends its time on. Events are never removed early: an event that
// became stale (a flow whose rate changed) carries a version the engine checks when it pops it.
#include <bit>
#include <cstdint>
#include <vector>

namespace collsim::sim {

enum class EventKind : std::uint8_t {
  op_done,          // id = op: a compute or delay op ends
  latency_done,     // id = flow: the flow's latency phase ends, its bandwidth phase begins
  flow_done,        // id = flow: the flow has drained
  capacity_change,  // id = index of the change in the engine's flattened capacity list
  background_start  // id = index of the background flow
};

struct Event {
  std::uint64_t time_bits = 0;  // std::bit_cast of a time >= 0 (seconds)
  std::uint64_t seq_kind = 0;   // sequence << 8 | kind: unique, so keys never tie
  std::uint32_t id = 0;
  std::uint32_t version = 0;  // flows only: stale when it differs from the flow's version

  double time() const { return std::bit_cast<double>(time_bits); }
  EventKind kind() const { return static_cast<EventKind>(seq_kind & 0xff); }
  bool before(const Event& o) const {
    return time_bits < o.time_bits || (time_bits == o.time_bits && seq_kind < o.seq_kind);
  }
};
static_assert(sizeof(Event) == 24);

class EventQueue {
 public:
  void reserve(std::size_t n) { heap_.reserve(n); }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  std::uint64_t scheduled() const { return next_seq_; }

  // `time` must be >= 0 and not NaN (the engine only adds non-negative durations to 0).
  void push(double time, EventKind kind, std::uint32_t id, std::uint32_t version = 0) {
    const Event e{std::bit_cast<std::uint64_t>(time + 0.0),  // + 0.0 turns -0.0 into +0.0
                  (next_seq_++ << 8) | static_cast<std::uint8_t>(kind), id, version};
    std::size_t i = heap_.size();
    heap_.push_back(e);
    while (i > 0) {
      const std::size_t parent = (i - 1) / 4;
      if (!e.before(heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }

  // The earliest event; the queue must not be empty.
  Event pop() {
    const Event top = heap_.front();
    const Event last = heap_.back();
    heap_.pop_back();
    const std::size_t n = heap_.size();
    if (n == 0) return top;
    std::size_t i = 0;
    for (;;) {
      const std::size_t first = 4 * i + 1;
      if (first >= n) break;
      std::size_t best = first;
      const std::size_t end = first + 4 < n ? first + 4 : n;
      for (std::size_t c = first + 1; c < end; ++c)
        if (heap_[c].before(heap_[best])) best = c;
      if (!heap_[best].before(last)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = last;
    return top;
  }

 private:
  std::vector<Event> heap_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace collsim::sim
