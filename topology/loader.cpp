#include "topology/loader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>

#include "topology/build_state.hpp"
#include "topology/json_reader.hpp"
#include "topology/name_pattern.hpp"
#include "topology/units.hpp"

namespace collsim::topo {
namespace {

using json_io::json;
using json_io::ObjectReader;

constexpr std::int64_t kMaxCount = 1 << 24;
constexpr std::uint64_t kMaxExpandedNodes = std::uint64_t{1} << 26;
constexpr std::uint64_t kMaxExpandedLinks = std::uint64_t{1} << 30;

constexpr std::array<std::string_view, 6> kNodeKindNames = {"gpu", "nvswitch", "pcie_switch",
                                                            "cpu", "nic",      "switch"};
constexpr std::array<NodeKind, 6> kNodeKinds = {NodeKind::gpu,         NodeKind::nvswitch,
                                                NodeKind::pcie_switch, NodeKind::cpu,
                                                NodeKind::nic,         NodeKind::network_switch};
constexpr std::array<std::string_view, 4> kLinkKindNames = {"nvlink", "pcie", "network",
                                                            "cpu_interconnect"};
constexpr std::array<LinkKind, 4> kLinkKinds = {LinkKind::nvlink, LinkKind::pcie, LinkKind::network,
                                                LinkKind::cpu_interconnect};

template <class Kind, std::size_t N>
std::optional<Kind> read_kind(const ObjectReader& r, const std::array<std::string_view, N>& names,
                              const std::array<Kind, N>& kinds, std::string_view what) {
  std::string list;
  for (std::string_view n : names) list += (list.empty() ? "" : ", ") + std::string(n);
  if (!r.has("kind")) {
    if (r.ok()) r.missing("kind", "one of " + list);
    return std::nullopt;
  }
  const auto text = r.string("kind");
  if (!text) return std::nullopt;
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == *text) return kinds[i];
  r.error("kind",
          fmt::format("unknown {} kind \"{}\"{}; expected one of {}", what, *text,
                      json_io::suggest(*text, std::span<const std::string_view>(names)), list));
  return std::nullopt;
}

// "count" and the patterns of an entry that may stand for several.
struct Repeat {
  std::int64_t count = 1;
  bool repeated = false;
};

std::optional<Repeat> read_repeat(const ObjectReader& r) {
  Repeat rep;
  if (r.has("count")) {
    const auto c = r.integer("count", 1, kMaxCount);
    if (!c) return std::nullopt;
    rep.count = *c;
    rep.repeated = true;
  }
  return rep;
}

// What an entry's names may use: {i} wherever the entry gives a count, even one that cannot be
// read (that count has its own error; its names are not wrong as well).
Repeat naming_repeat(const ObjectReader& r, const std::optional<Repeat>& rep) {
  return rep ? *rep : Repeat{1, r.has("count")};
}

std::optional<NamePattern> read_pattern(const ObjectReader& r, std::string_view key,
                                        const Repeat& rep, bool required) {
  const auto text = r.string(key, required);
  if (!text) return std::nullopt;
  if (text->empty()) {
    r.error(key, fmt::format("\"{}\" is empty; give a name", key));
    return std::nullopt;
  }
  for (unsigned char c : *text)
    if (c < 0x20) {
      r.error(key, fmt::format("\"{}\" contains a control character; use printable names", key));
      return std::nullopt;
    }
  NamePattern p;
  std::string error;
  if (!NamePattern::parse(*text, p, error)) {
    r.error(key, error);
    return std::nullopt;
  }
  if (p.indexed() && !rep.repeated) {
    r.error(key, fmt::format("\"{}\" uses {{i}} but the entry has no \"count\"; add \"count\": N "
                             "or remove the braces",
                             *text));
    return std::nullopt;
  }
  return p;
}

// The names an entry that failed would have given, where they can be known and are few: the
// references to them are then not reported as unknown, since the entry's own error says what to
// fix (one mistake, one error). Where the count itself could not be read, every name the first
// kMaxBrokenNames indices give is remembered. A file of thousands of such entries remembers
// kMaxBrokenTotal names in all (100 KB of them took 9 s and 600 MB without the bound); the
// references past it are reported unknown.
constexpr std::int64_t kMaxBrokenNames = 4096;
constexpr std::size_t kMaxBrokenTotal = 65536;
void remember_broken(const std::optional<Repeat>& rep, const std::optional<NamePattern>& name,
                     std::unordered_set<std::string>& broken) {
  if (!name) return;
  const std::int64_t count = rep ? rep->count : name->indexed() ? kMaxBrokenNames : 1;
  if (count > kMaxBrokenNames || broken.size() + static_cast<std::size_t>(count) > kMaxBrokenTotal)
    return;
  for (std::int64_t i = 0; i < count; ++i) broken.insert(name->expand(i));
}

// A node as read, one per instance of its entry.
struct NodeSpec {
  Node node;
  std::string server;  // empty if none
  std::string rack;    // empty if none
};

bool read_nodes(const json& entry, const std::string& ptr, DiagnosticSink& sink, bool in_template,
                std::vector<NodeSpec>& out, std::unordered_set<std::string>* broken = nullptr) {
  const ObjectReader r(entry, ptr, sink, "a node");
  if (!r.ok()) return false;
  if (in_template)
    r.check_keys({"name", "kind", "count", "model", "memory_bandwidth", "copy_engines", "alpha",
                  "launch_latency", "event_latency", "reduce_traffic", "memcpy_bandwidth",
                  "pageable_traffic"});
  else
    r.check_keys({"name", "kind", "count", "server", "rack", "model", "memory_bandwidth",
                  "copy_engines", "alpha", "launch_latency", "event_latency", "reduce_traffic",
                  "memcpy_bandwidth", "pageable_traffic"});
  if (in_template)
    for (std::string_view key : {"server", "rack"})
      if (r.has(key))
        r.error(key, fmt::format("a template's nodes belong to the server that instantiates the "
                                 "template; remove \"{}\" here and set \"rack\" on the server",
                                 key));
  const auto rep = read_repeat(r);
  const auto name = read_pattern(r, "name", naming_repeat(r, rep), true);
  const auto kind = read_kind(r, kNodeKindNames, kNodeKinds, "node");
  std::optional<NamePattern> server, rack;
  if (!in_template) {
    server = read_pattern(r, "server", naming_repeat(r, rep), false);
    rack = read_pattern(r, "rack", naming_repeat(r, rep), false);
  }
  Node proto;
  if (auto m = r.string("model")) proto.model = *m;
  bool ok = rep && name && kind;
  if (kind) proto.kind = *kind;
  // Parameters belong to one kind: a copy-engine count on a switch is a mistake, not a no-op.
  const auto only_on = [&](std::string_view key, NodeKind k) {
    if (!r.has(key) || !kind || *kind == k) return true;
    r.error(key, fmt::format("\"{}\" applies to {} nodes only; this node is a {}; remove it", key,
                             to_string(k), to_string(*kind)));
    return false;
  };
  for (std::string_view key : {"memory_bandwidth", "copy_engines", "alpha", "launch_latency",
                               "event_latency", "reduce_traffic"})
    ok &= only_on(key, NodeKind::gpu);
  ok &= only_on("memcpy_bandwidth", NodeKind::cpu);
  ok &= only_on("pageable_traffic", NodeKind::cpu);
  const auto get_bw = [&](std::string_view key, double& field) {
    if (!r.has(key)) return;
    if (auto v = r.bandwidth(key))
      field = *v;
    else
      ok = false;
  };
  const auto get_time = [&](std::string_view key, double& field) {
    if (!r.has(key)) return;
    if (auto v = r.duration(key))
      field = *v;
    else
      ok = false;
  };
  get_bw("memory_bandwidth", proto.memory_bandwidth);
  get_bw("memcpy_bandwidth", proto.memcpy_bandwidth);
  get_time("alpha", proto.alpha);
  get_time("launch_latency", proto.launch_latency);
  get_time("event_latency", proto.event_latency);
  // An object of ratios by name, into the array of the same order.
  const auto get_ratios = [&](std::string_view key, std::span<const std::string_view> names,
                              std::span<double> field, const char* what) {
    const json* object = r.get(key);
    if (object == nullptr) return;
    const ObjectReader t(*object, r.ptr(key), r.sink(), what);
    if (!t.ok()) {
      ok = false;
      return;
    }
    t.check_keys(names);
    for (std::size_t i = 0; i < names.size(); ++i)
      if (t.has(names[i])) {
        if (auto v = t.ratio(names[i]))
          field[i] = *v;
        else
          ok = false;
      }
  };
  constexpr std::string_view kDTypeNames[] = {"fp32", "fp16", "bf16"};
  constexpr std::string_view kDirectionNames[] = {"d2h", "h2d"};
  get_ratios("reduce_traffic", kDTypeNames, proto.reduce_traffic,
             "an object of bytes of memory traffic per byte reduced, by element type");
  get_ratios("pageable_traffic", kDirectionNames, proto.pageable_traffic,
             "an object of bytes of memcpy traffic per byte copied, by direction");
  if (r.has("copy_engines")) {
    if (auto v = r.integer("copy_engines", 1, 1024))
      proto.copy_engines = static_cast<std::uint32_t>(*v);
    else
      ok = false;
  }
  // A node whose name, kind and count are readable is added even when a parameter is not (the
  // error is reported, so the file still fails to load): links that name it then find it, and
  // the file's one mistake is not followed by an "unknown node" for every link of that node.
  if (!rep || !name || !kind) {
    if (broken != nullptr) remember_broken(rep, name, *broken);
    return false;
  }
  // As for servers and racks, a failed entry of many nodes is not expanded: its count may be a
  // typo too. Links to its nodes are then reported as unknown.
  if (!ok && rep->count > kMaxBrokenNames) return false;
  for (std::int64_t i = 0; i < rep->count; ++i) {
    NodeSpec spec{proto, server ? server->expand(i) : "", rack ? rack->expand(i) : ""};
    spec.node.name = name->expand(i);
    out.push_back(std::move(spec));
  }
  return ok;
}

struct LinkSpec {
  std::string from, to;
  LinkKind kind = LinkKind::pcie;
  double bandwidth = kUnlimited;
  double latency = 0;
  bool duplex = true;
};

bool read_links(const json& entry, const std::string& ptr, DiagnosticSink& sink,
                std::vector<LinkSpec>& out) {
  const ObjectReader r(entry, ptr, sink, "a link");
  if (!r.ok()) return false;
  r.check_keys({"from", "to", "kind", "count", "bandwidth", "latency", "duplex"});
  const auto rep = read_repeat(r);
  const auto from = read_pattern(r, "from", naming_repeat(r, rep), true);
  const auto to = read_pattern(r, "to", naming_repeat(r, rep), true);
  const auto kind = read_kind(r, kLinkKindNames, kLinkKinds, "link");
  LinkSpec proto;
  bool ok = kind.has_value();
  if (kind) proto.kind = *kind;
  if (r.has("bandwidth")) {
    if (auto v = r.bandwidth("bandwidth"))
      proto.bandwidth = *v;
    else
      ok = false;
  }
  if (r.has("latency")) {
    if (auto v = r.duration("latency"))
      proto.latency = *v;
    else
      ok = false;
  }
  if (r.has("duplex")) {
    if (auto v = r.boolean("duplex"))
      proto.duplex = *v;
    else
      ok = false;
  }
  if (!rep || !from || !to) return false;
  // Endpoints are still returned after a bad value, so that their own errors show in this run.
  for (std::int64_t i = 0; i < rep->count; ++i) {
    LinkSpec s = proto;
    s.from = from->expand(i);
    s.to = to->expand(i);
    if (s.from == s.to) {
      r.error("to", fmt::format("link from \"{}\" to itself{}; a link must join two different "
                                "nodes",
                                s.from, rep->repeated ? fmt::format(" (i = {})", i) : ""));
      ok = false;
      continue;
    }
    out.push_back(std::move(s));
  }
  return ok;
}

// A server template, read once and instantiated many times.
struct Template {
  std::string name;
  std::optional<bool> p2p, gpudirect_rdma;
  std::vector<Node> nodes;  // local names
  struct LocalLink {
    std::uint32_t from, to;
    LinkKind kind;
    double bandwidth, latency;
    bool duplex;
  };
  std::vector<LocalLink> links;
  bool ok = true;
};

Template read_template(const std::string& name, const json& value, const std::string& ptr,
                       DiagnosticSink& sink) {
  Template t;
  t.name = name;
  const ObjectReader r(value, ptr, sink, "a server template");
  if (!r.ok()) {
    t.ok = false;
    return t;
  }
  r.check_keys({"nodes", "links", "p2p", "gpudirect_rdma"});
  t.p2p = r.boolean("p2p");
  t.gpudirect_rdma = r.boolean("gpudirect_rdma");
  std::unordered_map<std::string, std::uint32_t> local;
  std::unordered_set<std::string> broken;  // names of node entries that failed
  const json* nodes = r.get("nodes");
  if (nodes == nullptr) {
    r.missing("nodes", "an array of the template's nodes");
    t.ok = false;
  } else if (!nodes->is_array()) {
    r.error("nodes", "expected an array of nodes; found " + json_io::describe(*nodes));
    t.ok = false;
  } else {
    for (std::size_t i = 0; i < nodes->size(); ++i) {
      std::vector<NodeSpec> specs;
      const std::string p = json_io::pointer(r.ptr("nodes"), i);
      if (!read_nodes((*nodes)[i], p, sink, true, specs, &broken)) t.ok = false;
      for (NodeSpec& s : specs) {
        if (!local.emplace(s.node.name, static_cast<std::uint32_t>(t.nodes.size())).second) {
          sink.error(json_io::pointer(p, "name"),
                     fmt::format("duplicate node name \"{}\" in template \"{}\"; names must be "
                                 "unique within a template",
                                 s.node.name, name));
          t.ok = false;
          continue;
        }
        t.nodes.push_back(std::move(s.node));
      }
    }
  }
  if (const json* links = r.get("links")) {
    if (!links->is_array()) {
      r.error("links", "expected an array of links; found " + json_io::describe(*links));
      t.ok = false;
    } else {
      std::vector<std::string> names;
      for (const Node& n : t.nodes) names.push_back(n.name);
      int suggestions_left = 20;  // a suggestion scans every name; keep error floods cheap
      constexpr std::size_t kMissingShown = 8;
      for (std::size_t i = 0; i < links->size(); ++i) {
        std::vector<LinkSpec> specs;
        const std::string p = json_io::pointer(r.ptr("links"), i);
        const bool good = read_links((*links)[i], p, sink, specs);
        t.ok = t.ok && good;
        // An entry with a large count can name millions of missing nodes: the first few are
        // reported, the rest counted in one line.
        std::size_t missing = 0;
        for (const LinkSpec& s : specs) {
          const auto a = local.find(s.from), b = local.find(s.to);
          for (const auto& [key, it, text] :
               {std::tuple{"from", a, s.from}, std::tuple{"to", b, s.to}}) {
            if (it == local.end() && broken.count(text) != 0) {
              t.ok = false;  // the node entry's own error is reported
            } else if (it == local.end() && ++missing > kMissingShown) {
              t.ok = false;
            } else if (it == local.end()) {
              std::string hint;
              if (suggestions_left-- > 0) hint = json_io::suggest(text, names);
              sink.error(json_io::pointer(p, key),
                         fmt::format("link refers to \"{}\", which is not a node of template "
                                     "\"{}\"{}; links in a template join that template's nodes",
                                     text, name, hint));
              t.ok = false;
            }
          }
          if (good && a != local.end() && b != local.end())
            t.links.push_back({a->second, b->second, s.kind, s.bandwidth, s.latency, s.duplex});
        }
        if (missing > kMissingShown)
          sink.error(p, fmt::format("{} more references of this entry to nodes that are not in "
                                    "template \"{}\"",
                                    missing - kMissingShown, name));
      }
    }
  }
  return t;
}

std::string stem_of(const std::string& file) {
  const std::string stem = std::filesystem::path(file).stem().string();
  return stem.empty() ? "topology" : stem;
}

// A "count" as written, for the estimate below: 1 when absent or malformed (its error comes
// later), at most kMaxCount.
double count_of(const json& entry) {
  if (!entry.is_object()) return 1;
  const auto it = entry.find("count");
  if (it == entry.end() || !it->is_number_integer() || it->get<std::int64_t>() < 1) return 1;
  return static_cast<double>(std::min(it->get<std::int64_t>(), kMaxCount));
}

// The nodes and directed links a document expands to, counted from its counts alone, and the
// "count" that contributes most memory, for the message.
struct Planned {
  ExpansionSize size;
  std::string largest;
  double largest_bytes = -1;
  double bytes() const {
    return size.nodes * kBytesPerNode + size.links * kBytesPerLink + size.groups * kBytesPerGroup;
  }
};

Planned plan_expansion(const json& doc) {
  Planned p;
  if (!doc.is_object()) return p;
  const auto note = [&p](const std::string& where, double nodes, double links, double groups) {
    p.size.nodes += nodes;
    p.size.links += links;
    p.size.groups += groups;
    const double bytes = nodes * kBytesPerNode + links * kBytesPerLink + groups * kBytesPerGroup;
    if (bytes > p.largest_bytes) {
      p.largest_bytes = bytes;
      p.largest = where;
    }
  };
  const auto array = [](const json& object, const char* key) -> const json* {
    const auto it = object.find(key);
    return it != object.end() && it->is_array() ? &*it : nullptr;
  };
  const auto count_at = [](const char* section, std::size_t i) {
    return json_io::pointer(json_io::pointer(section, i), "count");
  };
  // Links are counted duplex, two directed links each: an upper bound.
  if (const json* nodes = array(doc, "nodes"))
    for (std::size_t i = 0; i < nodes->size(); ++i)
      note(count_at("/nodes", i), count_of((*nodes)[i]), 0, 0);
  if (const json* links = array(doc, "links"))
    for (std::size_t i = 0; i < links->size(); ++i)
      note(count_at("/links", i), 0, 2 * count_of((*links)[i]), 0);
  if (const json* racks = array(doc, "racks"))
    for (std::size_t i = 0; i < racks->size(); ++i)
      note(count_at("/racks", i), 0, 0, count_of((*racks)[i]));
  std::map<std::string, ExpansionSize> templates;
  if (const auto it = doc.find("templates"); it != doc.end() && it->is_object())
    for (const auto& [name, t] : it->items()) {
      if (!t.is_object()) continue;
      ExpansionSize& size = templates[name];
      if (const json* nodes = array(t, "nodes"))
        for (const json& n : *nodes) size.nodes += count_of(n);
      if (const json* links = array(t, "links"))
        for (const json& l : *links) size.links += 2 * count_of(l);
    }
  double servers = 0;
  if (const json* list = array(doc, "servers"))
    for (std::size_t i = 0; i < list->size(); ++i) {
      const json& s = (*list)[i];
      const double count = count_of(s);
      servers += count;
      ExpansionSize each;
      if (const auto t = s.is_object() ? s.find("template") : s.end();
          s.is_object() && t != s.end() && t->is_string())
        if (const auto found = templates.find(t->get<std::string>()); found != templates.end())
          each = found->second;
      note(count_at("/servers", i), count * each.nodes, count * each.links, count);
    }
  if (const auto it = doc.find("fabric"); it != doc.end()) {
    const ExpansionSize fabric = estimate_fabric(*it, servers);
    note("/fabric", fabric.nodes, fabric.links, fabric.groups);
  }
  return p;
}

class Loader {
 public:
  Loader(const json& doc, const std::string& file, const LoadOptions& options)
      : doc_(doc), file_(file), options_(options), sink_(file), state_(sink_) {}

  Topology run() {
    const ObjectReader top(doc_, "", sink_, "a topology");
    if (!top.ok()) sink_.throw_if_any();
    check_memory();
    top.check_keys({"name", "nodes", "links", "servers", "racks", "templates", "fabric"});
    const auto name = top.string("name");
    state_.topology.set_name(name.value_or(stem_of(file_)));
    read_racks(top);
    read_templates(top);
    read_servers(top);
    read_explicit_nodes(top);
    instantiate_servers();
    if (const json* fabric = top.get("fabric")) {
      if (sink_.empty())
        build_fabric(*fabric, state_);
      else
        sink_.error("/fabric", "not expanded because of the errors above; fix those first");
    }
    read_explicit_links(top);
    if (state_.topology.gpus().empty() && sink_.empty())
      sink_.error("/nodes",
                  "the topology has no GPU; add at least one node with \"kind\": \"gpu\"");
    if (sink_.empty()) check_gpu_connectivity(state_);
    sink_.throw_if_any();
    finalize(state_.topology);
    return std::move(state_.topology);
  }

 private:
  // Before anything is expanded: a templated "count" of a few bytes can stand for gigabytes.
  void check_memory() {
    if (options_.max_memory == 0) return;
    const Planned p = plan_expansion(doc_);
    const auto limit = static_cast<double>(options_.max_memory);
    if (p.bytes() <= limit) return;
    const bool groups = p.size.groups > 0;
    const auto count = [](double n, const char* one, const char* many) {
      return fmt::format("{:.3g} {}", n, n == 1 ? one : many);
    };
    const std::string nodes = count(p.size.nodes, "node", "nodes");
    const std::string links = count(p.size.links, "directed link", "directed links");
    const std::string parts =
        groups ? fmt::format("{}, {} and {}", nodes, links,
                             count(p.size.groups, "rack or server", "racks and servers"))
               : fmt::format("{} and {}", nodes, links);
    const std::string costs =
        groups ? fmt::format("{} B per node, {} B per link, {} B per rack or server", kBytesPerNode,
                             kBytesPerLink, kBytesPerGroup)
               : fmt::format("{} B per node, {} B per link", kBytesPerNode, kBytesPerLink);
    sink_.error(
        p.largest,
        fmt::format("the topology expands to about {}, which need about {} ({}), more "
                    "than the memory limit of {} (--max-memory); lower \"count\", or "
                    "raise --max-memory if the machine has the memory",
                    parts, format_size_estimate(p.bytes()), costs, format_size_estimate(limit)));
    sink_.throw_if_any();
  }

  const json* array_at(const ObjectReader& top, std::string_view key, std::string_view what) {
    const json* v = top.get(key);
    if (v == nullptr) return nullptr;
    if (!v->is_array()) {
      top.error(key, fmt::format("expected an array of {}; found {}", what, json_io::describe(*v)));
      return nullptr;
    }
    return v;
  }

  void read_racks(const ObjectReader& top) {
    const json* racks = array_at(top, "racks", "racks");
    if (racks == nullptr) return;
    for (std::size_t i = 0; i < racks->size(); ++i) {
      const std::string p = json_io::pointer("/racks", i);
      const std::size_t errors_before = sink_.count();
      const ObjectReader r((*racks)[i], p, sink_, "a rack");
      if (!r.ok()) continue;
      r.check_keys({"name", "count"});
      const auto rep = read_repeat(r);
      const auto name = read_pattern(r, "name", naming_repeat(r, rep), true);
      // As with servers: an entry with an error is not expanded, its "count" may be a typo too.
      if (!rep || !name || sink_.count() != errors_before) {
        remember_broken(rep, name, broken_racks_);
        continue;
      }
      for (std::int64_t k = 0; k < rep->count; ++k) {
        std::string n = name->expand(k);
        if (rack_index_.count(n) != 0) {
          r.error("name", fmt::format("duplicate rack name \"{}\"; rack names must be unique", n));
          continue;
        }
        rack_index_.emplace(n, state_.topology.add_rack(Rack{n}));
        rack_names_.push_back(std::move(n));
      }
    }
  }

  std::int32_t find_rack(const ObjectReader& r, std::string_view key, const std::string& name) {
    if (name.empty()) return kNone;
    const auto it = rack_index_.find(name);
    if (it != rack_index_.end()) return it->second;
    if (broken_racks_.count(name) != 0) return kNone;  // its entry's error is reported
    r.error(key, fmt::format("unknown rack \"{}\"{}; declare it in \"racks\"", name,
                             json_io::suggest(name, rack_names_)));
    return kNone;
  }

  void read_templates(const ObjectReader& top) {
    const json* templates = top.get("templates");
    if (templates == nullptr) return;
    if (!templates->is_object()) {
      top.error("templates", "expected an object mapping template names to templates; found " +
                                 json_io::describe(*templates));
      return;
    }
    // nlohmann objects iterate in key order, so this is deterministic.
    for (const auto& [name, value] : templates->items()) {
      templates_.emplace(name,
                         read_template(name, value, json_io::pointer("/templates", name), sink_));
      template_names_.push_back(name);
    }
  }

  struct Instance {
    std::int32_t server;
    const Template* tmpl;
    std::uint32_t entry;
  };

  void read_servers(const ObjectReader& top) {
    const json* servers = array_at(top, "servers", "servers");
    if (servers == nullptr) return;
    for (std::size_t i = 0; i < servers->size(); ++i) {
      const std::string p = json_io::pointer("/servers", i);
      const std::size_t errors_before = sink_.count();
      const ObjectReader r((*servers)[i], p, sink_, "a server");
      if (!r.ok()) continue;
      r.check_keys({"name", "count", "rack", "template", "p2p", "gpudirect_rdma"});
      const auto rep = read_repeat(r);
      const auto name = read_pattern(r, "name", naming_repeat(r, rep), true);
      const auto rack = read_pattern(r, "rack", naming_repeat(r, rep), false);
      const auto p2p = r.boolean("p2p");
      const auto rdma = r.boolean("gpudirect_rdma");
      const Template* tmpl = nullptr;
      bool ok = rep && name;
      if (const auto t = r.string("template")) {
        const auto it = templates_.find(*t);
        if (it == templates_.end()) {
          r.error("template", fmt::format("unknown template \"{}\"{}; define it under "
                                          "\"templates\"",
                                          *t, json_io::suggest(*t, template_names_)));
          ok = false;
        } else if (!it->second.ok) {
          ok = false;  // its own errors are reported at /templates
        } else {
          tmpl = &it->second;
        }
      } else if (r.has("template")) {
        ok = false;
      }
      // An entry with an error (a misspelt key among them) is not expanded: its "count" may be
      // a typo too, and millions of servers took the fuzzer's time limit to build and free.
      if (!ok || sink_.count() != errors_before) {
        remember_broken(rep, name, broken_servers_);
        continue;
      }
      if (tmpl != nullptr) {
        // NodeId and LinkId are 32-bit, and a typo in a count should not exhaust memory.
        planned_nodes_ += static_cast<std::uint64_t>(rep->count) * tmpl->nodes.size();
        planned_links_ += static_cast<std::uint64_t>(rep->count) * tmpl->links.size() * 2;
        if (planned_nodes_ > kMaxExpandedNodes || planned_links_ > kMaxExpandedLinks) {
          r.error("count", fmt::format("the servers up to here expand to {} nodes and {} directed "
                                       "links; the limits are {} and {}; lower \"count\"",
                                       planned_nodes_, planned_links_, kMaxExpandedNodes,
                                       kMaxExpandedLinks));
          return;
        }
      }
      for (std::int64_t k = 0; k < rep->count; ++k) {
        Server s;
        s.name = name->expand(k);
        if (server_index_.count(s.name) != 0) {
          r.error("name",
                  fmt::format("duplicate server name \"{}\"; server names must be unique", s.name));
          continue;
        }
        s.rack = rack ? find_rack(r, "rack", rack->expand(k)) : kNone;
        if (tmpl != nullptr) {
          s.p2p = tmpl->p2p.value_or(s.p2p);
          s.gpudirect_rdma = tmpl->gpudirect_rdma.value_or(s.gpudirect_rdma);
        }
        s.p2p = p2p.value_or(s.p2p);
        s.gpudirect_rdma = rdma.value_or(s.gpudirect_rdma);
        const std::string server_name = s.name;
        const std::int32_t id = state_.topology.add_server(std::move(s));
        server_index_.emplace(server_name, id);
        server_names_.push_back(server_name);
        if (tmpl != nullptr) instances_.push_back({id, tmpl, static_cast<std::uint32_t>(i)});
      }
    }
  }

  bool check_new_name(const std::string& name, const std::string& ptr) {
    if (state_.topology.find(name) == kNoNode) return true;
    const NodeId other = state_.topology.find(name);
    sink_.error(ptr, fmt::format("duplicate node name \"{}\" (first defined at {}); node names "
                                 "must be unique",
                                 name, state_.where(other)));
    return false;
  }

  void read_explicit_nodes(const ObjectReader& top) {
    const json* nodes = array_at(top, "nodes", "nodes");
    if (nodes == nullptr) return;
    std::vector<NodeSpec> specs;
    for (std::size_t i = 0; i < nodes->size(); ++i) {
      const std::string p = json_io::pointer("/nodes", i);
      specs.clear();
      read_nodes((*nodes)[i], p, sink_, false, specs, &broken_nodes_);  // errors are in the sink
      const ObjectReader r((*nodes)[i], p, sink_, "a node");
      for (NodeSpec& s : specs) {
        if (!s.server.empty()) {
          const auto it = server_index_.find(s.server);
          if (it == server_index_.end()) {
            // A node of a server whose entry failed is left out quietly, as that entry's nodes.
            if (broken_servers_.count(s.server) != 0)
              broken_nodes_.insert(s.node.name);
            else
              r.error("server", fmt::format("unknown server \"{}\"{}; declare it in \"servers\"",
                                            s.server, json_io::suggest(s.server, server_names_)));
            continue;
          }
          s.node.server = it->second;
          s.node.rack = state_.topology.server(it->second).rack;
        }
        if (!s.rack.empty()) {
          const std::int32_t rack = find_rack(r, "rack", s.rack);
          if (rack == kNone) continue;
          if (s.node.server != kNone && s.node.rack != rack) {
            r.error("rack",
                    fmt::format("node \"{}\" is in rack \"{}\" but its server \"{}\" is "
                                "in {}; drop the node's \"rack\" (it follows the server)",
                                s.node.name, s.rack, s.server,
                                s.node.rack == kNone
                                    ? std::string("no rack")
                                    : "rack \"" + state_.topology.rack(s.node.rack).name + "\""));
            continue;
          }
          s.node.rack = rack;
        }
        if (!check_new_name(s.node.name, json_io::pointer(p, "name"))) continue;
        state_.add_node(std::move(s.node),
                        {NodeOrigin::Section::nodes, static_cast<std::uint32_t>(i)});
      }
    }
  }

  void instantiate_servers() {
    for (const Instance& inst : instances_) {
      const Server& server = state_.topology.server(inst.server);
      const std::string prefix = server.name + "/";
      std::vector<NodeId> ids;
      ids.reserve(inst.tmpl->nodes.size());
      bool ok = true;
      for (const Node& proto : inst.tmpl->nodes) {
        Node n = proto;
        n.name = prefix + proto.name;
        n.server = inst.server;
        n.rack = server.rack;
        if (!check_new_name(n.name, json_io::pointer("/servers", inst.entry))) {
          ok = false;
          break;
        }
        ids.push_back(state_.add_node(std::move(n), {NodeOrigin::Section::servers, inst.entry}));
      }
      if (!ok) continue;
      for (const Template::LocalLink& l : inst.tmpl->links)
        state_.add_link(ids[l.from], ids[l.to], l.kind, l.bandwidth, l.latency, l.duplex);
    }
  }

  void read_explicit_links(const ObjectReader& top) {
    const json* links = array_at(top, "links", "links");
    if (links == nullptr) return;
    std::vector<LinkSpec> specs;
    int suggestions_left = 20;  // a suggestion scans every name; keep error floods cheap
    for (std::size_t i = 0; i < links->size(); ++i) {
      const std::string p = json_io::pointer("/links", i);
      specs.clear();
      const bool good = read_links((*links)[i], p, sink_, specs);
      for (const LinkSpec& s : specs) {
        const NodeId a = state_.topology.find(s.from), b = state_.topology.find(s.to);
        for (const auto& [key, id, text] :
             {std::tuple{"from", a, s.from}, std::tuple{"to", b, s.to}}) {
          if (id != kNoNode || broken_nodes_.count(text) != 0) continue;
          std::string hint;
          if (suggestions_left-- > 0) hint = suggest_node(text);
          sink_.error(json_io::pointer(p, key),
                      fmt::format("link refers to unknown node \"{}\"{}; declare it in "
                                  "\"nodes\" or fix the name",
                                  text, hint));
        }
        if (good && a != kNoNode && b != kNoNode)
          state_.add_link(a, b, s.kind, s.bandwidth, s.latency, s.duplex);
      }
    }
  }

  std::string suggest_node(const std::string& name) const {
    std::vector<std::string> names;
    names.reserve(state_.topology.num_nodes());
    for (const Node& n : state_.topology.nodes()) names.push_back(n.name);
    // The name meant may be one whose entry failed; sorted, so that ties break the same way in
    // every build.
    const auto known = static_cast<std::ptrdiff_t>(names.size());
    names.insert(names.end(), broken_nodes_.begin(), broken_nodes_.end());
    std::sort(names.begin() + known, names.end());
    return json_io::suggest(name, names);
  }

  const json& doc_;
  std::string file_;
  LoadOptions options_;
  DiagnosticSink sink_;
  BuildState state_;
  std::unordered_map<std::string, std::int32_t> rack_index_, server_index_;
  std::vector<std::string> rack_names_, server_names_, template_names_;
  // Names of entries that failed (remember_broken), by section.
  std::unordered_set<std::string> broken_racks_, broken_servers_, broken_nodes_;
  std::map<std::string, Template> templates_;
  std::vector<Instance> instances_;
  std::uint64_t planned_nodes_ = 0, planned_links_ = 0;
};

}  // namespace

std::string BuildState::where(NodeId node) const {
  const NodeOrigin& o = origin[node];
  switch (o.section) {
    case NodeOrigin::Section::nodes:
      return json_io::pointer("/nodes", o.index);
    case NodeOrigin::Section::servers:
      return json_io::pointer("/servers", o.index) + " (node \"" + topology.node(node).name + "\")";
    case NodeOrigin::Section::fabric:
      return "/fabric (node \"" + topology.node(node).name + "\")";
  }
  return "";
}

NodeId BuildState::add_node(Node node, NodeOrigin from) {
  origin.push_back(from);
  return topology.add_node(std::move(node));
}

void BuildState::add_link(NodeId from, NodeId to, LinkKind kind, double bandwidth, double latency,
                          bool duplex) {
  const std::uint32_t index = next_source_index++;
  topology.add_link(Link{from, to, kind, bandwidth, latency, index});
  if (duplex) topology.add_link(Link{to, from, kind, bandwidth, latency, index});
}

Topology build_topology(const nlohmann::json& document, const std::string& file,
                        const LoadOptions& options) {
  return Loader(document, file, options).run();
}

Topology parse_topology(std::string_view text, const std::string& file,
                        const LoadOptions& options) {
  DiagnosticSink sink(file);
  auto doc = json_io::parse_document(text, sink, json_io::kTopologyDocument);
  if (!doc) sink.throw_if_any();
  // Duplicate keys leave a usable document: report them together with what the build finds.
  std::vector<Diagnostic> all;
  try {
    sink.throw_if_any();
  } catch (const InputError& e) {
    all = e.diagnostics();
  }
  try {
    Topology t = build_topology(*doc, file, options);
    if (all.empty()) return t;
  } catch (const InputError& e) {
    all.insert(all.end(), e.diagnostics().begin(), e.diagnostics().end());
  }
  throw InputError(std::move(all));
}

Topology load_topology(const std::string& path, const LoadOptions& options) {
  return parse_topology(json_io::read_text_file(path, json_io::kTopologyDocument), path, options);
}

}  // namespace collsim::topo
