// The properties the simulate fuzz target checks (tests/common/run_checks.hpp) hold for its seeds
// and for every algorithm's plans on its machine, and the checks can fail.
#include "tests/common/run_checks.hpp"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "schedules/generate.hpp"
#include "schedules/plan_json.hpp"
#include "tests/common/files.hpp"
#include "tests/common/sizes.hpp"

using namespace collsim;
using namespace collsim::sched;

namespace {

const topo::Topology& checked() {
  static const topo::Topology t = test::checked_machine(COLLSIM_SOURCE_DIR);
  return t;
}

// The checked machine in the units of test::kTwiceTheBytes and test::kTwiceTheTime, as the fuzz
// target runs every plan on them too.
const std::vector<const test::ScaledMachine*>& scalings() {
  static const test::ScaledMachine bytes(checked(), test::kTwiceTheBytes);
  static const test::ScaledMachine time(checked(), test::kTwiceTheTime);
  static const std::vector<const test::ScaledMachine*> both = {&bytes, &time};
  return both;
}

// A ring allreduce of 1 MiB in k chunks on the checked machine's GPUs `ranks`, and its run with
// every op recorded, registered at the start as the run checks' reference run is.
struct RingRun {
  Plan plan;
  sim::Options options;
  sim::Result result;
};
RingRun ring_run(const topo::Router& router, std::vector<topo::NodeId> ranks, std::uint32_t k) {
  PlanRequest req;
  req.algorithm = Algorithm::ring;
  req.size = test::MiB;
  req.chunks = k;
  req.ranks = std::move(ranks);
  RingRun run{generate(router, req), {}, {}};
  run.options.record_ops = true;
  run.options.window_ops = 0;
  run.result = sim::simulate(router, run.plan, run.options);
  return run;
}

std::string broken_lines(const test::RunChecks& c) {
  std::string s;
  for (const std::string& line : c.broken) s += line + "\n";
  return s;
}

}  // namespace

TEST_CASE("the fuzz seeds run with every run property", "[model][run_checks]") {
  const topo::Router router(checked());
  std::size_t ran = 0;
  std::size_t files = 0;
  for (const char* dir : {"tests/fuzz/corpus/plan", "tests/fuzz/corpus/simulate"})
    for (const auto& entry :
         std::filesystem::directory_iterator(std::string(COLLSIM_SOURCE_DIR) + "/" + dir)) {
      Plan plan = parse_plan(test::read_file(entry.path()), entry.path().string());
      test::bind_ranks(plan, checked());
      sim::Options o;  // as the fuzz target runs it
      test::add_disturbance(o, checked(), plan.size);
      const test::RunChecks c = test::check_runs(router, plan, o, scalings());
      INFO(entry.path().string() << "\n" << broken_lines(c));
      CHECK(c.broken.empty());
      ran += c.ran;
      ++files;
    }
  // Every seed is a plan the engine runs: a seed it refused would start the fuzzer nowhere.
  CHECK(files >= 11);
  CHECK(ran == files);
}

TEST_CASE("every algorithm's plans run with every run property", "[model][run_checks]") {
  const topo::Router router(checked());
  std::uint64_t runs = 0;  // picks each run's link or pair of GPUs
  // 6 and 16 ranks: a server and a half (ranks on both kinds of server), and all four servers.
  for (const std::size_t ranks : {std::size_t{6}, std::size_t{16}}) {
    std::vector<topo::NodeId> gpus = checked().gpus();
    gpus.resize(ranks);
    for (Collective c : all_collectives())
      for (Algorithm a : algorithms_for(c, static_cast<RankId>(ranks))) {
        PlanRequest req;
        req.collective = c;
        req.algorithm = a;
        req.size = 3 * test::MiB + 4 * 16 * 5;  // chunks of unequal size
        req.chunks = 2;
        req.ranks = gpus;
        if (!why_not(req, static_cast<RankId>(ranks)).empty()) continue;
        Plan plan;
        try {
          plan = generate(router, req);
        } catch (const InputError&) {
          continue;  // hier on ranks whose servers differ
        }
        // Undisturbed, then each disturbance on another link or pair of GPUs.
        for (std::uint64_t disturbance = 0; disturbance < 4; ++disturbance) {
          sim::Options o;
          test::add_disturbance(o, checked(), 4 * runs++ + disturbance);
          const test::RunChecks checks = test::check_runs(router, plan, o, scalings());
          INFO(fmt::format("{} {} on {} ranks, disturbance {}\n{}", to_string(c), to_string(a),
                           ranks, disturbance, broken_lines(checks)));
          CHECK(checks.ran);
          CHECK(checks.broken.empty());
        }
      }
  }
}

TEST_CASE("the run checks find times out of the plan's order", "[model][run_checks]") {
  const topo::Router router(checked());
  const RingRun run = ring_run(router, {checked().gpus()[0], checked().gpus()[1]}, 1);
  const Plan& plan = run.plan;
  const sim::Result& good = run.result;
  std::vector<std::string> broken;
  test::run_checks_detail::check_order(plan, good, broken);
  CHECK(broken.empty());
  // The last op made ready before the ops it waits for ended.
  sim::Result early = good;
  early.ops.back().ready = 0;
  test::run_checks_detail::check_order(plan, early, broken);
  CHECK(!broken.empty());
  broken.clear();
  // A run that differs from the reference in one op's end by one ulp.
  sim::Result moved = good;
  moved.ops.front().end = std::nextafter(moved.ops.front().end, 1.0);
  test::run_checks_detail::check_same("moved", good, moved, broken);
  CHECK(broken.size() == 1);
}

TEST_CASE("the scaled runs find a duration or a size left in the old units",
          "[model][run_checks]") {
  const topo::Router router(checked());
  const RingRun run =
      ring_run(router, {checked().gpus()[0], checked().gpus()[1], checked().gpus()[12]}, 2);
  const Plan& plan = run.plan;
  const sim::Options& o = run.options;
  const sim::Result& base = run.result;
  for (const test::ScaledMachine* machine : scalings())
    CHECK(test::scaled_run_differences(*machine, plan, o, base).empty());
  // A link latency the scaling missed: the same routes (every latency only grows), later ends.
  test::ScaledMachine latency(checked(), test::kTwiceTheTime);
  const topo::Route& route = router.route(checked().gpus()[1], checked().gpus()[12]);
  latency.topology.link(route.links.front()).latency *= 1.5;
  CHECK(!test::scaled_run_differences(latency, plan, o, base).empty());
  // A bandwidth the scaling missed.
  test::ScaledMachine bandwidth(checked(), test::kTwiceTheBytes);
  bandwidth.topology.link(route.links.back()).bandwidth /= 2;
  CHECK(!test::scaled_run_differences(bandwidth, plan, o, base).empty());
  // A result one ulp off in one op's start.
  sim::Result moved = base;
  moved.ops.back().start = std::nextafter(moved.ops.back().start, 1.0);
  CHECK(test::scaled_differences(base, moved, test::Scale{}).size() == 1);
}

TEST_CASE("the cost checks find times and loads the model's rules do not give",
          "[model][run_checks]") {
  const topo::Router router(checked());
  // Both kinds of server: copies through host memory too.
  const RingRun run = ring_run(router, checked().gpus(), 2);
  const Plan& plan = run.plan;
  const sim::Options& o = run.options;
  const sim::Result& good = run.result;
  std::vector<std::string> broken;
  test::check_costs(router, plan, o, good, broken);
  CHECK(broken.empty());
  const auto breaks = [&](const sim::Result& r) {
    std::vector<std::string> lines;
    test::check_costs(router, plan, o, r, lines);
    return !lines.empty();
  };
  // An op ready one ulp after the last op before it ended.
  sim::Result late = good;
  late.ops.back().ready = std::nextafter(late.ops.back().ready, 1.0);
  CHECK(breaks(late));
  // A transfer that ends as it starts, faster than its link allows.
  OpId send = 0;
  while (plan.kind(send) != OpKind::send || plan.bytes(send) == 0) ++send;
  sim::Result fast = good;
  fast.ops[send].end = fast.ops[plan.partner(send)].end = fast.ops[send].start;
  CHECK(breaks(fast));
  // A link that carried a thousandth more than the flows that crossed it.
  sim::Result heavy = good;
  REQUIRE(!heavy.resources.empty());
  heavy.resources.front().bytes *= 1.001;
  CHECK(breaks(heavy));
}

TEST_CASE("the cost checks allow for picosecond flows late in a run", "[model][run_checks]") {
  // Found by the request fuzzer: 4-byte pieces reduced at 2 TB/s take 6 ps each, tens of
  // microseconds into the run, where a time's ulp is a thousandth of a picosecond. The
  // memory's busy time sums 176 such intervals, each rounded: about 2e-9 of it.
  const topo::Topology t =
      topo::load_topology(std::string(COLLSIM_SOURCE_DIR) + "/configs/hetero-rack.json");
  const topo::Router router(t);
  PlanRequest req;
  req.collective = Collective::reduce_scatter;
  req.algorithm = Algorithm::ring;
  req.chunks = 16;
  req.size = 768;
  req.dtype = DType::bf16;
  req.root = 2;
  req.host_memory = HostMemory::pageable;
  for (const topo::NodeId g : {0u, 1u, 2u, 3u, 7u, 8u, 9u, 10u, 14u, 15u, 16u, 17u})
    req.ranks.push_back(g);
  const Plan plan = generate(router, req);
  sim::Options o;
  o.record_ops = true;
  o.window_ops = 0;
  const sim::Result run = sim::simulate(router, plan, o);
  std::vector<std::string> broken;
  test::check_costs(router, plan, o, run, broken);
  INFO(fmt::format("{}", fmt::join(broken, "\n")));
  CHECK(broken.empty());
}
