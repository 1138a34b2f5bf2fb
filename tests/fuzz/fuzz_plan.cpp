// libFuzzer target: the plan JSON reader returns a plan or throws InputError, and the verifier
// then answers about whatever plan was read (cycles, unmatched sends) without crashing.
#include <cstdint>
#include <string_view>

#include "schedules/plan_json.hpp"
#include "schedules/verify.hpp"
#include "topology/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const collsim::sched::Plan plan = collsim::sched::parse_plan(text, "fuzz.json");
    const collsim::sched::VerifyReport report = collsim::sched::verify(plan);
    (void)report;
  } catch (const collsim::InputError&) {
  }
  return 0;
}
