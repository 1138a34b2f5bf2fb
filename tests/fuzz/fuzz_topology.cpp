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
    // estimates above 64 MiB (about 175,000 nodes), as --max-memory would. The limit bounds time
    // too: loading is linear in the nodes, and 1.6 million GPUs (614 MB by the estimate) took
    // more than run.sh's -timeout=10 under the sanitizers, 7 s in a Release build. Large
    // topologies are the benchmarks' business; the fuzzer's is malformed ones.
    collsim::topo::LoadOptions options;
    options.max_memory = std::uint64_t{64} << 20;
    const collsim::topo::Topology t = collsim::topo::parse_topology(text, "fuzz.json", options);
    (void)t;
  } catch (const collsim::InputError&) {
  }
  return 0;
}
