#include "tools/resource_guard.hpp"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <limits>
#include <set>

#include "topology/error.hpp"
#include "topology/loader.hpp"

namespace collsim::cli {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// Headroom over --max-memory for the address space cap: the code, thread stacks (8 MiB each) and
// the allocator's per-thread arenas (64 MiB each) are address space without being the
// simulation's memory.
constexpr std::uint64_t kAddressHeadroom = std::uint64_t{1} << 30;
constexpr std::uint64_t kHeadroomPerThread = std::uint64_t{128} << 20;

std::atomic<bool> g_interrupted{false};
struct sigaction g_previous {};

void on_sigint(int /*signal*/) {
  g_interrupted.store(true, std::memory_order_relaxed);
}

}  // namespace

double ops_per_rank_chunk(sched::Collective collective, sched::Algorithm algorithm, double ranks,
                          double servers, bool staged) {
  using sched::Algorithm;
  using sched::Collective;
  const double p = std::max(1.0, ranks);
  const double log_p = std::ceil(std::log2(p));
  // Upper coefficients read off generated plans: {peer-to-peer, staged through host memory}.
  const auto c = [staged](double direct, double via_host) { return staged ? via_host : direct; };
  switch (collective) {
    case Collective::allreduce:
      switch (algorithm) {
        case Algorithm::ring:
          return c(5, 9) * (p - 1);
        case Algorithm::direct:
          return c(3, 5) * (p - 1);
        case Algorithm::tree:
          return c(10, 15);
        case Algorithm::naive:
          return c(4, 6);
        case Algorithm::rhd:
          return c(4.5, 6) * (log_p + 1);
        case Algorithm::rd:
          return c(3, 3.5) * (log_p + 1);
        case Algorithm::hier: {
          const double s = std::max(1.0, servers);
          const double g = std::ceil(p / s);
          return c(5, 7) * (g + s - 1);
        }
        case Algorithm::pairwise:  // no allreduce
          break;
      }
      break;
    case Collective::reduce_scatter:
      return c(3, 5) * (p - 1);
    case Collective::allgather:
    case Collective::alltoall:
      return c(2, 3.5) * p;
    case Collective::broadcast:
      return c(2, 3);
    case Collective::reduce:
      return c(3, 4);
  }
  // A pair added after this table: the largest count above keeps the estimate on the safe side.
  return 9 * p;
}

static std::set<std::int32_t> servers_of(const topo::Topology& topology,
                                         std::span<const topo::NodeId> ranks) {
  std::set<std::int32_t> servers;
  for (topo::NodeId g : ranks)
    if (topology.node(g).server != topo::kNone) servers.insert(topology.node(g).server);
  return servers;
}

std::size_t count_servers(const topo::Topology& topology, std::span<const topo::NodeId> ranks) {
  return servers_of(topology, ranks).size();
}

bool staged_transfers(const topo::Topology& topology, std::span<const topo::NodeId> ranks) {
  const std::set<std::int32_t> servers = servers_of(topology, ranks);
  for (std::int32_t s : servers) {
    const topo::Server& server = topology.servers()[static_cast<std::size_t>(s)];
    if (!server.p2p || (servers.size() > 1 && !server.gpudirect_rdma)) return true;
  }
  return false;
}

double whole_bytes_per_op(sched::Algorithm algorithm) {
  switch (algorithm) {
    case sched::Algorithm::tree:
      return 192;
    case sched::Algorithm::rhd:
      return 128;
    case sched::Algorithm::direct:
    case sched::Algorithm::pairwise:  // the same ops as direct's, on one channel
      return 144;
    case sched::Algorithm::rd:
      return 112;
    case sched::Algorithm::ring:
    case sched::Algorithm::hier:
    case sched::Algorithm::naive:
      break;
  }
  return static_cast<double>(kBytesPerOp);
}

Estimate estimate(sched::Collective collective, sched::Algorithm algorithm, std::uint64_t ranks,
                  std::uint64_t chunks, std::uint64_t servers, bool staged, bool streamed) {
  const double p = static_cast<double>(std::max<std::uint64_t>(1, ranks));
  const double k = static_cast<double>(std::max<std::uint64_t>(1, chunks));
  Estimate e;
  // One rank copies its input to its output, one copy per chunk.
  e.ops = p == 1
              ? k
              : ops_per_rank_chunk(collective, algorithm, p, static_cast<double>(servers), staged) *
                        p * k +
                    p;
  e.events = kEventsPerOp * e.ops;
  e.bytes_per_op = whole_bytes_per_op(algorithm);
  double held = e.ops;
  if (streamed && p > 1) {
    // 16 steps and a tenth of the plan (see resource_guard.hpp). Hier: rings of g inside the
    // servers and of S along the rails, 2 (g - 1) + 2 (S - 1) steps.
    double steps = collective == sched::Collective::allreduce ? 2 * (p - 1) : p - 1;
    if (algorithm == sched::Algorithm::hier) {
      const double s = std::max(1.0, static_cast<double>(servers));
      const double g = std::ceil(p / s);
      steps = std::max(1.0, 2 * (g - 1) + 2 * (s - 1));
    }
    held = std::min(e.ops, e.ops / steps * 16 + e.ops / 10);
    e.bytes_per_op = kStreamedBytesPerOp;
  }
  e.held = held;
  e.bytes = e.bytes_per_op * held;
  return e;
}

std::uint64_t max_ops_held(std::uint64_t limit, unsigned concurrent, double taken) {
  if (limit == 0) return 0;
  const double budget = (static_cast<double>(limit) - taken) / std::max(1u, concurrent);
  return static_cast<std::uint64_t>(
      std::max(1.0, budget / static_cast<double>(kStreamedBytesPerOp)));
}

Estimate scaled(const Estimate& e, double share) {
  Estimate out = e;
  out.ops *= share;
  out.events *= share;
  out.held *= share;
  out.bytes *= share;
  return out;
}

std::uint64_t physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size);
}

std::uint64_t default_max_memory() {
  const std::uint64_t physical = physical_memory();
  return physical == 0 ? std::uint64_t{8} << 30 : physical / 2;
}

std::uint64_t parse_max_memory(std::string_view text, const std::string& option) {
  if (!text.empty() && text.back() == '%') {
    const std::string number(text.substr(0, text.size() - 1));
    char* end = nullptr;
    errno = 0;
    const double percent = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || errno != 0 ||
        !std::isfinite(percent) || percent <= 0 || percent > 100)
      throw InputError("", option,
                       fmt::format("\"{}\" is not a share of physical memory; expected a "
                                   "percentage from 1% to 100% such as 50%, or a size such as "
                                   "16GiB",
                                   text));
    const std::uint64_t physical = physical_memory();
    if (physical == 0)
      throw InputError("", option,
                       "this system does not report its physical memory; give a size such as "
                       "16GiB instead of a percentage");
    return static_cast<std::uint64_t>(static_cast<double>(physical) * percent / 100);
  }
  try {
    return parse_size(text);
  } catch (const UnitError& e) {
    throw InputError("", option,
                     fmt::format("{}; or a share of physical memory such as 50%", e.what()));
  }
}

void add_max_memory_option(CLI::App& command, std::string& text) {
  command.add_option("--max-memory", text,
                     "Refuse a topology or a simulation whose estimated memory exceeds this: a "
                     "size (8GiB) or a share of physical memory (50%); default half of physical "
                     "memory");
}

std::uint64_t max_memory_limit(const std::string& text) {
  return text.empty() ? default_max_memory() : parse_max_memory(text, "--max-memory");
}

topo::Topology load_topology(const std::string& path, std::uint64_t limit) {
  topo::LoadOptions options;
  options.max_memory = limit;
  return topo::load_topology(path, options);
}

std::string on_each_thread(unsigned concurrent) {
  return concurrent > 1 ? fmt::format(" on each of {} threads", concurrent) : std::string();
}

std::string beside_topology(double taken) {
  return taken > 0 ? fmt::format(", besides about {} for the topology", format_size_estimate(taken))
                   : std::string();
}

void check_memory(const Estimate& e, unsigned concurrent, std::uint64_t limit,
                  const std::string& what, double taken) {
  const double jobs = std::max(1u, concurrent);
  const double need = e.bytes * jobs;
  if (taken + need <= static_cast<double>(limit)) return;
  throw InputError(
      "", "--max-memory",
      fmt::format("{} needs about {}{} ({} at {} B each, {:.3g} events){}, "
                  "more than the limit of {}; use fewer chunks or ranks{}, or raise "
                  "--max-memory if the machine has the memory",
                  what, format_size_estimate(e.bytes), on_each_thread(concurrent),
                  e.held < e.ops
                      ? fmt::format("simulated while generated, an estimated {:.3g} of its {:.3g} "
                                    "ops held at once",
                                    e.held, e.ops)
                      : fmt::format("an estimated {:.3g} ops", e.ops),
                  e.bytes_per_op, e.events, beside_topology(taken),
                  format_size_estimate(static_cast<double>(limit)),
                  concurrent > 1 ? " or fewer --jobs" : ""));
}

bool cap_address_space(std::uint64_t limit, unsigned threads) {
  if (kSanitized) return false;
  struct rlimit current {};
  if (::getrlimit(RLIMIT_AS, &current) != 0) return false;
  const std::uint64_t headroom = kAddressHeadroom + kHeadroomPerThread * std::max(1u, threads);
  const std::uint64_t most = std::numeric_limits<std::uint64_t>::max() / 2;
  const rlim_t wanted = static_cast<rlim_t>(std::min(limit, most) + headroom);
  // Never raise a cap someone else set.
  if (current.rlim_cur != RLIM_INFINITY && current.rlim_cur <= wanted) return false;
  struct rlimit next = current;
  next.rlim_cur = wanted;
  return ::setrlimit(RLIMIT_AS, &next) == 0;
}

InterruptGuard::InterruptGuard() {
  g_interrupted.store(false, std::memory_order_relaxed);
  struct sigaction action {};
  action.sa_handler = on_sigint;
  sigemptyset(&action.sa_mask);
  // One-shot: a second Ctrl-C gets the default action and ends a process that does not stop.
  action.sa_flags = SA_RESETHAND;
  ::sigaction(SIGINT, &action, &g_previous);
}

InterruptGuard::~InterruptGuard() {
  ::sigaction(SIGINT, &g_previous, nullptr);
}

const std::atomic<bool>* InterruptGuard::flag() {
  return &g_interrupted;
}

bool InterruptGuard::raised() {
  return g_interrupted.load(std::memory_order_relaxed);
}

}  // namespace collsim::cli
