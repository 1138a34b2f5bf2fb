// Tied links (sim::Options::tie_links): flows that hold one link per class of links crossed by
// the same routes run exactly as flows that hold every link of their route.
#include <catch2/catch.hpp>
#include <map>

#include "schedules/generate.hpp"
#include "sim/engine.hpp"
#include "tests/common/same_run.hpp"
#include "tests/sim/sim_fixtures.hpp"
#include "topology/loader.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::sched;
using namespace collsim::sim::testing;

namespace {

const topo::Topology& loaded_config(const char* name) {
  static std::map<std::string, topo::Topology> loaded;
  auto it = loaded.find(name);
  if (it == loaded.end())
    it = loaded
             .emplace(name,
                      topo::load_topology(std::string(COLLSIM_SOURCE_DIR) + "/configs/" + name))
             .first;
  return it->second;
}

// Both runs of `plan`: the resources held per flow, tied and untied, and how many instants the
// tied run re-shared as one component (FlowModel::kWholeInstantBelow).
struct Compared {
  double tied;
  double untied;
  std::uint64_t whole_instants;
};
Compared compare(const topo::Router& router, const Plan& plan, sim::Options options = {}) {
  options.record_ops = true;
  sim::Options untied = options;
  untied.tie_links = false;
  const sim::Result a = sim::simulate(router, plan, options);
  const sim::Result b = sim::simulate(router, plan, untied);
  test::check_same_run(a, b);
  CHECK(a.sharing.instants == b.sharing.instants);
  const auto per_flow = [](const sim::Result& r) {
    return static_cast<double>(r.sharing.held) / static_cast<double>(r.flows);
  };
  return {per_flow(a), per_flow(b), a.sharing.instants};
}

}  // namespace

TEST_CASE("tied links give the untied run of every algorithm, bit for bit", "[model][tied]") {
  // 128 GPUs of the cluster (flows meet on NICs, leaves and spines), the T4 box (transfers
  // staged through host memory by copies, which take PCIe routes too) and the DGX (NVSwitch).
  struct Case {
    const char* config;
    std::size_t gpus;
  };
  for (const Case c :
       {Case{"cluster-1024.json", 128}, Case{"t4x4-pcie.json", 4}, Case{"dgx-h100.json", 8}}) {
    const topo::Topology& t = loaded_config(c.config);
    const topo::Router router(t);
    const std::vector<topo::NodeId> gpus(t.gpus().begin(), t.gpus().begin() + c.gpus);
    for (const Algorithm a : {Algorithm::ring, Algorithm::tree, Algorithm::hier, Algorithm::rhd,
                              Algorithm::direct, Algorithm::naive}) {
      PlanRequest req;
      req.algorithm = a;
      req.size = Bytes{16} << 20;
      req.chunks = a == Algorithm::naive ? 1 : 4;
      req.ranks = a == Algorithm::direct && gpus.size() > 32
                      ? std::vector(gpus.begin(), gpus.begin() + 32)
                      : gpus;
      INFO(c.config << " " << to_string(a));
      const auto [tied, untied, whole_instants] = compare(router, generate(router, req));
      CHECK(tied <= untied);
      // The DGX's direct allreduce starts its flows together on one NVSwitch: its instants are
      // re-shared as one component, under the same rule in both runs.
      if (c.gpus == 8 && a == Algorithm::direct) CHECK(whole_instants > 0);
      // On the cluster every transfer between servers crosses PCIe, NIC, leaf (and spine)
      // links that its route alone, or its whole rail, uses: fewer held links per flow.
      if (c.gpus == 128 && a != Algorithm::naive) CHECK(tied < untied * 0.8);
    }
  }
}

TEST_CASE("tied links give the untied run with capacity changes and background traffic",
          "[model][tied]") {
  // A link whose capacity changes is never tied; a background flow's route ties like any.
  const topo::Topology& t = loaded_config("cluster-1024.json");
  const topo::Router router(t);
  const std::vector<topo::NodeId> gpus(t.gpus().begin(), t.gpus().begin() + 64);
  PlanRequest req;
  req.algorithm = Algorithm::ring;
  req.size = Bytes{64} << 20;
  req.chunks = 4;
  req.ranks = gpus;
  const Plan plan = generate(router, req);
  // The NIC link of the ring's step from server 0 to server 1, and a background flow across it.
  const topo::Route& cross = router.route(gpus[7], gpus[8]);
  REQUIRE(cross.links.size() > 3);
  sim::Options o;
  o.capacity.push_back(sim::CapacityTrace{cross.links[2], {{2e-4, 10e9}, {6e-4, 50e9}}});
  o.background.push_back(sim::BackgroundFlow{gpus[15], gpus[16], Bytes{32} << 20, 1e-4});
  o.background.push_back(sim::BackgroundFlow{gpus[7], gpus[9], Bytes{32} << 20, 3e-4});
  compare(router, plan, o);
}

TEST_CASE("links untied while a streamed run holds flows on their class", "[model][tied]") {
  // gpu0 -> sw -> gpu1 is the first route: its two links form one class, held through the
  // slower one (sw -> gpu1, 60 GB/s). A later batch sends gpu0 -> sw -> gpu2, which unties
  // gpu0 -> sw (80 GB/s) while a long transfer runs on the class and another waits out its
  // alpha: both must take gpu0 -> sw from then on and share it with the new transfer, 80 / 3
  // GB/s each instead of 30 on sw -> gpu1, as the untied run does.
  topo::Topology t;
  const auto g0 = add_gpu(t, "gpu0");
  const auto g1 = add_gpu(t, "gpu1");
  const auto g2 = add_gpu(t, "gpu2");
  const auto sw = add_node(t, "sw", topo::NodeKind::nvswitch);
  t.node(g0).alpha = 3e-6;
  add_duplex(t, g0, sw, 80e9, 1e-7);
  add_duplex(t, sw, g1, 60e9, 1e-7);
  add_duplex(t, sw, g2, 100e9, 1e-7);
  topo::finalize(t);
  const topo::Router router(t);
  const auto run = [&](bool tie, bool streamed) {
    Plan plan;
    plan.rank_gpu = {g0, g1, g2};
    sim::Options o;
    o.tie_links = tie;
    o.record_ops = true;
    const auto build = [&](const std::function<void()>& batch) {
      add_transfer(plan, 0, 1, Bytes{8} << 20);  // the long transfer, stream 0
      const OpId d = plan.add(test::delay_op(0, 1e-6, 3));
      batch();
      // Ready at 1 µs, it pays gpu0's alpha of 3 µs; the next batch arrives at 2 µs.
      add_transfer(plan, 0, 1, Bytes{1} << 20, {d}, {d}, 1);
      const OpId d2 = plan.add(test::delay_op(0, 1e-6, 3), {d});
      batch();
      add_transfer(plan, 0, 2, Bytes{4} << 20, {d2}, {d2}, 2);
      batch();
    };
    if (!streamed) {
      build([] {});
      return sim::simulate(router, plan, o);
    }
    return sim::simulate_streaming(router, plan, build, o);
  };
  const sim::Result whole = run(false, false);
  const sim::Result tied_whole = run(true, false);
  test::check_same_run(tied_whole, whole);
  for (const bool tie : {true, false}) {
    INFO("streamed, tie " << tie);
    test::check_same_run(run(tie, true), whole);
  }
}
