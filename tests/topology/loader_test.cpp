#include "topology/loader.hpp"

#include <array>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include "tests/common/files.hpp"
#include "topology/name_pattern.hpp"
#include "topology_test_util.hpp"

using namespace collsim;
using namespace collsim::topo;
using test::dump;
using test::errors_of;
using test::has_error;

namespace {
// Two GPUs and one link; tests splice a fault into it.
std::string two_gpus(std::string_view node_extra = "", std::string_view link_extra = "") {
  return std::string(R"({"name": "t", "nodes": [{"name": "g0", "kind": "gpu")") +
         std::string(node_extra) + R"(}, {"name": "g1", "kind": "gpu"}],
  "links": [{"from": "g0", "to": "g1", "kind": "nvlink")" +
         std::string(link_extra) + "}]}";
}
}  // namespace

TEST_CASE("the example of the issue loads with the quantities it states") {
  const Topology t = parse_topology(R"({"name": "ring-4",
   "nodes": [{"name": "g0", "kind": "gpu"}, {"name": "g1", "kind": "gpu"}],
   "links": [{"from": "g0", "to": "g1", "kind": "nvlink", "bandwidth": "25GB/s", "latency": "1us"}]})",
                                    "t.json");
  CHECK(t.name() == "ring-4");
  REQUIRE(t.num_nodes() == 2);
  REQUIRE(t.num_links() == 2);  // duplex by default: one Link per direction
  CHECK(t.link(0).from == 0);
  CHECK(t.link(0).to == 1);
  CHECK(t.link(1).from == 1);
  CHECK(t.link(1).to == 0);
  CHECK(t.link(0).bandwidth == 25e9);
  CHECK(t.link(1).latency == 1e-6);
  CHECK(t.link(0).source_index == t.link(1).source_index);
  // Absent parameters cost nothing.
  CHECK(t.node(0).memory_bandwidth == kUnlimited);
  CHECK(t.node(0).copy_engines == 0);
  CHECK(t.node(0).alpha == 0);
  CHECK(t.gpus() == std::vector<NodeId>{0, 1});
}

TEST_CASE("simplex links, parameters and names with count") {
  const Topology t = parse_topology(R"({"nodes": [
      {"name": "g{i}", "count": 3, "kind": "gpu", "memory_bandwidth": "1TB/s", "copy_engines": 2,
       "alpha": "2us", "launch_latency": "3us", "event_latency": "1.5us", "model": "X"},
      {"name": "c", "kind": "cpu", "memcpy_bandwidth": "10GB/s"}],
    "links": [{"from": "g{i}", "to": "g{i+1}", "count": 2, "kind": "nvlink", "duplex": false},
              {"from": "g2", "to": "g0", "kind": "nvlink", "duplex": false},
              {"from": "c", "to": "g0", "kind": "pcie", "comment": "citations are allowed anywhere"}]})",
                                    "ring.json");
  CHECK(t.name() == "ring");  // defaults to the file's stem
  CHECK(t.num_links() == 5);  // three simplex links and one duplex link
  CHECK(t.node(t.find("g1")).memory_bandwidth == 1e12);
  CHECK(t.node(t.find("g2")).copy_engines == 2);
  CHECK(t.node(t.find("g2")).alpha == 2e-6);
  CHECK(t.node(t.find("g2")).launch_latency == 3e-6);
  CHECK(t.node(t.find("g2")).event_latency == 1.5e-6);
  CHECK(t.node(t.find("g2")).model == "X");
  CHECK(t.node(t.find("c")).memcpy_bandwidth == 10e9);
  CHECK(t.link(1).from == t.find("g1"));
  CHECK(t.link(1).to == t.find("g2"));
  // The only CPU is the host of every GPU that reaches it.
  CHECK(t.host_cpu(t.find("g0")) == t.find("c"));
}

TEST_CASE("JSON syntax errors give line and column") {
  const auto ds = errors_of("{\"name\": \"x\",\n  \"nodes\": [}\n");
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].where.rfind("line 2, column ", 0) == 0);
  CHECK(ds[0].message.find("invalid JSON") != std::string::npos);
}

TEST_CASE("empty, blank and binary documents") {
  CHECK(has_error(errors_of(""), "", {"is empty"}));
  CHECK(has_error(errors_of("  \n "), "", {"is empty"}));
  CHECK(has_error(errors_of(std::string("\x7f"
                                        "ELF\0\0\1",
                                        7)),
                  "", {"binary"}));
  CHECK(has_error(errors_of("[1, 2]"), "/", {"expected a topology", "found an array"}));
}

TEST_CASE("files that are missing or are directories") {
  CHECK_THROWS_WITH(load_topology("/nonexistent/x.json"), Catch::Contains("file not found"));
  CHECK_THROWS_WITH(load_topology(COLLSIM_SOURCE_DIR), Catch::Contains("is a directory"));
  const auto path = test::scratch_dir() / "empty_topology.json";
  std::ofstream(path).close();
  CHECK_THROWS_WITH(load_topology(path.string()), Catch::Contains("is empty"));
}

TEST_CASE("unknown keys are named with a suggestion") {
  const auto ds =
      errors_of(two_gpus(R"(, "memory_bandwith": "1TB/s")", R"(, "bandwitdh": "1GB/s")"));
  INFO(dump(ds));
  CHECK(has_error(ds, "/nodes/0/memory_bandwith",
                  {"unknown key \"memory_bandwith\"", "did you mean \"memory_bandwidth\""}));
  CHECK(has_error(ds, "/links/0/bandwitdh", {"did you mean \"bandwidth\""}));
  CHECK(has_error(errors_of(R"({"nodez": []})"), "/nodez", {"did you mean \"nodes\""}));
}

TEST_CASE("every error of a document is reported in one run") {
  const auto ds =
      errors_of(R"({"nodes": [{"name": "g0", "kind": "gpu"}, {"name": "g0", "kind": "gpu"},
                                          {"name": "g1", "kind": "gpo"}],
    "links": [{"from": "g0", "to": "gx", "kind": "nvlink", "bandwidth": "0GB/s"},
              {"from": "g0", "to": "g0", "kind": "nvlink", "latency": "-1us"}]})");
  INFO(dump(ds));
  CHECK(has_error(ds, "/nodes/1/name", {"duplicate node name \"g0\"", "/nodes/0"}));
  CHECK(has_error(ds, "/nodes/2/kind", {"unknown node kind \"gpo\"", "did you mean \"gpu\""}));
  CHECK(has_error(ds, "/links/0/to", {"unknown node \"gx\""}));
  CHECK(has_error(ds, "/links/0/bandwidth", {"positive"}));
  CHECK(has_error(ds, "/links/1/to", {"to itself"}));
  CHECK(has_error(ds, "/links/1/latency", {"negative"}));
  CHECK(ds.size() == 6);
}

TEST_CASE("wrong types and missing required fields") {
  const auto ds = errors_of(R"({"name": 3, "nodes": [{"kind": "gpu"}, {"name": "g1"}, 7,
      {"name": "g2", "kind": "gpu", "copy_engines": "4"}],
    "links": [{"from": "g1", "kind": "nvlink", "duplex": "yes"}]})");
  INFO(dump(ds));
  CHECK(has_error(ds, "/name", {"expected a string", "number 3"}));
  CHECK(has_error(ds, "/nodes/0/name", {"missing the required key \"name\""}));
  CHECK(has_error(ds, "/nodes/1/kind", {"missing the required key \"kind\"", "gpu"}));
  CHECK(has_error(ds, "/nodes/2", {"expected a node", "number 7"}));
  CHECK(has_error(ds, "/nodes/3/copy_engines", {"expected an integer", "string \"4\""}));
  CHECK(has_error(ds, "/links/0/to", {"missing the required key \"to\""}));
  CHECK(has_error(ds, "/links/0/duplex", {"expected true or false"}));
  CHECK(has_error(errors_of(R"({"nodes": {"g": 1}})"), "/nodes", {"expected an array"}));
}

TEST_CASE("quantities need units and valid ranges") {
  CHECK(has_error(errors_of(two_gpus("", R"(, "bandwidth": 25)")), "/links/0/bandwidth",
                  {"bare number 25", "\"25GB/s\""}));
  CHECK(has_error(errors_of(two_gpus("", R"(, "bandwidth": "25")")), "/links/0/bandwidth",
                  {"no unit"}));
  CHECK(has_error(errors_of(two_gpus("", R"(, "latency": 1)")), "/links/0/latency",
                  {"bare number 1", "\"1us\""}));
  CHECK(has_error(errors_of(two_gpus("", R"(, "bandwidth": "-3GB/s")")), "/links/0/bandwidth",
                  {"positive"}));
  CHECK(has_error(errors_of(two_gpus("", R"(, "bandwidth": "1e300GB/s")")), "/links/0/bandwidth",
                  {"maximum"}));
  CHECK(has_error(errors_of(two_gpus("", R"(, "latency": "-0.5us")")), "/links/0/latency",
                  {"negative"}));
  CHECK(has_error(errors_of(two_gpus(R"(, "copy_engines": 0)")), "/nodes/0/copy_engines",
                  {"from 1 to 1024"}));
  CHECK(has_error(errors_of(two_gpus(R"(, "alpha": "fast")")), "/nodes/0/alpha",
                  {"expected a duration"}));
}

TEST_CASE("reduce traffic by element type") {
  const Topology t =
      parse_topology(two_gpus(R"(, "reduce_traffic": {"bf16": 4.5, "fp16": "9:2"})"), "t.json");
  CHECK(t.node(t.find("g0")).reduce_traffic == std::array<double, 3>{3, 4.5, 4.5});
  CHECK(t.node(t.find("g1")).reduce_traffic == std::array<double, 3>{3, 3, 3});  // the default
  CHECK(has_error(errors_of(two_gpus(R"(, "reduce_traffic": {"bfloat16": 4.5})")),
                  "/nodes/0/reduce_traffic/bfloat16", {"known keys: fp32, fp16, bf16"}));
  CHECK(has_error(errors_of(two_gpus(R"(, "reduce_traffic": {"fp32": 0})")),
                  "/nodes/0/reduce_traffic/fp32", {"positive"}));
  CHECK(has_error(errors_of(two_gpus(R"(, "reduce_traffic": 4.5)")), "/nodes/0/reduce_traffic",
                  {"expected an object of bytes of memory traffic per byte reduced"}));
  const auto ds = errors_of(
      R"({"nodes": [{"name": "g0", "kind": "gpu"}, {"name": "s", "kind": "switch", "reduce_traffic": {"fp32": 3}},
      {"name": "g1", "kind": "gpu"}], "links": [{"from": "g0", "to": "s", "kind": "network"},
      {"from": "s", "to": "g1", "kind": "network"}]})");
  INFO(dump(ds));
  CHECK(has_error(ds, "/nodes/1/reduce_traffic", {"applies to gpu nodes only"}));
}

TEST_CASE("pageable traffic by direction, on CPUs") {
  const std::string box = R"({"nodes": [{"name": "g", "kind": "gpu"}, {"name": "c", "kind": "cpu",
      "memcpy_bandwidth": "10GB/s", "pageable_traffic": PT}],
    "links": [{"from": "g", "to": "c", "kind": "pcie"}]})";
  const auto with = [&](std::string_view traffic) {
    std::string s = box;
    s.replace(s.find("PT"), 2, traffic);
    return s;
  };
  const Topology t = parse_topology(with(R"({"d2h": 1.25, "h2d": "3:4"})"), "t.json");
  CHECK(t.node(t.find("c")).pageable_traffic == std::array<double, 2>{1.25, 0.75});
  CHECK(parse_topology(with(R"({"h2d": 2})"), "t.json").node(1).pageable_traffic ==
        std::array<double, 2>{1, 2});  // d2h keeps the default
  CHECK(has_error(errors_of(with(R"({"to_host": 2})")), "/nodes/1/pageable_traffic/to_host",
                  {"known keys: d2h, h2d"}));
  CHECK(
      has_error(errors_of(with(R"({"d2h": -1})")), "/nodes/1/pageable_traffic/d2h", {"positive"}));
  CHECK(has_error(errors_of(with("2")), "/nodes/1/pageable_traffic",
                  {"expected an object of bytes of memcpy traffic per byte copied"}));
  CHECK(has_error(errors_of(two_gpus(R"(, "pageable_traffic": {"d2h": 2})")),
                  "/nodes/0/pageable_traffic", {"applies to cpu nodes only"}));
}

TEST_CASE("a node with a bad parameter is still known to the links that name it") {
  // One mistake, one error: before, every link of the node added "unknown node".
  const auto ds = errors_of(two_gpus(R"(, "copy_engines": 0)"));
  INFO(dump(ds));
  CHECK(ds.size() == 1);
  CHECK(has_error(ds, "/nodes/0/copy_engines", {"from 1 to 1024"}));
  const auto templated = errors_of(R"({"name": "t",
    "templates": {"box": {"nodes": [{"name": "g{i}", "count": 2, "kind": "gpu", "alpha": "soon"}],
      "links": [{"from": "g0", "to": "g1", "kind": "nvlink"}]}},
    "servers": [{"name": "s", "template": "box"}]})");
  INFO(dump(templated));
  CHECK(templated.size() == 1);
  CHECK(has_error(templated, "/templates/box/nodes/0/alpha", {"expected a duration"}));
}

TEST_CASE("what names a failed rack, server or node is not reported unknown as well") {
  // A server with a bad "p2p": its nodes and their links follow it out quietly.
  const auto server = errors_of(R"({"servers": [{"name": "s", "p2p": "yes"}],
    "nodes": [{"name": "g{i}", "count": 2, "kind": "gpu", "server": "s"}],
    "links": [{"from": "g0", "to": "g1", "kind": "nvlink"}]})");
  INFO(dump(server));
  CHECK(server.size() == 1);
  CHECK(has_error(server, "/servers/0/p2p", {"expected true or false"}));
  // A rack with a bad count: the servers in it say nothing more.
  const auto rack = errors_of(R"({"racks": [{"name": "r", "count": "two"}],
    "servers": [{"name": "s", "rack": "r"}],
    "nodes": [{"name": "g{i}", "count": 2, "kind": "gpu", "server": "s"}],
    "links": [{"from": "g0", "to": "g1", "kind": "nvlink"}]})");
  INFO(dump(rack));
  CHECK(rack.size() == 1);
  CHECK(has_error(rack, "/racks/0/count", {"expected an integer"}));
  // Nodes of an unknown kind: their links say nothing more, but a link to a node that no entry
  // names is still reported.
  const auto kind = errors_of(R"({"nodes": [{"name": "g{i}", "count": 2, "kind": "gpux"},
      {"name": "c", "kind": "cpu"}],
    "links": [{"from": "g{i}", "to": "c", "count": 2, "kind": "pcie"},
      {"from": "g9", "to": "c", "kind": "pcie"}]})");
  INFO(dump(kind));
  CHECK(kind.size() == 2);
  CHECK(has_error(kind, "/nodes/0/kind", {"did you mean \"gpu\""}));
  CHECK(has_error(kind, "/links/1/from", {"unknown node \"g9\""}));
  // A node entry whose count cannot be read: its names may use {i}, and the links that name any
  // of the names it might have given say nothing more; a link entry's bad count likewise.
  const auto count = errors_of(R"({"nodes": [{"name": "g{i}", "count": "two", "kind": "gpu"},
      {"name": "c", "kind": "cpu"}],
    "links": [{"from": "g1", "to": "c", "kind": "pcie"},
      {"from": "g{i}", "to": "c", "count": 0, "kind": "pcie"}]})");
  INFO(dump(count));
  CHECK(count.size() == 2);
  CHECK(has_error(count, "/nodes/0/count", {"expected an integer"}));
  CHECK(has_error(count, "/links/1/count", {"expected an integer from 1"}));
  // A name no entry gives is still reported, and the suggestion may be a failed entry's name.
  const auto typo = errors_of(R"({"nodes": [{"name": "gpu0", "kind": "gpux"},
      {"name": "c", "kind": "cpu"}], "links": [{"from": "gpu_0", "to": "c", "kind": "pcie"}]})");
  INFO(dump(typo));
  CHECK(typo.size() == 2);
  CHECK(has_error(typo, "/links/0/from", {"unknown node \"gpu_0\" (did you mean \"gpu0\"?)"}));
  // Names remembered for failed entries are bounded in all (65,536): sixteen entries of 4096
  // names fill it, so the first one's names are known and the seventeenth's reported.
  std::string many = R"({"nodes": [{"name": "c", "kind": "cpu"})";
  for (int j = 0; j < 17; ++j)
    many += ", {\"name\": \"g" + std::to_string(j) + "_{i}\", \"count\": \"x\", \"kind\": \"gpu\"}";
  many += R"(], "links": [{"from": "g0_5", "to": "c", "kind": "pcie"},
    {"from": "g16_5", "to": "c", "kind": "pcie"}]})";
  const auto bounded = errors_of(many);
  CHECK(bounded.size() == 18);
  CHECK(!has_error(bounded, "/links/0/from", {"unknown node"}));
  CHECK(has_error(bounded, "/links/1/from", {"unknown node \"g16_5\""}));
  // The same inside a template.
  const auto templated = errors_of(R"({"templates": {"box": {
      "nodes": [{"name": "g{i}", "count": 2, "kind": "gpux"}, {"name": "c", "kind": "cpu"}],
      "links": [{"from": "g{i}", "to": "c", "count": 2, "kind": "pcie"}]}},
    "servers": [{"name": "s{i}", "count": 2, "template": "box"}]})");
  INFO(dump(templated));
  CHECK(templated.size() == 1);
  CHECK(has_error(templated, "/templates/box/nodes/0/kind", {"did you mean \"gpu\""}));
}

TEST_CASE("parameters only on the kinds they belong to") {
  const auto ds =
      errors_of(R"({"nodes": [{"name": "g0", "kind": "gpu", "memcpy_bandwidth": "1GB/s"},
      {"name": "s", "kind": "switch", "copy_engines": 2}, {"name": "g1", "kind": "gpu"}],
    "links": [{"from": "g0", "to": "s", "kind": "network"}, {"from": "s", "to": "g1", "kind": "network"}]})");
  INFO(dump(ds));
  CHECK(has_error(ds, "/nodes/0/memcpy_bandwidth", {"applies to cpu nodes only", "is a gpu"}));
  CHECK(has_error(ds, "/nodes/1/copy_engines", {"applies to gpu nodes only", "is a switch"}));
}

TEST_CASE("GPUs that cannot reach each other, and topologies without GPUs") {
  const auto split =
      errors_of(R"({"nodes": [{"name": "a", "kind": "gpu"}, {"name": "b", "kind": "gpu"},
      {"name": "c", "kind": "gpu"}], "links": [{"from": "a", "to": "b", "kind": "nvlink"},
      {"from": "b", "to": "c", "kind": "nvlink", "duplex": false}]})");
  INFO(dump(split));
  // a <-> b both ways; c is reached from a (a -> b -> c) but cannot get back.
  CHECK(has_error(split, "/nodes/2", {"gpu \"c\" cannot reach gpu \"a\""}));
  CHECK(split.size() == 1);
  CHECK(has_error(
      errors_of(R"({"nodes": [{"name": "a", "kind": "gpu"}, {"name": "b", "kind": "gpu"}]})"),
      "/nodes/1", {"is not connected to"}));
  CHECK(has_error(errors_of(R"({"name": "x"})"), "/nodes", {"no GPU"}));
  CHECK(has_error(errors_of(R"({"nodes": [{"name": "c", "kind": "cpu"}]})"), "/nodes", {"no GPU"}));
}

TEST_CASE("duplicate JSON keys, racks, servers and bad citations") {
  const auto ds = errors_of(R"({"name": "a", "name": "b", "comment": 5,
    "racks": [{"name": "r"}, {"name": "r"}],
    "servers": [{"name": "s", "rack": "q"}, {"name": "s"}],
    "nodes": [{"name": "g", "kind": "gpu", "server": "z", "sources": ["ok", 1]}]})");
  INFO(dump(ds));
  CHECK(has_error(ds, "/name", {"appears twice"}));
  CHECK(has_error(ds, "/comment", {"string or an array of strings"}));
  CHECK(has_error(ds, "/racks/1/name", {"duplicate rack name \"r\""}));
  CHECK(has_error(ds, "/servers/0/rack", {"unknown rack \"q\"", "did you mean \"r\""}));
  CHECK(has_error(ds, "/servers/1/name", {"duplicate server name \"s\""}));
  CHECK(has_error(ds, "/nodes/0/server", {"unknown server \"z\""}));
  CHECK(has_error(ds, "/nodes/0/sources", {"string or an array of strings"}));
}

TEST_CASE("servers and racks are attached to nodes") {
  const Topology t = parse_topology(R"({"racks": [{"name": "r{i}", "count": 2}],
    "servers": [{"name": "s0", "rack": "r1", "p2p": false, "gpudirect_rdma": false}],
    "nodes": [{"name": "g0", "kind": "gpu", "server": "s0"}, {"name": "g1", "kind": "gpu", "rack": "r0"}],
    "links": [{"from": "g0", "to": "g1", "kind": "pcie"}]})",
                                    "t.json");
  REQUIRE(t.servers().size() == 1);
  CHECK(t.racks().size() == 2);
  CHECK(t.servers()[0].rack == 1);
  CHECK_FALSE(t.servers()[0].p2p);
  CHECK_FALSE(t.servers()[0].gpudirect_rdma);
  CHECK(t.node(0).server == 0);
  CHECK(t.node(0).rack == 1);  // follows its server
  CHECK(t.node(1).server == kNone);
  CHECK(t.node(1).rack == 0);
  CHECK(has_error(
      errors_of(
          R"({"racks": [{"name": "r0"}, {"name": "r1"}], "servers": [{"name": "s", "rack": "r0"}],
      "nodes": [{"name": "g", "kind": "gpu", "server": "s", "rack": "r1"}]})"),
      "/nodes/0/rack", {"but its server \"s\" is in rack \"r0\""}));
}

TEST_CASE("the Boost graph holds every link as an edge, also links added after it was built") {
  Topology t = parse_topology(R"({"nodes": [{"name": "g{i}", "count": 3, "kind": "gpu"}],
    "links": [{"from": "g0", "to": "g1", "kind": "nvlink"}, {"from": "g1", "to": "g2", "kind": "pcie"}]})",
                              "t.json");
  // Every edge (u, v) carries the id of a link from u to v, and each link id appears once.
  const auto matches_links = [](const Topology& topology) {
    const auto& g = topology.graph();
    if (boost::num_vertices(g) != topology.num_nodes()) return false;
    if (boost::num_edges(g) != topology.num_links()) return false;
    std::vector<int> seen(topology.num_links(), 0);
    for (const auto e : boost::make_iterator_range(boost::edges(g))) {
      const LinkId id = g[e];
      if (id >= seen.size() || seen[id]++ != 0) return false;
      const Link& link = topology.link(id);
      if (boost::source(e, g) != link.from || boost::target(e, g) != link.to) return false;
    }
    return true;
  };
  CHECK(t.num_links() == 4);  // two duplex links
  CHECK(matches_links(t));
  const auto* const built = &t.graph();
  Node node;
  node.name = "g3";
  const NodeId g3 = t.add_node(node);
  Link link;
  link.from = g3;
  link.to = 0;
  t.add_link(link);
  CHECK(&t.graph() == built);  // updated in place: references stay valid
  CHECK(matches_links(t));
  CHECK(boost::in_degree(0, t.graph()) == 2);
  Topology copy = t;
  CHECK(&copy.graph() != built);
  CHECK(matches_links(copy));
  Topology moved = std::move(copy);
  CHECK(matches_links(moved));
  copy = moved;
  CHECK(matches_links(copy));
}

TEST_CASE("nodes by name are in the order of a sort of the names as strings") {
  // Names that tie on their first 16 bytes, are prefixes of each other, hold zero bytes or bytes
  // above 127, or are shorter than a word, in an order far from sorted.
  std::vector<std::string> names = {"dgx00001/nvswitch0",
                                    "dgx00001/nvswitch",
                                    "dgx00001/nvswitch1",
                                    "dgx00001/nvswitc",
                                    "dgx0000",
                                    "dgx00001",
                                    "b",
                                    "a",
                                    "",
                                    std::string("a\0b", 3),
                                    std::string("a\0", 2),
                                    "\xff",
                                    "\x7f",
                                    "ab",
                                    "dgx00001/nvswitch0x"};
  std::mt19937 random(7);
  for (int i = 0; i < 200; ++i) {
    std::string name;
    const auto length = std::uniform_int_distribution<int>(0, 24)(random);
    for (int c = 0; c < length; ++c)
      name.push_back("ab/\0\xe9"[std::uniform_int_distribution<int>(0, 4)(random)]);
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  Topology t;
  for (const std::string& name : names) {
    Node node;
    node.name = name;
    t.add_node(node);
  }
  std::vector<NodeId> expected(names.size());
  std::iota(expected.begin(), expected.end(), NodeId{0});
  std::sort(expected.begin(), expected.end(),
            [&](NodeId a, NodeId b) { return names[a] < names[b]; });
  CHECK(nodes_by_name(t) == expected);
}

TEST_CASE("a template link entry naming many missing nodes reports a few and counts the rest") {
  const auto ds =
      errors_of(R"({"templates": {"s": {"nodes": [{"name": "g{i}", "count": 2, "kind": "gpu"},
      {"name": "h", "kind": "nvswitch"}],
      "links": [{"from": "g{i}", "to": "h", "count": 1000, "kind": "nvlink"}]}},
    "servers": [{"name": "a", "template": "s"}]})");
  CHECK(has_error(ds, "/templates/s/links/0/from", {"\"g2\", which is not a node of template"}));
  CHECK(has_error(ds, "/templates/s/links/0", {"990 more references of this entry"}));
  INFO(dump(ds));
  CHECK(ds.size() == 9);  // g2 to g9 shown, g10 to g999 counted
}

TEST_CASE("name patterns") {
  CHECK(has_error(errors_of(two_gpus(R"(, "count": 2)")), "/nodes/0/name",
                  {"duplicate node name \"g0\""}));
  CHECK(has_error(errors_of(R"({"nodes": [{"name": "g{i}", "kind": "gpu"}]})"), "/nodes/0/name",
                  {"has no \"count\""}));
  CHECK(has_error(errors_of(R"({"nodes": [{"name": "g{j}", "count": 2, "kind": "gpu"}]})"),
                  "/nodes/0/name", {"bad name pattern", "only the index"}));
  CHECK(has_error(errors_of(R"({"nodes": [{"name": "g{i/0}", "count": 2, "kind": "gpu"}]})"),
                  "/nodes/0/name", {"division by zero"}));
  CHECK(has_error(errors_of(R"({"nodes": [{"name": "g{i", "count": 2, "kind": "gpu"}]})"),
                  "/nodes/0/name", {"unmatched '{'"}));
  CHECK(has_error(errors_of(R"({"nodes": [{"name": "g", "count": 0, "kind": "gpu"}]})"),
                  "/nodes/0/count", {"from 1 to"}));
  // A ring written with patterns: g00 -> g01 -> ... -> g09, closed by hand.
  const Topology t = parse_topology(R"({"nodes": [{"name": "g{i:02}", "count": 10, "kind": "gpu"}],
    "links": [{"from": "g{i:02}", "to": "g{i+1:02}", "count": 9, "kind": "pcie"},
              {"from": "g09", "to": "g00", "kind": "pcie"}]})",
                                    "t.json");
  CHECK(t.num_nodes() == 10);
  CHECK(t.num_links() == 20);
  CHECK(t.node(9).name == "g09");
  CHECK(t.link(2).from == 1);
  CHECK(t.link(2).to == 2);
  NamePattern p;
  std::string error;
  REQUIRE(NamePattern::parse("n{i:03}.{i%2}.{i/2}-{i*3}-{i-1}", p, error));
  CHECK(p.expand(11) == "n011.1.5-33-10");
  CHECK_FALSE(NamePattern::parse("x}", p, error));
  CHECK_FALSE(NamePattern::parse("{i+1%2}", p, error));
  // A negative width is refused when read, not left for the formatting to throw on.
  CHECK_FALSE(NamePattern::parse("rack{i/4:-02}", p, error));
  CHECK(error.find("must be a number up to 18") != std::string::npos);
}

TEST_CASE("a document whose expansion is estimated above max_memory is refused before expanding") {
  // 16 million servers of a two-GPU template in a few hundred bytes: some 16 GiB expanded.
  const std::string templated = R"({"templates": {"box": {"nodes": [{"name": "g{i}", "count": 2,
      "kind": "gpu"}], "links": [{"from": "g0", "to": "g1", "kind": "nvlink"}]}},
      "servers": [{"name": "s{i}", "count": 16000000, "template": "box"}]})";
  LoadOptions options;
  options.max_memory = std::uint64_t{1} << 30;
  CHECK(has_error(errors_of(templated, options), "/servers/0/count",
                  {"3.2e+07 nodes", "3.2e+07 directed links", "limit of 1.0 GiB"}));
  // Racks and servers cost memory without a node: 16 million empty racks took the fuzzer's
  // time limit to build before they were counted.
  const std::string racks = R"({"racks": [{"name": "r{i}", "count": 16000000}],
      "nodes": [{"name": "g", "kind": "gpu"}]})";
  CHECK(has_error(errors_of(racks, options), "/racks/0/count",
                  {"1 node, 0 directed links and 1.6e+07 racks and servers",
                   "160 B per rack or server", "limit of 1.0 GiB"}));
  const std::string servers = R"({"servers": [{"name": "s{i}", "count": 16000000}],
      "nodes": [{"name": "g", "kind": "gpu"}]})";
  CHECK(has_error(errors_of(servers, options), "/servers/0/count",
                  {"1.6e+07 racks and servers", "limit of 1.0 GiB"}));
  // The estimate bounds the shipped 1024-GPU cluster (templates and a fabric) from above, and
  // by no more than a factor of 4.
  const std::string cluster = test::config_path("cluster-1024.json");
  const Topology t = load_topology(cluster);
  const std::uint64_t actual = t.num_nodes() * kBytesPerNode + t.num_links() * kBytesPerLink +
                               (t.racks().size() + t.servers().size()) * kBytesPerGroup;
  options.max_memory = actual - 1;
  CHECK_THROWS_WITH(load_topology(cluster, options), Catch::Contains("more than the memory limit"));
  options.max_memory = 4 * actual;
  CHECK_NOTHROW(load_topology(cluster, options));
  options.max_memory = 0;  // no limit
  CHECK_NOTHROW(load_topology(cluster, options));
}

TEST_CASE("a rack entry with an error is not expanded") {
  // Expanded, the first entry would make "r1" and the second would be a duplicate.
  const auto ds = errors_of(R"({"racks": [{"name": "r{i}", "count": 2, "kind": "gpu"},
      {"name": "r1"}], "nodes": [{"name": "g", "kind": "gpu"}]})");
  INFO(dump(ds));
  CHECK(has_error(ds, "/racks/0/kind", {"unknown key"}));
  CHECK(ds.size() == 1);
}
