#pragma once
// Known inputs and exact expected outputs, so that an execution can be checked element by element
// (the "#wrong" column of nccl-tests).
//
// Input element e of rank r holds a small integer chosen so that every partial sum a reduction can
// form is an integer exactly representable in the plan's dtype (fp32: 2^24, fp16: 2048,
// bf16: 256). The sum is then exact in any order and a correct plan yields bit-exact outputs.
#include <cstdint>
#include <span>

#include "schedules/plan.hpp"

namespace collsim::backend {

class DataPattern {
 public:
  explicit DataPattern(const sched::Plan& plan);

  // The value of input element `element` of `rank`.
  std::int64_t input(sched::RankId rank, std::uint64_t element) const;
  // Writes the rank's input buffer (`bytes` is its size).
  void fill_input(sched::RankId rank, std::span<std::byte> input) const;
  // Counts output elements of `rank` that differ from the collective's result; elements the
  // collective leaves undefined (outputs of non-root ranks of reduce) are not counted.
  std::uint64_t count_wrong(sched::RankId rank, std::span<const std::byte> output) const;
  // Output elements count_wrong() examines for `rank`.
  std::uint64_t checked_elements(sched::RankId rank, std::uint64_t output_bytes) const;

 private:
  std::int64_t expected(sched::RankId rank, std::uint64_t element) const;

  sched::Collective collective_;
  sched::DType dtype_;
  std::uint32_t ranks_;
  sched::RankId root_;
  std::uint64_t chunk_elements_;  // elements per rank block (scatter/gather collectives)
  std::int64_t modulus_;          // 0: one-hot pattern for very large rank counts
};

}  // namespace collsim::backend
