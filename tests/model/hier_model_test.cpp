// Hierarchical allreduce on servers whose GPUs are linked with fast intra-server links and, per
// rail, slower inter-server links: the engine's time equals the sum of the three ring phases.
#include <catch2/catch.hpp>

#include "schedules/closed_form.hpp"
#include "schedules/generate.hpp"
#include "sim/engine.hpp"
#include "tests/schedules/fixtures.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::sched;

TEST_CASE("hier allreduce equals its closed form", "[model]") {
  const UniformCosts intra{1e-6, 0.2e-6, 100e9, 2e-6, 500e9};
  UniformCosts inter = intra;
  inter.latency = 3e-6;
  inter.bandwidth = 12.5e9;
  for (std::uint32_t servers : {1u, 2u, 3u, 4u})
    for (std::uint32_t gpus : {1u, 2u, 3u, 8u})
      for (std::uint32_t k : {1u, 2u, 3u, 8u}) {
        if (servers * gpus == 1) continue;
        PlanRequest req;
        req.algorithm = Algorithm::hier;
        req.chunks = k;
        req.size = Bytes{servers} * gpus * k * 4 * 32;
        topo::Topology t = test::server_gpus(servers, gpus, intra);
        Plan plan;
        {
          topo::finalize(t);
          topo::Router router(t);
          plan = generate(router, req);
        }
        test::link_plan_pairs(t, plan, intra, inter);
        topo::finalize(t);
        topo::Router router(t);
        INFO("servers=" << servers << " gpus=" << gpus << " k=" << k);
        const double want = closed_form_hier(req, servers, gpus, intra, inter);
        CHECK(sim::simulate(router, plan).time == Approx(want).epsilon(1e-9));
      }
}
