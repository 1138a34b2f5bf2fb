// libFuzzer target: the quantity parsers either return a finite value inside the documented
// range or throw UnitError. Anything else (a crash, another exception, NaN) is a finding.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "topology/units.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const double b = collsim::parse_bandwidth(text);
    if (!(b > 0 && b <= collsim::kMaxBandwidth)) std::abort();
  } catch (const collsim::UnitError&) {
  }
  try {
    const double t = collsim::parse_duration(text);
    if (!(t >= 0 && t <= collsim::kMaxDuration)) std::abort();
  } catch (const collsim::UnitError&) {
  }
  try {
    const collsim::Bytes s = collsim::parse_size(text);
    if (s == 0 || s > collsim::kMaxSize) std::abort();
  } catch (const collsim::UnitError&) {
  }
  return 0;
}
