// Hierarchical allreduce: a ring reduce-scatter inside each server (NVLink/PCIe), a ring
// allreduce of each GPU's segment across servers among the GPUs with the same local index (one
// rail per local index), and a ring allgather inside each server. The buffer is split into k
// chunks first, so every phase works on whole chunks; phases pipeline their chunks internally
// and start on a rank once its previous phase is complete, which keeps the phases on the
// rank's streams in order and the closed form a sum of three ring terms.
#include <vector>

#include "schedules/algorithms.hpp"
#include "topology/error.hpp"

namespace collsim::sched::detail {

namespace {

// pieces[j][c]: segment j of chunk c. Ring reduce-scatter over `group` (index i owns segment
// i at the end, in its output). `own(i, piece)` is where index i's contribution lives; its
// first sends wait for `start[i]`. Returns the ops that finished each index's segment.
template <typename Own>
std::vector<std::vector<OpId>> group_reduce_scatter(Builder& b, const std::vector<RankId>& group,
                                                    const std::vector<std::vector<Piece>>& pieces,
                                                    Own own,
                                                    const std::vector<std::vector<OpId>>& start,
                                                    const Lanes& lanes) {
  const auto m = static_cast<std::uint32_t>(group.size());
  const auto k = static_cast<std::uint32_t>(pieces.front().size());
  std::vector<std::vector<OpId>> done(m, std::vector<OpId>(k, kNoOp));
  struct Hold {
    Region where;
    OpId ready = kNoOp;
  };
  std::vector<std::vector<Hold>> hold(m, std::vector<Hold>(k));
  for (std::uint32_t s = 0; s + 1 < m; ++s) {
    const bool last = s + 2 == m;
    std::vector<std::vector<Hold>> next(m, std::vector<Hold>(k));
    for (std::uint32_t c = 0; c < k; ++c) {
      for (std::uint32_t i = 0; i < m; ++i) {
        const std::uint32_t seg = (i + 2 * m - s - 1) % m;
        const std::uint32_t to = (i + 1) % m;
        const Piece piece = pieces[seg][c];
        if (piece.bytes == 0) continue;
        const Region src = s == 0 ? own(i, piece) : hold[i][c].where;
        std::vector<OpId> deps = s == 0 ? start[i] : std::vector<OpId>{hold[i][c].ready};
        const Region tmp = b.fresh_scratch(group[to], piece.bytes);
        const OpId got = b.move(group[i], src, group[to], tmp, piece.bytes, deps, {}, lanes, lanes);
        const Region dst =
            last ? Region{BufferId::output, piece.offset} : b.fresh_scratch(group[to], piece.bytes);
        const OpId red =
            b.reduce(group[to], dst, own(to, piece), tmp, piece.bytes, lanes.reduce, {got});
        next[to][c] = Hold{dst, red};
        if (last) done[to][c] = red;
      }
    }
    hold = std::move(next);
  }
  return done;
}

// Ring allgather over `group`: index i holds chunk c of segment i in its output once the ops
// start(i, c) are done.
// Returns, per index, the ops that wrote the other segments.
template <typename Start>
std::vector<std::vector<OpId>> group_allgather(Builder& b, const std::vector<RankId>& group,
                                               const std::vector<std::vector<Piece>>& pieces,
                                               Start start, const Lanes& lanes) {
  const auto m = static_cast<std::uint32_t>(group.size());
  const auto k = static_cast<std::uint32_t>(pieces.front().size());
  std::vector<std::vector<OpId>> done(m);
  std::vector<std::vector<OpId>> ready(m, std::vector<OpId>(k, kNoOp));
  for (std::uint32_t t = 0; t + 1 < m; ++t) {
    std::vector<std::vector<OpId>> next(m, std::vector<OpId>(k, kNoOp));
    for (std::uint32_t c = 0; c < k; ++c) {
      for (std::uint32_t i = 0; i < m; ++i) {
        const std::uint32_t seg = (i + m - t) % m;
        const std::uint32_t to = (i + 1) % m;
        const Piece piece = pieces[seg][c];
        if (piece.bytes == 0) continue;
        std::vector<OpId> deps = t == 0 ? start(i, c) : std::vector<OpId>{ready[i][c]};
        const Region at{BufferId::output, piece.offset};
        next[to][c] = b.move(group[i], at, group[to], at, piece.bytes, deps, {}, lanes, lanes);
        done[to].push_back(next[to][c]);
      }
    }
    ready = std::move(next);
  }
  return done;
}

}  // namespace

void hierarchical(Builder& b, const Job& job, const std::vector<std::vector<RankId>>& servers) {
  if (job.collective != Collective::allreduce)
    throw InternalError("hier: collective not dispatched");
  const auto S = static_cast<std::uint32_t>(servers.size());
  const auto g = static_cast<std::uint32_t>(servers.front().size());
  const Lanes lanes = Lanes::channel(0);
  const auto chunks = split({0, job.n}, job.k, job.element);
  // seg[l][c]: local index l's segment of chunk c.
  std::vector<std::vector<Piece>> seg(g, std::vector<Piece>(job.k));
  for (std::uint32_t c = 0; c < job.k; ++c) {
    const auto parts = split(chunks[c], g, job.element);
    for (std::uint32_t l = 0; l < g; ++l) seg[l][c] = parts[l];
  }
  // ops[rank]: everything of the rank's latest phase that wrote its output.
  std::vector<std::vector<OpId>> ops(job.p);

  if (g > 1) {
    for (const auto& server : servers) {
      const auto done = group_reduce_scatter(
          b, server, seg,
          [](std::uint32_t, Piece p) {
            return Region{BufferId::input, p.offset};
          },
          std::vector<std::vector<OpId>>(g), lanes);
      for (std::uint32_t l = 0; l < g; ++l) ops[server[l]] = done[l];
    }
  }
  if (S > 1) {
    for (std::uint32_t l = 0; l < g; ++l) {
      std::vector<RankId> rail(S);
      for (std::uint32_t s = 0; s < S; ++s) rail[s] = servers[s][l];
      std::vector<std::vector<Piece>> sub(S, std::vector<Piece>(job.k));
      for (std::uint32_t c = 0; c < job.k; ++c) {
        const auto parts = split(seg[l][c], S, job.element);
        for (std::uint32_t s = 0; s < S; ++s) sub[s][c] = parts[s];
      }
      std::vector<std::vector<OpId>> start(S);
      for (std::uint32_t s = 0; s < S; ++s) start[s] = ops[rail[s]];
      // With one GPU per server the contribution is still in the input.
      const BufferId mine = g > 1 ? BufferId::output : BufferId::input;
      const auto reduced = group_reduce_scatter(
          b, rail, sub,
          [&](std::uint32_t, Piece p) {
            return Region{mine, p.offset};
          },
          start, lanes);
      // Each chunk's allgather follows that chunk's reduce-scatter, as in the ring allreduce.
      const auto gathered = group_allgather(
          b, rail, sub,
          [&](std::uint32_t i, std::uint32_t c) { return std::vector<OpId>{reduced[i][c]}; },
          lanes);
      for (std::uint32_t s = 0; s < S; ++s) {
        ops[rail[s]] = reduced[s];
        ops[rail[s]].insert(ops[rail[s]].end(), gathered[s].begin(), gathered[s].end());
      }
    }
  }
  if (g > 1) {
    for (const auto& server : servers) {
      std::vector<std::vector<OpId>> start(g);
      for (std::uint32_t l = 0; l < g; ++l) start[l] = ops[server[l]];
      group_allgather(
          b, server, seg, [&](std::uint32_t i, std::uint32_t) { return start[i]; }, lanes);
    }
  }
}

}  // namespace collsim::sched::detail
