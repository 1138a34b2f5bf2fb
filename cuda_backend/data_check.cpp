#include "cuda_backend/data_check.hpp"

#include <array>

#include "cuda_backend/dtype_convert.hpp"
#include "cuda_backend/plan_layout.hpp"

namespace collsim::backend {

using sched::Collective;

namespace {

std::int64_t exact_integer_limit(sched::DType t) {
  switch (t) {
    case sched::DType::fp32:
      return std::int64_t{1} << 24;
    case sched::DType::fp16:
      return 2048;
    case sched::DType::bf16:
      return 256;
  }
  return 256;
}

bool reduces(Collective c) {
  return c == Collective::allreduce || c == Collective::reduce_scatter || c == Collective::reduce;
}

}  // namespace

DataPattern::DataPattern(const sched::Plan& plan)
    : collective_(plan.collective),
      dtype_(plan.dtype),
      ranks_(plan.num_ranks()),
      root_(plan.root),
      chunk_elements_(0),
      modulus_(0) {
  const auto sizes = collective_buffers(plan);
  const auto elem = sched::dtype_size(dtype_);
  const auto block = collective_ == Collective::allgather ? sizes.input : sizes.output;
  chunk_elements_ = ranks_ ? block / elem : 0;
  if (collective_ == Collective::reduce_scatter || collective_ == Collective::alltoall)
    chunk_elements_ = ranks_ ? sizes.input / elem / ranks_ : 0;
  // A prime modulus keeps neighbouring ranks' values distinct, which catches data taken from the
  // wrong rank; the largest one whose p-fold sum stays exact is used.
  const std::int64_t terms = reduces(collective_) ? ranks_ : 1;
  const std::int64_t limit = exact_integer_limit(dtype_);
  for (std::int64_t m : std::array<std::int64_t, 9>{251, 127, 61, 31, 13, 7, 5, 3, 2}) {
    if (terms * (m - 1) <= limit) {
      modulus_ = m;
      break;
    }
  }
}

std::int64_t DataPattern::input(sched::RankId rank, std::uint64_t element) const {
  if (modulus_ == 0) return element % ranks_ == rank ? 1 : 0;
  // 7 is coprime with every modulus used except 7 itself, where 3 takes its place.
  const std::uint64_t stride = modulus_ == 7 ? 3 : 7;
  return static_cast<std::int64_t>((rank * stride + element) %
                                   static_cast<std::uint64_t>(modulus_));
}

void DataPattern::fill_input(sched::RankId rank, std::span<std::byte> input_bytes) const {
  const auto elem = sched::dtype_size(dtype_);
  const std::uint64_t count = input_bytes.size() / elem;
  for (std::uint64_t e = 0; e < count; ++e)
    store_element(input_bytes.data(), e, dtype_, static_cast<double>(input(rank, e)));
}

std::int64_t DataPattern::expected(sched::RankId rank, std::uint64_t e) const {
  std::int64_t sum = 0;
  switch (collective_) {
    case Collective::allreduce:
    case Collective::reduce:
      for (sched::RankId q = 0; q < ranks_; ++q) sum += input(q, e);
      return sum;
    case Collective::reduce_scatter:
      for (sched::RankId q = 0; q < ranks_; ++q) sum += input(q, rank * chunk_elements_ + e);
      return sum;
    case Collective::allgather:
      return input(static_cast<sched::RankId>(e / chunk_elements_), e % chunk_elements_);
    case Collective::broadcast:
      return input(root_, e);
    case Collective::alltoall:
      return input(static_cast<sched::RankId>(e / chunk_elements_),
                   rank * chunk_elements_ + e % chunk_elements_);
  }
  return 0;
}

std::uint64_t DataPattern::checked_elements(sched::RankId rank, std::uint64_t output_bytes) const {
  if (collective_ == Collective::reduce && rank != root_) return 0;
  return output_bytes / sched::dtype_size(dtype_);
}

std::uint64_t DataPattern::count_wrong(sched::RankId rank,
                                       std::span<const std::byte> output) const {
  const std::uint64_t count = checked_elements(rank, output.size());
  std::uint64_t wrong = 0;
  for (std::uint64_t e = 0; e < count; ++e)
    if (load_element(output.data(), e, dtype_) != static_cast<double>(expected(rank, e))) ++wrong;
  return wrong;
}

}  // namespace collsim::backend
