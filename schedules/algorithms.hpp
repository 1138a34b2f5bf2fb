#pragma once
// The generators behind generate(), one file per algorithm family. Each adds the ops of one
// (algorithm, collective) pair to the builder's plan; generate() has already checked that the
// pair fits (docs/algorithms.md describes every schedule and its closed form).
#include <vector>

#include "schedules/builder.hpp"

namespace collsim::sched::detail {

struct Job {
  Collective collective = Collective::allreduce;
  RankId p = 0;
  Bytes n = 0;          // Plan::size
  std::uint32_t k = 1;  // chunks
  RankId root = 0;
  std::size_t element = 4;
  bool pipelined = true;  // false only for naive
  bool run_order = true;  // PlanRequest::run_order
};

// Whether a generator may list its ops in the order they run (each rank's chunks of a step
// together in the ring and hier, the tree's waves) rather than chunk by chunk: only where that
// changes no result. Not where one stream carries every role (a stream runs its ops in plan
// order), nor where `any_staged()`, a transfer through host memory, whose copies may wait for
// copy engines, handed out in plan order among copies ready at the same instant
// (sim/copy_engines.hpp).
template <typename AnyStaged>
bool may_run_order(const Job& job, AnyStaged any_staged) {
  return job.pipelined && job.run_order && !any_staged();
}

// body(sender, c) for every sender of a ring step and chunk c: each sender's chunks together
// where `by_rank`, else chunk by chunk over the senders. The ops a rank runs one after the other
// are then neighbours in the plan, and in the engine's records: chunk by chunk, at k = 64 on 1024
// ranks, they lay 3p ops (96 KiB of records) apart. Both orders give every op the same
// dependencies, the same stream predecessors and the same order among the ops waiting for it, so
// where may_run_order() allows, the engine runs them alike to the bit.
template <typename Senders, typename Body>
void for_each_send(const Senders& senders, std::uint32_t k, bool by_rank, Body&& body) {
  if (by_rank) {
    for (const auto r : senders)
      for (std::uint32_t c = 0; c < k; ++c) body(r, c);
  } else {
    for (std::uint32_t c = 0; c < k; ++c)
      for (const auto r : senders) body(r, c);
  }
}

void ring(Builder& b, const Job& job);
void tree(Builder& b, const Job& job);
void halving_doubling(Builder& b, const Job& job);    // rhd
void recursive_doubling(Builder& b, const Job& job);  // rd
void direct(Builder& b, const Job& job);
void pairwise(Builder& b, const Job& job);  // reduce_scatter, allgather, alltoall
void hierarchical(Builder& b, const Job& job, const std::vector<std::vector<RankId>>& servers);
void naive(Builder& b, const Job& job);
// One rank: the output is a copy of the input.
void local_copy(Builder& b, const Job& job);

// Binary trees used by `tree` (and by the closed forms): heap-shaped, positions 0..p-1 with
// parent (i-1)/2. `ranks[i]` is the rank at position i.
struct BinaryTree {
  std::vector<RankId> ranks;
  RankId parent_of(std::uint32_t position) const;  // kNoRank for the root
};
// The two trees of the double binary tree. For p <= 3 there is no pair of trees without a
// shared edge, and the second tree is empty (one tree carries all the data).
std::vector<BinaryTree> double_binary_tree(RankId p);

}  // namespace collsim::sched::detail
