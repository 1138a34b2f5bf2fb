#pragma once
// GraphViz export: one node per vertex (shaped by kind, clustered by server), one edge per
// physical link (duplex pairs drawn once, undirected), labelled with kind, bandwidth and latency.
#include <ostream>

#include "topology/topology.hpp"

namespace collsim::topo {

void write_dot(const Topology& topology, std::ostream& out);

}  // namespace collsim::topo
