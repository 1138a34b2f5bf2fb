#pragma once
// Executors run a plan on real memory with the IR's semantics (schedules/plan.hpp): per rank an
// input, output, scratch and pinned host buffer; ops in order per (rank, stream); dependencies as
// events; a matched send/recv pair as one copy that starts when both ends are ready.
//
// Two implementations share this interface: the host executor (threads + memcpy, runs anywhere,
// so the execution logic is always tested) and the CUDA executor (streams, events, copies and
// kernels on the local GPUs). Both fill the inputs with DataPattern values and, after the last
// repetition, count wrong output elements.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/plan.hpp"
#include "topology/units.hpp"

namespace collsim::backend {

// A link that a transfer pretends to cross: the executor waits latency + bytes / bandwidth before
// the copy itself, so that a one-device run can mimic a slower fabric. Zero latency and unlimited
// bandwidth inject nothing.
struct SyntheticLink {
  double latency = 0;             // seconds
  double bandwidth = kUnlimited;  // bytes/s
  bool active() const { return latency > 0 || bandwidth < kUnlimited; }
  double seconds(Bytes bytes) const {
    return latency + (bandwidth < kUnlimited ? static_cast<double>(bytes) / bandwidth : 0.0);
  }
};

struct RunOptions {
  // Empty, or num_ranks^2 entries: links[sender * num_ranks + receiver].
  std::vector<SyntheticLink> links;
  std::uint32_t warmup = 1;       // untimed runs first (page faults, lazy module loading)
  std::uint32_t repetitions = 1;  // timed runs
  bool check = true;              // count wrong output elements after the last run
  std::string label = "plan";     // names the plan in error messages
};

struct RunResult {
  std::vector<double> seconds;  // one per timed repetition, from the first op's release to the
                                // completion of the last op
  std::uint64_t wrong_elements = 0;
  std::uint64_t checked_elements = 0;
  // The most streams the run put on one device, its start gate included (0 where streams do not
  // apply). Past DeviceInfo::hardware_queues, streams share queues and can wait behind one
  // another's event waits: a serialisation the plan does not have.
  std::uint32_t streams_per_device = 0;
  double median() const;
  double min() const;
};

struct DeviceInfo {
  std::string backend;         // "host" or "cuda"
  std::string name;            // e.g. "NVIDIA H200" or "host: <cpu model>"
  std::string model;           // matched against topology GPU models by apply_calibration
  std::string driver_version;  // empty where it does not apply
  std::string runtime_version;
  int devices = 1;              // CUDA devices visible
  bool peer_access = false;     // every pair of visible devices can access each other
  double memory_bandwidth = 0;  // bytes/s from the device's specification, 0 if unknown
  // Hardware work queues per device that streams map onto (CUDA_DEVICE_MAX_CONNECTIONS);
  // 0 where it does not apply.
  std::uint32_t hardware_queues = 0;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual const DeviceInfo& device() const = 0;
  // Validates the plan (InputError on a malformed or deadlocking plan), runs it warmup +
  // repetitions times and checks the outputs of the last run.
  virtual RunResult run(const sched::Plan& plan, const RunOptions& options) = 0;
};

// "host" or "cuda". Throws InputError for any other name, and for "cuda" when collsim was built
// without CUDA or no CUDA device is present.
std::unique_ptr<Executor> make_executor(std::string_view backend);

// The synthetic link table for a plan whose every pair of ranks shares `link`.
std::vector<SyntheticLink> uniform_links(std::uint32_t ranks, SyntheticLink link);

}  // namespace collsim::backend
