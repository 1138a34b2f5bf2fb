// Prefetching the next events' records (sim::Options::prefetch_above) is a hint to the cache
// only: runs that always prefetch and runs that never do are the same to the bit. Small runs,
// which the default leaves without prefetching, are run both ways here, so that the prefetching
// stages also run (under the sanitizers in CI) on plans of every algorithm.
#include <catch2/catch.hpp>
#include <limits>

#include "schedules/generate.hpp"
#include "sim/engine.hpp"
#include "tests/common/same_run.hpp"
#include "tests/common/shipped_machines.hpp"

using namespace collsim;
using namespace collsim::sched;

namespace {

sim::Options prefetching(bool always) {
  sim::Options o;
  o.prefetch_above = always ? 0 : std::numeric_limits<std::size_t>::max();
  return o;
}

}  // namespace

TEST_CASE("prefetching or not, every algorithm runs the same to the bit", "[model][prefetch]") {
  // The DGX (NVSwitch, where the tree re-shares), the T4 box (copies staged through host
  // memory), the hetero rack (copies queue for copy engines) and 48 GPUs of the cluster (ECMP).
  for (const test::ShippedMachine& m : test::kShippedMachines) {
    test::on_machine(m, [&](const topo::Router& router, const std::vector<topo::NodeId>& gpus) {
      const auto p = static_cast<RankId>(gpus.size());
      PlanRequest req;
      req.ranks = gpus;
      req.size = Bytes{16} << 20;
      for (const Algorithm a : algorithms_for(Collective::allreduce, p)) {
        req.algorithm = a;
        for (const std::uint32_t k : {1u, 4u}) {
          req.chunks = a == Algorithm::naive ? 1 : k;
          if (!why_not(req, p).empty()) continue;
          INFO(m.file << " " << to_string(a) << " k=" << req.chunks);
          Plan plan;
          try {
            plan = generate(router, req);
          } catch (const InputError&) {
            continue;  // hier on a machine without servers of equal size
          }
          sim::Options always = prefetching(true), never = prefetching(false);
          always.record_ops = never.record_ops = true;
          test::check_same_run(sim::simulate(router, plan, always),
                               sim::simulate(router, plan, never));
          // Generated while simulated where the algorithm streams (the ring and the hier): the
          // window of op records moves, and the prefetching reads across it.
          test::check_same_run(sim::simulate(router, req, prefetching(true)),
                               sim::simulate(router, req, prefetching(false)));
        }
      }
    });
  }
}
