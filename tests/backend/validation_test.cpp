#include "cuda_backend/validation.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>

#include "cuda_backend/host_executor.hpp"
#include "topology/error.hpp"

using namespace collsim;
using namespace collsim::backend;

namespace {

// Four ranks behind a switch, 2 us and 25 GB/s per link: the shape of one-gpu-4ranks.json.
topo::Topology four_ranks() {
  topo::Topology t;
  topo::Node sw;
  sw.name = "xbar";
  sw.kind = topo::NodeKind::nvswitch;
  const auto x = t.add_node(sw);
  for (int i = 0; i < 4; ++i) {
    topo::Node g;
    g.name = "rank" + std::to_string(i);
    g.kind = topo::NodeKind::gpu;
    const auto id = t.add_node(g);
    topo::Link l;
    l.kind = topo::LinkKind::nvlink;
    l.bandwidth = 25e9;
    l.latency = 2e-6;
    l.from = id;
    l.to = x;
    t.add_link(l);
    l.from = x;
    l.to = id;
    t.add_link(l);
  }
  topo::finalize(t);
  return t;
}

}  // namespace

TEST_CASE("validation: rows, predictions and CSV on the host backend", "[backend][validation]") {
  HostExecutor executor;
  ValidationOptions o;
  o.sizes = {64 * 1024, 256 * 1024};
  o.chunks = {1, 4};
  o.repetitions = 1;
  o.warmup = 0;
  const auto t = four_ranks();
  const auto report = run_validation(executor, t, o);
  // Per size: naive plus one ring row per k: 2 x (1 + 2) = 6 rows.
  REQUIRE(report.rows.size() == 6);
  CHECK(report.wrong_elements == 0);
  for (const auto& r : report.rows) {
    CHECK(r.measured > 0);
    CHECK(r.predicted > 0);
    CHECK(r.checked_elements == 4 * r.size / 4);
  }
  // Ring k=1 over 64 KiB on four ranks: 2 (p - 1) = 6 steps, each 16 KiB over 4 us of route
  // latency at 25 GB/s (every other cost absent): 6 (4e-6 + 16384 / 25e9) = 27.93216 us.
  CHECK(report.rows[1].algorithm == "ring");
  CHECK(report.rows[1].predicted == Approx(6 * (4e-6 + 16384 / 25e9)).epsilon(1e-9));

  // Four virtual ranks on one device with a 300 GB/s memory. The ring's four ranks reduce at
  // the same time and share it, 75 GB/s each, so the three reduce-scatter reductions of 16 KiB
  // (3 bytes of traffic per byte) add 3 x 3 x 16384 / 75e9 to the critical path: 29.89824 us.
  auto shared = four_ranks();
  for (auto gpu : shared.gpus()) shared.node(gpu).memory_bandwidth = 300e9;
  o.sizes = {64 * 1024};
  o.chunks = {1};
  o.devices = 1;
  const auto shared_report = run_validation(executor, shared, o);
  REQUIRE(shared_report.rows.size() == 2);
  CHECK(shared_report.rows[1].predicted ==
        Approx(6 * (4e-6 + 16384 / 25e9) + 9 * 16384 / 75e9).epsilon(1e-9));
  CHECK(shared_report.wrong_elements == 0);
  // The naive root reduces one buffer at a time: it has the whole memory, as if every rank had
  // a device of its own.
  o.devices = 4;
  const auto own_report = run_validation(executor, shared, o);
  CHECK(own_report.rows[1].predicted ==
        Approx(6 * (4e-6 + 16384 / 25e9) + 9 * 16384 / 300e9).epsilon(1e-9));
  CHECK(shared_report.rows[0].predicted == Approx(own_report.rows[0].predicted).epsilon(1e-12));

  // Another collective: the ring allgather takes p - 1 = 3 of those steps.
  ValidationOptions gather = o;
  gather.collective = sched::Collective::allgather;
  gather.algorithms = {sched::Algorithm::ring};
  const auto gather_report = run_validation(executor, t, gather);
  REQUIRE(gather_report.rows.size() == 1);
  CHECK(gather_report.collective == sched::Collective::allgather);
  CHECK(gather_report.wrong_elements == 0);
  CHECK(gather_report.rows[0].predicted == Approx(3 * (4e-6 + 16384 / 25e9)).epsilon(1e-9));

  std::ostringstream csv;
  write_validation_csv(report, csv);
  const std::string text = csv.str();
  CHECK(text.rfind("algorithm,chunks,size_bytes,measured_s,predicted_s,error", 0) == 0);
  CHECK(std::count(text.begin(), text.end(), '\n') == 7);
}

TEST_CASE("validation: bf16 rows run bf16 plans and predict their reductions' traffic",
          "[backend][validation]") {
  HostExecutor executor;
  ValidationOptions o;
  o.sizes = {64 * 1024};
  o.chunks = {1};
  o.repetitions = 1;
  o.warmup = 0;
  o.devices = 1;
  o.dtype = sched::DType::bf16;
  auto t = four_ranks();
  for (auto gpu : t.gpus()) {
    t.node(gpu).memory_bandwidth = 300e9;
    t.node(gpu).reduce_traffic = {3.0, 3.0, 4.5};
  }
  const auto report = run_validation(executor, t, o);
  REQUIRE(report.rows.size() == 2);
  CHECK(report.wrong_elements == 0);
  CHECK(report.dtype == sched::DType::bf16);
  for (const auto& r : report.rows) {
    CHECK(r.checked_elements == 4 * r.size / 2);
  }
  // As the fp32 ring above on a shared 300 GB/s memory, with 4.5 bytes of traffic per byte.
  CHECK(report.rows[1].predicted ==
        Approx(6 * (4e-6 + 16384 / 25e9) + 3 * 4.5 * 16384 / 75e9).epsilon(1e-9));
  std::ostringstream csv;
  write_validation_csv(report, csv);
  CHECK(csv.str().find(",bf16,allreduce\n") != std::string::npos);
}

TEST_CASE("validation: the algorithms asked for, in their order, naive once per size",
          "[backend][validation]") {
  HostExecutor executor;
  ValidationOptions o;
  o.sizes = {64 * 1024};
  o.chunks = {1, 2};
  o.algorithms = {sched::Algorithm::tree, sched::Algorithm::naive, sched::Algorithm::direct};
  o.repetitions = 1;
  o.warmup = 0;
  const auto report = run_validation(executor, four_ranks(), o);
  std::vector<std::string> rows;
  for (const auto& r : report.rows) rows.push_back(r.algorithm + std::to_string(r.chunks));
  CHECK(rows == std::vector<std::string>{"tree1", "tree2", "naive1", "direct1", "direct2"});
  CHECK(report.wrong_elements == 0);
  for (const auto& r : report.rows) {
    CHECK(r.checked_elements == 4 * r.size / 4);
    CHECK(r.predicted > 0);
  }
  // Direct allreduce is one-shot: every rank sends its whole 64 KiB to the three others at once,
  // so its one link into the switch carries three buffers (25 GB/s shared three ways) after the
  // route's 4 us; the reductions cost nothing on this topology.
  CHECK(report.rows[3].predicted == Approx(4e-6 + 3 * 65536 / 25e9).epsilon(1e-9));

  // One summary per algorithm, in row order, over that algorithm's rows only.
  REQUIRE(report.per_algorithm.size() == 3);
  CHECK(report.per_algorithm[0].first == "tree");
  CHECK(report.per_algorithm[1].first == "naive");
  CHECK(report.per_algorithm[2].first == "direct");
  const auto& tree = report.per_algorithm[0].second;
  CHECK(tree.median_abs_error ==
        Approx(0.5 * (std::abs(report.rows[0].error) + std::abs(report.rows[1].error))));
  CHECK(tree.worst == (std::abs(report.rows[1].error) > std::abs(report.rows[0].error) ? 1u : 0u));
  CHECK(report.per_algorithm[1].second.worst == 2);
  CHECK(report.per_algorithm[1].second.median_abs_error == std::abs(report.rows[2].error));
  CHECK(report.per_algorithm[2].second.worst >= 3);

  o.algorithms = {};
  CHECK_THROWS_WITH(run_validation(executor, four_ranks(), o), Catch::Contains("--algos"));
  o.algorithms = {sched::Algorithm::ring};
  o.chunks = {100000};
  CHECK_THROWS_WITH(run_validation(executor, four_ranks(), o, "four.json"),
                    Catch::Contains("ring k=100000 size 65536 bytes on 4 ranks of four.json") &&
                        Catch::Contains("use at most 16384"));
}

namespace {

// Counts the plans it is asked to run, and runs them on the host.
class CountingExecutor final : public Executor {
 public:
  const DeviceInfo& device() const override { return host_.device(); }
  RunResult run(const sched::Plan& plan, const RunOptions& options) override {
    ++runs;
    return host_.run(plan, options);
  }
  int runs = 0;

 private:
  HostExecutor host_;
};

}  // namespace

TEST_CASE("validation: a row that cannot run fails before any row runs", "[backend][validation]") {
  CountingExecutor executor;
  ValidationOptions o;
  o.repetitions = 1;
  o.warmup = 0;
  o.chunks = {1};
  // 64 KiB of buffers per rank and buffer kind fit, 16 MiB do not: the 16 MiB row is refused
  // before the 64 KiB rows run.
  o.sizes = {64 * 1024, 16 << 20};
  o.host_memory_limit = 8 << 20;
  CHECK_THROWS_WITH(run_validation(executor, four_ranks(), o),
                    Catch::Contains("--max-memory") && Catch::Contains("naive k=1 size 16 MiB") &&
                        Catch::Contains("limit of 8.0 MiB"));
  CHECK(executor.runs == 0);
  // Likewise a row the generator refuses: 8 bytes are 2 fp32 elements, fewer than k = 4 chunks.
  o.host_memory_limit = 0;
  o.sizes = {64 * 1024, 8};
  o.chunks = {4};
  CHECK_THROWS_WITH(run_validation(executor, four_ranks(), o), Catch::Contains("size 8 bytes"));
  CHECK(executor.runs == 0);
  o.sizes = {64 * 1024};
  o.host_memory_limit = 8 << 20;
  CHECK(run_validation(executor, four_ranks(), o).rows.size() == 2);
  CHECK(executor.runs == 2);
}

TEST_CASE("validation: a topology with too few GPUs is an input error", "[backend][validation]") {
  HostExecutor executor;
  ValidationOptions o;
  o.ranks = 8;
  CHECK_THROWS_WITH(run_validation(executor, four_ranks(), o, "four.json"),
                    Catch::Contains("four.json") && Catch::Contains("has 4 GPUs"));
}
