// The verifier accepts every plan generate() makes, across collectives, algorithms, rank counts
// (powers of two and not), chunk counts and sizes that do not divide evenly.
#include <catch2/catch.hpp>

#include "schedules/generate.hpp"
#include "schedules/verify.hpp"
#include "tests/schedules/fixtures.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::sched;

namespace {

std::string label(const PlanRequest& r, RankId p) {
  return std::string(to_string(r.algorithm)) + " " + std::string(to_string(r.collective)) +
         " p=" + std::to_string(p) + " k=" + std::to_string(r.chunks) +
         " size=" + std::to_string(r.size) + " root=" + std::to_string(r.root);
}

}  // namespace

TEST_CASE("every generated plan computes its collective", "[verify]") {
  for (RankId p : {1u, 2u, 3u, 4u, 5u, 7u, 8u, 12u}) {
    topo::Topology t = test::uniform_gpus(p, {});
    topo::finalize(t);
    topo::Router router(t);
    for (Collective c : all_collectives()) {
      for (Algorithm a : algorithms_for(c, p)) {
        if (a == Algorithm::hier) continue;  // needs servers: hier_test.cpp
        for (std::uint32_t k : {1u, 2u, 3u}) {
          if (a == Algorithm::naive && k != 1) continue;
          // An even size and, where the collective allows it, one that splits unevenly.
          for (Bytes elems : {Bytes{p} * k * 6, Bytes{p} * k * 6 + 5}) {
            PlanRequest r;
            r.collective = c;
            r.algorithm = a;
            r.chunks = k;
            r.size = elems * 4;
            r.root = p > 2 ? 2 : 0;
            if (!why_not(r, p).empty()) continue;
            const Plan plan = generate(router, r);
            const VerifyReport rep = verify(plan);
            INFO(label(r, p));
            INFO((rep.problems.empty() ? std::string() : rep.problems.front()));
            CHECK(rep.ok());
            CHECK(rep.ops_run == plan.num_ops());
          }
        }
      }
    }
  }
}

TEST_CASE("verify scales to 64 ranks", "[verify]") {
  topo::Topology t = test::uniform_gpus(64, {});
  topo::finalize(t);
  const Plan plan = test::plan_on(t, Algorithm::ring, 8, 64 * 8 * 4 * 16);
  // 2(p-1) steps x k chunks x p ranks transfers, two ops each, plus (p-1) k p reductions.
  CHECK(plan.num_ops() == 2 * 63 * 8 * 64 * 2 + 63 * 8 * 64);
  CHECK(verify(plan).ok());
}
