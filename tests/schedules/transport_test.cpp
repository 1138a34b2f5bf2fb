// Transport follows the topology: peer-to-peer inside a server when allowed, GPUDirect RDMA
// across servers when both ends allow it, otherwise host staging with explicit copies.
#include <catch2/catch.hpp>

#include "schedules/generate.hpp"
#include "schedules/verify.hpp"
#include "tests/schedules/fixtures.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::sched;

namespace {

struct Counts {
  std::size_t sends = 0, d2h = 0, h2d = 0, host_sends = 0;
};

Counts count(const Plan& plan) {
  Counts c;
  for (OpId id = 0; id < plan.num_ops(); ++id) {
    if (plan.kind(id) == OpKind::send) {
      ++c.sends;
      if (plan.src(id).buffer == BufferId::host) ++c.host_sends;
    }
    if (plan.kind(id) == OpKind::copy) {
      const CopyKind k = copy_kind(plan.src(id).buffer, plan.dst(id).buffer);
      c.d2h += k == CopyKind::d2h;
      c.h2d += k == CopyKind::h2d;
    }
  }
  return c;
}

// Two servers of two GPUs, each GPU on a PCIe link to its server's CPU.
topo::Topology two_servers(bool p2p, bool gdr) {
  topo::Topology t = test::server_gpus(2, 2, {}, p2p, gdr);
  for (std::uint32_t s = 0; s < 2; ++s) {
    topo::Node cpu;
    cpu.name = std::string("cpu").append(std::to_string(s));
    cpu.kind = topo::NodeKind::cpu;
    cpu.server = static_cast<std::int32_t>(s);
    const auto c = t.add_node(cpu);
    for (topo::NodeId g = 2 * s; g < 2 * s + 2; ++g) {
      t.add_link({g, c, topo::LinkKind::pcie, 16e9, 1e-6, 0});
      t.add_link({c, g, topo::LinkKind::pcie, 16e9, 1e-6, 0});
    }
  }
  t.add_link({4, 5, topo::LinkKind::network, 25e9, 2e-6, 0});
  t.add_link({5, 4, topo::LinkKind::network, 25e9, 2e-6, 0});
  topo::finalize(t);
  return t;
}

Plan ring_allreduce(const topo::Topology& t) {
  topo::Router router(t);
  PlanRequest r;
  r.chunks = 2;
  r.size = 4 * 2 * 4 * 8;
  return generate(router, r);
}

}  // namespace

TEST_CASE("peer-to-peer and GPUDirect need no copies", "[transport]") {
  const topo::Topology t = two_servers(true, true);
  const Plan plan = ring_allreduce(t);
  const Counts c = count(plan);
  // Ring allreduce on 4 ranks, k = 2: 2 (p-1) k p = 48 transfers, all between device buffers.
  CHECK(c.sends == 48);
  CHECK(c.d2h == 0);
  CHECK(c.h2d == 0);
  CHECK(verify(plan).ok());
}

TEST_CASE("without GPUDirect RDMA only cross-server transfers are staged", "[transport]") {
  const topo::Topology t = two_servers(true, false);
  const Plan plan = ring_allreduce(t);
  const Counts c = count(plan);
  // Ring 0-1-2-3-0: the hops 1->2 and 3->0 cross servers, 2 of 4 hops, so 24 of 48 transfers;
  // each gets a d2h copy on the sender and an h2d copy on the receiver.
  CHECK(c.sends == 48);
  CHECK(c.host_sends == 24);
  CHECK(c.d2h == 24);
  CHECK(c.h2d == 24);
  CHECK(verify(plan).ok());
}

TEST_CASE("without peer-to-peer and GPUDirect every transfer is staged", "[transport]") {
  const topo::Topology t = two_servers(false, false);
  const Plan plan = ring_allreduce(t);
  const Counts c = count(plan);
  CHECK(c.host_sends == 48);
  CHECK(c.d2h == 48);
  CHECK(c.h2d == 48);
  CHECK(verify(plan).ok());
}

TEST_CASE("pipelined staging puts copies on their own streams and naive keeps one stream",
          "[transport]") {
  const topo::Topology t = two_servers(false, false);
  topo::Router router(t);
  PlanRequest r;
  r.chunks = 4;
  r.size = 4 * 4 * 4 * 8;
  const Plan piped = generate(router, r);
  bool copy_on_own_stream = false;
  for (OpId id = 0; id < piped.num_ops(); ++id)
    if (piped.kind(id) == OpKind::copy && piped.stream(id) != piped.stream(id + 1))
      copy_on_own_stream = true;
  CHECK(copy_on_own_stream);
  r.algorithm = Algorithm::naive;
  r.chunks = 1;
  const Plan naive = generate(router, r);
  for (const std::uint32_t streams : naive.streams_per_rank()) CHECK(streams == 1);
  CHECK(count(naive).d2h > 0);
  CHECK(verify(naive).ok());
}

TEST_CASE("hier plans verify on servers with and without staging", "[verify]") {
  for (std::uint32_t servers : {1u, 2u, 3u})
    for (std::uint32_t gpus : {1u, 2u, 4u})
      for (std::uint32_t k : {1u, 3u}) {
        if (servers * gpus == 1) continue;
        topo::Topology t = test::server_gpus(servers, gpus, {});
        topo::finalize(t);
        topo::Router router(t);
        PlanRequest r;
        r.algorithm = Algorithm::hier;
        r.chunks = k;
        r.size = Bytes{servers} * gpus * k * 4 * 3 + 8;
        const VerifyReport rep = verify(generate(router, r));
        INFO("servers=" << servers << " gpus=" << gpus << " k=" << k);
        CHECK(rep.ok());
      }
}
