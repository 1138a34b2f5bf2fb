#include "cuda_backend/cuda_executor.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda_backend/cuda/kernels.hpp"
#include "cuda_backend/data_check.hpp"
#include "cuda_backend/plan_layout.hpp"
#include "topology/error.hpp"

namespace collsim::backend {

using sched::BufferId;
using sched::kNoOp;
using sched::OpId;
using sched::OpKind;

namespace {

// Every CUDA call goes through here so that a failure names the call and what it was doing.
void check(cudaError_t status, const char* call, const std::string& context) {
  if (status == cudaSuccess) return;
  const char* what = cudaGetErrorString(status);
  if (status == cudaErrorMemoryAllocation)
    throw InputError("", "--sizes",
                     fmt::format("{} failed ({}) while {}: the plan's buffers do not fit in device "
                                 "memory; use smaller sizes or fewer ranks",
                                 call, what, context));
  throw InternalError(fmt::format("CUDA call {} failed while {}: {}", call, context, what));
}

std::string op_context(const sched::Plan& plan, OpId id) {
  return fmt::format("issuing op {} ({} on rank {}, stream {})", id,
                     sched::to_string(plan.kind(id)), plan.rank(id), plan.stream(id));
}

std::string version_string(int v) {
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

// A device maps its streams onto this many hardware queues, and streams that share a queue wait
// behind one another's event waits. The driver's default is 8 and its maximum 32; the variable
// is read when the first context is created, so it is set before any other CUDA call, unless
// the user set it.
constexpr int kHardwareQueues = 32;

int device_count_or_zero() {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", std::to_string(kHardwareQueues).c_str(), 0);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
}

// Owns everything a run allocates, so that an exception in the middle frees it all.
struct Resources {
  std::vector<int> device_of_rank;
  struct RankBuffers {
    void* input = nullptr;
    void* output = nullptr;
    void* scratch = nullptr;
    void* host = nullptr;  // pinned, or pageable when the plan says so
    bool pageable = false;
    std::byte* base(BufferId b) const {
      switch (b) {
        case BufferId::input:
          return static_cast<std::byte*>(input);
        case BufferId::output:
          return static_cast<std::byte*>(output);
        case BufferId::scratch:
          return static_cast<std::byte*>(scratch);
        case BufferId::host:
          return static_cast<std::byte*>(host);
      }
      return nullptr;
    }
  };
  std::vector<RankBuffers> buffers;
  std::vector<std::vector<cudaStream_t>> streams;  // [rank][stream]
  std::vector<cudaEvent_t> events;                 // pool, freed at the end
  std::vector<cudaStream_t> gates;                 // per device
  std::vector<cudaEvent_t> gate_events, start_events;

  ~Resources() {
    // Errors while tearing down are ignored: the run's own error, if any, is the one to report.
    for (std::size_t d = 0; d < gates.size(); ++d) {
      cudaSetDevice(static_cast<int>(d));
      cudaDeviceSynchronize();
    }
    for (auto e : events) cudaEventDestroy(e);
    for (auto e : gate_events) cudaEventDestroy(e);
    for (auto e : start_events) cudaEventDestroy(e);
    for (auto& rs : streams)
      for (auto s : rs)
        if (s) cudaStreamDestroy(s);
    for (auto s : gates) cudaStreamDestroy(s);
    for (auto& b : buffers) {
      cudaFree(b.input);
      cudaFree(b.output);
      cudaFree(b.scratch);
      if (b.pageable)
        std::free(b.host);
      else
        cudaFreeHost(b.host);
    }
  }
};

class CudaExecutor final : public Executor {
 public:
  explicit CudaExecutor(int devices) {
    info_.backend = "cuda";
    info_.devices = devices;
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties", "reading device 0");
    info_.name = prop.name;
    info_.model = prop.name;
    int clock_khz = 0, bus_bits = 0;
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0) == cudaSuccess &&
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0) == cudaSuccess)
      // Double data rate: two transfers per memory clock over the whole bus.
      info_.memory_bandwidth = 2.0 * clock_khz * 1e3 * bus_bits / 8.0;
    (void)cudaGetLastError();
    int driver = 0, runtime = 0;
    check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion", "reading versions");
    check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion", "reading versions");
    info_.driver_version = version_string(driver);
    info_.runtime_version = version_string(runtime);
    const char* queues = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    info_.hardware_queues = static_cast<std::uint32_t>(
        std::clamp(queues ? std::atoi(queues) : kHardwareQueues, 1, kHardwareQueues));
    info_.peer_access = devices > 1;
    for (int a = 0; a < devices; ++a)
      for (int b = 0; b < devices; ++b) {
        if (a == b) continue;
        int can = 0;
        check(cudaDeviceCanAccessPeer(&can, a, b), "cudaDeviceCanAccessPeer", "probing peers");
        if (!can) info_.peer_access = false;
      }
  }

  const DeviceInfo& device() const override { return info_; }
  RunResult run(const sched::Plan& plan, const RunOptions& options) override;

 private:
  DeviceInfo info_;
};

RunResult CudaExecutor::run(const sched::Plan& plan, const RunOptions& options) {
  const PlanLayout layout = layout_plan(plan, options.label);
  const auto p = plan.num_ranks();
  const std::size_t n = plan.num_ops();
  if (!options.links.empty() && options.links.size() != std::size_t{p} * p)
    throw InternalError(
        fmt::format("synthetic link table has {} entries for {} ranks", options.links.size(), p));
  const int devices = info_.devices;
  Resources res;
  res.device_of_rank.resize(p);
  for (sched::RankId r = 0; r < p; ++r) res.device_of_rank[r] = static_cast<int>(r % devices);
  const int used_devices = std::min<int>(devices, static_cast<int>(p));

  if (info_.peer_access) {
    for (int a = 0; a < used_devices; ++a) {
      check(cudaSetDevice(a), "cudaSetDevice", "enabling peer access");
      for (int b = 0; b < used_devices; ++b) {
        if (a == b) continue;
        const cudaError_t s = cudaDeviceEnablePeerAccess(b, 0);
        if (s == cudaErrorPeerAccessAlreadyEnabled)
          (void)cudaGetLastError();
        else
          check(s, "cudaDeviceEnablePeerAccess", fmt::format("enabling access {} -> {}", a, b));
      }
    }
  }

  // Buffers, filled with the known pattern.
  const DataPattern pattern(plan);
  res.buffers.resize(p);
  for (sched::RankId r = 0; r < p; ++r) {
    const auto& sizes = layout.buffers[r];
    const std::string ctx = fmt::format("allocating rank {}'s buffers", r);
    check(cudaSetDevice(res.device_of_rank[r]), "cudaSetDevice", ctx);
    auto& b = res.buffers[r];
    // Zero-byte buffers still get a valid pointer, so that every region resolves.
    check(cudaMalloc(&b.input, std::max<Bytes>(sizes.input, 1)), "cudaMalloc", ctx);
    check(cudaMalloc(&b.output, std::max<Bytes>(sizes.output, 1)), "cudaMalloc", ctx);
    check(cudaMalloc(&b.scratch, std::max<Bytes>(sizes.scratch, 1)), "cudaMalloc", ctx);
    if (plan.host_memory == sched::HostMemory::pageable) {
      b.pageable = true;
      b.host = std::malloc(std::max<Bytes>(sizes.host, 1));
      if (!b.host)
        throw InputError("", "--sizes",
                         fmt::format("malloc of {} bytes failed while {}", sizes.host, ctx));
    } else {
      check(cudaMallocHost(&b.host, std::max<Bytes>(sizes.host, 1)), "cudaMallocHost", ctx);
    }
    std::vector<std::byte> staging(sizes.input);
    pattern.fill_input(r, staging);
    if (!staging.empty())
      check(cudaMemcpy(b.input, staging.data(), staging.size(), cudaMemcpyHostToDevice),
            "cudaMemcpy", fmt::format("uploading rank {}'s input", r));
  }

  // Streams, the start gate of every device, and events. Plans number their streams sparsely
  // (a tree's ids reach 31 where it uses 7), and every CUDA stream takes a turn on the device's
  // few hardware queues, so only the streams that hold ops are created; the others stay null.
  res.streams.resize(p);
  std::vector<std::uint32_t> streams_on_device(static_cast<std::size_t>(used_devices), 1);
  for (sched::RankId r = 0; r < p; ++r) {
    check(cudaSetDevice(res.device_of_rank[r]), "cudaSetDevice", "creating streams");
    res.streams[r].assign(layout.streams[r].size(), nullptr);
    for (std::size_t s = 0; s < layout.streams[r].size(); ++s) {
      if (layout.streams[r][s].empty()) continue;
      check(cudaStreamCreateWithFlags(&res.streams[r][s], cudaStreamNonBlocking),
            "cudaStreamCreate", fmt::format("creating stream {} of rank {}", s, r));
      ++streams_on_device[static_cast<std::size_t>(res.device_of_rank[r])];
    }
  }
  for (int d = 0; d < used_devices; ++d) {
    check(cudaSetDevice(d), "cudaSetDevice", "creating the start gate");
    cudaStream_t gate = nullptr;
    check(cudaStreamCreateWithFlags(&gate, cudaStreamNonBlocking), "cudaStreamCreate", "gate");
    res.gates.push_back(gate);
    cudaEvent_t ge = nullptr, se = nullptr;
    check(cudaEventCreateWithFlags(&ge, cudaEventDisableTiming), "cudaEventCreate", "gate");
    check(cudaEventCreate(&se), "cudaEventCreate", "start event");
    res.gate_events.push_back(ge);
    res.start_events.push_back(se);
  }
  std::vector<bool> has_dependents(n, false);
  for (OpId id = 0; id < n; ++id)
    for (OpId d : plan.deps(id)) has_dependents[d] = true;
  // Event index per op (a send shares its recv's); -1 when nothing waits on the op.
  std::vector<std::int32_t> event_of(n, -1);
  auto new_event = [&](int device) {
    check(cudaSetDevice(device), "cudaSetDevice", "creating events");
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate",
          "creating dependency events");
    res.events.push_back(e);
    return static_cast<std::int32_t>(res.events.size() - 1);
  };
  std::vector<cudaEvent_t> end_events;
  std::vector<int> end_device;
  for (sched::RankId r = 0; r < p; ++r)
    for (std::size_t s = 0; s < res.streams[r].size(); ++s) {
      if (!res.streams[r][s]) continue;
      check(cudaSetDevice(res.device_of_rank[r]), "cudaSetDevice", "creating end events");
      cudaEvent_t e = nullptr;
      check(cudaEventCreate(&e), "cudaEventCreate", "creating end events");
      res.events.push_back(e);
      end_events.push_back(e);
      end_device.push_back(res.device_of_rank[r]);
    }
  // Transfer ready events (the sender's stream reached the send).
  std::vector<std::int32_t> ready_event(n, -1);
  for (OpId id = 0; id < n; ++id) {
    const int dev = res.device_of_rank[plan.rank(id)];
    if (plan.kind(id) == OpKind::recv) {
      event_of[id] = new_event(dev);
      event_of[plan.partner(id)] = event_of[id];
      ready_event[plan.partner(id)] = new_event(res.device_of_rank[plan.rank(plan.partner(id))]);
    } else if (plan.kind(id) != OpKind::send && has_dependents[id]) {
      event_of[id] = new_event(dev);
    }
  }

  auto stream_of = [&](OpId id) { return res.streams[plan.rank(id)][plan.stream(id)]; };
  auto ptr = [&](sched::RankId r, sched::Region region) {
    return res.buffers[r].base(region.buffer) + region.offset;
  };
  auto wait_deps = [&](cudaStream_t stream, OpId id, OpId context_op) {
    for (OpId d : plan.deps(id)) {
      if (stream_of(d) == stream) continue;  // stream order already covers it
      check(cudaStreamWaitEvent(stream, res.events[event_of[d]], 0), "cudaStreamWaitEvent",
            op_context(plan, context_op));
    }
  };

  auto issue = [&](OpId id) {
    const auto rank = plan.rank(id);
    cudaStream_t stream = stream_of(id);
    check(cudaSetDevice(res.device_of_rank[rank]), "cudaSetDevice", op_context(plan, id));
    switch (plan.kind(id)) {
      case OpKind::send: {
        const OpId recv = plan.partner(id);
        const auto receiver = plan.rank(recv);
        cudaStream_t rstream = stream_of(recv);
        // The sender's stream has reached the send once its earlier ops are done.
        check(cudaEventRecord(res.events[ready_event[id]], stream), "cudaEventRecord",
              op_context(plan, id));
        check(cudaSetDevice(res.device_of_rank[receiver]), "cudaSetDevice", op_context(plan, recv));
        check(cudaStreamWaitEvent(rstream, res.events[ready_event[id]], 0), "cudaStreamWaitEvent",
              op_context(plan, recv));
        wait_deps(rstream, id, id);
        wait_deps(rstream, recv, recv);
        if (!options.links.empty()) {
          const auto& link = options.links[std::size_t{rank} * p + receiver];
          if (link.active())
            check(cuda::launch_delay(link.seconds(plan.bytes(id)), rstream), "delay kernel",
                  op_context(plan, recv) + " (synthetic link time)");
        }
        if (plan.bytes(id))
          check(cudaMemcpyAsync(ptr(receiver, plan.dst(recv)), ptr(rank, plan.src(id)),
                                plan.bytes(id), cudaMemcpyDefault, rstream),
                "cudaMemcpyAsync", op_context(plan, recv));
        check(cudaEventRecord(res.events[event_of[recv]], rstream), "cudaEventRecord",
              op_context(plan, recv));
        // The send holds its stream until the transfer is over, as in the simulator.
        check(cudaSetDevice(res.device_of_rank[rank]), "cudaSetDevice", op_context(plan, id));
        check(cudaStreamWaitEvent(stream, res.events[event_of[recv]], 0), "cudaStreamWaitEvent",
              op_context(plan, id));
        return;
      }
      case OpKind::recv:
        throw InternalError("a recv reached the issue loop; layout_plan lists transfers by send");
      case OpKind::reduce:
        wait_deps(stream, id, id);
        check(cuda::launch_reduce(static_cast<int>(plan.dtype), ptr(rank, plan.dst(id)),
                                  ptr(rank, plan.src(id)), ptr(rank, plan.src2(id)),
                                  plan.bytes(id) / sched::dtype_size(plan.dtype), stream),
              "reduce kernel launch", op_context(plan, id));
        break;
      case OpKind::copy:
        wait_deps(stream, id, id);
        if (plan.bytes(id))
          check(cudaMemcpyAsync(ptr(rank, plan.dst(id)), ptr(rank, plan.src(id)), plan.bytes(id),
                                cudaMemcpyDefault, stream),
                "cudaMemcpyAsync", op_context(plan, id));
        break;
      case OpKind::compute:
      case OpKind::delay:
        wait_deps(stream, id, id);
        check(cuda::launch_delay(plan.seconds(id), stream), "delay kernel launch",
              op_context(plan, id));
        break;
    }
    if (event_of[id] >= 0)
      check(cudaEventRecord(res.events[event_of[id]], stream), "cudaEventRecord",
            op_context(plan, id));
  };

  // The gate holds every stream until all ops are enqueued, so that the timed span is the
  // device's work and not the host's issue loop. It is a delay kernel sized from the previous
  // run's issue time, which cannot deadlock whatever the launch queue depth.
  double issue_estimate = 20e-6 * static_cast<double>(n) + 100e-6;
  const std::uint32_t runs = options.warmup + options.repetitions;
  RunResult result;
  result.streams_per_device = *std::max_element(streams_on_device.begin(), streams_on_device.end());
  for (std::uint32_t run = 0; run < runs; ++run) {
    for (sched::RankId r = 0; r < p; ++r) {
      check(cudaSetDevice(res.device_of_rank[r]), "cudaSetDevice", "clearing buffers");
      const auto& sizes = layout.buffers[r];
      const auto& b = res.buffers[r];
      if (sizes.output) check(cudaMemset(b.output, 0, sizes.output), "cudaMemset", "clearing");
      if (sizes.scratch) check(cudaMemset(b.scratch, 0, sizes.scratch), "cudaMemset", "clearing");
      if (sizes.host) std::fill_n(static_cast<std::byte*>(b.host), sizes.host, std::byte{0});
    }
    for (int d = 0; d < used_devices; ++d) {
      check(cudaSetDevice(d), "cudaSetDevice", "synchronising before a run");
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", "synchronising before a run");
      check(cuda::launch_delay(issue_estimate * 1.5, res.gates[d]), "delay kernel launch",
            "opening the start gate");
      check(cudaEventRecord(res.start_events[d], res.gates[d]), "cudaEventRecord", "start");
      check(cudaEventRecord(res.gate_events[d], res.gates[d]), "cudaEventRecord", "gate");
    }
    const auto issue_start = std::chrono::steady_clock::now();
    for (sched::RankId r = 0; r < p; ++r) {
      check(cudaSetDevice(res.device_of_rank[r]), "cudaSetDevice", "waiting on the gate");
      for (auto s : res.streams[r])
        if (s)
          check(cudaStreamWaitEvent(s, res.gate_events[res.device_of_rank[r]], 0),
                "cudaStreamWaitEvent", "waiting on the gate");
    }
    for (OpId id : layout.issue_order) issue(id);
    std::size_t e = 0;
    for (sched::RankId r = 0; r < p; ++r) {
      check(cudaSetDevice(res.device_of_rank[r]), "cudaSetDevice", "recording the end");
      for (auto s : res.streams[r])
        if (s) check(cudaEventRecord(end_events[e++], s), "cudaEventRecord", "recording the end");
    }
    const double issue_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - issue_start).count();
    for (int d = 0; d < used_devices; ++d) {
      check(cudaSetDevice(d), "cudaSetDevice", "waiting for the run");
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", "waiting for the run");
    }
    // If the host issued slower than the gate allowed, the first ops started early and the
    // measurement includes host issue time; widen the gate for the next run.
    issue_estimate = std::max(issue_estimate, issue_seconds);
    float longest_ms = 0;
    for (std::size_t i = 0; i < end_events.size(); ++i) {
      float ms = 0;
      check(cudaSetDevice(end_device[i]), "cudaSetDevice", "reading timers");
      check(cudaEventElapsedTime(&ms, res.start_events[end_device[i]], end_events[i]),
            "cudaEventElapsedTime", "reading timers");
      longest_ms = std::max(longest_ms, ms);
    }
    if (run >= options.warmup) result.seconds.push_back(static_cast<double>(longest_ms) * 1e-3);
  }

  if (options.check) {
    for (sched::RankId r = 0; r < p; ++r) {
      std::vector<std::byte> out(layout.buffers[r].output);
      check(cudaSetDevice(res.device_of_rank[r]), "cudaSetDevice", "reading outputs");
      if (!out.empty())
        check(cudaMemcpy(out.data(), res.buffers[r].output, out.size(), cudaMemcpyDeviceToHost),
              "cudaMemcpy", fmt::format("reading rank {}'s output", r));
      result.wrong_elements += pattern.count_wrong(r, out);
      result.checked_elements += pattern.checked_elements(r, out.size());
    }
  }
  return result;
}

}  // namespace

bool cuda_available() {
  return device_count_or_zero() > 0;
}

std::unique_ptr<Executor> make_cuda_executor() {
  const int devices = device_count_or_zero();
  if (devices == 0)
    throw InputError("", "--backend",
                     "no CUDA device found (cudaGetDeviceCount reported none or failed); use "
                     "--backend host");
  return std::make_unique<CudaExecutor>(devices);
}

}  // namespace collsim::backend
