#pragma once
// The engine's future: a binary min-heap of plain events ordered by (time, insertion sequence).
//
// The sequence number breaks ties between events at the same time in the order they were
// scheduled, so a run never depends on heap internals and repeats bit for bit. An event is 24
// bytes; push and pop cost O(log n) and never allocate once the heap has grown to its working size.
// Events are never removed early: an event that became stale (a flow whose rate changed) carries a
// version that the engine compares when it pops the event.
#include <algorithm>
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
  double time = 0;
  std::uint64_t seq_kind = 0;  // sequence << 8 | kind: one compare orders equal times
  std::uint32_t id = 0;
  std::uint32_t version = 0;  // flows only: stale when it differs from the flow's version

  EventKind kind() const { return static_cast<EventKind>(seq_kind & 0xff); }
};
static_assert(sizeof(Event) == 24);

class EventQueue {
 public:
  void reserve(std::size_t n) { heap_.reserve(n); }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  std::uint64_t scheduled() const { return next_seq_; }

  void push(double time, EventKind kind, std::uint32_t id, std::uint32_t version = 0) {
    heap_.push_back(Event{time, (next_seq_++ << 8) | static_cast<std::uint8_t>(kind), id, version});
    std::push_heap(heap_.begin(), heap_.end(), later);
  }

  // The earliest event; the queue must not be empty.
  Event pop() {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const Event e = heap_.back();
    heap_.pop_back();
    return e;
  }

 private:
  static bool later(const Event& a, const Event& b) {
    return a.time > b.time || (a.time == b.time && a.seq_kind > b.seq_kind);
  }

  std::vector<Event> heap_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace collsim::sim
