// keep_freed_memory(): blocks a simulation allocates and frees stay in the process for the next.
#include "topology/freed_memory.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace {
void* volatile kept;  // so that the allocation is not optimised away
}  // namespace

TEST_CASE("freed blocks under 32 MiB stay with the process for the next run", "[memory]") {
#if defined(__GLIBC__)
  collsim::keep_freed_memory();
  // 4 MiB: glibc's default would map it on its own (over 128 KiB) and unmap it when freed.
  constexpr std::size_t kBlock = std::size_t{4} << 20;
  const std::size_t mapped_before = mallinfo2().hblkhd;
  kept = std::malloc(kBlock);
  REQUIRE(kept != nullptr);
  std::memset(kept, 1, kBlock);                // touched, as a plan's arrays are
  CHECK(mallinfo2().hblkhd == mapped_before);  // from the heap, not a mapping of its own
  const std::size_t heap = mallinfo2().arena;
  std::free(kept);
  CHECK(mallinfo2().arena == heap);  // and the heap keeps it once freed
#else
  SUCCEED("not glibc: the allocator keeps its own policy");
#endif
}
