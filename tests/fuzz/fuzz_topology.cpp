// libFuzzer target: the topology loader returns a topology or throws InputError; anything else
// (a crash, another exception, a hang caught by -timeout, memory beyond -rss_limit_mb) is a
// finding.
#include <cstdint>
#include <string_view>

#include "topology/error.hpp"
#include "topology/loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const collsim::topo::Topology t = collsim::topo::parse_topology(text, "fuzz.json");
    (void)t;
  } catch (const collsim::InputError&) {
  }
  return 0;
}
