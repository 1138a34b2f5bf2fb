// collsim topo show|validate|route|dot: look at a topology file without simulating anything.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/engine.hpp"
#include "tools/commands.hpp"
#include "tools/resource_guard.hpp"
#include "tools/run_extras.hpp"
#include "tools/value_lists.hpp"
#include "topology/dot.hpp"
#include "topology/error.hpp"
#include "topology/json_reader.hpp"
#include "topology/loader.hpp"
#include "topology/routing.hpp"

namespace collsim::cli {
namespace {

using topo::NodeId;
using topo::Topology;

constexpr std::size_t kAllPairsLimit = 2048;  // beyond this, show samples pairs (it says so)

void print(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
}

std::string counts_by_kind(const Topology& t) {
  std::array<std::size_t, 6> n{};
  for (const auto& node : t.nodes()) ++n[static_cast<std::size_t>(node.kind)];
  std::string out;
  for (std::size_t k = 0; k < n.size(); ++k)
    out += fmt::format("{}{} {}", k == 0 ? "" : ", ",
                       topo::to_string(static_cast<topo::NodeKind>(k)), n[k]);
  return out;
}

std::string links_by_kind(const Topology& t) {
  std::array<std::size_t, 4> n{};
  for (const auto& l : t.links()) ++n[static_cast<std::size_t>(l.kind)];
  std::string out;
  for (std::size_t k = 0; k < n.size(); ++k)
    out += fmt::format("{}{} {}", k == 0 ? "" : ", ",
                       topo::to_string(static_cast<topo::LinkKind>(k)), n[k]);
  return out;
}

std::string ratios(std::span<const std::string_view> names, std::span<const double> values) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += fmt::format("{}{} {:.4g}", i == 0 ? "" : ", ", names[i], values[i]);
  return out;
}

// What the cost model reads of a GPU or a CPU, in words (rounded for reading).
std::string parameters(const Topology& t, const topo::Node& n) {
  constexpr std::string_view kDTypes[] = {"fp32", "fp16", "bf16"};
  constexpr std::string_view kDirections[] = {"d2h", "h2d"};
  if (n.kind == topo::NodeKind::cpu)
    return fmt::format("memcpy {}  pageable traffic {}", format_bandwidth(n.memcpy_bandwidth),
                       ratios(kDirections, n.pageable_traffic));
  return fmt::format(
      "model {}  memory {}{}  copy engines {}  alpha {}  launch {}  event {}  reduce traffic {}",
      n.model.empty() ? std::string("(none)") : "\"" + n.model + "\"",
      format_bandwidth(n.memory_bandwidth),
      n.memory_owner == topo::kNoNode ? "" : " (of " + t.node(n.memory_owner).name + ")",
      n.copy_engines == 0 ? std::string("unlimited") : std::to_string(n.copy_engines),
      format_duration(n.alpha), format_duration(n.launch_latency), format_duration(n.event_latency),
      ratios(kDTypes, n.reduce_traffic));
}

// The same parameters to the last bit, so that nodes which differ only past the printed digits
// are not counted as one set.
std::string exact_parameters(const topo::Node& n) {
  if (n.kind == topo::NodeKind::cpu)
    return fmt::format("{:a} {:a} {:a}", n.memcpy_bandwidth, n.pageable_traffic[0],
                       n.pageable_traffic[1]);
  return fmt::format("{} {:a} {} {} {:a} {:a} {:a} {:a} {:a} {:a}", n.model, n.memory_bandwidth,
                     n.memory_owner, n.copy_engines, n.alpha, n.launch_latency, n.event_latency,
                     n.reduce_traffic[0], n.reduce_traffic[1], n.reduce_traffic[2]);
}

// The GPUs' and CPUs' parameters, one line for each distinct set, in the order of the set's
// first node, with how many nodes have it and the first one's name.
std::string parameter_lines(const Topology& t) {
  std::string out;
  for (const topo::NodeKind kind : {topo::NodeKind::gpu, topo::NodeKind::cpu}) {
    struct Set {
      std::string text;  // parameters(), of its first node
      NodeId first;
      std::size_t nodes = 0;
    };
    std::vector<Set> sets;
    std::map<std::string, std::size_t> index;  // exact_parameters() to the set
    std::size_t nodes = 0;
    for (NodeId id = 0; id < t.num_nodes(); ++id) {
      const topo::Node& n = t.node(id);
      if (n.kind != kind) continue;
      ++nodes;
      const auto [it, added] = index.try_emplace(exact_parameters(n), sets.size());
      if (added) sets.push_back(Set{parameters(t, n), id});
      ++sets[it->second].nodes;
    }
    if (nodes == 0) continue;
    const std::string what = kind == topo::NodeKind::gpu ? "GPU" : "CPU";
    out += fmt::format("{} parameters ({} {}{}, {} distinct):\n", topo::to_string(kind), nodes,
                       what, nodes == 1 ? "" : "s", sets.size());
    for (const Set& s : sets)
      out += fmt::format("  {:>6} {}{} like {}: {}\n", s.nodes, what, s.nodes == 1 ? "" : "s",
                         t.node(s.first).name, s.text);
  }
  return out;
}

struct ClassStats {
  std::size_t pairs = 0;
  double min_bw = kUnlimited, max_bw = 0;
  double min_lat = 0, max_lat = 0;
  std::size_t min_hops = 0, max_hops = 0;
};

void show(const std::string& file, const std::string& calibration, std::uint64_t max_memory) {
  Topology t = load_topology(file, max_memory);
  const std::string calibrated =
      calibration.empty() ? std::string() : apply_calibration_file(t, calibration);
  const topo::Router router(t);
  std::string out;
  out += fmt::format("topology: {} ({})\n", t.name(), file);
  if (!calibrated.empty()) out += fmt::format("calibration: {}\n", calibrated);
  out += fmt::format("nodes: {} ({})\n", t.num_nodes(), counts_by_kind(t));
  out += fmt::format("links: {} directed ({})\n", t.num_links(), links_by_kind(t));
  std::size_t p2p = 0, rdma = 0;
  for (const auto& s : t.servers()) {
    p2p += s.p2p ? 1 : 0;
    rdma += s.gpudirect_rdma ? 1 : 0;
  }
  out +=
      fmt::format("servers: {} (p2p on {}, gpudirect_rdma on {})\n", t.servers().size(), p2p, rdma);
  out += fmt::format("racks: {}\n", t.racks().size());
  out += parameter_lines(t);

  const auto& gpus = t.gpus();
  const bool all_pairs = gpus.size() <= kAllPairsLimit;
  std::array<ClassStats, 7> stats{};
  std::size_t diameter_hops = 0;
  double diameter_latency = 0;
  std::pair<NodeId, NodeId> hops_pair{topo::kNoNode, topo::kNoNode}, latency_pair = hops_pair;
  const auto visit = [&](NodeId a, NodeId b) {
    const topo::Route r = router.compute(a, b);
    ClassStats& s = stats[static_cast<std::size_t>(r.path_class)];
    const std::size_t hops = r.links.size();
    if (s.pairs == 0) {
      s.min_bw = s.max_bw = r.bandwidth;
      s.min_lat = s.max_lat = r.latency;
      s.min_hops = s.max_hops = hops;
    } else {
      s.min_bw = std::min(s.min_bw, r.bandwidth);
      s.max_bw = std::max(s.max_bw, r.bandwidth);
      s.min_lat = std::min(s.min_lat, r.latency);
      s.max_lat = std::max(s.max_lat, r.latency);
      s.min_hops = std::min(s.min_hops, hops);
      s.max_hops = std::max(s.max_hops, hops);
    }
    ++s.pairs;
    if (hops_pair.first == topo::kNoNode || hops > diameter_hops) {
      diameter_hops = hops;
      hops_pair = {a, b};
    }
    if (latency_pair.first == topo::kNoNode || r.latency > diameter_latency) {
      diameter_latency = r.latency;
      latency_pair = {a, b};
    }
  };
  std::size_t pairs = 0;
  if (all_pairs) {
    for (NodeId a : gpus)
      for (NodeId b : gpus)
        if (a != b) visit(a, b), ++pairs;
    out += fmt::format("gpu pairs by path class (all {} ordered pairs of {} GPUs):\n", pairs,
                       gpus.size());
  } else {
    // Routes towards one destination share one distance table, so this sample costs about one
    // graph search, where routes from one source to every GPU would cost one search each.
    for (NodeId a : gpus)
      if (a != gpus.front()) visit(a, gpus.front()), ++pairs;
    out += fmt::format(
        "gpu pairs by path class (sampled: the {} routes from every GPU to {}, "
        "since {} GPUs have too many pairs to list):\n",
        pairs, t.node(gpus.front()).name, gpus.size());
  }
  const auto range = [](const std::string& lo, const std::string& hi) {
    return lo == hi ? lo : lo + " .. " + hi;
  };
  for (std::size_t c = 0; c < stats.size(); ++c) {
    const ClassStats& s = stats[c];
    if (s.pairs == 0) continue;
    out += fmt::format("  {:<4} {:>9} pairs  bandwidth {}  latency {}  hops {}\n",
                       topo::to_string(static_cast<topo::PathClass>(c)), s.pairs,
                       range(format_bandwidth(s.min_bw), format_bandwidth(s.max_bw)),
                       range(format_duration(s.min_lat), format_duration(s.max_lat)),
                       range(std::to_string(s.min_hops), std::to_string(s.max_hops)));
  }
  if (pairs == 0) {
    out += "  (one GPU: no pairs)\n";
  } else {
    out += fmt::format("diameter{}: {} hops ({} -> {}), latency {} ({} -> {})\n",
                       all_pairs ? "" : " (sampled)", diameter_hops, t.node(hops_pair.first).name,
                       t.node(hops_pair.second).name, format_duration(diameter_latency),
                       t.node(latency_pair.first).name, t.node(latency_pair.second).name);
  }
  print(out);
}

NodeId resolve(const Topology& t, const std::string& text, const std::string& option) {
  if (const NodeId id = t.find(text); id != topo::kNoNode) return id;
  std::size_t rank = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), rank);
  if (ec == std::errc() && ptr == text.data() + text.size() && !text.empty()) {
    if (rank < t.gpus().size()) return t.gpus()[rank];
    throw InputError("", option,
                     fmt::format("GPU rank {} does not exist; the topology has {} GPUs (ranks 0 "
                                 "to {})",
                                 rank, t.gpus().size(), t.gpus().size() - 1));
  }
  std::vector<std::string> names;
  names.reserve(t.num_nodes());
  for (const auto& n : t.nodes()) names.push_back(n.name);
  const std::string hint = topo::json_io::suggest(text, names);
  throw InputError("", option,
                   fmt::format("no node named \"{}\"{}; give a node name from the file or a GPU "
                               "rank (0 to {})",
                               text, hint, t.gpus().empty() ? 0 : t.gpus().size() - 1));
}

// The GPU's rank when every GPU of the topology is a rank, in order (collsim run's default).
std::optional<sched::RankId> rank_of(const Topology& t, NodeId node) {
  const auto& gpus = t.gpus();
  const auto it = std::find(gpus.begin(), gpus.end(), node);
  if (it == gpus.end()) return std::nullopt;
  return static_cast<sched::RankId>(it - gpus.begin());
}

struct RouteOptions {
  std::string routing = "ecmp";
  std::optional<std::uint64_t> flow_key;
};

void route(const std::string& file, const std::string& a, const std::string& b,
           const RouteOptions& o, std::uint64_t max_memory) {
  const topo::RoutingOptions options = parse_routing(o.routing, "--routing");
  const Topology t = load_topology(file, max_memory);
  const NodeId from = resolve(t, a, "FROM"), to = resolve(t, b, "TO");
  // Between two GPUs, the key collsim run routes their transfers with: the path shown is the
  // one its flows take, not one of the equal-cost paths picked by another key.
  const std::optional<sched::RankId> rank_from = rank_of(t, from), rank_to = rank_of(t, to);
  std::uint64_t key = 0;
  std::string keyed = "flow key 0";
  if (o.flow_key) {
    key = *o.flow_key;
    keyed = fmt::format("flow key {} (--flow-key)", key);
  } else if (rank_from && rank_to) {
    key = sim::transfer_flow_key(*rank_from, *rank_to);
    keyed = fmt::format(
        "flow key {}, that of a transfer from rank {} to rank {} in collsim run with every GPU",
        key, *rank_from, *rank_to);
  }
  const topo::Router router(t, options);
  const topo::Route& r = router.route(from, to, key);
  std::string out = fmt::format("route {} -> {}: {} hops, path class {}\n", t.node(from).name,
                                t.node(to).name, r.links.size(), topo::to_string(r.path_class));
  for (std::size_t i = 0; i < r.links.size(); ++i) {
    const topo::Link& l = t.link(r.links[i]);
    out += fmt::format("  {:>2}  {} -> {}  {}  bandwidth {}  latency {}\n", i + 1,
                       t.node(l.from).name, t.node(l.to).name, topo::to_string(l.kind),
                       format_bandwidth(l.bandwidth), format_duration(l.latency));
  }
  out += fmt::format("total: latency {}, bottleneck bandwidth {}\n", format_duration(r.latency),
                     format_bandwidth(r.bandwidth));
  out += options.ecmp ? fmt::format("routing: ecmp, {}\n", keyed)
                      : std::string("routing: shortest (one deterministic path per pair)\n");
  print(out);
}

}  // namespace

void add_topo_commands(CLI::App& app) {
  CLI::App* topo_cmd =
      app.add_subcommand("topo", "Inspect a topology file: show, validate, route, dot");
  topo_cmd->require_subcommand(1);

  auto file = std::make_shared<std::string>();
  auto max_memory = std::make_shared<std::string>();
  CLI::App* show_cmd = topo_cmd->add_subcommand(
      "show",
      "Counts by kind, servers, racks, the GPUs' and CPUs' parameters, bandwidth per path class "
      "between GPU pairs, and the diameter in hops and latency");
  show_cmd->add_option("FILE", *file, "Topology JSON file (docs/topology-format.md)")->required();
  auto calibration = std::make_shared<std::string>();
  show_cmd->add_option("--calibration", *calibration,
                       "Calibration JSON from collsim calibrate; shows the parameters it gives "
                       "the matching GPUs, as run and sweep would simulate them");
  add_max_memory_option(*show_cmd, *max_memory);
  show_cmd->callback([file, calibration, max_memory] {
    show(*file, *calibration, max_memory_limit(*max_memory));
  });

  CLI::App* validate_cmd = topo_cmd->add_subcommand(
      "validate", "Check a topology file; prints \"ok: ...\" or every problem found (exit 2)");
  validate_cmd->add_option("FILE", *file, "Topology JSON file")->required();
  add_max_memory_option(*validate_cmd, *max_memory);
  validate_cmd->callback([file, max_memory] {
    const Topology t = load_topology(*file, max_memory_limit(*max_memory));
    print(fmt::format("ok: {}: {} nodes ({} GPUs), {} directed links, {} servers, {} racks\n",
                      t.name(), t.num_nodes(), t.gpus().size(), t.num_links(), t.servers().size(),
                      t.racks().size()));
  });

  auto from = std::make_shared<std::string>();
  auto to = std::make_shared<std::string>();
  auto route_options = std::make_shared<RouteOptions>();
  CLI::App* route_cmd = topo_cmd->add_subcommand(
      "route",
      "The route between two nodes: each hop with link kind, bandwidth and latency; "
      "totals; path class");
  route_cmd->add_option("FILE", *file, "Topology JSON file")->required();
  route_cmd->add_option("FROM", *from, "Source node name, or a GPU rank (0, 1, ...)")->required();
  route_cmd->add_option("TO", *to, "Destination node name, or a GPU rank")->required();
  CLI::Option* routing =
      route_cmd
          ->add_option(
              "--routing", route_options->routing,
              "ecmp: the equal-cost path that the flow key hashes to, as collsim run routes "
              "(its default too); shortest: the one deterministic shortest path")
          ->capture_default_str();
  route_cmd
      ->add_flag_callback(
          "--ecmp", [route_options] { route_options->routing = "ecmp"; },
          "The same as --routing ecmp")
      ->excludes(routing);
  route_cmd->add_option("--flow-key", route_options->flow_key,
                        "Flow key hashed under ecmp; default: between two GPUs, the key collsim "
                        "run gives a transfer from the first to the second when every GPU is a "
                        "rank, else 0");
  add_max_memory_option(*route_cmd, *max_memory);
  route_cmd->callback(
      [=] { route(*file, *from, *to, *route_options, max_memory_limit(*max_memory)); });

  auto output = std::make_shared<std::string>();
  CLI::App* dot_cmd = topo_cmd->add_subcommand("dot", "Write the topology as a GraphViz graph");
  dot_cmd->add_option("FILE", *file, "Topology JSON file")->required();
  dot_cmd->add_option("-o,--output", *output, "Write to this file instead of standard output");
  add_max_memory_option(*dot_cmd, *max_memory);
  dot_cmd->callback([file, output, max_memory] {
    const Topology t = load_topology(*file, max_memory_limit(*max_memory));
    if (output->empty()) {
      topo::write_dot(t, std::cout);
      std::cout.flush();
      return;
    }
    std::ofstream out(*output);
    if (!out) throw InputError("", "--output", "cannot write \"" + *output + "\"; check the path");
    topo::write_dot(t, out);
    if (!out) throw InputError("", "--output", "writing \"" + *output + "\" failed");
  });
}

}  // namespace collsim::cli
