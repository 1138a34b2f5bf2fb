#pragma once
// Where the engine may register a whole plan in pieces, as it registers a streamed one.
//
// A streamed run holds records for a window of ops only, because its generator ends batches
// where nothing of the next batch can be ready yet. A plan built whole has no such marks, yet
// holding every op's record at once costs 32 bytes an op (1.3 GiB for the 1024-GPU ring at
// k = 8) on top of the plan. This finds the marks in the plan itself: window k is the ops
// [end of window k - 1, end), and the engine registers it before the first completion of an op
// numbered `trigger` or more, where no op of the window waits for an op numbered less (through
// its stream or a dependency). So when a window is registered nothing its ops wait for has
// completed, and the engine links them exactly as it would have at the start. A window never
// begins inside a transfer or after an op with a dependency on an op of a later window.
#include <cstddef>
#include <vector>

#include "schedules/plan.hpp"

namespace collsim::sim {

struct PlanWindow {
  sched::OpId end = 0;      // one past the window's last op
  sched::OpId trigger = 0;  // windows after the first: see above; nondecreasing
};

// Windows of at least `target` ops (the last may be shorter) covering the whole plan, or one
// window where the plan gives no place to cut: an op with no predecessor after the first
// window's, a send and recv that do not name each other, or an op naming one that does not
// exist (the engine reports those when it registers the plan).
std::vector<PlanWindow> plan_windows(const sched::Plan& plan, std::size_t target);

}  // namespace collsim::sim
