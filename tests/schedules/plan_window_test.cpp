// Plan::drop_before: the ops kept read back exactly as before, whatever kinds, dependency lists
// and byte counts the dropped ones had.
#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <utility>

#include "schedules/plan.hpp"
#include "topology/error.hpp"

using namespace collsim;
using namespace collsim::sched;

namespace {

// Ops of every kind; some with no dependency, one, or several; some byte counts too wide for
// 32 bits; every transfer matched.
Plan mixed_plan(std::uint32_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  Plan plan;
  plan.rank_gpu = {0, 1, 2, 3};
  while (plan.num_ops() < n) {
    const auto id = static_cast<OpId>(plan.num_ops());
    std::vector<OpId> deps;
    const unsigned count = rng() % 4;
    for (unsigned i = 0; i < count && id > 0; ++i) deps.push_back(static_cast<OpId>(rng() % id));
    Op op;
    op.rank = rng() % 4;
    op.stream = static_cast<StreamId>(rng() % 3);
    op.bytes = rng() % 7 == 0 ? (Bytes{5} << 32) + rng() : rng() % 100000;
    switch (rng() % 5) {
      case 0: {
        op.kind = OpKind::send;
        op.peer = (op.rank + 1) % 4;
        op.src = {BufferId::input, rng() % 1000};
        const OpId s = plan.add(op, deps);
        Op r = op;
        r.kind = OpKind::recv;
        r.rank = op.peer;
        r.peer = op.rank;
        r.dst = {BufferId::scratch, rng() % 1000};
        plan.match(s, plan.add(r, {s}));
        continue;
      }
      case 1:
        op.kind = OpKind::reduce;
        op.src = {BufferId::input, rng() % 1000};
        op.src2 = {BufferId::scratch, rng() % 1000};
        op.dst = {BufferId::output, rng() % 1000};
        break;
      case 2:
        op.kind = OpKind::copy;
        op.src = {BufferId::host, rng() % 1000};
        op.dst = {BufferId::output, rng() % 1000};
        break;
      default:
        op.kind = OpKind::delay;
        op.seconds = 1e-6 * (rng() % 100);
        op.bytes = 0;
        break;
    }
    plan.add(op, deps);
  }
  return plan;
}

void check_same_op(const Plan& a, const Plan& b, OpId id) {
  const Op x = a.op(id), y = b.op(id);
  CHECK(x.kind == y.kind);
  CHECK(x.rank == y.rank);
  CHECK(x.stream == y.stream);
  CHECK(x.bytes == y.bytes);
  CHECK(x.src == y.src);
  CHECK(x.src2 == y.src2);
  CHECK(x.dst == y.dst);
  CHECK(x.peer == y.peer);
  CHECK(x.seconds == y.seconds);
  CHECK(a.partner(id) == b.partner(id));
  const auto da = a.deps(id), db = b.deps(id);
  CHECK(std::vector<OpId>(da.begin(), da.end()) == std::vector<OpId>(db.begin(), db.end()));
}

}  // namespace

TEST_CASE("a plan that drops its first ops keeps the rest intact", "[plan][window]") {
  for (std::uint32_t seed = 1; seed <= 5; ++seed) {
    const Plan whole = mixed_plan(3000, seed);
    Plan window = mixed_plan(3000, seed);
    std::mt19937 rng(seed);
    OpId cut = 0;
    while (cut + 200 < window.num_ops()) {
      cut = std::min<OpId>(cut + 1 + rng() % 400, static_cast<OpId>(window.num_ops()));
      window.drop_before(cut);
      REQUIRE(window.first_op() == cut);
      REQUIRE(window.num_ops() == whole.num_ops());
      for (OpId id = cut; id < whole.num_ops(); id += 1 + rng() % 5)
        check_same_op(whole, window, id);
    }
  }
}

TEST_CASE("a window keeps growing after its first ops are dropped", "[plan][window]") {
  Plan whole = mixed_plan(2000, 9);
  Plan window = mixed_plan(1000, 9);
  window.drop_before(600);
  // Ops added after the cut get the ids they would have had, reduce operands and dependency
  // groups included.
  const Plan tail = mixed_plan(2000, 9);
  for (OpId id = static_cast<OpId>(window.num_ops()); id < tail.num_ops(); ++id) {
    const auto deps = tail.deps(id);
    const OpId added = window.add(tail.op(id), std::vector<OpId>(deps.begin(), deps.end()));
    REQUIRE(added == id);
    if (tail.partner(id) != kNoOp && tail.partner(id) < id) window.match(tail.partner(id), id);
  }
  window.drop_before(1500);
  for (OpId id = 1500; id < whole.num_ops(); ++id) check_same_op(whole, window, id);
  CHECK_THROWS_AS(window.drop_before(static_cast<OpId>(whole.num_ops() + 1)), InternalError);
}

TEST_CASE("a window's reduce operands and dependency groups survive growth after a drop",
          "[plan][window]") {
  // The dropped ops are transfers with single dependencies, the kept ones reductions with
  // several: drop_before must advance the reduce operands and dependency groups by what it
  // dropped of each, no more, or the window's later growth overwrites kept operands.
  auto build = [](Plan& plan, bool drop) {
    plan.rank_gpu = {0, 1};
    for (std::uint32_t i = 0; i < 200; ++i) {
      Op s;
      s.kind = OpKind::send;
      s.rank = 0;
      s.peer = 1;
      s.bytes = 64;
      s.src = {BufferId::input, i};
      const OpId sid = plan.add(s, {i == 0 ? kNoOp : OpId{2 * i - 1}});
      Op r = s;  // the same transfer seen from its receiver
      r.kind = OpKind::recv;
      std::swap(r.rank, r.peer);
      r.dst = {BufferId::scratch, i};
      plan.match(sid, plan.add(r, {sid}));
    }
    for (std::uint32_t i = 0; i < 5000; ++i) {
      if (drop && i == 10) plan.drop_before(400);
      Op red;
      red.kind = OpKind::reduce;
      red.rank = i % 2;
      red.bytes = 64;
      red.src = {BufferId::input, 3 * Bytes{i}};
      red.src2 = {BufferId::scratch, 3 * Bytes{i} + 1};
      red.dst = {BufferId::output, 3 * Bytes{i} + 2};
      const auto id = static_cast<OpId>(plan.num_ops());
      plan.add(red, {id - 1, id - 2});
    }
  };
  Plan whole, window;
  build(whole, false);
  build(window, true);
  REQUIRE(window.first_op() == 400);
  for (OpId id = 400; id < whole.num_ops(); ++id) check_same_op(whole, window, id);
}

TEST_CASE("matching a dropped op is refused, not written over a later op's row", "[plan][window]") {
  Plan plan;
  plan.rank_gpu = {0, 1};
  Op send;
  send.kind = OpKind::send;
  send.rank = 0;
  send.peer = 1;
  send.bytes = 100;
  Op recv = send;
  recv.kind = OpKind::recv;
  recv.rank = 1;
  recv.peer = 0;
  const OpId s = plan.add(send);
  plan.drop_before(1);
  // Enough ops for the ring of rows to give the dropped send's slot to a later one.
  OpId r = kNoOp;
  for (int i = 0; i < 40; ++i) r = plan.add(recv);
  CHECK_THROWS_WITH(plan.match(s, r), Catch::Contains("below the plan's window") &&
                                          Catch::Contains("inside a transfer"));
  CHECK_THROWS_AS(plan.match(r, s), InternalError);
  // Every later row is as it was added: unmatched.
  for (OpId id = 1; id < plan.num_ops(); ++id) CHECK(plan.partner(id) == kNoOp);
}

TEST_CASE("a window dropped whole keeps growing as the plan it stands for", "[plan][window]") {
  // A streamed run drops everything it has registered: the reduce operands and dependency
  // groups the next ops get must follow on from those dropped.
  const Plan whole = mixed_plan(3000, 4);
  Plan cuts = mixed_plan(500, 4);
  const auto at = static_cast<OpId>(cuts.num_ops());
  cuts.drop_before(at);
  REQUIRE(cuts.first_op() == at);
  for (OpId id = at; id < whole.num_ops(); ++id) {
    const auto deps = whole.deps(id);
    REQUIRE(cuts.add(whole.op(id), std::vector<OpId>(deps.begin(), deps.end())) == id);
    if (whole.partner(id) != kNoOp && whole.partner(id) < id) cuts.match(whole.partner(id), id);
    // Whole again every few hundred ops, after the recv of a transfer.
    if (id % 300 == 0 && (whole.partner(id) == kNoOp || whole.partner(id) < id)) {
      for (OpId k = cuts.first_op(); k <= id; ++k) check_same_op(whole, cuts, k);
      cuts.drop_before(id + 1);
      REQUIRE(cuts.first_op() == id + 1);
    }
  }
  for (OpId id = cuts.first_op(); id < whole.num_ops(); ++id) check_same_op(whole, cuts, id);
}

TEST_CASE("add_transfer and add_reduce write what add and match write", "[plan]") {
  Plan a, b;
  a.rank_gpu = b.rank_gpu = {0, 1, 2};
  std::mt19937 rng(3);
  for (int i = 0; i < 400; ++i) {
    const auto n = static_cast<OpId>(a.num_ops());
    std::vector<OpId> send_deps, recv_deps;
    for (unsigned j = rng() % 4; j > 0 && n > 0; --j) send_deps.push_back(rng() % n);
    for (unsigned j = rng() % 3; j > 0 && n > 0; --j) recv_deps.push_back(rng() % n);
    if (rng() % 5 == 0) send_deps.push_back(kNoOp);
    const Bytes bytes = rng() % 9 == 0 ? (Bytes{3} << 32) + rng() : rng() % 5000;
    if (rng() % 3 == 0) {
      Op red;
      red.kind = OpKind::reduce;
      red.rank = rng() % 3;
      red.stream = static_cast<StreamId>(rng() % 4);
      red.bytes = bytes;
      red.dst = {BufferId::output, rng() % 1000};
      red.src = {BufferId::input, rng() % 1000};
      red.src2 = {BufferId::scratch, rng() % 1000};
      const OpId x = a.add(red, send_deps);
      const OpId y =
          b.add_reduce(red.rank, red.stream, red.dst, red.src, red.src2, bytes, send_deps);
      REQUIRE(x == y);
      continue;
    }
    Plan::Transfer t;
    t.from = rng() % 3;
    t.to = (t.from + 1 + rng() % 2) % 3;
    t.send_stream = static_cast<StreamId>(rng() % 4);
    t.recv_stream = static_cast<StreamId>(rng() % 4);
    t.src = {rng() % 2 ? BufferId::input : BufferId::host, rng() % 1000};
    t.dst = {rng() % 2 ? BufferId::scratch : BufferId::host, rng() % 1000};
    t.bytes = bytes;
    const Op s = t.send_op();
    const Op r = t.recv_op();
    REQUIRE((s.kind == OpKind::send && s.rank == t.from && s.peer == t.to &&
             s.stream == t.send_stream && s.src == t.src && s.bytes == bytes));
    REQUIRE((r.kind == OpKind::recv && r.rank == t.to && r.peer == t.from &&
             r.stream == t.recv_stream && r.dst == t.dst && r.bytes == bytes));
    const OpId sid = a.add(s, send_deps);
    a.match(sid, a.add(r, recv_deps));
    REQUIRE(b.add_transfer(t, send_deps, recv_deps) == sid);
  }
  REQUIRE(a.num_ops() == b.num_ops());
  REQUIRE(a.num_deps() == b.num_deps());
  for (OpId id = 0; id < a.num_ops(); ++id) {
    check_same_op(a, b, id);
    // Plan::fields reads back what the accessors do.
    const Plan::Fields f = b.fields(id);
    CHECK(f.kind == b.kind(id));
    CHECK(f.rank == b.rank(id));
    CHECK(f.stream == b.stream(id));
    CHECK(f.bytes == b.bytes(id));
    CHECK(f.partner == b.partner(id));
    CHECK(f.peer == b.peer(id));
    CHECK(f.dst_buffer == b.dst(id).buffer);
    if (f.kind != OpKind::reduce) CHECK(f.src_buffer == b.src(id).buffer);
    CHECK(f.seconds == b.seconds(id));
    CHECK(f.deps.data() == b.deps(id).data());
    CHECK(f.deps.size() == b.deps(id).size());
  }
}
