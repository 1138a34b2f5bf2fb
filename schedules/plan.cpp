#include "schedules/plan.hpp"

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

Region Plan::unpack(std::uint64_t v) {
  return Region{static_cast<BufferId>(v >> 56), v & ((std::uint64_t{1} << 56) - 1)};
}

void Plan::reserve(std::size_t ops, std::size_t deps) {
  kind_.reserve(ops);
  rank_.reserve(ops);
  stream_.reserve(ops);
  bytes_.reserve(ops);
  src_.reserve(ops);
  src2_.reserve(ops);
  dst_.reserve(ops);
  peer_.reserve(ops);
  partner_.reserve(ops);
  seconds_.reserve(ops);
  dep_begin_.reserve(ops + 1);
  deps_.reserve(deps);
}

OpId Plan::add(const Op& op, std::span<const OpId> deps) {
  if (kind_.size() >= kNoOp) throw InternalError("plan has more than 2^32-1 ops");
  const auto id = static_cast<OpId>(kind_.size());
  kind_.push_back(op.kind);
  rank_.push_back(op.rank);
  stream_.push_back(op.stream);
  bytes_.push_back(op.bytes);
  src_.push_back(pack(op.src));
  src2_.push_back(pack(op.src2));
  dst_.push_back(pack(op.dst));
  peer_.push_back(op.peer);
  partner_.push_back(kNoOp);
  seconds_.push_back(op.seconds);
  for (OpId d : deps)
    if (d != kNoOp) deps_.push_back(d);
  dep_begin_.push_back(static_cast<std::uint32_t>(deps_.size()));
  return id;
}

void Plan::match(OpId send, OpId recv) {
  partner_[send] = recv;
  partner_[recv] = send;
}

Op Plan::op(OpId id) const {
  Op o;
  o.kind = kind_[id];
  o.rank = rank_[id];
  o.stream = stream_[id];
  o.bytes = bytes_[id];
  o.src = src(id);
  o.src2 = src2(id);
  o.dst = dst(id);
  o.peer = peer_[id];
  o.seconds = seconds_[id];
  return o;
}

StreamId Plan::num_streams(RankId rank) const {
  StreamId n = 0;
  for (std::size_t i = 0; i < kind_.size(); ++i)
    if (rank_[i] == rank) n = std::max<StreamId>(n, static_cast<StreamId>(stream_[i] + 1));
  return n;
}

}  // namespace collsim::sched
