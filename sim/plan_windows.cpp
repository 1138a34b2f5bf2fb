#include "sim/plan_windows.hpp"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

namespace collsim::sim {

using sched::kNoOp;
using sched::OpId;
using sched::OpKind;

std::vector<PlanWindow> plan_windows(const sched::Plan& plan, std::size_t target) {
  const auto n = static_cast<OpId>(plan.num_ops());
  const auto whole = [n] { return std::vector<PlanWindow>{{n, 0}}; };
  if (plan.first_op() != 0 || target == 0 || n / 2 < target) return whole();
  // The last op seen on each (rank, stream): in one table where it is no larger than the plan,
  // else in a map. The trees use 16 streams a rank: the map's look-up of every op and its node
  // for every (rank, stream) were most of the scan (1.3 G instructions at 131,072 GPUs).
  const sched::RankId ranks = plan.num_ranks();
  sched::StreamId most = 0;
  for (OpId op = 0; op < n; ++op) most = std::max(most, plan.stream(op));
  const std::size_t width = std::size_t{most} + 1;
  const bool table = std::size_t{ranks} * width <= std::max<std::size_t>(n, std::size_t{1} << 16);
  std::vector<OpId> last(table ? std::size_t{ranks} * width : 0, kNoOp);
  std::unordered_map<std::uint64_t, OpId> spread;
  std::vector<PlanWindow> windows;
  OpId begin = 0;      // the open window's first op
  OpId least = kNoOp;  // the least op that an op of the open window waits for
  OpId reach = 0;      // one past the last op that an op before `op` names ahead of itself
  for (OpId op = 0; op < n; ++op) {
    if (op - begin >= target && reach <= op) {
      windows.push_back({op, least});
      begin = op;
      least = kNoOp;
    }
    const sched::RankId rank = plan.rank(op);
    if (rank >= ranks) return whole();
    const sched::StreamId stream = plan.stream(op);
    OpId& previous =
        table ? last[std::size_t{rank} * width + stream]
              : spread.try_emplace(std::uint64_t{rank} << 16 | stream, kNoOp).first->second;
    bool waits = previous != kNoOp;
    if (waits) least = std::min(least, previous);
    previous = op;
    for (OpId d : plan.deps(op)) {
      if (d >= n) return whole();
      waits = true;
      least = std::min(least, d);
      if (d > op) reach = std::max(reach, d + 1);
    }
    const OpKind kind = plan.kind(op);
    if (kind == OpKind::send || kind == OpKind::recv) {
      const OpId q = plan.partner(op);
      if (q >= n) return whole();
      if (q > op)
        reach = std::max(reach, q + 1);
      else if (plan.partner(q) != op)
        return whole();
    }
    // An op that waits for nothing is ready at the start, so everything before it is registered
    // at the start as well.
    if (!waits && begin > 0) {
      windows.clear();
      begin = 0;
    }
  }
  windows.push_back({n, least});
  if (windows.size() == 1) return whole();
  windows.front().trigger = 0;
  // A window is registered after the one before it: early enough for every window after it.
  for (std::size_t k = windows.size() - 1; k-- > 1;)
    windows[k].trigger = std::min(windows[k].trigger, windows[k + 1].trigger);
  return windows;
}

}  // namespace collsim::sim
