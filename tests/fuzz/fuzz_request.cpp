// libFuzzer target: a collective request made of the input's bytes (machine, collective,
// algorithm, ranks, size, dtype, chunks, root, host memory), wherever generate() accepts it,
// must give a plan that computes its collective (sched::verify). On a uniform machine, where
// the size splits evenly (even_unit), the engine must take the closed form's time to 1e-9. On a
// shipped machine, the run made the command line's way (streamed where it can be) and the plan
// listed chunk by chunk must take the whole plan's time to the bit, and one rank per orbit
// that of every rank to 1e-9; both runs with every duration doubled and every bandwidth halved
// must give their results in those units to the bit (tests/common/scaled_runs.hpp); and the
// whole plan's run must follow the cost model's rules (tests/common/cost_checks.hpp). The checks of
// tests/model and tests/schedules cover a grid of sizes and chunk counts; this one walks the space
// between.
#include <fmt/format.h>
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <numeric>
#include <string>

#include "schedules/closed_form.hpp"
#include "schedules/generate.hpp"
#include "schedules/verify.hpp"
#include "sim/engine.hpp"
#include "tests/common/cost_checks.hpp"
#include "tests/common/run_differences.hpp"
#include "tests/common/scaled_runs.hpp"
#include "tests/schedules/fixtures.hpp"
#include "topology/error.hpp"
#include "topology/loader.hpp"
#include "topology/routing.hpp"

using namespace collsim;

namespace {

// Larger plans take longer to verify than a fuzzer should spend on one input.
constexpr std::size_t kMaxOps = 20000;

// What broke, and the request as `collsim run` options.
[[noreturn]] void broken(const std::string& what, const sched::PlanRequest& r, sched::RankId p,
                         const std::string& machine) {
  std::string ranks;
  for (topo::NodeId g : r.ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(g);
  std::fprintf(stderr,
               "broken: %s: --algo %s --collective %s --chunks %u --size %llu --dtype %s --root %u "
               "(p = %u on %s%s%s%s)\n",
               what.c_str(), std::string(sched::to_string(r.algorithm)).c_str(),
               std::string(sched::to_string(r.collective)).c_str(), r.chunks,
               static_cast<unsigned long long>(r.size),
               std::string(sched::to_string(r.dtype)).c_str(), r.root, p, machine.c_str(),
               r.host_memory == sched::HostMemory::pageable ? ", pageable host memory" : "",
               ranks.empty() ? "" : ", GPU node ids ", ranks.c_str());
  std::abort();
}

void check_verifies(const sched::Plan& plan, const sched::PlanRequest& r, sched::RankId p,
                    const std::string& machine) {
  const sched::VerifyReport report = sched::verify(plan);
  if (!report.ok()) broken("the plan does not verify: " + report.problems.front(), r, p, machine);
}

std::string seconds(double s) {
  return fmt::format("{:.17g} s", s);
}

// The smallest size, in bytes, that every algorithm splits into pieces of whole, equal element
// counts: k chunks of p pieces (ring, direct) or of p' pieces, p' the largest power of two up to
// p (rhd halves each chunk among the p' ranks left after the hand-over).
Bytes even_unit(const sched::PlanRequest& r, sched::RankId p) {
  sched::RankId q = 1;
  while (q * 2 <= p) q *= 2;
  return Bytes{sched::dtype_size(r.dtype)} * r.chunks * std::lcm(Bytes{p}, Bytes{q});
}

bool close(double a, double b) {
  return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b));
}

// The request on p GPUs of a uniform machine (tests/schedules/fixtures.hpp), against its
// closed form.
void on_uniform(sched::PlanRequest r, sched::RankId p, const sched::UniformCosts& c) {
  topo::Topology t = test::uniform_gpus(p, c);
  topo::finalize(t);
  sched::Plan plan;
  {
    const topo::Router router(t);
    try {
      plan = sched::generate(router, r);
    } catch (const InputError&) {
      return;
    }
  }
  if (plan.num_ops() > kMaxOps) return;
  check_verifies(plan, r, p, "a uniform machine");
  // The closed forms use the mean piece where the size does not split evenly, and hier's
  // depends on servers, which this machine has none of.
  if (r.algorithm == sched::Algorithm::hier || r.size % even_unit(r, p) != 0) return;
  test::link_plan_pairs(t, plan, c);
  topo::finalize(t);
  const topo::Router router(t);
  const double got = sim::simulate(router, plan).time;
  const double want = sched::closed_form(r, p, c);
  if (!close(got, want))
    broken("simulated " + seconds(got) + ", closed form " + seconds(want), r, p,
           "a uniform machine");
}

struct Shipped {
  static topo::Topology load(const char* file, std::array<double, 2> staging) {
    topo::Topology t = topo::load_topology(std::string(COLLSIM_SOURCE_DIR) + "/configs/" + file);
    for (topo::NodeId n = 0; n < t.num_nodes(); ++n)
      if (t.node(n).kind == topo::NodeKind::cpu) t.node(n).pageable_traffic = staging;
    return t;
  }
  topo::Topology topology;
  topo::Router router;
  test::ScaledMachine slower;  // twice every duration, half every bandwidth
  // `staging`: every CPU's pageable_traffic, as a calibration sets it.
  explicit Shipped(const char* file, bool ecmp, std::array<double, 2> staging = {1, 1})
      : topology(load(file, staging)),
        router(topology, topo::RoutingOptions{.ecmp = ecmp}),
        slower(topology, test::kTwiceTheTime, topo::RoutingOptions{.ecmp = ecmp}) {}
};

// `slower` must be `run` with every time doubled, to the bit.
void check_slower(const sim::Result& run, const sim::Result& slower, const char* what,
                  const sched::PlanRequest& r, sched::RankId p, const std::string& machine) {
  const std::vector<std::string> d = test::scaled_differences(run, slower, test::kTwiceTheTime);
  if (!d.empty())
    broken(
        std::string(what) + " with every duration doubled and every bandwidth halved: " + d.front(),
        r, p, machine);
}

// The request on the first p GPUs of a shipped machine (in reverse order when `reversed`).
void on_shipped(const Shipped& m, sched::PlanRequest r, sched::RankId p, bool reversed) {
  const std::vector<topo::NodeId>& gpus = m.topology.gpus();
  r.ranks.assign(gpus.begin(), gpus.begin() + p);
  if (reversed) std::reverse(r.ranks.begin(), r.ranks.end());
  sched::Plan plan;
  try {
    plan = sched::generate(m.router, r);
  } catch (const InputError&) {
    return;  // hier on ranks whose servers differ
  }
  if (plan.num_ops() > kMaxOps) return;
  const std::string& name = m.topology.name();
  check_verifies(plan, r, p, name);
  sim::Options whole;
  whole.window_ops = 0;
  whole.record_ops = true;
  const sim::Result reference = sim::simulate(m.router, plan, whole);
  std::vector<std::string> rules;
  test::check_costs(m.router, plan, whole, reference, rules);
  if (!rules.empty()) broken("the cost model's rules: " + rules.front(), r, p, name);
  const sim::Result as_run = sim::simulate(m.router, r);
  if (!test::same_double(reference.time, as_run.time) || reference.flows != as_run.flows)
    broken("run as the command line does: " + seconds(as_run.time) + " against " +
               seconds(reference.time) + " for the whole plan",
           r, p, name);
  check_slower(as_run, sim::simulate(m.slower.router, r), "run as the command line does", r, p,
               name);
  sched::PlanRequest listed = r;
  listed.run_order = false;
  const sim::Result chunk_by_chunk =
      sim::simulate(m.router, sched::generate(m.router, listed), whole);
  if (!test::same_double(reference.time, chunk_by_chunk.time))
    broken("listed chunk by chunk: " + seconds(chunk_by_chunk.time) + " against " +
               seconds(reference.time),
           r, p, name);
  sim::Options symmetric;
  symmetric.rank_symmetry = true;
  const sim::Result orbit = sim::simulate(m.router, r, symmetric);
  if (orbit.rotation != 0 && !close(orbit.time, reference.time))
    broken("one rank per orbit of " + std::to_string(orbit.rotation) + ": " + seconds(orbit.time) +
               " against " + seconds(reference.time),
           r, p, name);
  if (orbit.rotation != 0)
    check_slower(orbit, sim::simulate(m.slower.router, r, symmetric), "one rank per orbit", r, p,
                 name);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Shipped machines[] = {
      Shipped("dgx-h100.json", false), Shipped("hetero-rack.json", false),
      Shipped("t4x4-pcie.json", false, {1.25, 0.75}), Shipped("cluster-1024.json", true)};
  // The costs of tests/model/closed_form_test.cpp: transfer-bound, reduction-bound, bandwidth
  // only.
  static const sched::UniformCosts costs[] = {{1e-6, 0.5e-6, 10e9, 2e-6, 200e9},
                                              {1e-6, 0.5e-6, 50e9, 3e-6, 20e9},
                                              {0, 0, 25e9, 0, kUnlimited}};
  FuzzedDataProvider in(data, size);
  const auto machine = in.ConsumeIntegralInRange<unsigned>(0, std::size(machines));
  const sched::RankId most =
      machine == 0
          ? 24
          : std::min<sched::RankId>(
                16, static_cast<sched::RankId>(machines[machine - 1].topology.gpus().size()));
  const auto p = in.ConsumeIntegralInRange<sched::RankId>(1, most);
  sched::PlanRequest r;
  const auto collectives = sched::all_collectives();
  r.collective = collectives[in.ConsumeIntegralInRange<std::size_t>(0, collectives.size() - 1)];
  const std::vector<sched::Algorithm> algorithms = sched::algorithms_for(r.collective, p);
  if (algorithms.empty()) return 0;
  r.algorithm = algorithms[in.ConsumeIntegralInRange<std::size_t>(0, algorithms.size() - 1)];
  r.dtype = static_cast<sched::DType>(in.ConsumeIntegralInRange<int>(0, 2));
  r.chunks = in.ConsumeIntegralInRange<std::uint32_t>(1, 16);
  r.root = in.ConsumeIntegralInRange<sched::RankId>(0, p - 1);
  r.host_memory = in.ConsumeBool() ? sched::HostMemory::pageable : sched::HostMemory::pinned;
  const bool reversed = in.ConsumeBool();
  const auto cost = in.ConsumeIntegralInRange<std::size_t>(0, std::size(costs) - 1);
  // Sizes that split evenly (even_unit), where the closed forms are exact, or any from one byte
  // to 4 MiB.
  if (in.ConsumeBool())
    r.size = even_unit(r, p) * in.ConsumeIntegralInRange<Bytes>(1, 2048);
  else
    r.size = in.ConsumeIntegralInRange<Bytes>(1, Bytes{4} << 20);
  if (!why_not(r, p).empty()) return 0;
  if (machine == 0)
    on_uniform(r, p, costs[cost]);
  else
    on_shipped(machines[machine - 1], r, p, reversed);
  return 0;
}
