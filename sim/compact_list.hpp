#pragma once
// The part of std::vector the flow model's hot records use, smaller: 16 bytes of header instead
// of 24, and optionally the first `Inline` elements inside the record itself, so that reaching
// them costs no cache miss beyond the record's own. For trivially copyable elements only.
#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace collsim::sim {

template <typename T, std::uint32_t Inline>
class CompactList {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  CompactList() = default;
  CompactList(const CompactList& o) { *this = o; }
  CompactList& operator=(const CompactList& o) {
    if (this == &o) return *this;
    size_ = 0;
    for (const T& x : o) push_back(x);
    return *this;
  }
  ~CompactList() { delete[] heap_; }

  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T* data() {
    if constexpr (Inline == 0)
      return heap_;
    else
      return heap_ != nullptr ? heap_ : inline_.items;
  }
  const T* data() const {
    if constexpr (Inline == 0)
      return heap_;
    else
      return heap_ != nullptr ? heap_ : inline_.items;
  }
  std::uint32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // The elements live outside the record (always so without inline room, once there are any).
  bool spilled() const { return heap_ != nullptr; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  void pop_back() { --size_; }
  // Keeps the storage: a reused record allocates nothing once warm.
  void clear() { size_ = 0; }
  void push_back(const T& x) {
    if (size_ == capacity_) grow();
    data()[size_++] = x;
  }

 private:
  void grow() {
    const std::uint32_t capacity = capacity_ == 0 ? 2 : 2 * capacity_;
    T* heap = new T[capacity];
    std::copy(begin(), end(), heap);
    delete[] heap_;
    heap_ = heap;
    capacity_ = capacity;
  }
  struct Empty {};
  struct Items {
    T items[Inline == 0 ? 1 : Inline];
  };

  T* heap_ = nullptr;
  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = Inline;
  [[no_unique_address]] std::conditional_t<Inline == 0, Empty, Items> inline_;
};

}  // namespace collsim::sim
