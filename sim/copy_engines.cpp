#include "sim/copy_engines.hpp"

#include <algorithm>

namespace collsim::sim {

void CopyEngines::reset(const topo::Topology& topology) {
  gpus_.assign(topology.num_nodes(), Gpu{});
  for (topo::NodeId id = 0; id < topology.num_nodes(); ++id)
    gpus_[id].total = gpus_[id].free = topology.node(id).copy_engines;
  touched_.clear();
}

bool CopyEngines::arrive(topo::NodeId gpu, sched::OpId op, double now) {
  Gpu& g = gpus_[gpu];
  g.used = true;
  if (g.total == 0) return true;
  g.queue.push_back(Waiting{op, now});
  touch(gpu);
  return false;
}

void CopyEngines::release(topo::NodeId gpu, double held_since, double now) {
  Gpu& g = gpus_[gpu];
  g.busy += now - held_since;
  if (g.total == 0) return;
  ++g.free;
  if (g.head < g.queue.size()) touch(gpu);
}

void CopyEngines::touch(topo::NodeId gpu) {
  if (gpus_[gpu].touched) return;
  gpus_[gpu].touched = true;
  touched_.push_back(gpu);
}

void CopyEngines::order_tail(Gpu& g, double now) {
  // The queue is in (since, op) order up to the copies that arrived during this instant, which
  // came in event order; all of them, and any still waiting from an earlier grant of the same
  // instant, have since == now.
  std::size_t first = g.queue.size();
  while (first > g.head && g.queue[first - 1].since == now) --first;
  std::sort(g.queue.begin() + static_cast<std::ptrdiff_t>(first), g.queue.end(),
            [](const Waiting& a, const Waiting& b) { return a.op < b.op; });
}

std::vector<CopyEngineUsage> CopyEngines::usage() const {
  std::vector<CopyEngineUsage> out;
  for (topo::NodeId id = 0; id < gpus_.size(); ++id)
    if (gpus_[id].used)
      out.push_back(CopyEngineUsage{id, gpus_[id].total, gpus_[id].busy, gpus_[id].max_wait});
  return out;
}

}  // namespace collsim::sim
