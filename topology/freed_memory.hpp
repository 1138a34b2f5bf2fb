#pragma once
// How the process's allocator treats memory it frees: a process that runs many simulations one
// after the other (a sweep, a benchmark) should keep what one of them freed for the next.

namespace collsim {

// With glibc's defaults a block of 128 KiB or more gets a mapping of its own, and the top of
// the heap goes back to the kernel once 128 KiB of it is free: each simulation of an 8-GPU
// sweep then faulted its plan and engine arrays in afresh, and the first of an algorithm could
// take twice as long as the next (docs/performance-history.md, change 69). After this call,
// blocks under 32 MiB come from the heap and up to 256 MiB of it stays with the process. Does
// nothing where the C library is not glibc. Call it first thing in main(), before any thread.
void keep_freed_memory();

}  // namespace collsim
