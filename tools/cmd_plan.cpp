// collsim plan: generate a plan as JSON; plan verify | show | import.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <queue>
#include <sstream>

#include "schedules/generate.hpp"
#include "schedules/msccl_import.hpp"
#include "schedules/plan_json.hpp"
#include "schedules/verify.hpp"
#include "sim/engine.hpp"
#include "tools/commands.hpp"
#include "tools/exit_codes.hpp"
#include "tools/resource_guard.hpp"
#include "tools/value_lists.hpp"
#include "topology/error.hpp"
#include "topology/loader.hpp"
#include "topology/routing.hpp"

namespace collsim::cli {
namespace {

struct PlanOptions {
  std::string topology;
  std::string algo = "ring";
  std::string collective = "allreduce";
  std::string size;
  std::uint32_t chunks = 1;
  std::string dtype = "fp32";
  std::string host_memory = "pinned";
  sched::RankId root = 0;
  std::string out;
  std::string file;
  std::string import_size = "64MiB";
  std::string ranks;
  std::string max_memory;
};

Bytes size_option(const std::string& text, const char* option) {
  try {
    return parse_size(text);
  } catch (const UnitError& e) {
    throw InputError("", option, e.what());
  }
}

sched::DType dtype_option(const std::string& text) {
  auto d = sched::parse_dtype(text);
  if (!d) throw InputError("", "--dtype", "found '" + text + "'; expected fp32, fp16 or bf16");
  return *d;
}

void write_out(const sched::Plan& plan, const std::string& out, const topo::Topology* t) {
  if (out.empty() || out == "-") {
    std::string text;
    {
      std::ostringstream s;
      sched::write_plan(s, plan, t);
      text = s.str();
    }
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    sched::save_plan(out, plan, t);
  }
}

void generate_command(const PlanOptions& o) {
  if (o.topology.empty())
    throw InputError("", "--topology",
                     "collsim plan needs --topology FILE (or a subcommand: "
                     "verify, show, import)");
  if (o.size.empty()) throw InputError("", "--size", "collsim plan needs --size, e.g. 64MiB");
  sched::PlanRequest req;
  const auto algo = sched::parse_algorithm(o.algo);
  if (!algo)
    throw InputError(
        "", "--algo",
        "found '" + o.algo + "'; expected one of " +
            sched::join({sched::all_algorithms().begin(), sched::all_algorithms().end()}));
  const auto coll = sched::parse_collective(o.collective);
  if (!coll)
    throw InputError("", "--collective",
                     "found '" + o.collective +
                         "'; expected allreduce, reduce_scatter, allgather, broadcast, reduce or "
                         "alltoall");
  req.algorithm = *algo;
  req.collective = *coll;
  req.size = size_option(o.size, "--size");
  req.dtype = dtype_option(o.dtype);
  req.chunks = o.chunks;
  req.root = o.root;
  req.host_memory = parse_host_memory(o.host_memory, "--host-memory");
  const topo::Topology t = load_topology(o.topology, max_memory_limit(o.max_memory));
  req.ranks = parse_ranks(o.ranks, t, "--ranks");
  topo::Router router(t);
  const sched::Plan plan = sched::generate(router, req);
  write_out(plan, o.out, &t);
}

void verify_command(const PlanOptions& o) {
  std::unique_ptr<topo::Topology> t;
  if (!o.topology.empty())
    t = std::make_unique<topo::Topology>(load_topology(o.topology, max_memory_limit(o.max_memory)));
  const sched::Plan plan = sched::load_plan(o.file, t.get());
  const sched::VerifyReport r = sched::verify(plan);
  if (!r.ok()) {
    std::string all;
    for (const auto& p : r.problems) all += "\n  " + p;
    throw CheckFailed(o.file + ": the plan does not compute its " +
                      std::string(sched::to_string(plan.collective)) + ":" + all);
  }
  fmt::print("{}: ok: {} ops on {} ranks compute {} of {} bytes{}\n", o.file, plan.num_ops(),
             plan.num_ranks(), sched::to_string(plan.collective), plan.size,
             r.races_checked ? "" : " (too large for the race check, which was skipped)");
}

// Longest chain of ops through dependencies, stream order and transfers (a matched pair counts
// once). Returns 0 for an empty plan; throws InputError on a cycle.
std::size_t critical_path(const sched::Plan& plan, const std::string& file) {
  const std::size_t n = plan.num_ops();
  std::vector<std::vector<sched::OpId>> succ(n);
  std::vector<std::uint32_t> indeg(n, 0);
  std::map<std::pair<sched::RankId, sched::StreamId>, sched::OpId> last;
  for (sched::OpId id = 0; id < n; ++id) {
    auto [it, fresh] = last.emplace(std::pair{plan.rank(id), plan.stream(id)}, id);
    if (!fresh) {
      succ[it->second].push_back(id);
      ++indeg[id];
      it->second = id;
    }
    for (sched::OpId d : plan.deps(id)) {
      if (d >= n) continue;
      succ[d].push_back(id);
      ++indeg[id];
    }
  }
  // A transfer starts when both ends are ready: each end waits for the other's predecessors.
  std::vector<std::size_t> depth(n, 0);
  std::vector<char> ready(n, 0);
  std::queue<sched::OpId> q;
  for (sched::OpId id = 0; id < n; ++id)
    if (indeg[id] == 0) q.push(id);
  std::size_t done = 0, best = 0;
  auto finish = [&](sched::OpId id, std::size_t d) {
    depth[id] = d;
    best = std::max(best, d);
    ++done;
    for (sched::OpId s : succ[id]) {
      depth[s] = std::max(depth[s], d);
      if (--indeg[s] == 0) q.push(s);
    }
  };
  while (!q.empty()) {
    const sched::OpId id = q.front();
    q.pop();
    const sched::OpId partner = plan.partner(id);
    if (partner != sched::kNoOp && partner < n) {
      ready[id] = 1;
      if (!ready[partner]) continue;
      const std::size_t d = std::max(depth[id], depth[partner]) + 1;
      finish(id, d);
      finish(partner, d);
      continue;
    }
    finish(id, depth[id] + 1);
  }
  if (done < n)
    throw InputError(file, "",
                     fmt::format("{} of {} ops can never run (a cycle or an unmatched "
                                 "transfer); run collsim plan verify for details",
                                 n - done, n));
  return best;
}

void show_command(const PlanOptions& o) {
  const sched::Plan plan = sched::load_plan(o.file);
  const sched::RankId p = plan.num_ranks();
  std::map<std::string, std::size_t> kinds;
  std::vector<std::size_t> per_rank(p, 0);
  const std::vector<std::uint32_t> streams = plan.streams_per_rank();
  std::vector<std::map<std::string, std::size_t>> rank_kinds(p);
  Bytes moved = 0;
  for (sched::OpId id = 0; id < plan.num_ops(); ++id) {
    std::string k(sched::to_string(plan.kind(id)));
    if (plan.kind(id) == sched::OpKind::copy)
      k += " " + std::string(
                     sched::to_string(sched::copy_kind(plan.src(id).buffer, plan.dst(id).buffer)));
    ++kinds[k];
    if (plan.kind(id) == sched::OpKind::send) moved += plan.bytes(id);
    if (plan.rank(id) < p) {
      ++per_rank[plan.rank(id)];
      ++rank_kinds[plan.rank(id)][k];
    }
  }
  fmt::print("plan {}: {} {}, {} bytes of {}, k = {}, {} ranks\n", o.file, plan.algorithm,
             sched::to_string(plan.collective), plan.size, sched::to_string(plan.dtype),
             plan.chunks, p);
  fmt::print("ops: {} ({} dependency edges), bytes sent: {}\n", plan.num_ops(), plan.num_deps(),
             moved);
  fmt::print("critical path: {} ops\n", critical_path(plan, o.file));
  fmt::print("\n{:<12} {:>10}\n", "kind", "ops");
  for (const auto& [k, count] : kinds) fmt::print("{:<12} {:>10}\n", k, count);
  fmt::print("\n{:>6} {:>8} {:>8}", "rank", "ops", "streams");
  for (const auto& [k, count] : kinds) fmt::print(" {:>9}", k);
  fmt::print("\n");
  for (sched::RankId r = 0; r < p; ++r) {
    fmt::print("{:>6} {:>8} {:>8}", r, per_rank[r], streams[r]);
    for (const auto& [k, count] : kinds) {
      auto it = rank_kinds[r].find(k);
      fmt::print(" {:>9}", it == rank_kinds[r].end() ? 0 : it->second);
    }
    fmt::print("\n");
  }
}

// Simulates a plan file on a topology. Ranks without a GPU (imported plans) take the
// topology's GPUs in order.
void simulate_command(const PlanOptions& o) {
  const topo::Topology t = load_topology(o.topology, max_memory_limit(o.max_memory));
  sched::Plan plan = sched::load_plan(o.file, &t);
  const auto& gpus = t.gpus();
  for (sched::RankId r = 0; r < plan.num_ranks(); ++r) {
    if (plan.rank_gpu[r] != topo::kNoNode) continue;
    if (r >= gpus.size())
      throw InputError(o.file, "/ranks",
                       fmt::format("the plan has {} ranks but topology '{}' has {} GPUs; use a "
                                   "larger topology",
                                   plan.num_ranks(), t.name(), gpus.size()));
    plan.rank_gpu[r] = gpus[r];
  }
  topo::Router router(t);
  sim::Options options;
  options.plan_file = o.file;
  const sim::Result r = sim::simulate(router, plan, options);
  fmt::print("{}: {} {} of {} on {} ranks of {}: {} ({} events)\n", o.file, plan.algorithm,
             sched::to_string(plan.collective), format_size(plan.size), plan.num_ranks(),
             o.topology, format_duration(r.time), r.events);
}

void import_command(const PlanOptions& o) {
  const sched::Plan plan =
      sched::import_msccl(o.file, size_option(o.import_size, "--size"), dtype_option(o.dtype));
  const sched::VerifyReport r = sched::verify(plan);
  for (const auto& p : r.problems) std::fprintf(stderr, "warning: %s\n", p.c_str());
  write_out(plan, o.out, nullptr);
}

}  // namespace

void add_plan_commands(CLI::App& app) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* plan = app.add_subcommand(
      "plan", "Generate a collective's plan as JSON; verify, show or import plans");
  plan->add_option("--topology", o->topology, "Topology JSON file (see docs/topology-format.md)");
  plan->add_option("--algo", o->algo, "ring, tree, rhd, rd, hier, direct, pairwise or naive")
      ->capture_default_str();
  plan->add_option("--collective", o->collective,
                   "allreduce, reduce_scatter, allgather, broadcast, reduce or alltoall")
      ->capture_default_str();
  plan->add_option("--size", o->size, "Buffer size as nccl-tests counts it, e.g. 64MiB");
  plan->add_option("--chunks", o->chunks, "Pipelined chunks k (1: monolithic)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 30));
  plan->add_option("--dtype", o->dtype, "fp32, fp16 or bf16")->capture_default_str();
  plan->add_option("--host-memory", o->host_memory,
                   "pinned or pageable: how the ranks' host buffers are allocated")
      ->capture_default_str();
  plan->add_option("--root", o->root, "Root rank of broadcast and reduce")->capture_default_str();
  plan->add_option("--ranks", o->ranks,
                   "GPUs taking part, in rank order: indices 0-7,16 or GPU names (default: all)");
  plan->add_option("--out", o->out, "Write the plan here (default: standard output)");
  add_max_memory_option(*plan, o->max_memory);
  plan->require_subcommand(0, 1);

  CLI::App* verify = plan->add_subcommand(
      "verify", "Prove that a plan file computes its collective (exit 1 if it does not)");
  verify->add_option("file", o->file, "Plan JSON file")->required();
  verify->add_option("--topology", o->topology, "Resolve the plan's GPU names in this topology");
  add_max_memory_option(*verify, o->max_memory);
  verify->callback([o] { verify_command(*o); });

  CLI::App* show = plan->add_subcommand(
      "show", "Op counts per kind and per rank, streams and critical path of a plan file");
  show->add_option("file", o->file, "Plan JSON file")->required();
  show->callback([o] { show_command(*o); });

  CLI::App* simulate = plan->add_subcommand(
      "simulate", "Simulate a plan file (generated, hand-written or imported) on a topology");
  simulate->add_option("file", o->file, "Plan JSON file")->required();
  simulate->add_option("--topology", o->topology, "Topology JSON file")->required();
  add_max_memory_option(*simulate, o->max_memory);
  simulate->callback([o] { simulate_command(*o); });

  CLI::App* imp = plan->add_subcommand(
      "import", "Convert an MSCCL-style XML algorithm (docs/plan-format.md) into a plan file");
  imp->add_option("file", o->file, "MSCCL-style XML file")->required();
  imp->add_option("--size", o->import_size, "Buffer size the chunks divide")->capture_default_str();
  imp->add_option("--dtype", o->dtype, "fp32, fp16 or bf16")->capture_default_str();
  imp->add_option("--out", o->out, "Write the plan here (default: standard output)");
  imp->callback([o] { import_command(*o); });

  plan->callback([o, plan] {
    if (plan->get_subcommands().empty()) generate_command(*o);
  });
}

}  // namespace collsim::cli
