// Hierarchical allreduce: a ring reduce-scatter inside each server (NVLink/PCIe), a ring
// allreduce of each GPU's segment across servers among the GPUs with the same local index (one
// rail per local index), and a ring allgather inside each server. The buffer is split into k
// chunks first, so every phase works on whole chunks; phases pipeline their chunks internally
// and start on a rank once its previous phase is complete, which keeps the phases on the
// rank's streams in order and the closed form a sum of three ring terms.
//
// Each phase is generated step by step over all its groups at once (all servers, or all rails),
// which orders every rank's ops exactly as a group at a time would, since the groups of a phase
// share no rank. A step's ops wait for the step before (its reductions, or its arrivals), and a
// phase's first step waits for the last step of the phase before, so a batch can end after
// every step (Builder::end_batch) when every piece holds an element (sched::streams).
#include <algorithm>
#include <span>
#include <utility>
#include <vector>

#include "schedules/algorithms.hpp"
#include "topology/error.hpp"

namespace collsim::sched::detail {

namespace {

// The last op of each of a rank's streams among ops added in id order. Ops on one stream finish
// in order, so waiting for these is waiting for all of them.
class StreamTails {
 public:
  void add(StreamId stream, OpId op) {
    if (op == kNoOp) return;
    for (Tail& t : tails_)
      if (t.stream == stream) {
        t.op = op;
        return;
      }
    tails_.push_back({stream, op});
  }
  std::vector<OpId> ops() const {
    std::vector<OpId> out;
    out.reserve(tails_.size());
    for (const Tail& t : tails_) out.push_back(t.op);
    return out;
  }

 private:
  // Streams are kept with the ops, not read back from the plan: a streamed run drops the ops
  // it has finished.
  struct Tail {
    StreamId stream;
    OpId op;
  };
  std::vector<Tail> tails_;
};

// For each group, the indices i whose transfer to i + 1 puts an op in the plan: every index,
// unless the plan holds some ranks only (Plan::rotation), where looping over every rank of every
// group at every step would cost more than the ops themselves.
std::vector<std::vector<std::uint32_t>> senders(const Builder& b,
                                                const std::vector<std::vector<RankId>>& groups) {
  std::vector<std::vector<std::uint32_t>> out(groups.size());
  for (std::size_t grp = 0; grp < groups.size(); ++grp) {
    const std::vector<RankId>& group = groups[grp];
    const auto m = static_cast<std::uint32_t>(group.size());
    for (std::uint32_t i = 0; i < m; ++i)
      if (b.touches(group[i], group[(i + 1) % m])) out[grp].push_back(i);
  }
  return out;
}

// Ring reduce-scatter inside each of `groups` (disjoint, m ranks each), one step of every group
// after the other, in each group the sends in for_each_send()'s order. `piece(grp, j, c)`:
// segment j of chunk c in group grp; index i owns segment i at the end, in its output.
// `own(i, piece)` is where index i's contribution lives; its first sends wait for
// `start(grp, i)`. Returns, per group, index and chunk, the op that finished the index's segment.
template <typename PieceOf, typename Own, typename Start>
std::vector<std::vector<std::vector<OpId>>> groups_reduce_scatter(
    Builder& b, const std::vector<std::vector<RankId>>& groups, std::uint32_t k, bool by_rank,
    PieceOf piece_of, Own own, Start start, const Lanes& lanes) {
  const auto n = groups.size();
  const auto m = static_cast<std::uint32_t>(groups.front().size());
  std::vector<std::vector<std::vector<OpId>>> done(
      n, std::vector<std::vector<OpId>>(m, std::vector<OpId>(k, kNoOp)));
  const auto active = senders(b, groups);
  struct Hold {
    Region where;
    OpId ready = kNoOp;
  };
  // hold[grp][i * k + c]: where index i of group grp holds its partial sum of chunk c.
  // Two arrays reused step after step: no allocation per group and step, and no clearing, since
  // a step writes every entry the next one reads (the same piece; an empty one neither does).
  std::vector<std::vector<Hold>> hold(n, std::vector<Hold>(std::size_t{m} * k));
  std::vector<std::vector<Hold>> next = hold;
  std::vector<OpId> first;
  for (std::uint32_t s = 0; s + 1 < m; ++s) {
    const bool last = s + 2 == m;
    for (std::size_t grp = 0; grp < n; ++grp) {
      const std::vector<RankId>& group = groups[grp];
      for_each_send(active[grp], k, by_rank, [&](std::uint32_t i, std::uint32_t c) {
        const std::uint32_t seg = (i + 2 * m - s - 1) % m;
        const std::uint32_t to = (i + 1) % m;
        const Piece piece = piece_of(grp, seg, c);
        if (piece.bytes == 0) return;
        const Hold& held = hold[grp][std::size_t{i} * k + c];
        const Region src = s == 0 ? own(i, piece) : held.where;
        if (s == 0) first = start(grp, i);
        const std::span<const OpId> deps =
            s == 0 ? std::span<const OpId>(first) : std::span<const OpId>(&held.ready, 1);
        const Region tmp = b.fresh_scratch(group[to], piece.bytes);
        const OpId got = b.move(group[i], src, group[to], tmp, piece.bytes, deps, {}, lanes, lanes);
        const Region dst =
            last ? Region{BufferId::output, piece.offset} : b.fresh_scratch(group[to], piece.bytes);
        const OpId red =
            b.reduce(group[to], dst, own(to, piece), tmp, piece.bytes, lanes.reduce, {got});
        next[grp][std::size_t{to} * k + c] = Hold{dst, red};
        if (last) done[grp][to][c] = red;
      });
    }
    std::swap(hold, next);
    // Every op of the next step waits for this step's reduction of its piece; the next phase's
    // first sends wait for the last step's.
    b.end_batch();
  }
  return done;
}

// Ring allgather inside each of `groups`, one step of every group after the other, in each
// group the sends in for_each_send()'s order: index i holds chunk c of segment i in its output
// once the ops start(grp, i, c) are done. `arrived(grp, i, op)` is told, as soon as it is added,
// of every op that wrote another segment to index i's output.
template <typename PieceOf, typename Start, typename Arrived>
void groups_allgather(Builder& b, const std::vector<std::vector<RankId>>& groups, std::uint32_t k,
                      bool by_rank, PieceOf piece_of, Start start, Arrived arrived,
                      const Lanes& lanes) {
  const auto n = groups.size();
  const auto m = static_cast<std::uint32_t>(groups.front().size());
  const auto active = senders(b, groups);
  // ready[grp][i * k + c]: the op after which index i holds what it forwards next of chunk c;
  // written by each step for the next, like hold above, and never cleared.
  std::vector<std::vector<OpId>> ready(n, std::vector<OpId>(std::size_t{m} * k, kNoOp));
  std::vector<std::vector<OpId>> next = ready;
  std::vector<OpId> first;
  for (std::uint32_t t = 0; t + 1 < m; ++t) {
    for (std::size_t grp = 0; grp < n; ++grp) {
      const std::vector<RankId>& group = groups[grp];
      for_each_send(active[grp], k, by_rank, [&](std::uint32_t i, std::uint32_t c) {
        const std::uint32_t seg = (i + m - t) % m;
        const std::uint32_t to = (i + 1) % m;
        const Piece piece = piece_of(grp, seg, c);
        if (piece.bytes == 0) return;
        if (t == 0) first = start(grp, i, c);
        const std::span<const OpId> deps =
            t == 0 ? std::span<const OpId>(first)
                   : std::span<const OpId>(&ready[grp][std::size_t{i} * k + c], 1);
        const Region at{BufferId::output, piece.offset};
        const OpId got = b.move(group[i], at, group[to], at, piece.bytes, deps, {}, lanes, lanes);
        next[grp][std::size_t{to} * k + c] = got;
        arrived(grp, to, got);
      });
    }
    std::swap(ready, next);
    // Every op of the next step waits for this step's arrival of its piece.
    b.end_batch();
  }
}

}  // namespace

void hierarchical(Builder& b, const Job& job, const std::vector<std::vector<RankId>>& servers) {
  if (job.collective != Collective::allreduce)
    throw InternalError("hier: collective not dispatched");
  // Phase 3 waits for phase 2's reductions, finished before the rail allgather between them.
  b.plan().waits_on_finished = true;
  const auto S = static_cast<std::uint32_t>(servers.size());
  const auto g = static_cast<std::uint32_t>(servers.front().size());
  const std::uint32_t k = job.k;
  const Lanes lanes = Lanes::channel(0);
  const auto chunks = split({0, job.n}, k, job.element);
  // seg[l][c]: local index l's segment of chunk c.
  std::vector<std::vector<Piece>> seg(g, std::vector<Piece>(k));
  for (std::uint32_t c = 0; c < k; ++c) {
    const auto parts = split(chunks[c], g, job.element);
    for (std::uint32_t l = 0; l < g; ++l) seg[l][c] = parts[l];
  }
  const auto server_piece = [&](std::size_t, std::uint32_t l, std::uint32_t c) {
    return seg[l][c];
  };
  // ops[rank]: the ops of phase 1 that finished the rank's segment, one per chunk; the next
  // phase's first sends wait for them.
  std::vector<std::vector<OpId>> ops(job.p);
  // Each rank's chunks of a step together, unless a ring inside a server or along a rail is
  // staged through host memory (may_run_order()).
  const bool by_rank = may_run_order(job, [&] {
    for (std::uint32_t s = 0; s < S; ++s)
      for (std::uint32_t l = 0; l < g; ++l)
        if (b.staged(servers[s][l], servers[s][(l + 1) % g]) ||
            b.staged(servers[s][l], servers[(s + 1) % S][l]))
          return true;
    return false;
  });

  if (g > 1) {
    const auto done = groups_reduce_scatter(
        b, servers, k, by_rank, server_piece,
        [](std::uint32_t, Piece p) {
          return Region{BufferId::input, p.offset};
        },
        [](std::size_t, std::uint32_t) { return std::vector<OpId>{}; }, lanes);
    for (std::uint32_t s = 0; s < S; ++s)
      for (std::uint32_t l = 0; l < g; ++l) ops[servers[s][l]] = done[s][l];
  }
  // tails[rank]: the last op of each of the rank's streams among those of phase 2 that wrote its
  // output (the same condition as all of them, see StreamTails).
  std::vector<StreamTails> tails(job.p);
  if (S > 1) {
    // rails[l][s]: local index l of server s.
    std::vector<std::vector<RankId>> rails(g, std::vector<RankId>(S));
    for (std::uint32_t s = 0; s < S; ++s)
      for (std::uint32_t l = 0; l < g; ++l) rails[l][s] = servers[s][l];
    // Segment l of chunk c is cut into S sub-pieces, one per server.
    const auto rail_piece = [&](std::size_t l, std::uint32_t s, std::uint32_t c) {
      return nth_piece(seg[l][c], S, s, job.element);
    };
    // With one GPU per server the contribution is still in the input.
    const BufferId mine = g > 1 ? BufferId::output : BufferId::input;
    const auto reduced = groups_reduce_scatter(
        b, rails, k, by_rank, rail_piece,
        [&](std::uint32_t, Piece p) {
          return Region{mine, p.offset};
        },
        [&](std::size_t l, std::uint32_t s) { return ops[rails[l][s]]; }, lanes);
    for (std::uint32_t l = 0; l < g; ++l)
      for (std::uint32_t s = 0; s < S; ++s)
        for (OpId op : reduced[l][s]) tails[rails[l][s]].add(lanes.reduce, op);
    // Each chunk's allgather follows that chunk's reduce-scatter, as in the ring allreduce.
    groups_allgather(
        b, rails, k, by_rank, rail_piece,
        [&](std::size_t l, std::uint32_t s, std::uint32_t c) {
          return std::vector<OpId>{reduced[l][s][c]};
        },
        [&](std::size_t l, std::uint32_t s, OpId op) {
          // Just added, so still in the plan; kNoOp on a rank a rotated plan does not hold.
          if (op != kNoOp) tails[rails[l][s]].add(b.plan().stream(op), op);
        },
        lanes);
  }
  if (g > 1) {
    // Phase 3 starts on a rank once phase 2 is complete there, or phase 1 on one server.
    groups_allgather(
        b, servers, k, by_rank, server_piece,
        [&](std::size_t s, std::uint32_t l, std::uint32_t) {
          const RankId r = servers[s][l];
          return S > 1 ? tails[r].ops() : ops[r];
        },
        [](std::size_t, std::uint32_t, OpId) {}, lanes);
  }
}

}  // namespace collsim::sched::detail
