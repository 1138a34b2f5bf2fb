#include "schedules/plan.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "topology/error.hpp"

namespace collsim::sched {

std::string_view to_string(OpKind k) {
  switch (k) {
    case OpKind::send:
      return "send";
    case OpKind::recv:
      return "recv";
    case OpKind::reduce:
      return "reduce";
    case OpKind::copy:
      return "copy";
    case OpKind::compute:
      return "compute";
    case OpKind::delay:
      return "delay";
  }
  return "?";
}

std::string_view to_string(Collective c) {
  switch (c) {
    case Collective::allreduce:
      return "allreduce";
    case Collective::reduce_scatter:
      return "reduce_scatter";
    case Collective::allgather:
      return "allgather";
    case Collective::broadcast:
      return "broadcast";
    case Collective::reduce:
      return "reduce";
    case Collective::alltoall:
      return "alltoall";
  }
  return "?";
}

std::string_view to_string(DType t) {
  switch (t) {
    case DType::fp32:
      return "fp32";
    case DType::fp16:
      return "fp16";
    case DType::bf16:
      return "bf16";
  }
  return "?";
}

std::string_view to_string(BufferId b) {
  switch (b) {
    case BufferId::input:
      return "input";
    case BufferId::output:
      return "output";
    case BufferId::scratch:
      return "scratch";
    case BufferId::host:
      return "host";
  }
  return "?";
}

std::string_view to_string(HostMemory m) {
  return m == HostMemory::pinned ? "pinned" : "pageable";
}

std::string_view to_string(CopyKind k) {
  switch (k) {
    case CopyKind::d2d:
      return "d2d";
    case CopyKind::d2h:
      return "d2h";
    case CopyKind::h2d:
      return "h2d";
    case CopyKind::host:
      return "host";
  }
  return "?";
}

std::size_t dtype_size(DType t) {
  return t == DType::fp32 ? 4 : 2;
}

CopyKind copy_kind(BufferId src, BufferId dst) {
  const bool from_host = memory_of(src) == Memory::host;
  const bool to_host = memory_of(dst) == Memory::host;
  if (from_host && to_host) return CopyKind::host;
  if (from_host) return CopyKind::h2d;
  if (to_host) return CopyKind::d2h;
  return CopyKind::d2d;
}

std::uint64_t Plan::pack(Region r) {
  if (r.offset >> 56) throw InternalError("plan region offset exceeds 2^56 bytes");
  return (std::uint64_t{static_cast<std::uint8_t>(r.buffer)} << 56) | r.offset;
}

void Plan::reserve(std::size_t ops, std::size_t deps, std::size_t reduces) {
  rows_.reserve(ops);
  reduce_.reserve(reduces);
  // Only ops with two or more dependencies use deps_; reserving address space for all of them
  // costs no memory until written.
  deps_.reserve(deps);
}

[[gnu::always_inline]] inline OpId Plan::append(Row& row, OpId id, Bytes bytes,
                                                std::span<const OpId> deps) {
  if (bytes < kWideBytes) {
    row.bytes = static_cast<std::uint32_t>(bytes);
  } else {
    row.bytes = kWideBytes;
    wide_.emplace_back(id, bytes);
  }
  std::size_t count = 0;
  OpId first = kNoOp;
  for (OpId d : deps)
    if (d != kNoOp && count++ == 0) first = d;
  if (count == 1 && first < kManyDeps) {
    row.dep = first;
  } else if (count != 0) {
    const std::size_t g = group_base_ + dep_begin_.size() - 1;
    if (g >= kManyDeps || deps_base_ + deps_.size() + count > kNoOp)
      throw InternalError("plan has more than 2^31 ops with several dependencies");
    row.dep = kManyDeps | static_cast<std::uint32_t>(g);
    for (OpId d : deps)
      if (d != kNoOp) deps_.push_back(d);
    dep_begin_.push_back(static_cast<std::uint32_t>(deps_base_ + deps_.size()));
  }
  rows_.push_back(row);
  num_deps_ += count;
  return id;
}

OpId Plan::add(const Op& op, std::span<const OpId> deps) {
  if (num_ops() >= kNoOp) throw InternalError("plan has more than 2^32-1 ops");
  const auto id = static_cast<OpId>(num_ops());
  Row row;
  row.kind = op.kind;
  row.rank = op.rank;
  row.stream = op.stream;
  switch (op.kind) {
    case OpKind::send:
      row.a = pack(op.src);
      row.b = std::uint64_t{op.peer} << 32 | kNoOp;
      break;
    case OpKind::recv:
      row.a = pack(op.dst);
      row.b = std::uint64_t{op.peer} << 32 | kNoOp;
      break;
    case OpKind::reduce:
      return add_reduce(op.rank, op.stream, op.dst, op.src, op.src2, op.bytes, deps);
    case OpKind::copy:
      row.a = pack(op.dst);
      row.b = pack(op.src);
      break;
    case OpKind::compute:
    case OpKind::delay:
      row.a = std::bit_cast<std::uint64_t>(op.seconds);
      break;
  }
  return append(row, id, op.bytes, deps);
}

Op Plan::Transfer::send_op() const {
  Op s;
  s.kind = OpKind::send;
  s.rank = from;
  s.stream = send_stream;
  s.bytes = bytes;
  s.src = src;
  s.peer = to;
  return s;
}

Op Plan::Transfer::recv_op() const {
  Op r;
  r.kind = OpKind::recv;
  r.rank = to;
  r.stream = recv_stream;
  r.bytes = bytes;
  r.dst = dst;
  r.peer = from;
  return r;
}

OpId Plan::add_transfer(const Transfer& t, std::span<const OpId> send_deps,
                        std::span<const OpId> recv_deps) {
  // The checks and writes of the three calls, in their order, so that a plan too large or a
  // region too far throws the same error with the same ops added.
  // Two rows written out rather than by one helper called twice: the helper was not inlined,
  // which cost 2 % of a streamed ring's instructions.
  if (num_ops() >= kNoOp) throw InternalError("plan has more than 2^32-1 ops");
  const auto sid = static_cast<OpId>(num_ops());
  Row s;
  s.kind = OpKind::send;
  s.rank = t.from;
  s.stream = t.send_stream;
  s.a = pack(t.src);
  s.b = std::uint64_t{t.to} << 32 | kNoOp;
  append(s, sid, t.bytes, send_deps);
  if (num_ops() >= kNoOp) throw InternalError("plan has more than 2^32-1 ops");
  const auto rid = static_cast<OpId>(num_ops());
  Row r;
  r.kind = OpKind::recv;
  r.rank = t.to;
  r.stream = t.recv_stream;
  r.a = pack(t.dst);
  r.b = std::uint64_t{t.from} << 32 | sid;
  append(r, rid, t.bytes, recv_deps);
  rows_[sid].b = (rows_[sid].b & ~std::uint64_t{0xffffffff}) | rid;
  return sid;
}

OpId Plan::add_reduce(RankId rank, StreamId stream, Region dst, Region src, Region src2,
                      Bytes bytes, std::span<const OpId> deps) {
  if (num_ops() >= kNoOp) throw InternalError("plan has more than 2^32-1 ops");
  const auto id = static_cast<OpId>(num_ops());
  Row row;
  row.kind = OpKind::reduce;
  row.rank = rank;
  row.stream = stream;
  row.a = pack(dst);
  row.b = reduce_.end();
  reduce_.push_back({pack(src), pack(src2)});
  return append(row, id, bytes, deps);
}

void Plan::match(OpId send, OpId recv) {
  // A dropped row's slot holds a later op now (the columns are rings): writing it would change
  // that op. A streamed run drops each batch once registered, so a transfer must not span two.
  if (send < first_op() || recv < first_op())
    throw InternalError(
        fmt::format("Plan::match of op {} with op {}, below the plan's window "
                    "(first op {}): a batch must not end inside a transfer",
                    send, recv, first_op()));
  // Only transfers carry a partner (the low half of their b word); a non-transfer end keeps no
  // record of the pairing, so the engine reports the transfer end as unmatched.
  if (transfer(send)) rows_[send].b = (rows_[send].b & ~std::uint64_t{0xffffffff}) | recv;
  if (transfer(recv)) rows_[recv].b = (rows_[recv].b & ~std::uint64_t{0xffffffff}) | send;
}

void Plan::drop_before(OpId id) {
  const OpId first = first_op();
  if (id <= first) return;
  if (id > num_ops()) throw InternalError("Plan::drop_before past the last op");
  std::uint64_t reduces = 0;
  std::uint32_t groups = 0;
  if (id == num_ops()) {
    // Everything goes, as when a streamed run drops each batch it has registered: every
    // reduction and group not dropped yet, without a pass over the rows.
    reduces = reduce_.size();
    groups = static_cast<std::uint32_t>(dep_begin_.size() - 1 - groups_dropped_);
  } else {
    for (OpId i = first; i < id; ++i) {
      const Row& row = rows_[i];
      reduces += row.kind == OpKind::reduce;
      groups += row.dep != kNoOp && (row.dep & kManyDeps) != 0;
    }
  }
  rows_.drop_before(id);
  reduce_.drop_before(reduce_.front() + reduces);
  // dep_begin_ holds one entry per group plus the end of the last: the kept groups' edges start
  // at the entry of the first kept group. Erasing only once the dropped part is at least half
  // keeps the copies proportional to what is dropped.
  groups_dropped_ += groups;
  if (2 * std::size_t{groups_dropped_} >= dep_begin_.size()) {
    dep_begin_.erase(dep_begin_.begin(), dep_begin_.begin() + groups_dropped_);
    group_base_ += groups_dropped_;
    groups_dropped_ = 0;
    const std::uint32_t first_edge = dep_begin_.front();
    deps_.erase(deps_.begin(), deps_.begin() + (first_edge - deps_base_));
    deps_base_ = first_edge;
  }
  const auto kept =
      std::lower_bound(wide_.begin(), wide_.end(), id,
                       [](const std::pair<OpId, Bytes>& w, OpId v) { return w.first < v; });
  wide_.erase(wide_.begin(), kept);
}

Bytes Plan::wide_bytes(OpId id) const {
  const auto it =
      std::lower_bound(wide_.begin(), wide_.end(), id,
                       [](const std::pair<OpId, Bytes>& w, OpId v) { return w.first < v; });
  return it->second;
}

Op Plan::op(OpId id) const {
  Op o;
  o.kind = kind(id);
  o.rank = rank(id);
  o.stream = stream(id);
  o.bytes = bytes(id);
  o.src = src(id);
  o.src2 = src2(id);
  o.dst = dst(id);
  o.peer = peer(id);
  o.seconds = seconds(id);
  return o;
}

std::vector<std::uint32_t> Plan::streams_per_rank() const {
  std::vector<std::uint32_t> n(num_ranks(), 0);
  for (std::uint64_t i = first_op(); i < num_ops(); ++i)
    if (rows_[i].rank < n.size())
      n[rows_[i].rank] = std::max<std::uint32_t>(n[rows_[i].rank], rows_[i].stream + 1U);
  return n;
}

}  // namespace collsim::sched
