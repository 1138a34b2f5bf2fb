#include "cuda_backend/host_executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>

#include "cuda_backend/data_check.hpp"
#include "cuda_backend/dtype_convert.hpp"
#include "cuda_backend/plan_layout.hpp"
#include "topology/error.hpp"

namespace collsim::backend {

using sched::BufferId;
using sched::OpId;
using sched::OpKind;
using Clock = std::chrono::steady_clock;

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto start = line.find_first_not_of(' ', colon + 1);
        return start == std::string::npos ? "" : line.substr(start);
      }
    }
  }
  return "unknown CPU";
}

constexpr std::uint32_t kPending = 0, kPosted = 1, kDone = 2;

struct RankMemory {
  std::vector<std::byte> input, output, scratch, host;
  std::byte* base(BufferId b) {
    switch (b) {
      case BufferId::input:
        return input.data();
      case BufferId::output:
        return output.data();
      case BufferId::scratch:
        return scratch.data();
      case BufferId::host:
        return host.data();
    }
    return nullptr;
  }
};

void wait_until_at_least(std::atomic<std::uint32_t>& state, std::uint32_t wanted) {
  for (std::uint32_t s = state.load(std::memory_order_acquire); s < wanted;
       s = state.load(std::memory_order_acquire))
    state.wait(s, std::memory_order_acquire);
}

void set_state(std::atomic<std::uint32_t>& state, std::uint32_t value) {
  state.store(value, std::memory_order_release);
  state.notify_all();
}

}  // namespace

void precise_wait(double seconds) {
  if (!(seconds > 0)) return;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(seconds));
  // Sleeping overshoots by tens of microseconds; stop sleeping that much early and spin.
  constexpr auto kSpinMargin = std::chrono::microseconds(100);
  if (deadline - Clock::now() > kSpinMargin) std::this_thread::sleep_until(deadline - kSpinMargin);
  while (Clock::now() < deadline) std::this_thread::yield();
}

// Built by construction rather than assignment: GCC 12 at -O3 reports a false -Wrestrict on
// assigning a string literal to a std::string member.
HostExecutor::HostExecutor()
    : info_{.backend = "host",
            .name = fmt::format("host: {}", cpu_model()),
            // Host virtual ranks stand for whatever GPUs a topology has, so a host calibration
            // matches every GPU model.
            .model = "*",
            .driver_version = {},
            .runtime_version = {},
            .devices = 1,
            .peer_access = true,
            .memory_bandwidth = 0} {}

RunResult HostExecutor::run(const sched::Plan& plan, const RunOptions& options) {
  const PlanLayout layout = layout_plan(plan, options.label);
  const auto p = plan.num_ranks();
  const std::size_t n = plan.num_ops();
  if (!options.links.empty() && options.links.size() != std::size_t{p} * p)
    throw InternalError(
        fmt::format("synthetic link table has {} entries for {} ranks", options.links.size(), p));

  std::vector<RankMemory> memory(p);
  const DataPattern pattern(plan);
  for (sched::RankId r = 0; r < p; ++r) {
    const auto& sizes = layout.buffers[r];
    memory[r].input.resize(sizes.input);
    memory[r].output.resize(sizes.output);
    memory[r].scratch.resize(sizes.scratch);
    memory[r].host.resize(sizes.host);
    pattern.fill_input(r, memory[r].input);
  }

  std::vector<std::vector<OpId>> workers;
  for (const auto& rank_streams : layout.streams)
    for (const auto& list : rank_streams)
      if (!list.empty()) workers.push_back(list);
  // One thread per (rank, stream) keeps every stream able to progress, which is what rules out
  // deadlock; beyond a few thousand threads the host runs out of them first.
  constexpr std::size_t kMaxThreads = 4096;
  if (workers.size() > kMaxThreads)
    throw InputError(options.label, "/ranks",
                     fmt::format("the plan has {} (rank, stream) pairs; the host executor runs one "
                                 "thread each and stops at {}; use fewer ranks or streams",
                                 workers.size(), kMaxThreads));

  const std::unique_ptr<std::atomic<std::uint32_t>[]> state(new std::atomic<std::uint32_t>[n]);
  const std::uint32_t runs = options.warmup + options.repetitions;
  std::vector<Clock::time_point> finished(workers.size());
  std::barrier sync(static_cast<std::ptrdiff_t>(workers.size() + 1));

  auto execute = [&](OpId id) {
    const auto rank = plan.rank(id);
    switch (plan.kind(id)) {
      case OpKind::send:
        set_state(state[id], kPosted);
        wait_until_at_least(state[id], kDone);
        return;
      case OpKind::recv: {
        const OpId send = plan.partner(id);
        wait_until_at_least(state[send], kPosted);
        const auto sender = plan.rank(send);
        const Bytes bytes = plan.bytes(id);
        if (!options.links.empty())
          precise_wait(options.links[std::size_t{sender} * p + rank].seconds(bytes));
        const auto src = plan.src(send);
        const auto dst = plan.dst(id);
        if (bytes)
          std::memcpy(memory[rank].base(dst.buffer) + dst.offset,
                      memory[sender].base(src.buffer) + src.offset, bytes);
        set_state(state[send], kDone);
        break;
      }
      case OpKind::reduce: {
        const auto a = plan.src(id), b = plan.src2(id), d = plan.dst(id);
        auto& m = memory[rank];
        reduce_host(m.base(d.buffer) + d.offset, m.base(a.buffer) + a.offset,
                    m.base(b.buffer) + b.offset, plan.bytes(id) / sched::dtype_size(plan.dtype),
                    plan.dtype);
        break;
      }
      case OpKind::copy: {
        const auto s = plan.src(id), d = plan.dst(id);
        auto& m = memory[rank];
        if (plan.bytes(id))
          std::memmove(m.base(d.buffer) + d.offset, m.base(s.buffer) + s.offset, plan.bytes(id));
        break;
      }
      case OpKind::compute:
      case OpKind::delay:
        precise_wait(plan.seconds(id));
        break;
    }
    set_state(state[id], kDone);
  };

  std::vector<std::jthread> threads;
  threads.reserve(workers.size());
  for (std::size_t w = 0; w < workers.size(); ++w) {
    threads.emplace_back([&, w] {
      for (std::uint32_t run = 0; run < runs; ++run) {
        sync.arrive_and_wait();  // start
        for (OpId id : workers[w]) {
          for (OpId d : plan.deps(id)) wait_until_at_least(state[d], kDone);
          execute(id);
        }
        finished[w] = Clock::now();
        sync.arrive_and_wait();  // end
      }
    });
  }

  RunResult result;
  for (std::uint32_t run = 0; run < runs; ++run) {
    // Between runs every worker waits at the start barrier, so resetting here is race-free.
    for (std::size_t i = 0; i < n; ++i) state[i].store(kPending, std::memory_order_relaxed);
    for (auto& m : memory) {
      std::fill(m.output.begin(), m.output.end(), std::byte{0});
      std::fill(m.scratch.begin(), m.scratch.end(), std::byte{0});
      std::fill(m.host.begin(), m.host.end(), std::byte{0});
    }
    const auto start = Clock::now();
    sync.arrive_and_wait();
    sync.arrive_and_wait();
    auto end = start;
    for (const auto& t : finished) end = std::max(end, t);
    if (run >= options.warmup)
      result.seconds.push_back(std::chrono::duration<double>(end - start).count());
  }
  threads.clear();

  if (options.check) {
    for (sched::RankId r = 0; r < p; ++r) {
      result.wrong_elements += pattern.count_wrong(r, memory[r].output);
      result.checked_elements += pattern.checked_elements(r, memory[r].output.size());
    }
  }
  return result;
}

}  // namespace collsim::backend
