// The verifier rejects deliberately broken plans, and says what is wrong with them: the rank,
// the place in the buffer and the missing or duplicated contribution, or the op that deadlocks.
#include <catch2/catch.hpp>

#include "schedules/verify.hpp"
#include "tests/common/op_builders.hpp"

using namespace collsim;
using namespace collsim::sched;

namespace {

// Two ranks, 8 bytes (2 fp32 elements): each sends its input to the other, which adds it.
Plan exchange() {
  Plan p;
  p.size = 8;
  p.rank_gpu = {0, 1};
  for (RankId r = 0; r < 2; ++r) {
    p.add(test::send_op(r, 1 - r, 8, {BufferId::input, 0}, 0));
  }
  for (RankId r = 0; r < 2; ++r) {
    p.add(test::recv_op(r, 1 - r, 8, {BufferId::scratch, 0}, 1));
  }
  p.match(0, 3);  // rank 0 -> rank 1
  p.match(1, 2);  // rank 1 -> rank 0
  for (RankId r = 0; r < 2; ++r) {
    p.add(test::reduce_op(r, 8, {BufferId::input, 0}, {BufferId::scratch, 0}, {BufferId::output, 0},
                          2),
          {static_cast<OpId>(2 + r)});
  }
  return p;
}

bool mentions(const VerifyReport& r, const std::string& text) {
  for (const auto& p : r.problems)
    if (p.find(text) != std::string::npos) return true;
  return false;
}

std::string all(const VerifyReport& r) {
  std::string s;
  for (const auto& p : r.problems) s += p + "\n";
  return s;
}

}  // namespace

TEST_CASE("the hand-made exchange is a correct allreduce", "[verify]") {
  CHECK(verify(exchange()).ok());
}

TEST_CASE("a missing reduction leaves a contribution out", "[verify]") {
  Plan bad;
  const Plan good = exchange();
  // Copy every op but rank 1's reduction (op 5).
  bad.size = good.size;
  bad.rank_gpu = good.rank_gpu;
  for (OpId id = 0; id < 5; ++id) bad.add(good.op(id), good.deps(id));
  bad.match(0, 3);
  bad.match(1, 2);
  const auto r = verify(bad);
  INFO(all(r));
  CHECK(!r.ok());
  CHECK(mentions(r, "rank 1 output bytes [0, 8)"));
  CHECK(mentions(r, "never written"));
}

TEST_CASE("adding the own input twice counts a contribution twice", "[verify]") {
  Plan p = exchange();
  p.add(
      test::reduce_op(0, 8, {BufferId::output, 0}, {BufferId::input, 0}, {BufferId::output, 0}, 2));
  const auto r = verify(p);
  INFO(all(r));
  CHECK(mentions(r, "rank 0 output bytes [0, 8)"));
  CHECK(mentions(r, "contribution of rank 0 2 times"));
}

TEST_CASE("receiving into the wrong place misplaces data", "[verify]") {
  // Rank 0 receives only the second element of rank 1 and adds it to its first element.
  Plan p;
  p.size = 8;
  p.rank_gpu = {0, 1};
  const Plan good = exchange();
  for (OpId id = 0; id < good.num_ops(); ++id) {
    Op o = good.op(id);
    if (id == 1) o.src.offset = 4, o.bytes = 4;  // rank 1 sends element 1
    if (id == 2) o.bytes = 4;                    // rank 0 receives 4 bytes
    if (id == 4) o.bytes = 4;                    // rank 0 reduces element 0 only
    p.add(o, good.deps(id));
  }
  p.match(0, 3);
  p.match(1, 2);
  const auto r = verify(p);
  INFO(all(r));
  CHECK(mentions(r, "rank 0 output bytes [0, 4)"));
  CHECK(mentions(r, "wrong place (offset +4 bytes)"));
  CHECK(mentions(r, "rank 0 output bytes [4, 8) (chunk 0) is never written"));
}

TEST_CASE("a send without a recv is unmatched", "[verify]") {
  Plan p = exchange();
  p.add(test::send_op(1, 0, 8, {}));
  const auto r = verify(p);
  INFO(all(r));
  CHECK(mentions(r, "op 6 (rank 1, stream 0, send to rank 0, 8 bytes): not matched"));
}

TEST_CASE("matched ends that disagree on the size are reported", "[verify]") {
  Plan p;
  p.size = 8;
  p.rank_gpu = {0, 1};
  const Plan good = exchange();
  for (OpId id = 0; id < good.num_ops(); ++id) {
    Op o = good.op(id);
    if (id == 3) o.bytes = 4;
    p.add(o, good.deps(id));
  }
  p.match(0, 3);
  p.match(1, 2);
  const auto r = verify(p);
  INFO(all(r));
  CHECK(mentions(r, "disagree on the size (8 vs 4 bytes)"));
}

TEST_CASE("sends and receives on one stream in the same order deadlock", "[verify]") {
  // Both ranks send first, then receive, all on stream 0: each send waits for a recv that
  // waits behind the other rank's send.
  Plan p;
  p.size = 8;
  p.rank_gpu = {0, 1};
  const Plan good = exchange();
  for (OpId id = 0; id < good.num_ops(); ++id) {
    Op o = good.op(id);
    o.stream = 0;
    p.add(o, good.deps(id));
  }
  p.match(0, 3);
  p.match(1, 2);
  const auto r = verify(p);
  INFO(all(r));
  CHECK(mentions(r, "deadlock"));
  CHECK(mentions(r, "ops can never run"));
}

TEST_CASE("a dependency cycle is a deadlock", "[verify]") {
  Plan p;
  p.size = 8;
  p.rank_gpu = {0};
  p.add(test::copy_op(0, 8, {BufferId::input, 0}, {BufferId::output, 0}, 0), {1});
  p.add(test::copy_op(0, 8, {BufferId::input, 0}, {BufferId::output, 0}, 1), {0});
  const auto r = verify(p);
  INFO(all(r));
  CHECK(mentions(r, "can never start"));
}

TEST_CASE("reading scratch before it is written and writing the input are errors", "[verify]") {
  Plan p;
  p.size = 8;
  p.rank_gpu = {0};
  Op a = test::copy_op(0, 8, {BufferId::scratch, 0}, {BufferId::output, 0});
  p.add(a);
  auto r = verify(p);
  INFO(all(r));
  CHECK(mentions(r, "reads scratch[0, 8) on rank 0 before anything was written there"));
  a.src = {BufferId::output, 0};
  a.dst = {BufferId::input, 0};
  p.add(a);
  r = verify(p);
  CHECK(mentions(r, "writes the input buffer"));
}

TEST_CASE("an unknown rank and an out-of-bounds region are reported", "[verify]") {
  Plan p = exchange();
  p.add(test::copy_op(5, 8, {}, {}));
  p.add(test::copy_op(0, 16, {BufferId::input, 0}, {BufferId::scratch, 0}));
  const auto r = verify(p);
  INFO(all(r));
  CHECK(mentions(r, "rank 5 does not exist"));
  CHECK(mentions(r, "input[0, 16) lies outside the 8-byte input buffer"));
}

TEST_CASE("unordered conflicting accesses are races", "[verify]") {
  // A copy on another stream of rank 0 overwrites the scratch the reduction reads: it waits for
  // the receive (op 2) but not for the reduction (op 4).
  Plan p = exchange();
  const Op clobber = test::copy_op(0, 8, {BufferId::input, 0}, {BufferId::scratch, 0}, 7);
  p.add(clobber, {2});
  auto r = verify(p);
  INFO(all(r));
  CHECK(r.races_checked);
  CHECK(mentions(r,
                 "op 6 (rank 0, stream 7, copy, 8 bytes) overwrites scratch[0, 8) on rank 0 "
                 "while op 4 (rank 0, stream 2, reduce, 8 bytes) may still use it"));
  // Ordered after the reduction, the same copy is fine.
  Plan q = exchange();
  q.add(clobber, {4});
  CHECK(verify(q).ok());
}

TEST_CASE("two unordered writes to one output are a race", "[verify]") {
  Plan p = exchange();
  p.add(test::copy_op(1, 8, {BufferId::input, 0}, {BufferId::output, 0}, 9));
  const auto r = verify(p);
  INFO(all(r));
  CHECK(mentions(r, "overwrites output[0, 8) on rank 1"));
}
