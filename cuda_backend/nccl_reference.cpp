#include "cuda_backend/nccl_reference.hpp"

#include <fmt/format.h>

#include <ostream>

#include "schedules/generate.hpp"
#include "sim/engine.hpp"
#include "topology/error.hpp"
#include "topology/routing.hpp"

namespace collsim::backend {

std::vector<NcclRow> compare_with_nccl(const topo::Topology& topology,
                                       const NcclMeasurement& measurement,
                                       const std::string& topology_file) {
  std::vector<NcclRow> rows;
  if (!measurement.available) return rows;
  const auto& gpus = topology.gpus();
  if (gpus.size() < static_cast<std::size_t>(measurement.gpus))
    throw InputError(topology_file, "nodes",
                     fmt::format("NCCL ran on {} GPUs but the topology describes {}; describe "
                                 "every GPU of this machine to compare with NCCL",
                                 measurement.gpus, gpus.size()));
  const topo::Router router(topology, topo::RoutingOptions{.ecmp = true});
  const std::vector<topo::NodeId> ranks(gpus.begin(), gpus.begin() + measurement.gpus);
  for (const NcclTiming& t : measurement.timings) {
    NcclRow row;
    row.size = t.size;
    row.measured = t.seconds;
    row.predicted = kUnlimited;
    for (sched::Algorithm a : {sched::Algorithm::ring, sched::Algorithm::tree}) {
      for (std::uint32_t k = 1; k <= 64 && k <= t.size / 4; k *= 2) {
        sched::PlanRequest req;
        req.algorithm = a;
        req.size = t.size;
        req.chunks = k;
        req.ranks = ranks;
        if (!sched::why_not(req, static_cast<sched::RankId>(ranks.size())).empty()) continue;
        const double time = sim::simulate(router, sched::generate(router, req)).time;
        if (time < row.predicted) {
          row.predicted = time;
          row.algorithm = std::string(sched::to_string(a));
          row.chunks = k;
        }
      }
    }
    if (!(row.predicted < kUnlimited)) continue;  // no plan fits (a size below one element)
    row.error = row.measured > 0 ? (row.predicted - row.measured) / row.measured : 0;
    rows.push_back(row);
  }
  return rows;
}

void write_nccl_csv(const std::vector<NcclRow>& rows, std::ostream& out) {
  out << "size,nccl_measured_s,predicted_s,predicted_algorithm,predicted_chunks,error\n";
  for (const NcclRow& r : rows)
    out << fmt::format("{},{:.9g},{:.9g},{},{},{:.6g}\n", r.size, r.measured, r.predicted,
                       r.algorithm, r.chunks, r.error);
}

}  // namespace collsim::backend
