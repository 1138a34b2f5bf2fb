// The op-record window: records keep their values while the window slides over them, and a
// window that slides far costs only the chunks it spans at once.
#include "sim/record_window.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>

using collsim::sim::RecordWindow;

namespace {
struct Record {
  std::uint32_t id = 0;
  std::uint32_t check = 0;
};
std::uint32_t mix(std::uint32_t id) {
  return id * 2654435761u ^ 0x5bd1e995u;
}
}  // namespace

TEST_CASE("a sliding window keeps its records and reuses released chunks", "[sim][window]") {
  constexpr std::uint64_t kChunk = RecordWindow<Record>::kChunk;
  RecordWindow<Record> w;
  // Grow in uneven batches of up to a third of a chunk to 9 chunks' worth of ids, keeping about
  // 2.5 chunks alive.
  const std::uint64_t total = 9 * kChunk + 1234;
  const std::uint64_t keep = 5 * kChunk / 2;
  std::uint64_t end = 0, low = 0, batch = 1;
  while (end < total) {
    const std::uint64_t next = std::min(total, end + batch);
    w.reserve(next);
    for (std::uint64_t id = end; id < next; ++id) {
      Record& r = w.emplace(static_cast<std::uint32_t>(id));
      CHECK(r.id == 0);  // constructed afresh, whatever the chunk held before
      r.id = static_cast<std::uint32_t>(id);
      r.check = mix(r.id);
    }
    end = next;
    if (end > keep) low = end - keep;
    w.release_below(low);
    // Every record still in the window reads back as written.
    for (std::uint64_t id = low; id < end; id += 997) {
      REQUIRE(w[static_cast<std::uint32_t>(id)].id == id);
      REQUIRE(w[static_cast<std::uint32_t>(id)].check == mix(static_cast<std::uint32_t>(id)));
    }
    batch = std::min(batch * 3 + 7, kChunk / 3);
  }
  // The window spans at most 4 chunks at once (2.5 live plus the partly released ones), and
  // the first chunk was reallocated while it grew; nothing else was allocated.
  CHECK(w.chunks_allocated() <= 5);
}

TEST_CASE("a small window stays small", "[sim][window]") {
  RecordWindow<Record> w;
  w.reserve(300);
  for (std::uint32_t id = 0; id < 300; ++id) w.emplace(id).id = id;
  CHECK(w.chunks_allocated() == 1);
  for (std::uint32_t id = 0; id < 300; ++id) REQUIRE(w[id].id == id);
}
