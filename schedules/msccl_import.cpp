#include "schedules/msccl_import.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>
#include <vector>

#include "schedules/generate.hpp"
#include "topology/error.hpp"

namespace collsim::sched {

namespace {

struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::vector<Element> children;
  int line = 0;
};

class XmlReader {
 public:
  XmlReader(std::string_view text, std::string file) : text_(text), file_(std::move(file)) {}

  Element document() {
    skip_misc();
    if (at_ >= text_.size() || text_[at_] != '<') fail("expected an element such as <algo ...>");
    Element root = element();
    skip_misc();
    if (at_ < text_.size()) fail("unexpected text after the closing </" + root.name + ">");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw InputError(file_, "line " + std::to_string(line_), message);
  }
  void advance(std::size_t n = 1) {
    for (std::size_t i = 0; i < n && at_ < text_.size(); ++i, ++at_)
      if (text_[at_] == '\n') ++line_;
  }
  bool starts(std::string_view s) const { return text_.substr(at_, s.size()) == s; }
  void skip_space() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) advance();
  }
  // Whitespace, comments and <?...?> declarations.
  void skip_misc() {
    for (;;) {
      skip_space();
      if (starts("<!--")) {
        const auto end = text_.find("-->", at_ + 4);
        if (end == std::string_view::npos) fail("comment <!-- is never closed with -->");
        advance(end + 3 - at_);
      } else if (starts("<?")) {
        const auto end = text_.find("?>", at_ + 2);
        if (end == std::string_view::npos) fail("declaration <? is never closed with ?>");
        advance(end + 2 - at_);
      } else {
        return;
      }
    }
  }
  std::string name() {
    const std::size_t b = at_;
    while (at_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[at_])) ||
                                  text_[at_] == '_' || text_[at_] == '-' || text_[at_] == ':'))
      advance();
    if (b == at_) fail("expected a name");
    return std::string(text_.substr(b, at_ - b));
  }
  Element element() {
    // The reader recurses per level: a hostile file of 100000 nested elements would overflow
    // the stack. The format nests four (<algo>, <gpu>, <tb>, <step>).
    if (++depth_ > 64)
      fail("elements are nested more than 64 deep; expected <algo>, <gpu>, <tb>, <step>");
    Element e;
    e.line = line_;
    advance();  // '<'
    e.name = name();
    for (;;) {
      skip_space();
      if (at_ >= text_.size()) fail("element <" + e.name + "> is never closed");
      if (starts("/>")) {
        advance(2);
        --depth_;
        return e;
      }
      if (text_[at_] == '>') {
        advance();
        break;
      }
      const std::string key = name();
      skip_space();
      if (at_ >= text_.size() || text_[at_] != '=') fail("attribute " + key + " needs =\"value\"");
      advance();
      skip_space();
      if (at_ >= text_.size() || (text_[at_] != '"' && text_[at_] != '\''))
        fail("the value of attribute " + key + " must be quoted");
      const char q = text_[at_];
      advance();
      const auto end = text_.find(q, at_);
      if (end == std::string_view::npos) fail("the value of attribute " + key + " is never closed");
      std::string value(text_.substr(at_, end - at_));
      advance(end + 1 - at_);
      if (!e.attrs.emplace(key, value).second)
        fail("attribute " + key + " appears twice in <" + e.name + ">");
    }
    for (;;) {
      skip_misc();
      if (at_ >= text_.size()) fail("element <" + e.name + "> is never closed");
      if (starts("</")) {
        advance(2);
        const std::string closing = name();
        if (closing != e.name)
          fail("found </" + closing + "> where </" + e.name + "> (opened on line " +
               std::to_string(e.line) + ") was expected");
        skip_space();
        if (at_ >= text_.size() || text_[at_] != '>') fail("expected > after </" + closing);
        advance();
        --depth_;
        return e;
      }
      if (text_[at_] != '<')
        fail("unexpected text inside <" + e.name + ">; only elements are allowed");
      e.children.push_back(element());
    }
  }

  std::string_view text_;
  std::string file_;
  std::size_t at_ = 0;
  int line_ = 1;
  int depth_ = 0;
};

class Attrs {
 public:
  Attrs(const Element& e, const std::string& file) : e_(e), file_(file) {}
  [[noreturn]] void fail(const std::string& m) const {
    throw InputError(file_, "line " + std::to_string(e_.line), "<" + e_.name + ">: " + m);
  }
  std::string str(const std::string& key, const char* fallback = nullptr) const {
    auto it = e_.attrs.find(key);
    if (it == e_.attrs.end()) {
      if (fallback) return fallback;
      fail("missing attribute " + key);
    }
    return it->second;
  }
  long long num(const std::string& key, long long min, long long max,
                std::optional<long long> fallback = std::nullopt) const {
    auto it = e_.attrs.find(key);
    if (it == e_.attrs.end()) {
      if (fallback) return *fallback;
      fail("missing attribute " + key);
    }
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(it->second, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != it->second.size() || it->second.empty())
      fail("attribute " + key + "=\"" + it->second + "\" is not an integer");
    if (v < min || v > max)
      fail("attribute " + key + "=" + it->second + " is out of range [" + std::to_string(min) +
           ", " + std::to_string(max) + "]");
    return v;
  }

 private:
  const Element& e_;
  const std::string& file_;
};

BufferId buffer_of(const Attrs& a, const std::string& key) {
  const std::string b = a.str(key);
  if (b == "i") return BufferId::input;
  if (b == "o") return BufferId::output;
  if (b == "s") return BufferId::scratch;
  a.fail("attribute " + key + "=\"" + b + "\" is not a buffer; expected i, o or s");
}

}  // namespace

Plan import_msccl(const std::string& path, Bytes size, DType dtype) {
  if (std::filesystem::is_directory(path))
    throw InputError(path, "", "is a directory; expected an MSCCL-style XML file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path, "", "cannot open the file; check the path");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_msccl(ss.str(), path, size, dtype);
}

Plan parse_msccl(std::string_view text, const std::string& file, Bytes size, DType dtype) {
  const Element algo = XmlReader(text, file).document();
  const Attrs aa(algo, file);
  if (algo.name != "algo") aa.fail("the root element must be <algo>");
  Plan plan;
  plan.dtype = dtype;
  plan.size = size;
  plan.algorithm = "msccl:" + aa.str("name", "unnamed");
  const std::string coll = aa.str("coll");
  const auto c = parse_collective(coll);
  if (!c)
    aa.fail("coll=\"" + coll +
            "\" is not a collective; expected allreduce, reduce_scatter, allgather, broadcast, "
            "reduce or alltoall");
  plan.collective = *c;
  const auto ngpus = static_cast<RankId>(aa.num("ngpus", 1, 1 << 20));
  const auto nchunks = static_cast<Bytes>(aa.num("nchunksperloop", 1, 1 << 24));
  const std::size_t e = dtype_size(dtype);
  // Chunks index the larger buffer (Plan::size); the per-rank buffer of allgather and
  // reduce_scatter is size / ngpus, so chunk offsets mean the same everywhere.
  if (size % (nchunks * e) != 0)
    aa.fail("the size " + std::to_string(size) + " bytes does not split into nchunksperloop=" +
            std::to_string(nchunks) + " chunks of whole " + std::string(to_string(dtype)) +
            " elements; use a multiple of " + std::to_string(nchunks * e) + " bytes");
  const Bytes chunk = size / nchunks;
  plan.rank_gpu.assign(ngpus, topo::kNoNode);

  struct StepRef {
    RankId gpu;
    long long tb, step;
    // clang-tidy 14 flags the literal 0 a defaulted <=> compares its result with; no pointer here.
    // NOLINTNEXTLINE(modernize-use-nullptr)
    auto operator<=>(const StepRef&) const = default;
  };
  std::map<StepRef, OpId> last_op;   // the op that completes each step
  std::map<StepRef, OpId> first_op;  // the op that starts it
  struct Pending {
    OpId op;
    StepRef ref;
  };
  // (from, to, channel) -> queued sends / recvs in program order.
  std::map<std::tuple<RankId, RankId, long long>, std::vector<OpId>> sends, recvs;
  std::vector<std::pair<const Element*, StepRef>> deferred_deps;
  std::vector<char> seen(ngpus, 0);

  for (const Element& g : algo.children) {
    const Attrs ga(g, file);
    if (g.name != "gpu") ga.fail("expected <gpu> inside <algo>");
    const auto gpu = static_cast<RankId>(ga.num("id", 0, ngpus - 1));
    if (seen[gpu]) ga.fail("gpu " + std::to_string(gpu) + " is described twice");
    seen[gpu] = 1;
    // Buffer sizes in chunks, as the MSCCL runtime checks them: i_chunks and o_chunks default
    // to nchunksperloop (chunks index the larger buffer), s_chunks to none.
    const long long buffer_chunks[] = {ga.num("i_chunks", 0, 1 << 24, nchunks),
                                       ga.num("o_chunks", 0, 1 << 24, nchunks),
                                       ga.num("s_chunks", 0, 1 << 24, 0)};
    // Reducing receives land in scratch past the chunks the XML uses itself (s_chunks).
    Bytes landing = static_cast<Bytes>(buffer_chunks[2]) * chunk;
    for (const Element& tb : g.children) {
      const Attrs ta(tb, file);
      if (tb.name != "tb") ta.fail("expected <tb> inside <gpu>");
      const long long tb_id = ta.num("id", 0, 32000);
      const long long send_peer = ta.num("send", -1, ngpus - 1, -1);
      const long long recv_peer = ta.num("recv", -1, ngpus - 1, -1);
      const long long chan = ta.num("chan", 0, 1 << 16, 0);
      const auto main = static_cast<StreamId>(2 * tb_id);
      const auto out = static_cast<StreamId>(2 * tb_id + 1);
      long long expected_step = 0;
      for (const Element& st : tb.children) {
        const Attrs sa(st, file);
        if (st.name != "step") sa.fail("expected <step> inside <tb>");
        const long long s = sa.num("s", 0, 1 << 24);
        if (s != expected_step)
          sa.fail("steps must be numbered 0, 1, 2, ... in order; found s=" + std::to_string(s) +
                  " where s=" + std::to_string(expected_step) + " was expected");
        ++expected_step;
        const std::string type = sa.str("type");
        // cnt has no default: the MSCCL runtime's parser requires it on every step.
        const auto cnt = static_cast<Bytes>(sa.num("cnt", 1, 1 << 24));
        const Bytes bytes = cnt * chunk;
        // Regions end below 2^50 bytes (collsim's largest buffer), so no product overflows.
        const Bytes limit_chunks = kMaxSize / chunk;
        if (cnt > limit_chunks)
          sa.fail("cnt=" + std::to_string(cnt) + " chunks exceeds the largest buffer");
        auto region = [&](const char* buf, const char* off) {
          const auto at = static_cast<Bytes>(sa.num(off, 0, 1 << 24));
          if (at + cnt > limit_chunks)
            sa.fail(std::string(off) + "=" + std::to_string(at) +
                    " puts the region beyond the largest buffer");
          const BufferId id = buffer_of(sa, buf);
          const std::size_t b = id == BufferId::input ? 0 : id == BufferId::output ? 1 : 2;
          const auto have = static_cast<Bytes>(buffer_chunks[b]);
          if (at + cnt > have) {
            const std::string name = sa.str(buf) + "_chunks";
            sa.fail(std::string(off) + "=" + std::to_string(at) +
                    " with cnt=" + std::to_string(cnt) + " reaches past the end of buffer " +
                    sa.str(buf) + ", which has " + std::to_string(have) + " chunks (" + name +
                    " of <gpu id=\"" + std::to_string(gpu) + "\">); " +
                    (cnt <= have ? "use " + std::string(off) + " from 0 to " +
                                       std::to_string(have - cnt) + ", or raise " + name
                                 : "raise " + name));
          }
          return Region{id, at * chunk};
        };
        const StepRef ref{gpu, tb_id, s};
        const bool needs_send = type == "s" || type == "rcs" || type == "rrs" || type == "rrcs";
        const bool needs_recv =
            type == "r" || type == "rcs" || type == "rrc" || type == "rrs" || type == "rrcs";
        if (needs_send && send_peer < 0) sa.fail("type " + type + " sends but <tb> has send=-1");
        if (needs_recv && recv_peer < 0) sa.fail("type " + type + " receives but <tb> has recv=-1");
        Op op;
        op.rank = gpu;
        op.bytes = bytes;
        OpId last = kNoOp;
        OpId first = kNoOp;
        auto add = [&](const Op& o, std::initializer_list<OpId> deps) {
          const OpId id = plan.add(o, deps);
          if (first == kNoOp) first = id;
          last = id;
          return id;
        };
        Region data;  // what a trailing send sends
        if (type == "nop") {
          op.kind = OpKind::delay;
          op.stream = main;
          op.bytes = 0;
          add(op, {});
        } else if (type == "cpy") {
          op.kind = OpKind::copy;
          op.stream = main;
          op.src = region("srcbuf", "srcoff");
          op.dst = region("dstbuf", "dstoff");
          add(op, {});
        } else if (type == "s") {
          data = region("srcbuf", "srcoff");
        } else if (needs_recv) {
          const bool reduces = type == "rrc" || type == "rrs" || type == "rrcs";
          Op r = op;
          r.kind = OpKind::recv;
          r.stream = main;
          r.peer = static_cast<RankId>(recv_peer);
          const Region dst = region("dstbuf", "dstoff");
          // A reducing receive lands in scratch space past the XML's own scratch chunks.
          r.dst = dst;
          if (reduces) {
            r.dst = Region{BufferId::scratch, landing};
            landing += bytes;
          }
          const OpId rid = add(r, {});
          recvs[{static_cast<RankId>(recv_peer), gpu, chan}].push_back(rid);
          data = dst;
          if (reduces) {
            Op red = op;
            red.kind = OpKind::reduce;
            red.stream = main;
            red.dst = dst;
            red.src = region("srcbuf", "srcoff");
            red.src2 = r.dst;
            add(red, {rid});
          }
        } else {
          sa.fail("unknown step type \"" + type +
                  "\"; expected s, r, rcs, rrc, rrs, rrcs, cpy or nop");
        }
        if (needs_send) {
          Op sd = op;
          sd.kind = OpKind::send;
          sd.stream = out;
          sd.peer = static_cast<RankId>(send_peer);
          sd.src = data;
          const OpId sid = add(sd, {last});
          sends[{gpu, static_cast<RankId>(send_peer), chan}].push_back(sid);
        }
        first_op[ref] = first;
        last_op[ref] = last;
        if (sa.num("depid", -1, 32000, -1) >= 0) deferred_deps.emplace_back(&st, ref);
      }
    }
  }
  for (RankId g = 0; g < ngpus; ++g)
    if (!seen[g])
      aa.fail("ngpus=" + std::to_string(ngpus) + " but gpu " + std::to_string(g) +
              " is not described");

  // Dependencies on other threadblocks' steps: the first op of the step waits for the op that
  // completes the named step. Plan ops cannot gain dependencies after being added, so the plan
  // is rebuilt with them.
  std::map<OpId, std::vector<OpId>> extra;
  for (const auto& [st, ref] : deferred_deps) {
    const Attrs sa(*st, file);
    const StepRef target{ref.gpu, sa.num("depid", 0, 32000), sa.num("deps", 0, 1 << 24)};
    auto it = last_op.find(target);
    if (it == last_op.end())
      sa.fail("depends on tb " + std::to_string(target.tb) + " step " +
              std::to_string(target.step) + " of gpu " + std::to_string(ref.gpu) +
              ", which does not exist");
    extra[first_op[ref]].push_back(it->second);
  }
  Plan out;
  out.collective = plan.collective;
  out.algorithm = plan.algorithm;
  out.dtype = plan.dtype;
  out.size = plan.size;
  out.chunks = static_cast<std::uint32_t>(nchunks);
  out.root = 0;
  out.rank_gpu = plan.rank_gpu;
  for (OpId id = 0; id < plan.num_ops(); ++id) {
    std::vector<OpId> deps(plan.deps(id).begin(), plan.deps(id).end());
    if (auto it = extra.find(id); it != extra.end())
      deps.insert(deps.end(), it->second.begin(), it->second.end());
    out.add(plan.op(id), deps);
  }
  // Matching in program order per connection.
  for (const auto& [key, list] : sends) {
    const auto& [from, to, chan] = key;
    const auto it = recvs.find(key);
    const std::size_t nr = it == recvs.end() ? 0 : it->second.size();
    if (nr != list.size())
      aa.fail("gpu " + std::to_string(from) + " sends " + std::to_string(list.size()) +
              " times to gpu " + std::to_string(to) + " on channel " + std::to_string(chan) +
              " but gpu " + std::to_string(to) + " receives " + std::to_string(nr) +
              " times from it; every send needs a receive");
    for (std::size_t i = 0; i < list.size(); ++i) out.match(list[i], it->second[i]);
  }
  for (const auto& [key, list] : recvs)
    if (!sends.count(key))
      aa.fail("gpu " + std::to_string(std::get<1>(key)) + " receives " +
              std::to_string(list.size()) + " times from gpu " + std::to_string(std::get<0>(key)) +
              " on channel " + std::to_string(std::get<2>(key)) + ", which never sends to it");
  return out;
}

}  // namespace collsim::sched
