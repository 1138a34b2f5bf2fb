// A plan simulated while it is generated (sim::simulate_streaming) gives the same run as the
// whole plan, bit for bit, and holds only a window of it.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>

#include "schedules/generate.hpp"
#include "sim/engine.hpp"
#include "tests/common/same_run.hpp"
#include "tests/common/shipped_machines.hpp"
#include "tests/common/sizes.hpp"
#include "topology/loader.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::sched;

namespace {

using test::MiB;

struct Streamed {
  sim::Result result;
  std::size_t batches = 0;
  std::size_t most_ops_held = 0;  // largest window of the plan held at a batch's end
};

Streamed stream(const topo::Router& router, const PlanRequest& req, const sim::Options& o) {
  Streamed s;
  Plan plan;
  s.result = sim::simulate_streaming(
      router, plan,
      [&](std::function<void()> batch) {
        generate(router, req, plan, [&] {
          ++s.batches;
          s.most_ops_held = std::max(s.most_ops_held, plan.num_ops() - plan.first_op());
          batch();
        });
      },
      o);
  return s;
}

// A ring allreduce of `size` bytes in `chunks` over every GPU.
PlanRequest ring_request(Bytes size, std::uint32_t chunks) {
  PlanRequest req;
  req.algorithm = Algorithm::ring;
  req.size = size;
  req.chunks = chunks;
  return req;
}

// The request streams, in several batches, and its streamed run equals the whole plan's, per-op
// timings included. `fewer_events`: the streamed run may count fewer events (test::
// check_same_run).
void check_streams_exactly(const topo::Router& router, const PlanRequest& req,
                           bool fewer_events = false) {
  REQUIRE(sim::streams_exactly(router, req));
  sim::Options o;
  o.record_ops = true;
  const sim::Result whole = sim::simulate(router, generate(router, req), o);
  const Streamed s = stream(router, req, o);
  CHECK(s.batches > 2);
  test::check_same_run(whole, s.result, fewer_events);
}

// A streamed run of `req` beside the whole plan: same time and events; the caller judges how
// much of the plan the stream held.
struct Windowed {
  Streamed streamed;
  std::size_t plan_ops = 0;
  std::string summary;  // for INFO at the caller's checks
};
Windowed windowed(const topo::Router& router, const PlanRequest& req) {
  const Plan whole = generate(router, req);
  Windowed w{stream(router, req, {}), whole.num_ops(), {}};
  const sim::Result expected = sim::simulate(router, whole);
  CHECK(test::same_double(expected.time, w.streamed.result.time));
  CHECK(expected.events == w.streamed.result.events);
  w.summary = fmt::format("{} ops in the plan, at most {} held in {} batches", w.plan_ops,
                          w.streamed.most_ops_held, w.streamed.batches);
  return w;
}

}  // namespace

TEST_CASE("streamed ring collectives run exactly as the whole plan", "[model][streaming]") {
  // Also with an event latency, which no shipped file sets: an op of a batch that became ready
  // late would move the run.
  for (const double event_latency : {0.0, 3e-6})
    for (const test::ShippedMachine& m : test::kShippedMachines)
      test::on_machine(
          m,
          [&](const topo::Router& router, const std::vector<topo::NodeId>& gpus) {
            for (Collective c :
                 {Collective::allreduce, Collective::reduce_scatter, Collective::allgather})
              for (std::uint32_t k : {1u, 3u, 8u}) {
                PlanRequest req;
                req.collective = c;
                req.algorithm = Algorithm::ring;
                req.size = 48 * MiB + 4 * 48 * 7;  // chunks of unequal size
                req.chunks = k;
                req.ranks = gpus;
                INFO(fmt::format("{} {} k={}, event latency {}", m.file, to_string(c), k,
                                 event_latency));
                check_streams_exactly(router, req);
              }
          },
          event_latency);
}

TEST_CASE("streamed hier allreduce runs exactly as the whole plan", "[model][streaming]") {
  struct Machine {
    const char* file;
    bool ecmp;
    std::uint32_t gpus;    // first GPUs of the file taking part; 0: all
    std::uint32_t stride;  // every stride-th of them
  };
  // One server (phases 1 and 3 only), with and without host staging; four servers with staging
  // across some of them; and the rail-optimised fabric with ECMP: 2 and 8 servers of 8 GPUs,
  // and one GPU in each of 16 servers (phase 2 only).
  const Machine machines[] = {
      {"dgx-h100.json", false, 0, 1},     {"t4x4-pcie.json", false, 0, 1},
      {"hetero-rack.json", false, 0, 1},  {"cluster-1024.json", true, 16, 1},
      {"cluster-1024.json", true, 64, 1}, {"cluster-1024.json", true, 128, 8}};
  for (const Machine& m : machines) {
    topo::Topology t = topo::load_topology(test::config_path(m.file));
    std::vector<topo::NodeId> gpus;
    const std::vector<topo::NodeId> all = t.gpus();
    const std::size_t n = m.gpus != 0 ? m.gpus : all.size();
    for (std::size_t i = 0; i < n; i += m.stride) gpus.push_back(all[i]);
    // Also with event latencies, as for the rings: hier's last phase waits, across streams, for
    // reductions of the phase before, some finished before its batch existed, which must still
    // delay it by the latency from their end. Calibration finds about 3 us; the longer ones
    // outlast whole phases, so that the wait outlives the batch's registration.
    for (const double event_latency : {0.0, 3e-6, 40e-6, 2e-3}) {
      for (topo::NodeId g : all) t.node(g).event_latency = event_latency;
      const topo::Router router(t, topo::RoutingOptions{.ecmp = m.ecmp});
      for (std::uint32_t k : {1u, 3u, 8u}) {
        PlanRequest req;
        req.algorithm = Algorithm::hier;
        req.size = 48 * MiB + 4 * 48 * 7;  // chunks, segments and pieces of unequal size
        req.chunks = k;
        req.ranks = gpus;
        INFO(fmt::format("{} {} GPUs k={}, event latency {}", m.file, gpus.size(), k,
                         event_latency));
        // The streamed run does not count the releases it resolves at registration, of
        // reductions that finished more than the latency before (16 of 1760 events on the
        // heterogeneous rack at k = 1 and 3 us).
        check_streams_exactly(router, req, event_latency > 0);
      }
    }
  }
}

TEST_CASE("where links differ, a streamed run holding a fifth of its plan matches the whole",
          "[model][streaming]") {
  // Half of the servers reach their NICs and CPUs through 12 GB/s PCIe links instead of 63: the
  // ranks upstream of them run ahead, so the window of records grows, and its ring of records
  // is regrown, many times while its oldest op moves (docs/performance.md).
  const topo::Topology t = topo::load_topology(std::string(COLLSIM_SOURCE_DIR) +
                                               "/tests/reliability/inputs/topology/mixed-256.json");
  const topo::Router router(t, topo::RoutingOptions{.ecmp = true});
  for (const Algorithm a : {Algorithm::ring, Algorithm::hier})
    for (std::uint32_t k : {1u, 4u}) {
      PlanRequest req = ring_request(64 * MiB + 4 * 256 * 3, k);  // pieces of unequal size
      req.algorithm = a;
      INFO(fmt::format("{} k={}", to_string(a), k));
      check_streams_exactly(router, req);
      const sim::Result r = stream(router, req, {}).result;
      INFO(fmt::format("{} of {} ops held at most", r.ops_held, r.ops_total));
      // About a fifth (19-24 %), where the uniform fabric holds a few percent: the window this
      // case is about.
      CHECK(r.ops_held * 10 > r.ops_total);
    }
}

TEST_CASE("a streamed run keeps a window of the plan, not all of it", "[model][streaming]") {
  const topo::Topology t = topo::load_topology(test::config_path("cluster-1024.json"));
  const topo::Router router(t, topo::RoutingOptions{.ecmp = true});
  PlanRequest req;
  req.algorithm = Algorithm::ring;
  req.size = 256 * MiB;
  req.chunks = 2;
  req.ranks = t.gpus();
  req.ranks.resize(256);
  // 510 steps: the window holds a few of them (each step is 256 ranks x 2 chunks x 2-3 ops).
  const Windowed w = windowed(router, req);
  INFO(w.summary);
  CHECK(w.streamed.most_ops_held * 20 < w.plan_ops);
}

TEST_CASE("a streamed hier allreduce keeps a window of the plan, not all of it",
          "[model][streaming]") {
  const topo::Topology t = topo::load_topology(test::config_path("cluster-1024.json"));
  const topo::Router router(t, topo::RoutingOptions{.ecmp = true});
  PlanRequest req;
  req.algorithm = Algorithm::hier;
  req.size = 256 * MiB;
  req.chunks = 1;
  // 128 servers of 8 GPUs: 7 + 2 x 127 + 7 = 268 steps of 1024 ranks x 2-3 ops.
  const Windowed w = windowed(router, req);
  INFO(w.summary);
  CHECK(w.streamed.batches > 268);
  CHECK(w.streamed.most_ops_held * 15 < w.plan_ops);
}

TEST_CASE("streamed runs stop early exactly where the whole plan does", "[model][streaming]") {
  const topo::Topology t = topo::load_topology(test::config_path("dgx-h100.json"));
  const topo::Router router(t);
  const PlanRequest req = ring_request(64 * MiB, 4);
  const Plan whole = generate(router, req);
  sim::Options by_events;
  by_events.max_events = 500;
  const auto a = sim::simulate(router, whole, by_events);
  const auto b = stream(router, req, by_events).result;
  CHECK(a.stop == sim::StopReason::event_limit);
  test::check_same_run(a, b);
  sim::Options by_time;
  by_time.max_time = a.time / 3;
  test::check_same_run(sim::simulate(router, whole, by_time), stream(router, req, by_time).result);
}

TEST_CASE("a streamed run stops once it holds more ops than max_ops_held, and not before",
          "[model][streaming]") {
  // hetero-rack's servers differ, so the ranks upstream of its slower links run ahead and the
  // window of ops held grows during the run.
  const topo::Topology t = topo::load_topology(test::config_path("hetero-rack.json"));
  const topo::Router router(t);
  const PlanRequest req = ring_request(64 * MiB, 8);
  const sim::Result free = stream(router, req, {}).result;
  REQUIRE(free.stop == sim::StopReason::finished);
  REQUIRE(free.ops_held > 100);
  sim::Options at_most;
  at_most.max_ops_held = free.ops_held;  // exactly what it needs: the same run
  test::check_same_run(free, stream(router, req, at_most).result);
  sim::Options under;
  under.max_ops_held = free.ops_held - 1;
  const sim::Result stopped = stream(router, req, under).result;
  CHECK(stopped.stop == sim::StopReason::memory_limit);
  CHECK(stopped.ops_held > under.max_ops_held);
  CHECK(stopped.ops_done < free.ops_done);
  CHECK(stopped.time <= free.time);
  // A whole plan registered in windows stops the same way on its records.
  sim::Options windows;
  windows.window_ops = 64;
  const Plan whole = generate(router, req);
  const sim::Result whole_free = sim::simulate(router, whole, windows);
  REQUIRE(whole_free.stop == sim::StopReason::finished);
  windows.max_ops_held = whole_free.ops_held - 1;
  CHECK(sim::simulate(router, whole, windows).stop == sim::StopReason::memory_limit);
}

TEST_CASE("streamed runs with capacity changes and background traffic match",
          "[model][streaming]") {
  const topo::Topology t = topo::load_topology(test::config_path("t4x4-pcie.json"));
  const topo::Router router(t);
  const PlanRequest req = ring_request(32 * MiB, 4);
  const Plan whole = generate(router, req);
  sim::Options o;
  o.record_ops = true;
  const auto probe = sim::simulate(router, whole);
  // A link of the first rank's route slows down and recovers; a background flow crosses it.
  const auto& route = router.route(whole.rank_gpu[0], whole.rank_gpu[1]);
  REQUIRE(!route.links.empty());
  o.capacity.push_back(sim::CapacityTrace{
      route.links.front(), {{probe.time * 0.2, 1e9}, {probe.time * 0.6, kUnlimited}}});
  o.background.push_back(
      sim::BackgroundFlow{whole.rank_gpu[0], whole.rank_gpu[1], 8 * MiB, probe.time * 0.1});
  test::check_same_run(sim::simulate(router, whole, o), stream(router, req, o).result);
}

TEST_CASE("requests that cannot stream come whole, in one batch", "[model][streaming]") {
  const topo::Topology t = topo::load_topology(test::config_path("dgx-h100.json"));
  const topo::Router router(t);
  PlanRequest req;
  req.algorithm = Algorithm::tree;
  req.size = 16 * MiB;
  req.chunks = 4;
  CHECK_FALSE(streams(req, 8));
  Streamed s = stream(router, req, {});
  CHECK(s.batches == 1);
  CHECK(test::same_double(s.result.time, sim::simulate(router, generate(router, req)).time));
  // A ring whose pieces would be empty (fewer elements than p x k) is not streamed either.
  req.algorithm = Algorithm::ring;
  req.size = 8 * 4 * 4 - 4;
  CHECK_FALSE(streams(req, 8));
  s = stream(router, req, {});
  CHECK(s.batches == 1);
  CHECK(test::same_double(s.result.time, sim::simulate(router, generate(router, req)).time));
  // hier cuts chunks into segments and segments into pieces: the same p x k elements.
  req.algorithm = Algorithm::hier;
  CHECK_FALSE(streams(req, 8));
  s = stream(router, req, {});
  CHECK(s.batches == 1);
  CHECK(test::same_double(s.result.time, sim::simulate(router, generate(router, req)).time));
  req.size = 8 * 4 * 4;
  CHECK(streams(req, 8));
  // Other hier collectives are refused by the generator; only allreduce streams.
  req.collective = Collective::broadcast;
  CHECK_FALSE(streams(req, 8));
}

TEST_CASE("streamed runs whose copies may wait for an engine run as the whole plan",
          "[model][streaming]") {
  for (const char* file : {"hetero-rack.json", "t4x4-pcie.json"})
    for (std::uint32_t engines : {1u, 2u, 3u}) {
      topo::Topology t = topo::load_topology(test::config_path(file));
      for (topo::NodeId g : t.gpus()) t.node(g).copy_engines = engines;
      const topo::Router router(t);
      for (Algorithm a : {Algorithm::ring, Algorithm::hier})
        for (HostMemory memory : {HostMemory::pinned, HostMemory::pageable})
          for (std::uint32_t k : {1u, 3u, 8u}) {
            PlanRequest req;
            req.algorithm = a;
            req.size = 48 * MiB + 4 * 48 * 7;
            req.chunks = k;
            req.host_memory = memory;
            INFO(fmt::format("{} {} engines, {} k={} {}", file, engines, to_string(a), k,
                             to_string(memory)));
            if (!sim::streams_exactly(router, req)) continue;
            check_streams_exactly(router, req);
          }
    }
}
