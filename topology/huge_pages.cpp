#include "topology/huge_pages.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace collsim::huge_pages {

namespace {
constexpr std::size_t kHugePage = std::size_t{2} << 20;
std::atomic<Advice> advice_now{Advice::off};

std::size_t rounded(std::size_t bytes) {
  return (bytes + kHugePage - 1) & ~(kHugePage - 1);
}

void* heap_allocate(std::size_t bytes, std::size_t align) {
  if (align > __STDCPP_DEFAULT_NEW_ALIGNMENT__)
    return ::operator new (bytes, std::align_val_t{align});
  return ::operator new(bytes);
}

void heap_deallocate(void* p, std::size_t align) noexcept {
  if (align > __STDCPP_DEFAULT_NEW_ALIGNMENT__)
    ::operator delete (p, std::align_val_t{align});
  else
    ::operator delete(p);
}

void* copied(void* p, std::size_t old_bytes, std::size_t new_bytes, std::size_t align, Use use) {
  void* grown = allocate(new_bytes, align, use);
  if (p != nullptr) {
    std::memcpy(grown, p, old_bytes < new_bytes ? old_bytes : new_bytes);
    deallocate(p, old_bytes, align);
  }
  return grown;
}
}  // namespace

void set_advice(Advice a) noexcept {
  advice_now.store(a, std::memory_order_relaxed);
}

Advice advice() noexcept {
  return advice_now.load(std::memory_order_relaxed);
}

#if defined(__linux__) && defined(MADV_HUGEPAGE)

void* allocate(std::size_t bytes, std::size_t align, Use use) {
  if (bytes < kThreshold) return heap_allocate(bytes, align);
  if (bytes > SIZE_MAX - 2 * kHugePage) throw std::bad_alloc();
  // Map a huge page more than needed, then unmap the ends so that what stays is aligned.
  const std::size_t size = rounded(bytes);
  void* raw =
      mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  // Offsets from the mapping rather than addresses made from integers, which hide from the
  // optimiser what the pointers point into.
  char* const base = static_cast<char*>(raw);
  const std::size_t lead =
      (kHugePage - reinterpret_cast<std::uintptr_t>(raw) % kHugePage) % kHugePage;
  char* const aligned = base + lead;
  if (lead > 0) munmap(base, lead);
  munmap(aligned + size, kHugePage - lead);  // the rest of the extra huge page, never empty
  // Advice only: where the kernel has huge pages off, the memory is ordinary pages.
  if (const Advice a = advice(); a == Advice::all || (a == Advice::hot && use == Use::hot))
    madvise(aligned, size, MADV_HUGEPAGE);
  return aligned;
}

void deallocate(void* p, std::size_t bytes, std::size_t align) noexcept {
  if (bytes < kThreshold) {
    heap_deallocate(p, align);
    return;
  }
  munmap(p, rounded(bytes));
}

void* extend(void* p, std::size_t old_bytes, std::size_t new_bytes, std::size_t align, Use use) {
  if (p == nullptr || old_bytes < kThreshold || new_bytes < old_bytes)
    return copied(p, old_bytes, new_bytes, align, use);
  void* grown = allocate(new_bytes, align, use);
  // Both ends are huge-page aligned, so the kernel moves whole huge pages by their page tables.
  // The old pages replace the new mapping's first, never touched.
  if (mremap(p, rounded(old_bytes), rounded(old_bytes), MREMAP_MAYMOVE | MREMAP_FIXED, grown) ==
      MAP_FAILED) {
    std::memcpy(grown, p, old_bytes);
    deallocate(p, old_bytes, align);
  }
  return grown;
}

#else

void* allocate(std::size_t bytes, std::size_t align, Use) {
  return heap_allocate(bytes, align);
}

void deallocate(void* p, std::size_t, std::size_t align) noexcept {
  heap_deallocate(p, align);
}

void* extend(void* p, std::size_t old_bytes, std::size_t new_bytes, std::size_t align, Use use) {
  return copied(p, old_bytes, new_bytes, align, use);
}

#endif

}  // namespace collsim::huge_pages
