#include "cuda_backend/nccl_reference.hpp"

#include <catch2/catch.hpp>
#include <sstream>

#include "schedules/generate.hpp"
#include "sim/engine.hpp"
#include "topology/error.hpp"
#include "topology/loader.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::backend;

TEST_CASE("NCCL ground truth is refused with its reason on a machine without it",
          "[backend][nccl]") {
  // CI machines have no GPU, and builds without CUDA have no NCCL: either way the measurement
  // says which is missing instead of failing or inventing numbers.
  const auto m = time_nccl_allreduce({Bytes{1} << 20}, 0, 1);
  REQUIRE_FALSE(m.available);
  CHECK(m.timings.empty());
  const bool names_cause = m.why_not.find("GPUs") != std::string::npos ||
                           m.why_not.find("without NCCL") != std::string::npos;
  CHECK(names_cause);
}

TEST_CASE("NCCL rows carry the simulator's fastest ring or tree for the same GPUs",
          "[backend][nccl]") {
  const auto topology =
      topo::load_topology(std::string(COLLSIM_SOURCE_DIR) + "/configs/dgx-h100.json");
  NcclMeasurement m;
  m.available = true;
  m.gpus = 4;
  m.timings = {{Bytes{1} << 20, 50e-6}, {Bytes{64} << 20, 400e-6}};
  const auto rows = compare_with_nccl(topology, m, "dgx-h100.json");
  REQUIRE(rows.size() == 2);

  const topo::Router router(topology, topo::RoutingOptions{.ecmp = true});
  const std::vector<topo::NodeId> ranks(topology.gpus().begin(), topology.gpus().begin() + 4);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const NcclRow& r = rows[i];
    CHECK(r.size == m.timings[i].size);
    CHECK(r.measured == m.timings[i].seconds);
    // The row's choice, simulated again, gives its prediction, and no ring or tree k beats it.
    sched::PlanRequest req;
    req.algorithm = *sched::parse_algorithm(r.algorithm);
    req.size = r.size;
    req.chunks = r.chunks;
    req.ranks = ranks;
    CHECK(sim::simulate(router, sched::generate(router, req)).time == r.predicted);
    for (auto a : {sched::Algorithm::ring, sched::Algorithm::tree})
      for (std::uint32_t k = 1; k <= 64; k *= 2) {
        req.algorithm = a;
        req.chunks = k;
        CHECK(sim::simulate(router, sched::generate(router, req)).time >= r.predicted);
      }
    CHECK(r.error == Approx((r.predicted - r.measured) / r.measured));
  }
  std::ostringstream csv;
  write_nccl_csv(rows, csv);
  CHECK(csv.str().rfind("size,nccl_measured_s,predicted_s,predicted_algorithm", 0) == 0);

  m.gpus = 9;  // more GPUs than the DGX file describes
  CHECK_THROWS_AS(compare_with_nccl(topology, m, "dgx-h100.json"), InputError);
}
