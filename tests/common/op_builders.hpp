#pragma once
// Op builders shared by the tests that write plans by hand: GCC warns about designated
// initialisers that skip members, so tests build ops through these.
#include "schedules/plan.hpp"

namespace collsim::test {

inline sched::Op send_op(sched::RankId rank, sched::RankId peer, Bytes bytes, sched::Region src,
                         sched::StreamId stream = 0) {
  sched::Op op;
  op.kind = sched::OpKind::send;
  op.rank = rank;
  op.peer = peer;
  op.bytes = bytes;
  op.src = src;
  op.stream = stream;
  return op;
}
inline sched::Op recv_op(sched::RankId rank, sched::RankId peer, Bytes bytes, sched::Region dst,
                         sched::StreamId stream = 0) {
  sched::Op op;
  op.kind = sched::OpKind::recv;
  op.rank = rank;
  op.peer = peer;
  op.bytes = bytes;
  op.dst = dst;
  op.stream = stream;
  return op;
}
inline sched::Op copy_op(sched::RankId rank, Bytes bytes, sched::Region src, sched::Region dst,
                         sched::StreamId stream = 0) {
  sched::Op op;
  op.kind = sched::OpKind::copy;
  op.rank = rank;
  op.bytes = bytes;
  op.src = src;
  op.dst = dst;
  op.stream = stream;
  return op;
}
inline sched::Op reduce_op(sched::RankId rank, Bytes bytes, sched::Region a, sched::Region b,
                           sched::Region dst, sched::StreamId stream = 0) {
  sched::Op op;
  op.kind = sched::OpKind::reduce;
  op.rank = rank;
  op.bytes = bytes;
  op.src = a;
  op.src2 = b;
  op.dst = dst;
  op.stream = stream;
  return op;
}

inline sched::Op timed_op(sched::OpKind kind, sched::RankId rank, double seconds,
                          sched::StreamId stream = 0) {
  sched::Op op;
  op.kind = kind;
  op.rank = rank;
  op.seconds = seconds;
  op.stream = stream;
  return op;
}

inline sched::Op delay_op(sched::RankId rank, double seconds, sched::StreamId stream = 0) {
  return timed_op(sched::OpKind::delay, rank, seconds, stream);
}

}  // namespace collsim::test
