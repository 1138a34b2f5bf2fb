#pragma once
// Records for a window of consecutive ids that grows at the top and is released from the
// bottom, as a streamed run's op records are.
//
// Records live in chunks of 2^17. A chunk wholly below the window goes to a free list and takes
// later ids, so a run touches new memory only while its window grows, and no record ever moves.
// (On the virtual machines this is measured on, touching a page for the first time costs far
// more than the zeroing it implies: a vector that doubles and moves its window down touched
// three times the window's memory.) The first chunk grows by doubling until it is full, so a
// small plan stays small; full chunks are large enough for huge pages.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

#include "topology/huge_pages.hpp"

namespace collsim::sim {

template <typename T>
class RecordWindow {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

 public:
  static constexpr unsigned kShift = 17;
  static constexpr std::uint64_t kChunk = std::uint64_t{1} << kShift;

  RecordWindow() = default;
  RecordWindow(const RecordWindow&) = delete;
  RecordWindow& operator=(const RecordWindow&) = delete;
  ~RecordWindow() {
    for (T* chunk : free_) huge_pages::deallocate(chunk, kChunk * sizeof(T), alignof(T));
    for (std::size_t c = 0; c < table_.size(); ++c)
      if (table_[c] != nullptr)
        huge_pages::deallocate(table_[c], capacity(c) * sizeof(T), alignof(T));
  }

  // The record of `id`, which must be in the window and constructed.
  T& operator[](std::uint32_t id) { return table_[id >> kShift][id & (kChunk - 1)]; }
  const T& operator[](std::uint32_t id) const { return table_[id >> kShift][id & (kChunk - 1)]; }

  // Makes room for ids below `end`; ids only grow.
  void reserve(std::uint64_t end) {
    const std::size_t chunks = static_cast<std::size_t>((end + kChunk - 1) >> kShift);
    if (chunks > table_.size()) table_.resize(chunks, nullptr);
    // Released chunks are never reserved again: start past them.
    for (std::size_t c = released_; c < chunks; ++c) {
      if (c == 0) {
        grow_first(end);  // grows only when short
      } else if (table_[c] != nullptr) {
        continue;
      } else if (!free_.empty()) {
        table_[c] = free_.back();
        free_.pop_back();
      } else {
        table_[c] = allocate(kChunk);
      }
    }
  }

  // Constructs the record of `id` (room for it reserved) and returns it.
  T& emplace(std::uint32_t id) { return *::new (&(*this)[id]) T{}; }

  // Gives back every chunk wholly below `id`: no record below it is read again.
  void release_below(std::uint64_t id) {
    const std::size_t below = static_cast<std::size_t>(id >> kShift);
    for (; released_ < below && released_ < table_.size(); ++released_) {
      T*& chunk = table_[released_];
      if (chunk == nullptr) continue;
      if (capacity(released_) == kChunk)
        free_.push_back(chunk);
      else
        huge_pages::deallocate(chunk, capacity(released_) * sizeof(T), alignof(T));
      chunk = nullptr;
    }
  }

  // Chunks allocated so far, in use or free: what the window has cost in memory.
  std::size_t chunks_allocated() const { return allocated_; }

 private:
  std::uint64_t capacity(std::size_t chunk) const { return chunk == 0 ? first_capacity_ : kChunk; }

  T* allocate(std::uint64_t n) {
    ++allocated_;
    return static_cast<T*>(huge_pages::allocate(n * sizeof(T), alignof(T)));
  }

  void grow_first(std::uint64_t end) {
    const std::uint64_t need = std::min(end, kChunk);
    std::uint64_t cap = std::max<std::uint64_t>(first_capacity_, 256);
    while (cap < need) cap *= 2;
    cap = std::min(cap, kChunk);
    if (cap == first_capacity_ && table_[0] != nullptr) return;
    T* grown = allocate(cap);
    if (table_[0] != nullptr) {
      std::memcpy(static_cast<void*>(grown), table_[0], first_capacity_ * sizeof(T));
      huge_pages::deallocate(table_[0], first_capacity_ * sizeof(T), alignof(T));
      --allocated_;
    }
    table_[0] = grown;
    first_capacity_ = cap;
  }

  std::vector<T*> table_;     // by chunk (id >> kShift); null when released or not yet reserved
  std::vector<T*> free_;      // released full chunks
  std::size_t released_ = 0;  // chunks [0, released_) are given back
  std::uint64_t first_capacity_ = 0;
  std::size_t allocated_ = 0;
};

}  // namespace collsim::sim
