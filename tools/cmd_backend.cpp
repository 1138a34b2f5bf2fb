// collsim calibrate: time micro-plans on a device and fit alpha and beta per op kind.
// collsim validate: run collective plans on a device and compare with the simulator.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>

#include "cuda_backend/calibration.hpp"
#include "cuda_backend/executor.hpp"
#include "cuda_backend/nccl_reference.hpp"
#include "cuda_backend/validation.hpp"
#include "tools/commands.hpp"
#include "tools/exit_codes.hpp"
#include "tools/resource_guard.hpp"
#include "tools/value_lists.hpp"
#include "topology/error.hpp"
#include "topology/loader.hpp"

namespace collsim::cli {
namespace {

// Fails before minutes of measurement rather than after them when the output cannot be written.
void check_writable(const std::string& path) {
  if (path.empty()) return;
  std::ofstream probe(path, std::ios::app);
  if (!probe)
    throw InputError(path, "--out",
                     "cannot open the file for writing; check the directory "
                     "exists and is writable");
}

struct CalibrateOptions {
  std::string backend = "cuda";
  std::string sizes = "4KiB:64MiB:x4";
  std::uint32_t reps = 5;
  std::uint32_t warmup = 2;
  std::string out;
};

struct ValidateOptions {
  std::string backend = "cuda";
  std::string topology = "configs/one-gpu-4ranks.json";
  std::string calibration;
  std::string out;
  std::string sizes = "1MiB,4MiB,16MiB,114356512";
  std::string chunks = "1,2,4,8,16";
  std::string algos = "naive,ring";
  std::string dtype = "fp32";
  std::string collective = "allreduce";
  std::string host_memory = "pinned";
  std::uint32_t ranks = 4;
  std::uint32_t reps = 3;
  std::uint32_t warmup = 1;
  bool no_links = false;
  std::string nccl_csv;
  std::string max_memory;
};

std::string fit_line_text(const backend::OpFit& f) {
  const auto* kind = backend::find_op_kind(f.op);
  const std::string alpha_ci = f.fit.alpha_ci95 ? format_duration(*f.fit.alpha_ci95) : "n/a";
  std::string slope;
  if (kind && kind->x_unit == "bytes" && f.payload_bandwidth > 0)
    slope = fmt::format("{:>12} payload, {:>12} traffic", format_bandwidth(f.payload_bandwidth),
                        format_bandwidth(f.traffic_bandwidth));
  else if (kind && kind->x_unit == "seconds")
    slope = fmt::format("slope {:.4f} s/s", f.fit.beta);
  else
    slope = "-";
  return fmt::format("{:<12} {:>10} +- {:<10} {}  (max residual {:.1f}%)", f.op,
                     format_duration(f.fit.alpha), alpha_ci, slope,
                     100.0 * f.fit.max_relative_residual);
}

void calibrate(const CalibrateOptions& o) {
  backend::CalibrationOptions co;
  co.sizes = parse_size_list(o.sizes, "--sizes");
  co.repetitions = o.reps;
  co.warmup = o.warmup;
  check_writable(o.out);
  auto executor = backend::make_executor(o.backend);
  if (o.backend == "host")
    std::printf(
        "note: the host backend times threads and memcpy on this CPU; its figures "
        "describe this machine, not a GPU\n");
  std::printf("calibrating %s (%s), %zu sizes, %u repetitions after %u warm-up runs\n",
              executor->device().name.c_str(), executor->device().backend.c_str(), co.sizes.size(),
              co.repetitions, co.warmup);
  const auto c = backend::run_calibration(*executor, co);
  std::printf("%-12s %10s    %-10s %s\n", "op", "alpha", "95% CI", "bandwidth (1/beta)");
  for (const auto& f : c.fits) std::printf("%s\n", fit_line_text(f).c_str());
  if (const auto* d2d = c.find("d2d");
      d2d && c.device_memory_bandwidth > 0 && d2d->traffic_bandwidth > 0)
    std::printf("d2d copy: %s of memory traffic = %.1f%% of the device's %s\n",
                format_bandwidth(d2d->traffic_bandwidth).c_str(),
                100.0 * d2d->traffic_bandwidth / c.device_memory_bandwidth,
                format_bandwidth(c.device_memory_bandwidth).c_str());
  backend::save_calibration(c, o.out);
  std::printf("wrote %s (%zu points)\n", o.out.c_str(), c.points.size());
}

// ncclAllReduce on every visible GPU beside the simulator's fastest ring or tree for the same
// GPUs of the topology. A machine or build that cannot do it gets a note, not an error: the plan
// rows above are the validation; this is a second opinion.
void nccl_ground_truth(const topo::Topology& topology, const backend::ValidationOptions& vo,
                       const ValidateOptions& o) {
  const auto m = backend::time_nccl_allreduce(vo.sizes, vo.warmup, vo.repetitions);
  if (!m.available) {
    std::printf("note: no NCCL ground truth: %s\n", m.why_not.c_str());
    return;
  }
  std::vector<backend::NcclRow> rows;
  try {
    rows = backend::compare_with_nccl(topology, m, o.topology);
  } catch (const InputError& e) {
    std::printf("note: no NCCL ground truth: %s\n", e.what());
    return;
  }
  std::printf("ncclAllReduce (NCCL %s) on %d GPUs against the simulator's fastest ring or tree:\n",
              m.version.c_str(), m.gpus);
  std::printf("%14s %12s %12s %-10s %9s\n", "size", "nccl", "predicted", "as", "error");
  for (const auto& r : rows)
    std::printf("%14s %12s %12s %-10s %+8.1f%%\n", format_size(r.size).c_str(),
                format_duration(r.measured).c_str(), format_duration(r.predicted).c_str(),
                fmt::format("{} k={}", r.algorithm, r.chunks).c_str(), 100.0 * r.error);
  if (!o.nccl_csv.empty()) {
    std::ofstream out(o.nccl_csv);
    if (!out) throw InputError(o.nccl_csv, "--nccl-csv", "cannot open the file for writing");
    backend::write_nccl_csv(rows, out);
    std::printf("wrote %s\n", o.nccl_csv.c_str());
  }
}

// "all" (those that implement the collective), or named algorithms: every row is a plan that
// runs, so "auto" (a search) is no choice.
std::vector<sched::Algorithm> validation_algorithms(const std::string& text,
                                                    sched::Collective collective,
                                                    std::uint32_t ranks) {
  if (text == "all") return sched::algorithms_for(collective, ranks);
  std::vector<sched::Algorithm> out;
  for (const AlgoChoice& a : parse_algo_list(text, "--algos")) {
    if (!a)
      throw InputError("", "--algos",
                       "\"auto\" searches for the fastest algorithm, which validate does not do; "
                       "name the algorithms (naive,ring,tree,rhd,rd,hier,direct) or give all");
    if (std::find(out.begin(), out.end(), *a) == out.end()) out.push_back(*a);
  }
  return out;
}

void validate(const ValidateOptions& o) {
  backend::ValidationOptions vo;
  vo.sizes = parse_size_list(o.sizes, "--sizes");
  vo.chunks = parse_count_list(o.chunks, "--chunks");
  vo.collective = parse_collective(o.collective, "--collective");
  vo.algorithms = validation_algorithms(o.algos, vo.collective, o.ranks);
  vo.dtype = parse_dtype(o.dtype, "--dtype");
  vo.host_memory = parse_host_memory(o.host_memory, "--host-memory");
  vo.ranks = o.ranks;
  vo.repetitions = o.reps;
  vo.warmup = o.warmup;
  vo.inject_links = !o.no_links;
  if (vo.repetitions == 0) throw InputError("", "--reps", "0 repetitions; give at least 1");
  backend::check_validation_options(vo);
  check_writable(o.out);
  check_writable(o.nccl_csv);
  const std::uint64_t memory_limit = max_memory_limit(o.max_memory);
  topo::Topology topology = load_topology(o.topology, memory_limit);
  auto executor = backend::make_executor(o.backend);
  // Virtual ranks share their device's memory: rank r runs on device r % devices.
  vo.devices = static_cast<std::uint32_t>(std::max(1, executor->device().devices));
  // The host executor's buffers are host memory; the CUDA executor's are on the device, whose
  // allocation failures are reported as they happen.
  if (o.backend == "host") vo.host_memory_limit = memory_limit;
  std::string calibration_note = "none (topology parameters as written)";
  if (!o.calibration.empty()) {
    const auto c = backend::load_calibration(o.calibration);
    const auto applied = backend::calibrate_validation(topology, c, vo, o.calibration);
    calibration_note =
        fmt::format("{} ({}, {} GPUs matched)", o.calibration, c.device, applied.gpus.size());
  }
  if (o.backend == "host")
    std::printf(
        "note: the host backend runs on this CPU with threads and memcpy; its timings "
        "are what this machine gives and say little about a GPU\n");
  std::printf(
      "validating %s on %s: %u virtual ranks of %s, %s, %s host memory, calibration %s, "
      "synthetic links %s\n",
      std::string(sched::to_string(vo.collective)).c_str(), executor->device().name.c_str(),
      vo.ranks, o.topology.c_str(), std::string(sched::to_string(vo.dtype)).c_str(),
      std::string(sched::to_string(vo.host_memory)).c_str(), calibration_note.c_str(),
      vo.inject_links ? "on" : "off");
  const auto report = backend::run_validation(*executor, topology, vo, o.topology);
  std::printf("%-8s %3s %14s %12s %12s %9s %7s\n", "algo", "k", "size", "measured", "predicted",
              "error", "#wrong");
  const std::uint32_t queues = executor->device().hardware_queues;
  std::uint32_t most_streams = 0;
  for (const auto& r : report.rows) {
    const bool queued = queues > 0 && r.streams_per_device > queues;
    if (queued) most_streams = std::max(most_streams, r.streams_per_device);
    std::printf("%-8s %3u %14s %12s %12s %+8.1f%% %7llu%s\n", r.algorithm.c_str(), r.chunks,
                format_size(r.size).c_str(), format_duration(r.measured).c_str(),
                format_duration(r.predicted).c_str(), 100.0 * r.error,
                static_cast<unsigned long long>(r.wrong_elements), queued ? " !" : "");
  }
  if (most_streams > 0)
    std::printf(
        "note: rows marked ! put up to %u streams on one device, which has %u hardware queues "
        "(CUDA_DEVICE_MAX_CONNECTIONS): streams that share a queue wait behind one another's "
        "event waits, which the model does not, so their measured times can be too long; "
        "fewer --ranks need fewer streams\n",
        most_streams, queues);
  const bool overlapping = std::any_of(report.rows.begin(), report.rows.end(), [](const auto& r) {
    return r.algorithm == "tree" || r.algorithm == "direct";
  });
  if (overlapping && vo.devices < vo.ranks && executor->device().backend == "cuda")
    std::printf(
        "note: tree and direct keep several transfers of a rank in flight; one device overlaps "
        "only a few copies at once (an H200: 5.5 of 12, docs/validation.md), so at small sizes "
        "their measured times are the emulation's rather than the fabric's\n");
  if (report.per_algorithm.size() > 1)
    for (const auto& [algorithm, summary] : report.per_algorithm) {
      const auto& w = report.rows[summary.worst];
      std::printf("%-8s median |error| %.1f%%; worst %+.1f%% (k=%u, %s)\n", algorithm.c_str(),
                  100.0 * summary.median_abs_error, 100.0 * w.error, w.chunks,
                  format_size(w.size).c_str());
    }
  if (!report.rows.empty()) {
    const auto& w = report.rows[report.worst];
    std::printf("median |error| %.1f%%; worst %+.1f%% (%s k=%u, %s)\n",
                100.0 * report.median_abs_error, 100.0 * w.error, w.algorithm.c_str(), w.chunks,
                format_size(w.size).c_str());
  }
  if (!o.out.empty()) {
    std::ofstream out(o.out);
    if (!out) throw InputError(o.out, "--out", "cannot open the file for writing");
    backend::write_validation_csv(report, out);
    std::printf("wrote %s\n", o.out.c_str());
  }
  if (executor->device().backend == "cuda") {
    if (vo.dtype == sched::DType::fp32 && vo.collective == sched::Collective::allreduce)
      nccl_ground_truth(topology, vo, o);
    else
      std::printf("note: no NCCL ground truth: it is timed for fp32 allreduce only\n");
  }
  if (report.wrong_elements > 0)
    throw CheckFailed(
        fmt::format("{} wrong output elements: the executed plans did not compute "
                    "the {}",
                    report.wrong_elements, sched::to_string(vo.collective)));
}

}  // namespace

void add_backend_commands(CLI::App& app) {
  auto co = std::make_shared<CalibrateOptions>();
  auto* cal = app.add_subcommand(
      "calibrate", "Time micro-plans on the local device and fit alpha and beta per op kind");
  cal->add_option("--backend", co->backend, "cuda (the local GPUs) or host (threads + memcpy)")
      ->capture_default_str();
  cal->add_option("--sizes", co->sizes, "Payload sizes: a list 4KiB,1MiB or a range 4KiB:1GiB:x4")
      ->capture_default_str();
  cal->add_option("--reps", co->reps, "Timed repetitions per point (at least 2)")
      ->capture_default_str();
  cal->add_option("--warmup", co->warmup, "Untimed runs before each point")->capture_default_str();
  cal->add_option("--out", co->out, "Where to write calibration.json")->required();
  cal->callback([co] { calibrate(*co); });

  auto vo = std::make_shared<ValidateOptions>();
  auto* val = app.add_subcommand(
      "validate",
      "Run collective plans (allreduce by naive and pipelined ring by default) on the device and "
      "compare with the simulator");
  val->add_option("--backend", vo->backend, "cuda (the local GPUs) or host (threads + memcpy)")
      ->capture_default_str();
  val->add_option("--topology", vo->topology,
                  "Topology whose first --ranks GPUs are the virtual ranks; its links are "
                  "injected as synthetic latency and bandwidth")
      ->capture_default_str();
  val->add_option("--calibration", vo->calibration,
                  "calibration.json from collsim calibrate, applied before simulating");
  val->add_option("--out", vo->out, "Write the rows as CSV to this file");
  val->add_option("--nccl-csv", vo->nccl_csv,
                  "With --backend cuda, NCCL and two or more GPUs: write the ncclAllReduce "
                  "ground-truth rows as CSV to this file");
  add_max_memory_option(*val, vo->max_memory);
  val->add_option("--sizes", vo->sizes,
                  "Buffer sizes (default 1 MiB .. ConvNeXt-Tiny gradients, 114,356,512 bytes)")
      ->capture_default_str();
  val->add_option("--chunks", vo->chunks, "Chunk counts k of every algorithm but naive")
      ->capture_default_str();
  val->add_option("--algos", vo->algos,
                  "Algorithms to run, or all (those that implement --collective); naive runs once "
                  "per size, the others at every k of --chunks")
      ->capture_default_str();
  val->add_option("--collective", vo->collective,
                  "Collective of every row: allreduce, reduce_scatter, allgather, broadcast, "
                  "reduce or alltoall (root 0)")
      ->capture_default_str();
  val->add_option("--dtype", vo->dtype,
                  "Element type of every row: fp32, fp16 or bf16 (a calibration's reduce_fp16 "
                  "and reduce_bf16 fits set what their reductions cost)")
      ->capture_default_str();
  val->add_option("--host-memory", vo->host_memory,
                  "pinned or pageable: the host buffer of every row's staging copies (a topology "
                  "whose servers stage, such as configs/one-gpu-4ranks-staged.json)")
      ->capture_default_str();
  val->add_option("--ranks", vo->ranks, "Virtual ranks")->capture_default_str();
  val->add_option("--reps", vo->reps, "Timed repetitions per row (the median is reported)")
      ->capture_default_str();
  val->add_option("--warmup", vo->warmup, "Untimed runs per row")->capture_default_str();
  val->add_flag("--no-links", vo->no_links,
                "Do not inject the topology's link latency and bandwidth");
  val->callback([vo] { validate(*vo); });
}

}  // namespace collsim::cli
