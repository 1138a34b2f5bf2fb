#include "topology/topology.hpp"

#include "topology/error.hpp"

namespace collsim::topo {

std::string_view to_string(NodeKind k) {
  switch (k) {
    case NodeKind::gpu:
      return "gpu";
    case NodeKind::nvswitch:
      return "nvswitch";
    case NodeKind::pcie_switch:
      return "pcie_switch";
    case NodeKind::cpu:
      return "cpu";
    case NodeKind::nic:
      return "nic";
    case NodeKind::network_switch:
      return "switch";
  }
  return "?";
}

std::string_view to_string(LinkKind k) {
  switch (k) {
    case LinkKind::nvlink:
      return "nvlink";
    case LinkKind::pcie:
      return "pcie";
    case LinkKind::network:
      return "network";
    case LinkKind::cpu_interconnect:
      return "cpu_interconnect";
  }
  return "?";
}

std::string_view to_string(PathClass c) {
  switch (c) {
    case PathClass::loc:
      return "LOC";
    case PathClass::nvl:
      return "NVL";
    case PathClass::pix:
      return "PIX";
    case PathClass::pxb:
      return "PXB";
    case PathClass::phb:
      return "PHB";
    case PathClass::sys:
      return "SYS";
    case PathClass::net:
      return "NET";
  }
  return "?";
}

Topology::Topology() = default;
Topology::~Topology() = default;
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;
Topology::Topology(const Topology& other) = default;
Topology& Topology::operator=(const Topology& other) = default;

const Topology::Graph& Topology::graph() const {
  const std::lock_guard lock(graph_.mutex);
  if (!graph_.graph) {
    auto graph = std::make_unique<Graph>(nodes_.size());
    for (LinkId id = 0; id < links_.size(); ++id)
      boost::add_edge(links_[id].from, links_[id].to, id, *graph);
    graph_.graph = std::move(graph);
  }
  return *graph_.graph;
}

NodeId Topology::add_node(Node node) {
  const auto id = static_cast<NodeId>(nodes_.size());
  if (!index_.emplace(node.name, id).second)
    throw InternalError("Topology::add_node: duplicate node name '" + node.name + "'");
  if (node.kind == NodeKind::gpu) gpus_.push_back(id);
  nodes_.push_back(std::move(node));
  if (graph_.graph) boost::add_vertex(*graph_.graph);
  return id;
}

LinkId Topology::add_link(Link link) {
  if (link.from >= nodes_.size() || link.to >= nodes_.size())
    throw InternalError("Topology::add_link: endpoint is not a node");
  const auto id = static_cast<LinkId>(links_.size());
  if (graph_.graph) boost::add_edge(link.from, link.to, id, *graph_.graph);
  links_.push_back(link);
  return id;
}

std::int32_t Topology::add_server(Server server) {
  servers_.push_back(std::move(server));
  return static_cast<std::int32_t>(servers_.size() - 1);
}

std::int32_t Topology::add_rack(Rack rack) {
  racks_.push_back(std::move(rack));
  return static_cast<std::int32_t>(racks_.size() - 1);
}

NodeId Topology::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? kNoNode : it->second;
}

NodeId Topology::host_cpu(NodeId gpu) const {
  return gpu < host_cpu_.size() ? host_cpu_[gpu] : kNoNode;
}

}  // namespace collsim::topo
