#include "topology/dot.hpp"

#include <fmt/format.h>

namespace collsim::topo {
namespace {

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string_view shape(NodeKind k) {
  switch (k) {
    case NodeKind::gpu:
      return "box";
    case NodeKind::nvswitch:
      return "hexagon";
    case NodeKind::pcie_switch:
      return "diamond";
    case NodeKind::cpu:
      return "box3d";
    case NodeKind::nic:
      return "ellipse";
    case NodeKind::network_switch:
      return "octagon";
  }
  return "ellipse";
}

std::string link_label(const Link& l) {
  std::string label(to_string(l.kind));
  if (l.bandwidth != kUnlimited) label += "\\n" + format_bandwidth(l.bandwidth);
  if (l.latency != 0) label += "\\n" + format_duration(l.latency);
  return label;
}

}  // namespace

void write_dot(const Topology& t, std::ostream& out) {
  out << "digraph " << quote(t.name()) << " {\n  graph [rankdir=TB];\n  node [fontsize=10];\n"
      << "  edge [fontsize=8];\n";
  const auto write_node = [&](NodeId id, std::string_view indent) {
    const Node& n = t.node(id);
    out << indent << quote(n.name) << " [shape=" << shape(n.kind)
        << ", label=" << quote(n.model.empty() ? n.name : n.name + "\\n" + n.model) << "];\n";
  };
  // Nodes of one server in one cluster: servers in order, then nodes outside any server.
  std::vector<std::vector<NodeId>> by_server(t.servers().size());
  for (NodeId id = 0; id < t.num_nodes(); ++id)
    if (t.node(id).server != kNone)
      by_server[static_cast<std::size_t>(t.node(id).server)].push_back(id);
  for (std::size_t s = 0; s < by_server.size(); ++s) {
    out << "  subgraph " << quote("cluster_" + std::to_string(s))
        << " {\n    label=" << quote(t.servers()[s].name) << ";\n";
    for (NodeId id : by_server[s]) write_node(id, "    ");
    out << "  }\n";
  }
  for (NodeId id = 0; id < t.num_nodes(); ++id)
    if (t.node(id).server == kNone) write_node(id, "  ");
  // A duplex link is two Links with the same source_index, added one after the other.
  for (LinkId id = 0; id < t.num_links(); ++id) {
    const Link& l = t.link(id);
    const bool duplex = id + 1 < t.num_links() && t.link(id + 1).source_index == l.source_index &&
                        t.link(id + 1).from == l.to && t.link(id + 1).to == l.from;
    out << "  " << quote(t.node(l.from).name) << " -> " << quote(t.node(l.to).name)
        << " [label=" << quote(link_label(l)) << (duplex ? ", dir=none" : "") << "];\n";
    if (duplex) ++id;
  }
  out << "}\n";
}

}  // namespace collsim::topo
