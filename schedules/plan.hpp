#pragma once
// The plan IR: what a schedule produces and what the engine and the executors consume.
//
// A plan is a DAG of chunk operations. Every op belongs to a rank and to one of that rank's
// streams; ops on one (rank, stream) run in the order they were added (CUDA stream semantics),
// and any other order comes from explicit dependencies (CUDA events). A send and the recv it is
// matched with form one transfer, which starts when both are ready.
//
// Data semantics, used by the verifier and the executors: every rank owns four buffers. `input`
// and `output` are the collective's device buffers (always out of place), `scratch` is device
// memory for received chunks, `host` is pinned host memory near the rank's GPU for staging.
//   send   reads  src[offset, offset+bytes) on `rank`   -> the matched recv
//   recv   writes dst[offset, offset+bytes) on `rank`   <- data from the matched send
//   reduce writes dst = src + src2 element-wise (dtype), all on `rank`
//   copy   writes dst = src on `rank`; d2h, h2d, d2d or host memcpy follows from the buffers
//   compute, delay: take `seconds`, touch no data
//
// Storage is one 32-byte row per op with 32-bit ids and dependencies in CSR form, each op keeping
// only the fields its kind uses, plus 16 bytes per reduce and 4 per dependency edge of ops with
// two or more (docs/performance.md).
//
// A plan that is simulated while it is generated (sim::simulate_streaming) forgets the ops the
// engine has finished with: drop_before(id) frees every op below `id`, whose ids stay taken, so
// that the plan holds a window [first_op(), num_ops()) of ops instead of all of them.
#include <array>
#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "schedules/ring_column.hpp"
#include "topology/topology.hpp"
#include "topology/units.hpp"

namespace collsim::sched {

using OpId = std::uint32_t;
using RankId = std::uint32_t;
using StreamId = std::uint16_t;
inline constexpr OpId kNoOp = ~OpId{0};
inline constexpr RankId kNoRank = ~RankId{0};

enum class OpKind : std::uint8_t { send, recv, reduce, copy, compute, delay };
enum class Collective : std::uint8_t {
  allreduce,
  reduce_scatter,
  allgather,
  broadcast,
  reduce,
  alltoall
};
enum class DType : std::uint8_t { fp32, fp16, bf16 };
enum class BufferId : std::uint8_t { input, output, scratch, host };
enum class Memory : std::uint8_t { device, host };
enum class CopyKind : std::uint8_t { d2d, d2h, h2d, host };
// How a plan's host buffer is allocated. Pinned memory is DMA'd straight over PCIe; pageable
// memory is staged by the driver through a pinned bounce buffer, a host memcpy on the way.
enum class HostMemory : std::uint8_t { pinned, pageable };

std::string_view to_string(OpKind k);
std::string_view to_string(Collective c);
std::string_view to_string(DType t);
std::string_view to_string(BufferId b);
std::string_view to_string(CopyKind k);
std::string_view to_string(HostMemory m);  // "pinned", "pageable"
std::size_t dtype_size(DType t);
constexpr Memory memory_of(BufferId b) {
  return b == BufferId::host ? Memory::host : Memory::device;
}
CopyKind copy_kind(BufferId src, BufferId dst);

// A place in one of a rank's buffers.
struct Region {
  BufferId buffer = BufferId::input;
  Bytes offset = 0;
  friend bool operator==(const Region&, const Region&) = default;
};

// One op as a value, for building plans and for reading them one at a time.
struct Op {
  OpKind kind = OpKind::compute;
  RankId rank = 0;
  StreamId stream = 0;
  Bytes bytes = 0;
  Region src;             // send, reduce (first operand), copy
  Region src2;            // reduce (second operand)
  Region dst;             // recv, reduce, copy
  RankId peer = kNoRank;  // send: destination rank; recv: source rank
  double seconds = 0;     // compute, delay
};

class Plan {
 public:
  // What the plan computes. `size` follows nccl-tests: the larger of a rank's input and output
  // buffers in bytes (allgather: output; reduce_scatter: input).
  Collective collective = Collective::allreduce;
  std::string algorithm;
  DType dtype = DType::fp32;
  Bytes size = 0;
  std::uint32_t chunks = 1;
  RankId root = 0;  // broadcast and reduce
  HostMemory host_memory = HostMemory::pinned;
  std::vector<topo::NodeId> rank_gpu;  // rank -> GPU node of the topology
  // 0, or a plan that holds the ops of ranks [0, rotation) only and stands for all num_ranks():
  // rank r + i * rotation runs rank r's ops with every rank they name moved by i * rotation
  // (mod num_ranks()). A send to a rank outside [0, rotation) is matched with the recv of its
  // image there: a send from r to q = q0 + i * rotation pairs with q0's recv from r - i *
  // rotation. The engine simulates such a plan once per orbit of ranks (sim/rotation.hpp).
  RankId rotation = 0;
  // Whether the generator may end a batch where an op of a later batch waits for an op that has
  // finished by the time that batch exists (hier's last phase waits for reductions two phases
  // back). A streamed run on GPUs with an event latency then keeps the ends of recent ops, to
  // delay such waits by the latency as the whole plan would (sim/engine.cpp); other plans'
  // streamed runs need not pay for that.
  bool waits_on_finished = false;

  RankId num_ranks() const { return static_cast<RankId>(rank_gpu.size()); }
  // The ranks whose ops the plan holds: rotation, or every rank.
  RankId ranks_held() const { return rotation != 0 ? rotation : num_ranks(); }

  // Appends an op that runs after every op in `deps` (and after the previous op on its stream).
  OpId add(const Op& op, std::span<const OpId> deps = {});
  OpId add(const Op& op, std::initializer_list<OpId> deps) {
    return add(op, std::span<const OpId>(deps.begin(), deps.size()));
  }
  // Declares that `send` delivers to `recv`: the pair is one transfer.
  void match(OpId send, OpId recv);
  // A send of `bytes` from `src` on rank `from`, on its stream `send_stream`, to a recv into
  // `dst` on rank `to`, on its stream `recv_stream`.
  struct Transfer {
    RankId from = 0, to = 0;
    StreamId send_stream = 0, recv_stream = 0;
    Region src, dst;
    Bytes bytes = 0;
    // Its two ends as ops, for a plan that holds only one of them (a rotated plan's builder).
    Op send_op() const;
    Op recv_op() const;
  };
  // Adds the send (after `send_deps`) and the recv (after `recv_deps`) and matches them, as
  // add(), add() and match() would, in one call that returns the send's id (the recv's is the
  // next): most ops of a plan are transfers, and building an Op per end cost more than the
  // rows themselves.
  OpId add_transfer(const Transfer& t, std::span<const OpId> send_deps,
                    std::span<const OpId> recv_deps);
  // add() of a reduce op of these fields, without an Op.
  OpId add_reduce(RankId rank, StreamId stream, Region dst, Region src, Region src2, Bytes bytes,
                  std::span<const OpId> deps);
  // Room for `ops` ops (`reduces` of them reductions) and `deps` dependency edges.
  void reserve(std::size_t ops, std::size_t deps, std::size_t reduces = 0);

  // One past the last op id. Every id in [first_op(), num_ops()) can be read.
  std::size_t num_ops() const { return rows_.end(); }
  std::size_t num_deps() const { return num_deps_; }
  OpId first_op() const {  // 0 unless drop_before was called
    return static_cast<OpId>(rows_.front());
  }
  // Frees the ops below `id` (their ids stay taken). Ops kept may still name dropped ones as
  // dependencies or partners; reading a dropped op is an error of the caller.
  void drop_before(OpId id);
  Op op(OpId id) const;
  OpKind kind(OpId id) const { return rows_[id].kind; }
  RankId rank(OpId id) const { return rows_[id].rank; }
  StreamId stream(OpId id) const { return rows_[id].stream; }
  Bytes bytes(OpId id) const {
    const std::uint32_t b = rows_[id].bytes;
    return b != kWideBytes ? b : wide_bytes(id);
  }
  RankId peer(OpId id) const {  // send: destination rank; recv: source rank; else kNoRank
    return transfer(id) ? static_cast<RankId>(rows_[id].b >> 32) : kNoRank;
  }
  OpId partner(OpId id) const {  // matched send/recv, or kNoOp
    return transfer(id) ? static_cast<OpId>(rows_[id].b) : kNoOp;
  }
  double seconds(OpId id) const {  // compute and delay; 0 otherwise
    const OpKind k = kind(id);
    return k == OpKind::compute || k == OpKind::delay ? std::bit_cast<double>(rows_[id].a) : 0.0;
  }
  // Inline, as the other accessors: the engine reads a transfer's buffers to route it.
  Region src(OpId id) const {
    switch (kind(id)) {
      case OpKind::send:
        return unpack(rows_[id].a);
      case OpKind::copy:
        return unpack(rows_[id].b);
      case OpKind::reduce:
        return unpack(reduce_operands(id)[0]);
      default:
        return Region{};
    }
  }
  Region src2(OpId id) const {
    return kind(id) == OpKind::reduce ? unpack(reduce_operands(id)[1]) : Region{};
  }
  Region dst(OpId id) const {
    const OpKind k = kind(id);
    return k == OpKind::recv || k == OpKind::reduce || k == OpKind::copy ? unpack(rows_[id].a)
                                                                         : Region{};
  }
  // What the accessors above return for one op, decoded from one read of its row, for a reader
  // of most of them: each accessor indexes the ring again, and reloads its base and mask after
  // any store the compiler cannot tell apart from them, which the engine, registering every
  // field of every op, paid about once per field.
  struct Fields {
    OpKind kind = OpKind::compute;
    RankId rank = 0;
    StreamId stream = 0;
    Bytes bytes = 0;
    OpId partner = kNoOp;
    RankId peer = kNoRank;
    // src(id).buffer and dst(id).buffer, but a reduce's src_buffer is left at input: the
    // buffers that place a transfer's or a copy's ends.
    BufferId src_buffer = BufferId::input;
    BufferId dst_buffer = BufferId::input;
    double seconds = 0;
    std::span<const OpId> deps;
  };
  Fields fields(OpId id) const {
    const Row& stored = rows_[id];
    const Row row = stored;
    Fields f;
    f.kind = row.kind;
    f.rank = row.rank;
    f.stream = row.stream;
    f.bytes = row.bytes != kWideBytes ? row.bytes : wide_bytes(id);
    switch (row.kind) {
      case OpKind::send:
        f.partner = static_cast<OpId>(row.b);
        f.peer = static_cast<RankId>(row.b >> 32);
        f.src_buffer = unpack(row.a).buffer;
        break;
      case OpKind::recv:
        f.partner = static_cast<OpId>(row.b);
        f.peer = static_cast<RankId>(row.b >> 32);
        f.dst_buffer = unpack(row.a).buffer;
        break;
      case OpKind::reduce:
        f.dst_buffer = unpack(row.a).buffer;
        break;
      case OpKind::copy:
        f.src_buffer = unpack(row.b).buffer;
        f.dst_buffer = unpack(row.a).buffer;
        break;
      case OpKind::compute:
      case OpKind::delay:
        f.seconds = std::bit_cast<double>(row.a);
        break;
    }
    f.deps = deps_of(row.dep, &stored.dep);
    return f;
  }
  std::span<const OpId> deps(OpId id) const { return deps_of(rows_[id].dep, &rows_[id].dep); }
  // The op's one dependency, or kNoOp when it has none or several: a hint read in one load.
  OpId only_dep(OpId id) const {
    const std::uint32_t v = rows_[id].dep;
    return v & kManyDeps ? kNoOp : v;
  }
  // Streams used by each rank: 1 + the largest stream id seen for that rank (0 for a rank
  // without ops), in one pass over the ops. Wider than StreamId: a rank may use stream 65535.
  std::vector<std::uint32_t> streams_per_rank() const;

 private:
  static std::uint64_t pack(Region r);
  static Region unpack(std::uint64_t v) {
    return Region{static_cast<BufferId>(v >> 56), v & ((std::uint64_t{1} << 56) - 1)};
  }
  // The dependencies of a row whose dep word is `v`, stored at `at`.
  std::span<const OpId> deps_of(std::uint32_t v, const std::uint32_t* at) const {
    if (v == kNoOp) return {};
    if (!(v & kManyDeps)) return {at, 1};
    const std::size_t g = (v & ~kManyDeps) - group_base_;
    return {deps_.data() + (dep_begin_[g] - deps_base_),
            deps_.data() + (dep_begin_[g + 1] - deps_base_)};
  }
  bool transfer(OpId id) const {
    const OpKind k = kind(id);
    return k == OpKind::send || k == OpKind::recv;
  }
  Bytes wide_bytes(OpId id) const;
  const std::array<std::uint64_t, 2>& reduce_operands(OpId id) const {
    return reduce_[rows_[id].b];
  }

  // Byte counts of 2^32 - 1 and more are rare (a few ops of a huge buffer on few ranks): they
  // sit in a side table so that every other op stores 4 bytes instead of 8.
  static constexpr std::uint32_t kWideBytes = ~std::uint32_t{0};

  // One op's fields in one 32-byte row: a generator writes each op once and the engine reads
  // each once, so one row costs one store and one line where separate columns cost seven.
  // Each op stores only the fields its kind uses, in two 8-byte words:
  //   send    a = src (packed region)   b = peer << 32 | partner
  //   recv    a = dst                   b = peer << 32 | partner
  //   reduce  a = dst                   b = index into reduce_ (src, src2)
  //   copy    a = dst                   b = src
  //   compute, delay: a = seconds (bit pattern)
  // Fields a kind does not use read back as the defaults of Op. A packed region has the buffer
  // in the top 8 bits and the offset below.
  // Dependencies: most ops have none or one, kept in `dep` itself: kNoOp for none, else the op
  // it waits for. An op with more (or one whose id has the top bit set) holds kManyDeps | g, and
  // its dependencies are deps_[dep_begin_[g], dep_begin_[g + 1]).
  struct Row {
    std::uint64_t a = 0, b = 0;
    RankId rank = 0;
    std::uint32_t bytes = 0;  // kWideBytes: see wide_
    std::uint32_t dep = kNoOp;
    StreamId stream = 0;
    OpKind kind = OpKind::compute;
  };
  static_assert(sizeof(Row) == 32);
  // The part of add() after the kind's words: the byte count, the dependencies, the append.
  OpId append(Row& row, OpId id, Bytes bytes, std::span<const OpId> deps);
  RingColumn<Row> rows_;
  std::vector<std::pair<OpId, Bytes>> wide_;         // by increasing OpId
  RingColumn<std::array<std::uint64_t, 2>> reduce_;  // src, src2 of each reduce
  static constexpr std::uint32_t kManyDeps = 1u << 31;
  std::vector<std::uint32_t> dep_begin_{0};  // by group
  HugeVector<OpId, huge_pages::Use::cold> deps_;
  std::size_t num_deps_ = 0;
  // What drop_before freed. The rows and reduce_ are rings indexed by op id (reduce_ by reduce
  // index) that drop in place, so the first op kept is rows_.front(); the dependency groups and
  // edges are erased from the front once the dropped part is at least half of what they hold.
  // Group numbers (in dep_) and edge offsets (in dep_begin_) stay absolute, so nothing kept is
  // rewritten.
  std::uint32_t group_base_ = 0;      // the group dep_begin_[0] is
  std::uint32_t groups_dropped_ = 0;  // groups from group_base_ on that drop_before freed
  std::uint32_t deps_base_ = 0;
};

}  // namespace collsim::sched
