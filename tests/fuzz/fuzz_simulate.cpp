// libFuzzer target: a plan read from the input runs on the machine of tests/common/run_checks.hpp
// (configs/hetero-rack.json: NVLink cliques, PCIe-only servers staging through host memory, one
// top-of-rack switch) with its properties: every op's times follow the plan's order, the
// engine's fast paths give the reference run's results, and so does the machine in other units
// (twice the bytes on twice the bandwidth, twice every duration), with a link's capacity changing
// or a flow of another job where the plan's size_bytes asks for one (add_disturbance). A plan that
// cannot be read, or that the engine refuses, is not a finding; a broken property, a crash or
// a hang is.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "schedules/plan_json.hpp"
#include "tests/common/run_checks.hpp"
#include "topology/error.hpp"
#include "topology/routing.hpp"

namespace {

// Plans of a few thousand ops run in milliseconds; the cap keeps the five runs of an input far
// under run.sh's -timeout.
constexpr std::size_t kMaxOps = 4096;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const collsim::topo::Topology machine = collsim::test::checked_machine(COLLSIM_SOURCE_DIR);
  static const collsim::topo::Router router(machine);
  static const collsim::test::ScaledMachine bytes(machine, collsim::test::kTwiceTheBytes);
  static const collsim::test::ScaledMachine time(machine, collsim::test::kTwiceTheTime);
  collsim::sched::Plan plan;
  try {
    plan = collsim::sched::parse_plan(std::string_view(reinterpret_cast<const char*>(data), size),
                                      "fuzz.json");
  } catch (const collsim::InputError&) {
    return 0;
  }
  if (plan.num_ops() > kMaxOps || plan.num_ranks() == 0) return 0;
  collsim::test::bind_ranks(plan, machine);
  collsim::sim::Options options;
  collsim::test::add_disturbance(options, machine, plan.size);
  const collsim::test::RunChecks checks =
      collsim::test::check_runs(router, plan, options, {&bytes, &time});
  if (checks.broken.empty()) return 0;
  for (const std::string& line : checks.broken) std::fprintf(stderr, "broken: %s\n", line.c_str());
  std::abort();
}
