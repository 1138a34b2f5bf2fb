// Re-sharing by region (sim::Options::sharing_regions) against re-sharing whole components, on
// a cluster's fabric where flows of every algorithm meet on NICs, leaves and spines: the same
// run to 1e-9, for far fewer flows filled where sharing is local.
#include <catch2/catch.hpp>
#include <tuple>

#include "schedules/generate.hpp"
#include "sim/engine.hpp"
#include "tests/common/clusters.hpp"
#include "topology/loader.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::sched;

namespace {

const topo::Topology& cluster() {
  static const topo::Topology t =
      topo::load_topology(std::string(COLLSIM_SOURCE_DIR) + "/configs/cluster-1024.json");
  return t;
}

// The plan of `a` on `ranks` (direct, a one-shot allreduce of p² flows, on the first 32 only).
Plan plan_for(const topo::Router& router, Algorithm a, const std::vector<topo::NodeId>& ranks,
              Bytes size, std::uint32_t chunks) {
  PlanRequest req;
  req.algorithm = a;
  req.size = size;
  req.chunks = chunks;
  req.ranks = a == Algorithm::direct ? std::vector(ranks.begin(), ranks.begin() + 32) : ranks;
  return generate(router, req);
}

// Runs the plan with both options (ops recorded) and checks that every op ends at the same
// time to 1e-9 after the same number of events; returns both results.
std::pair<sim::Result, sim::Result> same_runs(const topo::Router& router, const Plan& plan,
                                              sim::Options first, sim::Options second) {
  first.record_ops = second.record_ops = true;
  std::pair<sim::Result, sim::Result> runs{sim::simulate(router, plan, first),
                                           sim::simulate(router, plan, second)};
  const auto& [a, b] = runs;
  CHECK(a.time == Approx(b.time).epsilon(1e-9));
  CHECK(a.events == b.events);
  REQUIRE(a.ops.size() == b.ops.size());
  std::size_t off = 0;
  for (std::size_t i = 0; i < a.ops.size(); ++i)
    off += a.ops[i].end != Approx(b.ops[i].end).epsilon(1e-9);
  CHECK(off == 0);
  return runs;
}

}  // namespace

TEST_CASE("regions and whole components give the same runs on a cluster", "[model]") {
  const topo::Router router(cluster());
  // 128 GPUs: 16 servers over 4 racks, so that flows cross leaves and spines.
  const std::vector<topo::NodeId> ranks(cluster().gpus().begin(), cluster().gpus().begin() + 128);
  for (const Algorithm a :
       {Algorithm::tree, Algorithm::direct, Algorithm::hier, Algorithm::ring, Algorithm::rhd}) {
    INFO(to_string(a));
    const Plan plan = plan_for(router, a, ranks, Bytes{64} << 20, a == Algorithm::direct ? 1u : 4u);
    sim::Options whole;
    whole.sharing_regions = false;
    const auto [r, w] = same_runs(router, plan, sim::Options{}, whole);
    CHECK(w.sharing.regions == 0);
    // Never more filling than whole components, except for direct, whose flows all start at
    // one instant and end at a few: re-shared once per instant, a region is then nearly its
    // whole component, and checking it costs a second filling now and then (9,893 flows
    // filled against 7,136; 7,826 when every fallback, here the only one, sent the next four
    // re-shares to their components, which costs more where fallbacks come alone: see
    // FlowModel::fallen_back_). On the tree at least a quarter less here (128 GPUs: 13,049
    // flows filled against 18,616; on all 1024 GPUs, 40 times less).
    if (a != Algorithm::direct) CHECK(r.sharing.filled <= w.sharing.filled);
    if (a == Algorithm::direct) CHECK(r.sharing.filled <= w.sharing.filled * 3 / 2);
    if (a == Algorithm::tree) {
      CHECK(r.sharing.regions > 0);
      CHECK(r.sharing.filled * 4 < w.sharing.filled * 3);
    }
  }
}

TEST_CASE("a region that falls back alone leaves the next re-shares to their regions", "[model]") {
  // On a tree at many chunks a long cascade now and then falls back to its component, and the
  // next region settles as usual: only fallbacks in a row send the re-shares after them
  // straight to their components (FlowModel::fallen_back_). Here, on the cluster's fabric cut
  // to 512 GPUs as bench/run.sh scales it and routed as the command line routes, the one fallback
  // of the run is its only component re-share besides the small instants filled whole; with four
  // skipped re-shares after every fallback there were 45 instead of 42.
  const topo::Topology t = test::scaled_cluster(512 / 8);
  const topo::Router router(t, topo::RoutingOptions{.ecmp = true});
  const Plan plan = plan_for(router, Algorithm::tree, t.gpus(), Bytes{64} << 20, 16);
  const sim::Result r = sim::simulate(router, plan);
  CHECK(r.sharing.fallbacks == 1);
  CHECK(r.sharing.components == r.sharing.fallbacks + r.sharing.instants);
}

TEST_CASE("re-sharing once per instant gives the runs of re-sharing after every change",
          "[model]") {
  // The engine defers arrivals and departures to the end of their instant (FlowModel::flush);
  // every op must still end when it did, to 1e-9, for every algorithm. Direct starts all its
  // flows at one instant, the case the deferral is for.
  const topo::Router router(cluster());
  const std::vector<topo::NodeId> ranks(cluster().gpus().begin(), cluster().gpus().begin() + 64);
  for (const Algorithm a : {Algorithm::direct, Algorithm::tree, Algorithm::hier, Algorithm::ring,
                            Algorithm::rhd, Algorithm::naive}) {
    INFO(to_string(a));
    const Plan plan = plan_for(router, a, ranks, Bytes{16} << 20, a == Algorithm::naive ? 1u : 4u);
    sim::Options each;
    each.share_per_instant = false;
    const auto [o, e] = same_runs(router, plan, sim::Options{}, each);
    // Direct's instants each start or end many flows: far fewer re-shares once per instant.
    if (a == Algorithm::direct) CHECK(o.sharing.regions * 2 < e.sharing.regions);
  }
}

TEST_CASE("runs whose copies queue for copy engines re-share after every change", "[model]") {
  // Copy engines serve copies in the order they become ready. Re-sharing once per instant
  // computes the same rates in another order, and a copy that ties with another in exact
  // arithmetic but not in the last bit is then served in another order, so the engine keeps it
  // off where copies may queue: on the T4 box, which stages every transfer through host memory,
  // the two settings must give the same run to the bit. (With it on, the direct allreduce at
  // k = 16 came out up to 7.5 % slower.)
  const topo::Topology t =
      topo::load_topology(std::string(COLLSIM_SOURCE_DIR) + "/configs/t4x4-pcie.json");
  const topo::Router router(t);
  for (const Algorithm a : {Algorithm::direct, Algorithm::ring, Algorithm::tree}) {
    PlanRequest req;
    req.algorithm = a;
    req.size = Bytes{16} << 20;
    req.chunks = 16;
    const Plan plan = generate(router, req);
    sim::Options once;
    sim::Options each;
    each.share_per_instant = false;
    INFO(to_string(a));
    CHECK(sim::simulate(router, plan, once).time == sim::simulate(router, plan, each).time);
  }
}

TEST_CASE("runs whose copies never wait for an engine re-share once per instant", "[model]") {
  // A stream runs one op at a time, so a GPU with no more (rank, stream) pairs carrying copies
  // than copy engines never makes a copy wait, and the engine re-shares once per instant as if
  // its engines were unlimited: the same run to the bit. The hetero rack's ring stages through
  // host memory on two streams of each A10 GPU, which has two engines; re-shared after every
  // change instead, it ends 1 % earlier. The DGX's direct allgather copies each rank's own piece.
  for (const auto& [file, collective, algorithm] :
       {std::tuple{"hetero-rack", Collective::allreduce, Algorithm::ring},
        std::tuple{"dgx-h100", Collective::allgather, Algorithm::direct}}) {
    topo::Topology limited =
        topo::load_topology(std::string(COLLSIM_SOURCE_DIR) + "/configs/" + file + ".json");
    topo::Topology unlimited = limited;
    std::uint32_t engines = 0;
    for (topo::NodeId id = 0; id < unlimited.num_nodes(); ++id) {
      engines += limited.node(id).copy_engines;
      unlimited.node(id).copy_engines = 0;
    }
    REQUIRE(engines > 0);
    const auto time = [&](const topo::Topology& t) {
      const topo::Router router(t);
      PlanRequest req;
      req.collective = collective;
      req.algorithm = algorithm;
      req.size = Bytes{16} << 20;
      req.chunks = 16;
      return sim::simulate(router, generate(router, req)).time;
    };
    INFO(file);
    CHECK(time(limited) == time(unlimited));
  }
}
