// The naive baseline: whole buffers, rank 0 (or the root) gathers and reduces them one after
// another, then sends the result to every rank one after another; every op of a rank is on
// stream 0, so copies, transfers and reductions never overlap.
#include "schedules/algorithms.hpp"
#include "topology/error.hpp"

namespace collsim::sched::detail {

void naive(Builder& b, const Job& job) {
  const Lanes one = Lanes::single();
  const RankId p = job.p;
  const RankId root = job.collective == Collective::allreduce ? 0 : job.root;
  const Bytes n = job.n;
  OpId last = kNoOp;
  if (job.collective == Collective::allreduce || job.collective == Collective::reduce) {
    bool first = true;
    for (RankId i = 1; i < p; ++i) {
      const RankId from = (root + i) % p;
      const Region tmp = b.fresh_scratch(root, n);
      const OpId arrived = b.move(from, {BufferId::input, 0}, root, tmp, n, {}, one, one);
      last = b.reduce(root, {BufferId::output, 0},
                      first ? Region{BufferId::input, 0} : Region{BufferId::output, 0}, tmp, n,
                      one.reduce, {arrived});
      first = false;
    }
  }
  if (job.collective == Collective::allreduce || job.collective == Collective::broadcast) {
    const BufferId src =
        job.collective == Collective::allreduce ? BufferId::output : BufferId::input;
    for (RankId i = 1; i < p; ++i) {
      const RankId to = (root + i) % p;
      b.move(root, {src, 0}, to, {BufferId::output, 0}, n, {last}, one, one);
    }
    if (job.collective == Collective::broadcast)
      b.copy(root, {BufferId::output, 0}, {BufferId::input, 0}, n, one.copy, {});
  }
  if (job.collective != Collective::allreduce && job.collective != Collective::reduce &&
      job.collective != Collective::broadcast)
    throw InternalError("naive: collective not dispatched");
}

}  // namespace collsim::sched::detail
