#pragma once
// What `collsim run --bottlenecks N` adds to a result: the resources the run kept busiest, and the
// copy engines that copies waited for longest, so that a time comes with its reason.
#include <cstddef>
#include <string>
#include <vector>

#include "tools/sweep.hpp"
#include "topology/topology.hpp"

namespace collsim::cli {

// The report as lines: the n resources of highest utilisation (ties: longer busy, then lower
// resource id), then, if some GPU ran copies, the n GPUs whose copies waited longest for an
// engine (ties: more engine time, then lower node id).
std::vector<std::string> bottleneck_lines(const topo::Topology& topology, const Usage& usage,
                                          std::size_t n);

}  // namespace collsim::cli
