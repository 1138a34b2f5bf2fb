#pragma once
// A Chrome / Perfetto trace of a simulated run (open it in ui.perfetto.dev or chrome://tracing).
//
// One process per node that did something: a GPU's process holds a track per stream of the
// rank(s) bound to it, with one slice per op; every resource with a limited capacity gets a
// counter track (GB/s through it) in the process of the node it belongs to (a link belongs to the
// node it leaves). Times are microseconds. The writer is an Observer: the engine knows nothing of
// it, and a run without a trace pays nothing for it.
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "sim/observer.hpp"
#include "topology/topology.hpp"

namespace collsim::sim {

class ChromeTrace : public Observer {
 public:
  void on_begin(const topo::Router& router, const sched::Plan& plan,
                const ResourceMap& resources) override;
  void on_op_start(sched::OpId op, double ready, double start) override;
  void on_op_end(sched::OpId op, double end) override;
  void on_resource_load(ResourceId resource, double time, double load) override;
  void on_background_end(std::uint32_t index, double time) override;

  // Keeps only the ops of the ranks on these GPUs, and the resources of the servers they sit in:
  // their nodes and every link into or out of them (a GPU outside any server: its own). A trace
  // of every rank of a large run is gigabytes, more than a viewer in a browser opens. Empty, the
  // default: everything. Set before the run.
  void keep_only(std::vector<topo::NodeId> gpus) { keep_gpus_ = std::move(gpus); }

  // The trace as JSON ({"traceEvents": [...]}); valid after the run.
  void write(std::ostream& out) const;
  // Writes to `path` and returns the bytes written; throws InputError if the file cannot be
  // written.
  std::uint64_t write_file(const std::string& path) const;

 private:
  struct Slice {
    sched::OpId op;
    double ready, start, end;
  };
  struct Sample {
    ResourceId resource;
    double time, load;
  };
  bool kept(ResourceId resource) const;

  std::vector<topo::NodeId> keep_gpus_;
  std::vector<bool> keep_rank_;  // by rank; empty: every rank
  std::vector<bool> keep_node_;  // by node; empty: every node
  const topo::Topology* topology_ = nullptr;
  const sched::Plan* plan_ = nullptr;
  ResourceMap map_;
  std::vector<double> ready_, start_;  // by op
  std::vector<Slice> slices_;
  std::vector<Sample> samples_;
  std::vector<std::pair<std::uint32_t, double>> background_;
};

}  // namespace collsim::sim
