#pragma once
// Engine notifications for traces, statistics and other writers.
//
// The engine holds at most one observer pointer; without one, each notification point costs a
// single predictable branch. With one, it costs a virtual call, so observers are for runs that
// want a trace, not for sweeps.
#include <cstdint>

#include "schedules/plan.hpp"
#include "sim/resources.hpp"
#include "topology/routing.hpp"

namespace collsim::sim {

struct Result;

class Observer {
 public:
  virtual ~Observer() = default;
  // Before the first event; the references stay valid until on_finish returns.
  virtual void on_begin(const topo::Router& /*router*/, const sched::Plan& /*plan*/,
                        const ResourceMap& /*resources*/) {}
  // An op began consuming time: a transfer whose two ends are ready, a copy holding its copy
  // engine, a reduce, compute or delay. `ready` is when its stream and dependencies let it go.
  virtual void on_op_start(sched::OpId /*op*/, double /*ready*/, double /*start*/) {}
  virtual void on_op_end(sched::OpId /*op*/, double /*end*/) {}
  // The total rate through a resource (Σ weight × flow rate, bytes/s) changed at `time`.
  virtual void on_resource_load(ResourceId /*resource*/, double /*time*/, double /*load*/) {}
  virtual void on_background_end(std::uint32_t /*index*/, double /*time*/) {}
  virtual void on_finish(const Result& /*result*/) {}
};

}  // namespace collsim::sim
