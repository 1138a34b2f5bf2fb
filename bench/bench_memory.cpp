// Memory reference for the targets table: the time of one dependent load over a buffer far
// larger than the last-level cache. The engine's large runs (the 131,072-GPU tree, the ring at
// k = 64) wait on such loads, and this shared host's memory can be slow while its cores are
// fast, which the table's core-bound speed reference (bench/run.sh) does not show.
//
// The buffer is one cycle through every cache line in a random order (Sattolo's algorithm with
// a fixed seed), so each load's address comes from the one before and hardware prefetchers
// cannot guess it.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "topology/huge_pages.hpp"

namespace {

// Where each chase leaves its last index: a volatile store, so the loop is not removed.
volatile std::uint32_t chain_end = 0;

struct alignas(64) Line {
  std::uint32_t next = 0;
};

// On 2 MiB pages when huge pages are advised for hot arrays, as the engine's records are.
using Buffer = std::vector<Line, collsim::HugePageAllocator<Line, collsim::huge_pages::Use::hot>>;

Buffer random_cycle(std::size_t lines) {
  std::vector<std::uint32_t> order(lines);
  for (std::size_t i = 0; i < lines; ++i) order[i] = static_cast<std::uint32_t>(i);
  std::mt19937_64 rng(20261205);
  // Sattolo: a uniformly random permutation with a single cycle.
  for (std::size_t i = lines - 1; i > 0; --i) {
    std::uniform_int_distribution<std::size_t> pick(0, i - 1);
    std::swap(order[i], order[pick(rng)]);
  }
  Buffer buffer(lines);
  for (std::size_t i = 0; i < lines; ++i) buffer[i].next = order[i];
  return buffer;
}

// Nanoseconds per load over `loads` dependent loads.
double chase(const Buffer& buffer, std::uint64_t loads) {
  std::uint32_t at = 0;
  const auto start = std::chrono::steady_clock::now();
  for (std::uint64_t i = 0; i < loads; ++i) at = buffer[at].next;
  const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
  chain_end = at;
  return took.count() / static_cast<double>(loads);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Memory reference: nanoseconds per dependent load over a buffer of random lines"};
  std::size_t mib = 256;
  std::uint64_t loads = 1'000'000;
  int repeat = 5;
  app.add_option("--mib", mib, "Buffer size in MiB (far above the last-level cache)")
      ->check(CLI::Range(1, 16384));
  app.add_option("--loads", loads, "Dependent loads per run")
      ->check(CLI::Range(1000, 1'000'000'000));
  app.add_option("--repeat", repeat, "Runs; the median is printed")->check(CLI::Range(1, 100));
  bool huge = false;
  app.add_flag("--huge-pages", huge,
               "Ask for 2 MiB pages (MADV_HUGEPAGE), as the engine does for its hot arrays");
  CLI11_PARSE(app, argc, argv);
  collsim::huge_pages::set_advice(huge ? collsim::huge_pages::Advice::hot
                                       : collsim::huge_pages::Advice::off);

  const Buffer buffer = random_cycle(mib * 1024 * 1024 / sizeof(Line));
  std::vector<double> ns;
  for (int i = 0; i < repeat; ++i) ns.push_back(chase(buffer, loads));
  std::sort(ns.begin(), ns.end());
  std::printf("%.1f\n", ns[ns.size() / 2]);
  return 0;
}
