#pragma once
// What an executor must know about a plan before it touches memory: that the plan is well formed
// (every op in its rank's buffers, sends matched to recvs, no cycle through a transfer), how large
// each rank's buffers are, and one order in which issuing the ops can never wait on an op that has
// not been issued yet.
#include <cstdint>
#include <string>
#include <vector>

#include "schedules/plan.hpp"

namespace collsim::backend {

struct BufferSizes {
  Bytes input = 0;
  Bytes output = 0;
  Bytes scratch = 0;  // the largest end of a scratch region any op of the rank touches
  Bytes host = 0;     // likewise for the pinned host staging buffer
  Bytes of(sched::BufferId b) const;
};

struct PlanLayout {
  std::vector<BufferSizes> buffers;  // per rank
  // Topological order over ops in which a matched send/recv pair appears once, as its send.
  std::vector<sched::OpId> issue_order;
  // Per (rank, stream), the ops in stream order. streams[rank][stream].
  std::vector<std::vector<std::vector<sched::OpId>>> streams;
  // Per op: the previous op on its stream, or kNoOp.
  std::vector<sched::OpId> stream_prev;
};

// Input and output bytes per rank of the plan's collective, following the nccl-tests
// convention of Plan::size. Throws InputError when the size does not divide as the collective
// requires.
BufferSizes collective_buffers(const sched::Plan& plan);

// Validates the plan and lays it out. `label` names the plan in diagnostics (a file path, or a
// description such as "ring allreduce k=4"). Throws InputError listing every problem found.
PlanLayout layout_plan(const sched::Plan& plan, const std::string& label);

}  // namespace collsim::backend
