#pragma once
// Kernel launchers. This header is shared by the C++20 executor and the C++17 .cu file, so it
// uses nothing newer than C++17 and passes the dtype as its numeric value (sched::DType).
#include <cuda_runtime_api.h>

#include <cstddef>

namespace collsim::backend::cuda {

// dst[i] = a[i] + b[i] for `count` elements; dtype 0 = fp32, 1 = fp16, 2 = bf16. fp16 and bf16
// are widened to fp32, added and rounded to nearest-even, as the host executor does.
cudaError_t launch_reduce(int dtype, void* dst, const void* a, const void* b, std::size_t count,
                          cudaStream_t stream);

// A one-thread kernel that holds its stream for `seconds` of the GPU's global timer: compute and
// delay ops, synthetic link time, and the start gate of a timed run.
cudaError_t launch_delay(double seconds, cudaStream_t stream);

}  // namespace collsim::backend::cuda
