#include "schedules/builder.hpp"

#include <algorithm>
#include <string>

#include "topology/error.hpp"

namespace collsim::sched {

std::vector<Piece> split(Piece whole, std::uint32_t parts, std::size_t element) {
  if (parts == 0) throw InternalError("split into zero parts");
  const Bytes elements = whole.bytes / element;
  const Bytes base = elements / parts;
  const Bytes extra = elements % parts;
  std::vector<Piece> out(parts);
  Bytes at = whole.offset;
  for (std::uint32_t i = 0; i < parts; ++i) {
    const Bytes n = (base + (i < extra ? 1 : 0)) * element;
    out[i] = Piece{at, n};
    at += n;
  }
  return out;
}

Piece nth_piece(Piece whole, std::uint32_t parts, std::uint32_t i, std::size_t element) {
  const Bytes elements = whole.bytes / element;
  const Bytes base = elements / parts;
  const Bytes extra = elements % parts;
  const Bytes before = base * i + std::min<Bytes>(i, extra);
  return Piece{whole.offset + before * element, (base + (i < extra ? 1 : 0)) * element};
}

Lanes Lanes::channel(std::uint32_t index) {
  if ((index + 1) * std::uint64_t{kPerChannel} > 0xffff)
    throw InputError("", "",
                     "the schedule needs more than 65535 streams on one rank; use fewer ranks "
                     "or another algorithm");
  const auto b = static_cast<StreamId>(index * kPerChannel);
  Lanes l;
  l.send = b;
  l.recv = static_cast<StreamId>(b + 1);
  l.reduce = static_cast<StreamId>(b + 2);
  l.d2h = static_cast<StreamId>(b + 3);
  l.h2d = static_cast<StreamId>(b + 4);
  l.copy = static_cast<StreamId>(b + 5);
  return l;
}

Lanes Lanes::single() {
  Lanes l;
  l.send = l.recv = l.reduce = l.d2h = l.h2d = l.copy = 0;
  return l;
}

Builder::Builder(const topo::Router& router, Plan& plan, std::size_t element)
    : router_(router),
      plan_(plan),
      element_(element),
      scratch_used_(plan.num_ranks(), 0),
      host_used_(plan.num_ranks(), 0),
      held_(plan.ranks_held()) {
  rank_server_.reserve(plan.num_ranks());
  for (const topo::NodeId gpu : plan.rank_gpu)
    rank_server_.push_back(router.topology().node(gpu).server);
}

bool Builder::staged(RankId from, RankId to) const {
  const std::int32_t a = rank_server_[from];
  const std::int32_t b = rank_server_[to];
  if (a == topo::kNone || b == topo::kNone) return false;
  const auto& servers = router_.topology().servers();
  const topo::Server& sa = servers[static_cast<std::size_t>(a)];
  const topo::Server& sb = servers[static_cast<std::size_t>(b)];
  if (a == b) return !sa.p2p;
  return !(sa.gpudirect_rdma && sb.gpudirect_rdma);
}

namespace {

void require_host(const topo::Topology& t, topo::NodeId gpu) {
  if (t.host_cpu(gpu) == topo::kNoNode)
    throw InputError("", "",
                     "GPU '" + t.node(gpu).name +
                         "' must stage through host memory (peer-to-peer or GPUDirect RDMA "
                         "is off for its server) but reaches no CPU; add a pcie link to "
                         "a cpu node or enable p2p/gpudirect_rdma");
}

}  // namespace

OpId Builder::move(RankId from, Region src, RankId to, Region dst, Bytes bytes,
                   std::span<const OpId> after_src, std::span<const OpId> after_dst,
                   const Lanes& from_lanes, const Lanes& to_lanes) {
  // The send waits for `after_src`, or for the staging copy that waited for them. No vector of
  // dependencies per transfer: a heap allocation per move showed up when generating large plans.
  std::span<const OpId> send_deps = after_src;
  OpId staging_copy = kNoOp;
  Region send_src = src;
  const bool at_src = holds(from);
  const bool at_dst = holds(to);
  if (!at_src && !at_dst) return kNoOp;
  const bool stage = staged(from, to);
  if (stage) {
    require_host(router_.topology(), plan_.rank_gpu[from]);
    require_host(router_.topology(), plan_.rank_gpu[to]);
  }
  if (at_src && stage && memory_of(src.buffer) == Memory::device) {
    send_src = fresh_host(from, bytes);
    Op c;
    c.kind = OpKind::copy;
    c.rank = from;
    c.stream = from_lanes.d2h;
    c.bytes = bytes;
    c.src = src;
    c.dst = send_src;
    staging_copy = plan_.add(c, send_deps);
    send_deps = std::span<const OpId>(&staging_copy, 1);
  }
  Region recv_dst = dst;
  if (stage && memory_of(dst.buffer) == Memory::device) recv_dst = fresh_host(to, bytes);

  // A staged recv lands in a fresh host region, so only the final copy waits for `dst`.
  const bool direct_dst = recv_dst == dst;
  const std::span<const OpId> recv_deps = direct_dst ? after_dst : std::span<const OpId>{};
  const Plan::Transfer t{from, to, from_lanes.send, to_lanes.recv, send_src, recv_dst, bytes};
  OpId rid = kNoOp;
  if (at_src && at_dst) {
    rid = plan_.add_transfer(t, send_deps, recv_deps) + 1;
  } else {
    const OpId sid = at_src ? plan_.add(t.send_op(), send_deps) : kNoOp;
    rid = at_dst ? plan_.add(t.recv_op(), recv_deps) : kNoOp;
    pair_up(from, to, at_src ? sid : rid, at_src);
  }
  if (!at_dst) return kNoOp;
  if (direct_dst) return rid;

  std::vector<OpId> copy_deps(after_dst.begin(), after_dst.end());
  copy_deps.push_back(rid);
  Op c;
  c.kind = OpKind::copy;
  c.rank = to;
  c.stream = to_lanes.h2d;
  c.bytes = bytes;
  c.src = recv_dst;
  c.dst = dst;
  return plan_.add(c, copy_deps);
}

void Builder::pair_up(RankId from, RankId to, OpId op, bool is_send) {
  // The image of the transfer whose receiver is held: both ends move by a multiple of the
  // rotation, the receiver to `to mod rotation`.
  const RankId p = plan_.num_ranks();
  const RankId back = to - to % held_;
  const RankId image_from = (from + p - back) % p;
  const std::uint64_t key = std::uint64_t{image_from} << 32 | (to - back);
  Unmatched& u = pending_[key];
  if (u.head == u.ops.size() || u.sends == is_send) {
    if (u.head == u.ops.size()) {
      u.ops.clear();
      u.head = 0;
      u.sends = is_send;
    }
    u.ops.push_back(op);
    return;
  }
  const OpId other = u.ops[u.head++];
  plan_.match(is_send ? op : other, is_send ? other : op);
  if (u.head == u.ops.size()) pending_.erase(key);
}

void Builder::throw_unmatched() const {
  const auto& [key, u] = *pending_.begin();
  throw InternalError("a plan rotated by " + std::to_string(held_) + " has a " +
                      (u.sends ? "send" : "recv") + " between ranks " + std::to_string(key >> 32) +
                      " and " + std::to_string(key & 0xffffffffu) +
                      " (moved) without its other end in the same batch; the schedule is "
                      "not symmetric under that rotation");
}

OpId Builder::copy(RankId rank, Region dst, Region src, Bytes bytes, StreamId stream,
                   std::initializer_list<OpId> deps) {
  if (!holds(rank)) return kNoOp;
  Op o;
  o.kind = OpKind::copy;
  o.rank = rank;
  o.stream = stream;
  o.bytes = bytes;
  o.src = src;
  o.dst = dst;
  return plan_.add(o, deps);
}

}  // namespace collsim::sched
