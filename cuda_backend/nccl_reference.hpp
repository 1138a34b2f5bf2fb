#pragma once
// Ground truth from NCCL: ncclAllReduce timed on every visible GPU of this machine, beside the
// simulator's answer for the same GPUs. `collsim validate` prints it when collsim was built with
// NCCL and two or more GPUs are visible; otherwise it says which of the two is missing.
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "topology/topology.hpp"
#include "topology/units.hpp"

namespace collsim::backend {

struct NcclTiming {
  Bytes size = 0;      // per-rank buffer, as nccl-tests counts it (fp32, sum)
  double seconds = 0;  // median over the repetitions, wall clock from launch to every stream done
};

struct NcclMeasurement {
  bool available = false;
  std::string why_not;  // when unavailable: what is missing, and what would make it available
  int gpus = 0;
  std::string version;  // "2.27.3"
  std::vector<NcclTiming> timings;
};

// One ncclComm per visible device (ncclCommInitAll), fp32 sum, in-place buffers of the largest
// size. A failing CUDA or NCCL call throws InternalError naming the call.
NcclMeasurement time_nccl_allreduce(const std::vector<Bytes>& sizes, std::uint32_t warmup,
                                    std::uint32_t repetitions);

struct NcclRow {
  Bytes size = 0;
  double measured = 0;   // ncclAllReduce
  double predicted = 0;  // the simulator's fastest (algorithm, k) among ring and tree
  std::string algorithm;
  std::uint32_t chunks = 0;
  double error = 0;  // (predicted - measured) / measured
};

// For each timing, simulates ring and tree allreduce (NCCL's two) with k = 1, 2, 4, ..., 64 on
// the first `gpus` GPUs of `topology` and keeps the fastest. InputError when the topology has
// fewer GPUs than were measured.
std::vector<NcclRow> compare_with_nccl(const topo::Topology& topology,
                                       const NcclMeasurement& measurement,
                                       const std::string& topology_file);

void write_nccl_csv(const std::vector<NcclRow>& rows, std::ostream& out);

}  // namespace collsim::backend
