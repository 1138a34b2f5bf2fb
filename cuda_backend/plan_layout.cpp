#include "cuda_backend/plan_layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>

#include "topology/error.hpp"

namespace collsim::backend {

using sched::BufferId;
using sched::kNoOp;
using sched::OpId;
using sched::OpKind;

Bytes BufferSizes::of(BufferId b) const {
  switch (b) {
    case BufferId::input:
      return input;
    case BufferId::output:
      return output;
    case BufferId::scratch:
      return scratch;
    case BufferId::host:
      return host;
  }
  return 0;
}

BufferSizes collective_buffers(const sched::Plan& plan) {
  const Bytes p = plan.num_ranks();
  const Bytes elem = sched::dtype_size(plan.dtype);
  if (p == 0) throw InputError("plan", "/ranks", "the plan has no ranks; expected at least one");
  const bool split = plan.collective == sched::Collective::reduce_scatter ||
                     plan.collective == sched::Collective::allgather ||
                     plan.collective == sched::Collective::alltoall;
  const Bytes unit = split ? p * elem : elem;
  if (plan.size % unit != 0)
    throw InputError(
        "plan", "/size",
        fmt::format("{} of {} bytes is not a multiple of {} bytes ({}{} elements of "
                    "{}); round the size to a multiple of {}",
                    sched::to_string(plan.collective), plan.size, unit, split ? "ranks x " : "",
                    split ? p : 1, sched::to_string(plan.dtype), unit));
  BufferSizes b;
  switch (plan.collective) {
    case sched::Collective::reduce_scatter:
      b.input = plan.size;
      b.output = plan.size / p;
      break;
    case sched::Collective::allgather:
      b.input = plan.size / p;
      b.output = plan.size;
      break;
    default:
      b.input = plan.size;
      b.output = plan.size;
      break;
  }
  return b;
}

namespace {

class Problems {
 public:
  explicit Problems(const std::string& label) : sink_(label) {}
  void add(OpId id, std::string message) {
    // A broken generator can break every op the same way; a few examples tell the story.
    if (++count_ <= kMaxReported) sink_.error(fmt::format("/ops/{}", id), std::move(message));
  }
  void add(std::string where, std::string message) {
    if (++count_ <= kMaxReported) sink_.error(std::move(where), std::move(message));
  }
  void throw_if_any() {
    if (count_ > kMaxReported)
      sink_.error("", fmt::format("... and {} more problems", count_ - kMaxReported));
    sink_.throw_if_any();
  }
  bool empty() const { return count_ == 0; }

 private:
  static constexpr std::size_t kMaxReported = 20;
  DiagnosticSink sink_;
  std::size_t count_ = 0;
};

}  // namespace

PlanLayout layout_plan(const sched::Plan& plan, const std::string& label) {
  Problems problems(label);
  const auto p = plan.num_ranks();
  const BufferSizes fixed = collective_buffers(plan);
  const Bytes elem = sched::dtype_size(plan.dtype);
  const std::size_t n = plan.num_ops();

  PlanLayout layout;
  layout.buffers.assign(p, fixed);
  layout.streams.resize(p);
  layout.stream_prev.assign(n, kNoOp);

  auto check_region = [&](OpId id, const char* what, sched::Region r, Bytes bytes, bool reading) {
    auto& sizes = layout.buffers[plan.rank(id)];
    const Bytes end = r.offset + bytes;
    if (r.buffer == BufferId::scratch || r.buffer == BufferId::host) {
      Bytes& grow = r.buffer == BufferId::scratch ? sizes.scratch : sizes.host;
      grow = std::max(grow, end);
      (void)reading;
      return;
    }
    const Bytes limit = fixed.of(r.buffer);
    if (end > limit || end < r.offset)
      problems.add(id, fmt::format("{} {} region [{}, {}) of {} lies outside the {}-byte {} "
                                   "buffer; the generator must keep regions inside the buffers",
                                   sched::to_string(plan.kind(id)), what, r.offset, end,
                                   sched::to_string(r.buffer), limit, sched::to_string(r.buffer)));
  };

  for (OpId id = 0; id < n; ++id) {
    const auto op = plan.op(id);
    if (op.rank >= p) {
      problems.add(id, fmt::format("rank {} does not exist; the plan has {} ranks", op.rank, p));
      continue;
    }
    auto& rank_streams = layout.streams[op.rank];
    if (rank_streams.size() <= op.stream) rank_streams.resize(op.stream + std::size_t{1});
    auto& list = rank_streams[op.stream];
    if (!list.empty()) layout.stream_prev[id] = list.back();
    list.push_back(id);

    for (OpId d : plan.deps(id))
      if (d >= n || d == id)
        problems.add(id, fmt::format("dependency on op {} which {}", d,
                                     d == id ? "is the op itself" : "does not exist"));

    switch (op.kind) {
      case OpKind::send:
      case OpKind::recv: {
        const bool send = op.kind == OpKind::send;
        const OpId partner = plan.partner(id);
        if (op.peer >= p || op.peer == op.rank) {
          problems.add(id,
                       fmt::format("peer {} is not another rank of the {}-rank plan", op.peer, p));
          break;
        }
        if (partner == kNoOp || partner >= n) {
          problems.add(id, fmt::format("{} is not matched with a {}; call Plan::match",
                                       send ? "send" : "recv", send ? "recv" : "send"));
          break;
        }
        const auto want = send ? OpKind::recv : OpKind::send;
        if (plan.kind(partner) != want || plan.rank(partner) != op.peer ||
            plan.peer(partner) != op.rank || plan.bytes(partner) != op.bytes)
          problems.add(id, fmt::format("matched with op {} which is not a {} of {} bytes from "
                                       "rank {} to rank {}",
                                       partner, sched::to_string(want), op.bytes,
                                       send ? op.peer : op.rank, send ? op.rank : op.peer));
        if (send)
          check_region(id, "source", op.src, op.bytes, true);
        else
          check_region(id, "destination", op.dst, op.bytes, false);
        break;
      }
      case OpKind::reduce:
        if (op.bytes % elem != 0 || op.src.offset % elem != 0 || op.src2.offset % elem != 0 ||
            op.dst.offset % elem != 0)
          problems.add(id, fmt::format("reduce of {} bytes at offsets {}, {} -> {} is not "
                                       "aligned to whole {} elements of {} bytes",
                                       op.bytes, op.src.offset, op.src2.offset, op.dst.offset,
                                       sched::to_string(plan.dtype), elem));
        check_region(id, "first source", op.src, op.bytes, true);
        check_region(id, "second source", op.src2, op.bytes, true);
        check_region(id, "destination", op.dst, op.bytes, false);
        break;
      case OpKind::copy:
        check_region(id, "source", op.src, op.bytes, true);
        check_region(id, "destination", op.dst, op.bytes, false);
        break;
      case OpKind::compute:
      case OpKind::delay:
        if (!std::isfinite(op.seconds) || op.seconds < 0 || op.seconds > kMaxDuration)
          problems.add(id, fmt::format("{} of {} s; expected a duration between 0 and {} s",
                                       sched::to_string(op.kind), op.seconds, kMaxDuration));
        break;
    }
  }
  problems.throw_if_any();

  // Kahn's algorithm over ops, with each transfer (send + recv) as one node represented by its
  // send: a transfer starts only when both ends are ready, so a cycle through it is a deadlock.
  auto rep = [&](OpId id) { return plan.kind(id) == OpKind::recv ? plan.partner(id) : id; };
  std::vector<std::uint32_t> indegree(n, 0);
  std::vector<std::uint32_t> out_begin(n + 1, 0);
  auto for_each_edge = [&](auto&& fn) {
    for (OpId id = 0; id < n; ++id) {
      const OpId to = rep(id);
      if (layout.stream_prev[id] != kNoOp) fn(rep(layout.stream_prev[id]), to, id);
      for (OpId d : plan.deps(id)) fn(rep(d), to, id);
    }
  };
  bool self_loop = false;
  OpId self_loop_op = kNoOp;
  for_each_edge([&](OpId from, OpId to, OpId id) {
    if (from == to) {
      self_loop = true;
      self_loop_op = id;
      return;
    }
    ++out_begin[from + 1];
    ++indegree[to];
  });
  if (self_loop)
    throw InputError(label, fmt::format("/ops/{}", self_loop_op),
                     "the op waits for its own transfer (a recv after its matched send on the "
                     "same stream, or depending on it); the transfer could never start");
  for (std::size_t i = 0; i < n; ++i) out_begin[i + 1] += out_begin[i];
  std::vector<OpId> out(out_begin[n]);
  {
    std::vector<std::uint32_t> fill(out_begin.begin(), out_begin.end() - 1);
    for_each_edge([&](OpId from, OpId to, OpId) { out[fill[from]++] = to; });
  }
  std::deque<OpId> ready;
  std::size_t nodes = 0;
  for (OpId id = 0; id < n; ++id) {
    if (rep(id) != id) continue;
    ++nodes;
    if (indegree[id] == 0) ready.push_back(id);
  }
  layout.issue_order.reserve(nodes);
  while (!ready.empty()) {
    const OpId id = ready.front();
    ready.pop_front();
    layout.issue_order.push_back(id);
    for (std::uint32_t e = out_begin[id]; e < out_begin[id + 1]; ++e)
      if (--indegree[out[e]] == 0) ready.push_back(out[e]);
  }
  if (layout.issue_order.size() != nodes) {
    OpId stuck = kNoOp;
    for (OpId id = 0; id < n && stuck == kNoOp; ++id)
      if (rep(id) == id && indegree[id] != 0) stuck = id;
    throw InputError(label, fmt::format("/ops/{}", stuck),
                     fmt::format("the plan deadlocks: {} of {} ops (counting a transfer once) "
                                 "wait in a cycle of dependencies, stream order and transfers; "
                                 "this op is one of them",
                                 nodes - layout.issue_order.size(), nodes));
  }
  return layout;
}

}  // namespace collsim::backend
