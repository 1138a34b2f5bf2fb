// One rank per orbit of a rotation (sim/rotation.hpp) gives the run of every rank: the same
// completion time and the same bytes and busy time on every link, to 1e-9 relative, from
// p / s times fewer events; and a topology or plan that the rotation does not map onto itself
// is run rank by rank, with the reason.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <sstream>
#include <vector>

#include "schedules/generate.hpp"
#include "schedules/plan_json.hpp"
#include "sim/engine.hpp"
#include "sim/rotation.hpp"
#include "tests/common/clusters.hpp"
#include "tests/common/same_run.hpp"
#include "tests/common/sizes.hpp"
#include "topology/loader.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::sched;

namespace {

using test::MiB;

std::string read(const char* name) {
  return test::read_file(std::string(COLLSIM_SOURCE_DIR) + "/configs/" + name);
}

// configs/cluster-1024.json cut to `servers` servers in leaf groups of `per_leaf` servers
// (racks of 4), so that the ring crosses a leaf group every 8 * per_leaf ranks.
topo::Topology small_cluster(int servers = 16, int per_leaf = 4) {
  return test::scaled_cluster(servers, per_leaf);
}

topo::Topology config(const char* name) {
  return topo::parse_topology(read(name), name);
}

PlanRequest request(Algorithm a, Collective c, Bytes size, std::uint32_t k) {
  PlanRequest r;
  r.algorithm = a;
  r.collective = c;
  r.size = size;
  r.chunks = k;
  return r;
}

sim::Options symmetric() {
  sim::Options o;
  o.rank_symmetry = true;
  return o;
}

void require_close(double a, double b) {
  INFO(fmt::format("{:.17g} against {:.17g}", a, b));
  REQUIRE(std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b)));
}

// Runs `req` both ways; returns the rotation the symmetric run used.
RankId check_same_run(const topo::Router& router, const PlanRequest& req) {
  const sim::Result all = sim::simulate(router, req);
  const sim::Result one = sim::simulate(router, req, symmetric());
  INFO(fmt::format("{} {} on {}, {} bytes, k = {}: rotation {} ({})", to_string(req.algorithm),
                   to_string(req.collective), router.topology().name(), req.size, req.chunks,
                   one.rotation, one.symmetry_refused));
  REQUIRE(all.rotation == 0);
  require_close(one.time, all.time);
  REQUIRE(one.link_bytes.size() == all.link_bytes.size());
  for (std::size_t l = 0; l < all.link_bytes.size(); ++l) {
    INFO("link " << l);
    require_close(static_cast<double>(one.link_bytes[l]), static_cast<double>(all.link_bytes[l]));
    require_close(one.link_busy[l], all.link_busy[l]);
  }
  if (one.rotation != 0) {
    const RankId p = static_cast<RankId>(router.topology().gpus().size());
    CHECK(one.symmetry_refused.empty());
    // Every event of the full run has p / s images... up to events that orbits share.
    CHECK(one.events * (p / one.rotation) >= all.events);
    CHECK(one.events < all.events);
  } else {
    CHECK(!one.symmetry_refused.empty());
  }
  return one.rotation;
}

}  // namespace

TEST_CASE("one rank per leaf group gives the run of every rank on a rail-optimised cluster",
          "[symmetry]") {
  const topo::Topology t = small_cluster();
  topo::RoutingOptions shortest;
  shortest.ecmp = false;
  const topo::Router router(t, shortest);
  // A leaf group of 32 GPUs is the smallest rotation of the ring that keeps every route's
  // latency: rotating by a server would move a transfer inside a group onto one between groups.
  for (const Collective c :
       {Collective::allreduce, Collective::reduce_scatter, Collective::allgather})
    for (const std::uint32_t k : {1u, 3u})
      CHECK(check_same_run(router, request(Algorithm::ring, c, 3 * MiB, k)) == 32);
  for (const std::uint32_t k : {1u, 2u})
    CHECK(check_same_run(router, request(Algorithm::hier, Collective::allreduce, 4 * MiB, k)) ==
          32);
}

TEST_CASE("every rank sending to every other at once shares spines as the rotation says",
          "[symmetry]") {
  // Four servers under four leaves: the 32 ranks' 992 flows cross the spines together.
  const topo::Topology t = small_cluster(4, 1);
  topo::RoutingOptions shortest;
  const topo::Router router(t, shortest);
  CHECK(check_same_run(router, request(Algorithm::direct, Collective::alltoall, 2 * MiB, 1)) == 8);
}

TEST_CASE("the pairwise exchange rotates with its ranks, steps apart", "[symmetry]") {
  // At step s every rank sends to the rank s further on: 32 ranks of four servers under four
  // leaves, whose steps cross the spines in lockstep, and the DGX's single server.
  const topo::Topology t = small_cluster(4, 1);
  topo::RoutingOptions shortest;
  const topo::Router router(t, shortest);
  for (const Collective c :
       {Collective::reduce_scatter, Collective::allgather, Collective::alltoall})
    CHECK(check_same_run(router, request(Algorithm::pairwise, c, 2 * MiB, 2)) == 8);
  const topo::Topology dgx = config("dgx-h100.json");
  const topo::Router dgx_router(dgx);
  CHECK(check_same_run(dgx_router,
                       request(Algorithm::pairwise, Collective::alltoall, 16 * MiB, 4)) == 1);
}

TEST_CASE("the direct schedules' channels rotate with their ranks", "[symmetry]") {
  const topo::Topology t = config("dgx-h100.json");
  const topo::Router router(t);
  for (const Collective c : {Collective::allreduce, Collective::reduce_scatter,
                             Collective::allgather, Collective::alltoall})
    for (const std::uint32_t k : {1u, 4u})
      CHECK(check_same_run(router, request(Algorithm::direct, c, 16 * MiB, k)) == 1);
  // Segments of different sizes: rank r's reduce_scatter receives more than rank r + 1's.
  CHECK(rotation_unit(
            router, request(Algorithm::direct, Collective::reduce_scatter, 16 * MiB + 4, 1)) == 0);
  CHECK(rotation_unit(router, request(Algorithm::direct, Collective::broadcast, 16 * MiB, 1)) == 0);
}

TEST_CASE("one rank stands for all on a single NVSwitch, and shared memories count every image",
          "[symmetry]") {
  {
    const topo::Topology t = config("dgx-h100.json");
    const topo::Router router(t);
    CHECK(check_same_run(router, request(Algorithm::ring, Collective::allreduce, 8 * MiB, 4)) == 1);
  }
  {
    // Four ranks on one device: its memory is a fixed point of the rotation, crossed by the
    // reductions of all four.
    const topo::Topology t = config("one-gpu-4ranks.json");
    const topo::Router router(t);
    CHECK(check_same_run(router, request(Algorithm::ring, Collective::allreduce, 4 * MiB, 2)) == 1);
  }
  {
    // Two GPUs per PCIe switch: the switch's uplink carries both GPUs of its pair.
    const topo::Topology t = config("t4x4-pcie.json");
    const topo::Router router(t);
    PlanRequest req = request(Algorithm::ring, Collective::allreduce, 4 * MiB, 2);
    CHECK(check_same_run(router, req) == 2);
    req.host_memory = HostMemory::pageable;
    check_same_run(router, req);
  }
}

TEST_CASE("copies that may wait for a copy engine refuse the rotation", "[symmetry]") {
  // The T4 box's direct all-to-all in 11 chunks: copies on four streams of each GPU, three
  // engines, and a host memcpy that every GPU's pageable copies share, where a flow of one rank
  // per orbit weighs twice. One ulp between two copies' ready times decides which waits, and
  // one rank per orbit ended 0.2 % after the run of every rank until it was refused.
  const topo::Topology t = config("t4x4-pcie.json");
  const topo::Router router(t);
  PlanRequest req = request(Algorithm::direct, Collective::alltoall, 1114112, 11);
  req.host_memory = HostMemory::pageable;
  const sim::Result all = sim::simulate(router, req);
  const sim::Result one = sim::simulate(router, req, symmetric());
  CHECK(one.rotation == 0);
  CHECK(one.symmetry_refused.find("3 copy engines") != std::string::npos);
  CHECK(one.symmetry_refused.find("ECMP") == std::string::npos);  // routes have no part in it
  CHECK(test::same_double(one.time, all.time));
  // The ring's staging copies take fewer streams than engines: no copy waits, and one rank per
  // orbit still runs ("one rank stands for all on a single NVSwitch", above).
}

TEST_CASE("a rotation that does not map the run onto itself is refused, with the reason",
          "[symmetry]") {
  const topo::Topology t = small_cluster();
  SECTION("ECMP hashes every pair of ranks its own way") {
    topo::RoutingOptions ecmp;
    ecmp.ecmp = true;
    const topo::Router router(t, ecmp);
    CHECK(check_same_run(router, request(Algorithm::ring, Collective::allreduce, 2 * MiB, 1)) == 0);
  }
  SECTION("pieces of different sizes") {
    const topo::Router router(t);
    const PlanRequest req = request(Algorithm::ring, Collective::allreduce, 2 * MiB + 4, 1);
    CHECK(rotation_unit(router, req) == 0);
    const sim::Result r = sim::simulate(router, req, symmetric());
    CHECK(r.rotation == 0);
    CHECK(r.symmetry_refused.find("same size") != std::string::npos);
  }
  SECTION("algorithms without rotated plans") {
    const topo::Router router(t);
    CHECK(rotation_unit(router, request(Algorithm::tree, Collective::allreduce, 2 * MiB, 1)) == 0);
    CHECK(check_same_run(router, request(Algorithm::tree, Collective::allreduce, MiB, 1)) == 0);
  }
  SECTION("a heterogeneous rack") {
    const topo::Topology h = config("hetero-rack.json");
    const topo::Router router(h);
    CHECK(check_same_run(router, request(Algorithm::ring, Collective::allreduce, 6 * MiB, 1)) == 0);
  }
  SECTION("one GPU whose bf16 reductions cost more than its peers'") {
    topo::Topology slow = t;
    slow.node(slow.gpus()[3]).reduce_traffic[2] = 4.5;
    const topo::Router router(slow);
    PlanRequest req = request(Algorithm::ring, Collective::allreduce, 2 * MiB, 1);
    req.dtype = DType::bf16;
    const sim::Result r = sim::simulate(router, req, symmetric());
    CHECK(r.rotation == 0);
    CHECK(r.symmetry_refused.find("reduce traffic") != std::string::npos);
  }
  SECTION("one CPU whose pageable staging costs more than its peers'") {
    // Four servers of one GPU each, whose network transfers are staged through their host
    // memory: with pageable buffers every staging copy crosses its CPU's memcpy.
    const topo::Topology staged = topo::parse_topology(R"({"name": "staged-4",
      "servers": [{"name": "s{i}", "count": 4, "gpudirect_rdma": false}],
      "nodes": [{"name": "g{i}", "count": 4, "kind": "gpu", "server": "s{i}"},
        {"name": "c{i}", "count": 4, "kind": "cpu", "server": "s{i}", "memcpy_bandwidth": "8GB/s"},
        {"name": "n{i}", "count": 4, "kind": "nic", "server": "s{i}"},
        {"name": "sw", "kind": "switch"}],
      "links": [{"from": "g{i}", "to": "c{i}", "count": 4, "kind": "pcie", "bandwidth": "16GB/s"},
        {"from": "c{i}", "to": "n{i}", "count": 4, "kind": "pcie", "bandwidth": "16GB/s"},
        {"from": "n{i}", "to": "sw", "count": 4, "kind": "network", "bandwidth": "100Gb/s"}]})",
                                                       "staged-4.json");
    PlanRequest req = request(Algorithm::ring, Collective::allreduce, 2 * MiB, 2);
    req.host_memory = HostMemory::pageable;
    CHECK(check_same_run(topo::Router(staged), req) == 1);
    topo::Topology slow = staged;
    slow.node(slow.find("c2")).pageable_traffic = {1.5, 1};
    const topo::Router router(slow);
    const sim::Result r = sim::simulate(router, req, symmetric());
    CHECK(r.rotation == 0);
    CHECK(r.symmetry_refused.find("pageable traffic") != std::string::npos);
    CHECK(test::same_double(r.time, sim::simulate(router, req).time));
  }
  SECTION("a rotated plan run on a topology it does not fit") {
    const topo::Router router(t);  // ECMP off, but rotating by one server crosses leaf groups
    PlanRequest req = request(Algorithm::ring, Collective::allreduce, 2 * MiB, 1);
    req.rotation = 8;
    const Plan plan = generate(router, req);
    REQUIRE_THROWS_AS(sim::simulate(router, plan), sim::NotSymmetric);
  }
}

TEST_CASE("a rotated plan holds its representatives' ops only and is not written out",
          "[symmetry]") {
  const topo::Topology t = small_cluster();
  const topo::Router router(t);
  PlanRequest req = request(Algorithm::ring, Collective::allreduce, 2 * MiB, 2);
  const Plan all = generate(router, req);
  req.rotation = 32;
  const Plan one = generate(router, req);
  CHECK(one.rotation == 32);
  CHECK(one.num_ranks() == all.num_ranks());
  CHECK(one.num_ops() * 4 == all.num_ops());
  for (OpId op = 0; op < one.num_ops(); ++op) REQUIRE(one.rank(op) < 32);
  std::ostringstream out;
  CHECK_THROWS_AS(write_plan(out, one, &t), InputError);
  // A rotation the plan itself does not have is a caller's error.
  req.rotation = 5;
  CHECK_THROWS_AS(generate(router, req), InternalError);
}

TEST_CASE("a rotated plan's op limit counts the ranks it holds", "[symmetry]") {
  // 30,000 ranks in a ring: 9e9 ops in all, beyond what a plan addresses; 300 of them hold 1 %.
  PlanRequest req = request(Algorithm::ring, Collective::allreduce, Bytes{30000} * 4, 1);
  CHECK(why_not(req, 30000).find("2^32") != std::string::npos);
  req.rotation = 300;
  CHECK(why_not(req, 30000).empty());
}

TEST_CASE("a symmetric run names the ranks of each try before it runs, and a refusal stops it",
          "[symmetry]") {
  // The command line checks its memory limit here (Options::before_run), against the ranks the
  // try will hold instead of every rank.
  const topo::Topology t = small_cluster();
  const PlanRequest req = request(Algorithm::ring, Collective::allreduce, 2 * MiB, 1);
  std::vector<RankId> tries;
  sim::Options o = symmetric();
  o.before_run = [&](RankId held) { tries.push_back(held); };
  const auto run = [&](bool ecmp) {
    topo::RoutingOptions routing;
    routing.ecmp = ecmp;
    const topo::Router router(t, routing);
    return sim::simulate(router, req, o);
  };
  SECTION("the rotations are tried from the smallest until one fits") {
    CHECK(run(false).rotation == 32);
    // Rotations within a leaf group move transfers between groups: refused after their first
    // routes, before the hook is asked again.
    CHECK(tries == std::vector<RankId>{1, 2, 4, 8, 16, 32});
  }
  SECTION("ECMP refuses every rotation: the run of every rank is named last") {
    CHECK(run(true).rotation == 0);
    REQUIRE(tries.size() >= 2);
    CHECK(tries.back() == 128);
    CHECK(std::is_sorted(tries.begin(), tries.end()));
  }
  SECTION("a throw from the hook stops the run") {
    o.before_run = [](RankId held) {
      if (held > 16) throw InputError("", "--max-memory", "too large");
    };
    CHECK_THROWS_AS(run(false), InputError);
  }
}
