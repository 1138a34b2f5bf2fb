#pragma once
// The shipped machines that model tests run schedules on, each with the routing it is used with.
#include <cstdint>
#include <string>
#include <vector>

#include "topology/loader.hpp"
#include "topology/routing.hpp"

namespace collsim::test {

struct ShippedMachine {
  const char* file;    // in configs/
  bool ecmp;           // routing
  std::uint32_t gpus;  // first GPUs of the file taking part; 0: all
};

// NVSwitch, PCIe with host staging and copy engines, a heterogeneous rack, and a rail-optimised
// fabric with ECMP across servers and racks.
inline constexpr ShippedMachine kShippedMachines[] = {{"dgx-h100.json", false, 0},
                                                      {"t4x4-pcie.json", false, 0},
                                                      {"hetero-rack.json", false, 0},
                                                      {"cluster-1024.json", true, 48}};

inline std::string config_path(const char* name) {
  return std::string(COLLSIM_SOURCE_DIR) + "/configs/" + name;
}

// Loads `m` and calls f(router, gpus), the GPUs taking part in rank order. `event_latency`, when
// not 0, replaces every GPU's (no shipped file sets one): each edge between two streams then
// costs that long, which makes when an op became ready matter.
template <typename F>
void on_machine(const ShippedMachine& m, F&& f, double event_latency = 0) {
  topo::Topology t = topo::load_topology(config_path(m.file));
  if (event_latency != 0)
    for (topo::NodeId g : t.gpus()) t.node(g).event_latency = event_latency;
  const topo::Router router(t, topo::RoutingOptions{.ecmp = m.ecmp});
  std::vector<topo::NodeId> gpus = t.gpus();
  if (m.gpus != 0) gpus.resize(m.gpus);
  f(router, gpus);
}

}  // namespace collsim::test
