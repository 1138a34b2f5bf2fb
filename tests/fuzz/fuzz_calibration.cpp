// libFuzzer target: the calibration reader returns a calibration or throws InputError.
#include <cstdint>
#include <string_view>

#include "cuda_backend/calibration.hpp"
#include "topology/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const collsim::backend::Calibration c = collsim::backend::parse_calibration(text, "fuzz.json");
    (void)c;
  } catch (const collsim::InputError&) {
  }
  return 0;
}
