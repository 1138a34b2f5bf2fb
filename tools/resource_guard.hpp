#pragma once
// Bounded resources for run and sweep: what a request will cost, estimated from its shape before
// any plan is built, a memory limit that refuses clearly instead of letting the kernel kill the
// process, and Ctrl-C that stops a long run cleanly.
//
// The estimate is arithmetic on (collective, algorithm, p, k): a plan for 100 000 ranks must be
// refused before it is generated, because generating it is what runs out of memory. Ops per rank
// and chunk, {peer-to-peer, staged through host memory}, are upper bounds read off plans
// generated for every shipped config, p = 2..64 and k = 1, 2, 8 (docs/errors.md says how):
//
//   allreduce      ring {5, 9}(p-1)   direct {3, 5}(p-1)   tree {10, 15}   naive {4, 6}
//                  rhd {4.5, 6}(ceil(log2 p)+1)   rd {3, 3.5}(ceil(log2 p)+1)
//                  hier {5, 7}(g + s - 1) for s servers of g GPUs
//   reduce_scatter {3, 5}(p-1)        allgather, alltoall {2, 3.5}p
//   broadcast      {2, 3}             reduce {3, 4}
//
//   ops    = coefficient x p x k + p   (p = 1: k, one local copy per chunk)
//   events = 1.5 x ops   (measured 1.2 on ring allreduce: a transfer is one or two events)
//   memory = B x ops, B by algorithm (whole_bytes_per_op): peak RSS above the loaded topology,
//            per estimated op, measured on the rail-optimised cluster at k = 8, 1 GiB:
//     tree   152 B at p = 1024 and 4096, 147 at 16,384, 162 at 131,072    -> 192 B
//            (every chunk in flight at once: all the engine's records, successor lists)
//     rhd    108-110 B at p = 1024 and 4096                               -> 128 B
//     direct 119 B at p = 64, k = 8; 75 B at k = 64                       -> 144 B
//     rd     93-94 B at p = 1024 and 4096                                 -> 112 B
//     others 96 B (whole ring: 37 B, registered in windows of ops in flight)
//
// A streamed run (sim::streams_exactly: ring collectives and hier allreduce, simulated while
// generated) holds only the ops between the oldest unfinished one and the newest step. On a
// machine whose links differ, ranks upstream of a slower link run ahead of it (per-channel flow
// control would not stop that: the lead grows by its bound per hop, docs/performance.md), so
// that window is a share of the plan that grows during the run, not a fixed number of steps.
// Measured 2026-12-06, 1 GiB, ECMP, ops held at most against the plan's (docs/errors.md):
//   uniform (the rail-optimised cluster): ring 1.4-4.5 % (p = 1024-2048, k = 1-64), hier
//         2.2-7.7 % (p = 1024-16,384, k = 1-64)
//   mixed (half of its servers' PCIe links at 12 GB/s instead of 63): ring 25-29 %, hier
//         24-29 % (p = 256 and 1024)
// The estimate holds the ops of 16 steps plus a tenth of the plan, at 64 bytes an op held:
//   memory = 64 B x (ops / steps x 16 + ops / 10)
// which covers every uniform point about twice over and admits mixed runs that then hold more;
// those the engine stops once they hold more than the limit allows (max_ops_held below,
// sim::Options::max_ops_held), with a message that says so. Until 2026-12-06 the share was a
// fifth, seven times what the 16,384-GPU hier holds and still under what a mixed machine can.
// An op held is the engine's 32-byte record in a ring of 2^n records, which rounds up to twice
// that at most: measured at 40-64 bytes an op held (303 MiB at peak for the 4096-GPU hier's
// 4.98 M ops held, 1196 MiB for the 16,384-GPU hier's 30.1 M).
//
// Staging (a server without "p2p", or several servers without "gpudirect_rdma") turns a transfer
// into copy, send, receive, copy; that is why it has its own column.
#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "schedules/generate.hpp"
#include "topology/topology.hpp"
#include "topology/units.hpp"

namespace collsim::cli {

inline constexpr std::uint64_t kBytesPerOp = 96;  // a whole plan's, for ring, hier and naive
inline constexpr std::uint64_t kStreamedBytesPerOp = 64;
inline constexpr double kEventsPerOp = 1.5;
// Bytes per op of a whole plan of `algorithm` (the table above).
double whole_bytes_per_op(sched::Algorithm algorithm);

struct Estimate {
  double ops = 0;  // double: p^2 k for 100 000 ranks overflows nothing and is compared, not used
  double events = 0;
  double held = 0;  // ops in memory at once: all of them, unless the run is streamed
  double bytes_per_op = kBytesPerOp;  // whole_bytes_per_op, or kStreamedBytesPerOp when streamed
  double bytes = 0;
};

// Ops per rank and per chunk for the pair (see the table above). `servers` is the number of
// servers the ranks sit on (hier only; 0 or 1 means one).
double ops_per_rank_chunk(sched::Collective collective, sched::Algorithm algorithm, double ranks,
                          double servers, bool staged);
// The estimate of a plan that holds `share` of the ops of `e`'s (one rank per orbit of a
// rotation: s / p).
Estimate scaled(const Estimate& e, double share);
// `staged` unknown: true gives the safe (larger) estimate. `streamed`: the run is simulated
// while generated (see above).
Estimate estimate(sched::Collective collective, sched::Algorithm algorithm, std::uint64_t ranks,
                  std::uint64_t chunks, std::uint64_t servers, bool staged = true,
                  bool streamed = false);
// Pieces of the memory limit's messages: " on each of N threads" when `concurrent` > 1, and
// ", besides about X for the topology" when `taken` > 0; else empty.
std::string on_each_thread(unsigned concurrent);
std::string beside_topology(double taken);
// The most ops a streamed run may hold at once (sim::Options::max_ops_held) within `limit`
// bytes shared by `concurrent` runs, besides `taken` bytes of topology, at kStreamedBytesPerOp
// each; 0 (no limit) when `limit` is 0. The estimate judges a streamed run before it starts; this
// stops one whose window outgrows it (links that differ).
std::uint64_t max_ops_held(std::uint64_t limit, unsigned concurrent, double taken);
// The distinct servers the ranks sit on (GPUs outside any server are not counted).
std::size_t count_servers(const topo::Topology& topology, std::span<const topo::NodeId> ranks);
// Whether some transfer between the GPUs of `ranks` is staged through host memory.
bool staged_transfers(const topo::Topology& topology, std::span<const topo::NodeId> ranks);

// Physical memory in bytes from sysconf; 0 when the system does not say.
std::uint64_t physical_memory();
// Half of physical memory (the rest is for the system and other jobs), or 8 GiB if unknown.
std::uint64_t default_max_memory();
// "--max-memory" text: a size such as "8GiB" or a share of physical memory such as "50%".
std::uint64_t parse_max_memory(std::string_view text, const std::string& option);
// --max-memory on a command (every command that loads a topology has it), and the limit its
// text gives: parse_max_memory, or default_max_memory() when the option was not given.
void add_max_memory_option(CLI::App& command, std::string& text);
std::uint64_t max_memory_limit(const std::string& text);
// A topology file whose expansion is estimated before it is built and refused above `limit`
// bytes (topo::LoadOptions::max_memory).
topo::Topology load_topology(const std::string& path, std::uint64_t limit);
// Throws InputError naming the estimate and the limit when `concurrent` requests of estimate
// `e` would not fit in `limit` bytes beside `taken` bytes held already (the loaded topology,
// shared by them all). `what` names the request ("ring allreduce, 1024 ranks, k = 64").
void check_memory(const Estimate& e, unsigned concurrent, std::uint64_t limit,
                  const std::string& what, double taken = 0);
// Caps the address space at `limit` plus headroom for `threads` threads' stacks and allocator
// arenas, so that
// an estimate that was too low ends in std::bad_alloc, which the CLI reports, rather than in the
// kernel's OOM killer. Does nothing under AddressSanitizer, which reserves terabytes of address
// space. Returns whether the cap was set.
bool cap_address_space(std::uint64_t limit, unsigned threads);

// Ctrl-C. While an InterruptGuard lives, SIGINT sets a flag instead of killing the process; the
// engine polls it (sim::Options::cancel) and the command stops, saying how far it got. A second
// Ctrl-C while the first is being handled kills the process as usual.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  static const std::atomic<bool>* flag();
  static bool raised();
};

// Thrown when a command stops because of Ctrl-C; main exits with kExitInterrupted.
class Interrupted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
inline constexpr int kExitInterrupted = 130;  // 128 + SIGINT, as shells report it

}  // namespace collsim::cli
