#pragma once
// The engine's future: events ordered by (time, insertion sequence).
//
// The sequence number breaks ties between events at the same time in the order they were
// scheduled, so a run never depends on container internals and repeats bit for bit.
//
// Two tiers. The *front* is a short sorted array of the earliest events: pops read it in order,
// the engine's lookahead reads the events after the earliest from it, and a push that falls
// before its last event is inserted in place. Every other event waits in a *bucket*: a FIFO run
// of events with one time. A push joins the bucket of the previous push when the time is the
// same, otherwise it opens a new bucket, and a 4-ary min-heap orders the buckets by (time, first
// sequence). Only the open bucket ever grows, so two buckets of one time hold disjoint, ordered
// ranges of sequence numbers, and every bucketed event comes after every event of the front.
// When the front runs low it is topped up from the earliest bucket, so draining the buckets
// one after another yields exactly (time, sequence) order.
//
// Why two tiers: with many distinct times (flows of different rates, ECMP paths of different
// latencies) a bucket holds few events, and a lookahead into the heap saw only one or two
// buckets, too few events for the engine's prefetches; the front holds the eight after the
// earliest whenever the queue has that many. Few events are scheduled before the front's last
// one, so the heap still orders most buckets (change 56 in docs/performance-history.md).
//
// Cost: an event is 24 bytes in the front, 16 in its bucket, and a bucket 24 bytes in the heap.
// A push into the front moves the events after it (at most kFrontMax); a push that joins the
// open bucket is O(1), and so is a pop but for the top-ups, each of which moves up to kFrontFill
// events; opening or emptying a bucket is O(log4 b) for b open buckets. Times are non-negative
// doubles, whose bit patterns order like unsigned integers, so comparisons are integer
// compares. Nothing allocates once the arrays have grown to their working size. Events are
// never removed early: an event that became stale (a flow whose rate changed) carries a version
// the engine checks when it pops it, until the engine sweeps them out with remove_if().
#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "topology/prefetch.hpp"

namespace collsim::sim {

enum class EventKind : std::uint8_t {
  op_done,           // id = op: a compute or delay op ends
  latency_done,      // id = flow: the flow's latency phase ends, its bandwidth phase begins
  flow_done,         // id = flow: the flow has drained
  capacity_change,   // id = index of the change in the engine's flattened capacity list
  background_start,  // id = index of the background flow
  release,           // id = op: one of its predecessors is now seen from its stream (event latency)
  copy_grant         // none: copy engines are handed out once the instant has no other event
};

struct Event {
  std::uint64_t time_bits = 0;  // std::bit_cast of a time >= 0 (seconds)
  std::uint64_t seq_kind = 0;   // sequence << 8 | kind
  std::uint32_t id = 0;
  std::uint32_t version = 0;  // flows only: stale when it differs from the flow's version

  double time() const { return std::bit_cast<double>(time_bits); }
  EventKind kind() const { return static_cast<EventKind>(seq_kind & 0xff); }
};

class EventQueue {
  struct Item {
    std::uint64_t seq_kind;
    std::uint32_t id;
    std::uint32_t version;
  };

 public:
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  std::uint64_t scheduled() const { return next_seq_; }

  // `time` must be >= 0 and not NaN (the engine only adds non-negative durations to 0).
  void push(double time, EventKind kind, std::uint32_t id, std::uint32_t version = 0) {
    const std::uint64_t bits = std::bit_cast<std::uint64_t>(time + 0.0);  // -0.0 becomes +0.0
    const std::uint64_t seq_kind = (next_seq_++ << 8) | static_cast<std::uint8_t>(kind);
    ++size_;
    // An empty front means no bucket either (pop() tops it up), so the event is the earliest.
    if (front_head_ == front_.size() || bits < front_.back().time_bits) {
      // After the events of its time or earlier: its sequence is the largest.
      const auto pos =
          std::upper_bound(front_.begin() + static_cast<std::ptrdiff_t>(front_head_), front_.end(),
                           bits, [](std::uint64_t b, const Event& e) { return b < e.time_bits; });
      front_.insert(pos, Event{bits, seq_kind, id, version});
      if (front_.size() - front_head_ > kFrontMax) shrink_front();
      return;
    }
    if (open_ == kNone || buckets_[open_].time_bits != bits) open_ = open_bucket(bits, seq_kind);
    buckets_[open_].items.push_back(Item{seq_kind, id, version});
  }

  // Drops every event for which `stale(event)` holds, keeping the order of the rest. The engine
  // calls it when superseded flow events outnumber live ones: without it, a large sharing
  // component that re-times all its flows at every arrival fills memory with dead events.
  //
  // `hint(event)` is called a few buckets ahead of `stale(event)`, to prefetch what that will
  // read: a sweep visits every bucket, each a miss of its own once the queue outgrows the caches.
  template <typename Stale, typename Hint>
  void remove_if(Stale stale, Hint hint) {
    const auto live_end = std::remove_if(front_.begin() + static_cast<std::ptrdiff_t>(front_head_),
                                         front_.end(), stale);
    size_ -= static_cast<std::size_t>(front_.end() - live_end);
    front_.erase(live_end, front_.end());
    constexpr std::size_t kRecordAhead = 12, kItemsAhead = 6, kHintAhead = 3;
    const std::size_t n = heap_.size();
    std::size_t kept = 0;
    for (std::size_t k = 0; k < n; ++k) {
      if (k + kRecordAhead < n) collsim::prefetch(&buckets_[heap_[k + kRecordAhead].bucket]);
      if (k + kItemsAhead < n) {
        const Bucket& ahead = buckets_[heap_[k + kItemsAhead].bucket];
        if (ahead.head < ahead.items.size()) collsim::prefetch(ahead.items.data() + ahead.head);
      }
      if (k + kHintAhead < n) {
        const Bucket& ahead = buckets_[heap_[k + kHintAhead].bucket];
        if (ahead.head < ahead.items.size()) {
          const Item& item = ahead.items[ahead.head];
          hint(Event{ahead.time_bits, item.seq_kind, item.id, item.version});
        }
      }
      const Key key = heap_[k];
      Bucket& bucket = buckets_[key.bucket];
      std::size_t out = 0;
      for (std::size_t i = bucket.head; i < bucket.items.size(); ++i) {
        const Item& item = bucket.items[i];
        if (!stale(Event{bucket.time_bits, item.seq_kind, item.id, item.version}))
          bucket.items[out++] = item;
      }
      size_ -= bucket.items.size() - bucket.head - out;
      bucket.items.resize(out);
      // Memory held by dead events goes back, but a bucket of the usual few events keeps its
      // storage: freeing and reallocating it at every sweep made the allocator a tenth of a
      // 131,072-GPU tree's time.
      if (bucket.items.capacity() > 4 * std::max<std::size_t>(out, kKeptItems))
        bucket.items.shrink_to_fit();
      bucket.head = 0;
      if (out > 0) {
        heap_[kept++] = key;
      } else {
        free_.push_back(key.bucket);
        if (open_ == key.bucket) open_ = kNone;
      }
    }
    // Keys keep their order, so the order of the events is unchanged; the survivors are made a
    // heap again bottom-up, O(n).
    heap_.resize(kept);
    for (std::size_t i = kept / 4 + 1; i-- > 0;)
      if (i < kept) sift_down(i, heap_[i]);
    if (front_.size() - front_head_ < kFrontLow) top_up();
  }

  template <typename Stale>
  void remove_if(Stale stale) {
    remove_if(stale, [](const Event&) {});
  }

  // The time of the earliest event; the queue must not be empty.
  double next_time() const { return front_[front_head_].time(); }
  // Whether the earliest event comes before an event kept elsewhere under the sequence number
  // `seq` of take_seq(), at the time whose bits are `time_bits`; the queue must not be empty.
  bool front_before(std::uint64_t time_bits, std::uint64_t seq) const {
    const Event& e = front_[front_head_];
    return e.time_bits < time_bits || (e.time_bits == time_bits && (e.seq_kind >> 8) < seq);
  }
  // The sequence number the next push would get, for an event kept outside the queue (sim/
  // keyed_heap.hpp) that must run in the place a push would have given it.
  std::uint64_t take_seq() { return next_seq_++; }

  // The events queued next, as the queue stands (a later push may still come before some of
  // them): those of the front. Only a hint, for prefetching what those events will touch.
  class Lookahead {
   public:
    // The id and kind of the event `ahead` places after the earliest; false when the front
    // holds fewer.
    bool at(std::size_t ahead, std::uint32_t& id, EventKind& kind) const {
      if (ahead >= n_) return false;
      id = events_[ahead].id;
      kind = events_[ahead].kind();
      return true;
    }

   private:
    friend class EventQueue;
    const Event* events_ = nullptr;
    std::size_t n_ = 0;
  };
  // The front holds at least kFrontLow events while the queue does (fewer only when that is
  // all there is), so a lookahead reaches at least kFrontLow - 1 places.
  Lookahead lookahead() const {
    Lookahead l;
    l.events_ = front_.data() + front_head_;
    l.n_ = front_.size() - front_head_;
    return l;
  }
  static constexpr std::size_t kLookaheadReach = 8;

  // The earliest event; the queue must not be empty.
  Event pop() {
    const Event e = front_[front_head_++];
    --size_;
    if (front_.size() - front_head_ < kFrontLow) top_up();
    return e;
  }

 private:
  static constexpr std::uint32_t kNone = ~std::uint32_t{0};
  static constexpr std::size_t kKeptItems = 16;  // a bucket's storage a sweep never frees
  // The front is topped up to kFrontFill events when fewer than kFrontLow remain, and handed
  // back to the buckets down to kFrontFill when pushes grow it past kFrontMax, which bounds
  // what an insertion moves.
  static constexpr std::size_t kFrontLow = kLookaheadReach + 1, kFrontFill = 32, kFrontMax = 64;
  struct Bucket {
    std::uint64_t time_bits = 0;
    std::vector<Item> items;
    std::size_t head = 0;
  };
  struct Key {
    std::uint64_t time_bits;
    // The sequence of the bucket's earliest event when it was opened or last topped up from;
    // a sweep may remove that event, but the value still lies between the ranges of the other
    // buckets of its time, which is all their order needs. Unique, so keys never tie.
    std::uint64_t first_seq;
    std::uint32_t bucket;
    bool before(const Key& o) const {
      return time_bits < o.time_bits || (time_bits == o.time_bits && first_seq < o.first_seq);
    }
  };

  // Moves the earliest bucketed events to the end of the front, which they all follow, until
  // it holds kFrontFill or the buckets are empty.
  void top_up() {
    front_.erase(front_.begin(), front_.begin() + static_cast<std::ptrdiff_t>(front_head_));
    front_head_ = 0;
    while (front_.size() < kFrontFill && !heap_.empty()) {
      const std::uint32_t b = heap_.front().bucket;
      Bucket& bucket = buckets_[b];
      const std::size_t take =
          std::min(kFrontFill - front_.size(), bucket.items.size() - bucket.head);
      for (std::size_t i = bucket.head; i < bucket.head + take; ++i) {
        const Item& item = bucket.items[i];
        front_.push_back(Event{bucket.time_bits, item.seq_kind, item.id, item.version});
      }
      bucket.head += take;
      if (bucket.head < bucket.items.size()) {
        // The events it handed over may come back as a bucket of their own (shrink_front),
        // which must sort before what is left of this one.
        heap_.front().first_seq = bucket.items[bucket.head].seq_kind >> 8;
        break;
      }
      bucket.items.clear();  // keeps its capacity for the next time it is opened
      bucket.head = 0;
      free_.push_back(b);
      if (open_ == b) open_ = kNone;
      pop_heap();
    }
  }

  // Hands the front's latest events back to the buckets, one bucket per time. They come before
  // every bucketed event, and a bucket of their time already there holds later sequences, so
  // ordering buckets by their first sequence keeps them in place; none of them is open, so none
  // grows.
  void shrink_front() {
    std::size_t i = front_head_ + kFrontFill;
    while (i < front_.size()) {
      const std::uint64_t bits = front_[i].time_bits;
      const std::uint32_t b = open_bucket(bits, front_[i].seq_kind);
      for (; i < front_.size() && front_[i].time_bits == bits; ++i)
        buckets_[b].items.push_back(Item{front_[i].seq_kind, front_[i].id, front_[i].version});
    }
    front_.resize(front_head_ + kFrontFill);
  }

  std::uint32_t open_bucket(std::uint64_t bits, std::uint64_t first_seq_kind) {
    std::uint32_t b;
    if (!free_.empty()) {
      b = free_.back();
      free_.pop_back();
    } else {
      b = static_cast<std::uint32_t>(buckets_.size());
      buckets_.emplace_back();
    }
    buckets_[b].time_bits = bits;
    const Key key{bits, first_seq_kind >> 8, b};
    std::size_t i = heap_.size();
    heap_.push_back(key);
    while (i > 0) {
      const std::size_t parent = (i - 1) / 4;
      if (!key.before(heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = key;
    return b;
  }

  // The least of the children of heap_[i] (which has at least one) among the first n keys.
  std::size_t least_child(std::size_t i, std::size_t n) const {
    const std::size_t first = 4 * i + 1;
    const std::size_t end = first + 4 < n ? first + 4 : n;
    std::size_t best = first;
    for (std::size_t c = first + 1; c < end; ++c)
      if (heap_[c].before(heap_[best])) best = c;
    return best;
  }

  void pop_heap() {
    const Key last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(0, last);
  }

  // Puts `key` at position i or below it, moving the lesser children up.
  void sift_down(std::size_t i, const Key key) {
    const std::size_t n = heap_.size();
    while (4 * i + 1 < n) {
      const std::size_t best = least_child(i, n);
      if (!heap_[best].before(key)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = key;
  }

  std::vector<Event> front_;  // sorted; the live events from front_head_ on
  std::size_t front_head_ = 0;
  std::vector<Bucket> buckets_;
  std::vector<std::uint32_t> free_;
  std::vector<Key> heap_;
  std::uint32_t open_ = kNone;  // the bucket the last push went to, while it holds events
  std::size_t size_ = 0;
  std::uint64_t next_seq_ = 0;
};

}  // namespace collsim::sim
