#pragma once
// Large arrays on 2 MiB pages.
//
// The simulator's hot loop reads a few words from each of many records spread over tens to
// hundreds of MiB (the plan's op columns, the engine's op records, the flow model's resources).
// With 4 KiB pages nearly every such read also misses the TLB; on Linux, where transparent huge
// pages are usually enabled only for memory that asks for them (`madvise` mode), asking for them
// made the 4096-GPU ring 14 % faster. Small arrays stay on the ordinary heap: rounding them up
// to 2 MiB would waste memory.
#include <cstddef>
#include <vector>

namespace collsim {

namespace huge_pages {
// Arrays of at least this many bytes are placed on their own huge-page-aligned mapping.
inline constexpr std::size_t kThreshold = std::size_t{4} << 20;
// `align` is the element type's alignment; huge-page mappings satisfy any.
void* allocate(std::size_t bytes, std::size_t align);
void deallocate(void* p, std::size_t bytes, std::size_t align) noexcept;
// Grows an allocation of `old_bytes` (from allocate()) to `new_bytes`, keeping its contents:
// the new block's first `old_bytes` are the old block's (its first `new_bytes`, were it to
// shrink). A mapping's pages move into the new
// one instead of being copied, so the old window is neither copied nor touched afresh.
void* extend(void* p, std::size_t old_bytes, std::size_t new_bytes, std::size_t align);
}  // namespace huge_pages

template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    return static_cast<T*>(huge_pages::allocate(n * sizeof(T), alignof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    huge_pages::deallocate(p, n * sizeof(T), alignof(T));
  }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }
};

// A std::vector whose storage, once large, sits on huge pages.
template <typename T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace collsim
