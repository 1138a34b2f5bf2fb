#pragma once
// One column of the plan, or the engine's op records: values for a window of consecutive
// indices [front(), end()) that grows at the end and is dropped from the front, as a streamed
// run's plan is.
//
// The values sit in a ring of 2^n slots, index i in slot i & (2^n - 1), so dropping the front
// moves nothing and the ring only grows while the window does. (A vector erased at the front
// copied the whole kept window at every drop, and a window that must stay under half its
// capacity between drops needs twice the memory, all of it touched for the first time once:
// on the virtual machines this is measured on, first touches cost more than the copies.)
// Large rings sit on huge pages (topology/huge_pages.hpp).
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "topology/huge_pages.hpp"

namespace collsim::sched {

template <typename T, huge_pages::Use kUse = huge_pages::Use::cold>
class RingColumn {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

 public:
  RingColumn() = default;
  RingColumn(const RingColumn& o) : front_(o.front_), end_(o.end_) {
    if (o.capacity_ == 0) return;
    data_ = allocate(o.capacity_);
    capacity_ = o.capacity_;
    mask_ = o.mask_;
    copy_window(o.data_, o.capacity_, data_, capacity_);
  }
  RingColumn(RingColumn&& o) noexcept { swap(o); }
  RingColumn& operator=(RingColumn o) noexcept {
    swap(o);
    return *this;
  }
  ~RingColumn() {
    if (data_ != nullptr) huge_pages::deallocate(data_, capacity_ * sizeof(T), alignof(T));
  }

  // Index i must be in [front(), end()).
  T& operator[](std::uint64_t i) { return data_[i & mask_]; }
  const T& operator[](std::uint64_t i) const { return data_[i & mask_]; }

  std::uint64_t front() const { return front_; }
  std::uint64_t end() const { return end_; }
  std::uint64_t size() const { return end_ - front_; }

  void push_back(const T& v) { *append() = v; }
  // Appends a value-initialised value and returns it.
  T& emplace_back() { return *append() = T{}; }

  // Room for a window of `n` values without growing.
  void reserve(std::uint64_t n) {
    if (n > capacity_) grow(std::bit_ceil(n));
  }

  // Forgets the values below index `i`, which must be in [front(), end()].
  void drop_before(std::uint64_t i) { front_ = i; }

 private:
  // The slot of a new last index.
  T* append() {
    if (size() == capacity_) grow(capacity_ == 0 ? 16 : 2 * capacity_);
    return &data_[end_++ & mask_];
  }

  static T* allocate(std::uint64_t n) {
    return static_cast<T*>(huge_pages::allocate(n * sizeof(T), alignof(T), kUse));
  }

  // Copies the window from one ring to another, in runs contiguous in both; only the window,
  // so that a copy touches no more memory than the values it holds.
  void copy_window(const T* from, std::uint64_t from_capacity, T* to,
                   std::uint64_t to_capacity) const {
    for (std::uint64_t i = front_; i < end_;) {
      const std::uint64_t a = i & (from_capacity - 1), b = i & (to_capacity - 1);
      const std::uint64_t n = std::min({end_ - i, from_capacity - a, to_capacity - b});
      std::memcpy(static_cast<void*>(to + b), from + a, n * sizeof(T));
      i += n;
    }
  }

  // `capacity` is a power of two larger than the window. The old ring becomes the new one's
  // first part (by moving its pages, where it is a mapping of its own), and a value moves only
  // where its index has bits set between the old capacity and the new: by those bits, which are
  // the same across each aligned block of the old capacity, so the window moves in at most two
  // runs. Copying the whole window into fresh memory instead touched about twice the final
  // ring's pages over a run's doublings.
  void grow(std::uint64_t capacity) {
    if (capacity_ == 0) {
      data_ = allocate(capacity);
      capacity_ = capacity;
      mask_ = capacity - 1;
      return;
    }
    const std::uint64_t old = capacity_;
    data_ = static_cast<T*>(
        huge_pages::extend(data_, old * sizeof(T), capacity * sizeof(T), alignof(T), kUse));
    capacity_ = capacity;
    mask_ = capacity - 1;
    for (std::uint64_t i = front_; i < end_;) {
      const std::uint64_t run_end = std::min(end_, (i | (old - 1)) + 1);
      const std::uint64_t slot = i & (old - 1);
      if (const std::uint64_t up = i & (capacity - 1) & ~(old - 1); up != 0)
        std::memcpy(static_cast<void*>(data_ + slot + up), data_ + slot, (run_end - i) * sizeof(T));
      i = run_end;
    }
  }

  void swap(RingColumn& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(capacity_, o.capacity_);
    std::swap(mask_, o.mask_);
    std::swap(front_, o.front_);
    std::swap(end_, o.end_);
  }

  T* data_ = nullptr;
  std::uint64_t capacity_ = 0;  // 0 or a power of two
  // capacity_ - 1, kept rather than computed at every index: the engine indexes its records
  // several times an event.
  std::uint64_t mask_ = 0;
  std::uint64_t front_ = 0;
  std::uint64_t end_ = 0;
};

}  // namespace collsim::sched
