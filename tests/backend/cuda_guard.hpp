#pragma once
// The [gpu] test cases run where a CUDA device answers and skip elsewhere, visibly: a warning in
// the report and an assertion that there is indeed no device, so that the case is never empty.
#include <catch2/catch.hpp>

#include "cuda_backend/cuda_executor.hpp"

namespace collsim::test {

// True when the calling test case should return at once.
inline bool skip_without_cuda() {
  if (backend::cuda_available()) return false;
  WARN("no CUDA device: skipped");
  CHECK_FALSE(backend::cuda_available());
  return true;
}

}  // namespace collsim::test
