#pragma once
// Calibration: micro-plans timed on the local device, fitted per op kind as t = alpha + beta x,
// written to calibration.json (docs/calibration-format.md) and applied to a topology's GPUs.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "cuda_backend/executor.hpp"
#include "cuda_backend/fit.hpp"
#include "topology/topology.hpp"

namespace collsim::backend {

// What each op kind measures. `x` is the payload in bytes, except for "delay" (requested seconds)
// and the size-less "empty" and "event".
//   empty        one delay op of 0 s on one rank: the cost of any op
//   event        a 0 s op on a second stream that depends on one on the first: an event hop
//   delay        one delay op of x seconds: alpha is the overhead, beta should be 1
//   d2d          copy input -> output on one rank
//   d2h, h2d     copy between device memory and the pinned host buffer
//   host         memcpy within the pinned host buffer
//   d2h_pageable, h2d_pageable   the same copies with a pageable host buffer
//   send         a matched send/recv between two ranks (peer-to-peer when they sit on two GPUs)
//   reduce_fp32, reduce_fp16, reduce_bf16   dst = a + b on one rank
struct OpKindInfo {
  std::string_view name;
  std::string_view x_unit;      // "bytes", "seconds" or "none"
  double traffic_per_byte;      // memory or bus bytes moved per payload byte (0: not a transfer)
  std::string_view definition;  // how the bandwidth is defined, written into the file
};
const std::vector<OpKindInfo>& op_kinds();
const OpKindInfo* find_op_kind(std::string_view name);

struct CalibrationPoint {
  std::string op;
  double x = 0;  // bytes or seconds, see OpKindInfo
  double seconds = 0;
};

struct OpFit {
  std::string op;
  LinearFit fit;
  // Payload bytes per second (1 / beta) and the memory or bus traffic it implies
  // (traffic_per_byte / beta); 0 when beta is not positive or the kind has no size.
  double payload_bandwidth = 0;
  double traffic_bandwidth = 0;
};

struct Calibration {
  std::string backend;  // "cuda" or "host"
  std::string device;   // device name as reported
  std::string model;    // matched against topology GPU "model"; "*" matches every GPU
  std::string driver_version;
  std::string runtime_version;
  std::string date;  // UTC, ISO 8601
  int devices = 1;
  double device_memory_bandwidth = 0;  // bytes/s from the specification; 0 if unknown
  std::uint32_t repetitions = 0;
  std::uint32_t warmup = 0;
  std::vector<OpFit> fits;
  std::vector<CalibrationPoint> points;

  const OpFit* find(std::string_view op) const;
};

struct CalibrationOptions {
  std::vector<Bytes> sizes;       // payload sweep, e.g. 4 KiB .. 64 MiB
  std::vector<double> delays;     // delay sweep, seconds; empty: a default set
  std::uint32_t repetitions = 5;  // timed runs per point
  std::uint32_t warmup = 2;       // untimed runs per point
};

// Runs every micro-plan on `executor` and fits each op kind.
Calibration run_calibration(Executor& executor, const CalibrationOptions& options);
// Fits the points already in `calibration` (replacing its fits).
void fit_points(Calibration& calibration);

nlohmann::json to_json(const Calibration& calibration);
void save_calibration(const Calibration& calibration, const std::string& path);
// Reads and validates a calibration file; every problem is reported at once as an InputError.
Calibration load_calibration(const std::string& path);
Calibration parse_calibration(std::string_view text, const std::string& file);

struct ApplyReport {
  std::vector<topo::NodeId> gpus;    // GPUs that matched
  std::vector<std::string> changes;  // one line per parameter changed, for --verbose output
};

// Overrides the parameters of every GPU whose model matches (see docs/calibration-format.md):
//   alpha           <- send.alpha            (software start-up of a transfer)
//   launch_latency  <- reduce_fp32.alpha
//   memory_bandwidth <- 3 / reduce_fp32.beta (the engine charges a reduce 3 bytes per byte)
//   reduce_traffic.fp16, .bf16 <- reduce_fp16.beta, reduce_bf16.beta x memory_bandwidth
//                     (bytes charged per byte reduced, so each dtype takes its measured time)
//   bandwidth of the GPU's own PCIe links <- 1 / d2h.beta (outbound), 1 / h2d.beta (inbound)
//   memcpy_bandwidth of the GPU's host CPU <- 1 / host.beta
// Fits that are missing or unphysical (beta <= 0) leave the parameter alone; a negative alpha is
// taken as 0. Throws InputError naming the models present when no GPU matches.
ApplyReport apply_calibration(topo::Topology& topology, const Calibration& calibration,
                              const std::string& file = "calibration");

}  // namespace collsim::backend
