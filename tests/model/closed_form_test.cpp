// The engine replays every generated plan on a uniform machine in exactly the time the closed
// form of docs/algorithms.md predicts (1e-9 relative). Both sides are independent: the closed
// form is algebra over the schedule's shape, the engine simulates flows on routes.
#include "schedules/closed_form.hpp"

#include <array>
#include <catch2/catch.hpp>
#include <memory>

#include "schedules/generate.hpp"
#include "sim/engine.hpp"
#include "tests/schedules/fixtures.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::sched;

namespace {

struct Case {
  const char* name;
  UniformCosts costs;
};

// Transfer-bound, reduction-bound and bandwidth-only machines, so that every branch of the
// max() terms in the closed forms is exercised.
const Case kCases[] = {
    {"transfer-bound", {1e-6, 0.5e-6, 10e9, 2e-6, 200e9}},
    {"reduce-bound", {1e-6, 0.5e-6, 50e9, 3e-6, 20e9}},
    {"bandwidth only", {0, 0, 25e9, 0, kUnlimited}},
};

// `traffic`: each GPU's reduce_traffic by dtype; empty: the default, 3 for every dtype.
double simulated(const PlanRequest& req, RankId p, const UniformCosts& c,
                 const std::array<double, 3>* traffic = nullptr) {
  topo::Topology t = test::uniform_gpus(p, c);
  if (traffic)
    for (topo::NodeId n = 0; n < t.num_nodes(); ++n) t.node(n).reduce_traffic = *traffic;
  Plan plan;
  {
    topo::finalize(t);
    topo::Router router(t);
    plan = generate(router, req);
  }
  test::link_plan_pairs(t, plan, c);
  topo::finalize(t);
  topo::Router router(t);
  return sim::simulate(router, plan).time;
}

void check(Algorithm a, Collective coll, RankId p, std::uint32_t k, Bytes size,
           std::size_t cases = std::size(kCases)) {
  for (std::size_t i = 0; i < cases; ++i) {
    const Case& c = kCases[i];
    PlanRequest req;
    req.algorithm = a;
    req.collective = coll;
    req.chunks = k;
    req.size = size;
    req.root = p > 1 ? 1 : 0;
    if (!why_not(req, p).empty()) continue;
    INFO(std::string(to_string(a)) << " " << to_string(coll) << " p=" << p << " k=" << k
                                   << " size=" << size << " " << c.name);
    const double want = closed_form(req, p, c.costs);
    const double got = simulated(req, p, c.costs);
    // One rank on a machine with free memory copies in no time; every other case takes some.
    REQUIRE((want > 0 || (p == 1 && c.costs.memory_bandwidth == kUnlimited)));
    CHECK(got == Approx(want).epsilon(1e-9));
  }
}

}  // namespace

TEST_CASE("engine equals the closed form for every algorithm and collective", "[model]") {
  for (Collective coll : all_collectives())
    for (RankId p : {1u, 2u, 3u, 4u, 5u, 7u, 8u, 16u})
      for (Algorithm a : algorithms_for(coll, p)) {
        if (a == Algorithm::hier) continue;  // hier_model_test.cpp
        for (std::uint32_t k : {1u, 2u, 3u, 8u, 64u}) {
          if (a == Algorithm::naive && k > 1) continue;
          check(a, coll, p, k, Bytes{p} * k * 4 * 64);
        }
      }
}

TEST_CASE("engine equals the closed form at large rank counts", "[model]") {
  for (RankId p : {100u, 128u})
    for (Algorithm a : {Algorithm::ring, Algorithm::tree, Algorithm::rhd, Algorithm::rd})
      check(a, Collective::allreduce, p, 4, Bytes{p} * 4 * 4 * 16);
  check(Algorithm::tree, Collective::allreduce, 1000, 8, Bytes{1000} * 8 * 4);
  check(Algorithm::rhd, Collective::allreduce, 1024, 1, Bytes{1024} * 4 * 4);
  // The halving splits each chunk into p' = 512 pieces: the size must divide evenly.
  check(Algorithm::rhd, Collective::allreduce, 1000, 2, Bytes{512} * 2 * 4 * 4);
  check(Algorithm::rd, Collective::allreduce, 600, 3, Bytes{600} * 3 * 4);
  check(Algorithm::ring, Collective::reduce_scatter, 300, 2, Bytes{300} * 2 * 4);
  check(Algorithm::tree, Collective::broadcast, 1023, 64, Bytes{1023} * 64 * 4);
  check(Algorithm::direct, Collective::allreduce, 64, 8, Bytes{64} * 8 * 4 * 8);
}

// A reduction kernel slower than memory for half-precision types: each GPU charges its own
// traffic per byte for the plan's dtype, and the closed form with that traffic agrees.
TEST_CASE("engine equals the closed form with a reduce traffic per dtype", "[model]") {
  const std::array<double, 3> traffic = {3.0, 4.5, 5.25};  // fp32, fp16, bf16
  const UniformCosts reduce_bound = kCases[1].costs;
  for (DType dtype : {DType::fp32, DType::fp16, DType::bf16})
    for (Algorithm a : algorithms_for(Collective::allreduce, 8)) {
      if (a == Algorithm::hier) continue;
      PlanRequest req;
      req.algorithm = a;
      req.chunks = a == Algorithm::naive ? 1 : 3;
      req.dtype = dtype;
      req.size = Bytes{8} * 3 * 4 * 64;
      if (!why_not(req, 8).empty()) continue;
      UniformCosts costs = reduce_bound;
      costs.reduce_traffic = traffic.at(static_cast<std::size_t>(dtype));
      INFO(to_string(a) << " " << to_string(dtype));
      const double got = simulated(req, 8, reduce_bound, &traffic);
      CHECK(got == Approx(closed_form(req, 8, costs)).epsilon(1e-9));
      // Reductions take time on this machine, so the traffic shows in the result.
      if (dtype != DType::fp32) CHECK(got > closed_form(req, 8, reduce_bound) * (1 + 1e-6));
    }
}

// Two million transfers: one machine only, to keep the test near two seconds.
TEST_CASE("engine equals the closed form for a 1024-rank ring", "[model]") {
  check(Algorithm::ring, Collective::allreduce, 1024, 1, Bytes{1024} * 4 * 4, 1);
}

// One rank per orbit (sim/rotation.hpp): on the uniform machine every rotation maps the ring
// and direct plans onto themselves, so rank 0 alone stands for all and must give the closed form.
TEST_CASE("one rank for all equals the closed form on uniform machines", "[model][symmetry]") {
  for (const Case& c : kCases)
    for (RankId p : {2u, 8u, 64u, 1024u})
      for (Algorithm a : {Algorithm::ring, Algorithm::direct})
        for (Collective coll :
             {Collective::allreduce, Collective::reduce_scatter, Collective::allgather}) {
          // The machine's links come from the whole plan: one large case is enough.
          if (p > 64 && (a != Algorithm::ring || coll != Collective::allreduce || &c != &kCases[0]))
            continue;
          PlanRequest req;
          req.algorithm = a;
          req.collective = coll;
          req.chunks = 4;
          req.size = Bytes{p} * 4 * 4 * 8;
          INFO(to_string(a) << " " << to_string(coll) << " p=" << p << " " << c.name);
          topo::Topology t = test::uniform_gpus(p, c.costs);
          {
            topo::finalize(t);
            topo::Router router(t);
            test::link_plan_pairs(t, generate(router, req), c.costs);
          }
          topo::finalize(t);
          topo::Router router(t);
          sim::Options o;
          o.rank_symmetry = true;
          const sim::Result r = sim::simulate(router, req, o);
          CHECK(r.rotation == 1);
          CHECK(r.time == Approx(closed_form(req, p, c.costs)).epsilon(1e-9));
        }
}
