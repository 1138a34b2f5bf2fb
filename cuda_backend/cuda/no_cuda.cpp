// Built instead of the CUDA executor when collsim is configured without CUDA.
#include "cuda_backend/cuda_executor.hpp"
#include "topology/error.hpp"

namespace collsim::backend {

bool cuda_available() {
  return false;
}

std::unique_ptr<Executor> make_cuda_executor() {
  throw InputError("", "--backend",
                   "this collsim was built without CUDA, so --backend cuda is not available; use "
                   "--backend host, or rebuild with the CUDA toolkit and -DCOLLSIM_CUDA=ON");
}

}  // namespace collsim::backend
