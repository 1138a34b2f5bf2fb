// Bandwidth sharing between flows. The expected numbers come from max-min fairness worked by
// hand in the comments, never from the engine's output.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <memory>

#include "sim/engine.hpp"
#include "tests/sim/sim_fixtures.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::sim::testing;
using sched::BufferId;
using sched::OpKind;

namespace {

// One GPU with one copy engine, joined to a CPU by a duplex PCIe link of 10 GB/s: a d2h copy of
// kCopyBytes takes 0.1 s. Add ops to `plan`, then run().
struct OneCopyEngine {
  static constexpr Bytes kCopyBytes = 1'000'000'000;
  topo::Topology t;
  topo::NodeId gpu;
  std::unique_ptr<topo::Router> router;
  sched::Plan plan;
  OneCopyEngine() {
    gpu = add_gpu(t, "gpu0");
    const auto cpu = add_node(t, "cpu0", topo::NodeKind::cpu);
    t.node(gpu).copy_engines = 1;
    add_duplex(t, gpu, cpu, 10e9, 0, topo::LinkKind::pcie);
    topo::finalize(t);
    router = std::make_unique<topo::Router>(t);
    plan.rank_gpu = {gpu};
  }
  sched::OpId add_copy(sched::StreamId stream) {
    return plan.add(copy_op(0, BufferId::input, BufferId::host, kCopyBytes, stream));
  }
  sim::Result run() const {
    sim::Options o;
    o.record_ops = true;
    return sim::simulate(*router, plan, o);
  }
};

}  // namespace

TEST_CASE("two flows on one link each take twice as long", "[sim][contention]") {
  topo::Topology t;
  const auto a = add_gpu(t, "gpu0");
  const auto b = add_gpu(t, "gpu1");
  const double bw = 10e9;
  add_duplex(t, a, b, bw, 0);
  topo::finalize(t);
  topo::Router router(t);
  sched::Plan plan;
  plan.rank_gpu = {a, b};
  const Bytes s = 1'000'000'000;
  SECTION("equal sizes") {
    // Each gets bw / 2: T = s / (bw / 2) = 2 s / bw = 0.2 s, twice the 0.1 s alone.
    add_transfer(plan, 0, 1, s, {}, {}, 0);
    add_transfer(plan, 0, 1, s, {}, {}, 1);
    sim::Options o;
    o.record_ops = true;
    const auto r = sim::simulate(router, plan, o);
    CHECK(r.ops[1].end == Approx(0.2).epsilon(1e-12));
    CHECK(r.ops[3].end == Approx(0.2).epsilon(1e-12));
    CHECK(r.link_bytes[0] == 2 * s);
    CHECK(r.link_busy[0] == Approx(0.2).epsilon(1e-12));
  }
  SECTION("the survivor speeds up when the other leaves") {
    // Both at bw/2 until the small one (s) ends at 2 s / bw = 0.2 s; the big one (2 s) has s
    // left, alone at bw: 0.1 s more. T = 0.3 s.
    add_transfer(plan, 0, 1, s, {}, {}, 0);
    add_transfer(plan, 0, 1, 2 * s, {}, {}, 1);
    sim::Options o;
    o.record_ops = true;
    const auto r = sim::simulate(router, plan, o);
    CHECK(r.ops[1].end == Approx(0.2).epsilon(1e-12));
    CHECK(r.ops[3].end == Approx(0.3).epsilon(1e-12));
  }
  SECTION("opposite directions do not share") {
    // A duplex link is two directed links: both take s / bw = 0.1 s.
    add_transfer(plan, 0, 1, s, {}, {}, 0);
    add_transfer(plan, 1, 0, s, {}, {}, 1);
    CHECK(sim::simulate(router, plan).time == Approx(0.1).epsilon(1e-12));
  }
}

TEST_CASE("the classic three-link max-min example", "[sim][contention]") {
  // A -> B -> C -> D with capacities 10, 4, 10 GB/s. Flows: f0 A->D (all three links),
  // f1 A->B, f2 B->C, f3 C->D. Link BC is the tightest: f0 and f2 get 4/2 = 2 each; then f1
  // gets 10 - 2 = 8 on AB and f3 gets 10 - 2 = 8 on CD.
  // Sizes (GB): f0 2, f1 16, f2 4, f3 12.
  //   f0: 2 / 2 = 1.0 s.
  //   At 1.0 s f2 has 2 left, alone on BC at 4: + 0.5 -> 1.5 s.
  //   f3 has 12 - 8 = 4 left, alone on CD at 10: + 0.4 -> 1.4 s.
  //   f1 has 16 - 8 = 8 left, alone on AB at 10: + 0.8 -> 1.8 s.
  topo::Topology t;
  const auto a = add_gpu(t, "A");
  const auto b = add_gpu(t, "B");
  const auto c = add_gpu(t, "C");
  const auto d = add_gpu(t, "D");
  t.add_link(topo::Link{a, b, topo::LinkKind::nvlink, 10e9, 0, 0});
  t.add_link(topo::Link{b, c, topo::LinkKind::nvlink, 4e9, 0, 0});
  t.add_link(topo::Link{c, d, topo::LinkKind::nvlink, 10e9, 0, 0});
  topo::finalize(t);
  topo::Router router(t);
  sched::Plan plan;
  plan.rank_gpu = {a, b, c, d};
  const Bytes g = 1'000'000'000;
  const auto f0 = add_transfer(plan, 0, 3, 2 * g, {}, {}, 0);
  const auto f1 = add_transfer(plan, 0, 1, 16 * g, {}, {}, 1);
  const auto f2 = add_transfer(plan, 1, 2, 4 * g, {}, {}, 2);
  const auto f3 = add_transfer(plan, 2, 3, 12 * g, {}, {}, 3);
  sim::Options o;
  o.record_ops = true;
  const auto r = sim::simulate(router, plan, o);
  CHECK(r.ops[f0.recv].end == Approx(1.0).epsilon(1e-12));
  CHECK(r.ops[f1.recv].end == Approx(1.8).epsilon(1e-12));
  CHECK(r.ops[f2.recv].end == Approx(1.5).epsilon(1e-12));
  CHECK(r.ops[f3.recv].end == Approx(1.4).epsilon(1e-12));
  CHECK(r.time == Approx(1.8).epsilon(1e-12));
  // Bytes per link: AB carries f0 + f1 = 18 GB, BC f0 + f2 = 6 GB, CD f0 + f3 = 14 GB.
  CHECK(r.link_bytes[0] == 18 * g);
  CHECK(r.link_bytes[1] == 6 * g);
  CHECK(r.link_bytes[2] == 14 * g);
}

namespace {

// N GPUs behind one PCIe switch whose uplink leads to a NIC, mirrored on a second server.
struct StagedServers {
  topo::Topology t;
  std::vector<topo::NodeId> local, remote;
  topo::LinkId uplink = 0;
  topo::NodeId cpu = 0;
  StagedServers(int n, double pcie, double up, double net) {
    const auto sw0 = add_node(t, "pcie0", topo::NodeKind::pcie_switch);
    const auto sw1 = add_node(t, "pcie1", topo::NodeKind::pcie_switch);
    const auto nic0 = add_node(t, "nic0", topo::NodeKind::nic);
    const auto nic1 = add_node(t, "nic1", topo::NodeKind::nic);
    cpu = add_node(t, "cpu0", topo::NodeKind::cpu);
    for (int i = 0; i < n; ++i) {
      local.push_back(add_gpu(t, fmt::format("a{}", i)));
      add_duplex(t, local.back(), sw0, pcie, 0, topo::LinkKind::pcie);
    }
    for (int i = 0; i < n; ++i) {
      remote.push_back(add_gpu(t, fmt::format("b{}", i)));
      add_duplex(t, remote.back(), sw1, pcie, 0, topo::LinkKind::pcie);
    }
    uplink = add_duplex(t, sw0, nic0, up, 0, topo::LinkKind::pcie);
    add_duplex(t, sw1, nic1, up, 0, topo::LinkKind::pcie);
    add_duplex(t, nic0, nic1, net, 0, topo::LinkKind::network);
    add_duplex(t, cpu, sw0, pcie, 0, topo::LinkKind::pcie);
    topo::finalize(t);
  }
};

}  // namespace

TEST_CASE("N GPUs staging through one PCIe switch to one NIC get 1/N of the uplink",
          "[sim][contention]") {
  // Uplink U = 16 GB/s, GPU links 32 GB/s, network 100 GB/s. N GPUs each send s to a remote
  // GPU: the uplink is the bottleneck, each flow gets U / N, T = N s / U.
  for (int n : {1, 2, 4, 7}) {
    StagedServers box(n, 32e9, 16e9, 100e9);
    topo::Router router(box.t);
    sched::Plan plan;
    for (int i = 0; i < n; ++i) plan.rank_gpu.push_back(box.local[static_cast<std::size_t>(i)]);
    for (int i = 0; i < n; ++i) plan.rank_gpu.push_back(box.remote[static_cast<std::size_t>(i)]);
    const Bytes s = 800'000'000;
    for (int i = 0; i < n; ++i)
      add_transfer(plan, static_cast<sched::RankId>(i), static_cast<sched::RankId>(n + i), s);
    const auto r = sim::simulate(router, plan);
    INFO("N = " << n);
    CHECK(r.time == Approx(n * static_cast<double>(s) / 16e9).epsilon(1e-12));
    CHECK(r.link_bytes[box.uplink] == static_cast<Bytes>(n) * s);
  }
}

TEST_CASE("a host copy competes with network traffic on the same PCIe link", "[sim][contention]") {
  // GPU a0 sends s to b0 (route a0 -> pcie0 -> nic0 -> ...) while copying s to host memory
  // (a0 -> pcie0 -> cpu0). Both cross a0 -> pcie0 at P = 16 GB/s; everything else is 100 GB/s.
  // Each gets P / 2: T = 2 s / P. Alone, each would take s / P.
  StagedServers box(1, 16e9, 100e9, 100e9);
  topo::Router router(box.t);
  sched::Plan plan;
  plan.rank_gpu = {box.local[0], box.remote[0]};
  const Bytes s = 1'600'000'000;
  add_transfer(plan, 0, 1, s, {}, {}, 0);
  plan.add(copy_op(0, BufferId::output, BufferId::host, s, 1));
  CHECK(sim::simulate(router, plan).time ==
        Approx(2.0 * static_cast<double>(s) / 16e9).epsilon(1e-12));
}

TEST_CASE("copy-engine limits serialise copies", "[sim][contention]") {
  // One GPU on a duplex PCIe link of P = 10 GB/s to a CPU. A d2h copy and an h2d copy of s use
  // opposite directions, so they never share bandwidth; only the copy engines can order them.
  const double p = 10e9;
  const Bytes s = 1'000'000'000;
  auto run = [&](std::uint32_t engines) {
    topo::Topology t;
    const auto g = add_gpu(t, "gpu0");
    const auto c = add_node(t, "cpu0", topo::NodeKind::cpu);
    t.node(g).copy_engines = engines;
    add_duplex(t, g, c, p, 0, topo::LinkKind::pcie);
    topo::finalize(t);
    topo::Router router(t);
    sched::Plan plan;
    plan.rank_gpu = {g};
    plan.add(copy_op(0, BufferId::input, BufferId::host, s, 0));
    plan.add(copy_op(0, BufferId::host, BufferId::output, s, 1));
    plan.add(copy_op(0, BufferId::input, BufferId::host, s, 2));
    sim::Options o;
    o.record_ops = true;
    return sim::simulate(router, plan, o);
  };
  SECTION("one engine: one copy at a time, in readiness order") {
    // T = 3 s / P = 0.3 s; starts 0, 0.1, 0.2.
    const auto r = run(1);
    CHECK(r.time == Approx(0.3).epsilon(1e-12));
    CHECK(r.ops[0].start == 0.0);
    CHECK(r.ops[1].start == Approx(0.1).epsilon(1e-12));
    CHECK(r.ops[2].start == Approx(0.2).epsilon(1e-12));
    REQUIRE(r.copy_engines.size() == 1);
    CHECK(r.copy_engines[0].busy_time == Approx(0.3).epsilon(1e-12));
    CHECK(r.copy_engines[0].max_wait == Approx(0.2).epsilon(1e-12));
  }
  SECTION("two engines: the two d2h copies share the GPU->CPU direction") {
    // Copies 0 (d2h) and 1 (h2d) start at 0; copy 2 (d2h) waits for the first engine at 0.1,
    // then runs alone on GPU->CPU: T = 0.2 s.
    const auto r = run(2);
    CHECK(r.ops[2].start == Approx(0.1).epsilon(1e-12));
    CHECK(r.time == Approx(0.2).epsilon(1e-12));
  }
  SECTION("unlimited engines") {
    // All three start at 0. The two d2h copies share P: 2 s / P = 0.2 s; the h2d one 0.1 s.
    const auto r = run(0);
    CHECK(r.ops[2].start == 0.0);
    CHECK(r.ops[1].end == Approx(0.1).epsilon(1e-12));
    CHECK(r.time == Approx(0.2).epsilon(1e-12));
  }
}

TEST_CASE("copies that become ready at one instant get engines in plan order, not event order",
          "[sim][contention]") {
  // One engine, d2h copies of s at P = 10 GB/s (0.1 s each). Both copies become ready at 0.5:
  //   op 0, op 1: delays of 0.25 (stream 0), op 2: copy A after them
  //   op 3: delay 0.5 (stream 1),             op 4: copy B after it
  // The event that readies B was queued at 0 and the one that readies A at 0.25, so B's runs
  // first; the engine still goes to A, the earlier op: A runs [0.5, 0.6], B [0.6, 0.7].
  OneCopyEngine box;
  box.plan.add(timed_op(OpKind::delay, 0, 0.25, 0));
  box.plan.add(timed_op(OpKind::delay, 0, 0.25, 0));
  const auto a = box.add_copy(0);
  box.plan.add(timed_op(OpKind::delay, 0, 0.5, 1));
  const auto b = box.add_copy(1);
  const auto r = box.run();
  REQUIRE(r.ops[a].ready == 0.5);
  REQUIRE(r.ops[b].ready == 0.5);
  CHECK(r.ops[a].start == 0.5);
  CHECK(r.ops[b].start == Approx(0.6).epsilon(1e-12));
  CHECK(r.time == Approx(0.7).epsilon(1e-12));
  REQUIRE(r.copy_engines.size() == 1);
  CHECK(r.copy_engines[0].max_wait == Approx(0.1).epsilon(1e-12));
}

TEST_CASE("host memcpy drains at the CPU's memcpy bandwidth", "[sim][contention]") {
  topo::Topology t;
  const auto g = add_gpu(t, "gpu0");
  const auto c = add_node(t, "cpu0", topo::NodeKind::cpu);
  t.node(c).memcpy_bandwidth = 5e9;
  add_duplex(t, g, c, 10e9, 0, topo::LinkKind::pcie);
  topo::finalize(t);
  topo::Router router(t);
  sched::Plan plan;
  plan.rank_gpu = {g};
  // Two host copies of 1 GB on two streams share 5 GB/s: T = 2 / 5 = 0.4 s.
  plan.add(copy_op(0, BufferId::host, BufferId::host, 1'000'000'000, 0));
  plan.add(copy_op(0, BufferId::host, BufferId::host, 1'000'000'000, 1));
  CHECK(sim::simulate(router, plan).time == Approx(0.4).epsilon(1e-12));
}

TEST_CASE("a pageable host buffer also drains through the host's memcpy", "[sim][contention]") {
  // PCIe P = 10 GB/s; the CPU copies at C = 5 GB/s. The driver stages a pageable copy through a
  // pinned buffer, a host memcpy of every byte: the copy runs at min(P, C).
  topo::Topology t;
  const auto g = add_gpu(t, "gpu0");
  const auto c = add_node(t, "cpu0", topo::NodeKind::cpu);
  t.node(c).memcpy_bandwidth = 5e9;
  add_duplex(t, g, c, 10e9, 2e-6, topo::LinkKind::pcie);
  topo::finalize(t);
  topo::Router router(t);
  const Bytes s = 1'000'000'000;
  auto plan_of = [&](sched::HostMemory memory) {
    sched::Plan plan;
    plan.rank_gpu = {g};
    plan.host_memory = memory;
    plan.add(copy_op(0, BufferId::input, BufferId::host, s, 0));
    return plan;
  };
  CHECK(sim::simulate(router, plan_of(sched::HostMemory::pinned)).time ==
        Approx(2e-6 + 1e9 / 10e9).epsilon(1e-12));
  CHECK(sim::simulate(router, plan_of(sched::HostMemory::pageable)).time ==
        Approx(2e-6 + 1e9 / 5e9).epsilon(1e-12));
  // It shares the memcpy with a host copy of s / 2 that starts at once: the memcpy is never idle
  // (the host copy runs alone during the d2h copy's latency) and the d2h copy ends last, so
  // T = (s + s / 2) / C = 0.3 s; without the sharing it would be 2 us + s / C.
  auto shared = plan_of(sched::HostMemory::pageable);
  shared.add(copy_op(0, BufferId::host, BufferId::host, s / 2, 1));
  CHECK(sim::simulate(router, shared).time == Approx(1.5e9 / 5e9).epsilon(1e-12));
}

TEST_CASE("a pageable copy is charged its direction's traffic on the host's memcpy",
          "[sim][contention]") {
  // C = 6 GB/s of memcpy; the driver's staging charged 1.5 bytes of it per byte to the host and
  // 0.5 per byte from it (pageable_traffic): d2h drains at C / 1.5 = 4 GB/s, under the PCIe link's
  // 10 GB/s; h2d would at C / 0.5 = 12 GB/s, so the link's 10 GB/s binds.
  topo::Topology t;
  const auto g = add_gpu(t, "gpu0");
  const auto c = add_node(t, "cpu0", topo::NodeKind::cpu);
  t.node(c).memcpy_bandwidth = 6e9;
  t.node(c).pageable_traffic = {1.5, 0.5};
  add_duplex(t, g, c, 10e9, 0, topo::LinkKind::pcie);
  topo::finalize(t);
  topo::Router router(t);
  const Bytes s = 1'200'000'000;
  auto copy = [&](BufferId src, BufferId dst, std::size_t copies) {
    sched::Plan plan;
    plan.rank_gpu = {g};
    plan.host_memory = sched::HostMemory::pageable;
    for (std::size_t i = 0; i < copies; ++i)
      plan.add(copy_op(0, src, dst, s, static_cast<sched::StreamId>(i)));
    return sim::simulate(router, plan).time;
  };
  CHECK(copy(BufferId::input, BufferId::host, 1) == Approx(1.2e9 / 4e9).epsilon(1e-12));
  CHECK(copy(BufferId::host, BufferId::output, 1) == Approx(1.2e9 / 10e9).epsilon(1e-12));
  // Two h2d copies at once: the link gives each 5 GB/s, and their 2 x 0.5 bytes of memcpy per
  // byte fit in C, so the link still binds.
  CHECK(copy(BufferId::host, BufferId::output, 2) == Approx(2.4e9 / 10e9).epsilon(1e-12));
  // Three d2h copies share the memcpy: 3 x 1.5 bytes per byte at C.
  CHECK(copy(BufferId::input, BufferId::host, 3) == Approx(3 * 1.5 * 1.2e9 / 6e9).epsilon(1e-12));
}

TEST_CASE("reductions on one GPU share its memory bandwidth", "[sim][contention]") {
  topo::Topology t;
  const auto g = add_gpu(t, "gpu0");
  t.node(g).memory_bandwidth = 3e12;
  t.node(g).launch_latency = 1e-6;
  topo::finalize(t);
  topo::Router router(t);
  sched::Plan plan;
  plan.rank_gpu = {g};
  // Two reductions of s on two streams, weight 3 each: 3 x + 3 x = M, x = M / 6.
  // T = launch + s / (M / 6) = 1e-6 + 6 s / M.
  const Bytes s = 1'000'000'000;
  plan.add(reduce_op(0, s, 0));
  plan.add(reduce_op(0, s, 1));
  CHECK(sim::simulate(router, plan).time == Approx(1e-6 + 6.0 * 1e9 / 3e12).epsilon(1e-12));
}

TEST_CASE("waiting copies get the copy engine in readiness order, not op order",
          "[sim][contention]") {
  // One engine, d2h copies of s at P = 10 GB/s (0.1 s each).
  //   op 0: delay 0.05 (stream 0), op 1: copy A after it -> ready at 0.05
  //   op 2: copy B (stream 1)                             -> ready at 0, runs [0, 0.1]
  //   op 3: delay 0.01 (stream 2), op 4: copy C after it -> ready at 0.01
  // The queue holds C (ready 0.01) before A (ready 0.05): C runs [0.1, 0.2], A [0.2, 0.3].
  OneCopyEngine box;
  box.plan.add(timed_op(OpKind::delay, 0, 0.05, 0));
  const auto a = box.add_copy(0);
  const auto b = box.add_copy(1);
  box.plan.add(timed_op(OpKind::delay, 0, 0.01, 2));
  const auto cc = box.add_copy(2);
  const auto r = box.run();
  CHECK(r.ops[b].start == 0.0);
  CHECK(r.ops[cc].start == Approx(0.1).epsilon(1e-12));
  CHECK(r.ops[a].start == Approx(0.2).epsilon(1e-12));
  CHECK(r.ops[a].ready == 0.05);
  CHECK(r.time == Approx(0.3).epsilon(1e-12));
}
