#pragma once
// The shipped 1024-GPU cluster cut to fewer servers, as bench/run.sh scales it: the same
// DGX-class servers and rail-optimised fabric, racks of 4 servers.
#include <nlohmann/json.hpp>
#include <string>

#include "tests/common/files.hpp"
#include "topology/loader.hpp"

namespace collsim::test {

// `servers_per_leaf` > 0 regroups the fabric's leaves; 0 keeps the file's grouping.
inline topo::Topology scaled_cluster(int servers, int servers_per_leaf = 0) {
  auto doc = nlohmann::json::parse(
      read_file(std::string(COLLSIM_SOURCE_DIR) + "/configs/cluster-1024.json"));
  const std::string name = "cluster-" + std::to_string(8 * servers);
  doc["name"] = name;
  doc["servers"][0]["count"] = servers;
  doc["racks"][0]["count"] = (servers + 3) / 4;
  if (servers_per_leaf > 0) doc["fabric"]["servers_per_leaf"] = servers_per_leaf;
  return topo::build_topology(doc, name + ".json");
}

}  // namespace collsim::test
