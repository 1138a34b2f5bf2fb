// Single flows and stream semantics: every expected time is a closed form written next to it.
#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <vector>

#include "sim/engine.hpp"
#include "tests/sim/sim_fixtures.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::sim::testing;
using sched::OpKind;

namespace {

struct TwoGpus {
  topo::Topology topology;
  topo::LinkId link = 0;
  TwoGpus(double bandwidth, double latency, double alpha = 0) {
    const auto a = add_gpu(topology, "gpu0");
    const auto b = add_gpu(topology, "gpu1");
    topology.node(a).alpha = alpha;
    topology.node(b).alpha = alpha;
    link = add_duplex(topology, a, b, bandwidth, latency);
    topo::finalize(topology);
  }
  sched::Plan plan() const {
    sched::Plan p;
    p.rank_gpu = {0, 1};
    return p;
  }
};

// n transfers of different sizes share one link, each on a stream of its own: every departure is
// an instant of its own and re-shares all the flows left, n^2 / 2 in all, in 2n events.
void add_shared_transfers(sched::Plan& plan, std::uint32_t n) {
  for (std::uint32_t i = 0; i < n; ++i)
    add_transfer(plan, 0, 1, Bytes{4096} * (i + 1), {}, {}, static_cast<sched::StreamId>(i));
}

}  // namespace

TEST_CASE("a bare two-GPU transfer costs exactly latency + bytes / bandwidth", "[sim]") {
  const double l = 1.5e-6, b = 25e9;
  const Bytes s = 64ull << 20;
  TwoGpus t(b, l);
  topo::Router router(t.topology);
  auto plan = t.plan();
  add_transfer(plan, 0, 1, s);
  const auto r = sim::simulate(router, plan);
  // T = l + s / b, evaluated in the same order as the engine: no rounding difference allowed.
  CHECK(r.time == l + static_cast<double>(s) / b);
  CHECK(r.stop == sim::StopReason::finished);
  CHECK(r.link_bytes[t.link] == s);
  CHECK(r.link_bytes[t.link + 1] == 0);
  // The link drains for s / b seconds; the latency phase does not occupy it.
  CHECK(r.link_busy[t.link] == Approx(static_cast<double>(s) / b).epsilon(1e-12));
  // Utilisation = bytes / (capacity x time) = s / (b (l + s / b)); only the used link reports.
  REQUIRE(r.resources.size() == 1);
  CHECK(r.resources[0].kind == sim::ResourceKind::link);
  CHECK(r.resources[0].index == t.link);
  CHECK(r.resources[0].utilisation ==
        Approx(static_cast<double>(s) / (b * (l + static_cast<double>(s) / b))).epsilon(1e-12));
}

TEST_CASE("a topology without parameters costs nothing", "[sim]") {
  TwoGpus t(kUnlimited, 0);
  topo::Router router(t.topology);
  auto plan = t.plan();
  add_transfer(plan, 0, 1, 1ull << 30);
  add_transfer(plan, 1, 0, 1ull << 30);
  plan.add(reduce_op(0, 1ull << 30));
  // Unlimited bandwidth, zero latency, no alpha, no launch latency: T = 0.
  CHECK(sim::simulate(router, plan).time == 0.0);
}

TEST_CASE("alpha is paid once per transfer", "[sim]") {
  const double l = 2e-6, b = 10e9, alpha = 5e-6;
  const Bytes s = 1'000'000;
  TwoGpus t(b, l, alpha);
  topo::Router router(t.topology);
  auto plan = t.plan();
  // Three transfers back to back on one stream per rank: T = 3 (alpha + l + s / b).
  for (int i = 0; i < 3; ++i) add_transfer(plan, 0, 1, s);
  const auto r = sim::simulate(router, plan);
  CHECK(r.time == Approx(3 * (alpha + l + static_cast<double>(s) / b)).epsilon(1e-12));
}

TEST_CASE("a rank sending to many peers in turn takes each peer's own link", "[sim]") {
  // gpu0 joins six GPUs by links of different latencies and bandwidths. Rank 0 sends to them one
  // after another in an order that comes back to recent peers and to ones it has not sent to for
  // more than four transfers, as a tree's rank does among its parents and children: each
  // transfer must cross its own peer's link whatever the rank sent before.
  topo::Topology t;
  const auto hub = add_gpu(t, "gpu0");
  std::vector<topo::LinkId> link;
  std::vector<double> latency, bandwidth;
  for (int i = 1; i <= 6; ++i) {
    latency.push_back(1e-6 * i);
    bandwidth.push_back(10e9 * i);
    link.push_back(add_duplex(t, hub, add_gpu(t, "gpu" + std::to_string(i)), bandwidth.back(),
                              latency.back()));
  }
  topo::finalize(t);
  topo::Router router(t);
  sched::Plan plan;
  plan.rank_gpu = {0, 1, 2, 3, 4, 5, 6};
  const Bytes s = 1'000'000;
  const std::vector<sched::RankId> peers{1, 2, 1, 3, 2, 4, 5, 6, 1, 1, 3, 6, 2, 5, 4, 1};
  std::vector<int> sent(7, 0);
  double expected = 0;
  for (const sched::RankId p : peers) {
    add_transfer(plan, 0, p, s);
    ++sent[p];
    // Back to back on rank 0's stream: each one costs its own link's l + s / b.
    expected += latency[p - 1] + static_cast<double>(s) / bandwidth[p - 1];
  }
  const auto r = sim::simulate(router, plan);
  CHECK(r.time == Approx(expected).epsilon(1e-12));
  for (int p = 1; p <= 6; ++p) {
    INFO("peer " << p);
    CHECK(r.link_bytes[link[p - 1]] == static_cast<Bytes>(sent[p]) * s);
    CHECK(r.link_bytes[link[p - 1] + 1] == 0);
  }
}

TEST_CASE("a transfer starts when both ends are ready", "[sim]") {
  const double b = 1e9;
  const Bytes s = 1'000'000'000;
  TwoGpus t(b, 0);
  topo::Router router(t.topology);
  auto plan = t.plan();
  // The receiver is busy for 0.25 s first, so the pair starts at 0.25: T = 0.25 + s / b = 1.25.
  plan.add(timed_op(OpKind::compute, 1, 0.25));
  add_transfer(plan, 0, 1, s);
  sim::Options o;
  o.record_ops = true;
  const auto r = sim::simulate(router, plan, o);
  CHECK(r.time == Approx(1.25).epsilon(1e-12));
  CHECK(r.ops[1].ready == 0.0);
  CHECK(r.ops[1].start == 0.25);
  CHECK(r.ops[2].start == 0.25);
  CHECK(r.ops[1].end == r.ops[2].end);
}

TEST_CASE("stream order holds even when a later op's dependencies are ready first", "[sim]") {
  TwoGpus t(1e9, 0);
  topo::Router router(t.topology);
  auto plan = t.plan();
  // Stream 0: A (delay 1.0), then B (compute 0.5, depends on D). Stream 1: D (delay 0.1).
  // D is done at 0.1, but B must wait for A: B runs [1.0, 1.5].
  const auto a = plan.add(timed_op(OpKind::delay, 0, 1.0, 0));
  const auto d = plan.add(timed_op(OpKind::delay, 0, 0.1, 1));
  const auto bop = plan.add(timed_op(OpKind::compute, 0, 0.5, 0), {d});
  sim::Options o;
  o.record_ops = true;
  const auto r = sim::simulate(router, plan, o);
  CHECK(r.ops[a].end == 1.0);
  CHECK(r.ops[d].end == 0.1);
  CHECK(r.ops[bop].start == 1.0);
  CHECK(r.ops[bop].end == 1.5);
  CHECK(r.time == 1.5);
}

TEST_CASE("a streamed op does not wait for a stream predecessor that finished batches before",
          "[sim][streaming]") {
  // Stream 0's only op, A, finishes at 0.1, two batches before C joins stream 0 after it; C
  // waits for D alone. The engine keeps each stream's last op only while it is unfinished.
  TwoGpus t(1e9, 0);
  topo::Router router(t.topology);
  auto whole = t.plan();
  auto streamed = t.plan();
  auto build = [](sched::Plan& plan, const std::function<void()>& batch) {
    plan.add(timed_op(OpKind::delay, 0, 0.1, 0));  // A: [0, 0.1]
    plan.add(timed_op(OpKind::delay, 0, 1.0, 1));  // B: [0, 1.0]
    batch();
    const auto d = plan.add(timed_op(OpKind::delay, 0, 0.5, 1));  // D: [1.0, 1.5]
    batch();
    plan.add(timed_op(OpKind::compute, 0, 0.25, 0), {d});  // C: [1.5, 1.75]
    batch();
  };
  build(whole, [] {});
  const auto r = sim::simulate_streaming(
      router, streamed, [&](std::function<void()> batch) { build(streamed, batch); });
  CHECK(r.time == 1.75);
  CHECK(r.time == sim::simulate(router, whole).time);
  CHECK(r.events == sim::simulate(router, whole).events);
}

TEST_CASE("a dependency may name a later op", "[sim]") {
  // docs/plan-format.md allows forward references. Op 0 waits for op 3 alone (a successor kept in
  // op 3's record); ops 1 and 2 wait for op 4, which so has two successors (a group). Each waiter
  // is on a stream of its own.
  TwoGpus t(1e9, 0);
  topo::Router router(t.topology);
  auto plan = t.plan();
  const auto a = plan.add(timed_op(OpKind::compute, 0, 0.5, 0), {3});
  const auto b = plan.add(timed_op(OpKind::compute, 0, 0.25, 1), {4});
  const auto c = plan.add(timed_op(OpKind::compute, 1, 0.125, 0), {4});
  const auto d = plan.add(timed_op(OpKind::delay, 0, 0.1, 2));
  const auto e = plan.add(timed_op(OpKind::delay, 1, 0.2, 1));
  sim::Options o;
  o.record_ops = true;
  const auto r = sim::simulate(router, plan, o);
  CHECK(r.ops[d].end == 0.1);
  CHECK(r.ops[a].start == 0.1);
  CHECK(r.ops[a].end == 0.6);
  CHECK(r.ops[e].end == 0.2);
  CHECK(r.ops[b].start == 0.2);
  CHECK(r.ops[c].start == 0.2);
  CHECK(r.ops[c].end == 0.2 + 0.125);
  CHECK(r.time == 0.6);
}

TEST_CASE("ops on different streams of one rank overlap", "[sim]") {
  TwoGpus t(1e9, 0);
  topo::Router router(t.topology);
  auto plan = t.plan();
  // Two streams, 0.3 s and 0.7 s: T = max = 0.7 (not the 1.0 a single stream would take).
  plan.add(timed_op(OpKind::compute, 0, 0.3, 0));
  plan.add(timed_op(OpKind::compute, 0, 0.7, 1));
  CHECK(sim::simulate(router, plan).time == 0.7);
}

TEST_CASE("reduce costs launch latency plus three memory passes", "[sim]") {
  TwoGpus t(1e9, 0);
  const double launch = 4e-6, m = 2e12;
  t.topology.node(0).launch_latency = launch;
  t.topology.node(0).memory_bandwidth = m;
  topo::Router router(t.topology);
  auto plan = t.plan();
  const Bytes s = 1ull << 28;
  plan.add(reduce_op(0, s));
  // T = launch + 3 s / M (read two operands, write one result).
  const auto r = sim::simulate(router, plan);
  CHECK(r.time == Approx(launch + 3.0 * static_cast<double>(s) / m).epsilon(1e-12));
  CHECK(r.flows == 1);
}

TEST_CASE("a device-to-device copy reads and writes every byte", "[sim]") {
  TwoGpus t(1e9, 0);
  const double m = 1e12;
  t.topology.node(1).memory_bandwidth = m;
  topo::Router router(t.topology);
  auto plan = t.plan();
  const Bytes s = 1ull << 30;
  plan.add(copy_op(1, sched::BufferId::input, sched::BufferId::output, s));
  // T = 2 s / M.
  CHECK(sim::simulate(router, plan).time ==
        Approx(2.0 * static_cast<double>(s) / m).epsilon(1e-12));
}

TEST_CASE("an empty plan takes no time", "[sim]") {
  TwoGpus t(1e9, 1e-6);
  topo::Router router(t.topology);
  const auto r = sim::simulate(router, t.plan());
  CHECK(r.time == 0.0);
  CHECK(r.events == 0);
}

TEST_CASE("zero-byte transfers pay latency and alpha only", "[sim]") {
  TwoGpus t(1e9, 3e-6, 1e-6);
  topo::Router router(t.topology);
  auto plan = t.plan();
  add_transfer(plan, 0, 1, 0);
  // T = alpha + l.
  CHECK(sim::simulate(router, plan).time == Approx(4e-6).epsilon(1e-12));
}

TEST_CASE("limits stop a run early and say why", "[sim]") {
  TwoGpus t(1e9, 0);
  topo::Router router(t.topology);
  auto plan = t.plan();
  for (int i = 0; i < 10; ++i) plan.add(timed_op(OpKind::delay, 0, 1.0));
  sim::Options o;
  o.max_time = 3.5;
  auto r = sim::simulate(router, plan, o);
  CHECK(r.stop == sim::StopReason::time_limit);
  CHECK(r.time == 3.5);
  sim::Options e;
  e.max_events = 4;
  r = sim::simulate(router, plan, e);
  CHECK(r.stop == sim::StopReason::event_limit);
  CHECK(r.events == 4);
  CHECK(r.time == 4.0);
  std::atomic<bool> cancel{true};
  sim::Options c;
  c.cancel = &cancel;
  for (int i = 0; i < 5000; ++i) plan.add(timed_op(OpKind::delay, 0, 1.0));
  r = sim::simulate(router, plan, c);
  CHECK(r.stop == sim::StopReason::cancelled);
}

TEST_CASE(
    "a progress callback sees the start, every 2^16th event, the time reached and the ops "
    "done",
    "[sim]") {
  TwoGpus t(1e9, 0);
  topo::Router router(t.topology);
  auto plan = t.plan();
  const std::uint64_t n = 150000;
  for (std::uint64_t i = 0; i < n; ++i) plan.add(timed_op(OpKind::delay, 0, 1e-3));
  std::vector<sim::RunProgress> calls;
  sim::Options o;
  o.progress = [&](const sim::RunProgress& at) { calls.push_back(at); };
  const auto r = sim::simulate(router, plan, o);
  REQUIRE(r.events >= n);
  // The first as the run starts: the plan registered, its first op ready, no event yet.
  REQUIRE(calls.size() == 1 + r.events / 65536);
  CHECK(calls.front().events == 0);
  CHECK(calls.front().now == 0);
  CHECK(calls.front().ops_done == 0);
  calls.erase(calls.begin());
  for (std::size_t i = 0; i < calls.size(); ++i) {
    CHECK(calls[i].events == (i + 1) * 65536);
    CHECK(calls[i].now <= r.time);
    CHECK(calls[i].ops_total == n);  // the whole plan, known from the start
    // One event per delay op: the op an event ends is counted done when its callback comes.
    CHECK(calls[i].ops_done == calls[i].events);
    if (i > 0) CHECK(calls[i].now > calls[i - 1].now);
  }
  // The same run without the callback ends the same way.
  const auto quiet = sim::simulate(router, plan);
  CHECK(quiet.time == r.time);
  CHECK(quiet.events == r.events);
}

TEST_CASE("a progress callback also hears of heavy sharing that makes few events slow", "[sim]") {
  // 3000 flows re-share 4.5 M flows in all (past the 2^22 that brings a report) in 6000 events,
  // far fewer than the 2^16 of the event count.
  TwoGpus t(1e9, 0);
  topo::Router router(t.topology);
  auto plan = t.plan();
  add_shared_transfers(plan, 3000);
  std::vector<sim::RunProgress> calls;
  sim::Options o;
  o.progress = [&](const sim::RunProgress& at) { calls.push_back(at); };
  const auto r = sim::simulate(router, plan, o);
  REQUIRE(r.events < 65536);
  REQUIRE(r.sharing.filled >= (std::uint64_t{1} << 22));
  REQUIRE(calls.size() >= 2);
  CHECK(calls.front().events == 0);  // as the run starts
  calls.erase(calls.begin());
  for (std::size_t i = 0; i < calls.size(); ++i) {
    CHECK(calls[i].flows_filled >= (i + 1) * (std::uint64_t{1} << 22));
    CHECK(calls[i].flows_filled <= r.sharing.filled);
    CHECK(calls[i].events <= r.events);
  }
  const auto quiet = sim::simulate(router, plan);
  CHECK(quiet.time == r.time);
}

TEST_CASE("a sharing limit stops heavy sharing at the count, or earlier when on pace for it",
          "[sim]") {
  TwoGpus t(1e9, 0);
  topo::Router router(t.topology);
  auto plan = t.plan();
  add_shared_transfers(plan, 3000);
  const auto full = sim::simulate(router, plan);
  REQUIRE(full.stop == sim::StopReason::finished);
  const std::uint64_t needed = full.sharing.filled;  // about 4.5 M
  REQUIRE(needed > 4'000'000);

  sim::Options o;
  SECTION("a limit above what the run needs changes nothing") {
    o.max_reshared = needed + 1;
    const auto r = sim::simulate(router, plan, o);
    CHECK(r.stop == sim::StopReason::finished);
    CHECK(r.time == full.time);
    CHECK(r.events == full.events);
    CHECK(r.ops_done == r.ops_total);
  }
  SECTION("a limit under it stops the run before its end, not far past the limit") {
    // Half of the work falls in the first 30 % of the departures, when most flows still share
    // the link: the pace reads ahead only once enough ops have ended to say so.
    o.max_reshared = needed / 2;
    const auto r = sim::simulate(router, plan, o);
    CHECK(r.stop == sim::StopReason::sharing_limit);
    CHECK(r.ops_done < r.ops_total);
    CHECK(r.ops_total == plan.num_ops());
    CHECK(r.time < full.time);
    CHECK(r.sharing.filled <= o.max_reshared + 3000);
  }
  SECTION("a run on pace for many times the limit stops early, long before the count") {
    // The first departure re-shares the flows left: its two ops have ended for 3000 flows
    // re-shared, a pace of 9 million for the plan's 6000 ops, over 4 times the limit.
    o.max_reshared = 1'000'000;
    const auto r = sim::simulate(router, plan, o);
    CHECK(r.stop == sim::StopReason::sharing_limit);
    CHECK(r.sharing.filled < o.max_reshared / 16);
    CHECK(r.ops_done > 0);
    CHECK(r.sharing_pace >= 4.0 * static_cast<double>(o.max_reshared));
    // The same counts, so the same stop: runs repeat exactly.
    const auto again = sim::simulate(router, plan, o);
    CHECK(again.events == r.events);
    CHECK(again.time == r.time);
  }
}

TEST_CASE("the sharing pace is read from the ops finished lately, not from a cheap start",
          "[sim]") {
  // 20,000 lone transfers back from gpu1, one after another, cost a filling or two each; the
  // 3000 shared transfers wait for them, so 40,000 of the 46,000 ops finish almost free before
  // the first departure re-shares 3000 flows. The pace since the start stays under the limit
  // until the count itself; the pace since the last check says at once that the run is on pace
  // for millions.
  TwoGpus t(1e9, 0);
  topo::Router router(t.topology);
  auto plan = t.plan();
  constexpr std::uint32_t kCheap = 20'000, kShared = 3000;
  Pair last{};
  for (std::uint32_t i = 0; i < kCheap; ++i) last = add_transfer(plan, 1, 0, 64, {}, {}, kShared);
  for (std::uint32_t i = 0; i < kShared; ++i)
    add_transfer(plan, 0, 1, Bytes{4096} * (i + 1), {last.recv}, {last.send},
                 static_cast<sched::StreamId>(i));
  sim::Options o;
  o.max_reshared = 1'000'000;
  const auto r = sim::simulate(router, plan, o);
  CHECK(r.stop == sim::StopReason::sharing_limit);
  CHECK(r.ops_done > 2 * kCheap);
  CHECK(r.sharing.filled < o.max_reshared / 2);
  CHECK(r.sharing_pace >= 4.0 * static_cast<double>(o.max_reshared));
  // The pace since the start, at the stop, is far under the 4 million it needs.
  CHECK(static_cast<double>(r.sharing.filled) * static_cast<double>(r.ops_total) /
            static_cast<double>(r.ops_done) <
        static_cast<double>(o.max_reshared));
}
