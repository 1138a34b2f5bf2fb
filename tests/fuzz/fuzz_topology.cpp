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
    // A "count" of a few bytes may stand for millions of nodes: the loader refuses what it
    // estimates above 1 GiB, well inside run.sh's -rss_limit_mb=2048, as --max-memory would.
    collsim::topo::LoadOptions options;
    options.max_memory = std::uint64_t{1} << 30;
    const collsim::topo::Topology t = collsim::topo::parse_topology(text, "fuzz.json", options);
    (void)t;
  } catch (const collsim::InputError&) {
  }
  return 0;
}
