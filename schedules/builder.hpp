#pragma once
// Shared machinery of the schedule generators: element-aligned splitting, fresh scratch and host
// staging regions, and point-to-point moves whose transport follows the topology (peer-to-peer,
// GPUDirect RDMA, or staging through host memory with explicit copy ops).
#include <array>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

#include "schedules/plan.hpp"
#include "topology/routing.hpp"

namespace collsim::sched {

// A byte range of a rank's buffer; offsets and sizes are whole elements.
struct Piece {
  Bytes offset = 0;
  Bytes bytes = 0;
};

// Splits [offset, offset + bytes) into `parts` ranges of whole elements; the first
// (elements % parts) ranges hold one element more. Empty ranges are kept so indices line up.
std::vector<Piece> split(Piece whole, std::uint32_t parts, std::size_t element);
// split(whole, parts, element)[i] in O(1).
Piece nth_piece(Piece whole, std::uint32_t parts, std::uint32_t i, std::size_t element);

// The streams one logical channel of a rank uses. Each role gets its own stream so that a
// chunk's copy, transfer and reduction overlap with its neighbours' (pipelining); the naive
// schedule maps every role to stream 0, which serialises them.
struct Lanes {
  StreamId send = 0, recv = 1, reduce = 2, d2h = 3, h2d = 4, copy = 5;
  static constexpr StreamId kPerChannel = 6;
  static Lanes channel(std::uint32_t index);  // index 0 is the lanes above
  static Lanes single();                      // every role on stream 0
};

class Builder {
 public:
  Builder(const topo::Router& router, Plan& plan, std::size_t element);

  Plan& plan() { return plan_; }
  std::size_t element() const { return element_; }

  // Streaming (sim::simulate_streaming): the engine runs the ops built so far each time a
  // generator ends a batch, and may drop the ones it has finished from the plan. A generator
  // may end a batch only where every op of the next batch waits, through a dependency or its
  // stream, on an op of this batch or the next (so that nothing of it could have started while
  // this batch was the newest), and never between a send and its recv. Without a hook,
  // end_batch() does nothing and the plan is built whole.
  void on_batch(std::function<void()> hook) { batch_hook_ = std::move(hook); }
  bool streaming() const { return static_cast<bool>(batch_hook_); }
  void end_batch() {
    if (!pending_.empty()) throw_unmatched();
    if (batch_hook_) batch_hook_();
  }
  // After the last op: every send found its recv (only a rotated plan can leave one open).
  void finish() {
    if (!pending_.empty()) throw_unmatched();
  }

  // Whether the plan holds `rank`'s ops (Plan::rotation), and whether a transfer between two
  // ranks puts an op in it. Ops of other ranks are not added: reduce(), copy() and move()
  // return kNoOp for them, and a generator may skip such transfers altogether.
  bool holds(RankId rank) const { return rank < held_; }
  bool touches(RankId from, RankId to) const { return from < held_ || to < held_; }

  // A scratch region of `bytes` never used before on `rank`: reusing none removes every
  // write-after-read hazard between pipelined chunks at the price of scratch memory.
  // Inline, as reduce(): a ring step calls each once per transfer.
  Region fresh_scratch(RankId rank, Bytes bytes) {
    const Region r{BufferId::scratch, scratch_used_[rank]};
    scratch_used_[rank] += bytes;
    return r;
  }
  Region fresh_host(RankId rank, Bytes bytes) {
    const Region r{BufferId::host, host_used_[rank]};
    host_used_[rank] += bytes;
    return r;
  }

  // True when data between the two ranks' GPUs must be staged through host memory.
  bool staged(RankId from, RankId to) const;

  // Moves `bytes` from `src` on `from` to `dst` on `to`. `after_src` are ops on `from` that must
  // finish before `src` is read, `after_dst` ops on `to` that must finish before `dst` is
  // written. Returns the op after which the data is in `dst` (a recv, or the h2d copy when
  // staged). kNoOp entries in the spans are ignored.
  OpId move(RankId from, Region src, RankId to, Region dst, Bytes bytes,
            std::span<const OpId> after_src, std::span<const OpId> after_dst,
            const Lanes& from_lanes, const Lanes& to_lanes);
  OpId move(RankId from, Region src, RankId to, Region dst, Bytes bytes,
            std::initializer_list<OpId> after_src, const Lanes& from_lanes, const Lanes& to_lanes) {
    return move(from, src, to, dst, bytes,
                std::span<const OpId>(after_src.begin(), after_src.size()), {}, from_lanes,
                to_lanes);
  }

  OpId reduce(RankId rank, Region dst, Region a, Region b, Bytes bytes, StreamId stream,
              std::initializer_list<OpId> deps) {
    if (!holds(rank)) return kNoOp;
    return plan_.add_reduce(rank, stream, dst, a, b, bytes,
                            std::span<const OpId>(deps.begin(), deps.size()));
  }
  OpId copy(RankId rank, Region dst, Region src, Bytes bytes, StreamId stream,
            std::initializer_list<OpId> deps);

 private:
  const topo::Router& router_;
  Plan& plan_;
  std::size_t element_;
  std::vector<Bytes> scratch_used_;
  std::vector<Bytes> host_used_;
  // Each rank's server (topo::kNone outside one): staged() asks for every transfer, and reading
  // it from the topology's large node records missed the cache each time.
  std::vector<std::int32_t> rank_server_;
  std::function<void()> batch_hook_;

  // A rotated plan's transfers between a held rank and one that is not: a send whose recv is
  // the recv of its image on a held rank, or the other way round, waiting for the other end
  // (generators add both ends in the same step, in the same order for every image). Keyed by
  // the transfer moved so that its receiver is held.
  void pair_up(RankId from, RankId to, OpId op, bool is_send);
  [[noreturn]] void throw_unmatched() const;
  struct Unmatched {
    std::vector<OpId> ops;  // all sends or all recvs, oldest first from `head`
    std::size_t head = 0;
    bool sends = false;
  };
  RankId held_ = 0;
  std::unordered_map<std::uint64_t, Unmatched> pending_;
};

}  // namespace collsim::sched
