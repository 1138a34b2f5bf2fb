#pragma once
// `collsim validate`: run collective plans (allreduce by naive and the pipelined ring by default,
// any generated algorithm and collective on request) on a device, simulate the same plans on the
// (calibrated) topology, and compare end-to-end times row by row.
#include <cstdint>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "cuda_backend/calibration.hpp"
#include "cuda_backend/executor.hpp"
#include "schedules/generate.hpp"
#include "topology/topology.hpp"

namespace collsim::backend {

// ConvNeXt-Tiny has 28,589,128 parameters; its fp32 gradients are 114,356,512 bytes.
inline constexpr Bytes kConvNextTinyGradientBytes = Bytes{28'589'128} * 4;

struct ValidationOptions {
  std::uint32_t ranks = 4;  // the first `ranks` GPUs of the topology
  std::vector<Bytes> sizes = {Bytes{1} << 20, Bytes{4} << 20, Bytes{16} << 20,
                              kConvNextTinyGradientBytes};
  std::vector<std::uint32_t> chunks = {1, 2, 4, 8, 16};
  // Rows per size follow this order: naive once (one monolithic step, so k does not apply), every
  // other algorithm at every k of `chunks`.
  std::vector<sched::Algorithm> algorithms = {sched::Algorithm::naive, sched::Algorithm::ring};
  sched::DType dtype = sched::DType::fp32;                      // of every row
  sched::Collective collective = sched::Collective::allreduce;  // of every row
  sched::HostMemory host_memory = sched::HostMemory::pinned;     // of every row's staging
  std::uint32_t warmup = 1;
  std::uint32_t repetitions = 3;
  // Make every transfer wait its route's latency + bytes / bottleneck bandwidth, so that the
  // measured run crosses the topology's links as the simulator assumes.
  bool inject_links = true;
  // Seconds per byte of the device's own copy for a transfer (the calibrated "send" beta). The
  // executor waits the synthetic link time and then copies, so the injected per-byte time is
  // reduced by this much: wait + copy then equals the link's bytes / bandwidth. 0: no correction.
  double copy_seconds_per_byte = 0;
  // Physical devices under the virtual ranks: rank r runs on device r % devices, as the CUDA
  // executor places them (the host executor is one device). Ranks on one device share its memory,
  // so they are simulated with one memory resource: the ranks of a ring that reduce at once
  // divide its bandwidth, and the naive root reducing alone has all of it.
  std::uint32_t devices = 1;
  // Refuse a row whose buffers (every rank's input, output, scratch and host buffer) exceed
  // this many bytes of host memory, before allocating them; 0: no limit. For the host
  // executor, whose buffers are all in host memory.
  Bytes host_memory_limit = 0;
};

struct ValidationRow {
  std::string algorithm;  // sched::to_string of the algorithm
  std::uint32_t chunks = 1;
  Bytes size = 0;
  double measured = 0;   // median over repetitions, seconds
  double predicted = 0;  // simulated, seconds
  double error = 0;      // (predicted - measured) / measured
  std::uint64_t wrong_elements = 0;
  std::uint64_t checked_elements = 0;
  std::uint32_t streams_per_device = 0;  // RunResult::streams_per_device of the measured run
};

// The error of a set of rows: the median of |error|, and the row of the largest |error|.
struct ErrorSummary {
  double median_abs_error = 0;
  std::size_t worst = 0;  // index into ValidationReport::rows
};

struct ValidationReport {
  // What every row ran: ValidationOptions::collective and ::dtype.
  sched::Collective collective = sched::Collective::allreduce;
  sched::DType dtype = sched::DType::fp32;
  std::vector<ValidationRow> rows;
  double median_abs_error = 0;
  std::size_t worst = 0;  // index of the row with the largest |error|
  std::uint64_t wrong_elements = 0;
  // Each algorithm's rows, in the order the algorithms first appear.
  std::vector<std::pair<std::string, ErrorSummary>> per_algorithm;
};

// Applies a calibration to the topology for this experiment: apply_calibration, plus what the
// experiment itself adds to each transfer. Every injected link wait is one more kernel, so the
// "delay" intercept joins the GPUs' alpha; and the device's own copy time per byte ("send" beta)
// is taken off the injected per-byte wait (options.copy_seconds_per_byte).
ApplyReport calibrate_validation(topo::Topology& topology, const Calibration& calibration,
                                 ValidationOptions& options, const std::string& file);

// Throws InputError for what the options alone make impossible: fewer than 2 ranks, no
// algorithm, or an algorithm that does not implement the collective. run_validation and
// predict_validation check it too; a command line calls it before loading anything.
void check_validation_options(const ValidationOptions& options);

// Runs the experiment. `topology` is used as given (calibrate it first); it must hold at least
// `ranks` GPUs. Throws InputError otherwise.
ValidationReport run_validation(Executor& executor, const topo::Topology& topology,
                                const ValidationOptions& options,
                                const std::string& topology_file = "topology");

// The same rows, simulated only: `measured` and `error` stay 0. Given the measured times of an
// earlier run (in row order), it fills them in and computes the errors, so that a recorded
// device run can be compared with the model again without the device.
ValidationReport predict_validation(const topo::Topology& topology,
                                    const ValidationOptions& options,
                                    const std::vector<double>& measured = {},
                                    const std::string& topology_file = "topology");

void write_validation_csv(const ValidationReport& report, std::ostream& out);

}  // namespace collsim::backend
