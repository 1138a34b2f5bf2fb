// Built instead of the NCCL timing when collsim is configured without CUDA or without NCCL.
#include "cuda_backend/nccl_reference.hpp"

namespace collsim::backend {

NcclMeasurement time_nccl_allreduce(const std::vector<Bytes>&, std::uint32_t, std::uint32_t) {
  NcclMeasurement m;
  m.why_not =
      "this collsim was built without NCCL (it needs the CUDA toolkit's nccl.h and libnccl at "
      "configure time, and -DCOLLSIM_NCCL not OFF)";
  return m;
}

}  // namespace collsim::backend
