#pragma once
// The hardware graph: GPUs, switches, CPUs and NICs joined by directed links.
//
// Nodes and links live in flat vectors indexed by NodeId and LinkId; that is what the engine's hot
// loop and the routing read. The same ids form a Boost.Graph (vertex index = NodeId, edge property
// = LinkId) for graph algorithms of a caller's own. It is built on the first call to graph(), not
// while loading: its list node per edge cost 1.5 G instructions to build and free on a 131,072-GPU
// cluster, which routing (adjacency.hpp, cell_routing.hpp) never reads.
//
// Every cost parameter is optional. An absent one costs nothing (kUnlimited bandwidth, zero
// latency, unlimited copy engines), so a bare file is an exact twin of a textbook alpha-beta
// model. Realistic values live in configs/ and in calibration files, never in code.
#include <array>
#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "topology/units.hpp"

namespace collsim::topo {

using NodeId = std::uint32_t;
using LinkId = std::uint32_t;
inline constexpr NodeId kNoNode = ~NodeId{0};
inline constexpr std::int32_t kNone = -1;

enum class NodeKind : std::uint8_t { gpu, nvswitch, pcie_switch, cpu, nic, network_switch };
enum class LinkKind : std::uint8_t { nvlink, pcie, network, cpu_interconnect };

// NCCL's path classes, from closest to farthest: NVLink only; through at most one PCIe switch;
// through several PCIe switches; through a CPU's host bridge; across CPUs; across the network.
enum class PathClass : std::uint8_t { loc, nvl, pix, pxb, phb, sys, net };

std::string_view to_string(NodeKind k);   // "gpu", "nvswitch", ..., "switch"
std::string_view to_string(LinkKind k);   // "nvlink", "pcie", "network", "cpu_interconnect"
std::string_view to_string(PathClass c);  // "LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "NET"

struct Node {
  std::string name;
  NodeKind kind = NodeKind::gpu;
  std::int32_t server = kNone;  // index into Topology::servers(), kNone if not in a server
  std::int32_t rack = kNone;    // index into Topology::racks(), kNone if not in a rack
  std::string model;            // free text, e.g. "H100-SXM5-80GB"; matched by calibration files

  // GPU parameters.
  double memory_bandwidth = kUnlimited;  // bytes/s of HBM/GDDR traffic (reads + writes)
  std::uint32_t copy_engines = 0;        // concurrent copies; 0 means unlimited
  double alpha = 0;                      // seconds of software start-up per transfer sent
  double launch_latency = 0;             // seconds per kernel launch (reductions)
  // Bytes of memory traffic a reduction is charged per byte it reduces, by element type in the
  // order of sched::DType (fp32, fp16, bf16): 3 for a kernel at memory speed (two operands read,
  // one result written), more for one slower than memory (calibrated from its reduce_* fit).
  std::array<double, 3> reduce_traffic = {3, 3, 3};
  // Seconds for one stream to see another's work finish (an event recorded there and waited on
  // here): paid by every edge of a plan whose two ends run on different streams.
  double event_latency = 0;
  // A virtual rank sharing a physical device's memory with other ranks names the node whose
  // memory it uses; kNoNode means its own.
  NodeId memory_owner = kNoNode;

  // CPU parameters.
  double memcpy_bandwidth = kUnlimited;  // bytes/s of host memcpy
  // Bytes of memcpy traffic a copy to (d2h) and from (h2d) a pageable host buffer is charged per
  // byte it moves, since the driver stages each byte through a pinned buffer: 1 for staging at
  // the speed of a host memcpy, less where the driver's staging outruns it (calibrated from the
  // d2h_pageable and h2d_pageable fits).
  std::array<double, 2> pageable_traffic = {1, 1};
};

// One direction of a physical link. A duplex link in a file becomes two Links with the same
// `source_index`.
struct Link {
  NodeId from = kNoNode;
  NodeId to = kNoNode;
  LinkKind kind = LinkKind::pcie;
  double bandwidth = kUnlimited;   // bytes/s in this direction
  double latency = 0;              // seconds
  std::uint32_t source_index = 0;  // position of the link in the (expanded) file, for messages
};

struct Server {
  std::string name;
  std::int32_t rack = kNone;
  bool p2p = true;             // GPU peer-to-peer (NVLink or PCIe) between this server's GPUs
  bool gpudirect_rdma = true;  // NICs read and write GPU memory directly
};

struct Rack {
  std::string name;
};

class Topology {
 public:
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS,
                                      boost::no_property, LinkId>;

  Topology();
  ~Topology();
  // Copies are deep; neither a copy nor a move carries the Boost graph, which the new object
  // builds again if asked.
  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;
  Topology(const Topology& other);
  Topology& operator=(const Topology& other);

  // Building. The loader uses these; tests and generators may too. Names must be unique
  // (add_node throws InternalError on a duplicate; the loader reports duplicates before that).
  NodeId add_node(Node node);
  LinkId add_link(Link link);  // one direction
  std::int32_t add_server(Server server);
  std::int32_t add_rack(Rack rack);
  void set_name(std::string name) { name_ = std::move(name); }

  const std::string& name() const { return name_; }
  std::size_t num_nodes() const { return nodes_.size(); }
  std::size_t num_links() const { return links_.size(); }
  const Node& node(NodeId id) const { return nodes_[id]; }
  Node& node(NodeId id) { return nodes_[id]; }
  const Link& link(LinkId id) const { return links_[id]; }
  Link& link(LinkId id) { return links_[id]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Link>& links() const { return links_; }
  const std::vector<Server>& servers() const { return servers_; }
  const std::vector<Rack>& racks() const { return racks_; }
  // Built on the first call (safe from several threads); kept up to date by add_node and add_link
  // after that, so a reference stays valid while the topology lives.
  const Graph& graph() const;
  const Server& server(std::int32_t id) const { return servers_[static_cast<std::size_t>(id)]; }
  const Rack& rack(std::int32_t id) const { return racks_[static_cast<std::size_t>(id)]; }

  // GPUs in the order they appear in the file; rank i of a plan defaults to gpus()[i].
  const std::vector<NodeId>& gpus() const { return gpus_; }
  NodeId find(std::string_view name) const;  // kNoNode if absent; O(1)

  // The CPU whose host memory stages this GPU's copies: the nearest CPU by route latency.
  // kNoNode if the GPU reaches no CPU (then host staging is impossible).
  NodeId host_cpu(NodeId gpu) const;

 private:
  std::string name_;
  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<Server> servers_;
  std::vector<Rack> racks_;
  std::vector<NodeId> gpus_;
  std::vector<NodeId> host_cpu_;  // per node, filled by finalize()
  // The Boost graph once asked for. Copying or moving a topology leaves the target's empty.
  struct LazyGraph {
    LazyGraph() = default;
    LazyGraph(const LazyGraph&) {}
    LazyGraph(LazyGraph&&) noexcept {}
    LazyGraph& operator=(const LazyGraph&) {
      graph.reset();
      return *this;
    }
    LazyGraph& operator=(LazyGraph&&) noexcept {
      graph.reset();
      return *this;
    }
    std::mutex mutex;
    std::unique_ptr<Graph> graph;
  };
  mutable LazyGraph graph_;
  // Only looked up, never iterated, so its order cannot leak into outputs.
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, NodeId, NameHash, std::equal_to<>> index_;
  friend void finalize(Topology&);
};

// Computes derived data once building is over; the loader calls it, and so must anyone who
// builds a Topology by hand before asking for host_cpu(). The host CPU of a GPU is the CPU with
// the shortest route from the GPU by latency, then hop count, then CPU name (routing.hpp).
void finalize(Topology& topology);

// Every node id in the order of the nodes' names, compared byte by byte as std::string's `<`.
std::vector<NodeId> nodes_by_name(const Topology& topology);

}  // namespace collsim::topo
