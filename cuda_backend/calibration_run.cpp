// The micro-plans of `collsim calibrate` and the loop that times them.
#include <fmt/format.h>

#include <chrono>
#include <ctime>

#include "cuda_backend/calibration.hpp"
#include "topology/error.hpp"

namespace collsim::backend {

using sched::BufferId;
using sched::Op;
using sched::OpKind;
using sched::Plan;

namespace {

Plan base_plan(std::uint32_t ranks, Bytes size, sched::DType dtype = sched::DType::fp32) {
  Plan plan;
  plan.collective = sched::Collective::allreduce;  // input and output both `size` bytes
  plan.algorithm = "calibration";
  plan.dtype = dtype;
  plan.size = size;
  plan.rank_gpu.assign(ranks, 0);
  return plan;
}

Op make_op(OpKind kind, Bytes bytes, BufferId src, BufferId dst) {
  Op op;
  op.kind = kind;
  op.bytes = bytes;
  op.src = {src, 0};
  op.dst = {dst, 0};
  return op;
}

Plan copy_plan(Bytes bytes, BufferId src, BufferId dst,
               sched::HostMemory host = sched::HostMemory::pinned) {
  Plan plan = base_plan(1, bytes);
  plan.host_memory = host;
  Op op = make_op(OpKind::copy, bytes, src, dst);
  // host -> host copies within one buffer use its two halves.
  if (src == BufferId::host && dst == BufferId::host) op.dst.offset = bytes;
  plan.add(op);
  return plan;
}

Plan send_plan(Bytes bytes) {
  Plan plan = base_plan(2, bytes);
  Op send = make_op(OpKind::send, bytes, BufferId::input, BufferId::input);
  send.rank = 0;
  send.peer = 1;
  Op recv = make_op(OpKind::recv, bytes, BufferId::output, BufferId::output);
  recv.rank = 1;
  recv.peer = 0;
  const auto s = plan.add(send);
  const auto r = plan.add(recv);
  plan.match(s, r);
  return plan;
}

Plan reduce_plan(Bytes bytes, sched::DType dtype) {
  Plan plan = base_plan(1, bytes, dtype);
  Op op = make_op(OpKind::reduce, bytes, BufferId::input, BufferId::output);
  op.src2 = {BufferId::input, 0};
  plan.add(op);
  return plan;
}

Plan delay_plan(double seconds) {
  Plan plan = base_plan(1, 0);
  Op op;
  op.kind = OpKind::delay;
  op.seconds = seconds;
  plan.add(op);
  return plan;
}

Plan event_plan() {
  Plan plan = base_plan(1, 0);
  Op first;
  first.kind = OpKind::delay;
  const auto a = plan.add(first);
  Op second = first;
  second.stream = 1;
  plan.add(second, {a});
  return plan;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace

Calibration run_calibration(Executor& executor, const CalibrationOptions& options) {
  if (options.sizes.empty())
    throw InputError("", "--sizes", "no sizes to calibrate; give e.g. --sizes 4KiB:64MiB:x4");
  if (options.repetitions < 2)
    throw InputError("", "--reps",
                     fmt::format("{} repetitions; at least 2 are needed for a confidence interval",
                                 options.repetitions));
  const DeviceInfo& info = executor.device();
  Calibration c;
  c.backend = info.backend;
  c.device = info.name;
  c.model = info.model;
  c.driver_version = info.driver_version;
  c.runtime_version = info.runtime_version;
  c.devices = info.devices;
  c.device_memory_bandwidth = info.memory_bandwidth;
  c.repetitions = options.repetitions;
  c.warmup = options.warmup;
  c.date = utc_now();

  RunOptions run;
  run.warmup = options.warmup;
  run.repetitions = options.repetitions;
  run.check = false;  // micro-plans do not compute a collective
  auto measure = [&](const std::string& op, double x, const Plan& plan) {
    run.label = fmt::format("calibration micro-plan {} x={}", op, x);
    const RunResult r = executor.run(plan, run);
    for (double t : r.seconds) c.points.push_back({op, x, t});
  };

  measure("empty", 0, delay_plan(0));
  measure("event", 0, event_plan());
  std::vector<double> delays = options.delays;
  if (delays.empty()) delays = {1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4};
  for (double d : delays) measure("delay", d, delay_plan(d));
  for (Bytes bytes : options.sizes) {
    const double x = static_cast<double>(bytes);
    measure("d2d", x, copy_plan(bytes, BufferId::input, BufferId::output));
    measure("d2h", x, copy_plan(bytes, BufferId::input, BufferId::host));
    measure("h2d", x, copy_plan(bytes, BufferId::host, BufferId::output));
    measure("host", x, copy_plan(bytes, BufferId::host, BufferId::host));
    measure("d2h_pageable", x,
            copy_plan(bytes, BufferId::input, BufferId::host, sched::HostMemory::pageable));
    measure("h2d_pageable", x,
            copy_plan(bytes, BufferId::host, BufferId::output, sched::HostMemory::pageable));
    measure("send", x, send_plan(bytes));
    // Reductions need whole elements; every size of the sweep that is not is rounded down.
    const Bytes even = bytes & ~Bytes{3};
    if (even == 0) continue;
    measure("reduce_fp32", static_cast<double>(even), reduce_plan(even, sched::DType::fp32));
    measure("reduce_fp16", static_cast<double>(even), reduce_plan(even, sched::DType::fp16));
    measure("reduce_bf16", static_cast<double>(even), reduce_plan(even, sched::DType::bf16));
  }
  fit_points(c);
  return c;
}

}  // namespace collsim::backend
