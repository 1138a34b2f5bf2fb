#include "cuda_backend/dtype_convert.hpp"

#include <catch2/catch.hpp>
#include <cmath>

#include "cuda_backend/data_check.hpp"
#include "hand_plans.hpp"

using namespace collsim;
using namespace collsim::backend;

TEST_CASE("fp16 conversion rounds to nearest even and saturates to infinity", "[backend]") {
  CHECK(float_to_half(1.0f) == 0x3c00);
  CHECK(float_to_half(-2.0f) == 0xc000);
  CHECK(float_to_half(65504.0f) == 0x7bff);  // largest finite half
  CHECK(float_to_half(65520.0f) == 0x7c00);  // halfway to 65536 rounds up to inf
  // 2049 lies halfway between the representable 2048 and 2050: ties go to the even mantissa.
  CHECK(half_to_float(float_to_half(2049.0f)) == 2048.0f);
  CHECK(half_to_float(float_to_half(2051.0f)) == 2052.0f);
  // Smallest subnormal 2^-24 and half of it (a tie with zero, rounds to even: zero).
  CHECK(float_to_half(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(float_to_half(std::ldexp(1.0f, -25)) == 0x0000);
  CHECK(half_to_float(0x0001) == std::ldexp(1.0f, -24));
  for (int i = -2048; i <= 2048; ++i)
    CHECK(half_to_float(float_to_half(static_cast<float>(i))) == static_cast<float>(i));
}

TEST_CASE("bf16 conversion keeps fp32's exponent and rounds to nearest even", "[backend]") {
  CHECK(float_to_bf16(1.0f) == 0x3f80);
  CHECK(bf16_to_float(0x3f80) == 1.0f);
  // 257 is halfway between 256 and 258 (8 significant bits): ties to even gives 256; 259 -> 260.
  CHECK(bf16_to_float(float_to_bf16(257.0f)) == 256.0f);
  CHECK(bf16_to_float(float_to_bf16(259.0f)) == 260.0f);
  for (int i = -256; i <= 256; ++i)
    CHECK(bf16_to_float(float_to_bf16(static_cast<float>(i))) == static_cast<float>(i));
}

TEST_CASE("data pattern: p-fold sums stay exactly representable", "[backend]") {
  // bf16 with 4 ranks: the largest prime modulus m with 4 (m - 1) <= 256 is 61, so values are in
  // [0, 60] and sums at most 240. Rank 1, element 0: (1 * 7 + 0) mod 61 = 7.
  test::RingOptions o;
  o.dtype = sched::DType::bf16;
  o.size = 64;
  const auto plan = test::ring_allreduce(o);
  const DataPattern pattern(plan);
  CHECK(pattern.input(1, 0) == 7);
  CHECK(pattern.input(3, 50) == (21 + 50) % 61);
  for (sched::RankId r = 0; r < 4; ++r)
    for (std::uint64_t e = 0; e < 1000; ++e) CHECK(pattern.input(r, e) <= 60);
}
