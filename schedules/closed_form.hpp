#pragma once
// Alpha-beta-gamma closed forms of every generated schedule (derived in docs/algorithms.md).
//
// They describe a uniform machine: every pair of GPUs joined by its own link of bandwidth b and
// latency l, every transfer paying the sender's start-up alpha, a reduction of m bytes costing
// launch + 3m / memory_bandwidth (another traffic per byte than 3 where the dtype's kernel is
// slower than memory) and a device copy 2m / memory_bandwidth. On such a topology the engine's
// time for the generated plan equals the closed form to rounding (tests/model). The forms
// assume the size divides evenly into p * k elements; otherwise they use the mean piece.
#include "schedules/generate.hpp"
#include "topology/units.hpp"

namespace collsim::sched {

struct UniformCosts {
  double alpha = 0;                      // s, software start-up per transfer
  double latency = 0;                    // s, link latency between any two GPUs
  double bandwidth = kUnlimited;         // bytes/s, per direction of every link
  double launch = 0;                     // s, reduction kernel launch latency
  double memory_bandwidth = kUnlimited;  // bytes/s, GPU memory (reductions, device copies)
  // Bytes of memory traffic per byte reduced for the request's dtype (topo::Node::reduce_traffic).
  double reduce_traffic = 3;

  double transfer(double bytes) const { return alpha + latency + bytes / bandwidth; }
  double reduce(double bytes) const { return launch + reduce_traffic * bytes / memory_bandwidth; }
  double device_copy(double bytes) const { return 2 * bytes / memory_bandwidth; }
};

// Seconds the plan generate(req) takes on p ranks of a uniform machine of costs u. Throws
// InputError when the request does not fit (same rules as generate) and for hier, whose time
// depends on the shape of the servers (closed_form_hier).
double closed_form(const PlanRequest& req, RankId p, const UniformCosts& u);

// Hierarchical allreduce on s servers of g GPUs with costs `intra` inside a server and `inter`
// between servers.
double closed_form_hier(const PlanRequest& request, RankId servers, RankId gpus_per_server,
                        const UniformCosts& intra, const UniformCosts& inter);

}  // namespace collsim::sched
