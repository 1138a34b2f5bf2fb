#pragma once
// Copy engines: how many copies (d2h, h2d, d2d) each GPU runs at once, and who waits.
//
// A GPU with `copy_engines = c` runs at most c copies; the others wait. Engines are handed out
// at the end of each instant, once every event of that instant has run: first to the copies
// that have waited longest, and among copies that became ready at the same instant in plan
// order (lowest op id first). So who waits depends on the plan and the times alone, never on
// the order in which the engine happened to run the events of one instant (docs/cost-model.md,
// "Copy engines").

#include <algorithm>
#include <cstdint>
#include <vector>

#include "schedules/plan.hpp"
#include "sim/engine.hpp"
#include "topology/topology.hpp"

namespace collsim::sim {

class CopyEngines {
 public:
  void reset(const topo::Topology& topology);

  // A copy on `gpu` became ready. True: it may start now (the GPU's engines are unlimited);
  // false: it waits for grant().
  bool arrive(topo::NodeId gpu, sched::OpId op, double now);
  // A copy on `gpu` that took its engine at `held_since` finished.
  void release(topo::NodeId gpu, double held_since, double now);

  // Whether grant() has work: since the last one a copy arrived, or an engine freed while copies
  // wait.
  bool pending() const { return !touched_.empty(); }
  // Hands the free engines of every touched GPU to its waiting copies, calling start(op) for each
  // copy that takes one. Called when the instant `now` has no event left.
  template <class Start>
  void grant(double now, Start&& start);

  std::vector<CopyEngineUsage> usage() const;  // GPUs that ran copies, by NodeId

 private:
  struct Waiting {
    sched::OpId op;
    double since;
  };
  struct Gpu {
    std::uint32_t total = 0;  // 0: unlimited
    std::uint32_t free = 0;
    bool used = false;
    bool touched = false;
    // Ordered by (since, op); [head, size) still wait.
    std::vector<Waiting> queue;
    std::size_t head = 0;
    double busy = 0;
    double max_wait = 0;
  };
  void touch(topo::NodeId gpu);
  // Puts the copies waiting since `now`, which arrived in event order, in plan order.
  void order_tail(Gpu& g, double now);

  std::vector<Gpu> gpus_;  // by NodeId
  std::vector<topo::NodeId> touched_;
};

template <class Start>
void CopyEngines::grant(double now, Start&& start) {
  // In GPU order: the flows the grants start are then numbered the same way however the
  // instant's events ran.
  std::sort(touched_.begin(), touched_.end());
  for (const topo::NodeId id : touched_) {
    Gpu& g = gpus_[id];
    g.touched = false;
    order_tail(g, now);
    while (g.free > 0 && g.head < g.queue.size()) {
      const Waiting w = g.queue[g.head++];
      --g.free;
      g.max_wait = std::max(g.max_wait, now - w.since);
      start(w.op);
    }
    if (g.head == g.queue.size()) {
      g.queue.clear();
      g.head = 0;
    }
  }
  touched_.clear();
}

}  // namespace collsim::sim
