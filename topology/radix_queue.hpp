#pragma once
// A monotone priority queue of (key, value) pairs for Dijkstra's searches over integer
// distances: every key pushed is at least the last key popped. Keys sit in 65 buckets by the
// highest bit in which they differ from the last key popped; a push is an append, and a pop
// takes bucket 0 (keys equal to the last) or, when that is empty, the lowest bucket that is
// not, whose least key becomes the last and whose other keys fall into lower buckets. Each
// key moves down at most 64 times, and a core table's search pushes its thousands of leaves
// at one distance, where a binary heap paid a sift of a dozen levels for each.
//
// Pairs of equal keys come out in no particular order; a search whose result does not depend
// on that order (a distance table) may use it.
#include <array>
#include <bit>
#include <cassert>
#include <cstdint>
#include <utility>
#include <vector>

namespace collsim::topo::detail {

template <typename Value>
class RadixQueue {
 public:
  bool empty() const { return size_ == 0; }
  void push(std::uint64_t key, Value value) {
    assert(key >= last_);
    buckets_[bucket(key)].push_back({key, value});
    ++size_;
  }
  // The least key and its value; the queue must not be empty.
  std::pair<std::uint64_t, Value> pop() {
    if (buckets_[0].empty()) {
      std::size_t b = 1;
      while (buckets_[b].empty()) ++b;
      std::vector<Item>& from = buckets_[b];
      std::uint64_t least = from.front().key;
      for (const Item& item : from) least = std::min(least, item.key);
      last_ = least;
      for (const Item& item : from) buckets_[bucket(item.key)].push_back(item);
      from.clear();
    }
    const Item item = buckets_[0].back();
    buckets_[0].pop_back();
    --size_;
    return {item.key, item.value};
  }
  // Empties the queue for a new search from key 0, keeping its storage.
  void clear() {
    for (std::vector<Item>& b : buckets_) b.clear();
    size_ = 0;
    last_ = 0;
  }

 private:
  struct Item {
    std::uint64_t key;
    Value value;
  };
  std::size_t bucket(std::uint64_t key) const {
    return static_cast<std::size_t>(std::bit_width(key ^ last_));
  }
  std::array<std::vector<Item>, 65> buckets_;
  std::size_t size_ = 0;
  std::uint64_t last_ = 0;
};

}  // namespace collsim::topo::detail
