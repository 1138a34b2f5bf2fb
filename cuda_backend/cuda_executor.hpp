#pragma once
// The CUDA executor (sources in cuda_backend/cuda/, compiled only when COLLSIM_HAVE_CUDA is on).
//
// Virtual ranks own device buffers: rank r lives on device r % devices, so one GPU hosts every
// rank and several GPUs spread them (copies between devices go peer to peer when the devices
// allow it, through the host otherwise). Each plan stream that holds ops is a cudaStream_t (ids
// are sparse, and each stream takes a turn on the device's 32 hardware queues), each dependency a
// cudaEvent; send/recv and copies are cudaMemcpyAsync; host buffers are pinned; reduce is a kernel
// per dtype; a delay kernel spins for compute/delay ops and for synthetic link time.
#include <memory>

#include "cuda_backend/executor.hpp"

namespace collsim::backend {

// True when collsim was built with CUDA and at least one device answers. This and
// make_cuda_executor() set CUDA_DEVICE_MAX_CONNECTIONS=32 in the environment, unless it is set,
// before the process's first CUDA call: the driver reads it once, when the context is created.
bool cuda_available();

// Throws InputError "no CUDA device found; use --backend host" when there is no device, and a
// similar message when collsim was built without CUDA.
std::unique_ptr<Executor> make_cuda_executor();

}  // namespace collsim::backend
