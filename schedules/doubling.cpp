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
#include <algorithm>
#include <cstdint>
#include <span>
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

}  // namespace

// Shared by rd and rhd: the hand-over before the core and the result sent back after it.
// The state of every (core index, chunk) pair lives in flat arrays indexed j * k + c: these
// plans are generated for every point of a sweep, and a vector per pair, copied at every step,
// cost more than the ops themselves.
static void doubling_allreduce(Builder& b, const Job& job, bool halving) {
  const Core core = make_core(job.p);
  const Lanes main = job.pipelined ? Lanes::channel(0) : Lanes::single();
  Lanes side = job.pipelined ? Lanes::channel(1) : Lanes::single();
  side.reduce = main.reduce;
  const auto chunks = split({0, job.n}, job.k, job.element);
  const RankId q = core.size;
  const std::uint32_t k = job.k;
  const auto at = [k](RankId j, std::uint32_t c) { return std::size_t{j} * k + c; };
  std::uint32_t steps = 0;
  while ((RankId{1} << steps) < q) ++steps;

  // where[at(j, c)]: core index j's partial sum of chunk c (rd), or of its current range (rhd).
  // The ops that together make it current are ready[at(j, c) * depth ...], ready_count[at(j, c)]
  // of them: one after each reduction, and in rhd's allgather one more for each range received.
  const std::uint32_t depth = halving ? steps + 1 : 1;
  std::vector<Region> where(std::size_t{q} * k);
  std::vector<OpId> ready(where.size() * depth, kNoOp);
  std::vector<std::uint8_t> ready_count(where.size(), 0);
  const auto ready_of = [&](std::size_t i) {
    return std::span<const OpId>(&ready[i * depth], ready_count[i]);
  };
  const auto set_ready = [&](std::size_t i, OpId op) {
    ready[i * depth] = op;
    ready_count[i] = 1;
  };
  for (RankId j = 0; j < q; ++j)
    for (std::uint32_t c = 0; c < k; ++c) where[at(j, c)] = {BufferId::input, chunks[c].offset};

  // Hand-over: 2i -> 2i + 1.
  for (std::uint32_t c = 0; c < k; ++c) {
    if (chunks[c].bytes == 0) continue;
    for (RankId i = 0; i < core.extra; ++i) {
      const Region tmp = b.fresh_scratch(2 * i + 1, chunks[c].bytes);
      const OpId got = b.move(2 * i, {BufferId::input, chunks[c].offset}, 2 * i + 1, tmp,
                              chunks[c].bytes, {}, side, side);
      const Region dst = halving ? Region{BufferId::output, chunks[c].offset}
                                 : b.fresh_scratch(2 * i + 1, chunks[c].bytes);
      const OpId red = b.reduce(2 * i + 1, dst, {BufferId::input, chunks[c].offset}, tmp,
                                chunks[c].bytes, main.reduce, {got});
      where[at(i, c)] = dst;
      set_ready(at(i, c), red);
    }
  }

  // Per step and chunk: what each core index received, indexed by the receiver.
  std::vector<std::pair<OpId, Region>> got(q);
  if (!halving) {
    for (std::uint32_t s = 0; s < steps; ++s) {
      const bool last = s + 1 == steps;
      for (std::uint32_t c = 0; c < k; ++c) {
        const Piece piece = chunks[c];
        if (piece.bytes == 0) continue;
        for (RankId j = 0; j < q; ++j) {
          const RankId partner = j ^ (RankId{1} << s);
          const Region tmp = b.fresh_scratch(core.ranks[partner], piece.bytes);
          got[partner] = {b.move(core.ranks[j], where[at(j, c)], core.ranks[partner], tmp,
                                 piece.bytes, ready_of(at(j, c)), {}, main, main),
                          tmp};
        }
        // Every send of the step has read its partial sum: each may now be replaced.
        for (RankId j = 0; j < q; ++j) {
          const Region dst = last ? Region{BufferId::output, piece.offset}
                                  : b.fresh_scratch(core.ranks[j], piece.bytes);
          const OpId red = b.reduce(core.ranks[j], dst, where[at(j, c)], got[j].second, piece.bytes,
                                    main.reduce, {got[j].first});
          where[at(j, c)] = dst;
          set_ready(at(j, c), red);
        }
      }
    }
  } else {
    // range[at(j, c)]: the bytes of chunk c core index j currently holds.
    std::vector<Piece> range(where.size());
    for (RankId j = 0; j < q; ++j)
      for (std::uint32_t c = 0; c < k; ++c) range[at(j, c)] = chunks[c];
    // Reduce-scatter by halving; partial sums accumulate in the output, halves never overlap.
    for (std::uint32_t s = 0; s < steps; ++s) {
      const RankId bit = q >> (s + 1);
      for (std::uint32_t c = 0; c < k; ++c) {
        if (chunks[c].bytes == 0) continue;
        for (RankId j = 0; j < q; ++j) {
          const std::size_t i = at(j, c);
          const bool low = (j & bit) == 0;
          const Piece give = nth_piece(range[i], 2, low ? 1 : 0, job.element);
          range[i] = nth_piece(range[i], 2, low ? 0 : 1, job.element);
          const RankId partner = j ^ bit;
          const Region src{where[i].buffer, give.offset};
          const Region tmp = b.fresh_scratch(core.ranks[partner], give.bytes);
          got[partner] = {give.bytes ? b.move(core.ranks[j], src, core.ranks[partner], tmp,
                                              give.bytes, ready_of(i), {}, main, main)
                                     : kNoOp,
                          tmp};
        }
        for (RankId j = 0; j < q; ++j) {
          const std::size_t i = at(j, c);
          const Piece keep = range[i];
          if (keep.bytes == 0) continue;
          const OpId red = b.reduce(core.ranks[j], {BufferId::output, keep.offset},
                                    {where[i].buffer, keep.offset}, got[j].second, keep.bytes,
                                    main.reduce, {got[j].first});
          where[i] = {BufferId::output, keep.offset};
          set_ready(i, red);
        }
      }
    }
    // Allgather by doubling: exchange the current range, in the reverse order of the halving.
    for (std::uint32_t s = steps; s-- > 0;) {
      const RankId bit = q >> (s + 1);
      for (std::uint32_t c = 0; c < k; ++c) {
        if (chunks[c].bytes == 0) continue;
        for (RankId j = 0; j < q; ++j) {
          const Piece mine = range[at(j, c)];
          got[j ^ bit].first = mine.bytes == 0
                                   ? kNoOp
                                   : b.move(core.ranks[j], {BufferId::output, mine.offset},
                                            core.ranks[j ^ bit], {BufferId::output, mine.offset},
                                            mine.bytes, ready_of(at(j, c)), {}, main, main);
        }
        for (RankId j = 0; j < q; ++j) {
          const std::size_t i = at(j, c);
          if (got[j].first != kNoOp) ready[i * depth + ready_count[i]++] = got[j].first;
          // Both partners now hold the union of their two ranges.
          if ((j & bit) == 0) {
            const std::size_t o = at(j ^ bit, c);
            const Piece joined{std::min(range[i].offset, range[o].offset),
                               range[i].bytes + range[o].bytes};
            range[i] = range[o] = joined;
          }
        }
      }
    }
  }

  // Results back to the extra ranks.
  for (std::uint32_t c = 0; c < k; ++c) {
    if (chunks[c].bytes == 0) continue;
    for (RankId i = 0; i < core.extra; ++i)
      b.move(2 * i + 1, {BufferId::output, chunks[c].offset}, 2 * i,
             {BufferId::output, chunks[c].offset}, chunks[c].bytes, ready_of(at(i, c)), {}, side,
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
