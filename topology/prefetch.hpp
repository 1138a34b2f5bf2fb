#pragma once
// A hint that the cache line holding *p is about to be read.
//
// GCC's interprocedural analysis counts __builtin_prefetch as no effect at all, so a function made
// only of prefetches is "pure" and a call to it disappears. The empty asm, which the compiler must
// assume reads p, keeps the hint where it was written.
namespace collsim {

inline void prefetch(const void* p) {
  __builtin_prefetch(p);
  asm volatile("" : : "r"(p));
}

}  // namespace collsim
