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
// Three sources, in fact: most events are scheduled a fixed delay after the present (a route's
// latency, a flow's duration at its rate), and a simulation uses few distinct delays over and
// over. push_from() files such an event in the *lane* of its delay: a FIFO whose events, pushed
// at a present that never goes back, arrive in (time, sequence) order by themselves. A small
// 4-ary heap of the lanes' first events and the buckets' heap are merged when the front is
// topped up. A lane is read and written in order, where a bucket of its own for every time was
// a cache miss for its record and another for its events: the 4096-GPU ECMP ring opened 26.8 M
// buckets for its 100.6 M events, and now files all but 8,000 of them in 100 lanes bound over
// the run, at most kMaxLanes at once (change 59 in docs/performance-history.md). An event
// whose delay has no lane, or which would come before its lane's last event, takes the path of
// push().
//
// Order between the three: a bucket's events have consecutive sequence numbers but for front
// insertions (which come before every bucketed event); a lane push closes the open bucket, so
// no lane event's sequence falls inside a bucket's range, and a bucket can still be moved
// whole against a lane's first event.
//
// Cost: an event is 24 bytes in the front or a lane, 16 in its bucket, and a bucket or a lane
// 24 bytes in its heap; a lane push is O(1) but for a first event (O(log4 kMaxLanes)).
// A push into the front moves the events after it (at most kFrontMax); a push that joins the
// open bucket is O(1), and so is a pop but for the top-ups, each of which moves up to kFrontFill
// events; opening or emptying a bucket is O(log4 b) for b open buckets. Times are non-negative
// doubles, whose bit patterns order like unsigned integers, so comparisons are integer
// compares. Nothing allocates once the arrays have grown to their working size. Events are
// never removed early: an event that became stale (a flow whose rate changed) carries a version
// the engine checks when it pops it, until the engine sweeps them out with remove_if().
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <memory>
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

  // An event scheduled at `now` (the engine's present, which never decreases) for `time`:
  // filed by its delay, time - now, in that delay's lane when it has one or can be given one.
  // The order it pops in is the same as push()'s.
  void push_from(double now, double time, EventKind kind, std::uint32_t id,
                 std::uint32_t version = 0) {
    const std::uint64_t bits = std::bit_cast<std::uint64_t>(time + 0.0);
    const std::uint32_t l = front_head_ == front_.size() || bits < front_.back().time_bits
                                ? kNone
                                : lane_of(std::bit_cast<std::uint64_t>((time - now) + 0.0));
    if (l == kNone || (lanes_[l].count > 0 && lanes_[l].last_bits > bits)) {
      push_unlaned(time, kind, id, version);
      return;
    }
    const std::uint64_t seq_kind = (next_seq_++ << 8) | static_cast<std::uint8_t>(kind);
    ++size_;
    open_ = kNone;  // a later push of the open bucket's time must not share its range
    Lane& lane = lanes_[l];
    lane.push_back(Event{bits, seq_kind, id, version});
    if (lane.count == 1) heap_push(lane_heap_, Key{bits, seq_kind >> 8, l});
  }

  // Lanes bound to a delay now (at most kMaxLanes).
  std::size_t lanes_in_use() const { return lanes_.size() - idle_lanes_.size(); }
  static constexpr std::uint32_t kMaxLanes = 64;

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
      if (k + kRecordAhead < n) collsim::prefetch(&buckets_[heap_[k + kRecordAhead].source]);
      if (k + kItemsAhead < n) {
        const Bucket& ahead = buckets_[heap_[k + kItemsAhead].source];
        if (ahead.head < ahead.items.size()) collsim::prefetch(ahead.items.data() + ahead.head);
      }
      if (k + kHintAhead < n) {
        const Bucket& ahead = buckets_[heap_[k + kHintAhead].source];
        if (ahead.head < ahead.items.size()) {
          const Item& item = ahead.items[ahead.head];
          hint(Event{ahead.time_bits, item.seq_kind, item.id, item.version});
        }
      }
      const Key key = heap_[k];
      Bucket& bucket = buckets_[key.source];
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
        free_.push_back(key.source);
        if (open_ == key.source) open_ = kNone;
      }
    }
    // Keys keep their order, so the order of the events is unchanged; the survivors are made a
    // heap again bottom-up, O(n).
    heap_.resize(kept);
    make_heap(heap_);
    // A lane keeps the order of its survivors, and is read in order.
    lane_heap_.clear();
    for (std::uint32_t l = 0; l < lanes_.size(); ++l) {
      Lane& lane = lanes_[l];
      std::size_t out = 0;
      for (std::size_t i = 0; i < lane.count; ++i) {
        if (i + kHintAhead < lane.count) hint(lane.at(i + kHintAhead));
        const Event e = lane.at(i);
        if (!stale(e)) lane.at(out++) = e;
      }
      size_ -= lane.count - out;
      lane.count = out;
      if (out > 0) lane.last_bits = lane.at(out - 1).time_bits;
      if (out > 0) lane_heap_.push_back(Key{lane.front().time_bits, lane.front().seq_kind >> 8, l});
    }
    make_heap(lane_heap_);
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
  // After a pop or a sweep the front holds at least kFrontLow events while the queue does (fewer
  // only when that is all there is), so a lookahead then reaches at least kFrontLow - 1 places.
  // Pushes in between may leave it shorter: one onto a front of fewer events goes to a bucket or
  // a lane when it comes after them.
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
    std::uint32_t source;  // the bucket, or in lane_heap_ the lane
    bool before(const Key& o) const {
      return time_bits < o.time_bits || (time_bits == o.time_bits && first_seq < o.first_seq);
    }
  };

  // Moves the earliest events of the buckets and lanes to the end of the front, which they all
  // follow, until it holds kFrontFill or there are none left.
  void top_up() {
    front_.erase(front_.begin(), front_.begin() + static_cast<std::ptrdiff_t>(front_head_));
    front_head_ = 0;
    while (front_.size() < kFrontFill) {
      if (!lane_heap_.empty() && (heap_.empty() || lane_heap_.front().before(heap_.front()))) {
        // The lane's events go while they come before every other lane's and bucket's: a lane
        // often holds a run of one time (flows launched together over routes of one latency).
        const std::uint32_t l = lane_heap_.front().source;
        Lane& lane = lanes_[l];
        const std::size_t n = lane_heap_.size();
        Key bound{~std::uint64_t{0}, 0, kNone};
        if (n > 1) bound = lane_heap_[least_child(lane_heap_, 0, n)];
        if (!heap_.empty() && heap_.front().before(bound)) bound = heap_.front();
        Key next;
        do {
          front_.push_back(lane.front());
          lane.pop_front();
          if (lane.count == 0) break;
          next = Key{lane.front().time_bits, lane.front().seq_kind >> 8, l};
        } while (front_.size() < kFrontFill && next.before(bound));
        if (lane.count > 0)
          sift_down(lane_heap_, 0, next);
        else
          pop_heap(lane_heap_);
        continue;
      }
      if (heap_.empty()) break;
      const std::uint32_t b = heap_.front().source;
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
      pop_heap(heap_);
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
    heap_push(heap_, Key{bits, first_seq_kind >> 8, b});
    return b;
  }

  // The lane of events `delay_bits` after their push, binding one to that delay if need be;
  // kNone when every lane is bound to another. Lanes stay bound while empty, as their delay
  // usually comes back; after kRebind pushes without a lane, the empty ones are unbound.
  std::uint32_t lane_of(std::uint64_t delay_bits) {
    std::size_t slot = (delay_bits * 0x9e3779b97f4a7c15ull) >> (64 - kTableBits);
    for (;; slot = (slot + 1) & (kTableSize - 1)) {
      const std::uint32_t l = table_[slot];
      if (l == kNone) return bind_lane(delay_bits, slot);
      if (lanes_[l].delay_bits == delay_bits) return l;
    }
  }

  // The push() of an event push_from() finds no lane for: out of line, which keeps the usual
  // path short.
  [[gnu::noinline]] void push_unlaned(double time, EventKind kind, std::uint32_t id,
                                      std::uint32_t version) {
    push(time, kind, id, version);
  }

  // Binds a lane to `delay_bits`, whose table slot would be `slot`.
  [[gnu::noinline]] std::uint32_t bind_lane(std::uint64_t delay_bits, std::size_t slot) {
    if (idle_lanes_.empty()) {
      if (lanes_.size() < kMaxLanes) {
        idle_lanes_.push_back(static_cast<std::uint32_t>(lanes_.size()));
        lanes_.emplace_back();
      } else if (++unbound_pushes_ >= kRebind) {
        unbound_pushes_ = 0;
        unbind_idle_lanes();
        return lane_of(delay_bits);
      } else {
        return kNone;
      }
    }
    const std::uint32_t l = idle_lanes_.back();
    idle_lanes_.pop_back();
    lanes_[l].delay_bits = delay_bits;
    table_[slot] = l;
    return l;
  }

  void unbind_idle_lanes() {
    table_.fill(kNone);
    idle_lanes_.clear();
    for (std::uint32_t l = static_cast<std::uint32_t>(lanes_.size()); l-- > 0;) {
      if (lanes_[l].count == 0) {
        idle_lanes_.push_back(l);
        continue;
      }
      std::size_t slot = (lanes_[l].delay_bits * 0x9e3779b97f4a7c15ull) >> (64 - kTableBits);
      while (table_[slot] != kNone) slot = (slot + 1) & (kTableSize - 1);
      table_[slot] = l;
    }
  }

  static void heap_push(std::vector<Key>& heap, const Key key) {
    std::size_t i = heap.size();
    heap.push_back(key);
    while (i > 0) {
      const std::size_t parent = (i - 1) / 4;
      if (!key.before(heap[parent])) break;
      heap[i] = heap[parent];
      i = parent;
    }
    heap[i] = key;
  }

  // The least of the children of heap[i] (which has at least one) among the first n keys.
  static std::size_t least_child(const std::vector<Key>& heap, std::size_t i, std::size_t n) {
    const std::size_t first = 4 * i + 1;
    const std::size_t end = first + 4 < n ? first + 4 : n;
    std::size_t best = first;
    for (std::size_t c = first + 1; c < end; ++c)
      if (heap[c].before(heap[best])) best = c;
    return best;
  }

  static void pop_heap(std::vector<Key>& heap) {
    const Key last = heap.back();
    heap.pop_back();
    if (!heap.empty()) sift_down(heap, 0, last);
  }

  // Puts `key` at position i or below it, moving the lesser children up.
  static void sift_down(std::vector<Key>& heap, std::size_t i, const Key key) {
    const std::size_t n = heap.size();
    while (4 * i + 1 < n) {
      const std::size_t best = least_child(heap, i, n);
      if (!heap[best].before(key)) break;
      heap[i] = heap[best];
      i = best;
    }
    heap[i] = key;
  }

  // Bottom-up, O(n).
  static void make_heap(std::vector<Key>& heap) {
    const std::size_t n = heap.size();
    for (std::size_t i = n / 4 + 1; i-- > 0;)
      if (i < n) sift_down(heap, i, heap[i]);
  }

  // A FIFO of events in (time, sequence) order, in a ring whose size is a power of two.
  struct Lane {
    std::uint64_t delay_bits = 0;
    std::uint64_t last_bits = 0;  // the time of the latest event, read without its cache miss
    std::unique_ptr<Event[]> ring;
    std::size_t mask = ~std::size_t{0};  // the ring's size - 1
    std::size_t head = 0;
    std::size_t count = 0;
    Event& at(std::size_t i) { return ring[(head + i) & mask]; }
    const Event& front() const { return ring[head]; }
    void push_back(const Event& e) {
      if (count == mask + 1) grow();
      ring[(head + count++) & mask] = e;
      last_bits = e.time_bits;
    }
    void pop_front() {
      head = (head + 1) & mask;
      --count;
    }
    [[gnu::noinline]] void grow() {
      const std::size_t size = std::max<std::size_t>(16, 2 * (mask + 1));
      auto larger = std::make_unique<Event[]>(size);
      for (std::size_t i = 0; i < count; ++i) larger[i] = at(i);
      ring = std::move(larger);
      mask = size - 1;
      head = 0;
    }
  };
  // Lanes, and the table from a delay to its lane (open addressing, at most half full).
  static constexpr unsigned kTableBits = 7;
  static constexpr std::size_t kTableSize = std::size_t{1} << kTableBits;
  static_assert(2 * kMaxLanes <= kTableSize);
  static constexpr std::uint32_t kRebind = 1024;

  std::vector<Event> front_;  // sorted; the live events from front_head_ on
  std::size_t front_head_ = 0;
  std::vector<Bucket> buckets_;
  std::vector<std::uint32_t> free_;
  std::vector<Key> heap_;
  std::uint32_t open_ = kNone;  // the bucket the last push went to, while it holds events
  std::vector<Lane> lanes_;
  std::vector<std::uint32_t> idle_lanes_;  // lanes bound to no delay
  std::array<std::uint32_t, kTableSize> table_ = make_table();
  std::vector<Key> lane_heap_;  // the non-empty lanes, by their first event
  std::uint32_t unbound_pushes_ = 0;
  std::size_t size_ = 0;
  std::uint64_t next_seq_ = 0;

  static std::array<std::uint32_t, kTableSize> make_table() {
    std::array<std::uint32_t, kTableSize> t;
    t.fill(kNone);
    return t;
  }
};

}  // namespace collsim::sim
