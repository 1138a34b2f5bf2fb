// Two GPU parameters that describe how work on one device meets: the event latency of edges
// between streams, and virtual ranks that share one physical memory. Each expected time is the
// closed form written next to it.
#include <catch2/catch.hpp>
#include <functional>

#include "sim/engine.hpp"
#include "tests/sim/sim_fixtures.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::sim::testing;
using sched::OpKind;

namespace {

constexpr double kEvent = 3e-6;

struct TwoGpusWithEvents {
  topo::Topology topology;
  TwoGpusWithEvents(double event_latency, double memory_bandwidth = kUnlimited) {
    for (const char* name : {"gpu0", "gpu1"}) {
      const auto id = add_gpu(topology, name);
      topology.node(id).event_latency = event_latency;
      topology.node(id).memory_bandwidth = memory_bandwidth;
    }
    add_duplex(topology, 0, 1, 10e9, 1e-6);
    topo::finalize(topology);
  }
  sched::Plan plan() const {
    sched::Plan p;
    p.rank_gpu = {0, 1};
    return p;
  }
};

double op_end(const sim::Result& r, sched::OpId op) {
  return r.ops.at(op).end;
}

sim::Result run(const TwoGpusWithEvents& t, const sched::Plan& plan) {
  const topo::Router router(t.topology);
  sim::Options options;
  options.record_ops = true;
  return sim::simulate(router, plan, options);
}

}  // namespace

TEST_CASE("event latency: an edge between streams waits for it, stream order does not",
          "[sim][event]") {
  const TwoGpusWithEvents t(kEvent);
  auto plan = t.plan();
  const auto a = plan.add(test::delay_op(0, 1e-6, 0));
  const auto same = plan.add(test::delay_op(0, 2e-6, 0));            // stream order after a
  const auto other = plan.add(test::delay_op(0, 2e-6, 1), {a});      // another stream, after a
  const auto remote = plan.add(test::delay_op(1, 2e-6, 0), {same});  // another rank, after same
  const auto r = run(t, plan);
  CHECK(op_end(r, same) == Approx(1e-6 + 2e-6).epsilon(1e-12));
  CHECK(op_end(r, other) == Approx(1e-6 + kEvent + 2e-6).epsilon(1e-12));
  CHECK(op_end(r, remote) == Approx(3e-6 + kEvent + 2e-6).epsilon(1e-12));

  // Without the latency every edge is free: the same plan on GPUs without it.
  const auto free = run(TwoGpusWithEvents(0), plan);
  CHECK(op_end(free, other) == Approx(1e-6 + 2e-6).epsilon(1e-12));
  CHECK(op_end(free, remote) == Approx(3e-6 + 2e-6).epsilon(1e-12));
}

TEST_CASE("event latency: a transfer ends on the receiver's stream, the sender hears later",
          "[sim][event]") {
  const TwoGpusWithEvents t(kEvent);
  auto plan = t.plan();
  const Bytes bytes = 10000;  // 1 us on the 10 GB/s link, after its 1 us latency
  const auto [send, recv] = add_transfer(plan, 0, 1, bytes);
  const auto after_send = plan.add(test::delay_op(0, 1e-6, 0));  // sender's stream, in order
  const auto after_recv = plan.add(test::delay_op(1, 1e-6, 0));  // receiver's stream, in order
  const auto r = run(t, plan);
  const double transfer = 1e-6 + static_cast<double>(bytes) / 10e9;
  CHECK(op_end(r, send) == Approx(transfer).epsilon(1e-12));
  CHECK(op_end(r, recv) == Approx(transfer).epsilon(1e-12));
  CHECK(op_end(r, after_recv) == Approx(transfer + 1e-6).epsilon(1e-12));
  CHECK(op_end(r, after_send) == Approx(transfer + kEvent + 1e-6).epsilon(1e-12));
  CHECK(r.time == Approx(transfer + kEvent + 1e-6).epsilon(1e-12));
}

TEST_CASE("event latency: a streamed batch waits it out after ops that ended before it existed",
          "[sim][event][streaming]") {
  // Batch 1: a on stream 0 and e on stream 1 of rank 0, 1 us each, and a transfer on stream 2
  // from rank 0 to rank 1, 1 us to 1.5 us. Batch 2: c after e on rank 0's stream 1 (1 us to
  // 2 us), c2 after the recv on rank 1's stream 2 (1.5 us to 2.5 us). The engine registers
  // batch 3 just before c completes, at 1.5 us, after a and the transfer have ended but within
  // the latency. Batch 3: b after c, also waiting for a, across streams: the latency from a's
  // end; b2 after c2, also waiting for the send, which ran on b2's stream (a transfer runs on
  // its receiver's): no latency.
  const TwoGpusWithEvents t(kEvent);
  const Bytes bytes = 5000;  // 0.5 us on the 10 GB/s link, after its 1 us latency
  sched::OpId a = 0, b = 0, b2 = 0;
  const auto build = [&](sched::Plan& plan, const std::function<void()>& batch) {
    plan.waits_on_finished = true;  // b and b2 do
    a = plan.add(test::delay_op(0, 1e-6, 0));
    const auto e = plan.add(test::delay_op(0, 1e-6, 1));
    const auto send = add_transfer(plan, 0, 1, bytes, {}, {}, 2).send;
    batch();
    plan.add(test::delay_op(0, 1e-6, 1), {e});
    plan.add(test::delay_op(1, 1e-6, 2));
    batch();
    b = plan.add(test::delay_op(0, 1e-6, 1), {a});
    b2 = plan.add(test::delay_op(1, 1e-6, 2), {send});
    batch();
  };
  const topo::Router router(t.topology);
  sim::Options options;
  options.record_ops = true;
  sched::Plan whole = t.plan();
  build(whole, [] {});
  const sim::Result expected = sim::simulate(router, whole, options);
  sched::Plan growing = t.plan();
  const sim::Result streamed = sim::simulate_streaming(
      router, growing, [&](const std::function<void()>& batch) { build(growing, batch); }, options);
  const double transfer = 1e-6 + static_cast<double>(bytes) / 10e9;
  CHECK(op_end(expected, b) == Approx(1e-6 + kEvent + 1e-6).epsilon(1e-12));
  CHECK(op_end(expected, b2) == Approx(transfer + 2e-6).epsilon(1e-12));
  CHECK(op_end(streamed, b) == op_end(expected, b));
  CHECK(op_end(streamed, b2) == op_end(expected, b2));
  CHECK(streamed.events == expected.events);
}

TEST_CASE("memory owner: virtual ranks on one device share its memory", "[sim][memory]") {
  const double memory = 300e9;
  const Bytes bytes = 1 << 20;
  auto plan_of = [&](const TwoGpusWithEvents& t) {
    auto plan = t.plan();
    plan.add(reduce_op(0, bytes));
    plan.add(reduce_op(1, bytes));
    return plan;
  };
  // Each reduction moves 3 bytes of memory traffic per byte.
  const double alone = 3.0 * static_cast<double>(bytes) / memory;
  const TwoGpusWithEvents own(0, memory);
  CHECK(run(own, plan_of(own)).time == Approx(alone).epsilon(1e-12));

  TwoGpusWithEvents shared(0, memory);
  shared.topology.node(1).memory_owner = 0;
  CHECK(run(shared, plan_of(shared)).time == Approx(2 * alone).epsilon(1e-12));

  // One reduction at a time has the whole memory either way.
  auto serial = shared.plan();
  const auto first = serial.add(reduce_op(0, bytes));
  serial.add(reduce_op(1, bytes), {first});
  CHECK(run(shared, serial).time == Approx(2 * alone).epsilon(1e-12));
}
