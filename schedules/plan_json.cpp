#include "schedules/plan_json.hpp"

#include <fstream>
#include <ostream>
#include <sstream>

#include "schedules/generate.hpp"
#include "topology/json_reader.hpp"

namespace collsim::sched {

namespace {

using topo::json_io::json;
using topo::json_io::ObjectReader;

constexpr std::string_view kFormat = "collsim-plan";
constexpr std::int64_t kVersion = 1;

void write_region(std::ostream& out, std::string_view key, Region r) {
  out << ",\"" << key << "\":{\"buffer\":\"" << to_string(r.buffer) << "\",\"offset\":" << r.offset
      << "}";
}

std::string quoted(const std::string& s) {
  return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<BufferId> parse_buffer(std::string_view s) {
  for (BufferId b : {BufferId::input, BufferId::output, BufferId::scratch, BufferId::host})
    if (to_string(b) == s) return b;
  return std::nullopt;
}

std::optional<OpKind> parse_kind(std::string_view s) {
  for (OpKind k :
       {OpKind::send, OpKind::recv, OpKind::reduce, OpKind::copy, OpKind::compute, OpKind::delay})
    if (to_string(k) == s) return k;
  return std::nullopt;
}

std::optional<Region> read_region(const ObjectReader& op, std::string_view key) {
  const json* v = op.get(key);
  if (!v) {
    op.missing(key, "an object {\"buffer\": \"input|output|scratch|host\", \"offset\": bytes}");
    return std::nullopt;
  }
  ObjectReader r(*v, op.ptr(key), op.sink(), "a buffer region");
  if (!r.ok()) return std::nullopt;
  r.check_keys({"buffer", "offset"});
  const auto name = r.string("buffer", true);
  const auto offset = r.integer("offset", 0, std::int64_t{1} << 55, true);
  if (!name || !offset) return std::nullopt;
  const auto b = parse_buffer(*name);
  if (!b) {
    r.error("buffer", "found \"" + *name + "\"; expected input, output, scratch or host");
    return std::nullopt;
  }
  return Region{*b, static_cast<Bytes>(*offset)};
}

}  // namespace

void write_plan(std::ostream& out, const Plan& plan, const topo::Topology* topology) {
  if (plan.rotation != 0)
    throw InputError("", "rotation",
                     "a plan of one rank per orbit (rotated by " + std::to_string(plan.rotation) +
                         ") stands for ranks it does not hold and cannot be written; generate "
                         "it without symmetry");
  out << "{\"format\":\"" << kFormat << "\",\"version\":" << kVersion << ",\"collective\":\""
      << to_string(plan.collective) << "\",\"algorithm\":" << quoted(plan.algorithm)
      << ",\"dtype\":\"" << to_string(plan.dtype) << "\",\"size_bytes\":" << plan.size
      << ",\"chunks\":" << plan.chunks << ",\"root\":" << plan.root;
  // Written only when not the default, so that pinned plans read as they always have.
  if (plan.host_memory != HostMemory::pinned)
    out << ",\"host_memory\":\"" << to_string(plan.host_memory) << "\"";
  out << ",\n\"ranks\":[";
  for (RankId r = 0; r < plan.num_ranks(); ++r) {
    if (r) out << ",";
    const topo::NodeId g = plan.rank_gpu[r];
    if (topology && g < topology->num_nodes())
      out << quoted(topology->node(g).name);
    else if (g == topo::kNoNode)
      out << "null";
    else
      out << g;
  }
  out << "],\n\"ops\":[";
  for (OpId id = 0; id < plan.num_ops(); ++id) {
    out << (id ? ",\n" : "\n") << "{\"id\":" << id << ",\"kind\":\"" << to_string(plan.kind(id))
        << "\",\"rank\":" << plan.rank(id) << ",\"stream\":" << plan.stream(id);
    switch (plan.kind(id)) {
      case OpKind::send:
        out << ",\"peer\":" << plan.peer(id) << ",\"bytes\":" << plan.bytes(id);
        write_region(out, "src", plan.src(id));
        break;
      case OpKind::recv:
        out << ",\"peer\":" << plan.peer(id) << ",\"bytes\":" << plan.bytes(id);
        write_region(out, "dst", plan.dst(id));
        break;
      case OpKind::reduce:
        out << ",\"bytes\":" << plan.bytes(id);
        write_region(out, "dst", plan.dst(id));
        write_region(out, "src", plan.src(id));
        write_region(out, "src2", plan.src2(id));
        break;
      case OpKind::copy:
        out << ",\"bytes\":" << plan.bytes(id);
        write_region(out, "dst", plan.dst(id));
        write_region(out, "src", plan.src(id));
        break;
      case OpKind::compute:
      case OpKind::delay: {
        std::ostringstream s;
        s.precision(17);
        s << plan.seconds(id);
        out << ",\"seconds\":" << s.str();
        break;
      }
    }
    if (plan.partner(id) != kNoOp) out << ",\"match\":" << plan.partner(id);
    const auto deps = plan.deps(id);
    if (!deps.empty()) {
      out << ",\"deps\":[";
      for (std::size_t i = 0; i < deps.size(); ++i) out << (i ? "," : "") << deps[i];
      out << "]";
    }
    out << "}";
  }
  out << "\n]}\n";
}

void save_plan(const std::string& path, const Plan& plan, const topo::Topology* topology) {
  std::ofstream f(path, std::ios::binary);
  if (!f)
    throw InputError(path, "", "cannot open the file for writing; check the directory exists");
  write_plan(f, plan, topology);
  if (!f) throw InputError(path, "", "writing the plan failed (disk full?)");
}

namespace {
constexpr topo::json_io::Expected kPlanDocument = {
    "plan", R"({"format": "collsim-plan", "version": 1, "ops": [...]} (docs/plan-format.md))",
    "the output of `collsim plan ... --out plan.json`"};

// One element of "ops", the i-th of n, in a plan of p ranks: added to `plan` (an empty op when
// it is not an object), its "match" kept in `match`, its problems reported to `sink`.
void read_op(const json& element, std::size_t i, std::size_t n, RankId p, DiagnosticSink& sink,
             Plan& plan, std::vector<std::int64_t>& match) {
  ObjectReader o(element, topo::json_io::pointer("/ops", i), sink, "an op");
  if (!o.ok()) {
    plan.add(Op{});
    return;
  }
  Op op;
  if (auto id = o.integer("id", 0, std::numeric_limits<std::int64_t>::max());
      id && *id != std::int64_t(i))
    o.error("id", "found " + std::to_string(*id) + "; ops must be listed in id order, expected " +
                      std::to_string(i));
  const auto kind_name = o.string("kind", true);
  const auto parsed = kind_name ? parse_kind(*kind_name) : std::nullopt;
  if (kind_name && !parsed)
    o.error("kind",
            "found \"" + *kind_name + "\"; expected send, recv, reduce, copy, compute or delay");
  const bool known = parsed.has_value();
  const OpKind kind = known ? *parsed : OpKind::compute;
  op.kind = kind;
  if (auto r = o.integer("rank", 0, std::numeric_limits<std::uint32_t>::max(), true)) {
    op.rank = static_cast<RankId>(*r);
    if (op.rank >= p)
      o.error("rank", "found " + std::to_string(*r) + "; the plan has ranks 0.." +
                          std::to_string(p ? p - 1 : 0));
  }
  op.stream = static_cast<StreamId>(o.integer("stream", 0, 0xffff).value_or(0));
  if (kind == OpKind::send || kind == OpKind::recv) {
    if (auto peer = o.integer("peer", 0, std::numeric_limits<std::uint32_t>::max(), true)) {
      op.peer = static_cast<RankId>(*peer);
      if (op.peer >= p)
        o.error("peer", "found " + std::to_string(*peer) + "; the plan has ranks 0.." +
                            std::to_string(p ? p - 1 : 0));
    }
    if (auto m = o.integer("match", 0, std::int64_t(n) - 1, true)) match[i] = *m;
  }
  if (known && kind != OpKind::compute && kind != OpKind::delay) {
    op.bytes = static_cast<Bytes>(
        o.integer("bytes", 1, static_cast<std::int64_t>(kMaxSize), true).value_or(0));
  }
  if (kind == OpKind::send || kind == OpKind::reduce || kind == OpKind::copy)
    op.src = read_region(o, "src").value_or(Region{});
  if (kind == OpKind::recv || kind == OpKind::reduce || kind == OpKind::copy)
    op.dst = read_region(o, "dst").value_or(Region{});
  if (kind == OpKind::reduce) op.src2 = read_region(o, "src2").value_or(Region{});
  if (known && (kind == OpKind::compute || kind == OpKind::delay)) {
    const json* s = o.get("seconds");
    if (!s || !s->is_number() || !(s->get<double>() >= 0) || s->get<double>() > kMaxDuration)
      o.error("seconds", "expected a number of seconds between 0 and 1e6");
    else
      op.seconds = s->get<double>();
  }
  std::vector<OpId> deps;
  if (const json* d = o.get("deps")) {
    if (!d->is_array()) {
      o.error("deps", "expected an array of op ids");
    } else {
      for (std::size_t j = 0; j < d->size(); ++j) {
        const json& v = (*d)[j];
        if (!v.is_number_unsigned() || v.get<std::uint64_t>() >= n || v.get<std::uint64_t>() == i) {
          sink.error(topo::json_io::pointer(o.ptr("deps"), j),
                     "found " + topo::json_io::describe(v) +
                         "; expected the id of another op (0.." + std::to_string(n ? n - 1 : 0) +
                         ")");
          continue;
        }
        deps.push_back(static_cast<OpId>(v.get<std::uint64_t>()));
      }
    }
  }
  o.check_keys({"id", "kind", "rank", "stream", "deps", "match", "peer", "bytes", "src", "dst",
                "src2", "seconds"});
  plan.add(op, deps);
}

}  // namespace

Plan load_plan(const std::string& path, const topo::Topology* topology) {
  return parse_plan(topo::json_io::read_text_file(path, kPlanDocument), path, topology);
}

Plan parse_plan(std::string_view text, const std::string& file, const topo::Topology* topology) {
  DiagnosticSink sink(file);
  // The ops are read as the parser reaches them, and only the plan's columns keep them. Their
  // problems are reported after those of the top level, as if read after it, so the lengths
  // they are checked against (ops, ranks) come from the parser's first pass.
  DiagnosticSink op_sink(file);
  Plan plan;
  std::vector<std::int64_t> match;
  // Ops with a problem of their own: the matching below does not report their pairs again (a
  // recv with a bad "bytes" would also "move 0 bytes" against its send).
  std::vector<bool> broken;
  topo::json_io::ArrayStream stream;
  stream.key = "ops";
  stream.element = [&](json&& element, std::size_t i) {
    const auto length = [&](std::string_view key) -> std::size_t {
      const auto it = stream.lengths.find(key);
      return it == stream.lengths.end() ? 0 : it->second;
    };
    const std::size_t n = length("ops");
    // The rank list pushes one GPU per entry, so a plan has as many ranks as it lists.
    const auto p = static_cast<RankId>(length("ranks"));
    if (match.empty()) match.assign(n, -1);
    if (broken.empty()) broken.assign(n, false);
    if (i >= n) throw InternalError("an op beyond the length the first pass counted");
    const std::size_t errors_before = op_sink.count();
    read_op(element, i, n, p, op_sink, plan, match);
    broken[i] = op_sink.count() != errors_before;
  };
  const auto doc = topo::json_io::parse_document(text, sink, kPlanDocument, &stream);
  sink.throw_if_any();
  ObjectReader top(*doc, "", sink, "a plan");
  sink.throw_if_any();
  top.check_keys({"format", "version", "collective", "algorithm", "dtype", "size_bytes", "chunks",
                  "root", "host_memory", "ranks", "ops"});
  if (auto f = top.string("format", true); f && *f != kFormat)
    top.error("format", "found \"" + *f + "\"; expected \"collsim-plan\"");
  top.integer("version", kVersion, kVersion, true);
  if (auto c = top.string("collective", true)) {
    if (auto v = parse_collective(*c))
      plan.collective = *v;
    else
      top.error("collective", "found \"" + *c +
                                  "\"; expected allreduce, reduce_scatter, allgather, "
                                  "broadcast, reduce or alltoall");
  }
  plan.algorithm = top.string("algorithm").value_or("custom");
  if (auto d = top.string("dtype")) {
    if (auto v = parse_dtype(*d))
      plan.dtype = *v;
    else
      top.error("dtype", "found \"" + *d + "\"; expected fp32, fp16 or bf16");
  }
  if (auto s = top.integer("size_bytes", 1, static_cast<std::int64_t>(kMaxSize), true))
    plan.size = static_cast<Bytes>(*s);
  plan.chunks = static_cast<std::uint32_t>(top.integer("chunks", 1, 1 << 30).value_or(1));
  if (auto m = top.string("host_memory")) {
    if (auto v = parse_host_memory(*m))
      plan.host_memory = *v;
    else
      top.error("host_memory", "found \"" + *m + "\"; expected pinned or pageable");
  }

  // Ranks: GPU names (resolved in the topology), node ids, or null.
  const json* ranks = top.get("ranks");
  if (!ranks || !ranks->is_array() || ranks->empty()) {
    top.error("ranks", "expected a non-empty array of GPU names, one per rank");
  } else {
    for (std::size_t i = 0; i < ranks->size(); ++i) {
      const json& v = (*ranks)[i];
      const std::string where = topo::json_io::pointer("/ranks", i);
      if (v.is_null()) {
        plan.rank_gpu.push_back(topo::kNoNode);
      } else if (v.is_number_unsigned()) {
        const auto id = v.get<std::uint64_t>();
        if (topology && (id >= topology->num_nodes() ||
                         topology->node(static_cast<topo::NodeId>(id)).kind != topo::NodeKind::gpu))
          sink.error(where, "node " + std::to_string(id) + " is not a GPU of the topology");
        plan.rank_gpu.push_back(static_cast<topo::NodeId>(id));
      } else if (v.is_string()) {
        const auto name = v.get<std::string>();
        topo::NodeId id = topo::kNoNode;
        if (topology) {
          id = topology->find(name);
          if (id == topo::kNoNode || topology->node(id).kind != topo::NodeKind::gpu)
            sink.error(where, "\"" + name + "\" is not a GPU of topology '" + topology->name() +
                                  "'; use the name of a gpu node");
        }
        plan.rank_gpu.push_back(id);
      } else {
        sink.error(where, "found " + topo::json_io::describe(v) + "; expected a GPU name");
        plan.rank_gpu.push_back(topo::kNoNode);  // the ranks after it keep their numbers
      }
    }
  }
  const RankId p = plan.num_ranks();
  if (auto r = top.integer("root", 0, std::numeric_limits<std::uint32_t>::max())) {
    plan.root = static_cast<RankId>(*r);
    if (p && plan.root >= p)
      top.error("root", "found " + std::to_string(*r) + "; ranks are 0.." + std::to_string(p - 1));
  }

  const json* ops = top.get("ops");
  if (!ops || !ops->is_array()) {
    top.error("ops", "expected an array of ops");
    sink.throw_if_any();
  }
  const std::size_t n = plan.num_ops();
  sink.append(op_sink);
  // Matching: both ends must name each other (or one end names the other and the other names
  // none), the kinds must pair up and the ranks and sizes agree.
  for (std::size_t i = 0; i < n; ++i) {
    const OpKind k = plan.kind(static_cast<OpId>(i));
    if (k != OpKind::send && k != OpKind::recv) continue;
    const std::string where = topo::json_io::pointer(topo::json_io::pointer("/ops", i), "match");
    const std::int64_t m = match[i];
    if (m < 0) continue;  // already reported as missing
    const auto q = static_cast<OpId>(m);
    if (broken[i] || broken[q]) continue;
    const auto id = static_cast<OpId>(i);
    const OpKind want = k == OpKind::send ? OpKind::recv : OpKind::send;
    if (plan.kind(q) != want) {
      sink.error(where, "op " + std::to_string(m) + " is a " +
                            std::string(to_string(plan.kind(q))) + "; a " +
                            std::string(to_string(k)) + " must match a " +
                            std::string(to_string(want)));
      continue;
    }
    if (match[q] >= 0 && match[q] != std::int64_t(i)) {
      sink.error(where, "op " + std::to_string(m) + " is matched with op " +
                            std::to_string(match[q]) + ", not with this one");
      continue;
    }
    if (plan.rank(q) != plan.peer(id) || plan.peer(q) != plan.rank(id)) {
      sink.error(where, "op " + std::to_string(m) + " (rank " + std::to_string(plan.rank(q)) +
                            ", peer " + std::to_string(plan.peer(q)) +
                            ") does not pair with this op (rank " + std::to_string(plan.rank(id)) +
                            ", peer " + std::to_string(plan.peer(id)) + ")");
      continue;
    }
    if (plan.bytes(q) != plan.bytes(id)) {
      sink.error(where, "op " + std::to_string(m) + " moves " + std::to_string(plan.bytes(q)) +
                            " bytes, this op " + std::to_string(plan.bytes(id)));
      continue;
    }
    if (k == OpKind::send) plan.match(id, q);
  }
  sink.throw_if_any();
  return plan;
}

}  // namespace collsim::sched
