// generate(): names, refusals with messages that list what fits, splitting, op counts, and the
// double binary tree's two trees never sharing an inner node or an edge.
#include "schedules/generate.hpp"

#include <catch2/catch.hpp>
#include <set>

#include "schedules/algorithms.hpp"
#include "tests/schedules/fixtures.hpp"
#include "topology/error.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::sched;

namespace {

std::string refusal(const topo::Topology& t, PlanRequest r) {
  topo::Router router(t);
  try {
    generate(router, r);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

topo::Topology gpus(std::uint32_t p) {
  topo::Topology t = test::uniform_gpus(p, {});
  topo::finalize(t);
  return t;
}

}  // namespace

TEST_CASE("algorithm and collective names round-trip", "[generate]") {
  for (Algorithm a : all_algorithms()) CHECK(parse_algorithm(to_string(a)) == a);
  for (Collective c : all_collectives()) CHECK(parse_collective(to_string(c)) == c);
  CHECK(all_algorithms().size() == 8);
  CHECK(all_collectives().size() == 6);
  CHECK(!parse_algorithm("auto"));
  CHECK(!parse_collective("all_reduce"));
  CHECK(parse_dtype("bf16") == DType::bf16);
}

TEST_CASE("requests that do not fit are refused and never replaced", "[generate]") {
  const topo::Topology t = gpus(8);
  PlanRequest r;
  r.size = 8 * 4 * 16;
  r.collective = Collective::alltoall;
  r.algorithm = Algorithm::ring;
  auto m = refusal(t, r);
  INFO(m);
  CHECK(m.find("does not implement alltoall") != std::string::npos);
  CHECK(m.find("algorithms for alltoall on 8 ranks: direct") != std::string::npos);

  r = PlanRequest{};
  r.size = 8 * 4 * 16;
  r.algorithm = Algorithm::naive;
  r.chunks = 2;
  CHECK(refusal(t, r).find("cannot pipeline") != std::string::npos);

  r = PlanRequest{};
  r.size = 4 * 4;  // four fp32 elements
  r.chunks = 5;
  CHECK(refusal(t, r).find("exceeds the element count (4)") != std::string::npos);

  r = PlanRequest{};
  r.size = 6;
  CHECK(refusal(t, r).find("not a whole number of fp32 elements") != std::string::npos);

  r = PlanRequest{};
  r.collective = Collective::reduce_scatter;
  r.size = 4 * 12;  // 12 elements do not split over 8 ranks
  CHECK(refusal(t, r).find("multiple of 8 ranks") != std::string::npos);

  r = PlanRequest{};
  r.collective = Collective::broadcast;
  r.size = 64;
  r.root = 8;
  CHECK(refusal(t, r).find("root 8 is not a rank") != std::string::npos);

  r = PlanRequest{};
  r.algorithm = Algorithm::hier;
  r.size = 64;
  CHECK(refusal(t, r).find("hier needs every GPU in a server") != std::string::npos);
}

TEST_CASE("hier refuses servers of different sizes", "[generate]") {
  topo::Topology t = test::server_gpus(2, 2, {});
  topo::Node extra;
  extra.name = "odd";
  extra.server = 1;
  t.add_node(extra);
  topo::finalize(t);
  PlanRequest r;
  r.algorithm = Algorithm::hier;
  r.size = 5 * 4 * 4;
  CHECK(refusal(t, r).find("same number of GPUs in every server (found 2 and 3)") !=
        std::string::npos);
}

TEST_CASE("split keeps whole elements and nth_piece agrees", "[generate]") {
  // 10 fp32 elements into 3 parts: 4, 3, 3 elements.
  const auto parts = split({8, 40}, 3, 4);
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].offset == 8);
  CHECK(parts[0].bytes == 16);
  CHECK(parts[1].offset == 24);
  CHECK(parts[1].bytes == 12);
  CHECK(parts[2].offset == 36);
  CHECK(parts[2].bytes == 12);
  for (std::uint32_t n : {1u, 2u, 7u, 64u}) {
    const auto all = split({4, 4 * 37}, n, 4);
    for (std::uint32_t i = 0; i < n; ++i) {
      CHECK(nth_piece({4, 4 * 37}, n, i, 4).offset == all[i].offset);
      CHECK(nth_piece({4, 4 * 37}, n, i, 4).bytes == all[i].bytes);
    }
  }
}

TEST_CASE("ring allreduce has 2(p-1) steps of p transfers per chunk", "[generate]") {
  for (RankId p : {2u, 5u, 8u}) {
    const topo::Topology t = gpus(p);
    topo::Router router(t);
    PlanRequest r;
    r.chunks = 3;
    r.size = Bytes{p} * 3 * 4;
    const Plan plan = generate(router, r);
    std::size_t sends = 0, reduces = 0;
    for (OpId id = 0; id < plan.num_ops(); ++id) {
      sends += plan.kind(id) == OpKind::send;
      reduces += plan.kind(id) == OpKind::reduce;
    }
    CHECK(sends == 2 * (p - 1) * 3 * p);
    CHECK(reduces == (p - 1) * 3 * p);
    CHECK(plan.algorithm == "ring");
    CHECK(plan.chunks == 3);
  }
}

TEST_CASE("the double binary tree's trees share no inner node and no edge", "[generate]") {
  std::vector<RankId> counts;
  for (RankId p = 2; p <= 300; ++p) counts.push_back(p);
  for (RankId p : {511u, 512u, 1000u, 1024u, 4097u}) counts.push_back(p);
  for (RankId p : counts) {
    const auto trees = detail::double_binary_tree(p);
    INFO("p=" << p);
    if (p <= 3) {
      CHECK(trees.size() == 1);
      continue;
    }
    REQUIRE(trees.size() == 2);
    std::set<RankId> inner;
    std::set<std::pair<RankId, RankId>> edges;
    for (RankId i = 0; 2 * i + 1 < p; ++i) inner.insert(trees[0].ranks[i]);
    for (RankId i = 1; i < p; ++i)
      edges.insert(std::minmax(trees[0].ranks[i], trees[0].parent_of(i)));
    for (RankId i = 0; 2 * i + 1 < p; ++i) CHECK(inner.count(trees[1].ranks[i]) == 0);
    for (RankId i = 1; i < p; ++i)
      CHECK(edges.count(std::minmax(trees[1].ranks[i], trees[1].parent_of(i))) == 0);
    // Both trees span every rank.
    CHECK(std::set<RankId>(trees[1].ranks.begin(), trees[1].ranks.end()).size() == p);
  }
}

TEST_CASE("plans beyond 32-bit op ids are refused before they are built", "[generate]") {
  PlanRequest req;
  req.size = Bytes{1} << 30;
  req.chunks = 8;
  // Ring on 16,384 ranks at k = 8: 2 x 16,383 steps of p k transfers, about 2e10 ops.
  req.algorithm = Algorithm::ring;
  CHECK_THAT(why_not(req, 16384), Catch::Contains("beyond the 2^32"));
  // Hier has 2 (g - 1) + 2 (s - 1) steps: 2,048 servers of 8 at k = 8 is 1.35e9 ops, which fits,
  // so the rank count alone must not refuse it (generate checks the actual servers).
  req.algorithm = Algorithm::hier;
  CHECK(why_not(req, 16384).empty());
  req.chunks = 512;
  CHECK_THAT(why_not(req, 16384), Catch::Contains("beyond the 2^32"));
}

namespace {

// The lengths of the runs of sends by one rank, in op id order: a rank's sends of one step
// come one after the other when the generator numbers them rank by rank.
std::vector<std::size_t> send_runs(const Plan& plan) {
  std::vector<std::size_t> runs;
  RankId last = kNoRank;
  for (OpId id = 0; id < plan.num_ops(); ++id) {
    if (plan.kind(id) != OpKind::send) continue;
    if (plan.rank(id) == last)
      ++runs.back();
    else
      runs.push_back(1);
    last = plan.rank(id);
  }
  return runs;
}

}  // namespace

TEST_CASE("ring and hier number a rank's chunks of a step together", "[generate]") {
  // The engine runs a rank's chunks one after the other on its streams: numbered together,
  // their records share cache lines, where numbered chunk by chunk they lay p ops apart.
  const std::uint32_t k = 4;
  const Bytes size = Bytes{1} << 20;
  SECTION("ring allreduce") {
    const topo::Topology t = gpus(6);
    const Plan plan = test::plan_on(t, Algorithm::ring, k, size);
    const auto runs = send_runs(plan);
    // 2 (p - 1) steps of p ranks.
    CHECK(runs.size() == 2 * 5 * 6);
    for (std::size_t n : runs) CHECK(n == k);
  }
  SECTION("hier allreduce") {
    topo::Topology t = test::server_gpus(3, 4, {});
    topo::finalize(t);
    const Plan plan = test::plan_on(t, Algorithm::hier, k, size);
    const auto runs = send_runs(plan);
    // 2 (g - 1) steps inside the 3 servers, 2 (s - 1) steps on the 4 rails, each of every rank.
    CHECK(runs.size() == 2 * 3 * 12 + 2 * 2 * 12);
    for (std::size_t n : runs) CHECK(n == k);
  }
}

TEST_CASE("pairwise sends to one peer at a time, in turn, round by round", "[generate]") {
  // p = 5, k = 2: each rank's sends on one stream, to r + 1, ..., r + 4 in each of two rounds,
  // chunk c of each piece in round c; its receives on one stream, from r - 1, ..., r - 4.
  const topo::Topology t = gpus(5);
  const topo::Router router(t);
  for (const Collective c :
       {Collective::reduce_scatter, Collective::allgather, Collective::alltoall}) {
    PlanRequest r;
    r.algorithm = Algorithm::pairwise;
    r.collective = c;
    r.size = 5 * 4 * 6;
    r.chunks = 2;
    const Plan plan = generate(router, r);
    std::vector<std::vector<RankId>> sent(5), received(5);
    std::vector<std::set<StreamId>> send_streams(5), recv_streams(5);
    for (OpId id = 0; id < plan.num_ops(); ++id) {
      const RankId rank = plan.rank(id);
      if (plan.kind(id) == OpKind::send) {
        sent[rank].push_back(plan.peer(id));
        send_streams[rank].insert(plan.stream(id));
      } else if (plan.kind(id) == OpKind::recv) {
        received[rank].push_back(plan.peer(id));
        recv_streams[rank].insert(plan.stream(id));
      }
    }
    for (RankId rank = 0; rank < 5; ++rank) {
      std::vector<RankId> to, from;
      for (int round = 0; round < 2; ++round)
        for (RankId s = 1; s < 5; ++s) {
          to.push_back((rank + s) % 5);
          from.push_back((rank + 5 - s) % 5);
        }
      CHECK(sent[rank] == to);
      CHECK(received[rank] == from);
      CHECK(send_streams[rank].size() == 1);
      CHECK(recv_streams[rank].size() == 1);
    }
  }
  PlanRequest r;
  r.algorithm = Algorithm::pairwise;
  r.size = 5 * 4 * 6;
  const std::string m = refusal(t, r);
  CHECK(m.find("'pairwise' does not implement allreduce") != std::string::npos);
}
