#pragma once
// Runs a plan with one thread per (rank, stream) and memcpy for transfers and copies.
//
// Each op has a state word (pending, posted, done) that threads wait on with
// std::atomic::wait. A send posts itself when its stream and dependencies allow and then waits;
// the receiving thread performs the copy (after the synthetic link time) and completes both ends,
// so a send occupies its stream until its transfer is over, as in the simulator. Plans are checked
// for cycles first (layout_plan), so a valid plan cannot deadlock.
#include "cuda_backend/executor.hpp"

namespace collsim::backend {

class HostExecutor final : public Executor {
 public:
  HostExecutor();
  const DeviceInfo& device() const override { return info_; }
  RunResult run(const sched::Plan& plan, const RunOptions& options) override;

 private:
  DeviceInfo info_;
};

// Waits `seconds` with sub-microsecond resolution: sleeps for the bulk, spins for the rest.
void precise_wait(double seconds);

}  // namespace collsim::backend
