// Prefetching the next events' records (sim::Options::prefetch_above) is a hint to the cache
// only: runs that always prefetch and runs that never do are the same to the bit. Small runs,
// which the default leaves without prefetching, are run both ways here, so that the prefetching
// stages also run (under the sanitizers in CI) on plans of every algorithm.
#include <catch2/catch.hpp>
#include <limits>
#include <map>

#include "schedules/generate.hpp"
#include "sim/engine.hpp"
#include "tests/common/same_run.hpp"
#include "topology/loader.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::sched;

namespace {

const topo::Topology& shipped_config(const char* name) {
  static std::map<std::string, topo::Topology> loaded;
  auto it = loaded.find(name);
  if (it == loaded.end())
    it = loaded
             .emplace(name,
                      topo::load_topology(std::string(COLLSIM_SOURCE_DIR) + "/configs/" + name))
             .first;
  return it->second;
}

sim::Options prefetching(bool always) {
  sim::Options o;
  o.prefetch_above = always ? 0 : std::numeric_limits<std::size_t>::max();
  return o;
}

}  // namespace

TEST_CASE("prefetching or not, every algorithm runs the same to the bit", "[model][prefetch]") {
  // The DGX (NVSwitch, where the tree re-shares), the T4 box (copies staged through host
  // memory), the hetero rack (copies queue for copy engines) and 64 GPUs of the cluster.
  struct Case {
    const char* config;
    std::size_t gpus;
  };
  for (const Case c : {Case{"dgx-h100.json", 8}, Case{"t4x4-pcie.json", 4},
                       Case{"hetero-rack.json", 0}, Case{"cluster-1024.json", 64}}) {
    const topo::Topology& t = shipped_config(c.config);
    const topo::Router router(t);
    const std::size_t gpus = c.gpus == 0 ? t.gpus().size() : c.gpus;
    PlanRequest req;
    req.ranks.assign(t.gpus().begin(), t.gpus().begin() + static_cast<std::ptrdiff_t>(gpus));
    for (const Algorithm a : algorithms_for(Collective::allreduce, static_cast<RankId>(gpus))) {
      req.algorithm = a;
      for (const std::uint32_t k : {1u, 4u}) {
        req.chunks = a == Algorithm::naive ? 1 : k;
        req.size = Bytes{16} << 20;
        if (!why_not(req, static_cast<RankId>(gpus)).empty()) continue;
        INFO(c.config << " " << to_string(a) << " k=" << req.chunks);
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
  }
}
