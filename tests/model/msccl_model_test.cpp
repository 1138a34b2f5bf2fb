// An imported MSCCL-style ring allreduce takes exactly as long as the built-in ring (k = 1) on
// the same topology: both are the same schedule, 2 (p - 1) (T + ...) as derived in
// docs/algorithms.md, so any difference is an import bug.
#include <catch2/catch.hpp>

#include "schedules/closed_form.hpp"
#include "schedules/generate.hpp"
#include "schedules/msccl_import.hpp"
#include "sim/engine.hpp"
#include "tests/schedules/fixtures.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::sched;

TEST_CASE("imported MSCCL ring matches the built-in ring", "[model][msccl]") {
  const UniformCosts c{2e-6, 1e-6, 20e9, 3e-6, 300e9};
  topo::Topology t = test::uniform_gpus(4, c);
  // A full mesh: both plans find their links.
  std::uint32_t index = 0;
  for (topo::NodeId a = 0; a < 4; ++a)
    for (topo::NodeId b = 0; b < 4; ++b)
      if (a != b) t.add_link({a, b, topo::LinkKind::nvlink, c.bandwidth, c.latency, index++});
  topo::finalize(t);
  topo::Router router(t);
  const Bytes size = 1 << 20;
  Plan imported =
      import_msccl(std::string(COLLSIM_SOURCE_DIR) + "/configs/msccl/ring-allreduce-4.xml", size);
  imported.rank_gpu = t.gpus();
  PlanRequest req;
  req.size = size;
  req.chunks = 1;
  const Plan builtin = generate(router, req);
  const double a = sim::simulate(router, imported).time;
  const double b = sim::simulate(router, builtin).time;
  CHECK(a == Approx(b).epsilon(1e-9));
  // Both equal the closed form (p - 1)(2T + G) with T = alpha + l + (n/4)/b, G = launch + 3(n/4)/B.
  const double T = c.alpha + c.latency + (size / 4.0) / c.bandwidth;
  const double G = c.launch + 3 * (size / 4.0) / c.memory_bandwidth;
  CHECK(a == Approx(3 * (2 * T + G)).epsilon(1e-9));
}
