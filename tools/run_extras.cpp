#include "tools/run_extras.hpp"

#include <fmt/format.h>

#include "cuda_backend/calibration.hpp"
#include "sim/chrome_trace.hpp"
#include "sim/engine.hpp"

namespace collsim::cli {

std::string apply_calibration_file(topo::Topology& topology, const std::string& path) {
  const backend::Calibration calibration = backend::load_calibration(path);
  const backend::ApplyReport report = backend::apply_calibration(topology, calibration, path);
  return fmt::format(
      "{} ({} backend, device \"{}\", model \"{}\", {}): applied to {} GPUs, {} "
      "parameters changed",
      path, calibration.backend, calibration.device, calibration.model,
      calibration.date.empty() ? std::string("undated") : calibration.date, report.gpus.size(),
      report.changes.size());
}

std::uint64_t write_trace(const topo::Router& router, const sched::PlanRequest& request,
                          const std::string& path, std::vector<topo::NodeId> keep) {
  const sched::Plan plan = sched::generate(router, request);
  sim::ChromeTrace trace;
  trace.keep_only(std::move(keep));
  sim::Options options;
  options.observer = &trace;
  sim::simulate(router, plan, options);
  return trace.write_file(path);
}

}  // namespace collsim::cli
