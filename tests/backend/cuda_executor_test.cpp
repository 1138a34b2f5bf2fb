// The CUDA executor where a device exists; elsewhere, the message that sends users to the host
// backend. Either way the test asserts something, so it runs in CI and on GPU machines alike.
#include "cuda_backend/cuda_executor.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>

#include "cuda_backend/calibration.hpp"
#include "cuda_guard.hpp"
#include "hand_plans.hpp"
#include "topology/error.hpp"

using namespace collsim;
using namespace collsim::backend;

TEST_CASE("cuda executor: refuses clearly without a device", "[backend][cuda]") {
  if (cuda_available()) {
    SUCCEED("a CUDA device is present; the tests below exercise it");
    return;
  }
  CHECK_THROWS_WITH(make_cuda_executor(), Catch::Contains("--backend host"));
  CHECK_THROWS_AS(make_executor("cuda"), InputError);
}

TEST_CASE("cuda executor: hand-written ring allreduce is exact on the device",
          "[backend][cuda][gpu]") {
  if (test::skip_without_cuda()) return;
  auto executor = make_cuda_executor();
  CHECK(executor->device().backend == "cuda");
  CHECK_FALSE(executor->device().name.empty());
  // The executor asks for the most hardware queues before the first CUDA call (or keeps the
  // user's CUDA_DEVICE_MAX_CONNECTIONS).
  const char* queues = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  REQUIRE(queues);
  CHECK(executor->device().hardware_queues == static_cast<std::uint32_t>(std::atoi(queues)));
  for (auto dtype : {sched::DType::fp32, sched::DType::fp16, sched::DType::bf16}) {
    for (std::uint32_t chunks : {1u, 4u}) {
      test::RingOptions o;
      o.ranks = 4;
      o.chunks = chunks;
      o.dtype = dtype;
      o.size = 1 << 20;
      RunOptions ro;
      ro.repetitions = 2;
      ro.links = uniform_links(4, SyntheticLink{2e-6, 25e9});
      const auto result = executor->run(test::ring_allreduce(o), ro);
      INFO(sched::to_string(dtype) << " k=" << chunks);
      CHECK(result.wrong_elements == 0);
      // 4 ranks x 1 MiB / element size.
      CHECK(result.checked_elements == 4 * ((1u << 20) / sched::dtype_size(dtype)));
      CHECK(result.seconds.size() == 2);
    }
  }
  // The broken plan fails the check on the device as on the host (see host_executor_test.cpp:
  // 2 ranks x 512 elements of the untouched segment).
  test::RingOptions broken;
  broken.ranks = 2;
  broken.size = 4096;
  broken.allgather_phase = false;
  CHECK(executor->run(test::ring_allreduce(broken), RunOptions{}).wrong_elements == 1024);
}

TEST_CASE("cuda executor: calibration micro-plans run on the device", "[backend][cuda][gpu]") {
  if (test::skip_without_cuda()) return;
  auto executor = make_cuda_executor();
  CalibrationOptions o;
  o.sizes = {4096, 1 << 20};
  o.repetitions = 2;
  o.warmup = 1;
  const auto c = run_calibration(*executor, o);
  CHECK(c.backend == "cuda");
  CHECK(c.fits.size() == 13);
  for (const auto& p : c.points) CHECK(p.seconds > 0);
}
