// Ring schedules: allreduce (reduce-scatter then allgather), reduce_scatter, allgather, and the
// pipelined chains used for broadcast and reduce. Every rank's sends share one stream and are
// issued step by step, chunk by chunk, so each link carries one transfer at a time; the
// reductions run on their own stream and overlap the next chunk's transfer.
#include <algorithm>
#include <utility>
#include <vector>

#include "schedules/algorithms.hpp"
#include "topology/error.hpp"

namespace collsim::sched::detail {

namespace {

RankId mod(std::int64_t v, RankId p) {
  const auto m = static_cast<std::int64_t>(p);
  return static_cast<RankId>(((v % m) + m) % m);
}

// Chunk c of segment j at [j * k + c]: one array, so that a step's pass over the ranks reads it
// in order.
std::vector<Piece> chunk_pieces(const std::vector<Piece>& segs, const Job& job) {
  std::vector<Piece> all;
  all.reserve(segs.size() * job.k);
  for (const Piece& seg : segs)
    for (const Piece& piece : split(seg, job.k, job.element)) all.push_back(piece);
  return all;
}

// State of one rank for the piece it sends next: where the data is and the op producing it.
struct Holding {
  Region where;
  OpId ready = kNoOp;
};

// One Holding per (rank, chunk), in one array: a step builds the next from the last, and two
// arrays reused step after step cost no allocation per rank and step. Entries are never
// cleared: a step writes the entry of every piece the next step reads (the same piece, so an
// empty one is skipped by both), and what a rank not in the plan holds is never used.
class Holdings {
 public:
  Holdings(RankId p, std::uint32_t k) : k_(k), all_(std::size_t{p} * k) {}
  Holding& at(RankId r, std::uint32_t c) { return all_[std::size_t{r} * k_ + c]; }

 private:
  std::uint32_t k_;
  std::vector<Holding> all_;
};

// The ranks whose send to the next rank puts an op in the plan, in rank order: every rank,
// unless the plan holds some ranks only (Plan::rotation), whose ring steps then cost O(held)
// instead of O(p).
std::vector<RankId> ring_senders(const Builder& b, RankId p) {
  std::vector<RankId> out;
  for (RankId r = 0; r < p; ++r)
    if (b.touches(r, r + 1 == p ? 0 : r + 1)) out.push_back(r);
  return out;
}

// Whether a step's transfers are built each rank's chunks together (for_each_send()).
bool ring_by_rank(const Builder& b, const Job& job) {
  return may_run_order(job, [&] {
    for (RankId r = 0; r < job.p; ++r)
      if (b.staged(r, r + 1 == job.p ? 0 : r + 1)) return true;
    return false;
  });
}

// Reduce-scatter around the ring. At step s rank r sends segment (r - s - shift) to r + 1,
// which adds its own input. The owner of segment j at the end is rank j - 1 + shift.
// `final_region(rank, seg, piece)` says where the finished sum of `piece` (a chunk of segment
// `seg`) goes; partial sums go there too, or to fresh scratch when `partials_in_scratch`.
// Returns, per rank and chunk, where the finished segment is and the op that finishes it.
template <typename FinalRegion>
Holdings ring_reduce_scatter(Builder& b, const Job& job, RankId shift, bool partials_in_scratch,
                             FinalRegion final_region) {
  const RankId p = job.p;
  const auto segs = split({0, job.n}, p, job.element);
  const std::vector<Piece> chunks = chunk_pieces(segs, job);
  const Lanes lanes = job.pipelined ? Lanes::channel(0) : Lanes::single();

  Holdings hold(p, job.k);
  Holdings next(p, job.k);
  const std::vector<RankId> senders = ring_senders(b, p);
  const bool by_rank = ring_by_rank(b, job);
  for (RankId s = 0; s + 1 < p; ++s) {
    const bool last = s + 2 == p;
    // No division per transfer (it showed at 4096 ranks).
    const RankId first = mod(-std::int64_t{s} - shift, p);
    for_each_send(senders, job.k, by_rank, [&](RankId r, std::uint32_t c) {
      const RankId seg = first + r < p ? first + r : first + r - p;
      const RankId to = r + 1 == p ? 0 : r + 1;
      const Piece piece = chunks[std::size_t{seg} * job.k + c];
      if (piece.bytes == 0) return;
      const Region src = s == 0 ? Region{BufferId::input, piece.offset} : hold.at(r, c).where;
      const Region tmp = b.fresh_scratch(to, piece.bytes);
      const OpId arrived =
          b.move(r, src, to, tmp, piece.bytes, {hold.at(r, c).ready}, lanes, lanes);
      Region dst = final_region(to, seg, piece);
      if (!last && partials_in_scratch) dst = b.fresh_scratch(to, piece.bytes);
      const OpId red = b.reduce(to, dst, {BufferId::input, piece.offset}, tmp, piece.bytes,
                                lanes.reduce, {arrived});
      next.at(to, c) = Holding{dst, red};
    });
    std::swap(hold, next);
    // Every op of the next step waits for this step's reduction of its chunk.
    b.end_batch();
  }
  return hold;
}

// Allgather around the ring: at step t rank r forwards segment (r - t + lead), which it holds
// in `hold` at t = 0 and in its output afterwards.
void ring_allgather_phase(Builder& b, const Job& job, RankId lead, Holdings hold) {
  const RankId p = job.p;
  const auto segs = split({0, job.n}, p, job.element);
  const std::vector<Piece> chunks = chunk_pieces(segs, job);
  const Lanes lanes = job.pipelined ? Lanes::channel(0) : Lanes::single();
  Holdings next(p, job.k);
  const std::vector<RankId> senders = ring_senders(b, p);
  const bool by_rank = ring_by_rank(b, job);
  for (RankId t = 0; t + 1 < p; ++t) {
    const RankId first = mod(std::int64_t{lead} - t, p);
    for_each_send(senders, job.k, by_rank, [&](RankId r, std::uint32_t c) {
      const RankId seg = first + r < p ? first + r : first + r - p;
      const RankId to = r + 1 == p ? 0 : r + 1;
      const Piece piece = chunks[std::size_t{seg} * job.k + c];
      if (piece.bytes == 0) return;
      const Region dst{BufferId::output, piece.offset};
      const OpId arrived =
          b.move(r, hold.at(r, c).where, to, dst, piece.bytes, {hold.at(r, c).ready}, lanes, lanes);
      next.at(to, c) = Holding{dst, arrived};
    });
    std::swap(hold, next);
    // Every op of the next step waits for this step's arrival of its chunk.
    b.end_batch();
  }
}

// Room for `steps` steps of p transfers per chunk (two ops and about one dependency each) and
// `reduce_steps` of p reductions, so that large plans grow without repeated reallocation.
void reserve_ring(Builder& b, const Job& job, std::uint64_t steps, std::uint64_t reduce_steps) {
  if (b.streaming()) return;  // the plan never holds more than a few steps
  const std::uint64_t per_step = std::uint64_t{b.plan().ranks_held()} * job.k;
  b.plan().reserve(b.plan().num_ops() + per_step * (2 * steps + reduce_steps),
                   b.plan().num_deps() + per_step * (steps + reduce_steps),
                   per_step * reduce_steps);
}

void ring_allreduce(Builder& b, const Job& job) {
  reserve_ring(b, job, 2 * (std::uint64_t{job.p} - 1), job.p - 1);
  auto hold = ring_reduce_scatter(b, job, 0, false, [](RankId, RankId, const Piece& piece) {
    return Region{BufferId::output, piece.offset};
  });
  ring_allgather_phase(b, job, 1, std::move(hold));
}

void ring_reduce_scatter_collective(Builder& b, const Job& job) {
  reserve_ring(b, job, job.p - 1, job.p - 1);
  // Each rank's output is its own segment, so partial sums live in scratch.
  const auto segs = split({0, job.n}, job.p, job.element);
  ring_reduce_scatter(b, job, 1, true, [&](RankId, RankId seg, const Piece& piece) {
    return Region{BufferId::output, piece.offset - segs[seg].offset};
  });
}

void ring_allgather_collective(Builder& b, const Job& job) {
  reserve_ring(b, job, job.p - 1, 0);
  const RankId p = job.p;
  const auto segs = split({0, job.n}, p, job.element);
  const Lanes lanes = job.pipelined ? Lanes::channel(0) : Lanes::single();
  Holdings hold(p, job.k);
  for (RankId r = 0; r < p; ++r) {
    // The rank's own segment reaches its output by one local copy beside the ring.
    b.copy(r, {BufferId::output, segs[r].offset}, {BufferId::input, 0}, segs[r].bytes, lanes.copy,
           {});
    const auto chunks = split(segs[r], job.k, job.element);
    for (std::uint32_t c = 0; c < job.k; ++c)
      hold.at(r, c) = Holding{{BufferId::input, chunks[c].offset - segs[r].offset}, kNoOp};
  }
  ring_allgather_phase(b, job, 0, std::move(hold));
}

// Broadcast down the chain root, root+1, ...: chunk c leaves rank i as soon as it has arrived.
void chain_broadcast(Builder& b, const Job& job) {
  const RankId p = job.p;
  const auto chunks = split({0, job.n}, job.k, job.element);
  const Lanes lanes = job.pipelined ? Lanes::channel(0) : Lanes::single();
  b.copy(job.root, {BufferId::output, 0}, {BufferId::input, 0}, job.n, lanes.copy, {});
  std::vector<OpId> ready(job.k, kNoOp);
  for (RankId i = 0; i + 1 < p; ++i) {
    const RankId from = mod(std::int64_t{job.root} + i, p);
    const RankId to = mod(std::int64_t{job.root} + i + 1, p);
    const BufferId src = i == 0 ? BufferId::input : BufferId::output;
    for (std::uint32_t c = 0; c < job.k; ++c) {
      if (chunks[c].bytes == 0) continue;
      ready[c] = b.move(from, {src, chunks[c].offset}, to, {BufferId::output, chunks[c].offset},
                        chunks[c].bytes, {ready[c]}, lanes, lanes);
    }
  }
}

// Reduce up the chain root+p-1, ..., root+1, root: each rank adds its input and passes the sum.
void chain_reduce(Builder& b, const Job& job) {
  const RankId p = job.p;
  const auto chunks = split({0, job.n}, job.k, job.element);
  const Lanes lanes = job.pipelined ? Lanes::channel(0) : Lanes::single();
  std::vector<Holding> hold(job.k);
  for (std::uint32_t c = 0; c < job.k; ++c) hold[c].where = {BufferId::input, chunks[c].offset};
  for (RankId i = p - 1; i >= 1; --i) {
    const RankId from = mod(std::int64_t{job.root} + i, p);
    const RankId to = mod(std::int64_t{job.root} + i - 1, p);
    for (std::uint32_t c = 0; c < job.k; ++c) {
      const Piece piece = chunks[c];
      if (piece.bytes == 0) continue;
      const Region tmp = b.fresh_scratch(to, piece.bytes);
      const OpId arrived =
          b.move(from, hold[c].where, to, tmp, piece.bytes, {hold[c].ready}, lanes, lanes);
      const Region dst =
          i == 1 ? Region{BufferId::output, piece.offset} : b.fresh_scratch(to, piece.bytes);
      const OpId red = b.reduce(to, dst, {BufferId::input, piece.offset}, tmp, piece.bytes,
                                lanes.reduce, {arrived});
      hold[c] = Holding{dst, red};
    }
  }
}

}  // namespace

void ring(Builder& b, const Job& job) {
  switch (job.collective) {
    case Collective::allreduce:
      return ring_allreduce(b, job);
    case Collective::reduce_scatter:
      return ring_reduce_scatter_collective(b, job);
    case Collective::allgather:
      return ring_allgather_collective(b, job);
    case Collective::broadcast:
      return chain_broadcast(b, job);
    case Collective::reduce:
      return chain_reduce(b, job);
    case Collective::alltoall:
      break;
  }
  throw InternalError("ring: collective not dispatched");
}

void local_copy(Builder& b, const Job& job) {
  const Bytes bytes =
      job.collective == Collective::reduce_scatter || job.collective == Collective::allgather
          ? job.n / job.p
          : job.n;
  const Lanes lanes = job.pipelined ? Lanes::channel(0) : Lanes::single();
  for (const Piece& c : split({0, bytes}, job.k, job.element))
    if (c.bytes)
      b.copy(0, {BufferId::output, c.offset}, {BufferId::input, c.offset}, c.bytes, lanes.copy, {});
}

}  // namespace collsim::sched::detail
