// Plans listed in the order their ops run (sched::PlanRequest::run_order: the tree's waves, each
// rank's chunks of a ring or hier step together) run exactly as when listed chunk by chunk: the
// two plans differ in where each op lies, not in what it waits for, so every stream runs the
// same ops at the same instants.
#include <fmt/format.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "schedules/generate.hpp"
#include "sim/engine.hpp"
#include "tests/common/same_run.hpp"
#include "tests/common/shipped_machines.hpp"
#include "tests/common/sizes.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::sched;

namespace {

// Each (rank, stream)'s ops in plan order: what they are and when they became ready, started
// and ended, the times as their bits.
using StreamRun =
    std::vector<std::tuple<OpKind, Bytes, std::uint64_t, std::uint64_t, std::uint64_t>>;
std::map<std::pair<RankId, StreamId>, StreamRun> by_stream(const Plan& plan,
                                                           const sim::Result& result) {
  const auto bits = [](double d) { return std::bit_cast<std::uint64_t>(d); };
  std::map<std::pair<RankId, StreamId>, StreamRun> out;
  for (OpId op = 0; op < plan.num_ops(); ++op) {
    const Plan::Fields f = plan.fields(op);
    const sim::OpTiming& t = result.ops[op];
    out[{f.rank, f.stream}].emplace_back(f.kind, f.bytes, bits(t.ready), bits(t.start),
                                         bits(t.end));
  }
  return out;
}

// Whether the two plans list the same ops in the same order (kind, rank, stream, size).
bool same_order(const Plan& a, const Plan& b) {
  if (a.num_ops() != b.num_ops()) return false;
  for (OpId op = 0; op < a.num_ops(); ++op) {
    const Plan::Fields f = a.fields(op), g = b.fields(op);
    if (f.kind != g.kind || f.rank != g.rank || f.stream != g.stream || f.bytes != g.bytes)
      return false;
  }
  return true;
}

// Generates `req` in run order and listed chunk by chunk, and checks that both run alike on the
// machine, whole and in windows; staged machines must keep the order (their copies wait for copy
// engines in plan order). Returns whether the two plans list their ops differently.
bool runs_alike(const topo::Router& router, PlanRequest req, bool staged) {
  const Plan run = generate(router, req);
  req.run_order = false;
  const Plan listed = generate(router, req);
  const bool same = same_order(run, listed);
  if (staged) CHECK(same);
  sim::Options o;
  o.record_ops = true;
  for (const std::size_t window : {std::size_t{0}, std::size_t{64}}) {
    o.window_ops = window;
    sim::Result a = sim::simulate(router, run, o);
    sim::Result b = sim::simulate(router, listed, o);
    CHECK(by_stream(run, a) == by_stream(listed, b));
    a.ops.clear();  // by op id, which the two plans number differently
    b.ops.clear();
    test::check_same_run(a, b);
  }
  return !same;
}

bool staged_machine(const test::ShippedMachine& m) {
  return std::string(m.file) == "t4x4-pcie.json" || std::string(m.file) == "hetero-rack.json";
}

}  // namespace

TEST_CASE("a tree's ops in run order run exactly as listed tree by tree", "[model][tree]") {
  std::size_t reordered = 0;
  for (const double event_latency : {0.0, 3e-6})
    for (test::ShippedMachine m : test::kShippedMachines) {
      if (m.gpus > 24) m.gpus = 24;
      test::on_machine(
          m,
          [&](const topo::Router& router, const std::vector<topo::NodeId>& gpus) {
            for (Collective c : {Collective::allreduce, Collective::reduce, Collective::broadcast})
              for (std::uint32_t k : {1u, 4u}) {
                PlanRequest req;
                req.collective = c;
                req.algorithm = Algorithm::tree;
                req.size = 12 * test::MiB + 4 * 48 * 7;  // chunks of unequal size
                req.chunks = k;
                req.root = 1;
                req.ranks = gpus;
                INFO(fmt::format("{} {} k={}, event latency {}", m.file, to_string(c), k,
                                 event_latency));
                reordered += runs_alike(router, req, staged_machine(m));
              }
          },
          event_latency);
    }
  // The NVSwitch box and the cluster reorder all but the one-tree plans of one chunk (reduce
  // and broadcast at k = 1, whose one pass up or down is in run order already): 4 of 6 on
  // each, twice.
  CHECK(reordered == 16);
}

TEST_CASE("ring and hier steps built rank by rank run exactly as built chunk by chunk",
          "[model][ring]") {
  std::size_t reordered = 0;
  for (const double event_latency : {0.0, 3e-6})
    for (const test::ShippedMachine& m : test::kShippedMachines)
      test::on_machine(
          m,
          [&](const topo::Router& router, const std::vector<topo::NodeId>& gpus) {
            const std::pair<Algorithm, Collective> runs[] = {
                {Algorithm::ring, Collective::allreduce},
                {Algorithm::ring, Collective::reduce_scatter},
                {Algorithm::ring, Collective::allgather},
                {Algorithm::hier, Collective::allreduce}};
            for (const auto& [a, c] : runs)
              for (std::uint32_t k : {1u, 4u}) {
                PlanRequest req;
                req.collective = c;
                req.algorithm = a;
                req.size = 12 * test::MiB + 4 * 48 * 7;  // pieces of unequal size
                req.chunks = k;
                req.ranks = gpus;
                INFO(fmt::format("{} {} {} k={}, event latency {}", m.file, to_string(a),
                                 to_string(c), k, event_latency));
                reordered += runs_alike(router, req, staged_machine(m));
              }
          },
          event_latency);
  // The NVSwitch box and the cluster's 48 GPUs (6 servers) reorder the four plans of 4 chunks
  // (one chunk has one order), twice.
  CHECK(reordered == 16);
}
