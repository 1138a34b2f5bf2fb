#include "topology/freed_memory.hpp"

#include <cstdlib>  // defines __GLIBC__ where the C library is glibc
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace collsim {

void keep_freed_memory() {
#if defined(__GLIBC__)
  // Set, they stay put: by default glibc raises both each time a mapped block is freed.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

}  // namespace collsim
