// Direct schedules: every rank exchanges with every peer at once, one channel (set of streams)
// per peer, so on a switch or a full mesh all transfers of a step run in parallel. Reductions
// of a rank share one stream. One-shot allreduce: every rank receives every peer's whole
// buffer and reduces locally (for NVSwitch and small messages).
//
// Pairwise schedules (reduce_scatter, allgather, alltoall): the same transfers on one channel,
// so a rank sends to one peer at a time, r + 1, r + 2, ... in turn, and receives from r - 1,
// r - 2, ...; in round c of k, chunk c of every piece. A rank's i-th send is its receiver's i-th
// receive, so the exchange moves in lockstep, and a rank has one transfer in flight each way
// instead of p - 1 sharing its links.
#include <algorithm>
#include <vector>

#include "schedules/algorithms.hpp"
#include "topology/error.hpp"

namespace collsim::sched::detail {

namespace {

// Channel i of rank r sends to r + 1 + i and receives from r - 1 - i.
RankId peer_to(RankId r, RankId i, RankId p) {
  return (r + 1 + i) % p;
}

// Every rank sends piece(dest) of its input to every other rank, which reduces what it
// receives into `dst(rank, chunk)` starting from its own input piece: on channel i to the peer
// i + 1 further on, or every peer on channel 0 where `one_channel` (pairwise).
template <typename PieceOf, typename DstOf>
void gather_reduce(Builder& b, const Job& job, const std::vector<RankId>& receivers,
                   PieceOf piece_of, DstOf dst_of, bool one_channel = false) {
  std::vector<char> receives(job.p, 0);
  for (RankId q : receivers) receives[q] = 1;
  const RankId p = job.p;
  const Lanes red = Lanes::channel(0);
  for (std::uint32_t c = 0; c < job.k; ++c) {
    std::vector<std::vector<std::pair<OpId, Region>>> got(p);
    for (RankId i = 0; i + 1 < p; ++i) {
      const Lanes lanes = Lanes::channel(one_channel ? 0 : i);
      for (RankId r = 0; r < p; ++r) {
        const RankId to = peer_to(r, i, p);
        if (!receives[to] || !b.touches(r, to)) continue;
        const Piece piece = piece_of(to, c);
        if (piece.bytes == 0) continue;
        const Region tmp = b.fresh_scratch(to, piece.bytes);
        // The receiver's channel for data from r is the one whose recv peer is r.
        got[to].push_back(
            {b.move(r, {BufferId::input, piece.offset}, to, tmp, piece.bytes, {}, lanes, lanes),
             tmp});
      }
    }
    for (RankId q : receivers) {
      const Piece piece = piece_of(q, c);
      if (piece.bytes == 0) continue;
      const Region dst = dst_of(q, c);
      bool first = true;
      for (const auto& [op, tmp] : got[q]) {
        b.reduce(q, dst, first ? Region{BufferId::input, piece.offset} : dst, tmp, piece.bytes,
                 red.reduce, {op});
        first = false;
      }
    }
  }
}

// Every sender sends piece(sender, dest, chunk) of its input to dest's output: on channel i to
// the peer i + 1 further on, or every peer on channel 0 where `one_channel` (pairwise).
template <typename SrcOf, typename DstOf>
void scatter(Builder& b, const Job& job, const std::vector<RankId>& senders, SrcOf src_of,
             DstOf dst_of, Bytes piece_bytes_total, bool one_channel = false) {
  const RankId p = job.p;
  const auto chunks = split({0, piece_bytes_total}, job.k, job.element);
  for (std::uint32_t c = 0; c < job.k; ++c) {
    if (chunks[c].bytes == 0) continue;
    for (RankId i = 0; i + 1 < p; ++i) {
      const Lanes lanes = Lanes::channel(one_channel ? 0 : i);
      for (RankId r : senders) {
        const RankId to = peer_to(r, i, p);
        if (!b.touches(r, to)) continue;
        b.move(r, src_of(r, to, chunks[c]), to, dst_of(r, to, chunks[c]), chunks[c].bytes, {},
               lanes, lanes);
      }
    }
  }
}

// Reduce-scatter: rank q receives segment q from every peer and adds it to its own.
void reduce_scatter(Builder& b, const Job& job, const std::vector<RankId>& all, bool one_channel) {
  const auto segs = split({0, job.n}, job.p, job.element);
  gather_reduce(
      b, job, all,
      [&](RankId q, std::uint32_t c) { return nth_piece(segs[q], job.k, c, job.element); },
      [&](RankId q, std::uint32_t c) {
        return Region{BufferId::output,
                      nth_piece(segs[q], job.k, c, job.element).offset - segs[q].offset};
      },
      one_channel);
}

// Allgather and alltoall: each rank's own piece by a local copy, the others by scatter().
void exchange(Builder& b, const Job& job, const std::vector<RankId>& all, bool one_channel) {
  const RankId p = job.p;
  const Bytes seg = job.n / p;
  const bool gather = job.collective == Collective::allgather;
  for (RankId r = 0; r < p; ++r)
    b.copy(r, {BufferId::output, r * seg}, {BufferId::input, gather ? 0 : r * seg}, seg,
           Lanes::channel(0).copy, {});
  scatter(
      b, job, all,
      [&](RankId, RankId to, Piece c) {
        return Region{BufferId::input, (gather ? 0 : to * seg) + c.offset};
      },
      [&](RankId r, RankId, Piece c) {
        return Region{BufferId::output, r * seg + c.offset};
      },
      seg, one_channel);
}

std::vector<RankId> every_rank(RankId p) {
  std::vector<RankId> all(p);
  for (RankId r = 0; r < p; ++r) all[r] = r;
  return all;
}

// Every rank with every peer, k chunks: two ops per transfer and, for the reducing collectives,
// one reduction per transfer.
void reserve_exchange(Builder& b, const Job& job) {
  const std::uint64_t transfers = std::uint64_t{b.plan().ranks_held()} * (job.p - 1) * job.k;
  b.plan().reserve(3 * transfers + job.p, 2 * transfers);
}

}  // namespace

void pairwise(Builder& b, const Job& job) {
  if (job.p == 0) throw InternalError("pairwise: a job without ranks");  // generate refuses p = 0
  reserve_exchange(b, job);
  switch (job.collective) {
    case Collective::reduce_scatter:
      reduce_scatter(b, job, every_rank(job.p), true);
      return;
    case Collective::allgather:
    case Collective::alltoall:
      exchange(b, job, every_rank(job.p), true);
      return;
    case Collective::allreduce:
    case Collective::broadcast:
    case Collective::reduce:
      break;
  }
  throw InternalError("pairwise: collective not dispatched");
}

void direct(Builder& b, const Job& job) {
  const RankId p = job.p;
  if (p == 0) throw InternalError("direct: a job without ranks");  // generate refuses p = 0
  reserve_exchange(b, job);
  const std::vector<RankId> all = every_rank(p);
  const auto chunks = split({0, job.n}, job.k, job.element);
  switch (job.collective) {
    case Collective::allreduce:
      gather_reduce(
          b, job, all, [&](RankId, std::uint32_t c) { return chunks[c]; },
          [&](RankId, std::uint32_t c) {
            return Region{BufferId::output, chunks[c].offset};
          });
      return;
    case Collective::reduce:
      gather_reduce(
          b, job, {job.root}, [&](RankId, std::uint32_t c) { return chunks[c]; },
          [&](RankId, std::uint32_t c) {
            return Region{BufferId::output, chunks[c].offset};
          });
      return;
    case Collective::reduce_scatter:
      reduce_scatter(b, job, all, false);
      return;
    case Collective::allgather:
    case Collective::alltoall:
      exchange(b, job, all, false);
      return;
    case Collective::broadcast:
      b.copy(job.root, {BufferId::output, 0}, {BufferId::input, 0}, job.n, Lanes::channel(0).copy,
             {});
      scatter(
          b, job, {job.root},
          [](RankId, RankId, Piece c) {
            return Region{BufferId::input, c.offset};
          },
          [](RankId, RankId, Piece c) {
            return Region{BufferId::output, c.offset};
          },
          job.n);
      return;
  }
  throw InternalError("direct: collective not dispatched");
}

}  // namespace collsim::sched::detail
