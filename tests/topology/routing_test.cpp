#include "topology/routing.hpp"

#include <catch2/catch.hpp>
#include <set>
#include <thread>

#include "topology/loader.hpp"
#include "topology_test_util.hpp"

using namespace collsim;
using namespace collsim::topo;
using test::config_path;

namespace {

std::vector<std::string> hops(const Topology& t, const Route& r) {
  std::vector<std::string> names;
  if (r.links.empty()) return names;
  names.push_back(t.node(t.link(r.links.front()).from).name);
  for (LinkId id : r.links) names.push_back(t.node(t.link(id).to).name);
  return names;
}

using Names = std::vector<std::string>;

}  // namespace

TEST_CASE("dgx-h100: NVLink between GPUs, PCIe to the local NIC, SYS across CPUs") {
  const Topology t = load_topology(config_path("dgx-h100.json"));
  const Router router(t);
  const auto id = [&](const char* n) { return t.find(n); };

  // 100 ns per NVLink hop: gpu0 -> nvswitch -> gpu1 = 200 ns, 450 GB/s; the PCIe way through
  // their shared switch costs 2 x 150 ns = 300 ns and loses.
  const Route& nvl = router.route(id("gpu0"), id("gpu1"));
  CHECK(hops(t, nvl) == Names{"gpu0", "nvswitch", "gpu1"});
  CHECK(nvl.path_class == PathClass::nvl);
  CHECK(nvl.latency == Approx(200e-9).epsilon(1e-12));
  CHECK(nvl.bandwidth == 450e9);

  const Route& pix = router.route(id("gpu0"), id("nic0"));
  CHECK(hops(t, pix) == Names{"gpu0", "pcie0", "nic0"});
  CHECK(pix.path_class == PathClass::pix);
  CHECK(pix.bandwidth == 63e9);

  // To nic2 (under pcie1): through cpu0 costs 4 x 150 = 600 ns; over NVLink to gpu2 and down
  // its switch costs 100 + 100 + 150 + 150 = 500 ns, so the route transits gpu2.
  const Route& pxn = router.route(id("gpu0"), id("nic2"));
  CHECK(hops(t, pxn) == Names{"gpu0", "nvswitch", "gpu2", "pcie1", "nic2"});
  CHECK(pxn.latency == Approx(500e-9).epsilon(1e-12));
  CHECK(pxn.path_class == PathClass::pix);

  // nic0 -> nic7: via both CPUs 150+150+200+150+150 = 800 ns in 5 hops; via gpu0, the NVSwitch
  // and gpu6 also 800 ns but in 6 hops. Equal latency, fewer hops wins.
  const Route& sys = router.route(id("nic0"), id("nic7"));
  CHECK(hops(t, sys) == Names{"nic0", "pcie0", "cpu0", "cpu1", "pcie3", "nic7"});
  CHECK(sys.path_class == PathClass::sys);

  CHECK(router.route(id("gpu3"), id("gpu3")).links.empty());
  CHECK(router.route(id("gpu3"), id("gpu3")).path_class == PathClass::loc);
  // Host CPU: gpu0 -> pcie0 -> cpu0 is 300 ns; gpu7 -> pcie3 -> cpu1 likewise.
  CHECK(t.host_cpu(id("gpu0")) == id("cpu0"));
  CHECK(t.host_cpu(id("gpu7")) == id("cpu1"));
}

TEST_CASE("t4x4-pcie: PIX under one switch, PHB through the CPU") {
  const Topology t = load_topology(config_path("t4x4-pcie.json"));
  const Router router(t);
  const Route& pix = router.route(t.gpus()[0], t.gpus()[1]);
  CHECK(hops(t, pix) == Names{"gpu0", "pcie0", "gpu1"});
  CHECK(pix.path_class == PathClass::pix);
  CHECK(pix.bandwidth == 15.75e9);
  const Route& phb = router.route(t.gpus()[0], t.gpus()[3]);
  CHECK(hops(t, phb) == Names{"gpu0", "pcie0", "cpu0", "pcie1", "gpu3"});
  CHECK(phb.path_class == PathClass::phb);
  CHECK(phb.latency == Approx(600e-9).epsilon(1e-12));  // 4 x 150 ns
  CHECK_FALSE(t.servers()[0].p2p);
  for (NodeId g : t.gpus()) CHECK(t.host_cpu(g) == t.find("cpu0"));
}

TEST_CASE("cluster-1024: rails, leaves and spines") {
  const Topology t = load_topology(config_path("cluster-1024.json"));
  REQUIRE(t.gpus().size() == 1024);
  CHECK(t.servers().size() == 128);
  CHECK(t.racks().size() == 32);
  const Router router(t);
  const auto id = [&](const char* n) { return t.find(n); };

  // Same group of 32 servers, same rail: NIC, leaf, NIC.
  // 150 + 150 + 600 + 600 + 150 + 150 ns = 1.8 us; 400 Gb/s = 50 GB/s is the bottleneck.
  const Route& same_leaf = router.route(id("dgx000/gpu0"), id("dgx001/gpu0"));
  CHECK(hops(t, same_leaf) == Names{"dgx000/gpu0", "dgx000/pcie0", "dgx000/nic0", "ib/rail0/leaf0",
                                    "dgx001/nic0", "dgx001/pcie0", "dgx001/gpu0"});
  CHECK(same_leaf.path_class == PathClass::net);
  CHECK(same_leaf.latency == Approx(1.8e-6).epsilon(1e-12));
  CHECK(same_leaf.bandwidth == 50e9);

  // Server 100 is in group 100 / 32 = 3: up to the first spine by name and down again, 2.4 us.
  // Uplinks carry 32 x 50 GB/s / (1 x 16 spines) = 100 GB/s each.
  const Route& spine = router.route(id("dgx000/gpu0"), id("dgx100/gpu0"));
  CHECK(hops(t, spine) == Names{"dgx000/gpu0", "dgx000/pcie0", "dgx000/nic0", "ib/rail0/leaf0",
                                "ib/spine00", "ib/rail0/leaf3", "dgx100/nic0", "dgx100/pcie0",
                                "dgx100/gpu0"});
  CHECK(spine.latency == Approx(2.4e-6).epsilon(1e-12));
  CHECK(t.link(spine.links[3]).bandwidth == 100e9);

  CHECK(router.route(id("dgx005/gpu0"), id("dgx005/gpu7")).path_class == PathClass::nvl);
  CHECK(t.node(id("dgx005/gpu0")).rack == 1);  // rack{i/4}: server 5 is in rack01
}

TEST_CASE("hetero-rack: NVLink clique, PCIe-only servers and the top-of-rack switch") {
  const Topology t = load_topology(config_path("hetero-rack.json"));
  const Router router(t);
  const auto id = [&](const char* n) { return t.find(n); };
  const Route& clique = router.route(id("hgx0/gpu0"), id("hgx0/gpu3"));
  CHECK(clique.links.size() == 1);  // directly joined
  CHECK(clique.path_class == PathClass::nvl);
  CHECK(clique.bandwidth == 100e9);
  CHECK(router.route(id("a10box0/gpu0"), id("a10box0/gpu1")).path_class == PathClass::pix);
  const Route& net = router.route(id("hgx0/gpu0"), id("a10box1/gpu3"));
  CHECK(net.path_class == PathClass::net);
  CHECK(net.bandwidth == 25e9);  // 200 Gb/s NICs
  CHECK(net.latency == Approx(1.8e-6).epsilon(1e-12));
  CHECK(t.host_cpu(id("hgx1/gpu2")) == id("hgx1/cpu0"));
  CHECK(t.servers()[0].p2p);
  CHECK_FALSE(t.servers()[2].p2p);
}

TEST_CASE("one-gpu-4ranks: ranks meet on the synthetic switch") {
  const Topology t = load_topology(config_path("one-gpu-4ranks.json"));
  const Router router(t);
  REQUIRE(t.gpus().size() == 4);
  for (NodeId a : t.gpus())
    for (NodeId b : t.gpus()) {
      if (a == b) continue;
      const Route& r = router.route(a, b);
      CHECK(r.links.size() == 2);
      CHECK(r.latency == Approx(4e-6).epsilon(1e-12));  // 2 x 2 us
      CHECK(r.bandwidth == 25e9);
    }
  CHECK(t.node(t.gpus()[0]).model == t.node(t.gpus()[3]).model);
}

TEST_CASE("ECMP: deterministic per flow key, spread over equal-cost paths") {
  const Topology t = load_topology(config_path("cluster-1024.json"));
  RoutingOptions options;
  options.ecmp = true;
  const Router a(t, options), b(t, options);
  const NodeId from = t.find("dgx000/gpu0"), to = t.find("dgx100/gpu0");
  std::set<std::vector<LinkId>> seen;
  for (std::uint64_t key = 0; key < 64; ++key) {
    const Route& r = a.route(from, to, key);
    CHECK(&r == &a.route(from, to, key));               // cached: the same object
    CHECK(r.links == b.route(from, to, key).links);     // another router agrees
    CHECK(r.latency == Approx(2.4e-6).epsilon(1e-12));  // every choice is equal-cost
    seen.insert(r.links);
  }
  // 16 spines to choose from; 64 keys must not all hash to one.
  CHECK(seen.size() > 1);
  // Without ECMP the flow key is ignored.
  const Router plain(t);
  CHECK(plain.route(from, to, 7).links == plain.route(from, to).links);
  CHECK(&plain.route(from, to, 7) == &plain.route(from, to));
}

TEST_CASE("ECMP: a pair with one shortest path keeps it for every key, the others still spread") {
  // Such a pair is routed once and then answered from the plain cache for every key; a pair
  // with a choice is not, even after its plain route was asked for.
  const Topology t = load_topology(config_path("cluster-1024.json"));
  const auto method = GENERATE(RoutingMethod::search, RoutingMethod::cells);
  const Router router(t, RoutingOptions{.ecmp = true, .method = method});
  const Router reference(t, RoutingOptions{.ecmp = true, .method = RoutingMethod::search});
  const NodeId gpu0 = t.find("dgx000/gpu0"), gpu1 = t.find("dgx000/gpu1");
  const NodeId far = t.find("dgx100/gpu0");
  for (std::uint64_t key = 0; key < 16; ++key) {
    CHECK(&router.route(gpu0, gpu1, key) == &router.route(gpu0, gpu1));
    CHECK(router.route(gpu1, gpu0, key).links == reference.compute(gpu1, gpu0, key).links);
  }
  // Without a key: the deterministic shortest path, as without ECMP.
  CHECK(router.route(gpu0, far).links ==
        Router(t, RoutingOptions{.method = method}).compute(gpu0, far).links);
  std::set<std::vector<LinkId>> seen;
  for (std::uint64_t key = 0; key < 64; ++key) {
    const Route& r = router.route(gpu0, far, key);
    CHECK(r.links == reference.compute(gpu0, far, key).links);
    seen.insert(r.links);
  }
  CHECK(seen.size() > 1);
}

TEST_CASE("routes from many threads equal the single-threaded ones") {
  const Topology t = load_topology(config_path("hetero-rack.json"));
  const Router reference(t, RoutingOptions{.method = RoutingMethod::search});
  std::vector<std::vector<LinkId>> expected;
  for (NodeId a : t.gpus())
    for (NodeId b : t.gpus()) expected.push_back(reference.compute(a, b).links);
  const auto method = GENERATE(RoutingMethod::search, RoutingMethod::cells);
  const Router shared(t, RoutingOptions{.method = method});
  std::vector<int> mismatches(8, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < 8; ++k)
    threads.emplace_back([&, k] {
      for (int round = 0; round < 20; ++round) {
        std::size_t i = 0;
        for (NodeId a : t.gpus())
          for (NodeId b : t.gpus())
            if (shared.route(a, b).links != expected[i++])
              ++mismatches[static_cast<std::size_t>(k)];
      }
    });
  for (auto& th : threads) th.join();
  for (int m : mismatches) CHECK(m == 0);
}

TEST_CASE("a uniform full mesh of 1024 GPUs routes ring neighbours directly") {
  Topology t;
  constexpr NodeId kGpus = 1024;
  for (NodeId i = 0; i < kGpus; ++i) {
    Node n;
    n.name = "g";
    n.name += std::to_string(i);
    t.add_node(std::move(n));
  }
  for (NodeId i = 0; i < kGpus; ++i)
    for (NodeId j = 0; j < kGpus; ++j)
      if (i != j) t.add_link(Link{i, j, LinkKind::nvlink, 10e9, 1e-6, i * kGpus + j});
  finalize(t);
  const Router router(t);
  for (NodeId i = 0; i < kGpus; ++i) {
    const Route& r = router.route(i, (i + 1) % kGpus);
    REQUIRE(r.links.size() == 1);  // one direct link of 1 us beats any two-hop path of 2 us
    CHECK(t.link(r.links[0]).to == (i + 1) % kGpus);
  }
}

TEST_CASE("all-pairs routes over 1024 GPUs, and unreachable pairs") {
  const Topology t = load_topology(config_path("cluster-1024.json"));
  const Router router(t);
  std::size_t net = 0;
  for (NodeId a : t.gpus())
    for (NodeId b : t.gpus())
      if (a != b && router.compute(a, b).path_class == PathClass::net) ++net;
  // 1024 x 1023 ordered pairs, minus 128 servers x 8 x 7 NVLink pairs inside a server.
  CHECK(net == 1024u * 1023u - 128u * 56u);

  Topology one_way;
  Node a, b;
  a.name = "a";
  b.name = "b";
  one_way.add_node(a);
  one_way.add_node(b);
  one_way.add_link(Link{0, 1, LinkKind::pcie, 1e9, 0, 0});
  finalize(one_way);
  const Router r(one_way);
  CHECK(r.route(0, 1).links.size() == 1);
  CHECK_THROWS_WITH(r.route(1, 0), Catch::Contains("no route from 'b' to 'a'"));
}

TEST_CASE("path classes follow NCCL's definitions") {
  // gpu - sw0 - sw1 - gpu: two PCIe switches without a CPU is PXB.
  const Topology t =
      parse_topology(R"({"nodes": [{"name": "a", "kind": "gpu"}, {"name": "b", "kind": "gpu"},
      {"name": "s0", "kind": "pcie_switch"}, {"name": "s1", "kind": "pcie_switch"}],
    "links": [{"from": "a", "to": "s0", "kind": "pcie"}, {"from": "s0", "to": "s1", "kind": "pcie"},
              {"from": "s1", "to": "b", "kind": "pcie"}]})",
                     "t.json");
  const Router router(t);
  CHECK(router.route(t.find("a"), t.find("b")).path_class == PathClass::pxb);
  CHECK(to_string(PathClass::pxb) == "PXB");
}
