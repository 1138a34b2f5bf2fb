#include "cuda_backend/dtype_convert.hpp"

#include <bit>
#include <cmath>
#include <cstring>

namespace collsim::backend {

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f)  // inf or NaN
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // Zero or subnormal: value = mantissa * 2^-24, exact in float.
    const float v = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

std::uint16_t float_to_half(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // inf or NaN (keep NaN quiet)
    return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  // Rounding to nearest-even is done by letting the FPU add a magic number whose ulp is the
  // target's ulp; this handles normals, subnormals and overflow to inf in one place.
  const float a = std::bit_cast<float>(abs);
  if (a >= 65520.0f) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (a < 6.103515625e-05f) {  // below the smallest normal half: ulp is 2^-24
    const float r = a + 0.5f;  // ulp of 0.5f is 2^-24
    return static_cast<std::uint16_t>(sign | (std::bit_cast<std::uint32_t>(r) - 0x3f000000u));
  }
  std::uint32_t bits = abs;
  const std::uint32_t odd = (bits >> 13) & 1u;
  bits += 0xfffu + odd;  // round half to even on the 13 dropped bits
  bits -= (112u << 23);  // rebias exponent from 127 to 15
  return static_cast<std::uint16_t>(sign | (bits >> 13));
}

float bf16_to_float(std::uint16_t b) {
  return std::bit_cast<float>(std::uint32_t{b} << 16);
}

std::uint16_t float_to_bf16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  const std::uint32_t odd = (x >> 16) & 1u;
  return static_cast<std::uint16_t>((x + 0x7fffu + odd) >> 16);
}

double load_element(const std::byte* data, std::size_t index, sched::DType dtype) {
  switch (dtype) {
    case sched::DType::fp32: {
      float v;
      std::memcpy(&v, data + index * 4, 4);
      return v;
    }
    case sched::DType::fp16:
    case sched::DType::bf16: {
      std::uint16_t v;
      std::memcpy(&v, data + index * 2, 2);
      return dtype == sched::DType::fp16 ? half_to_float(v) : bf16_to_float(v);
    }
  }
  return 0;
}

void store_element(std::byte* data, std::size_t index, sched::DType dtype, double value) {
  const auto f = static_cast<float>(value);
  switch (dtype) {
    case sched::DType::fp32:
      std::memcpy(data + index * 4, &f, 4);
      return;
    case sched::DType::fp16:
    case sched::DType::bf16: {
      const std::uint16_t v = dtype == sched::DType::fp16 ? float_to_half(f) : float_to_bf16(f);
      std::memcpy(data + index * 2, &v, 2);
      return;
    }
  }
}

void reduce_host(std::byte* dst, const std::byte* a, const std::byte* b, std::size_t count,
                 sched::DType dtype) {
  switch (dtype) {
    case sched::DType::fp32:
      for (std::size_t i = 0; i < count; ++i) {
        float x, y;
        std::memcpy(&x, a + i * 4, 4);
        std::memcpy(&y, b + i * 4, 4);
        const float s = x + y;
        std::memcpy(dst + i * 4, &s, 4);
      }
      return;
    case sched::DType::fp16:
    case sched::DType::bf16: {
      const bool half = dtype == sched::DType::fp16;
      for (std::size_t i = 0; i < count; ++i) {
        std::uint16_t x, y;
        std::memcpy(&x, a + i * 2, 2);
        std::memcpy(&y, b + i * 2, 2);
        const float s =
            half ? half_to_float(x) + half_to_float(y) : bf16_to_float(x) + bf16_to_float(y);
        const std::uint16_t r = half ? float_to_half(s) : float_to_bf16(s);
        std::memcpy(dst + i * 2, &r, 2);
      }
      return;
    }
  }
}

}  // namespace collsim::backend
