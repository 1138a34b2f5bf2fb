// Engine throughput on ring allreduce: events per second, wall time and peak memory.
//
//   bench_engine --gpus 1024 --size 1GiB --chunks 8 --repeat 3
//
// The machine is a ring of GPUs joined by duplex links (100 GB/s, 1 us; alpha 2 us; reductions
// 3 us + 3 bytes / 2 TB/s). Only neighbours talk in a ring schedule, so this is the uniform
// machine of the closed forms, and the bench prints the relative difference as a sanity check.
// Peak RSS is the process's, so run one configuration per process (bench/run.sh does).
#include <fmt/format.h>
#include <sys/resource.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "schedules/closed_form.hpp"
#include "schedules/generate.hpp"
#include "sim/engine.hpp"
#include "tools/huge_pages_option.hpp"
#include "topology/error.hpp"
#include "topology/freed_memory.hpp"
#include "topology/huge_pages.hpp"
#include "topology/loader.hpp"
#include "topology/routing.hpp"
#include "topology/topology.hpp"
#include "topology/units.hpp"

namespace {

using namespace collsim;

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The median of `v` (the upper one of an even count), which it sorts.
double median(std::vector<double>& v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Timed {
  sim::Result result;
  double wall = 0;  // median over the runs, seconds
  double cpu = 0;
  double first_cpu = 0;  // the first run's, with the coldest caches
};

// Runs `simulate` `repeat` times; the result of the last run and the median wall and CPU times.
template <typename Simulate>
Timed median_run(int repeat, Simulate simulate) {
  std::vector<double> walls, cpus;
  Timed t;
  for (int i = 0; i < repeat; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    t.result = simulate();
    cpus.push_back(cpu_seconds() - c0);
    walls.push_back(seconds_since(t0));
  }
  t.first_cpu = cpus.front();
  t.wall = median(walls);
  t.cpu = median(cpus);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_memory();  // as collsim does: the runs of a case, and a sweep's, follow each other
  CLI::App app{"Engine benchmark: ring allreduce on a ring of GPUs"};
  std::uint32_t gpus = 8;
  std::string size_text = "1GiB";
  std::uint32_t chunks = 8;
  int repeat = 3;
  bool header = false;
  bool jitter = false;
  std::string topology_file;
  std::string algorithm_name = "ring";
  std::string collective_name = "allreduce";
  std::string case_name;
  double max_wall = 0;
  double max_mib = 0;
  double min_rate = 0;
  bool sweep = false;
  bool whole = false;
  bool only_setup = false;
  bool components = false;
  bool untied = false;
  bool stats = false;
  bool symmetry = false;
  std::string huge_pages = "hot";
  std::size_t window_ops = sim::Options{}.window_ops;
  std::string routing = "ecmp";
  std::string route_by = "auto";
  app.add_option("--gpus", gpus, "Number of GPUs")->check(CLI::Range(2u, 1u << 20));
  app.add_option("--size", size_text, "Allreduce size, e.g. 1GiB");
  app.add_option("--chunks", chunks, "Pipeline chunks k")->check(CLI::Range(1u, 1024u));
  app.add_option(
         "--repeat", repeat,
         "Runs; the median wall time is reported (with --sweep: runs of each collective, each "
         "counted with its median)")
      ->check(CLI::Range(1, 100));
  app.add_flag("--header", header, "Print the table header first");
  app.add_flag("--jitter", jitter,
               "Give every link a slightly different bandwidth (up to +0.6 %), so that events "
               "almost never share a time: the event queue's worst case");
  app.add_option("--topology", topology_file,
                 "Run on this topology file (every GPU, ring order = file order) instead of the "
                 "built-in ring; --gpus and --jitter are then ignored and there is no closed form");
  app.add_option("--algorithm", algorithm_name,
                 "Allreduce algorithm: ring, tree, rhd, rd, hier, ...");
  app.add_option("--collective", collective_name,
                 "allreduce (the default), reduce_scatter, allgather, broadcast, reduce or "
                 "alltoall; --sweep and the closed-form check are for allreduce only");
  app.add_option("--case", case_name,
                 "Print one row of the targets table (case, events, events/s, wall, CPU, peak, "
                 "target, met) under this name instead of the detailed row");
  app.add_option("--max-wall", max_wall, "Target: generate + simulate wall seconds (0: none)");
  app.add_option("--max-mib", max_mib, "Target: peak RSS in MiB (0: none)");
  app.add_option("--min-rate", min_rate,
                 "Target: engine events per CPU second of the simulation (0: none)");
  app.add_flag(
      "--sweep", sweep,
      "nccl-tests-style sweep: every allreduce algorithm the machine accepts, sizes 8 B to "
      "16 GiB by factors of 2; --max-wall is then per collective");
  app.add_flag("--whole", whole,
               "Targets table: generate the whole plan, then simulate it, even where the "
               "command line would simulate it while generating (ring collectives)");
  app.add_flag("--setup-only", only_setup,
               "Time what comes before the first event alone, once each: loading the topology, "
               "generating the whole plan and registering it (checks, stream order, routes: a run "
               "stopped after its first event, on a router that has computed no route yet)");
  app.add_flag("--untied", untied,
               "Flows hold every link of their routes (sim::Options::tie_links off), to measure "
               "what tying links saves");
  app.add_flag("--components", components,
               "Re-share every arrival and departure over its whole sharing component instead of "
               "its region (sim::Options::sharing_regions off), to measure what regions save");
  app.add_flag("--symmetry", symmetry,
               "Targets table: simulate one rank per orbit when a rotation of the ranks maps the "
               "plan and topology onto themselves (sim::Options::rank_symmetry); the row then "
               "counts the representatives' events");
  app.add_flag("--stats", stats,
               "Targets table: also print, on stderr, the simulated time to the last digit and "
               "how much re-sharing the run did");
  app.add_option("--routing", routing,
                 "ecmp (the command line's default) or shortest: how flows pick among "
                 "equal-cost paths")
      ->check(CLI::IsMember({"ecmp", "shortest"}));
  app.add_option("--route-by", route_by,
                 "auto (the command line's choice), search or cells: how routes are computed "
                 "(the routes are the same; topology/routing.hpp)")
      ->check(CLI::IsMember({"auto", "search", "cells"}));
  app.add_option("--window-ops", window_ops,
                 "Register a whole plan in windows of at least this many ops "
                 "(sim::Options::window_ops; 0: every op at the start)")
      ->capture_default_str();
  cli::add_huge_pages_option(app, huge_pages);
  CLI11_PARSE(app, argc, argv);
  huge_pages::set_advice(cli::huge_pages_advice(huge_pages));

  try {
    const double bw = 100e9, lat = 1e-6, alpha = 2e-6, launch = 3e-6, mem = 2e12;
    topo::Topology t;
    const double load_c0 = cpu_seconds();
    if (!topology_file.empty()) {
      t = topo::load_topology(topology_file);
      gpus = static_cast<std::uint32_t>(t.gpus().size());
    }
    for (std::uint32_t i = 0; topology_file.empty() && i < gpus; ++i) {
      topo::Node n;
      n.name = "gpu" + std::to_string(i);
      n.kind = topo::NodeKind::gpu;
      n.alpha = alpha;
      n.launch_latency = launch;
      n.memory_bandwidth = mem;
      t.add_node(std::move(n));
    }
    for (std::uint32_t i = 0; topology_file.empty() && i < gpus; ++i) {
      const std::uint32_t j = (i + 1) % gpus;
      if (gpus == 2 && i == 1) break;  // two GPUs: one duplex link
      const double b = jitter ? bw * (1 + 1e-3 * (i % 7)) : bw;
      t.add_link(topo::Link{i, j, topo::LinkKind::nvlink, b, lat, i});
      t.add_link(topo::Link{j, i, topo::LinkKind::nvlink, b, lat, i});
    }
    if (topology_file.empty()) topo::finalize(t);
    const auto method = route_by == "search"  ? topo::RoutingMethod::search
                        : route_by == "cells" ? topo::RoutingMethod::cells
                                              : topo::RoutingMethod::automatic;
    topo::Router router(t, topo::RoutingOptions{.ecmp = routing == "ecmp", .method = method});

    const auto algorithm = sched::parse_algorithm(algorithm_name);
    if (!algorithm)
      throw InputError("", "--algorithm", "unknown algorithm '" + algorithm_name + "'");
    const auto collective = sched::parse_collective(collective_name);
    if (!collective)
      throw InputError("", "--collective", "unknown collective '" + collective_name + "'");
    const auto target = [&](double wall_s, double cpu_s, double rate = 0) {
      std::string goal, met;
      if (max_wall > 0) goal = fmt::format("≤ {:g} s", max_wall);
      if (max_mib > 0) goal += fmt::format("{}≤ {:g} MiB", goal.empty() ? "" : ", ", max_mib);
      if (min_rate > 0)
        goal += fmt::format("{}≥ {:.3g} events/s", goal.empty() ? "" : ", ", min_rate);
      if (goal.empty()) return std::pair{std::string("—"), std::string("—")};
      // Every target missed is named. The box is shared: when only the CPU time meets the wall
      // target, say so.
      std::string missed;
      auto miss = [&](const char* what) {
        missed += (missed.empty() ? "" : ", ") + std::string(what);
      };
      bool cpu_only = false;
      if (max_wall > 0 && wall_s > max_wall) {
        if (cpu_s <= max_wall)
          cpu_only = true;
        else
          miss("time");
      }
      if (max_mib > 0 && peak_rss_mib() > max_mib) miss("memory");
      if (min_rate > 0 && rate < min_rate) miss("rate");
      met = !missed.empty() ? "no (" + missed + ")" : cpu_only ? "CPU only" : "yes";
      return std::pair{goal, met};
    };
    if (case_name.empty() && sweep) case_name = "sweep";
    if (header && !case_name.empty())
      std::printf(
          "| case | collectives | events | events/s (CPU) | wall s | CPU s | peak RSS MiB | target "
          "| met |\n|---|---:|---:|---:|---:|---:|---:|---|---|\n");

    if (sweep) {
      // Every (algorithm, size) the machine accepts, generate + simulate each; the slowest counts.
      std::uint64_t events = 0, collectives = 0;
      double worst_wall = 0, worst_cpu = 0, total_wall = 0, total_cpu = 0, sim_cpu = 0;
      double worst_first_cpu = 0;  // a sweep runs each collective once: its caches are colder
      std::string worst, worst_by_cpu;
      std::vector<double> per_wall, per_cpu;
      for (sched::Algorithm a : sched::algorithms_for(sched::Collective::allreduce, gpus)) {
        for (Bytes size = 8; size <= (Bytes{16} << 30); size *= 2) {
          sched::PlanRequest r;
          r.algorithm = a;
          r.size = size;
          r.chunks = a == sched::Algorithm::naive
                         ? 1
                         : static_cast<std::uint32_t>(std::min<Bytes>(chunks, size / 4));
          if (!sched::why_not(r, gpus).empty()) continue;
          // Each collective runs `repeat` times and counts with its median wall and CPU time, so
          // that one preemption of the process does not decide a target judged on the slowest.
          std::vector<double> generate_cpu;
          Timed run;
          try {
            run = median_run(repeat, [&] {
              if (symmetry) {
                // Generated while simulated, one rank per orbit where a rotation fits: one
                // figure for both.
                sim::Options o;
                o.rank_symmetry = true;
                return sim::simulate(router, r, o);
              }
              const double c0 = cpu_seconds();
              const sched::Plan plan = sched::generate(router, r);
              generate_cpu.push_back(cpu_seconds() - c0);
              return sim::simulate(router, plan);
            });
          } catch (const InputError&) {
            continue;  // e.g. hier on a machine without servers
          }
          const double wall = run.wall, cpu = run.cpu;
          const double generate = median(generate_cpu);
          worst_first_cpu = std::max(worst_first_cpu, run.first_cpu);
          const sim::Result& res = run.result;
          events += res.events;
          ++collectives;
          sim_cpu += cpu - generate;
          total_wall += wall;
          total_cpu += cpu;
          if (wall > worst_wall) {
            worst_wall = wall;
            worst = fmt::format("{} {}", sched::to_string(a), format_size(size));
          }
          if (cpu > worst_cpu) {
            worst_cpu = cpu;
            worst_by_cpu = fmt::format("{} {}", sched::to_string(a), format_size(size));
          }
          if (stats)
            std::fprintf(stderr, "%s %s k=%u: %llu events, generate %.6f s, simulate %.6f s CPU\n",
                         std::string(sched::to_string(a)).c_str(), format_size(size).c_str(),
                         r.chunks, static_cast<unsigned long long>(res.events), generate,
                         cpu - generate);
          per_wall.push_back(wall);
          per_cpu.push_back(cpu);
        }
      }
      // The target holds for every collective, so the slowest decides. Its CPU time is what
      // counts when only the wall time misses: on a shared machine one collective in a few
      // hundred waits for a core.
      const std::size_t over = static_cast<std::size_t>(std::count_if(
          per_cpu.begin(), per_cpu.end(), [&](double c) { return max_wall > 0 && c > max_wall; }));
      const double median_wall = median(per_wall);
      const double median_cpu = median(per_cpu);
      const auto [goal, met] = target(worst_wall, worst_cpu);
      std::string over_text =
          max_wall > 0 ? fmt::format("; {} over {:g} s of CPU", over, max_wall) : "";
      const std::string runs =
          repeat > 1 ? fmt::format("median of {} runs each", repeat) : "one run each";
      if (repeat > 1) over_text += fmt::format("; first runs' CPU max {:.2g}", worst_first_cpu);
      std::printf(
          "| %s: %u GPUs, every algorithm, 8 B–16 GiB, k ≤ %u, %s (slowest: %s "
          "wall, %s CPU%s) | %llu "
          "| %llu | %.3g | %.3f total; per collective median %.2g, max %.2g | %.3f total; median "
          "%.2g, max %.2g | %.0f | %s per collective | %s |\n",
          case_name.c_str(), gpus, chunks, runs.c_str(), worst.c_str(), worst_by_cpu.c_str(),
          over_text.c_str(), static_cast<unsigned long long>(collectives),
          static_cast<unsigned long long>(events), static_cast<double>(events) / sim_cpu,
          total_wall, median_wall, worst_wall, total_cpu, median_cpu, worst_cpu, peak_rss_mib(),
          goal.c_str(), met.c_str());
      return 0;
    }

    sim::Options options;
    options.sharing_regions = !components;
    options.tie_links = !untied;
    options.rank_symmetry = symmetry;
    options.window_ops = window_ops;
    const auto report = [&](const sim::Result& r) {
      if (!stats) return;
      const sim::SharingStats& s = r.sharing;
      const auto fillings = s.regions + s.refills + s.components;
      std::fprintf(
          stderr,
          "simulated %.17g s; re-shares: %llu regions (%llu refills, %llu fell back), "
          "%llu components (%llu whole instants); %.1f flows per filling; %.2f resources per flow; "
          "%llu ops held at most\n",
          r.time, static_cast<unsigned long long>(s.regions),
          static_cast<unsigned long long>(s.refills), static_cast<unsigned long long>(s.fallbacks),
          static_cast<unsigned long long>(s.components),
          static_cast<unsigned long long>(s.instants),
          fillings ? static_cast<double>(s.filled) / static_cast<double>(fillings) : 0.0,
          r.flows ? static_cast<double>(s.held) / static_cast<double>(r.flows) : 0.0,
          static_cast<unsigned long long>(r.ops_held));
    };
    sched::PlanRequest request;
    request.collective = *collective;
    request.algorithm = *algorithm;
    request.size = parse_size(size_text);
    request.chunks = chunks;
    if (only_setup) {
      const double load_cpu = cpu_seconds() - load_c0;
      const double g0 = cpu_seconds();
      const sched::Plan plan = sched::generate(router, request);
      const double generate_cpu = cpu_seconds() - g0;
      sim::Options first_event = options;
      first_event.max_events = 1;
      const double s0 = cpu_seconds();
      const sim::Result res = sim::simulate(router, plan, first_event);
      const double setup_cpu = cpu_seconds() - s0;
      if (header)
        std::printf(
            "| GPUs | algorithm | k | ops | ops registered | load CPU s | generate CPU s | setup "
            "CPU s | peak RSS MiB |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
      std::printf("| %u | %s | %u | %zu | %llu | %.3f | %.3f | %.3f | %.0f |\n", gpus,
                  algorithm_name.c_str(), chunks, plan.num_ops(),
                  static_cast<unsigned long long>(res.ops_held), load_cpu, generate_cpu, setup_cpu,
                  peak_rss_mib());
      return 0;
    }
    if (!case_name.empty() && !whole && (sched::streams(request, gpus) || symmetry)) {
      // Generated while simulated, as the command line does: one figure for both.
      [[maybe_unused]] const auto [result, wall, cpu, first_cpu] =
          median_run(repeat, [&] { return sim::simulate(router, request, options); });
      report(result);
      if (stats && result.rotation != 0)
        std::fprintf(stderr, "one rank per orbit of a rotation by %u ranks\n", result.rotation);
      const double rate = static_cast<double>(result.events) / cpu;
      const auto [goal, met] = target(wall, cpu, rate);
      std::printf("| %s | 1 | %llu | %.3g | %.2f (streamed) | %.2f (streamed) | %.0f | %s | %s |\n",
                  case_name.c_str(), static_cast<unsigned long long>(result.events), rate, wall,
                  cpu, peak_rss_mib(), goal.c_str(), met.c_str());
      return 0;
    }
    auto t0 = std::chrono::steady_clock::now();
    const double g0 = cpu_seconds();
    const sched::Plan plan = sched::generate(router, request);
    const double generate_cpu = cpu_seconds() - g0;
    const double generate_s = seconds_since(t0);
    const double plan_rss = peak_rss_mib();

    [[maybe_unused]] const auto [result, wall, cpu, first_cpu] =
        median_run(repeat, [&] { return sim::simulate(router, plan, options); });

    if (!case_name.empty()) {
      report(result);
      const auto [goal, met] =
          target(generate_s + wall, generate_cpu + cpu, static_cast<double>(result.events) / cpu);
      std::printf(
          "| %s | 1 | %llu | %.3g | %.2f (%.2f + %.2f) | %.2f (%.2f + %.2f) | %.0f | %s | "
          "%s |\n",
          case_name.c_str(), static_cast<unsigned long long>(result.events),
          static_cast<double>(result.events) / cpu, generate_s + wall, generate_s, wall,
          generate_cpu + cpu, generate_cpu, cpu, peak_rss_mib(), goal.c_str(), met.c_str());
      return 0;
    }

    // Validation, ordering and routes alone: a run stopped after its first event (the first
    // window's, where the plan is registered in windows).
    sim::Options setup_only;
    setup_only.max_events = 1;
    setup_only.window_ops = window_ops;
    double c0 = cpu_seconds();
    sim::simulate(router, plan, setup_only);
    const double setup_cpu = cpu_seconds() - c0;

    sched::UniformCosts costs;
    costs.alpha = alpha;
    costs.latency = lat;
    costs.bandwidth = bw;
    costs.launch = launch;
    costs.memory_bandwidth = mem;
    const bool uniform = !jitter && topology_file.empty() && *algorithm == sched::Algorithm::ring &&
                         *collective == sched::Collective::allreduce;
    const double model = uniform ? sched::closed_form(request, gpus, costs) : 0.0;
    const std::string versus =
        uniform ? fmt::format("{:.1e}", std::abs(result.time - model) / model) : std::string("n/a");

    // The engine's own per-op state (sim/engine.cpp): one 32-byte record for each op it held at
    // once; successor groups (ops with two or more successors; none in a ring) are not counted.
    const double engine_mib = 32.0 * static_cast<double>(result.ops_held) / (1024.0 * 1024.0);

    if (header)
      std::printf(
          "| GPUs | size | k | ops | events | generate s | simulate wall s | simulate CPU s | "
          "of which setup s | events/s (CPU) | RSS with plan MiB | engine arrays MiB | "
          "peak RSS MiB | simulated time | vs closed form |\n"
          "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    std::printf(
        "| %u | %s | %u | %zu | %llu | %.3f | %.3f | %.3f | %.3f | %.3g | %.0f | %.0f | %.0f | %s "
        "| %s |\n",
        gpus, format_size(request.size).c_str(), chunks, plan.num_ops(),
        static_cast<unsigned long long>(result.events), generate_s, wall, cpu, setup_cpu,
        static_cast<double>(result.events) / cpu, plan_rss, engine_mib, peak_rss_mib(),
        format_duration(result.time).c_str(), versus.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_engine: %s\n", e.what());
    return 2;
  }
}
