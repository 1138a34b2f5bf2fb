#pragma once
// Plans written out by hand, independent of the schedule generators, so that the executors are
// tested against a schedule whose every op a reader can follow.
#include <vector>

#include "schedules/plan.hpp"
#include "tests/common/op_builders.hpp"

namespace collsim::test {

struct RingOptions {
  std::uint32_t ranks = 4;
  std::uint32_t chunks = 1;
  Bytes size = 4096;
  sched::DType dtype = sched::DType::fp32;
  bool allgather_phase = true;  // false leaves p-1 of p segments unset on every rank
};

// Ring allreduce: p-1 reduce-scatter steps then p-1 allgather steps over p segments, each
// segment cut into `chunks` pipelined pieces. Sends run on stream 0, receives and reductions on
// stream 1, so that every rank can send and receive at once.
inline sched::Plan ring_allreduce(const RingOptions& o) {
  using namespace sched;
  Plan plan;
  plan.collective = Collective::allreduce;
  plan.algorithm = "ring (hand-written)";
  plan.dtype = o.dtype;
  plan.size = o.size;
  plan.chunks = o.chunks;
  plan.rank_gpu.assign(o.ranks, 0);
  const RankId p = o.ranks;
  const Bytes segment = o.size / p;
  const Bytes piece = segment / o.chunks;
  auto seg = [&](std::int64_t s) { return static_cast<Bytes>(((s % p) + p) % p); };
  // last[r][segment][chunk]: the op after which rank r's output holds the latest value.
  std::vector<std::vector<std::vector<OpId>>> last(
      p, std::vector<std::vector<OpId>>(p, std::vector<OpId>(o.chunks, kNoOp)));

  for (std::uint32_t step = 0; step + 1 < p; ++step) {
    for (std::uint32_t c = 0; c < o.chunks; ++c) {
      for (RankId r = 0; r < p; ++r) {
        const RankId next = (r + 1) % p;
        const Bytes send_seg = seg(std::int64_t{r} - step);
        const Bytes recv_seg = seg(std::int64_t{next} - 1 - step);  // == send_seg
        const Bytes off = send_seg * segment + c * piece;
        const Op send =
            send_op(r, next, piece, {step == 0 ? BufferId::input : BufferId::output, off}, 0);
        const Op recv =
            recv_op(next, r, piece, {BufferId::scratch, recv_seg * segment + c * piece}, 1);
        const OpId s = plan.add(send, {last[r][send_seg][c]});
        const OpId v = plan.add(recv);
        plan.match(s, v);
        const Op reduce = reduce_op(next, piece, {BufferId::input, off}, {BufferId::scratch, off},
                                    {BufferId::output, off}, 1);
        last[next][recv_seg][c] = plan.add(reduce, {v});
      }
    }
  }
  if (!o.allgather_phase) return plan;
  for (std::uint32_t step = 0; step + 1 < p; ++step) {
    for (std::uint32_t c = 0; c < o.chunks; ++c) {
      for (RankId r = 0; r < p; ++r) {
        const RankId next = (r + 1) % p;
        const Bytes send_seg = seg(std::int64_t{r} + 1 - step);
        const Bytes off = send_seg * segment + c * piece;
        const Op send = send_op(r, next, piece, {BufferId::output, off}, 0);
        const Op recv = recv_op(next, r, piece, {BufferId::output, off}, 1);
        const OpId s = plan.add(send, {last[r][send_seg][c]});
        const OpId v = plan.add(recv);
        plan.match(s, v);
        last[next][send_seg][c] = v;
      }
    }
  }
  return plan;
}

}  // namespace collsim::test
