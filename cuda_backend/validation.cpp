#include "cuda_backend/validation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ostream>

#include "cuda_backend/plan_layout.hpp"
#include "schedules/generate.hpp"
#include "sim/engine.hpp"
#include "topology/error.hpp"
#include "topology/routing.hpp"

namespace collsim::backend {

namespace {

template <typename Keep>
ErrorSummary summarise(const std::vector<ValidationRow>& rows, Keep keep) {
  ErrorSummary summary;
  std::vector<double> errors;
  bool first = true;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (!keep(rows[i])) continue;
    errors.push_back(std::abs(rows[i].error));
    if (first || errors.back() > std::abs(rows[summary.worst].error)) summary.worst = i;
    first = false;
  }
  if (!errors.empty()) {
    std::sort(errors.begin(), errors.end());
    const std::size_t m = errors.size() / 2;
    summary.median_abs_error = errors.size() % 2 ? errors[m] : 0.5 * (errors[m - 1] + errors[m]);
  }
  return summary;
}

}  // namespace

void check_validation_options(const ValidationOptions& options) {
  if (options.ranks < 2) throw InputError("", "--ranks", "validation needs at least 2 ranks");
  if (options.algorithms.empty())
    throw InputError("", "--algos", "no algorithm to validate; name at least one, e.g. ring");
  const auto implemented = sched::algorithms_for(options.collective, options.ranks);
  for (sched::Algorithm a : options.algorithms)
    if (std::find(implemented.begin(), implemented.end(), a) == implemented.end()) {
      throw InputError("", "--algos",
                       fmt::format("{} does not implement {}; algorithms that do: {} (or give all)",
                                   sched::to_string(a), sched::to_string(options.collective),
                                   sched::join(implemented)));
    }
}

namespace {

// The experiment on `executor`, or simulated only when it is null.
ValidationReport validation_rows(Executor* executor, const topo::Topology& topology,
                                 const ValidationOptions& options, const std::string& topology_file,
                                 const std::vector<double>& measured) {
  if (topology.gpus().size() < options.ranks)
    throw InputError(topology_file, "/gpus",
                     fmt::format("the topology has {} GPUs; validation needs {} (one per virtual "
                                 "rank); use a topology such as configs/one-gpu-4ranks.json",
                                 topology.gpus().size(), options.ranks));
  check_validation_options(options);
  if (options.devices == 0) throw InternalError("validation on 0 devices");

  topo::Topology model = topology;
  std::vector<topo::NodeId> ranks(model.gpus().begin(), model.gpus().begin() + options.ranks);
  for (std::uint32_t r = options.devices; r < options.ranks; ++r)
    model.node(ranks[r]).memory_owner = ranks[r % options.devices];
  const topo::Router router(model);

  RunOptions run;
  run.warmup = options.warmup;
  run.repetitions = options.repetitions;
  if (options.inject_links) {
    run.links.resize(std::size_t{options.ranks} * options.ranks);
    for (std::uint32_t a = 0; a < options.ranks; ++a)
      for (std::uint32_t b = 0; b < options.ranks; ++b) {
        if (a == b || ranks[a] == ranks[b]) continue;
        const topo::Route& route = router.route(ranks[a], ranks[b]);
        SyntheticLink link{route.latency, kUnlimited};
        if (route.bandwidth < kUnlimited) {
          // A link faster than the device's own copy cannot be emulated by waiting; the copy
          // alone then sets the pace (the rows show it as a measured time above prediction).
          const double per_byte = 1.0 / route.bandwidth - options.copy_seconds_per_byte;
          if (per_byte > 0) link.bandwidth = 1.0 / per_byte;
        }
        run.links[std::size_t{a} * options.ranks + b] = link;
      }
  }

  struct Variant {
    sched::Algorithm algorithm;
    std::uint32_t k;
    Bytes size;
  };
  std::vector<Variant> variants;  // in row order
  for (Bytes size : options.sizes)
    for (sched::Algorithm algorithm : options.algorithms) {
      if (algorithm == sched::Algorithm::naive)
        variants.push_back({algorithm, 1, size});
      else
        for (std::uint32_t k : options.chunks) variants.push_back({algorithm, k, size});
    }
  auto plan_of = [&](const Variant& v) {
    sched::PlanRequest req;
    req.collective = options.collective;
    req.algorithm = v.algorithm;
    req.size = v.size;
    req.chunks = v.k;
    req.dtype = options.dtype;
    req.host_memory = options.host_memory;
    req.ranks = ranks;
    try {
      return sched::generate(router, req);
    } catch (const InputError& e) {
      // The generator's message holds the fix; the row it stopped at is what a long list of
      // sizes, algorithms and chunk counts needs besides.
      throw InputError("", "",
                       fmt::format("the validation row {} k={} size {} bytes on {} ranks of {}: {}",
                                   sched::to_string(v.algorithm), v.k, v.size, options.ranks,
                                   topology_file, e.what()));
    }
  };
  // Every row is generated, and its buffers weighed, before the first one runs: a row that
  // cannot run fails the command at once, not after the rows before it.
  for (const Variant& v : variants) {
    const sched::Plan plan = plan_of(v);
    if (!executor || options.host_memory_limit == 0) continue;
    Bytes buffers = 0;
    for (const BufferSizes& b : layout_plan(plan, "validation").buffers)
      buffers += b.input + b.output + b.scratch + b.host;
    if (buffers > options.host_memory_limit)
      throw InputError(
          "", "--max-memory",
          fmt::format("the validation row {} k={} size {} needs about {} of buffers on its {} "
                      "ranks, more than the limit of {}; use smaller --sizes, or raise "
                      "--max-memory if the machine has the memory",
                      sched::to_string(v.algorithm), v.k, format_size(v.size),
                      format_size_estimate(static_cast<double>(buffers)), options.ranks,
                      format_size_estimate(static_cast<double>(options.host_memory_limit))));
  }

  ValidationReport report;
  report.collective = options.collective;
  report.dtype = options.dtype;
  for (const Variant& v : variants) {
    const sched::Plan plan = plan_of(v);
    ValidationRow row;
    row.algorithm = std::string(sched::to_string(v.algorithm));
    row.chunks = v.k;
    row.size = v.size;
    if (executor) {
      run.label = fmt::format("{} {} k={} size={}", row.algorithm,
                              sched::to_string(options.collective), v.k, v.size);
      const RunResult result = executor->run(plan, run);
      row.measured = result.median();
      row.wrong_elements = result.wrong_elements;
      row.checked_elements = result.checked_elements;
      row.streams_per_device = result.streams_per_device;
    } else if (report.rows.size() < measured.size()) {
      row.measured = measured[report.rows.size()];
    }
    row.predicted = sim::simulate(router, plan).time;
    row.error = row.measured > 0 ? (row.predicted - row.measured) / row.measured : 0;
    report.wrong_elements += row.wrong_elements;
    report.rows.push_back(row);
  }
  if (!executor && !measured.empty() && measured.size() != report.rows.size())
    throw InputError(topology_file, "",
                     fmt::format("{} measured times for {} rows: the recorded run used other "
                                 "sizes or chunk counts",
                                 measured.size(), report.rows.size()));
  const ErrorSummary all = summarise(report.rows, [](const ValidationRow&) { return true; });
  report.median_abs_error = all.median_abs_error;
  report.worst = all.worst;
  for (const ValidationRow& row : report.rows) {
    const auto seen = std::find_if(report.per_algorithm.begin(), report.per_algorithm.end(),
                                   [&](const auto& a) { return a.first == row.algorithm; });
    if (seen != report.per_algorithm.end()) continue;
    report.per_algorithm.emplace_back(row.algorithm,
                                      summarise(report.rows, [&](const ValidationRow& r) {
                                        return r.algorithm == row.algorithm;
                                      }));
  }
  return report;
}

}  // namespace

ApplyReport calibrate_validation(topo::Topology& topology, const Calibration& calibration,
                                 ValidationOptions& options, const std::string& file) {
  ApplyReport applied = apply_calibration(topology, calibration, file);
  if (!options.inject_links) return applied;
  if (const OpFit* send = calibration.find("send"); send && send->fit.beta > 0)
    options.copy_seconds_per_byte = send->fit.beta;
  if (const OpFit* delay = calibration.find("delay"); delay && delay->fit.alpha > 0)
    for (topo::NodeId gpu : applied.gpus) topology.node(gpu).alpha += delay->fit.alpha;
  return applied;
}

ValidationReport run_validation(Executor& executor, const topo::Topology& topology,
                                const ValidationOptions& options,
                                const std::string& topology_file) {
  return validation_rows(&executor, topology, options, topology_file, {});
}

ValidationReport predict_validation(const topo::Topology& topology,
                                    const ValidationOptions& options,
                                    const std::vector<double>& measured,
                                    const std::string& topology_file) {
  return validation_rows(nullptr, topology, options, topology_file, measured);
}

void write_validation_csv(const ValidationReport& report, std::ostream& out) {
  out << "algorithm,chunks,size_bytes,measured_s,predicted_s,error,wrong_elements,"
         "checked_elements,dtype,collective\n";
  for (const auto& r : report.rows)
    out << fmt::format("{},{},{},{:.9g},{:.9g},{:.6f},{},{},{},{}\n", r.algorithm, r.chunks, r.size,
                       r.measured, r.predicted, r.error, r.wrong_elements, r.checked_elements,
                       sched::to_string(report.dtype), sched::to_string(report.collective));
}

}  // namespace collsim::backend
