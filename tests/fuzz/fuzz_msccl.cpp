// libFuzzer target: the MSCCL-style XML importer returns a plan or throws InputError, and the
// verifier then answers about the imported plan without crashing.
#include <cstdint>
#include <string_view>

#include "schedules/msccl_import.hpp"
#include "schedules/verify.hpp"
#include "topology/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const collsim::sched::Plan plan = collsim::sched::parse_msccl(text, "fuzz.xml", 1 << 20);
    const collsim::sched::VerifyReport report = collsim::sched::verify(plan);
    (void)report;
  } catch (const collsim::InputError&) {
  }
  return 0;
}
