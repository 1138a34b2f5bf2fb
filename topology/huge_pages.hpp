#pragma once
// Large arrays on their own 2 MiB-aligned mappings, on 2 MiB pages where asked for.
//
// The simulator's hot loop reads a few words from each of many records spread over tens to
// hundreds of MiB (the engine's op records, the flow model's flows and resources). With 4 KiB
// pages nearly every such read also misses the TLB, so these arrays can ask Linux for
// transparent huge pages (`MADV_HUGEPAGE`, which matters where the kernel's setting is
// `madvise`, as on most hosts). What is asked is a choice (Advice), because a huge page's first
// touch is not free: on virtual machines that hand freed memory back to their host (free page
// reporting) it costs far more than 512 small ones, and a run that fills gigabytes once (a whole
// plan of 42 M ops) spent more time in the kernel than simulating. So arrays say how they are
// used: hot arrays are read on every event and stay bounded (rings reused as a run goes on),
// cold ones are written once and read a few times per op (the plan's columns), which a whole
// plan makes the bulk of its memory (docs/performance-history.md, changes 46 and 48). Either
// way the mappings are aligned, so that huge pages fit when asked for or when the kernel gives
// them to everything, and a growing array moves its pages instead of copying them. Small arrays
// stay on the ordinary heap: rounding them up to 2 MiB would waste memory.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace collsim {

namespace huge_pages {
// Arrays of at least this many bytes are placed on their own huge-page-aligned mapping.
inline constexpr std::size_t kThreshold = std::size_t{4} << 20;
// How often an array's records are read. Hot: on every event that touches them (the engine's op
// records, the flow model's flows and resources). Cold: a few times per op (the plan's columns,
// read when the engine registers an op).
enum class Use : bool { cold, hot };
// Which mappings made from now on are advised MADV_HUGEPAGE. Programs set it once, before
// their large allocations (collsim --huge-pages, COLLSIM_HUGE_PAGES).
enum class Advice : std::uint8_t { off, hot, all };
void set_advice(Advice a) noexcept;
Advice advice() noexcept;
// `align` is the element type's alignment; huge-page mappings satisfy any.
void* allocate(std::size_t bytes, std::size_t align, Use use);
void deallocate(void* p, std::size_t bytes, std::size_t align) noexcept;
// Grows an allocation of `old_bytes` (from allocate()) to `new_bytes`, keeping its contents:
// the new block's first `old_bytes` are the old block's (its first `new_bytes`, were it to
// shrink). A mapping's pages move into the new
// one instead of being copied, so the old window is neither copied nor touched afresh.
void* extend(void* p, std::size_t old_bytes, std::size_t new_bytes, std::size_t align, Use use);
}  // namespace huge_pages

template <typename T, huge_pages::Use kUse>
struct HugePageAllocator {
  using value_type = T;
  // Spelled out: allocator_traits rebinds only allocators whose other parameters are types.
  template <typename U>
  struct rebind {  // NOLINT(readability-identifier-naming): the standard's name
    using other = HugePageAllocator<U, kUse>;
  };
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U, kUse>&) noexcept {}
  T* allocate(std::size_t n) {
    return static_cast<T*>(huge_pages::allocate(n * sizeof(T), alignof(T), kUse));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    huge_pages::deallocate(p, n * sizeof(T), alignof(T));
  }
  template <typename U>
  bool operator==(const HugePageAllocator<U, kUse>&) const noexcept {
    return true;
  }
};

// A std::vector whose storage, once large, has a mapping of its own that huge pages fit.
template <typename T, huge_pages::Use kUse>
using HugeVector = std::vector<T, HugePageAllocator<T, kUse>>;

}  // namespace collsim
