#include <algorithm>
#include <catch2/catch.hpp>
#include <tuple>

#include "topology/loader.hpp"
#include "topology_test_util.hpp"

using namespace collsim;
using namespace collsim::topo;
using test::dump;
using test::errors_of;
using test::has_error;

namespace {

// Three servers of one template in two racks, on a rail-optimised fabric of two rails, two
// servers per leaf, two spines and a 2:1 oversubscription.
constexpr const char* kTemplated = R"({"name": "small",
  "racks": [{"name": "r{i}", "count": 2}],
  "templates": {"box": {"p2p": false, "nodes": [
      {"name": "gpu{i}", "count": 2, "kind": "gpu", "memory_bandwidth": "900GB/s", "model": "M"},
      {"name": "sw", "kind": "pcie_switch"},
      {"name": "cpu", "kind": "cpu", "memcpy_bandwidth": "10GB/s", "pageable_traffic": {"h2d": 0.75}},
      {"name": "nic{i}", "count": 2, "kind": "nic"}],
    "links": [{"from": "gpu{i}", "to": "sw", "count": 2, "kind": "pcie", "bandwidth": "32GB/s", "latency": "100ns"},
              {"from": "nic{i}", "to": "sw", "count": 2, "kind": "pcie", "bandwidth": "32GB/s", "latency": "100ns"},
              {"from": "sw", "to": "cpu", "kind": "pcie", "bandwidth": "32GB/s"}]}},
  "servers": [{"name": "s{i}", "count": 3, "template": "box", "rack": "r{i/2}"}],
  "fabric": {"kind": "rail_optimized", "nics": ["nic0", "nic1"], "servers_per_leaf": 2, "spines": 2,
             "nic_link": {"bandwidth": "100Gb/s", "latency": "1us"}, "uplink": {"latency": "500ns"},
             "oversubscription": "2:1"}})";

// The same graph written out by hand. Leaves: ceil(3 servers / 2) = 2 groups x 2 rails, named
// fabric/rail<r>/leaf<g>, group-major. Uplink bandwidth: 2 downlinks x 12.5 GB/s / (2 x 2 spines)
// = 6.25 GB/s.
constexpr const char* kExplicit = R"({"name": "small",
  "racks": [{"name": "r0"}, {"name": "r1"}],
  "servers": [{"name": "s0", "rack": "r0", "p2p": false}, {"name": "s1", "rack": "r0", "p2p": false},
              {"name": "s2", "rack": "r1", "p2p": false}],
  "nodes": [
    {"name": "s0/gpu0", "kind": "gpu", "server": "s0", "memory_bandwidth": "900GB/s", "model": "M"},
    {"name": "s0/gpu1", "kind": "gpu", "server": "s0", "memory_bandwidth": "900GB/s", "model": "M"},
    {"name": "s0/sw", "kind": "pcie_switch", "server": "s0"},
    {"name": "s0/cpu", "kind": "cpu", "server": "s0", "memcpy_bandwidth": "10GB/s",
     "pageable_traffic": {"h2d": 0.75}},
    {"name": "s0/nic0", "kind": "nic", "server": "s0"},
    {"name": "s0/nic1", "kind": "nic", "server": "s0"},
    {"name": "s1/gpu0", "kind": "gpu", "server": "s1", "memory_bandwidth": "900GB/s", "model": "M"},
    {"name": "s1/gpu1", "kind": "gpu", "server": "s1", "memory_bandwidth": "900GB/s", "model": "M"},
    {"name": "s1/sw", "kind": "pcie_switch", "server": "s1"},
    {"name": "s1/cpu", "kind": "cpu", "server": "s1", "memcpy_bandwidth": "10GB/s",
     "pageable_traffic": {"h2d": 0.75}},
    {"name": "s1/nic0", "kind": "nic", "server": "s1"},
    {"name": "s1/nic1", "kind": "nic", "server": "s1"},
    {"name": "s2/gpu0", "kind": "gpu", "server": "s2", "memory_bandwidth": "900GB/s", "model": "M"},
    {"name": "s2/gpu1", "kind": "gpu", "server": "s2", "memory_bandwidth": "900GB/s", "model": "M"},
    {"name": "s2/sw", "kind": "pcie_switch", "server": "s2"},
    {"name": "s2/cpu", "kind": "cpu", "server": "s2", "memcpy_bandwidth": "10GB/s",
     "pageable_traffic": {"h2d": 0.75}},
    {"name": "s2/nic0", "kind": "nic", "server": "s2"},
    {"name": "s2/nic1", "kind": "nic", "server": "s2"},
    {"name": "fabric/rail0/leaf0", "kind": "switch"},
    {"name": "fabric/rail1/leaf0", "kind": "switch"},
    {"name": "fabric/rail0/leaf1", "kind": "switch"},
    {"name": "fabric/rail1/leaf1", "kind": "switch"},
    {"name": "fabric/spine0", "kind": "switch"},
    {"name": "fabric/spine1", "kind": "switch"}],
  "links": [
    {"from": "s0/gpu0", "to": "s0/sw", "kind": "pcie", "bandwidth": "32GB/s", "latency": "100ns"},
    {"from": "s0/gpu1", "to": "s0/sw", "kind": "pcie", "bandwidth": "32GB/s", "latency": "100ns"},
    {"from": "s0/nic0", "to": "s0/sw", "kind": "pcie", "bandwidth": "32GB/s", "latency": "100ns"},
    {"from": "s0/nic1", "to": "s0/sw", "kind": "pcie", "bandwidth": "32GB/s", "latency": "100ns"},
    {"from": "s0/sw", "to": "s0/cpu", "kind": "pcie", "bandwidth": "32GB/s"},
    {"from": "s1/gpu0", "to": "s1/sw", "kind": "pcie", "bandwidth": "32GB/s", "latency": "100ns"},
    {"from": "s1/gpu1", "to": "s1/sw", "kind": "pcie", "bandwidth": "32GB/s", "latency": "100ns"},
    {"from": "s1/nic0", "to": "s1/sw", "kind": "pcie", "bandwidth": "32GB/s", "latency": "100ns"},
    {"from": "s1/nic1", "to": "s1/sw", "kind": "pcie", "bandwidth": "32GB/s", "latency": "100ns"},
    {"from": "s1/sw", "to": "s1/cpu", "kind": "pcie", "bandwidth": "32GB/s"},
    {"from": "s2/gpu0", "to": "s2/sw", "kind": "pcie", "bandwidth": "32GB/s", "latency": "100ns"},
    {"from": "s2/gpu1", "to": "s2/sw", "kind": "pcie", "bandwidth": "32GB/s", "latency": "100ns"},
    {"from": "s2/nic0", "to": "s2/sw", "kind": "pcie", "bandwidth": "32GB/s", "latency": "100ns"},
    {"from": "s2/nic1", "to": "s2/sw", "kind": "pcie", "bandwidth": "32GB/s", "latency": "100ns"},
    {"from": "s2/sw", "to": "s2/cpu", "kind": "pcie", "bandwidth": "32GB/s"},
    {"from": "s0/nic0", "to": "fabric/rail0/leaf0", "kind": "network", "bandwidth": "12.5GB/s", "latency": "1us"},
    {"from": "s0/nic1", "to": "fabric/rail1/leaf0", "kind": "network", "bandwidth": "12.5GB/s", "latency": "1us"},
    {"from": "s1/nic0", "to": "fabric/rail0/leaf0", "kind": "network", "bandwidth": "12.5GB/s", "latency": "1us"},
    {"from": "s1/nic1", "to": "fabric/rail1/leaf0", "kind": "network", "bandwidth": "12.5GB/s", "latency": "1us"},
    {"from": "s2/nic0", "to": "fabric/rail0/leaf1", "kind": "network", "bandwidth": "12.5GB/s", "latency": "1us"},
    {"from": "s2/nic1", "to": "fabric/rail1/leaf1", "kind": "network", "bandwidth": "12.5GB/s", "latency": "1us"},
    {"from": "fabric/rail0/leaf0", "to": "fabric/spine0", "kind": "network", "bandwidth": "6.25GB/s", "latency": "500ns"},
    {"from": "fabric/rail0/leaf0", "to": "fabric/spine1", "kind": "network", "bandwidth": "6.25GB/s", "latency": "500ns"},
    {"from": "fabric/rail1/leaf0", "to": "fabric/spine0", "kind": "network", "bandwidth": "6.25GB/s", "latency": "500ns"},
    {"from": "fabric/rail1/leaf0", "to": "fabric/spine1", "kind": "network", "bandwidth": "6.25GB/s", "latency": "500ns"},
    {"from": "fabric/rail0/leaf1", "to": "fabric/spine0", "kind": "network", "bandwidth": "6.25GB/s", "latency": "500ns"},
    {"from": "fabric/rail0/leaf1", "to": "fabric/spine1", "kind": "network", "bandwidth": "6.25GB/s", "latency": "500ns"},
    {"from": "fabric/rail1/leaf1", "to": "fabric/spine0", "kind": "network", "bandwidth": "6.25GB/s", "latency": "500ns"},
    {"from": "fabric/rail1/leaf1", "to": "fabric/spine1", "kind": "network", "bandwidth": "6.25GB/s", "latency": "500ns"}]})";

using LinkKey = std::tuple<std::string, std::string, LinkKind, double, double>;

std::vector<LinkKey> link_keys(const Topology& t) {
  std::vector<LinkKey> keys;
  for (const Link& l : t.links())
    keys.emplace_back(t.node(l.from).name, t.node(l.to).name, l.kind, l.bandwidth, l.latency);
  std::sort(keys.begin(), keys.end());
  return keys;
}

void check_same_graph(const Topology& a, const Topology& b) {
  REQUIRE(a.num_nodes() == b.num_nodes());
  for (NodeId i = 0; i < a.num_nodes(); ++i) {
    const Node &x = a.node(i), &y = b.node(i);
    INFO(x.name);
    CHECK(x.name == y.name);
    CHECK(x.kind == y.kind);
    CHECK(x.server == y.server);
    CHECK(x.rack == y.rack);
    CHECK(x.model == y.model);
    CHECK(x.memory_bandwidth == y.memory_bandwidth);
    CHECK(x.memcpy_bandwidth == y.memcpy_bandwidth);
    CHECK(x.pageable_traffic == y.pageable_traffic);
    CHECK(x.copy_engines == y.copy_engines);
    CHECK(x.alpha == y.alpha);
    CHECK(x.launch_latency == y.launch_latency);
    CHECK(a.host_cpu(i) == b.host_cpu(i));
  }
  REQUIRE(a.servers().size() == b.servers().size());
  for (std::size_t s = 0; s < a.servers().size(); ++s) {
    CHECK(a.servers()[s].name == b.servers()[s].name);
    CHECK(a.servers()[s].rack == b.servers()[s].rack);
    CHECK(a.servers()[s].p2p == b.servers()[s].p2p);
    CHECK(a.servers()[s].gpudirect_rdma == b.servers()[s].gpudirect_rdma);
  }
  CHECK(a.racks().size() == b.racks().size());
  CHECK(a.gpus() == b.gpus());
  CHECK(link_keys(a) == link_keys(b));
}

}  // namespace

TEST_CASE("the templated form expands to exactly its explicit equivalent") {
  const Topology templated = parse_topology(kTemplated, "templated.json");
  const Topology written = parse_topology(kExplicit, "explicit.json");
  CHECK(templated.num_links() == 2 * 29);  // 15 in servers + 6 NIC links + 8 uplinks, duplex
  check_same_graph(templated, written);
}

TEST_CASE("fat-tree fabric: every NIC of a group on one leaf") {
  const Topology t = parse_topology(R"({"templates": {"b": {"nodes": [{"name": "g", "kind": "gpu"},
        {"name": "n{i}", "count": 2, "kind": "nic"}],
      "links": [{"from": "g", "to": "n{i}", "count": 2, "kind": "pcie"}]}},
    "servers": [{"name": "s{i}", "count": 4, "template": "b"}],
    "fabric": {"kind": "fat_tree", "name": "net", "nics": ["n0", "n1"], "servers_per_leaf": 3, "spines": 1,
               "nic_link": {"bandwidth": "10GB/s"}, "oversubscription": 3}})",
                                    "t.json");
  // Leaves: ceil(4 / 3) = 2; uplink: 3 servers x 2 NICs x 10 GB/s / (3 x 1 spine) = 20 GB/s.
  const NodeId leaf0 = t.find("net/leaf0"), leaf1 = t.find("net/leaf1"),
               spine = t.find("net/spine0");
  REQUIRE(leaf0 != kNoNode);
  REQUIRE(leaf1 != kNoNode);
  REQUIRE(spine != kNoNode);
  std::size_t on_leaf0 = 0, on_leaf1 = 0;
  for (const Link& l : t.links()) {
    if (l.to == leaf0 && t.node(l.from).kind == NodeKind::nic) ++on_leaf0;
    if (l.to == leaf1 && t.node(l.from).kind == NodeKind::nic) ++on_leaf1;
    if (l.from == leaf0 && l.to == spine) CHECK(l.bandwidth == 20e9);
  }
  CHECK(on_leaf0 == 6);
  CHECK(on_leaf1 == 2);
}

TEST_CASE("templated-form errors") {
  const auto ds =
      errors_of(R"({"templates": {"b": {"nodes": [{"name": "g", "kind": "gpu", "server": "x"},
        {"name": "n", "kind": "nic"}], "links": [{"from": "g", "to": "m", "kind": "pcie"}]},
      "c": {"nodes": [{"name": "g", "kind": "gpu"}]}},
    "servers": [{"name": "s", "template": "bb"}, {"name": "t{i}", "count": 2, "template": "c"}],
    "fabric": {"kind": "rail", "nics": ["n"], "servers_per_leaf": 1}})");
  INFO(dump(ds));
  CHECK(has_error(ds, "/templates/b/nodes/0/server", {"remove \"server\""}));
  CHECK(has_error(ds, "/templates/b/links/0/to", {"\"m\"", "not a node of template \"b\""}));
  CHECK(has_error(ds, "/servers/0/template", {"unknown template \"bb\""}));
  CHECK(has_error(ds, "/fabric", {"not expanded"}));

  const auto fabric = errors_of(R"({"templates": {"c": {"nodes": [{"name": "g", "kind": "gpu"},
        {"name": "n", "kind": "nic"}], "links": [{"from": "g", "to": "n", "kind": "pcie"}]}},
    "servers": [{"name": "t{i}", "count": 2, "template": "c"}],
    "fabric": {"kind": "rail", "nics": ["n"], "servers_per_leaf": 1}})");
  INFO(dump(fabric));
  CHECK(has_error(fabric, "/fabric/kind", {"unknown fabric kind \"rail\"", "rail_optimized"}));

  const auto spines = errors_of(R"({"templates": {"c": {"nodes": [{"name": "g", "kind": "gpu"},
        {"name": "n", "kind": "nic"}], "links": [{"from": "g", "to": "n", "kind": "pcie"}]}},
    "servers": [{"name": "t{i}", "count": 2, "template": "c"}],
    "fabric": {"kind": "fat_tree", "nics": ["n"], "servers_per_leaf": 1, "oversubscription": "x"}})");
  INFO(dump(spines));
  CHECK(has_error(spines, "/fabric/oversubscription", {"expected a ratio"}));

  const auto no_spine = errors_of(R"({"templates": {"c": {"nodes": [{"name": "g", "kind": "gpu"},
        {"name": "n", "kind": "nic"}], "links": [{"from": "g", "to": "n", "kind": "pcie"}]}},
    "servers": [{"name": "t{i}", "count": 2, "template": "c"}],
    "fabric": {"kind": "fat_tree", "nics": ["n"], "servers_per_leaf": 1}})");
  CHECK(has_error(no_spine, "/fabric/spines", {"2 leaf switches", "need spines"}));

  const auto no_nics = errors_of(R"({"templates": {"c": {"nodes": [{"name": "g", "kind": "gpu"},
        {"name": "n", "kind": "nic"}], "links": [{"from": "g", "to": "n", "kind": "pcie"}]}},
    "servers": [{"name": "t{i}", "count": 2, "template": "c"}],
    "fabric": {"kind": "fat_tree", "nics": ["nic0"], "servers_per_leaf": 2}})");
  CHECK(has_error(no_nics, "/fabric/nics", {"no server has a node named \"<server>/nic0\""}));
}

TEST_CASE("a 131072-GPU cluster expands from a short file") {
  // 16384 servers of 8 GPUs and 8 NICs; 16384 / 64 = 256 groups x 8 rails = 2048 leaves and
  // 64 spines.
  const Topology t = parse_topology(R"({"templates": {"node": {"nodes": [
        {"name": "gpu{i}", "count": 8, "kind": "gpu"}, {"name": "nvs", "kind": "nvswitch"},
        {"name": "nic{i}", "count": 8, "kind": "nic"}],
      "links": [{"from": "gpu{i}", "to": "nvs", "count": 8, "kind": "nvlink", "bandwidth": "450GB/s"},
                {"from": "gpu{i}", "to": "nic{i}", "count": 8, "kind": "pcie", "bandwidth": "63GB/s"}]}},
    "servers": [{"name": "n{i:05}", "count": 16384, "template": "node"}],
    "fabric": {"kind": "rail_optimized", "nics": ["nic0", "nic1", "nic2", "nic3", "nic4", "nic5", "nic6", "nic7"],
               "servers_per_leaf": 64, "spines": 64, "nic_link": {"bandwidth": "400Gb/s"}, "oversubscription": 1}})",
                                    "big.json");
  CHECK(t.gpus().size() == 131072);
  CHECK(t.num_nodes() == 16384u * 17u + 2048u + 64u);
  // Per server 16 links; per NIC one; per leaf 64 uplinks; all duplex.
  CHECK(t.num_links() == 2u * (16384u * 16u + 131072u + 2048u * 64u));
}

TEST_CASE("a count that would exhaust memory is refused before expansion") {
  // 16777216 servers x 8 nodes = 134217728 nodes, above the 2^26 = 67108864 limit.
  const auto ds =
      errors_of(R"({"templates": {"b": {"nodes": [{"name": "g{i}", "count": 8, "kind": "gpu"}]}},
    "servers": [{"name": "s{i}", "count": 16777216, "template": "b"}]})");
  CHECK(has_error(ds, "/servers/0/count", {"134217728 nodes", "lower \"count\""}));
}
