#include "tools/run_extras.hpp"

#include "topology/error.hpp"

namespace collsim::cli {

std::string apply_calibration_file(topo::Topology& /*topology*/, const std::string& path) {
  throw InputError(path, "--calibration",
                   "not implemented yet: calibration files cannot be applied by run and sweep in "
                   "this version; leave out --calibration");
}

void write_trace(const topo::Router& /*router*/, const sched::PlanRequest& /*request*/,
                 const std::string& path) {
  throw InputError(path, "--trace",
                   "not implemented yet: this version cannot write traces; leave out --trace");
}

}  // namespace collsim::cli
