// Routing by cells must give exactly the routes of the whole-graph search: same links, same
// latency to the bit, same ECMP choices, same unreachable pairs.
#include <catch2/catch.hpp>
#include <random>

#include "tests/common/clusters.hpp"
#include "topology/loader.hpp"
#include "topology/routing.hpp"
#include "topology_test_util.hpp"

using namespace collsim;
using namespace collsim::topo;
using test::config_path;

namespace {

struct Outcome {
  std::vector<LinkId> links;
  double latency = 0, bandwidth = 0;
  PathClass path_class = PathClass::loc;
  std::string error;
  bool operator==(const Outcome&) const = default;
};

Outcome outcome(const Router& router, NodeId from, NodeId to, std::uint64_t key) {
  Outcome o;
  try {
    const Route r = router.compute(from, to, key);
    o.links = r.links;
    o.latency = r.latency;
    o.bandwidth = r.bandwidth;
    o.path_class = r.path_class;
  } catch (const InputError& e) {
    o.error = e.what();
  }
  return o;
}

std::string describe(const Topology& t, const Outcome& o) {
  if (!o.error.empty()) return o.error;
  std::string s;
  for (LinkId id : o.links) s += t.node(t.link(id).from).name + " -> ";
  return s + (o.links.empty() ? "(empty)" : t.node(t.link(o.links.back()).to).name);
}

// Compares the two methods on every ordered pair of `nodes`, with and without ECMP; returns
// the number of pairs that differ (each reported).
// `table_memory` 0 keeps no table: every route is then computed from scratch.
std::size_t mismatches(const Topology& t, const std::vector<NodeId>& nodes,
                       const std::vector<std::uint64_t>& keys,
                       std::size_t table_memory = std::size_t{1} << 30) {
  std::size_t bad = 0;
  for (bool ecmp : {false, true}) {
    const Router search(t, RoutingOptions{.ecmp = ecmp, .method = RoutingMethod::search});
    const Router cells(
        t,
        RoutingOptions{.ecmp = ecmp, .method = RoutingMethod::cells, .table_memory = table_memory});
    for (NodeId a : nodes)
      for (NodeId b : nodes)
        for (std::uint64_t key : keys) {
          const Outcome want = outcome(search, a, b, key), got = outcome(cells, a, b, key);
          if (want == got) continue;
          if (++bad <= 5)
            UNSCOPED_INFO(t.node(a).name << " -> " << t.node(b).name << " key " << key
                                         << (ecmp ? " ecmp" : "") << ": search "
                                         << describe(t, want) << "; cells " << describe(t, got));
          if (!ecmp) break;
        }
  }
  return bad;
}

std::vector<NodeId> all_nodes(const Topology& t) {
  std::vector<NodeId> v(t.num_nodes());
  for (NodeId i = 0; i < t.num_nodes(); ++i) v[i] = i;
  return v;
}

// Appending piece by piece: GCC 12 warns (-Wrestrict) on chained std::string operator+.
std::string numbered(std::string prefix, int i, const char* more = "", int j = -1) {
  prefix += std::to_string(i);
  prefix += more;
  if (j >= 0) prefix += std::to_string(j);
  return prefix;
}

// A random fabric of small servers and a few switches, with latencies drawn from a few values
// so that equal-cost paths abound, some links one-way, and paths through servers that are
// sometimes the shortest way between two switches.
Topology random_fabric(std::uint32_t seed) {
  std::mt19937 rng(seed);
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const double latencies[] = {100e-9, 150e-9, 200e-9, 300e-9, 0};
  Topology t;
  const auto link = [&](NodeId a, NodeId b) {
    const double lat = latencies[pick(0, 4)];
    const double bw = 1e9 * pick(1, 4);
    const auto index = static_cast<std::uint32_t>(t.num_links());
    t.add_link(Link{a, b, LinkKind::pcie, bw, lat, index});
    if (pick(0, 5) != 0) t.add_link(Link{b, a, LinkKind::pcie, bw, lat, index});
  };
  const int servers = pick(2, 6), switches = pick(1, 5);
  std::vector<std::vector<NodeId>> members(servers);
  std::vector<NodeId> core;
  for (int s = 0; s < servers; ++s) {
    t.add_server(Server{numbered("s", s), kNone, true, true});
    const int n = pick(1, 5);
    for (int i = 0; i < n; ++i) {
      Node node;
      node.name = numbered("s", s, "n", i);
      node.kind = i == 0 ? NodeKind::gpu : (pick(0, 1) ? NodeKind::nic : NodeKind::gpu);
      node.server = s;
      members[s].push_back(t.add_node(std::move(node)));
    }
  }
  for (int c = 0; c < switches; ++c) {
    Node node;
    node.name = numbered("sw", c);
    node.kind = NodeKind::network_switch;
    core.push_back(t.add_node(std::move(node)));
  }
  for (int s = 0; s < servers; ++s) {
    const auto& m = members[s];
    for (std::size_t i = 0; i + 1 < m.size(); ++i) link(m[i], m[i + 1]);
    for (int extra = pick(0, 3); extra > 0; --extra) {
      const NodeId a = m[pick(0, static_cast<int>(m.size()) - 1)];
      const NodeId b = m[pick(0, static_cast<int>(m.size()) - 1)];
      if (a != b) link(a, b);
    }
    for (int up = pick(1, 3); up > 0; --up)
      link(m[pick(0, static_cast<int>(m.size()) - 1)], core[pick(0, switches - 1)]);
  }
  // Now and then a link straight between two servers, which puts them in one cell.
  for (int joins = pick(-3, 2); joins > 0; --joins) {
    const auto& a = members[pick(0, servers - 1)];
    const auto& b = members[pick(0, servers - 1)];
    link(a[pick(0, static_cast<int>(a.size()) - 1)], b[pick(0, static_cast<int>(b.size()) - 1)]);
  }
  for (int extra = pick(0, 2 * switches); extra > 0; --extra) {
    const NodeId a = core[pick(0, switches - 1)], b = core[pick(0, switches - 1)];
    if (a != b) link(a, b);
  }
  finalize(t);
  return t;
}

}  // namespace

TEST_CASE("routing by cells equals the whole-graph search on random fabrics") {
  std::size_t pairs = 0;
  for (std::uint32_t seed = 1; seed <= 300; ++seed) {
    const Topology t = random_fabric(seed);
    INFO("seed " << seed);
    REQUIRE(mismatches(t, all_nodes(t), {0, 1, 2, 77}) == 0);
    if (seed % 10 == 0) REQUIRE(mismatches(t, all_nodes(t), {0, 3}, 0) == 0);
    pairs += t.num_nodes() * t.num_nodes();
  }
  CHECK(pairs > 20000);
}

TEST_CASE("cells with the same links inside but different nodes are not alike") {
  // Two servers with the same two linked GPUs; the first has a NIC more, which only the switch
  // reaches. Their insides must not share one table of distances (the NIC shifts the rows).
  Topology t;
  const auto node = [&](const char* name, NodeKind kind, std::int32_t server) {
    Node n;
    n.name = name;
    n.kind = kind;
    n.server = server;
    return t.add_node(std::move(n));
  };
  const auto duplex = [&](NodeId a, NodeId b, double latency) {
    const auto index = static_cast<std::uint32_t>(t.num_links());
    t.add_link(Link{a, b, LinkKind::pcie, 1e9, latency, index});
    t.add_link(Link{b, a, LinkKind::pcie, 1e9, latency, index});
  };
  for (int s = 0; s < 2; ++s) t.add_server(Server{numbered("s", s), kNone, true, true});
  const NodeId a0 = node("a0", NodeKind::gpu, 0), a1 = node("a1", NodeKind::gpu, 0);
  const NodeId nic = node("a2", NodeKind::nic, 0);
  const NodeId b0 = node("b0", NodeKind::gpu, 1), b1 = node("b1", NodeKind::gpu, 1);
  const NodeId sw = node("sw", NodeKind::network_switch, kNone);
  duplex(a0, a1, 100e-9);
  duplex(b0, b1, 100e-9);
  duplex(a1, sw, 200e-9);
  duplex(nic, sw, 200e-9);
  duplex(b1, sw, 200e-9);
  finalize(t);
  CHECK(mismatches(t, all_nodes(t), {0, 1}) == 0);
}

TEST_CASE("routing by cells equals the whole-graph search on shipped fabrics") {
  const Topology rack = load_topology(config_path("hetero-rack.json"));
  CHECK(mismatches(rack, all_nodes(rack), {0, 5}) == 0);

  // cluster-1024 cut to 16 servers in 4 leaf groups: every node, every pair.
  const Topology small = test::scaled_cluster(16, 4);
  REQUIRE(small.servers().size() == 16);
  CHECK(mismatches(small, all_nodes(small), {0, 3}) == 0);
  // With room for a few tables only: the rest are rebuilt for each route.
  CHECK(mismatches(small, all_nodes(small), {0}, 3 * small.num_nodes() * 16) == 0);

  // The full 1024 GPUs: all GPUs and NICs of three servers in different groups, to everything.
  const Topology big = load_topology(config_path("cluster-1024.json"));
  std::vector<NodeId> some;
  for (NodeId n = 0; n < big.num_nodes(); ++n) {
    const std::int32_t s = big.node(n).server;
    if (s == 0 || s == 37 || s == 127 || s == kNone) some.push_back(n);
  }
  CHECK(mismatches(big, some, {0, 9}) == 0);
}

TEST_CASE("servers joined by a link form one cell") {
  // Two servers joined by a direct link, each with a port to one switch: the direct link is
  // shorter than the way through the switch, and both methods must see it.
  Topology t;
  t.add_server(Server{"a", kNone, true, true});
  t.add_server(Server{"b", kNone, true, true});
  t.add_server(Server{"c", kNone, true, true});
  const auto node = [&](const char* name, std::int32_t server, NodeKind kind) {
    Node n;
    n.name = name;
    n.server = server;
    n.kind = kind;
    return t.add_node(std::move(n));
  };
  const NodeId x = node("x", 0, NodeKind::gpu), y = node("y", 1, NodeKind::gpu);
  const NodeId z = node("z", 2, NodeKind::gpu), sw = node("sw", kNone, NodeKind::network_switch);
  const auto duplex = [&](NodeId a, NodeId b, double latency) {
    const auto index = static_cast<std::uint32_t>(t.num_links());
    t.add_link(Link{a, b, LinkKind::nvlink, 1e9, latency, index});
    t.add_link(Link{b, a, LinkKind::nvlink, 1e9, latency, index});
  };
  duplex(x, y, 100e-9);
  duplex(x, sw, 100e-9);
  duplex(y, sw, 100e-9);
  duplex(z, sw, 100e-9);
  finalize(t);
  const Router cells(t, RoutingOptions{.method = RoutingMethod::cells});
  CHECK(cells.route(x, y).links.size() == 1);
  CHECK(cells.route(z, y).links.size() == 2);
  CHECK(mismatches(t, all_nodes(t), {0, 1}) == 0);
}

TEST_CASE("routing by cells packs long distances exactly, and leaves those too long to search") {
  // The core tables pack a distance in one word (picoseconds above hops). Latencies of seconds
  // use most of its bits and must still give the search's routes; latencies of hours do not fit,
  // and then the automatic method searches the whole graph instead while routing by cells is
  // refused with the reason.
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    Topology t = random_fabric(seed);
    for (LinkId id = 0; id < t.num_links(); ++id) t.link(id).latency *= 2e7;  // 100 ns -> 2 s
    INFO("seed " << seed);
    REQUIRE(mismatches(t, all_nodes(t), {0, 1}) == 0);
  }
  Topology t = random_fabric(7);
  for (LinkId id = 0; id < t.num_links(); ++id) t.link(id).latency *= 1.5e11;  // 100 ns -> 4 h
  CHECK_THROWS_WITH(Router(t, RoutingOptions{.method = RoutingMethod::cells}),
                    Catch::Contains("more than 63 bits"));
  const Router automatic(t), search(t, RoutingOptions{.method = RoutingMethod::search});
  for (NodeId a = 0; a < t.num_nodes(); ++a)
    for (NodeId b = 0; b < t.num_nodes(); ++b)
      CHECK(outcome(automatic, a, b, 0) == outcome(search, a, b, 0));
}

TEST_CASE(
    "routing by cells agrees with the search where twin switches sit at different distances") {
  // Switches a and b have the same links in, from 16 leaf switches at the same latency (twins:
  // a table's search relaxes the links into only the first of them it settles), but only one-way
  // links out to the switch t, of different latencies, so that every table towards t reaches
  // them at different distances, and towards a leaf through either.
  Topology t;
  const auto sw = [&](const std::string& name) {
    Node n;
    n.name = name;
    n.kind = NodeKind::network_switch;
    return t.add_node(std::move(n));
  };
  const auto one_way = [&](NodeId a, NodeId b, double latency) {
    const auto index = static_cast<std::uint32_t>(t.num_links());
    t.add_link(Link{a, b, LinkKind::network, 1e9, latency, index});
  };
  const NodeId a = sw("a"), b = sw("b"), target = sw("t");
  one_way(a, target, 100e-9);
  one_way(b, target, 500e-9);
  for (int i = 0; i < 16; ++i) {
    const NodeId leaf = sw(numbered("leaf", i));
    one_way(leaf, a, 300e-9);
    one_way(leaf, b, 300e-9);
    one_way(a, leaf, 200e-9 + 10e-9 * i);
    one_way(b, leaf, 250e-9);
    t.add_server(Server{numbered("s", i), kNone, true, true});
    Node gpu;
    gpu.name = numbered("s", i, "gpu");
    gpu.kind = NodeKind::gpu;
    gpu.server = i;
    const NodeId g = t.add_node(std::move(gpu));
    one_way(g, leaf, 150e-9);
    one_way(leaf, g, 150e-9);
  }
  finalize(t);
  CHECK(mismatches(t, all_nodes(t), {0, 1, 5}) == 0);
}
