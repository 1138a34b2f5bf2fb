#include "sim/chrome_trace.hpp"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <ostream>
#include <set>

#include "topology/error.hpp"

namespace collsim::sim {

namespace {

// JSON string body: node names come from user files and may hold quotes or control characters.
std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += c;
    }
  }
  return out;
}

std::string us(double seconds) {
  return fmt::format("{:.3f}", seconds * 1e6);
}

// Process ids start at 1: some viewers treat pid 0 specially.
std::uint32_t pid_of(topo::NodeId node) {
  return node + 1;
}

}  // namespace

void ChromeTrace::on_begin(const topo::Router& router, const sched::Plan& plan,
                           const ResourceMap& resources) {
  topology_ = &router.topology();
  plan_ = &plan;
  map_ = resources;
  ready_.assign(plan.num_ops(), 0);
  start_.assign(plan.num_ops(), 0);
  slices_.clear();
  samples_.clear();
  background_.clear();
  keep_rank_.clear();
  keep_node_.clear();
  if (keep_gpus_.empty()) return;
  const topo::Topology& t = *topology_;
  std::vector<bool> gpus(t.num_nodes(), false);
  std::vector<bool> servers(t.servers().size(), false);
  for (const topo::NodeId g : keep_gpus_) {
    gpus.at(g) = true;
    if (t.node(g).server != topo::kNone) servers[static_cast<std::size_t>(t.node(g).server)] = true;
  }
  keep_node_ = gpus;
  for (topo::NodeId n = 0; n < t.num_nodes(); ++n)
    if (t.node(n).server != topo::kNone && servers[static_cast<std::size_t>(t.node(n).server)])
      keep_node_[n] = true;
  keep_rank_.assign(plan.num_ranks(), false);
  for (sched::RankId r = 0; r < plan.num_ranks(); ++r) keep_rank_[r] = gpus[plan.rank_gpu[r]];
}

bool ChromeTrace::kept(ResourceId resource) const {
  if (keep_node_.empty()) return true;
  if (map_.kind(resource) != ResourceKind::link) return keep_node_[map_.index(resource)];
  const topo::Link& l = topology_->link(map_.index(resource));
  return keep_node_[l.from] || keep_node_[l.to];
}

void ChromeTrace::on_op_start(sched::OpId op, double ready, double start) {
  if (!keep_rank_.empty() && !keep_rank_[plan_->rank(op)]) return;
  ready_[op] = ready;
  start_[op] = start;
}

void ChromeTrace::on_op_end(sched::OpId op, double end) {
  if (!keep_rank_.empty() && !keep_rank_[plan_->rank(op)]) return;
  slices_.push_back(Slice{op, ready_[op], start_[op], end});
}

void ChromeTrace::on_resource_load(ResourceId resource, double time, double load) {
  if (!kept(resource)) return;
  // A resource re-shared twice at one instant keeps only its final load.
  if (!samples_.empty() && samples_.back().resource == resource && samples_.back().time == time) {
    samples_.back().load = load;
    return;
  }
  samples_.push_back(Sample{resource, time, load});
}

void ChromeTrace::on_background_end(std::uint32_t index, double time) {
  background_.emplace_back(index, time);
}

void ChromeTrace::write(std::ostream& out) const {
  if (topology_ == nullptr || plan_ == nullptr)
    throw InternalError("ChromeTrace::write before a run");
  const topo::Topology& t = *topology_;
  const sched::Plan& plan = *plan_;
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const std::string& event) {
    out << (first ? "" : ",\n") << event;
    first = false;
  };

  // Metadata: name every process and track that appears.
  std::set<topo::NodeId> nodes;
  std::set<std::pair<topo::NodeId, std::uint32_t>> tracks;  // (GPU, rank << 16 | stream)
  std::map<topo::NodeId, std::string> ranks_of;
  for (sched::RankId r = 0; r < plan.num_ranks(); ++r) {
    const auto g = plan.rank_gpu[r];
    ranks_of[g] += (ranks_of[g].empty() ? "rank " : ", rank ") + std::to_string(r);
  }
  for (const Slice& s : slices_) {
    const auto r = plan.rank(s.op);
    nodes.insert(plan.rank_gpu[r]);
    tracks.emplace(plan.rank_gpu[r], r << 16 | plan.stream(s.op));
  }
  auto owner = [&](ResourceId r) -> topo::NodeId {
    return map_.kind(r) == ResourceKind::link ? t.link(map_.index(r)).from : map_.index(r);
  };
  for (const Sample& s : samples_) nodes.insert(owner(s.resource));
  for (const topo::NodeId n : nodes) {
    std::string name = t.node(n).name;
    if (ranks_of.count(n)) name += " (" + ranks_of[n] + ")";
    emit(fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"args":{{"name":"{}"}}}})",
                     pid_of(n), escape(name)));
    emit(fmt::format(
        R"({{"ph":"M","name":"process_sort_index","pid":{},"args":{{"sort_index":{}}}}})",
        pid_of(n), n));
  }
  for (const auto& [gpu, key] : tracks) {
    const std::string label = ranks_of[gpu].find(',') == std::string::npos
                                  ? fmt::format("stream {}", key & 0xffff)
                                  : fmt::format("rank {} stream {}", key >> 16, key & 0xffff);
    emit(
        fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"{}"}}}})",
                    pid_of(gpu), key, label));
  }

  for (const Slice& s : slices_) {
    const auto op = s.op;
    const auto r = plan.rank(op);
    std::string name(sched::to_string(plan.kind(op)));
    if (plan.kind(op) == sched::OpKind::send) name += fmt::format(" to {}", plan.peer(op));
    if (plan.kind(op) == sched::OpKind::recv) name += fmt::format(" from {}", plan.peer(op));
    if (plan.kind(op) == sched::OpKind::copy)
      name += fmt::format(
          " {}", sched::to_string(sched::copy_kind(plan.src(op).buffer, plan.dst(op).buffer)));
    emit(fmt::format(
        R"({{"ph":"X","name":"{}","cat":"{}","pid":{},"tid":{},"ts":{},"dur":{},"args":{{"op":{},"bytes":{},"ready_us":{}}}}})",
        name, sched::to_string(plan.kind(op)), pid_of(plan.rank_gpu[r]), r << 16 | plan.stream(op),
        us(s.start), us(s.end - s.start), op, plan.bytes(op), us(s.ready)));
  }
  for (const Sample& s : samples_) {
    emit(fmt::format(R"({{"ph":"C","name":"{}","pid":{},"ts":{},"args":{{"GB/s":{:.6f}}}}})",
                     escape(map_.name(t, s.resource)), pid_of(owner(s.resource)), us(s.time),
                     s.load / 1e9));
  }
  for (const auto& [index, time] : background_) {
    emit(fmt::format(R"({{"ph":"i","s":"g","name":"background flow {} done","pid":0,"ts":{}}})",
                     index, us(time)));
  }
  out << "\n]}\n";
}

std::uint64_t ChromeTrace::write_file(const std::string& path) const {
  std::ofstream out(path);
  if (!out)
    throw InputError("", "--trace",
                     fmt::format("cannot open '{}' for writing; check that its folder exists "
                                 "and is writable",
                                 path));
  write(out);
  out.flush();
  if (!out) throw InputError("", "--trace", fmt::format("writing '{}' failed (disk full?)", path));
  return static_cast<std::uint64_t>(out.tellp());
}

}  // namespace collsim::sim
