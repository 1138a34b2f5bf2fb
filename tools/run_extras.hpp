#pragma once
// The parts of `collsim run` that lean on other targets: calibration files (cuda_backend/) and
// Chrome traces (sim/). Kept apart so that run and sweep read the same whatever is built.
#include <cstdint>
#include <string>
#include <vector>

#include "schedules/generate.hpp"
#include "topology/routing.hpp"
#include "topology/topology.hpp"

namespace collsim::cli {

// Replaces the parameters of matching GPUs with those of the calibration file; returns a line
// for the configuration echo (file, device, what changed).
std::string apply_calibration_file(topo::Topology& topology, const std::string& path);

// Generates the plan for `request`, simulates it with a trace observer and writes the trace of
// the ranks on `keep` (sim::ChromeTrace::keep_only; empty: every rank); returns its bytes.
std::uint64_t write_trace(const topo::Router& router, const sched::PlanRequest& request,
                          const std::string& path, std::vector<topo::NodeId> keep);

}  // namespace collsim::cli
