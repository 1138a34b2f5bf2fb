#include "schedules/verify.hpp"

#include <algorithm>
#include <array>
#include <compare>
#include <map>
#include <queue>
#include <string>

namespace collsim::sched {

namespace {

// "input of rank `rank` at element e + delta" for the element e holding the term; in bytes.
struct Term {
  RankId rank = 0;
  std::int64_t delta = 0;
  // clang-tidy 14 flags the literal 0 a defaulted <=> compares its result with; no pointer here.
  // NOLINTNEXTLINE(modernize-use-nullptr)
  auto operator<=>(const Term&) const = default;
};
using Value = std::vector<Term>;  // sorted multiset
constexpr std::uint32_t kUndefined = 0;

class Values {
 public:
  Values() { values_.emplace_back(); }
  std::uint32_t intern(Value v) {
    auto [it, fresh] = ids_.emplace(std::move(v), static_cast<std::uint32_t>(values_.size()));
    if (fresh) values_.push_back(it->first);
    return it->second;
  }
  const Value& get(std::uint32_t id) const { return values_[id]; }
  std::uint32_t shifted(std::uint32_t id, std::int64_t shift) {
    if (id == kUndefined || shift == 0) return id;
    auto [it, fresh] = shift_cache_.emplace(std::pair{id, shift}, kUndefined);
    if (!fresh) return it->second;
    Value v = values_[id];
    for (Term& t : v) t.delta -= shift;
    const std::uint32_t out = intern(std::move(v));
    shift_cache_[{id, shift}] = out;
    return out;
  }
  std::uint32_t sum(std::uint32_t a, std::uint32_t b) {
    if (a == kUndefined || b == kUndefined) return kUndefined;
    Value v;
    v.reserve(values_[a].size() + values_[b].size());
    std::merge(values_[a].begin(), values_[a].end(), values_[b].begin(), values_[b].end(),
               std::back_inserter(v));
    return intern(std::move(v));
  }

 private:
  std::map<Value, std::uint32_t> ids_;
  std::vector<Value> values_;
  std::map<std::pair<std::uint32_t, std::int64_t>, std::uint32_t> shift_cache_;
};

struct Span {
  Bytes begin = 0, end = 0;
  std::uint32_t value = kUndefined;
};

// One buffer of one rank: non-overlapping spans keyed by their first byte; gaps are undefined.
class Buffer {
 public:
  std::vector<Span> read(Bytes b, Bytes e) const {
    std::vector<Span> out;
    Bytes at = b;
    auto it = spans_.upper_bound(b);
    if (it != spans_.begin()) --it;
    for (; it != spans_.end() && it->first < e; ++it) {
      const Bytes sb = std::max(it->first, b), se = std::min(it->second.end, e);
      if (se <= sb) continue;
      if (sb > at) out.push_back({at, sb, kUndefined});
      out.push_back({sb, se, it->second.value});
      at = se;
    }
    if (at < e) out.push_back({at, e, kUndefined});
    return out;
  }
  void write(Bytes b, Bytes e, const std::vector<Span>& pieces) {
    cut(b);
    cut(e);
    spans_.erase(spans_.lower_bound(b), spans_.lower_bound(e));
    for (const Span& s : pieces)
      if (s.value != kUndefined && s.end > s.begin) spans_[s.begin] = {s.begin, s.end, s.value};
  }

 private:
  void cut(Bytes x) {
    auto it = spans_.upper_bound(x);
    if (it == spans_.begin()) return;
    --it;
    if (it->first < x && x < it->second.end) {
      Span right{x, it->second.end, it->second.value};
      it->second.end = x;
      spans_[x] = right;
    }
  }
  std::map<Bytes, Span> spans_;
};

// Happens-before by vector clocks over the plan's streams: access (stream, seq) happened
// before an op whose clock has clock[stream] >= seq.
struct Access {
  std::uint32_t stream = 0;
  std::uint32_t seq = 0;
  OpId op = kNoOp;
};

struct Cell {
  Bytes end = 0;
  Access writer;                // op == kNoOp: never written by the plan
  std::vector<Access> readers;  // reads since the last write, at most one per stream
};

// Accesses to one buffer of one rank, as non-overlapping cells keyed by their first byte.
class AccessMap {
 public:
  template <typename F>
  void visit(Bytes b, Bytes e, F f) {
    if (e <= b) return;
    cut(b);
    cut(e);
    Bytes at = b;
    auto it = cells_.lower_bound(b);
    while (at < e) {
      if (it == cells_.end() || it->first > at) {
        const Bytes gap_end = it == cells_.end() ? e : std::min(e, it->first);
        it = cells_.emplace_hint(it, at, Cell{gap_end, {}, {}});
      }
      f(it->first, it->second);
      at = it->second.end;
      ++it;
    }
  }

 private:
  void cut(Bytes x) {
    auto it = cells_.upper_bound(x);
    if (it == cells_.begin()) return;
    --it;
    if (it->first < x && x < it->second.end) {
      Cell right = it->second;
      it->second.end = x;
      cells_.emplace(x, std::move(right));
    }
  }
  std::map<Bytes, Cell> cells_;
};

std::string describe(const Plan& plan, OpId id) {
  std::string s = "op " + std::to_string(id) + " (rank " + std::to_string(plan.rank(id)) +
                  ", stream " + std::to_string(plan.stream(id)) + ", " +
                  std::string(to_string(plan.kind(id)));
  if (plan.kind(id) == OpKind::send) s += " to rank " + std::to_string(plan.peer(id));
  if (plan.kind(id) == OpKind::recv) s += " from rank " + std::to_string(plan.peer(id));
  if (plan.kind(id) != OpKind::compute && plan.kind(id) != OpKind::delay)
    s += ", " + std::to_string(plan.bytes(id)) + " bytes";
  return s + ")";
}

std::string region_text(Region r, Bytes bytes) {
  return std::string(to_string(r.buffer)) + "[" + std::to_string(r.offset) + ", " +
         std::to_string(r.offset + bytes) + ")";
}

bool reads(OpKind k) {
  return k == OpKind::send || k == OpKind::reduce || k == OpKind::copy;
}
bool writes(OpKind k) {
  return k == OpKind::recv || k == OpKind::reduce || k == OpKind::copy;
}

class Reporter {
 public:
  Reporter(VerifyReport& r, std::size_t max) : report_(r), max_(max) {}
  void add(std::string s) {
    if (report_.problems.size() < max_) report_.problems.push_back(std::move(s));
    ++total_;
  }
  void finish() {
    if (total_ > report_.problems.size())
      report_.problems.push_back("... and " + std::to_string(total_ - report_.problems.size()) +
                                 " more problems");
  }
  std::size_t total() const { return total_; }

 private:
  VerifyReport& report_;
  std::size_t max_;
  std::size_t total_ = 0;
};

}  // namespace

Bytes buffer_bytes(const Plan& plan, BufferId buffer) {
  const Bytes n = plan.size;
  const RankId p = std::max<RankId>(plan.num_ranks(), 1);
  switch (buffer) {
    case BufferId::input:
      return plan.collective == Collective::allgather ? n / p : n;
    case BufferId::output:
      return plan.collective == Collective::reduce_scatter ? n / p : n;
    default:
      return 0;
  }
}

VerifyReport verify(const Plan& plan, std::size_t max_problems) {
  VerifyReport report;
  Reporter rep(report, max_problems);
  const RankId p = plan.num_ranks();
  const std::size_t ops = plan.num_ops();
  const std::size_t element = dtype_size(plan.dtype);
  if (p == 0) {
    rep.add("the plan has no ranks");
    rep.finish();
    return report;
  }

  // Structure: ranks, matching, dependencies, regions.
  for (OpId id = 0; id < ops; ++id) {
    const OpKind k = plan.kind(id);
    if (plan.rank(id) >= p) {
      rep.add(describe(plan, id) + ": rank " + std::to_string(plan.rank(id)) +
              " does not exist (ranks are 0.." + std::to_string(p - 1) + ")");
      continue;
    }
    for (OpId d : plan.deps(id))
      if (d >= ops)
        rep.add(describe(plan, id) + ": depends on op " + std::to_string(d) +
                ", which does not exist");
    if (k == OpKind::send || k == OpKind::recv) {
      const OpId q = plan.partner(id);
      if (plan.peer(id) >= p) {
        rep.add(describe(plan, id) + ": peer rank " + std::to_string(plan.peer(id)) +
                " does not exist");
      } else if (q == kNoOp) {
        rep.add(describe(plan, id) + ": not matched with any " +
                (k == OpKind::send ? std::string("recv") : std::string("send")));
      } else if (q >= ops || plan.partner(q) != id ||
                 plan.kind(q) != (k == OpKind::send ? OpKind::recv : OpKind::send)) {
        rep.add(describe(plan, id) + ": its partner op " + std::to_string(q) +
                " is not a matching " + (k == OpKind::send ? "recv" : "send"));
      } else if (plan.rank(q) != plan.peer(id) || plan.peer(q) != plan.rank(id)) {
        rep.add(describe(plan, id) + ": matched with " + describe(plan, q) +
                ", whose ranks do not agree");
      } else if (plan.bytes(q) != plan.bytes(id) && k == OpKind::send) {
        rep.add(describe(plan, id) + " and its recv " + describe(plan, q) +
                " disagree on the size (" + std::to_string(plan.bytes(id)) + " vs " +
                std::to_string(plan.bytes(q)) + " bytes)");
      }
    }
    if (k == OpKind::compute || k == OpKind::delay) continue;
    if (plan.bytes(id) % element != 0)
      rep.add(describe(plan, id) + ": " + std::to_string(plan.bytes(id)) +
              " bytes is not a whole number of " + std::string(to_string(plan.dtype)) +
              " elements");
    auto check_region = [&](Region r, bool write) {
      if (r.offset % element != 0)
        rep.add(describe(plan, id) + ": offset " + std::to_string(r.offset) + " in " +
                std::string(to_string(r.buffer)) + " is not element-aligned");
      const Bytes limit = buffer_bytes(plan, r.buffer);
      if ((r.buffer == BufferId::input || r.buffer == BufferId::output) &&
          r.offset + plan.bytes(id) > limit)
        rep.add(describe(plan, id) + ": " + region_text(r, plan.bytes(id)) + " lies outside the " +
                std::to_string(limit) + "-byte " + std::string(to_string(r.buffer)) + " buffer");
      if (write && r.buffer == BufferId::input)
        rep.add(describe(plan, id) +
                ": writes the input buffer, which a collective must leave "
                "unchanged; write to scratch or output instead");
    };
    if (reads(k)) check_region(plan.src(id), false);
    if (k == OpKind::reduce) check_region(plan.src2(id), false);
    if (writes(k)) check_region(plan.dst(id), true);
  }
  if (rep.total() > 0) {
    rep.finish();
    return report;
  }

  // Order: predecessors are dependencies and the previous op on the same (rank, stream).
  std::vector<std::uint32_t> waiting(ops, 0);
  std::vector<std::uint32_t> succ_begin(ops + 1, 0);
  std::vector<OpId> succ;
  {
    std::map<std::pair<RankId, StreamId>, OpId> last;
    std::vector<std::pair<OpId, OpId>> edges;  // (from, to)
    for (OpId id = 0; id < ops; ++id) {
      auto [it, fresh] = last.emplace(std::pair{plan.rank(id), plan.stream(id)}, id);
      if (!fresh) {
        edges.emplace_back(it->second, id);
        it->second = id;
      }
      for (OpId d : plan.deps(id)) edges.emplace_back(d, id);
    }
    for (auto [from, to] : edges) {
      ++succ_begin[from + 1];
      ++waiting[to];
    }
    for (std::size_t i = 0; i < ops; ++i) succ_begin[i + 1] += succ_begin[i];
    succ.resize(edges.size());
    std::vector<std::uint32_t> fill(succ_begin.begin(), succ_begin.end() - 1);
    for (auto [from, to] : edges) succ[fill[from]++] = to;
  }

  Values values;
  std::vector<std::array<Buffer, 4>> mem(p);
  const Bytes in_bytes = buffer_bytes(plan, BufferId::input);
  for (RankId r = 0; r < p; ++r)
    mem[r][static_cast<int>(BufferId::input)].write(
        0, in_bytes, {{0, in_bytes, values.intern(Value{Term{r, 0}})}});

  auto moved = [&](RankId rank, Region src, Bytes bytes, Region dst) {
    auto pieces = mem[rank][static_cast<int>(src.buffer)].read(src.offset, src.offset + bytes);
    const auto shift =
        static_cast<std::int64_t>(dst.offset) - static_cast<std::int64_t>(src.offset);
    for (Span& s : pieces) {
      s.begin = s.begin + dst.offset - src.offset;
      s.end = s.end + dst.offset - src.offset;
      s.value = values.shifted(s.value, shift);
    }
    return pieces;
  };
  auto undefined_read = [&](OpId id, RankId rank, Region src, const std::vector<Span>& pieces,
                            Region dst) {
    for (const Span& s : pieces)
      if (s.value == kUndefined) {
        const Bytes at = s.begin - dst.offset + src.offset;
        rep.add(describe(plan, id) + ": reads " + region_text({src.buffer, at}, s.end - s.begin) +
                " on rank " + std::to_string(rank) + " before anything was written there");
        return;
      }
  };

  // Conflicting accesses that nothing orders (vector clocks over all streams; skipped, and
  // said so, when the clocks would cost too much).
  std::vector<std::uint32_t> stream_of(ops), seq_of(ops);
  std::vector<OpId> prev_of(ops, kNoOp);
  std::uint32_t streams = 0;
  {
    std::map<std::pair<RankId, StreamId>, std::pair<std::uint32_t, OpId>> index;
    for (OpId id = 0; id < ops; ++id) {
      auto [it, fresh] =
          index.emplace(std::pair{plan.rank(id), plan.stream(id)}, std::pair{streams, kNoOp});
      if (fresh) ++streams;
      stream_of[id] = it->second.first;
      prev_of[id] = it->second.second;
      seq_of[id] = prev_of[id] == kNoOp ? 1 : seq_of[prev_of[id]] + 1;
      it->second.second = id;
    }
  }
  report.races_checked = double(streams) * double(ops) <= 4e8;
  std::vector<std::vector<std::uint32_t>> clocks(report.races_checked ? ops : 0);
  std::vector<std::uint32_t> uses(ops, 0);
  for (OpId id = 0; id < ops; ++id) uses[id] = succ_begin[id + 1] - succ_begin[id];
  std::vector<std::array<AccessMap, 4>> access(report.races_checked ? p : 0);
  std::vector<std::uint32_t> clock;
  // The clock of a step (one op, or both ends of a transfer): the join of their predecessors'.
  auto tick = [&](std::initializer_list<OpId> step) {
    clock.assign(streams, 0);
    for (OpId x : step) {
      auto join = [&](OpId pred) {
        if (pred == kNoOp) return;
        const auto& c = clocks[pred];
        for (std::uint32_t i = 0; i < streams; ++i) clock[i] = std::max(clock[i], c[i]);
        if (--uses[pred] == 0) std::vector<std::uint32_t>().swap(clocks[pred]);
      };
      join(prev_of[x]);
      for (OpId d : plan.deps(x)) join(d);
    }
    for (OpId x : step) clock[stream_of[x]] = seq_of[x];
    for (OpId x : step)
      if (uses[x] > 0) clocks[x] = clock;
  };
  auto before = [&](const Access& a) { return a.op == kNoOp || clock[a.stream] >= a.seq; };
  auto race = [&](OpId first, OpId second, RankId rank, Region r, Bytes b, Bytes e,
                  const char* what) {
    rep.add(describe(plan, second) + " " + what + " " + region_text({r.buffer, b}, e - b) +
            " on rank " + std::to_string(rank) + " while " + describe(plan, first) +
            " may still use it: no dependency, stream order or transfer orders the two");
  };
  auto read = [&](OpId x, Region r, Bytes bytes) {
    if (r.buffer == BufferId::input) return;  // never written, so reads cannot conflict
    const RankId rank = plan.rank(x);
    access[rank][static_cast<int>(r.buffer)].visit(
        r.offset, r.offset + bytes, [&](Bytes b, Cell& cell) {
          if (!before(cell.writer)) race(cell.writer.op, x, rank, r, b, cell.end, "reads");
          std::erase_if(cell.readers, [&](const Access& a) { return a.stream == stream_of[x]; });
          cell.readers.push_back({stream_of[x], seq_of[x], x});
        });
  };
  auto write = [&](OpId x, Region r, Bytes bytes) {
    const RankId rank = plan.rank(x);
    access[rank][static_cast<int>(r.buffer)].visit(
        r.offset, r.offset + bytes, [&](Bytes b, Cell& cell) {
          if (!before(cell.writer)) race(cell.writer.op, x, rank, r, b, cell.end, "overwrites");
          for (const Access& a : cell.readers)
            if (a.op != x && !before(a)) race(a.op, x, rank, r, b, cell.end, "overwrites");
          cell.writer = {stream_of[x], seq_of[x], x};
          cell.readers.clear();
        });
  };

  std::vector<char> ready(ops, 0), done(ops, 0);
  std::priority_queue<OpId, std::vector<OpId>, std::greater<>> queue;
  for (OpId id = 0; id < ops; ++id)
    if (waiting[id] == 0) queue.push(id);
  auto release = [&](OpId id) {
    done[id] = 1;
    ++report.ops_run;
    for (std::uint32_t i = succ_begin[id]; i < succ_begin[id + 1]; ++i)
      if (--waiting[succ[i]] == 0) queue.push(succ[i]);
  };
  while (!queue.empty()) {
    const OpId id = queue.top();
    queue.pop();
    const OpKind k = plan.kind(id);
    const RankId r = plan.rank(id);
    if (k == OpKind::send || k == OpKind::recv) {
      ready[id] = 1;
      const OpId q = plan.partner(id);
      if (!ready[q]) continue;
      const OpId s = k == OpKind::send ? id : q;
      const OpId v = k == OpKind::send ? q : id;
      if (report.races_checked) {
        tick({s, v});
        read(s, plan.src(s), plan.bytes(s));
        write(v, plan.dst(v), plan.bytes(v));
      }
      auto pieces = moved(plan.rank(s), plan.src(s), plan.bytes(s), plan.dst(v));
      undefined_read(s, plan.rank(s), plan.src(s), pieces, plan.dst(v));
      mem[plan.rank(v)][static_cast<int>(plan.dst(v).buffer)].write(
          plan.dst(v).offset, plan.dst(v).offset + plan.bytes(v), pieces);
      release(s);
      release(v);
      continue;
    }
    if (report.races_checked) {
      tick({id});
      if (k == OpKind::copy || k == OpKind::reduce) read(id, plan.src(id), plan.bytes(id));
      if (k == OpKind::reduce) read(id, plan.src2(id), plan.bytes(id));
      if (k == OpKind::copy || k == OpKind::reduce) write(id, plan.dst(id), plan.bytes(id));
    }
    if (k == OpKind::copy) {
      auto pieces = moved(r, plan.src(id), plan.bytes(id), plan.dst(id));
      undefined_read(id, r, plan.src(id), pieces, plan.dst(id));
      mem[r][static_cast<int>(plan.dst(id).buffer)].write(
          plan.dst(id).offset, plan.dst(id).offset + plan.bytes(id), pieces);
    } else if (k == OpKind::reduce) {
      auto a = moved(r, plan.src(id), plan.bytes(id), plan.dst(id));
      auto b = moved(r, plan.src2(id), plan.bytes(id), plan.dst(id));
      undefined_read(id, r, plan.src(id), a, plan.dst(id));
      undefined_read(id, r, plan.src2(id), b, plan.dst(id));
      // Merge the two span lists over the destination range.
      std::vector<Span> out;
      std::size_t i = 0, j = 0;
      Bytes at = plan.dst(id).offset;
      while (i < a.size() && j < b.size()) {
        const Bytes end = std::min(a[i].end, b[j].end);
        out.push_back({at, end, values.sum(a[i].value, b[j].value)});
        at = end;
        if (a[i].end == end) ++i;
        if (b[j].end == end) ++j;
      }
      mem[r][static_cast<int>(plan.dst(id).buffer)].write(
          plan.dst(id).offset, plan.dst(id).offset + plan.bytes(id), out);
    }
    release(id);
  }

  if (report.ops_run < ops) {
    std::size_t shown = 0;
    for (OpId id = 0; id < ops && shown < 5; ++id) {
      if (done[id]) continue;
      if (ready[id]) {
        rep.add("deadlock: " + describe(plan, id) + " is ready but its partner " +
                describe(plan, plan.partner(id)) + " can never start");
        ++shown;
      }
    }
    if (shown == 0) {
      for (OpId id = 0; id < ops && shown < 5; ++id) {
        if (done[id]) continue;
        rep.add("deadlock: " + describe(plan, id) +
                " can never start (a cycle through dependencies, stream order or transfers)");
        ++shown;
      }
    }
    rep.add(std::to_string(ops - report.ops_run) + " of " + std::to_string(ops) +
            " ops can never run");
    rep.finish();
    return report;
  }

  // Results.
  const Bytes n = plan.size;
  const Bytes seg = n / p;
  const Bytes chunk_bytes = std::max<Bytes>(1, (n + plan.chunks - 1) / std::max(1u, plan.chunks));
  auto expect = [&](RankId rank, Bytes begin, Bytes end, const Value& want) {
    const std::uint32_t want_id = values.intern(want);
    for (const Span& s : mem[rank][static_cast<int>(BufferId::output)].read(begin, end)) {
      if (s.value == want_id) continue;
      std::string where = "rank " + std::to_string(rank) + " output bytes [" +
                          std::to_string(s.begin) + ", " + std::to_string(s.end) + ") (chunk " +
                          std::to_string(s.begin / chunk_bytes) + ")";
      if (s.value == kUndefined) {
        rep.add(where + " is never written");
        continue;
      }
      const Value& got = values.get(s.value);
      std::string what;
      std::size_t i = 0, j = 0;
      auto note = [&](const std::string& t) {
        if (!what.empty()) what += "; ";
        what += t;
      };
      while (i < got.size() || j < want.size()) {
        if (j == want.size() || (i < got.size() && got[i] < want[j])) {
          const Term t = got[i];
          std::size_t count = 0;
          while (i < got.size() && got[i] == t) ++i, ++count;
          if (std::binary_search(want.begin(), want.end(), t))
            note("holds the contribution of rank " + std::to_string(t.rank) + " " +
                 std::to_string(count + 1) + " times");
          else
            note("holds rank " + std::to_string(t.rank) + "'s input from the wrong place (offset " +
                 (t.delta >= 0 ? "+" : "") + std::to_string(t.delta) + " bytes)");
        } else if (i == got.size() || want[j] < got[i]) {
          note("misses the contribution of rank " + std::to_string(want[j].rank));
          ++j;
        } else {
          const Term t = got[i];
          ++i;
          ++j;
          std::size_t extra = 0;
          while (i < got.size() && got[i] == t) ++i, ++extra;
          if (extra)
            note("holds the contribution of rank " + std::to_string(t.rank) + " " +
                 std::to_string(extra + 1) + " times");
        }
      }
      where += ' ';
      where += what;
      rep.add(std::move(where));
    }
  };
  Value all;
  auto everyone = [&](std::int64_t delta) {
    Value v;
    for (RankId q = 0; q < p; ++q) v.push_back({q, delta});
    return v;
  };
  switch (plan.collective) {
    case Collective::allreduce:
      all = everyone(0);
      for (RankId r = 0; r < p; ++r) expect(r, 0, n, all);
      break;
    case Collective::reduce:
      if (plan.root < p)
        expect(plan.root, 0, n, everyone(0));
      else
        rep.add("root " + std::to_string(plan.root) + " is not a rank");
      break;
    case Collective::reduce_scatter:
      for (RankId r = 0; r < p; ++r)
        expect(r, 0, seg, everyone(static_cast<std::int64_t>(r * seg)));
      break;
    case Collective::broadcast:
      if (plan.root >= p) {
        rep.add("root " + std::to_string(plan.root) + " is not a rank");
        break;
      }
      for (RankId r = 0; r < p; ++r) expect(r, 0, n, Value{Term{plan.root, 0}});
      break;
    case Collective::allgather:
      for (RankId r = 0; r < p; ++r)
        for (RankId j = 0; j < p; ++j)
          expect(r, j * seg, (j + 1) * seg, Value{Term{j, -static_cast<std::int64_t>(j * seg)}});
      break;
    case Collective::alltoall:
      for (RankId r = 0; r < p; ++r)
        for (RankId j = 0; j < p; ++j)
          expect(r, j * seg, (j + 1) * seg,
                 Value{Term{
                     j, static_cast<std::int64_t>(r * seg) - static_cast<std::int64_t>(j * seg)}});
      break;
  }
  rep.finish();
  return report;
}

}  // namespace collsim::sched
