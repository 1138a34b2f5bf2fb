// Every generated (algorithm, collective) pair, executed on real memory by the host executor and,
// where a device exists, by the CUDA executor: zero wrong elements is what "the schedule computes
// the collective" means in bytes.
#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <utility>

#include "cuda_backend/cuda_executor.hpp"
#include "cuda_backend/host_executor.hpp"
#include "cuda_guard.hpp"
#include "schedules/generate.hpp"
#include "topology/error.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::backend;

namespace {

// `servers` servers of `per_server` GPUs behind an NVSwitch, a CPU on PCIe in each, and one
// network switch joining the NVSwitches. Costs are left unlimited: only the data matter here.
topo::Topology cluster(std::uint32_t servers, std::uint32_t per_server) {
  topo::Topology t;
  auto link = [&](topo::NodeId a, topo::NodeId b, topo::LinkKind kind) {
    topo::Link l;
    l.kind = kind;
    l.from = a;
    l.to = b;
    t.add_link(l);
    l.from = b;
    l.to = a;
    t.add_link(l);
  };
  topo::Node net;
  net.name = "net";
  net.kind = topo::NodeKind::network_switch;
  const auto net_id = t.add_node(net);
  for (std::uint32_t s = 0; s < servers; ++s) {
    topo::Server server;
    server.name = "server" + std::to_string(s);
    const auto sid = t.add_server(server);
    topo::Node sw;
    sw.name = "nvs" + std::to_string(s);
    sw.kind = topo::NodeKind::nvswitch;
    sw.server = sid;
    const auto sw_id = t.add_node(sw);
    topo::Node cpu;
    cpu.name = "cpu" + std::to_string(s);
    cpu.kind = topo::NodeKind::cpu;
    cpu.server = sid;
    const auto cpu_id = t.add_node(cpu);
    link(sw_id, net_id, topo::LinkKind::network);
    for (std::uint32_t g = 0; g < per_server; ++g) {
      topo::Node gpu;
      gpu.name = "gpu" + std::to_string(s) + "_" + std::to_string(g);
      gpu.kind = topo::NodeKind::gpu;
      gpu.server = sid;
      const auto id = t.add_node(gpu);
      link(id, sw_id, topo::LinkKind::nvlink);
      link(id, cpu_id, topo::LinkKind::pcie);
    }
  }
  topo::finalize(t);
  return t;
}

void check_every_generated_plan(Executor& executor, std::uint32_t servers,
                                std::uint32_t per_server) {
  using sched::Algorithm;
  using sched::Collective;
  const auto topology = cluster(servers, per_server);
  const topo::Router router(topology);
  const std::uint32_t p = servers * per_server;
  RunOptions ro;
  ro.warmup = 0;
  int executed = 0, refused = 0;
  for (auto algorithm : {Algorithm::ring, Algorithm::tree, Algorithm::rhd, Algorithm::rd,
                         Algorithm::hier, Algorithm::direct, Algorithm::naive}) {
    for (auto collective :
         {Collective::allreduce, Collective::reduce_scatter, Collective::allgather,
          Collective::broadcast, Collective::reduce, Collective::alltoall}) {
      for (std::uint32_t chunks : {1u, 3u}) {
        for (auto dtype : {sched::DType::fp32, sched::DType::bf16}) {
          sched::PlanRequest req;
          req.algorithm = algorithm;
          req.collective = collective;
          req.chunks = chunks;
          req.dtype = dtype;
          req.root = p - 1;
          // Whole elements per rank and per chunk, plus an uneven tail for the collectives that
          // allow one (allreduce, broadcast, reduce): p * 48 elements + 5.
          const Bytes elem = sched::dtype_size(dtype);
          const bool per_rank = collective == Collective::reduce_scatter ||
                                collective == Collective::allgather ||
                                collective == Collective::alltoall;
          req.size = (Bytes{p} * 48 + (per_rank ? 0 : 5)) * elem;
          sched::Plan plan;
          try {
            plan = sched::generate(router, req);
          } catch (const InputError&) {
            ++refused;  // a pair the generators do not offer (or not yet) on this topology
            continue;
          }
          ro.label = std::string(sched::to_string(algorithm)) + " " +
                     std::string(sched::to_string(collective)) + " k=" + std::to_string(chunks) +
                     " " + std::string(sched::to_string(dtype)) + " p=" + std::to_string(p);
          INFO(ro.label);
          const auto result = executor.run(plan, ro);
          CHECK(result.wrong_elements == 0);
          CHECK(result.checked_elements > 0);
          if (executor.device().backend == "cuda" && executor.device().devices == 1) {
            // One stream per (rank, stream) that holds ops, plus the start gate: plans number
            // streams sparsely, and a stream created for nothing still takes a hardware queue.
            std::set<std::pair<sched::RankId, std::uint32_t>> used;
            for (sched::OpId id = 0; id < plan.num_ops(); ++id)
              used.emplace(plan.rank(id), plan.stream(id));
            CHECK(result.streams_per_device == used.size() + 1);
          }
          ++executed;
        }
      }
    }
  }
  INFO("executed " << executed << ", refused " << refused);
  // At least ring, direct and naive exist for allreduce on every rank count: 2 + 2 + 1 chunks
  // settings, times two dtypes.
  CHECK(executed >= 10);
}

}  // namespace

TEST_CASE("host executor: every generated algorithm x collective computes its collective",
          "[backend][host][generated]") {
  const std::uint32_t servers = GENERATE(1u, 2u);
  const std::uint32_t per_server = GENERATE(2u, 3u, 4u);
  HostExecutor executor;
  check_every_generated_plan(executor, servers, per_server);
}

TEST_CASE("cuda executor: every generated algorithm x collective computes its collective",
          "[backend][cuda][gpu][generated]") {
  if (test::skip_without_cuda()) return;
  // The virtual ranks share the device: its streams, events and copies carry every plan.
  const std::uint32_t servers = GENERATE(1u, 2u);
  const std::uint32_t per_server = GENERATE(2u, 3u, 4u);
  auto executor = make_cuda_executor();
  check_every_generated_plan(*executor, servers, per_server);
}
