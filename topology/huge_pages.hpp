#pragma once
// Large arrays on their own 2 MiB-aligned mappings, on 2 MiB pages where asked for.
//
// The simulator's hot loop reads a few words from each of many records spread over tens to
// hundreds of MiB (the plan's op columns, the engine's op records, the flow model's resources).
// With 4 KiB pages nearly every such read also misses the TLB, so these arrays can ask Linux for
// transparent huge pages (`MADV_HUGEPAGE`, which matters where the kernel's setting is
// `madvise`, as on most hosts). They do not by default: on virtual machines that hand freed
// memory back to their host (free page reporting), a huge page's first touch costs far more than
// 512 small ones, and a run that fills gigabytes (a whole plan of 42 M ops) spent more time in
// the kernel than simulating; where memory is reused, as in a streamed run, no gain showed
// beyond the noise (docs/performance-history.md, change 46). Either way the mappings are
// aligned, so that huge pages fit when asked for or when the kernel gives them to everything,
// and a growing array moves its pages instead of copying them. Small arrays stay on the
// ordinary heap: rounding them up to 2 MiB would waste memory.
#include <cstddef>
#include <vector>

namespace collsim {

namespace huge_pages {
// Arrays of at least this many bytes are placed on their own huge-page-aligned mapping.
inline constexpr std::size_t kThreshold = std::size_t{4} << 20;
// Whether mappings made from now on are advised MADV_HUGEPAGE; false unless set. Programs set it
// once, before their large allocations (collsim --huge-pages, COLLSIM_HUGE_PAGES=1).
void set_advised(bool on) noexcept;
bool advised() noexcept;
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
