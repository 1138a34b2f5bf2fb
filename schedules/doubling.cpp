// Recursive doubling (rd) and recursive halving-doubling (rhd, Rabenseifner) allreduce.
//
// Both run on a power-of-two core of p' = 2^floor(log2 p) ranks. With r = p - p' extra ranks,
// rank 2i (i < r) first hands its chunk to rank 2i + 1, which adds it and stands for both in the
// core; at the end 2i + 1 sends the result back. Core ranks are 2i + 1 (i < r) and 2r .. p-1.
//  rd:  log2 p' steps; at step s core rank j exchanges its whole partial sum with j xor 2^s.
//  rhd: reduce-scatter by recursive halving (step s: exchange half of the current range with
//       j xor p'/2^(s+1), keep the lower half when that bit of j is clear), then allgather by
//       recursive doubling in the reverse order.
// Streams: the core's sends, receives and reductions on channel 0, the extra ranks' hand-over
// transfers on channel 1 (their reductions share channel 0's stream, so a GPU never runs two
// reductions at once); every stream takes its work step by step, chunk by chunk.
#include <vector>

#include "schedules/algorithms.hpp"
#include "topology/error.hpp"

namespace collsim::sched::detail {

namespace {

struct Core {
  std::vector<RankId> ranks;  // core index -> rank
  RankId extra = 0;           // r
  RankId size = 0;            // p'
};

Core make_core(RankId p) {
  Core c;
  c.size = 1;
  while (c.size * 2 <= p) c.size *= 2;
  c.extra = p - c.size;
  for (RankId i = 0; i < c.extra; ++i) c.ranks.push_back(2 * i + 1);
  for (RankId r = 2 * c.extra; r < p; ++r) c.ranks.push_back(r);
  return c;
}

struct Partial {
  Region where;
  std::vector<OpId> ready;  // ops that together make `where` current
};

}  // namespace

// Shared by rd and rhd: the hand-over before the core and the result sent back after it.
static void doubling_allreduce(Builder& b, const Job& job, bool halving) {
  const Core core = make_core(job.p);
  const Lanes main = job.pipelined ? Lanes::channel(0) : Lanes::single();
  Lanes side = job.pipelined ? Lanes::channel(1) : Lanes::single();
  side.reduce = main.reduce;
  const auto chunks = split({0, job.n}, job.k, job.element);
  const RankId q = core.size;

  // state[j][c]: core index j's partial sum of chunk c (rd), or of its current range (rhd).
  std::vector<std::vector<Partial>> state(q, std::vector<Partial>(job.k));
  for (RankId j = 0; j < q; ++j)
    for (std::uint32_t c = 0; c < job.k; ++c)
      state[j][c].where = {BufferId::input, chunks[c].offset};

  // Hand-over: 2i -> 2i + 1.
  for (std::uint32_t c = 0; c < job.k; ++c) {
    if (chunks[c].bytes == 0) continue;
    for (RankId i = 0; i < core.extra; ++i) {
      const Region tmp = b.fresh_scratch(2 * i + 1, chunks[c].bytes);
      const OpId got = b.move(2 * i, {BufferId::input, chunks[c].offset}, 2 * i + 1, tmp,
                              chunks[c].bytes, {}, side, side);
      const Region dst = halving ? Region{BufferId::output, chunks[c].offset}
                                 : b.fresh_scratch(2 * i + 1, chunks[c].bytes);
      const OpId red = b.reduce(2 * i + 1, dst, {BufferId::input, chunks[c].offset}, tmp,
                                chunks[c].bytes, main.reduce, {got});
      state[i][c] = Partial{dst, {red}};
    }
  }

  // range[j][c]: the bytes of chunk c core index j currently holds (rhd).
  std::vector<std::vector<Piece>> range(q, chunks);
  std::uint32_t steps = 0;
  while ((RankId{1} << steps) < q) ++steps;

  if (!halving) {
    for (std::uint32_t s = 0; s < steps; ++s) {
      const bool last = s + 1 == steps;
      std::vector<std::vector<Partial>> next = state;
      for (std::uint32_t c = 0; c < job.k; ++c) {
        const Piece piece = chunks[c];
        if (piece.bytes == 0) continue;
        std::vector<std::pair<OpId, Region>> got(q);
        for (RankId j = 0; j < q; ++j) {
          const RankId partner = j ^ (RankId{1} << s);
          const Region tmp = b.fresh_scratch(core.ranks[partner], piece.bytes);
          got[partner] = {b.move(core.ranks[j], state[j][c].where, core.ranks[partner], tmp,
                                 piece.bytes, state[j][c].ready, {}, main, main),
                          tmp};
        }
        for (RankId j = 0; j < q; ++j) {
          const Region dst = last ? Region{BufferId::output, piece.offset}
                                  : b.fresh_scratch(core.ranks[j], piece.bytes);
          const OpId red = b.reduce(core.ranks[j], dst, state[j][c].where, got[j].second,
                                    piece.bytes, main.reduce, {got[j].first});
          next[j][c] = Partial{dst, {red}};
        }
      }
      state = std::move(next);
    }
  } else {
    // Reduce-scatter by halving; partial sums accumulate in the output, halves never overlap.
    std::vector<std::vector<std::vector<OpId>>> writes(
        q, std::vector<std::vector<OpId>>(job.k));  // ops that wrote the rank's current range
    for (std::uint32_t s = 0; s < steps; ++s) {
      const RankId bit = q >> (s + 1);
      std::vector<std::vector<Piece>> next_range = range;
      for (std::uint32_t c = 0; c < job.k; ++c) {
        if (chunks[c].bytes == 0) continue;
        std::vector<std::pair<OpId, Region>> got(q);
        for (RankId j = 0; j < q; ++j) {
          const auto halves = split(range[j][c], 2, job.element);
          const bool low = (j & bit) == 0;
          const Piece give = halves[low ? 1 : 0];
          next_range[j][c] = halves[low ? 0 : 1];
          const RankId partner = j ^ bit;
          const Region src{state[j][c].where.buffer, give.offset};
          const Region tmp = b.fresh_scratch(core.ranks[partner], give.bytes);
          got[partner] = {give.bytes ? b.move(core.ranks[j], src, core.ranks[partner], tmp,
                                              give.bytes, state[j][c].ready, {}, main, main)
                                     : kNoOp,
                          tmp};
        }
        for (RankId j = 0; j < q; ++j) {
          const Piece keep = next_range[j][c];
          if (keep.bytes == 0) continue;
          const OpId red = b.reduce(core.ranks[j], {BufferId::output, keep.offset},
                                    {state[j][c].where.buffer, keep.offset}, got[j].second,
                                    keep.bytes, main.reduce, {got[j].first});
          state[j][c] = Partial{{BufferId::output, keep.offset}, {red}};
        }
      }
      range = std::move(next_range);
    }
    // Allgather by doubling: exchange the current range, in the reverse order of the halving.
    for (std::uint32_t s = steps; s-- > 0;) {
      const RankId bit = q >> (s + 1);
      for (std::uint32_t c = 0; c < job.k; ++c) {
        if (chunks[c].bytes == 0) continue;
        std::vector<OpId> got(q, kNoOp);
        for (RankId j = 0; j < q; ++j) {
          const RankId partner = j ^ bit;
          const Piece mine = range[j][c];
          if (mine.bytes == 0) continue;
          got[partner] = b.move(core.ranks[j], {BufferId::output, mine.offset}, core.ranks[partner],
                                {BufferId::output, mine.offset}, mine.bytes, state[j][c].ready, {},
                                main, main);
        }
        std::vector<std::vector<Piece>> grown = range;
        for (RankId j = 0; j < q; ++j) {
          const Piece a = range[j][c], o = range[j ^ bit][c];
          grown[j][c] = Piece{std::min(a.offset, o.offset), a.bytes + o.bytes};
          if (got[j] != kNoOp) state[j][c].ready.push_back(got[j]);
        }
        for (RankId j = 0; j < q; ++j) range[j][c] = grown[j][c];
      }
    }
  }

  // Results back to the extra ranks.
  for (std::uint32_t c = 0; c < job.k; ++c) {
    if (chunks[c].bytes == 0) continue;
    for (RankId i = 0; i < core.extra; ++i)
      b.move(2 * i + 1, {BufferId::output, chunks[c].offset}, 2 * i,
             {BufferId::output, chunks[c].offset}, chunks[c].bytes, state[i][c].ready, {}, side,
             side);
  }
}

void halving_doubling(Builder& b, const Job& job) {
  if (job.collective != Collective::allreduce)
    throw InternalError("rhd: collective not dispatched");
  doubling_allreduce(b, job, true);
}

void recursive_doubling(Builder& b, const Job& job) {
  if (job.collective != Collective::allreduce) throw InternalError("rd: collective not dispatched");
  doubling_allreduce(b, job, false);
}

}  // namespace collsim::sched::detail
