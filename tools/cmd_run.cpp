// collsim run: one collective on one topology. collsim sweep: the cartesian product of lists.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "tools/bottlenecks.hpp"
#include "tools/commands.hpp"
#include "tools/exit_codes.hpp"
#include "tools/mpi_sweep.hpp"
#include "tools/progress.hpp"
#include "tools/report.hpp"
#include "tools/resource_guard.hpp"
#include "tools/run_extras.hpp"
#include "tools/sweep.hpp"
#include "tools/value_lists.hpp"
#include "topology/error.hpp"
#include "topology/loader.hpp"
#include "topology/routing.hpp"

namespace collsim::cli {
namespace {

// CLI11 reads a negative number into a std::size_t by wrapping it round, so that "-3" would mean
// about 1.8e19: counts of that type accept digits only.
const CLI::Validator kWholeNumber(
    [](std::string& text) -> std::string {
      if (!text.empty() && std::all_of(text.begin(), text.end(),
                                       [](unsigned char c) { return std::isdigit(c) != 0; }))
        return {};
      return "expected a whole number such as 10, not \"" + text + "\"";
    },
    "COUNT");

inline constexpr std::size_t kDefaultMaxPoints = 100000;

// Options shared by run and sweep, as typed; run insists on single values.
struct RunOptions {
  std::string topology;
  std::string collective = "allreduce";
  std::string algo = "ring";
  std::string size;
  std::string chunks = "1";
  std::string dtype = "fp32";
  std::string ranks;
  std::string nranks;
  sched::RankId root = 0;
  std::string calibration;
  std::string routing = "ecmp";
  std::string host_memory = "pinned";
  std::string trace;
  std::string trace_only;       // run --trace-only: GPUs as --ranks names them; empty: every rank
  std::size_t bottlenecks = 0;  // run --bottlenecks; 0: none
  bool bottlenecks_given = false;
  std::string format = "table";
  std::string out;
  std::string csv;
  std::string terms;
  bool chunks_given = false;
  bool chunks_free_for_auto = false;  // echo only: "--algo ring,auto" without --chunks  // --chunks
                                      // typed; "--algo auto" alone leaves k free as well
  bool no_wall = false;
  bool symmetry = false;
  std::string auto_search = "full";
  std::string max_memory;
  double max_reshared = kDefaultMaxReshared;
  bool progress = false;
  unsigned jobs = 0;
  std::size_t max_points = kDefaultMaxPoints;
};

void add_common_options(CLI::App& cmd, RunOptions& o, bool sweep) {
  const std::string list = sweep ? " (a list)" : "";
  cmd.add_option("--topology", o.topology, "Topology JSON file (see docs/topology-format.md)")
      ->required();
  cmd.add_option("--collective", o.collective,
                 "allreduce, reduce_scatter, allgather, broadcast, reduce or alltoall" + list)
      ->capture_default_str();
  cmd.add_option(
         "--algo", o.algo,
         "ring, tree, rhd, rd, hier, direct, pairwise, naive, or auto to pick the fastest" + list +
             (sweep ? std::string("; all: every algorithm that implements the collective") : ""))
      ->capture_default_str();
  cmd.add_option("--size", o.size,
                 "Buffer size as nccl-tests counts it: 64MiB, 1GB (10^3 units), 1GiB (2^10 units)" +
                     (sweep ? std::string(", lists 1MiB,4MiB and ranges 1KiB:4GiB:x4") : ""))
      ->required();
  cmd.add_option("--chunks", o.chunks,
                 "Pipelined chunks k, or auto to pick the fastest of 1,2,4,...,64" +
                     (sweep ? std::string("; lists 1,2,4 and ranges 1:64:x2") : ""))
      ->capture_default_str();
  cmd.add_option("--dtype", o.dtype, "Element type: fp32, fp16 or bf16" + list)
      ->capture_default_str();
  cmd.add_option("--ranks", o.ranks,
                 "GPUs taking part, in rank order: indices 0-7,16 or GPU names (default: all)");
  cmd.add_option("--root", o.root, "Root rank of broadcast and reduce")->capture_default_str();
  cmd.add_option("--calibration", o.calibration,
                 "Calibration JSON from collsim calibrate; replaces matching GPUs' parameters");
  cmd.add_option("--routing", o.routing,
                 "ecmp: each rank pair's flows hash onto one of the equal-cost paths, as fabric "
                 "switches spread flows; shortest: every flow takes the one deterministic "
                 "shortest path (all traffic between two leaves then crosses one spine)")
      ->capture_default_str();
  cmd.add_option("--host-memory", o.host_memory,
                 "pinned or pageable: the host buffer that staging copies use; pageable copies "
                 "also go through the host CPU's memcpy (docs/cost-model.md)")
      ->capture_default_str();
  cmd.add_option("--format", o.format, "Output: table, csv or json (JSON lines)")
      ->capture_default_str();
  cmd.add_option("--out", o.out, "Write the results to this file instead of stdout");
  cmd.add_option("--csv", o.csv,
                 "Also write the rows as CSV to this file, whatever --format prints (with "
                 "--no-wall, wall_s is 0 there too)");
  cmd.add_option("--auto-search", o.auto_search,
                 "How auto searches k: full (every k of 1,2,4,...,64) or fast (for each "
                 "algorithm, stop at the first k slower than the one before)")
      ->capture_default_str();
  add_max_memory_option(cmd, o.max_memory);
  cmd.add_option("--max-reshared", o.max_reshared,
                 "Stop a simulation once bandwidth sharing has re-shared this many flows, or "
                 "its pace says it will (0.5 to 10 million flows a second; runs whose flows "
                 "end one by one on resources that thousands share take hours); 0: no limit")
      ->capture_default_str();
  cmd.add_flag("--symmetry", o.symmetry,
               "Simulate one rank per orbit when rotating the ranks by some s maps the plan and "
               "the topology onto themselves (ring allreduce, reduce_scatter, allgather and hier "
               "allreduce with pieces of equal size, on a topology routed without ECMP "
               "hashing): p / s times fewer events, the same times to 1e-9; otherwise every "
               "rank, with the reason (docs/performance.md)");
  cmd.add_flag("--no-wall", o.no_wall,
               "Print 0 for wall_s, the only non-deterministic column, for byte-identical output");
}

// Refuses a list where run needs one value.
template <typename T>
T single(const std::vector<T>& values, const std::string& option, const std::string& text) {
  if (values.size() != 1)
    throw InputError("", option,
                     fmt::format("\"{}\" gives {} values but run takes one; use collsim sweep for "
                                 "lists and ranges",
                                 text, values.size()));
  return values.front();
}

std::string topology_label(const topo::Topology& t, const std::string& path) {
  return t.name().empty() ? std::filesystem::path(path).stem().string() : t.name();
}

// --max-memory: every (algorithm, k) is estimated before its plan is built, and the address
// space is capped so that an estimate that fell short ends in a clear out-of-memory message.
void set_limits(Context& context, const RunOptions& o, unsigned concurrent) {
  context.max_memory = max_memory_limit(o.max_memory);
  context.concurrent = std::max(1u, concurrent);
  // Below 2^64, so that the count converts exactly as far as a double holds it.
  if (!(o.max_reshared >= 0 && o.max_reshared < 1.8e19) ||
      o.max_reshared != std::floor(o.max_reshared))
    throw InputError("", "--max-reshared",
                     fmt::format("{} is not a count of flows; use a whole number such as 1e10, "
                                 "or 0 for no limit",
                                 o.max_reshared));
  context.max_reshared = static_cast<std::uint64_t>(o.max_reshared);
  cap_address_space(context.max_memory, context.concurrent);
}

bool parse_auto_search(const std::string& text) {
  if (text == "full") return false;
  if (text == "fast") return true;
  throw InputError("", "--auto-search",
                   fmt::format("unknown search \"{}\"; expected full or fast", text));
}

// A share of ops done, with the digits that show it moving: a run that will take hours stays
// under 1 % for many minutes.
std::string format_percent(double fraction) {
  const double percent = 100 * fraction;
  if (percent >= 1 || percent <= 0) return fmt::format("{:.0f} %", percent);
  return fmt::format("{:.2g} %", percent);
}

// Flows re-shared per event from which the progress line names heavy sharing as the cost. A ring
// re-shares about 0.1, a tree about 10, an all-to-all through shared NICs thousands.
constexpr std::uint64_t kHeavySharing = 1000;

std::string plural(std::size_t n, const char* word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

// The configuration as it was used, so that a result can be reproduced from its own output.
std::vector<std::string> echo_lines(const std::string& command, const RunOptions& o,
                                    const topo::Topology& t, const std::vector<topo::NodeId>& ranks,
                                    const std::string& calibration_note) {
  std::vector<std::string> lines;
  std::size_t unlimited = 0;
  for (const topo::Link& l : t.links())
    if (!std::isfinite(l.bandwidth)) ++unlimited;
  lines.push_back(fmt::format("collsim {}", command));
  lines.push_back(fmt::format("topology    {} ({}): {}, {}, {}, {}", topology_label(t, o.topology),
                              o.topology, plural(t.gpus().size(), "GPU"),
                              plural(t.servers().size(), "server"), plural(t.num_nodes(), "node"),
                              plural(t.num_links(), "directed link")));
  if (unlimited > 0)
    lines.push_back(
        fmt::format("            {} directed links have no bandwidth in the file and "
                    "cost nothing to cross",
                    unlimited));
  std::string names;
  for (std::size_t i = 0; i < ranks.size() && i < 8; ++i)
    names += (i ? " " : "") + t.node(ranks[i]).name;
  if (ranks.size() > 8) names += " ...";
  const std::size_t servers = count_servers(t, ranks);
  lines.push_back(fmt::format("ranks       {} {}: GPUs {} ({})", ranks.size(),
                              servers == 0 ? std::string("(the file defines no servers)")
                                           : "on " + plural(servers, "server"),
                              describe_ranks(ranks, t), names));
  lines.push_back(fmt::format("collective  {}", o.collective));
  bool rooted = false;
  for (sched::Collective c : parse_collective_list(o.collective, "--collective"))
    rooted = rooted || c == sched::Collective::broadcast || c == sched::Collective::reduce;
  if (rooted) lines.push_back(fmt::format("root        {}", o.root));
  bool names_all = false, names_auto = false;
  for (std::string_view item : split_list(o.algo)) {
    names_all = names_all || item == "all";
    names_auto = names_auto || item == "auto";
  }
  lines.push_back(
      fmt::format("algorithm   {}{}{}", o.algo,
                  names_all ? " (all: every algorithm that implements the collective)" : "",
                  names_auto ? " (free: every algorithm that fits is tried)" : ""));
  const std::string search = o.auto_search == "fast"
                                 ? "k = 1, 2, 4, ..., 64 tried upwards until the time rises"
                                 : "k = 1, 2, 4, ..., 64 are tried";
  if (o.chunks == "auto")
    lines.push_back(fmt::format("chunks      auto (free: {})", search));
  else if (o.chunks_free_for_auto)
    lines.push_back(fmt::format("chunks      {}; free for --algo auto ({})", o.chunks, search));
  else
    lines.push_back(fmt::format("chunks      {}", o.chunks));
  lines.push_back(fmt::format("size        {}", o.size));
  lines.push_back(fmt::format("dtype       {}", o.dtype));
  if (!o.nranks.empty()) lines.push_back(fmt::format("nranks      {}", o.nranks));
  lines.push_back(fmt::format("calibration {}", calibration_note));
  lines.push_back(fmt::format("routing     {}",
                              o.routing == "ecmp" ? "ecmp (equal-cost paths chosen per rank pair "
                                                    "by a deterministic hash)"
                                                  : "shortest (one deterministic path per pair)"));
  if (o.host_memory != "pinned")
    lines.push_back(
        fmt::format("host memory {} (staging copies also cross the host memcpy)", o.host_memory));
  if (o.symmetry) lines.emplace_back("symmetry    one rank per orbit where a rotation fits");
  // Without --chunks, "--algo ring,auto" leaves k free for auto only; the line keeps that.
  std::string again =
      fmt::format("collsim {} --topology {} --collective {} --algo {} --size {}{} --dtype {}",
                  command, o.topology, o.collective, o.algo, o.size,
                  o.chunks_free_for_auto ? std::string() : " --chunks " + o.chunks, o.dtype);
  if (!o.ranks.empty()) again += fmt::format(" --ranks {}", o.ranks);
  if (!o.nranks.empty()) again += fmt::format(" --nranks {}", o.nranks);
  if (o.root != 0) again += fmt::format(" --root {}", o.root);
  if (!o.calibration.empty()) again += fmt::format(" --calibration {}", o.calibration);
  if (o.routing != "ecmp") again += fmt::format(" --routing {}", o.routing);
  if (o.host_memory != "pinned") again += fmt::format(" --host-memory {}", o.host_memory);
  if (o.symmetry) again += " --symmetry";
  if (o.auto_search != "full") again += fmt::format(" --auto-search {}", o.auto_search);
  if (!o.max_memory.empty()) again += fmt::format(" --max-memory {}", o.max_memory);
  if (o.max_reshared != kDefaultMaxReshared)
    again += fmt::format(" --max-reshared {:g}", o.max_reshared);
  lines.push_back(fmt::format("reproduce   {}", again));
  return lines;
}

// The output stream: stdout or --out FILE, closed when done.
class Output {
 public:
  explicit Output(const std::string& path) {
    if (path.empty()) return;
    file_ = std::fopen(path.c_str(), "w");
    if (file_ == nullptr)
      throw InputError(path, "--out",
                       fmt::format("cannot open the file for writing ({}); check that the folder "
                                   "exists and is writable",
                                   std::strerror(errno)));
  }
  ~Output() {
    if (file_ != nullptr) std::fclose(file_);
  }
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;
  std::FILE* get() const { return file_ != nullptr ? file_ : stdout; }

 private:
  std::FILE* file_ = nullptr;
};

// What run and sweep share once the options are parsed: the loaded topology and its router.
struct Loaded {
  // Built in place: Boost's graph has no move assignment, and copying it is slow.
  Loaded(const std::string& path, std::uint64_t max_memory)
      : topology(load_topology(path, max_memory)) {}
  topo::Topology topology;
  std::unique_ptr<topo::Router> router;
  std::vector<topo::NodeId> ranks;
  std::string calibration_note;
};

std::unique_ptr<Loaded> load(const RunOptions& o) {
  auto loaded = std::make_unique<Loaded>(o.topology, max_memory_limit(o.max_memory));
  loaded->calibration_note = "none (the topology's parameters as written)";
  if (!o.calibration.empty())
    loaded->calibration_note = apply_calibration_file(loaded->topology, o.calibration);
  loaded->router =
      std::make_unique<topo::Router>(loaded->topology, parse_routing(o.routing, "--routing"));
  loaded->ranks = parse_ranks(o.ranks, loaded->topology, "--ranks");
  return loaded;
}

std::string point_label(const Point& p) {
  return fmt::format("{} {} {} {} k={}", sched::to_string(p.collective), to_string(p.algo),
                     format_size(p.size), sched::to_string(p.dtype),
                     p.chunks == kAutoChunks ? std::string("auto") : std::to_string(p.chunks));
}

// Explains an auto pick: the winner, the runner-up and what was refused.
std::vector<std::string> auto_notes(const Evaluation& ev) {
  std::vector<std::string> notes;
  const Row& r = ev.row;
  const Candidate* runner = nullptr;
  const Candidate* other_algo = nullptr;
  std::size_t refused = 0;
  std::size_t slower = 0;
  for (const Candidate& c : ev.candidates) {
    if (!c.error.empty()) {
      ++refused;
      continue;
    }
    if (c.slower) {
      ++slower;
      continue;
    }
    if (c.algo == r.algo && c.chunks == r.chunks) continue;
    if (runner == nullptr || c.time < runner->time) runner = &c;
    if (c.algo != r.algo && (other_algo == nullptr || c.time < other_algo->time)) other_algo = &c;
  }
  const std::size_t tried = ev.candidates.size() - refused;
  notes.push_back(fmt::format(
      "auto picked {} with k = {}: {:.2f} us, {}{}", r.algo, r.chunks, r.time * 1e6,
      tried == 1 ? std::string("the only pair tried")
                 : fmt::format("the lowest simulated time of {} pairs tried", tried),
      slower == 0 ? std::string()
                  : fmt::format(" ({} of them stopped once slower than the best pairs of two "
                                "algorithms)",
                                slower)));
  auto versus = [&](const Candidate& c, const char* what) {
    return fmt::format("{} {} with k = {}: {:.2f} us ({:+.1f}%)", what, c.algo, c.chunks,
                       c.time * 1e6, r.time > 0 ? (c.time / r.time - 1) * 100 : 0.0);
  };
  if (runner != nullptr) notes.push_back(versus(*runner, "runner-up"));
  if (other_algo != nullptr && other_algo != runner)
    notes.push_back(versus(*other_algo, "best other algorithm"));
  if (refused > 0) {
    std::set<std::string> refused_algos;
    for (const Candidate& c : ev.candidates)
      if (!c.error.empty()) refused_algos.insert(c.algo);
    std::string list;
    for (const auto& a : refused_algos) list += (list.empty() ? "" : ", ") + a;
    notes.push_back(
        fmt::format("{} {} refused by the generator, the size or a limit ({}); run {} with "
                    "--algo and --chunks to see why",
                    refused, refused == 1 ? "pair was" : "pairs were", list,
                    refused == 1 ? "it" : "one of them"));
  }
  return notes;
}

// Above this a written trace gets a note: see run_command().
constexpr std::uint64_t kLargeTrace = std::uint64_t{256} << 20;

// --trace-only: GPUs as --ranks names them, each one of the run's.
std::vector<topo::NodeId> traced_gpus(const std::string& text, const Loaded& loaded) {
  if (text.empty()) return {};
  std::vector<topo::NodeId> gpus = parse_ranks(text, loaded.topology, "--trace-only");
  std::vector<bool> in_run(loaded.topology.num_nodes(), false);
  for (const topo::NodeId g : loaded.ranks) in_run[g] = true;
  for (const topo::NodeId g : gpus)
    if (!in_run[g])
      throw InputError(
          "", "--trace-only",
          fmt::format("GPU '{}' does not take part in the run (--ranks {}); name GPUs "
                      "of the run",
                      loaded.topology.node(g).name, describe_ranks(loaded.ranks, loaded.topology)));
  return gpus;
}

void run_command(const RunOptions& o) {
  const Format format = parse_format(o.format, "--format");
  if (o.bottlenecks_given && o.bottlenecks == 0)
    throw InputError("", "--bottlenecks",
                     "expected how many resources to list, at least 1; leave the option out for "
                     "no list");
  Point point;
  point.collective =
      single(parse_collective_list(o.collective, "--collective"), "--collective", o.collective);
  point.algo = single(parse_algo_list(o.algo, "--algo"), "--algo", o.algo);
  point.size = single(parse_size_list(o.size, "--size"), "--size", o.size);
  point.dtype = single(parse_dtype_list(o.dtype, "--dtype"), "--dtype", o.dtype);
  point.chunks = single(parse_count_list(o.chunks, "--chunks", true), "--chunks", o.chunks);
  RunOptions echo = o;
  // "--algo auto" alone leaves k free too: asking for the best algorithm at k = 1 is rarely meant.
  if (!point.algo && !o.chunks_given) {
    point.chunks = kAutoChunks;
    echo.chunks = "auto";
  }

  // Long runs (a large topology, millions of events) say how far they are; short ones never
  // draw.
  Progress progress(stderr, o.progress || Progress::stderr_is_terminal());
  LiveStatus live(progress);
  live.status(fmt::format("loading {}", o.topology));
  const auto loaded = load(o);
  const std::vector<topo::NodeId> trace_only = traced_gpus(o.trace_only, *loaded);
  Context context;
  context.router = loaded->router.get();
  context.ranks = loaded->ranks;
  context.root = o.root;
  context.host_memory = parse_host_memory(o.host_memory, "--host-memory");
  context.fast_auto = parse_auto_search(o.auto_search);
  context.symmetry = o.symmetry;
  context.usage = o.bottlenecks > 0;
  set_limits(context, o, 1);
  InterruptGuard interrupt_guard;
  context.cancel = InterruptGuard::flag();
  const std::string name = topology_label(loaded->topology, o.topology);
  std::mutex progress_mutex;
  // The time left is the time this (algorithm, k) has taken per share of its ops so far, from
  // its first report on: an auto search runs several, and a whole plan is generated first.
  std::string shown;
  std::chrono::steady_clock::time_point first_report;
  double first_fraction = 0;
  sim::RunProgress last{};
  context.progress = [&](const SimulationProgress& p) {
    const std::lock_guard lock(progress_mutex);
    if (!p.stage.empty()) {
      live.status(fmt::format("{}: {}", p.what, p.stage));
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (p.what != shown) {
      shown = p.what;
      first_report = now;
      first_fraction = p.fraction;
      last = sim::RunProgress{};
    }
    std::string text =
        fmt::format("{}: {}{:.1f} M events, simulated {}", p.what,
                    p.fraction >= 0 ? format_percent(p.fraction) + ", " : "",
                    1e-6 * static_cast<double>(p.at.events), format_duration(p.at.now));
    // Heavy sharing is why such a run is slow (docs/performance.md, "Known limits"): say so.
    const std::uint64_t events = std::max<std::uint64_t>(p.at.events - last.events, 1);
    const std::uint64_t filled = p.at.flows_filled - last.flows_filled;
    if (filled >= kHeavySharing * events)
      text += fmt::format(", {:.0f} flows re-shared per event",
                          static_cast<double>(filled) / static_cast<double>(events));
    last = p.at;
    double left = -1;
    if (first_fraction >= 0 && p.fraction > first_fraction) {
      const double spent = std::chrono::duration<double>(now - first_report).count();
      left = spent * (1 - p.fraction) / (p.fraction - first_fraction);
    }
    live.status(std::move(text), left);
  };

  Evaluation ev;
  try {
    ev = evaluate_or_throw(context, point, name);
  } catch (const Interrupted& e) {
    live.finish();
    std::fprintf(stderr, "collsim: %s; the simulation did not finish\n", e.what());
    std::exit(kExitInterrupted);
  }
  live.clear();
  context.progress = nullptr;
  std::uint64_t trace_bytes = 0;
  if (!o.trace.empty()) {
    const sched::PlanRequest request =
        make_request(context, point, *parse_algo(ev.row.algo, "--algo"), ev.row.chunks);
    // The trace observes every op, so its run holds the whole plan even where the run above
    // streamed it.
    check_request_memory(context, request, false, "the trace of ");
    trace_bytes = write_trace(*loaded->router, request, o.trace, trace_only);
  }

  Output out(o.out);
  ReportWriter writer(out.get(), format, !o.no_wall);
  writer.begin(echo_lines("run", echo, loaded->topology, loaded->ranks, loaded->calibration_note));
  writer.row(ev.row);
  if (!o.csv.empty()) {
    Output csv(o.csv);
    ReportWriter csv_writer(csv.get(), Format::csv, !o.no_wall);
    csv_writer.begin({});
    csv_writer.row(ev.row);
  }
  std::vector<std::string> notes;
  if (!point.algo || point.chunks == kAutoChunks) notes = auto_notes(ev);
  if (!o.trace.empty()) {
    notes.push_back(fmt::format("trace written to {} ({})", o.trace,
                                format_size_estimate(static_cast<double>(trace_bytes))));
    // Viewers parse a JSON trace in the browser's memory: chrome://tracing stops at 256 MiB,
    // and ui.perfetto.dev has been seen to fail on one of 900 MB.
    if (trace_bytes > kLargeTrace)
      notes.emplace_back(
          "the trace is larger than a viewer in a browser opens in practice (a few hundred "
          "MiB); --trace-only 0-7 keeps the ops of eight GPUs and the links of their servers");
  }
  if (!ev.symmetry.empty()) notes.push_back("symmetry: " + ev.symmetry);
  if (o.bottlenecks > 0)
    for (auto& line : bottleneck_lines(loaded->topology, ev.usage, o.bottlenecks))
      notes.push_back(std::move(line));
  writer.end(notes);
  if (format != Format::table)
    for (const auto& n : notes) std::fprintf(stderr, "collsim: %s\n", n.c_str());
}

// Everything a sweep builds before its first point: parsed lists, the loaded topology and, on the
// process that writes (rank 0 under MPI), the open outputs.
struct SweepSetup {
  Format format = Format::table;
  bool any_auto = false;   // --algo names auto
  bool only_auto = false;  // --algo is auto alone
  std::vector<Point> points;
  std::unique_ptr<Loaded> loaded;
  Context context;
  unsigned jobs = 1;
  std::string name;
  std::unique_ptr<Output> out;
  std::unique_ptr<Output> terms_out;
  std::unique_ptr<ReportWriter> writer;
  std::unique_ptr<Output> csv_out;
  std::unique_ptr<ReportWriter> csv_writer;
};

// `writes`: open the outputs. `cpus`: the default of --jobs.
std::unique_ptr<SweepSetup> prepare_sweep(const RunOptions& o, bool writes, unsigned cpus) {
  auto s = std::make_unique<SweepSetup>();
  s->format = parse_format(o.format, "--format");
  const auto collectives = parse_collective_list(o.collective, "--collective");
  // "all" stands for another list for each collective: every algorithm that implements it.
  std::vector<std::vector<AlgoChoice>> algos;
  std::size_t algo_count = 0;
  for (sched::Collective c : collectives) {
    algos.push_back(parse_sweep_algo_list(o.algo, c, "--algo"));
    algo_count += algos.back().size();
    for (const AlgoChoice& a : algos.back()) s->any_auto = s->any_auto || !a;
  }
  s->only_auto = s->any_auto && algos.front().size() == 1;
  const auto sizes = parse_size_list(o.size, "--size");
  const auto dtypes = parse_dtype_list(o.dtype, "--dtype");
  const auto chunks = parse_count_list(o.chunks, "--chunks", true);
  const std::vector<std::uint32_t> nranks =
      o.nranks.empty() ? std::vector<std::uint32_t>{0} : parse_count_list(o.nranks, "--nranks");
  if (o.max_points == 0)
    throw InputError("", "--max-points", "0 points allowed; expected at least 1");

  // Counted before anything is built, in floating point so that it cannot overflow.
  const double total = static_cast<double>(algo_count) * static_cast<double>(sizes.size()) *
                       static_cast<double>(dtypes.size()) * static_cast<double>(chunks.size()) *
                       static_cast<double>(nranks.size());
  if (total > static_cast<double>(o.max_points))
    throw InputError("", "--size/--chunks/--algo",
                     fmt::format("the sweep has {:.0f} points, more than --max-points {}; use "
                                 "coarser ranges or raise --max-points",
                                 total, o.max_points));

  // The order of the product is documented in docs/cli.md: chunks vary fastest, then sizes,
  // algorithms, rank counts, data types and collectives.
  std::vector<Point>& points = s->points;
  points.reserve(static_cast<std::size_t>(total));
  for (std::size_t ci = 0; ci < collectives.size(); ++ci)
    for (auto d : dtypes)
      for (auto n : nranks)
        for (const auto& a : algos[ci])
          for (auto size : sizes)
            for (auto k : chunks)
              points.push_back(
                  Point{collectives[ci], a, size, d, !a && !o.chunks_given ? kAutoChunks : k, n});

  s->loaded = load(o);
  Context& context = s->context;
  context.router = s->loaded->router.get();
  context.ranks = s->loaded->ranks;
  context.root = o.root;
  context.host_memory = parse_host_memory(o.host_memory, "--host-memory");
  context.model_terms = !o.terms.empty();
  context.fast_auto = parse_auto_search(o.auto_search);
  context.symmetry = o.symmetry;
  // More threads than a thousand would only cost memory.
  s->jobs = std::min(1024u, o.jobs != 0 ? o.jobs : cpus);
  set_limits(context, o, static_cast<unsigned>(std::min<std::size_t>(s->jobs, points.size())));
  s->name = topology_label(s->loaded->topology, o.topology);
  if (!writes) return s;

  s->out = std::make_unique<Output>(o.out);
  if (!o.terms.empty()) {
    s->terms_out = std::make_unique<Output>(o.terms);
    std::fprintf(s->terms_out->get(),
                 "collective,algo,ranks,size_bytes,dtype,chunks,time_us,copy_term_us,"
                 "link_term_us\n");
  }
  s->writer = std::make_unique<ReportWriter>(s->out->get(), s->format, !o.no_wall);
  if (!o.csv.empty()) {
    s->csv_out = std::make_unique<Output>(o.csv);
    s->csv_writer = std::make_unique<ReportWriter>(s->csv_out->get(), Format::csv, !o.no_wall);
    s->csv_writer->begin({});
  }
  return s;
}

void sweep_command(const RunOptions& o) {
  // Under mpirun -n N (N > 1) the points are divided among the processes (tools/mpi_sweep.hpp);
  // otherwise MPI is never initialised.
  std::unique_ptr<mpi::World> world;
  if (mpi::launcher_world_size() != 1) {
    world = std::make_unique<mpi::World>();
    if (world->size() == 1) {
      world->finalize();
      world.reset();
    }
  }
  const bool writes = !world || world->rank() == 0;

  std::unique_ptr<SweepSetup> setup;
  if (!world) {
    setup = prepare_sweep(o, true, std::max(1u, std::thread::hardware_concurrency()));
  } else {
    // Every rank sets up the same sweep; if one of them cannot (a file missing on its machine),
    // they all stop with one message instead of waiting for it.
    std::exception_ptr error;
    try {
      // mpirun binds ranks to cores: each rank's threads default to the CPUs it may use.
      setup = prepare_sweep(o, writes, mpi::usable_cpus());
    } catch (...) {
      error = std::current_exception();
    }
    world->agree(error);
  }
  SweepSetup& s = *setup;
  const std::vector<Point>& points = s.points;
  InterruptGuard interrupt_guard;
  s.context.cancel = InterruptGuard::flag();

  if (writes) {
    RunOptions echo = o;
    if (!o.chunks_given && s.any_auto) {
      if (s.only_auto)
        echo.chunks = "auto";
      else
        echo.chunks_free_for_auto = true;
    }
    s.writer->begin(
        echo_lines("sweep", echo, s.loaded->topology, s.loaded->ranks, s.loaded->calibration_note));
  }

  Progress progress(stderr, writes && (o.progress || Progress::stderr_is_terminal()));
  std::size_t failed = 0;
  std::size_t interrupted = 0;
  bool internal = false;
  const auto emit = [&](std::size_t i, const Evaluation& ev) {
    progress.clear();
    s.writer->row(ev.row);
    if (s.csv_writer) s.csv_writer->row(ev.row);
    if (s.terms_out && ev.row.ok())
      std::fprintf(
          s.terms_out->get(), "%s\n",
          fmt::format("{},{},{},{},{},{},{},{},{}", sched::to_string(ev.row.collective),
                      ev.row.algo, ev.row.ranks, ev.row.size, sched::to_string(ev.row.dtype),
                      ev.row.chunks, format_number(ev.row.time * 1e6),
                      format_number(ev.terms.copy * 1e6), format_number(ev.terms.link * 1e6))
              .c_str());
    if (ev.interrupted) {
      ++interrupted;
    } else if (!ev.row.ok()) {
      ++failed;
      internal = internal || ev.internal_error;
      progress.finish();
      std::fprintf(stderr, "error: point %zu (%s): %s\n", i + 1, point_label(points[i]).c_str(),
                   ev.row.error.c_str());
    }
  };
  // Only a bar that is drawn follows the running points (the pool then passes on their
  // progress reports).
  std::function<void(std::size_t, std::size_t, double)> show;
  if (progress.enabled())
    show = [&](std::size_t done, std::size_t all, double running) {
      progress.update(done, all, running);
    };
  if (!world) {
    run_points(s.context, points, s.name, s.jobs, emit, show);
  } else {
    try {
      world->run_points(s.context, points, s.name, s.jobs, emit, show);
    } catch (...) {
      world->abort(std::current_exception());
    }
  }
  progress.finish();
  if (writes) s.writer->end({});

  if (world) {
    // Rank 0 alone knows how the sweep went; it reports for every rank, and mpirun ends with its
    // status.
    world->finish();
    if (!writes) {
      std::fflush(nullptr);
      std::exit(kExitOk);
    }
  }
  if (interrupted > 0) {
    std::fprintf(stderr,
                 "collsim: interrupted (Ctrl-C): %zu of %zu points finished, %zu failed, %zu "
                 "stopped or skipped (their rows have no numbers)\n",
                 points.size() - interrupted - failed, points.size(), failed, interrupted);
    std::fflush(nullptr);
    std::exit(kExitInterrupted);
  }
  if (failed > 0) {
    const std::string message =
        fmt::format("{} of {} points failed (listed above); every other row is complete", failed,
                    points.size());
    if (internal) throw InternalError(message);
    throw InputError("", "sweep", message);
  }
}

}  // namespace

void add_run_commands(CLI::App& app) {
  auto run_options = std::make_shared<RunOptions>();
  CLI::App* run = app.add_subcommand(
      "run", "Simulate one collective on a topology and print its time and bandwidth");
  add_common_options(*run, *run_options, false);
  CLI::Option* trace = run->add_option(
      "--trace", run_options->trace,
      "Write a Chrome/Perfetto trace of the simulated run (open in ui.perfetto.dev)");
  run->add_option("--trace-only", run_options->trace_only,
                  "Trace only the ops of these GPUs (as --ranks names them: 0-7,16 or names) and "
                  "the links and nodes of their servers: a trace of every rank of a large run "
                  "is more than a viewer opens")
      ->needs(trace);
  run->add_option("--bottlenecks", run_options->bottlenecks,
                  "After the result, list the N busiest links and other resources, and the N GPUs "
                  "whose copies waited longest for a copy engine")
      ->check(kWholeNumber);
  run->add_flag("--progress", run_options->progress,
                "Show the progress line of long simulations even when stderr is not a terminal");
  run->callback([run_options, run] {
    run_options->chunks_given = run->count("--chunks") > 0;
    run_options->bottlenecks_given = run->count("--bottlenecks") > 0;
    run_command(*run_options);
  });

  auto sweep_options = std::make_shared<RunOptions>();
  CLI::App* sweep = app.add_subcommand(
      "sweep", "Simulate every combination of lists and ranges of the run options, in parallel");
  add_common_options(*sweep, *sweep_options, true);
  sweep->add_option("--nranks", sweep_options->nranks,
                    "Rank counts to sweep, taking the first n of --ranks: 2,4,8 or 2:64:x2");
  sweep->add_option("--jobs,-j", sweep_options->jobs, "Threads (default: every core)");
  sweep->add_flag("--progress", sweep_options->progress,
                  "Show the progress bar even when stderr is not a terminal");
  sweep->add_option("--terms", sweep_options->terms,
                    "Also write each point's copy and link terms to this CSV (for tools/plot.py)");
  sweep
      ->add_option("--max-points", sweep_options->max_points,
                   "Refuse sweeps with more points than this")
      ->check(kWholeNumber)
      ->capture_default_str();
  sweep->callback([sweep_options, sweep] {
    sweep_options->chunks_given = sweep->count("--chunks") > 0;
    sweep_command(*sweep_options);
  });
}

}  // namespace collsim::cli
