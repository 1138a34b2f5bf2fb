// Plans that can never finish are input errors that name the op, never hangs.
#include <catch2/catch.hpp>

#include "sim/engine.hpp"
#include "tests/sim/sim_fixtures.hpp"
#include "topology/error.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::sim::testing;
using Catch::Contains;

namespace {

struct Pair2 {
  topo::Topology t;
  Pair2() {
    const auto a = add_gpu(t, "gpu0");
    const auto b = add_gpu(t, "gpu1");
    add_node(t, "sw", topo::NodeKind::nvswitch);
    add_duplex(t, a, b, 1e9, 1e-6);
    topo::finalize(t);
  }
};

std::string message_of(const topo::Router& router, const sched::Plan& plan) {
  try {
    sim::simulate(router, plan);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("a send without a matched recv is an input error naming the op", "[sim][errors]") {
  Pair2 p;
  topo::Router router(p.t);
  sched::Plan plan;
  plan.rank_gpu = {0, 1};
  plan.add(send_op(0, 1, 100));
  const auto m = message_of(router, plan);
  CHECK_THAT(m, Contains("op 0") && Contains("rank 0") && Contains("stream 0") &&
                    Contains("send") && Contains("no matched recv"));
}

TEST_CASE("matched ends that disagree on bytes are an input error", "[sim][errors]") {
  Pair2 p;
  topo::Router router(p.t);
  sched::Plan plan;
  plan.rank_gpu = {0, 1};
  const auto s = plan.add(send_op(0, 1, 100));
  const auto r = plan.add(recv_op(1, 0, 200));
  plan.match(s, r);
  CHECK_THAT(message_of(router, plan), Contains("100 bytes") && Contains("200 bytes"));
}

TEST_CASE("a transfer's ends are checked against each other once, whichever comes first",
          "[sim][errors]") {
  Pair2 p;
  topo::Router router(p.t);
  const auto count = [](const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  for (const bool recv_first : {false, true}) {
    INFO("recv first: " << recv_first);
    const auto plan_of = [&](const sched::Op& send, const sched::Op& recv) {
      sched::Plan plan;
      plan.rank_gpu = {0, 1};
      const auto r0 = recv_first ? plan.add(recv) : 0;
      const auto s = plan.add(send);
      const auto r = recv_first ? r0 : plan.add(recv);
      plan.match(s, r);
      return plan;
    };
    const std::string bytes = message_of(router, plan_of(send_op(0, 1, 100), recv_op(1, 0, 200)));
    CHECK(count(bytes, "both ends of a transfer must agree") == 1);
    const std::string ends = message_of(router, plan_of(send_op(0, 1, 100), recv_op(1, 1, 100)));
    CHECK(count(ends, "their ranks and peers disagree") == 1);
    const std::string kinds = message_of(router, plan_of(send_op(0, 1, 100), send_op(1, 0, 100)));
    CHECK(count(kinds, "which is not a") == 1);
  }
}

TEST_CASE("a rank bound to something other than a GPU is an input error", "[sim][errors]") {
  Pair2 p;
  topo::Router router(p.t);
  sched::Plan plan;
  plan.rank_gpu = {0, 2};  // node 2 is the NVSwitch
  CHECK_THAT(message_of(router, plan), Contains("rank 1") && Contains("not a GPU"));
  plan.rank_gpu = {0, 77};
  CHECK_THAT(message_of(router, plan), Contains("rank 1") && Contains("not a GPU"));
}

TEST_CASE("an op of a rank the plan does not have is an input error", "[sim][errors]") {
  Pair2 p;
  topo::Router router(p.t);
  sched::Plan plan;
  plan.rank_gpu = {0, 1};
  plan.add(timed_op(sched::OpKind::delay, 5, 1.0));
  CHECK_THAT(message_of(router, plan), Contains("op 0") && Contains("rank 5"));
}

TEST_CASE("crossed recvs deadlock and the error names the cycle", "[sim][errors]") {
  // Rank 0: recv from 1, then send to 1. Rank 1: recv from 0, then send to 0. Each recv waits for
  // a send that sits behind the other rank's recv on the same stream.
  Pair2 p;
  topo::Router router(p.t);
  sched::Plan plan;
  plan.rank_gpu = {0, 1};
  const auto r0 = plan.add(recv_op(0, 1, 8));
  const auto r1 = plan.add(recv_op(1, 0, 8));
  const auto s0 = plan.add(send_op(0, 1, 8));
  const auto s1 = plan.add(send_op(1, 0, 8));
  plan.match(s0, r1);
  plan.match(s1, r0);
  const auto m = message_of(router, plan);
  CHECK_THAT(m, Contains("deadlock") && Contains("op 0 (rank 0, stream 0, recv from rank 1)") &&
                    Contains("op 3 (rank 1, stream 0, send to rank 0)"));
}

TEST_CASE("a dependency cycle is reported, not run forever", "[sim][errors]") {
  Pair2 p;
  topo::Router router(p.t);
  sched::Plan plan;
  plan.rank_gpu = {0, 1};
  // Op 0 depends on op 1 (added later) and op 1 on op 0.
  const std::vector<sched::OpId> forward{1};
  plan.add(timed_op(sched::OpKind::delay, 0, 1.0, 0), forward);
  plan.add(timed_op(sched::OpKind::delay, 1, 1.0, 0), {0});
  CHECK_THAT(message_of(router, plan),
             Contains("deadlock") && Contains("op 0") && Contains("op 1"));
}

TEST_CASE("a dependency on a missing op is an input error", "[sim][errors]") {
  Pair2 p;
  topo::Router router(p.t);
  sched::Plan plan;
  plan.rank_gpu = {0, 1};
  plan.add(timed_op(sched::OpKind::delay, 0, 1.0), {9});
  CHECK_THAT(message_of(router, plan), Contains("op 9") && Contains("does not exist"));
}

TEST_CASE("host buffers need a CPU", "[sim][errors]") {
  Pair2 p;  // no CPU at all
  topo::Router router(p.t);
  sched::Plan plan;
  plan.rank_gpu = {0, 1};
  plan.add(copy_op(0, sched::BufferId::input, sched::BufferId::host, 10));
  CHECK_THAT(message_of(router, plan), Contains("reaches no CPU"));
}

TEST_CASE("negative or NaN durations are input errors", "[sim][errors]") {
  Pair2 p;
  topo::Router router(p.t);
  sched::Plan plan;
  plan.rank_gpu = {0, 1};
  plan.add(timed_op(sched::OpKind::compute, 0, -1.0));
  CHECK_THROWS_AS(sim::simulate(router, plan), InputError);
  sched::Plan nan_plan;
  nan_plan.rank_gpu = {0, 1};
  nan_plan.add(timed_op(sched::OpKind::compute, 0, std::nan("")));
  CHECK_THROWS_AS(sim::simulate(router, nan_plan), InputError);
}

TEST_CASE("a recv matched twice is an input error", "[sim][errors]") {
  Pair2 p;
  topo::Router router(p.t);
  sched::Plan plan;
  plan.rank_gpu = {0, 1};
  const auto s1 = plan.add(send_op(0, 1, 8));
  const auto s2 = plan.add(send_op(0, 1, 8));
  const auto r = plan.add(recv_op(1, 0, 8));
  plan.match(s1, r);
  plan.match(s2, r);  // r now points at s2, but s1 still points at r
  CHECK_THAT(message_of(router, plan), Contains("op 0") && Contains("matched with op 1 instead"));
}

TEST_CASE("an unreachable peer is an input error naming the op", "[sim][errors]") {
  topo::Topology t;
  add_gpu(t, "gpu0");
  add_gpu(t, "island");
  topo::finalize(t);
  topo::Router router(t);
  sched::Plan plan;
  plan.rank_gpu = {0, 1};
  add_transfer(plan, 0, 1, 8);
  CHECK_THAT(message_of(router, plan), Contains("op 0") && Contains("cannot be routed"));
  sched::Plan empty;
  empty.rank_gpu = {0, 1};
  sim::Options o;
  o.background.push_back(sim::BackgroundFlow{0, 1, 8, 0});
  CHECK_THROWS_WITH(sim::simulate(router, empty, o),
                    Contains("background") && Contains("cannot be routed"));
}

TEST_CASE("a streamed plan whose batch ends too early is an internal error, not a wrong time",
          "[sim][errors][streaming]") {
  topo::Topology t;
  add_gpu(t, "gpu0");
  add_gpu(t, "gpu1");
  add_duplex(t, 0, 1, 1e9, 1e-6);
  topo::finalize(t);
  const topo::Router router(t);
  sched::Plan plan;
  plan.rank_gpu = {0, 1};
  auto build = [&](std::function<void()> batch) {
    add_transfer(plan, 0, 1, 1000);
    batch();
    // Waits for nothing of the batch before: it could have started at time 0.
    add_transfer(plan, 1, 0, 1000, {}, {}, 1);
    batch();
  };
  CHECK_THROWS_WITH(sim::simulate_streaming(router, plan, build),
                    Catch::Contains("waits for nothing of the batch before"));
  // The same ops, the second pair waiting for the first: fine, and as if whole.
  sched::Plan chained;
  chained.rank_gpu = {0, 1};
  const auto first = add_transfer(chained, 0, 1, 1000);
  add_transfer(chained, 1, 0, 1000, {first.recv}, {first.recv}, 1);
  sched::Plan streamed;
  streamed.rank_gpu = {0, 1};
  const auto r = sim::simulate_streaming(router, streamed, [&](std::function<void()> batch) {
    const auto a = add_transfer(streamed, 0, 1, 1000);
    batch();
    add_transfer(streamed, 1, 0, 1000, {a.recv}, {a.recv}, 1);
    batch();
  });
  CHECK(r.time == sim::simulate(router, chained).time);
  CHECK(r.events == sim::simulate(router, chained).events);
  // An empty batch between them changes nothing.
  sched::Plan gapped;
  gapped.rank_gpu = {0, 1};
  const auto g = sim::simulate_streaming(router, gapped, [&](std::function<void()> batch) {
    const auto a = add_transfer(gapped, 0, 1, 1000);
    batch();
    batch();
    add_transfer(gapped, 1, 0, 1000, {a.recv}, {a.recv}, 1);
    batch();
  });
  CHECK(g.time == r.time);
  CHECK(g.events == r.events);
}

namespace {

// A plan built in batches, for simulate_streaming, or whole (`batch` does nothing). Once the
// second batch is registered, 40 one-op batches of short delays follow, so that the plan's
// ring of rows (16 slots for batches this small) gives the slots of the first batches' ops to
// later ops well before the 5 GiB transfer and the 10 s delay start at 0.5 s: a run that read
// their sizes or durations from the plan would read other ops' rows.
void build_wrapping(sched::Plan& plan, const std::function<void()>& batch) {
  using sched::OpKind;
  const auto d0 = plan.add(timed_op(OpKind::delay, 0, 0.5, 0));
  plan.add(timed_op(OpKind::delay, 1, 0.25, 0));
  plan.add(timed_op(OpKind::delay, 1, 1e-6, 2));
  batch();
  add_transfer(plan, 0, 1, Bytes{5} << 30);             // 5 GiB: more than an op record holds
  plan.add(timed_op(OpKind::delay, 0, 10.0, 1), {d0});  // the run's last op
  plan.add(timed_op(OpKind::delay, 1, 1e-6, 2));
  batch();
  for (int i = 0; i < 40; ++i) {
    plan.add(timed_op(OpKind::delay, 1, 1e-6, 2));
    batch();
  }
  add_transfer(plan, 1, 0, 100);
  batch();
}

}  // namespace

TEST_CASE("a streamed run reads sizes and durations from its records once the plan drops rows",
          "[sim][errors][streaming]") {
  Pair2 p;
  topo::Router router(p.t);
  sched::Plan whole;
  whole.rank_gpu = {0, 1};
  build_wrapping(whole, [] {});
  const sim::Result expected = sim::simulate(router, whole);
  // The 5 GiB transfer starts at 0.5 s and takes over 5 s; the long delay ends at 10.5 s.
  CHECK(expected.time == 10.5);
  sched::Plan plan;
  plan.rank_gpu = {0, 1};
  std::size_t batches = 0;
  const sim::Result streamed = sim::simulate_streaming(router, plan, [&](auto batch) {
    build_wrapping(plan, [&] {
      ++batches;
      batch();
    });
  });
  CHECK(batches == 43);
  CHECK(plan.first_op() == plan.num_ops());  // every row dropped once registered
  CHECK(streamed.time == expected.time);
  CHECK(streamed.events == expected.events);

  // A link that fails for good under the 5 GiB transfer: the error names the send from its
  // record, the plan's row long gone.
  sim::Options o;
  o.capacity.push_back(sim::CapacityTrace{0, {{1.0, 0.0}}});
  sched::Plan failed;
  failed.rank_gpu = {0, 1};
  std::string message = "no error";
  try {
    sim::simulate_streaming(
        router, failed, [&](auto batch) { build_wrapping(failed, batch); }, o);
  } catch (const InputError& e) {
    message = e.what();
  }
  CHECK_THAT(message, Contains("op 3 (rank 0, stream 0, send, matched with op 4 of rank 1)") &&
                          Contains("can never finish") && Contains("from 1 s on"));
}
