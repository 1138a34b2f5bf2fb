// ncclAllReduce on every visible device, timed from launch to the last stream's completion.
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>

#include "cuda_backend/nccl_reference.hpp"
#include "topology/error.hpp"

namespace collsim::backend {

namespace {

void check(cudaError_t status, const char* call, const std::string& context) {
  if (status != cudaSuccess)
    throw InternalError(
        fmt::format("CUDA call {} failed while {}: {}", call, context, cudaGetErrorString(status)));
}

void check(ncclResult_t status, const char* call, const std::string& context) {
  if (status != ncclSuccess)
    throw InternalError(
        fmt::format("NCCL call {} failed while {}: {}", call, context, ncclGetErrorString(status)));
}

// Everything NCCL needs per device, released in the destructor even when a call throws.
struct Devices {
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<float*> buffers;
  ~Devices() {
    for (std::size_t d = 0; d < buffers.size(); ++d) {
      cudaSetDevice(static_cast<int>(d));
      if (buffers[d] != nullptr) cudaFree(buffers[d]);
      if (d < streams.size() && streams[d] != nullptr) cudaStreamDestroy(streams[d]);
    }
    for (ncclComm_t c : comms)
      if (c != nullptr) ncclCommDestroy(c);
  }
};

}  // namespace

NcclMeasurement time_nccl_allreduce(const std::vector<Bytes>& sizes, std::uint32_t warmup,
                                    std::uint32_t repetitions) {
  NcclMeasurement m;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 2) {
    m.why_not = fmt::format("NCCL ground truth needs two or more GPUs; this machine shows {}",
                            std::max(count, 0));
    return m;
  }
  int version = 0;
  check(ncclGetVersion(&version), "ncclGetVersion", "reading the NCCL version");
  m.version = fmt::format("{}.{}.{}", version / 10000, version / 100 % 100, version % 100);
  m.gpus = count;
  const Bytes largest = sizes.empty() ? 0 : *std::max_element(sizes.begin(), sizes.end());

  Devices dev;
  dev.comms.assign(count, nullptr);
  dev.streams.assign(count, nullptr);
  dev.buffers.assign(count, nullptr);
  check(ncclCommInitAll(dev.comms.data(), count, nullptr), "ncclCommInitAll",
        fmt::format("creating communicators on {} devices", count));
  for (int d = 0; d < count; ++d) {
    const std::string ctx = fmt::format("setting up device {}", d);
    check(cudaSetDevice(d), "cudaSetDevice", ctx);
    check(cudaStreamCreateWithFlags(&dev.streams[d], cudaStreamNonBlocking), "cudaStreamCreate",
          ctx);
    check(cudaMalloc(reinterpret_cast<void**>(&dev.buffers[d]), std::max<Bytes>(largest, 4)),
          "cudaMalloc", ctx);
    check(cudaMemset(dev.buffers[d], 0, std::max<Bytes>(largest, 4)), "cudaMemset", ctx);
  }
  for (Bytes size : sizes) {
    const std::size_t elements = size / sizeof(float);
    std::vector<double> seconds;
    for (std::uint32_t rep = 0; rep < warmup + repetitions; ++rep) {
      const std::string ctx = fmt::format("ncclAllReduce of {} bytes", size);
      const auto t0 = std::chrono::steady_clock::now();
      check(ncclGroupStart(), "ncclGroupStart", ctx);
      for (int d = 0; d < count; ++d)
        check(ncclAllReduce(dev.buffers[d], dev.buffers[d], elements, ncclFloat, ncclSum,
                            dev.comms[d], dev.streams[d]),
              "ncclAllReduce", ctx);
      check(ncclGroupEnd(), "ncclGroupEnd", ctx);
      for (int d = 0; d < count; ++d) {
        check(cudaSetDevice(d), "cudaSetDevice", ctx);
        check(cudaStreamSynchronize(dev.streams[d]), "cudaStreamSynchronize", ctx);
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (rep >= warmup) seconds.push_back(s);
    }
    std::sort(seconds.begin(), seconds.end());
    m.timings.push_back(NcclTiming{size, seconds.empty() ? 0.0 : seconds[seconds.size() / 2]});
  }
  m.available = true;
  return m;
}

}  // namespace collsim::backend
