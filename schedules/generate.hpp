#pragma once
// Entry point of the schedule generators: one plan for an (algorithm, collective) pair on a
// topology, split into k pipelined chunks.
#include <string_view>
#include <vector>

#include "schedules/plan.hpp"
#include "topology/routing.hpp"

namespace collsim::sched {

enum class Algorithm : std::uint8_t { ring, tree, rhd, rd, hier, direct, naive };
std::string_view to_string(Algorithm a);

struct PlanRequest {
  Collective collective = Collective::allreduce;
  Algorithm algorithm = Algorithm::ring;
  Bytes size = 0;            // nccl-tests convention, see Plan::size
  DType dtype = DType::fp32;
  std::uint32_t chunks = 1;  // k >= 1; 1 is the monolithic schedule
  RankId root = 0;           // broadcast and reduce
  std::vector<topo::NodeId> ranks;  // GPUs taking part, rank order; empty means every GPU
};

// Throws InputError when the algorithm does not fit the collective, the rank count or the size.
Plan generate(const topo::Router& router, const PlanRequest& request);

}  // namespace collsim::sched
