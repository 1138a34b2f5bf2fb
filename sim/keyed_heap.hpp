#pragma once
// The completions of flows whose rate changed after their first completion was queued.
//
// A re-share re-times a few flows, most of them more than once before they end: on a
// 131,072-GPU tree, 2.35 completions were queued for every event run, so that the event queue
// held, pushed, popped and swept mostly completions that a later re-share had superseded. The
// first re-timing of a flow moves its completion here instead: its event in the queue goes
// stale once, and each later re-timing updates its one entry here in place.
//
// Entries are ordered by (time, sequence number), the order of the event queue, and take their
// sequence numbers from it: the engine merges the two by comparing those keys, so that every
// event runs exactly when it would have run had it been pushed to the event queue.
#include <bit>
#include <cstdint>
#include <vector>

#include "topology/prefetch.hpp"

namespace collsim::sim {

class KeyedHeap {
 public:
  struct Entry {
    std::uint64_t time_bits;  // std::bit_cast of a time >= 0, which orders as an integer
    std::uint64_t seq;
    std::uint32_t id;
    bool before(const Entry& o) const {
      return time_bits < o.time_bits || (time_bits == o.time_bits && seq < o.seq);
    }
  };

  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  bool contains(std::uint32_t id) const { return id < pos_.size() && pos_[id] != kNone; }
  // The earliest entry; the heap must not be empty.
  const Entry& top() const { return heap_.front(); }
  // The entry at a position of the heap's array, for prefetching hints: position 0 is the top,
  // and the next top is among positions 1 to 4.
  const Entry& at(std::size_t i) const { return heap_[i]; }
  // Hints for set(id): its position, then, once that is cached, its entry.
  void prefetch_position(std::uint32_t id) const {
    if (id < pos_.size()) collsim::prefetch(&pos_[id]);
  }
  void prefetch_entry(std::uint32_t id) const {
    if (id < pos_.size() && pos_[id] != kNone) collsim::prefetch(&heap_[pos_[id]]);
  }

  // Adds `id` under the key, or moves it there when it is in the heap already.
  void set(std::uint32_t id, double time, std::uint64_t seq) {
    const Entry e{std::bit_cast<std::uint64_t>(time + 0.0), seq, id};  // -0.0 becomes +0.0
    if (id >= pos_.size()) pos_.resize(id + 1, kNone);
    std::size_t i = pos_[id];
    if (i == kNone) {
      i = heap_.size();
      heap_.push_back(e);
      sift_up(i, e);
      return;
    }
    if (e.before(heap_[i]))
      sift_up(i, e);
    else
      sift_down(i, e);
  }

  void erase(std::uint32_t id) {
    const std::size_t i = pos_[id];
    pos_[id] = kNone;
    const Entry last = heap_.back();
    heap_.pop_back();
    if (i == heap_.size()) return;  // it was the last
    if (last.before(heap_[i]))
      sift_up(i, last);
    else
      sift_down(i, last);
  }

  Entry pop() {
    const Entry e = heap_.front();
    erase(e.id);
    return e;
  }

 private:
  static constexpr std::uint32_t kNone = ~std::uint32_t{0};

  void place(std::size_t i, const Entry& e) {
    heap_[i] = e;
    pos_[e.id] = static_cast<std::uint32_t>(i);
  }
  // Four children per entry, as in the event queue: half the levels of a binary heap, and the
  // four children share a cache line or two.
  void sift_up(std::size_t i, const Entry& e) {
    while (i > 0) {
      const std::size_t parent = (i - 1) / 4;
      if (!e.before(heap_[parent])) break;
      place(i, heap_[parent]);
      i = parent;
    }
    place(i, e);
  }
  void sift_down(std::size_t i, const Entry& e) {
    const std::size_t n = heap_.size();
    while (4 * i + 1 < n) {
      const std::size_t first = 4 * i + 1;
      const std::size_t end = first + 4 < n ? first + 4 : n;
      std::size_t best = first;
      for (std::size_t c = first + 1; c < end; ++c)
        if (heap_[c].before(heap_[best])) best = c;
      if (!heap_[best].before(e)) break;
      place(i, heap_[best]);
      i = best;
    }
    place(i, e);
  }

  std::vector<Entry> heap_;
  std::vector<std::uint32_t> pos_;  // by id: its position in heap_, kNone when absent
};

}  // namespace collsim::sim
