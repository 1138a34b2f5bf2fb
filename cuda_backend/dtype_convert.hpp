#pragma once
// Host-side fp16 and bf16 arithmetic, so that the host executor reduces exactly as a GPU kernel
// that widens to fp32, adds, and rounds back to nearest-even would.
#include <cstddef>
#include <cstdint>
#include <span>

#include "schedules/plan.hpp"

namespace collsim::backend {

float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);
float bf16_to_float(std::uint16_t b);
std::uint16_t float_to_bf16(float f);

// Element `index` of a buffer of `dtype`, widened to double (exact for all three types).
double load_element(const std::byte* data, std::size_t index, sched::DType dtype);
// Stores `value` rounded to `dtype`.
void store_element(std::byte* data, std::size_t index, sched::DType dtype, double value);

// dst[i] = a[i] + b[i] for `count` elements; dst may alias a or b.
void reduce_host(std::byte* dst, const std::byte* a, const std::byte* b, std::size_t count,
                 sched::DType dtype);

}  // namespace collsim::backend
