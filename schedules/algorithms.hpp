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

void ring(Builder& b, const Job& job);
void tree(Builder& b, const Job& job);
void halving_doubling(Builder& b, const Job& job);    // rhd
void recursive_doubling(Builder& b, const Job& job);  // rd
void direct(Builder& b, const Job& job);
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
