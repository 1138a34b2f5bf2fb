#include "cuda_backend/host_executor.hpp"

#include <catch2/catch.hpp>

#include "cuda_backend/data_check.hpp"
#include "hand_plans.hpp"
#include "topology/error.hpp"

using namespace collsim;
using namespace collsim::backend;
using collsim::test::ring_allreduce;
using collsim::test::RingOptions;

TEST_CASE("host executor: hand-written ring allreduce is exact for every dtype and chunking",
          "[backend][host]") {
  const auto dtype = GENERATE(sched::DType::fp32, sched::DType::fp16, sched::DType::bf16);
  const std::uint32_t chunks = GENERATE(1u, 2u, 4u);
  const std::uint32_t ranks = GENERATE(2u, 3u, 4u);
  RingOptions o;
  o.ranks = ranks;
  o.chunks = chunks;
  o.dtype = dtype;
  // Divisible by ranks x chunks x element size for every combination above: 12 * 4 * 4 * 16.
  o.size = 3072;
  const auto plan = ring_allreduce(o);
  HostExecutor executor;
  RunOptions ro;
  ro.warmup = 0;
  ro.repetitions = 2;
  const auto result = executor.run(plan, ro);
  CHECK(result.wrong_elements == 0);
  // Every rank's whole output is checked: p * size / element size.
  CHECK(result.checked_elements == ranks * (3072 / sched::dtype_size(dtype)));
  CHECK(result.seconds.size() == 2);
}

TEST_CASE("host executor: a plan missing its allgather phase fails the check", "[backend][host]") {
  HostExecutor executor;
  RingOptions o;
  o.size = 4096;
  o.allgather_phase = false;

  // Two ranks: rank r only receives and reduces segment 1 - r, so its own segment r stays zero,
  // while each expected sum v(0, e) + v(1, e) = e mod 251 + (7 + e) mod 251 is never zero.
  // Wrong elements: 2 ranks x 2048 bytes / 4 bytes = 1024.
  o.ranks = 2;
  auto result = executor.run(ring_allreduce(o), RunOptions{});
  CHECK(result.wrong_elements == 1024);
  CHECK(result.checked_elements == 2 * 1024);

  // Four ranks: besides the untouched segment (4 x 256 elements), two segments hold partial sums
  // that are wrong wherever a missing term is non-zero, and one segment is right: between 1024
  // and 3 x 1024 wrong elements.
  o.ranks = 4;
  result = executor.run(ring_allreduce(o), RunOptions{});
  CHECK(result.wrong_elements >= 1024);
  CHECK(result.wrong_elements <= 3072);
}

TEST_CASE("host executor: a transfer that delivers to the wrong place is caught",
          "[backend][host]") {
  using namespace sched;
  using namespace collsim::test;
  // Broadcast from rank 0 to rank 1 of 16 fp32 elements, but the recv lands in scratch and the
  // output is never written on either rank.
  Plan plan;
  plan.collective = Collective::broadcast;
  plan.size = 64;
  plan.rank_gpu = {0, 0};
  const OpId s = plan.add(send_op(0, 1, 64, {BufferId::input, 0}));
  const OpId r = plan.add(recv_op(1, 0, 64, {BufferId::scratch, 0}));
  plan.match(s, r);
  HostExecutor executor;
  auto result = executor.run(plan, RunOptions{});
  // Expected broadcast values input(0, e) = e mod 251: zero only for e = 0, so 15 wrong per rank.
  CHECK(result.wrong_elements == 30);

  // The fixed plan copies the root's input to its output and delivers into rank 1's output.
  Plan good;
  good.collective = Collective::broadcast;
  good.size = 64;
  good.rank_gpu = {0, 0};
  good.add(copy_op(0, 64, {BufferId::input, 0}, {BufferId::output, 0}, 1));
  const OpId s2 = good.add(send_op(0, 1, 64, {BufferId::input, 0}));
  const OpId r2 = good.add(recv_op(1, 0, 64, {BufferId::output, 0}));
  good.match(s2, r2);
  result = executor.run(good, RunOptions{});
  CHECK(result.wrong_elements == 0);
  CHECK(result.checked_elements == 32);
}

TEST_CASE("host executor: staging through host memory and synthetic links keep data exact",
          "[backend][host]") {
  using namespace sched;
  using namespace collsim::test;
  // Rank 0 stages its input through pinned host memory (d2h, host memcpy, h2d) into its output,
  // then sends it to rank 1 over a synthetic 10 us, 1 GB/s link.
  Plan plan;
  plan.collective = Collective::broadcast;
  plan.dtype = DType::bf16;
  plan.size = 256;
  plan.rank_gpu = {0, 0};
  plan.add(copy_op(0, 256, {BufferId::input, 0}, {BufferId::host, 0}));
  plan.add(copy_op(0, 256, {BufferId::host, 0}, {BufferId::host, 256}));
  const OpId c = plan.add(copy_op(0, 256, {BufferId::host, 256}, {BufferId::output, 0}));
  const OpId d = plan.add(delay_op(1, 1e-5));
  const OpId s = plan.add(send_op(0, 1, 256, {BufferId::output, 0}, 1), {c});
  const OpId r = plan.add(recv_op(1, 0, 256, {BufferId::output, 0}), {d});
  plan.match(s, r);
  HostExecutor executor;
  RunOptions ro;
  ro.links = uniform_links(2, SyntheticLink{1e-5, 1e9});
  const auto result = executor.run(plan, ro);
  CHECK(result.wrong_elements == 0);
  CHECK(result.checked_elements == 256);  // 2 ranks x 128 bf16 elements
  REQUIRE(result.seconds.size() == 1);
  CHECK(result.seconds[0] > 0);
}

TEST_CASE("host executor: malformed and deadlocking plans are input errors", "[backend][host]") {
  using namespace sched;
  using namespace collsim::test;
  HostExecutor executor;
  Plan plan;
  plan.collective = Collective::allreduce;
  plan.size = 64;
  plan.rank_gpu = {0, 0};

  SECTION("each rank sends before it receives on a single stream") {
    const OpId s0 = plan.add(send_op(0, 1, 64, {BufferId::input, 0}));
    const OpId s1 = plan.add(send_op(1, 0, 64, {BufferId::input, 0}));
    const OpId r0 = plan.add(recv_op(0, 1, 64, {BufferId::scratch, 0}));
    const OpId r1 = plan.add(recv_op(1, 0, 64, {BufferId::scratch, 0}));
    plan.match(s0, r1);
    plan.match(s1, r0);
    CHECK_THROWS_WITH(executor.run(plan, RunOptions{}), Catch::Contains("deadlocks"));
  }
  SECTION("unmatched send") {
    plan.add(send_op(0, 1, 64, {BufferId::input, 0}));
    CHECK_THROWS_WITH(executor.run(plan, RunOptions{}), Catch::Contains("not matched"));
  }
  SECTION("region outside the input buffer") {
    plan.add(copy_op(0, 64, {BufferId::input, 32}, {BufferId::output, 0}));
    CHECK_THROWS_WITH(executor.run(plan, RunOptions{}), Catch::Contains("[32, 96)"));
  }
  SECTION("misaligned reduce") {
    plan.add(reduce_op(0, 6, {BufferId::input, 0}, {BufferId::input, 0}, {BufferId::output, 0}));
    CHECK_THROWS_AS(executor.run(plan, RunOptions{}), InputError);
  }
  SECTION("negative delay") {
    plan.add(delay_op(1, -1));
    CHECK_THROWS_WITH(executor.run(plan, RunOptions{}), Catch::Contains("expected a duration"));
  }
  SECTION("recv that depends on its own send") {
    const OpId s = plan.add(send_op(0, 1, 64, {BufferId::input, 0}));
    const OpId r = plan.add(recv_op(1, 0, 64, {BufferId::output, 0}), {s});
    plan.match(s, r);
    CHECK_THROWS_WITH(executor.run(plan, RunOptions{}), Catch::Contains("its own transfer"));
  }
}

TEST_CASE("host executor: reports itself as a host device matching every GPU model",
          "[backend][host]") {
  HostExecutor executor;
  CHECK(executor.device().backend == "host");
  CHECK(executor.device().model == "*");
  CHECK(executor.device().name.rfind("host: ", 0) == 0);
}
