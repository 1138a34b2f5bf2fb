// Every schedule on every shipped machine runs in other units exactly as in its own: twice the
// bytes over twice the bandwidth in the same times, and half the bandwidth with every duration
// doubled in twice the times, to the bit (tests/common/scaled_runs.hpp says why that is exact).
// Streamed and whole plans, windows, copy engines and host staging, event latency, ECMP,
// capacity changes, background traffic and one rank per orbit all take part; each whole plan's
// run is also checked against the cost model's rules (tests/common/cost_checks.hpp).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "schedules/generate.hpp"
#include "sim/engine.hpp"
#include "tests/common/clusters.hpp"
#include "tests/common/cost_checks.hpp"
#include "tests/common/scaled_runs.hpp"
#include "tests/common/shipped_machines.hpp"
#include "tests/common/sizes.hpp"
#include "topology/loader.hpp"

using namespace collsim;
using namespace collsim::sched;

namespace {

std::string lines(const std::vector<std::string>& differences) {
  std::string s;
  for (const std::string& d : differences) s += d + "\n";
  return s;
}

// `req` on `t` and on `t` in the units of each scale: generated and simulated as the command line
// does (streamed where it streams), and as a whole plan with every op's times recorded, registered
// in windows of a few ops so that windows take part. Returns how many runs were compared.
int check_request(const topo::Topology& t, topo::RoutingOptions routing, const PlanRequest& req,
                  const sim::Options& options = {}) {
  const topo::Router router(t, routing);
  const sim::Result streamed = sim::simulate(router, req, options);
  REQUIRE(streamed.stop == sim::StopReason::finished);
  sim::Options recorded = options;
  recorded.record_ops = true;
  const Plan plan = generate(router, req);
  recorded.window_ops = std::max<std::size_t>(8, plan.num_ops() / 6);
  const sim::Result whole = sim::simulate(router, plan, recorded);
  // The run itself follows the cost model's rules (tests/common/cost_checks.hpp).
  std::vector<std::string> broken;
  test::check_costs(router, plan, recorded, whole, broken);
  INFO("cost rules\n" << lines(broken));
  CHECK(broken.empty());
  int compared = 0;
  for (const test::Scale s : {test::kTwiceTheBytes, test::kTwiceTheTime}) {
    const test::ScaledMachine machine(t, s, routing);
    INFO(fmt::format("{} times the bytes, {} times the time", s.bytes, s.time));
    // The request itself, where only durations and bandwidths change: the generator sees sizes
    // unchanged, so this is the plan the command line would stream.
    if (s.bytes == 1) {
      const sim::Result r = sim::simulate(machine.router, req, test::scaled(options, s));
      INFO("streamed\n" << lines(test::scaled_differences(streamed, r, s)));
      CHECK(test::scaled_differences(streamed, r, s).empty());
      ++compared;
    }
    const std::vector<std::string> d = test::scaled_run_differences(machine, plan, recorded, whole);
    INFO("whole plan in windows\n" << lines(d));
    CHECK(d.empty());
    ++compared;
  }
  return compared;
}

// Every collective and algorithm on the first GPUs of `t`; returns how many runs were compared.
int check_every_algorithm(const topo::Topology& t, topo::RoutingOptions routing,
                          std::vector<topo::NodeId> gpus, HostMemory host_memory) {
  int compared = 0;
  const auto p = static_cast<RankId>(gpus.size());
  for (const Collective c : all_collectives())
    for (const Algorithm a : algorithms_for(c, p)) {
      PlanRequest req;
      req.collective = c;
      req.algorithm = a;
      req.size = 3 * test::MiB + 4 * 16 * 5;  // chunks of unequal size
      req.chunks = a == Algorithm::naive ? 1 : 3;
      // The one-shot allreduce on 48 GPUs of the cluster re-shares hundreds of flows at every
      // event (seconds); 16 GPUs, two servers, still cross the fabric.
      req.ranks = a == Algorithm::direct && c == Collective::allreduce && p > 16
                      ? std::vector(gpus.begin(), gpus.begin() + 16)
                      : gpus;
      req.host_memory = host_memory;
      if (!why_not(req, static_cast<RankId>(req.ranks.size())).empty()) continue;
      INFO(fmt::format("{}: {} {}", t.name(), to_string(c), to_string(a)));
      try {
        compared += check_request(t, routing, req);
      } catch (const InputError& e) {
        // hier on ranks whose servers differ: refused before any run, in either units.
        INFO(e.what());
        CHECK(a == Algorithm::hier);
      }
    }
  return compared;
}

}  // namespace

TEST_CASE("every algorithm on every shipped machine runs the same in other units",
          "[model][units]") {
  int compared = 0;
  for (const test::ShippedMachine& m : test::kShippedMachines) {
    topo::Topology t = topo::load_topology(test::config_path(m.file));
    std::vector<topo::NodeId> gpus = t.gpus();
    if (m.gpus != 0) gpus.resize(m.gpus);
    // Every GPU pays an event latency, so that waits across streams are delayed too.
    for (topo::NodeId g : t.gpus()) t.node(g).event_latency = 1.5e-6;
    // Pageable host buffers stage every copy through the CPU's memcpy, charged by direction as
    // a calibration charges them.
    const bool t4 = std::string(m.file) == "t4x4-pcie.json";
    if (t4)
      for (topo::NodeId n = 0; n < t.num_nodes(); ++n)
        if (t.node(n).kind == topo::NodeKind::cpu) t.node(n).pageable_traffic = {1.25, 0.75};
    compared += check_every_algorithm(t, topo::RoutingOptions{.ecmp = m.ecmp}, gpus,
                                      t4 ? HostMemory::pageable : HostMemory::pinned);
  }
  // 4 machines, every collective, 3 to 7 algorithms each, 3 runs each: 225 when written.
  CHECK(compared >= 200);
}

TEST_CASE("virtual ranks of one GPU run the same in other units", "[model][units]") {
  // As collsim validate sets them up: four ranks on one device share its memory (memory_owner)
  // and each has two copy engines, so reductions and device copies of different ranks meet.
  topo::Topology t = topo::load_topology(test::config_path("one-gpu-4ranks.json"));
  const std::vector<topo::NodeId> gpus = t.gpus();
  for (const topo::NodeId g : gpus) {
    topo::Node& n = t.node(g);
    n.memory_bandwidth = 4.8e12;
    n.memory_owner = g == gpus.front() ? topo::kNoNode : gpus.front();
    n.copy_engines = 2;
    n.alpha = 1e-6;
    n.launch_latency = 3e-6;
    n.event_latency = 2e-6;
    n.reduce_traffic = {3, 4.5, 4.5};
  }
  CHECK(check_every_algorithm(t, {}, gpus, HostMemory::pinned) >= 40);
}

TEST_CASE("capacity changes and background traffic run the same in other units", "[model][units]") {
  const topo::Topology t = test::scaled_cluster(8, 2);
  const topo::RoutingOptions ecmp{.ecmp = true};
  const topo::Router router(t, ecmp);
  const std::vector<topo::NodeId>& gpus = t.gpus();
  const topo::Route& cross = router.route(gpus[7], gpus[8], sim::transfer_flow_key(7, 8));
  REQUIRE(cross.links.size() > 3);
  sim::Options o;
  // A NIC link that slows, fails and recovers while the ring runs, and another job's traffic.
  o.capacity.push_back(sim::CapacityTrace{cross.links[2], {{2e-5, 10e9}, {6e-5, 0}, {9e-5, 50e9}}});
  o.background.push_back(sim::BackgroundFlow{gpus[15], gpus[16], Bytes{3} << 20, 1e-5});
  o.background.push_back(sim::BackgroundFlow{gpus[7], gpus[40], Bytes{5} << 20, 3e-5});
  for (const Algorithm a : {Algorithm::ring, Algorithm::tree, Algorithm::hier}) {
    PlanRequest req;
    req.algorithm = a;
    req.size = 8 * test::MiB;
    req.chunks = 4;
    req.ranks = gpus;
    INFO(to_string(a));
    CHECK(check_request(t, ecmp, req, o) == 3);
  }
}

TEST_CASE("one rank per orbit runs the same in other units", "[model][units]") {
  const topo::Topology t = test::scaled_cluster(16, 4);
  const topo::RoutingOptions shortest{.ecmp = false};
  sim::Options o;
  o.rank_symmetry = true;
  for (const Algorithm a : {Algorithm::ring, Algorithm::hier}) {
    PlanRequest req;
    req.algorithm = a;
    req.size = 4 * test::MiB;
    req.chunks = 2;
    req.ranks = t.gpus();
    const topo::Router router(t, shortest);
    const sim::Result base = sim::simulate(router, req, o);
    REQUIRE(base.rotation == 32);  // the run does take the rotation
    const test::ScaledMachine slower(t, test::kTwiceTheTime, shortest);
    const sim::Result r = sim::simulate(slower.router, req, o);
    INFO(to_string(a) << "\n" << lines(test::scaled_differences(base, r, test::kTwiceTheTime)));
    CHECK(test::scaled_differences(base, r, test::kTwiceTheTime).empty());
  }
}
