// Capacity traces and background flows re-share bandwidth in the middle of a collective.
#include <catch2/catch.hpp>

#include "sim/engine.hpp"
#include "tests/sim/sim_fixtures.hpp"
#include "topology/error.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::sim::testing;

namespace {

struct Line {
  topo::Topology t;
  topo::LinkId link = 0;
  explicit Line(double bw, double latency) {
    const auto a = add_gpu(t, "gpu0");
    const auto b = add_gpu(t, "gpu1");
    link = add_duplex(t, a, b, bw, latency);
    topo::finalize(t);
  }
};

}  // namespace

TEST_CASE("a capacity trace halving bandwidth mid-transfer", "[sim][dynamics]") {
  // b = 10 GB/s, l = 0.1 s, s = 10 GB. Draining starts at 0.1; at 0.5 s, 4 GB are through and
  // the link drops to 5 GB/s: the other 6 GB take 1.2 s more. T = 0.5 + 1.2 = 1.7 s.
  Line line(10e9, 0.1);
  topo::Router router(line.t);
  sched::Plan plan;
  plan.rank_gpu = {0, 1};
  add_transfer(plan, 0, 1, 10'000'000'000);
  sim::Options o;
  o.capacity.push_back(sim::CapacityTrace{line.link, {{0.5, 5e9}}});
  CHECK(sim::simulate(router, plan, o).time == Approx(1.7).epsilon(1e-12));
}

TEST_CASE("a failed link stalls its flows until it recovers", "[sim][dynamics]") {
  // As above, but the link fails at 0.5 s (4 GB through) and returns at 10 GB/s at 1.0 s:
  // the other 6 GB take 0.6 s. T = 1.0 + 0.6 = 1.6 s.
  Line line(10e9, 0.1);
  topo::Router router(line.t);
  sched::Plan plan;
  plan.rank_gpu = {0, 1};
  add_transfer(plan, 0, 1, 10'000'000'000);
  sim::Options o;
  // Given out of order on purpose: changes are applied by time.
  o.capacity.push_back(sim::CapacityTrace{line.link, {{1.0, 10e9}, {0.5, 0}}});
  CHECK(sim::simulate(router, plan, o).time == Approx(1.6).epsilon(1e-12));

  SECTION("without recovery the run reports the dead link instead of hanging") {
    sim::Options dead;
    dead.capacity.push_back(sim::CapacityTrace{line.link, {{0.5, 0}}});
    CHECK_THROWS_WITH(sim::simulate(router, plan, dead),
                      Catch::Contains("op 0 (rank 0, stream 0, send to rank 1)") &&
                          Catch::Contains("gpu0->gpu1") && Catch::Contains("from 0.5 s"));
  }
}

TEST_CASE("a background flow shares the link with a transfer", "[sim][dynamics]") {
  // b = 10 GB/s, no latency. Transfer of 10 GB from t = 0; background flow of 5 GB on the same
  // link from t = 0.2. Alone until 0.2: 2 GB through. Then 5 GB/s each: the background's 5 GB
  // take 1.0 s (ends 1.2), by which time the transfer has 7 GB through; its last 3 GB run alone
  // at 10 GB/s: 0.3 s. T = 1.5 s.
  Line line(10e9, 0);
  topo::Router router(line.t);
  sched::Plan plan;
  plan.rank_gpu = {0, 1};
  add_transfer(plan, 0, 1, 10'000'000'000);
  sim::Options o;
  o.background.push_back(sim::BackgroundFlow{0, 1, 5'000'000'000, 0.2});
  const auto r = sim::simulate(router, plan, o);
  CHECK(r.time == Approx(1.5).epsilon(1e-12));
  REQUIRE(r.background_end.size() == 1);
  CHECK(r.background_end[0] == Approx(1.2).epsilon(1e-12));
  CHECK(r.link_bytes[line.link] == 15'000'000'000ull);
}

TEST_CASE("a background flow in the other direction changes nothing", "[sim][dynamics]") {
  // Directed links: T = s / b = 1.0 s.
  Line line(10e9, 0);
  topo::Router router(line.t);
  sched::Plan plan;
  plan.rank_gpu = {0, 1};
  add_transfer(plan, 0, 1, 10'000'000'000);
  sim::Options o;
  o.background.push_back(sim::BackgroundFlow{1, 0, 5'000'000'000, 0.0});
  CHECK(sim::simulate(router, plan, o).time == Approx(1.0).epsilon(1e-12));
}

TEST_CASE("bad capacity traces and background flows are input errors", "[sim][dynamics]") {
  Line line(10e9, 0);
  topo::Router router(line.t);
  sched::Plan plan;
  plan.rank_gpu = {0, 1};
  sim::Options o;
  o.capacity.push_back(sim::CapacityTrace{99, {{0.5, 1e9}}});
  CHECK_THROWS_AS(sim::simulate(router, plan, o), InputError);
  o.capacity = {sim::CapacityTrace{0, {{0.5, -1}}}};
  CHECK_THROWS_AS(sim::simulate(router, plan, o), InputError);
  o.capacity = {sim::CapacityTrace{0, {{std::nan(""), 1e9}}}};
  CHECK_THROWS_AS(sim::simulate(router, plan, o), InputError);
  o.capacity = {sim::CapacityTrace{0, {{0.5, 1e-300}}}};  // would take longer than a double holds
  CHECK_THROWS_AS(sim::simulate(router, plan, o), InputError);
  o.capacity.clear();
  o.background.push_back(sim::BackgroundFlow{0, 42, 1, 0});
  CHECK_THROWS_AS(sim::simulate(router, plan, o), InputError);
}
