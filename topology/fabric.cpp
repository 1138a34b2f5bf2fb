// The "fabric" section: a two-tier leaf/spine network generated from a few numbers, so that a
// cluster of thousands of servers is a short file. Every name it creates is an ordinary node, so
// the same graph can be written out explicitly (docs/topology-format.md shows the equivalence).
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "topology/build_state.hpp"
#include "topology/json_reader.hpp"

namespace collsim::topo {
namespace {

using json_io::json;
using json_io::ObjectReader;

int digits(std::size_t n) {  // width of the largest index below n
  int d = 1;
  for (std::size_t x = n > 0 ? n - 1 : 0; x >= 10; x /= 10) ++d;
  return d;
}

struct LinkParams {
  double bandwidth = kUnlimited;
  double latency = 0;
};

bool read_link_params(const ObjectReader& fabric, std::string_view key, LinkParams& out) {
  const json* v = fabric.get(key);
  if (v == nullptr) return true;
  const ObjectReader r(*v, fabric.ptr(key), fabric.sink(), "link parameters");
  if (!r.ok()) return false;
  r.check_keys({"bandwidth", "latency"});
  bool ok = true;
  if (r.has("bandwidth")) {
    if (auto b = r.bandwidth("bandwidth"))
      out.bandwidth = *b;
    else
      ok = false;
  }
  if (r.has("latency")) {
    if (auto l = r.duration("latency"))
      out.latency = *l;
    else
      ok = false;
  }
  return ok;
}

// A positive integer field, or 1 when it is absent or malformed (its error comes later).
double number_or_one(const json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer() || it->get<std::int64_t>() < 1) return 1;
  return static_cast<double>(it->get<std::int64_t>());
}

}  // namespace

ExpansionSize estimate_fabric(const nlohmann::json& fabric, double servers) {
  ExpansionSize size;
  if (!fabric.is_object()) return size;
  const auto nics_it = fabric.find("nics");
  const double nics =
      nics_it != fabric.end() && nics_it->is_array() ? static_cast<double>(nics_it->size()) : 1;
  const auto kind = fabric.find("kind");
  const bool rail = kind != fabric.end() && *kind == "rail_optimized";
  const double groups = std::ceil(servers / number_or_one(fabric, "servers_per_leaf"));
  const double leaves = groups * (rail ? nics : 1);
  const double spines = fabric.contains("spines") ? number_or_one(fabric, "spines") : 0;
  size.nodes = leaves + spines;
  size.links = 2 * (servers * nics + leaves * spines);
  return size;
}

void build_fabric(const nlohmann::json& fabric, BuildState& state) {
  DiagnosticSink& sink = state.sink;
  const ObjectReader r(fabric, "/fabric", sink, "a fabric");
  if (!r.ok()) return;
  r.check_keys({"kind", "name", "nics", "servers_per_leaf", "spines", "nic_link", "uplink",
                "oversubscription"});
  bool ok = true;
  bool rail = false;
  if (const auto kind = r.string("kind", true)) {
    if (*kind == "rail_optimized") {
      rail = true;
    } else if (*kind != "fat_tree") {
      const std::string_view kinds[] = {"rail_optimized", "fat_tree"};
      r.error("kind", fmt::format("unknown fabric kind \"{}\"{}; expected rail_optimized or "
                                  "fat_tree",
                                  *kind, json_io::suggest(*kind, kinds)));
      ok = false;
    }
  } else {
    ok = false;
  }
  const std::string prefix = r.string("name").value_or("fabric");
  std::vector<std::string> nics;
  if (const json* v = r.get("nics"); v == nullptr) {
    r.missing("nics", "the names of the NICs in each server, e.g. [\"nic0\", \"nic1\"]");
    ok = false;
  } else if (!v->is_array() || v->empty() ||
             !std::all_of(v->begin(), v->end(), [](const json& e) { return e.is_string(); })) {
    r.error("nics",
            "expected a non-empty array of NIC names (within each server, e.g. \"nic0\"); "
            "found " +
                json_io::describe(*v));
    ok = false;
  } else {
    for (const json& e : *v) nics.push_back(e.get<std::string>());
  }
  const auto per_leaf = r.integer("servers_per_leaf", 1, 1 << 20, true);
  const auto spines = r.integer("spines", 0, 1 << 16);
  LinkParams down, up;
  ok &= read_link_params(r, "nic_link", down) && read_link_params(r, "uplink", up);
  const auto ratio = r.ratio("oversubscription");
  ok &= per_leaf.has_value() && (spines.has_value() || !r.has("spines")) &&
        (ratio.has_value() || !r.has("oversubscription"));
  if (!ok) return;

  // Servers that hold the fabric's NICs, in server order; rail r is the r-th NIC of each.
  const Topology& t = state.topology;
  std::vector<std::vector<NodeId>> server_nics;
  for (const Server& s : t.servers()) {
    std::vector<NodeId> ids;
    std::vector<std::string> missing;
    for (const std::string& nic : nics) {
      const NodeId id = t.find(s.name + "/" + nic);
      if (id == kNoNode)
        missing.push_back(nic);
      else
        ids.push_back(id);
    }
    if (ids.empty()) continue;  // a server without fabric NICs stays off the fabric
    if (!missing.empty()) {
      r.error("nics", fmt::format("server \"{}\" has some of the fabric's NICs but not \"{}/{}\"; "
                                  "every attached server needs all of them",
                                  s.name, s.name, missing.front()));
      ok = false;
      continue;
    }
    server_nics.push_back(std::move(ids));
  }
  if (server_nics.empty()) {
    r.error("nics", fmt::format("no server has a node named \"<server>/{}\"; the fabric attaches "
                                "the NICs named in \"nics\" in every server",
                                nics.empty() ? std::string() : nics.front()));
    return;
  }
  if (!ok) return;

  const std::size_t spl = static_cast<std::size_t>(*per_leaf);
  const std::size_t groups = (server_nics.size() + spl - 1) / spl;
  const std::size_t rails = rail ? nics.size() : 1;
  const std::size_t leaves = groups * rails;
  const std::size_t num_spines = static_cast<std::size_t>(spines.value_or(0));
  if (leaves > 1 && num_spines == 0) {
    r.error("spines", fmt::format("the fabric has {} leaf switches, which need spines to reach "
                                  "each other; set \"spines\" to 1 or more",
                                  leaves));
    return;
  }
  double uplink_bandwidth = up.bandwidth;
  if (ratio) {
    if (r.get("uplink") != nullptr && r.get("uplink")->contains("bandwidth")) {
      r.error("oversubscription",
              "give either \"oversubscription\" or \"uplink\".\"bandwidth\", "
              "not both: each determines the other");
      return;
    }
    if (down.bandwidth == kUnlimited) {
      r.error("oversubscription",
              "needs \"nic_link\".\"bandwidth\" to derive the uplink "
              "bandwidth; add it");
      return;
    }
    if (num_spines == 0) {
      r.error("oversubscription", "has no effect without spines; remove it or add \"spines\"");
      return;
    }
    // A leaf's uplinks carry its downlink capacity divided by the ratio, split over the spines.
    const double downlinks = static_cast<double>(rail ? spl : spl * nics.size());
    uplink_bandwidth = downlinks * down.bandwidth / (*ratio * static_cast<double>(num_spines));
    if (!(uplink_bandwidth <= kMaxBandwidth)) {
      r.error("oversubscription", fmt::format("gives an uplink bandwidth of {}, above the "
                                              "supported maximum; use a larger ratio",
                                              format_bandwidth(uplink_bandwidth)));
      return;
    }
  }

  const NodeOrigin origin{NodeOrigin::Section::fabric, 0};
  const auto add_switch = [&](std::string name) -> NodeId {
    if (const NodeId other = t.find(name); other != kNoNode) {
      sink.error("/fabric", fmt::format("the fabric's switch \"{}\" clashes with the node of the "
                                        "same name at {}; rename one (\"name\" sets the prefix)",
                                        name, state.where(other)));
      return kNoNode;
    }
    Node n;
    n.name = std::move(name);
    n.kind = NodeKind::network_switch;
    return state.add_node(std::move(n), origin);
  };
  const int gw = digits(groups), rw = digits(rails), sw = digits(num_spines);
  std::vector<NodeId> leaf_ids;
  leaf_ids.reserve(leaves);
  for (std::size_t g = 0; g < groups; ++g)
    for (std::size_t k = 0; k < rails; ++k) {
      const std::string name = rail ? fmt::format("{}/rail{:0{}}/leaf{:0{}}", prefix, k, rw, g, gw)
                                    : fmt::format("{}/leaf{:0{}}", prefix, g, gw);
      leaf_ids.push_back(add_switch(name));
      if (leaf_ids.back() == kNoNode) return;
    }
  std::vector<NodeId> spine_ids;
  for (std::size_t s = 0; s < num_spines; ++s) {
    spine_ids.push_back(add_switch(fmt::format("{}/spine{:0{}}", prefix, s, sw)));
    if (spine_ids.back() == kNoNode) return;
  }
  for (std::size_t j = 0; j < server_nics.size(); ++j)
    for (std::size_t k = 0; k < server_nics[j].size(); ++k)
      state.add_link(server_nics[j][k], leaf_ids[(j / spl) * rails + (rail ? k : 0)],
                     LinkKind::network, down.bandwidth, down.latency, true);
  for (NodeId leaf : leaf_ids)
    for (NodeId spine : spine_ids)
      state.add_link(leaf, spine, LinkKind::network, uplink_bandwidth, up.latency, true);
}

}  // namespace collsim::topo
