#include "topology/routing.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <compare>
#include <limits>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "topology/adjacency.hpp"
#include "topology/cell_routing.hpp"
#include "topology/error.hpp"

namespace collsim::topo {
namespace {

using detail::Candidate;
using detail::extend;
using detail::hop_hash;
using detail::Label;
using detail::mix;
using detail::pair_key;

struct HeapEntry {
  Label label;
  NodeId node;
  // std::push_heap builds a max-heap; invert so that the smallest label is on top.
  bool operator<(const HeapEntry& o) const { return o.label < label; }
};

// Per-search working memory, reused across queries; reset touches only what a search touched.
struct Scratch {
  std::vector<Label> label;
  std::vector<NodeId> touched;
  std::vector<HeapEntry> heap;
  explicit Scratch(std::size_t nodes) : label(nodes) {}
  void reset() {
    for (NodeId n : touched) label[n] = Label{};
    touched.clear();
    heap.clear();
  }
};

// A destination's complete distance labels, and for each node the link the deterministic
// (non-ECMP) route takes next, so that walks towards a popular destination cost one step per hop.
struct Table {
  std::vector<Label> label;
  std::vector<LinkId> next;
};

}  // namespace

PathClass classify(const Topology& topology, const std::vector<LinkId>& links) {
  if (links.empty()) return PathClass::loc;
  bool network = false, cpu_link = false, pcie = false;
  int cpus = 0, pcie_switches = 0;
  const auto count = [&](NodeId n) {
    const NodeKind k = topology.node(n).kind;
    if (k == NodeKind::cpu) ++cpus;
    if (k == NodeKind::pcie_switch) ++pcie_switches;
  };
  count(topology.link(links.front()).from);
  for (LinkId id : links) {
    const Link& l = topology.link(id);
    network |= l.kind == LinkKind::network;
    cpu_link |= l.kind == LinkKind::cpu_interconnect;
    pcie |= l.kind == LinkKind::pcie;
    count(l.to);
  }
  if (network) return PathClass::net;
  if (cpu_link || cpus >= 2) return PathClass::sys;
  if (cpus == 1) return PathClass::phb;
  if (pcie_switches >= 2) return PathClass::pxb;
  if (pcie || pcie_switches == 1) return PathClass::pix;
  return PathClass::nvl;
}

struct Router::Cache {
  const Topology& topology;
  Adjacency out;
  std::vector<std::uint64_t> link_ps;
  // The links entering each node as (source node, latency) pairs, in `in` order: the search
  // reads them contiguously instead of through each link's record.
  struct InEdge {
    NodeId from;
    std::uint64_t ps;
  };
  std::vector<std::uint32_t> in_begin;
  std::vector<InEdge> in_edges;
  std::vector<std::uint32_t> name_rank;  // position of each node in name order

  static constexpr std::size_t kShards = 64;
  struct PlainRoute {
    std::unique_ptr<Route> route;
    // ECMP found no hop with a choice between the pair's ends: this is its route for every flow
    // key, which need not be routed again.
    bool only = false;
  };
  struct PlainShard {
    std::shared_mutex mutex;
    std::unordered_map<std::uint64_t, PlainRoute> routes;
  };
  struct FlowKey {
    std::uint64_t pair, flow;
    bool operator==(const FlowKey&) const = default;
  };
  struct FlowKeyHash {
    std::size_t operator()(const FlowKey& k) const { return mix(k.pair ^ mix(k.flow)); }
  };
  struct FlowShard {
    std::shared_mutex mutex;
    std::unordered_map<FlowKey, std::unique_ptr<Route>, FlowKeyHash> routes;
  };
  std::unique_ptr<PlainShard[]> plain{new PlainShard[kShards]};
  std::unique_ptr<FlowShard[]> flows{new FlowShard[kShards]};

  // Complete distance tables per destination, published once and never changed afterwards.
  std::unique_ptr<std::atomic<const Table*>[]> tables;
  std::unique_ptr<std::atomic<std::uint64_t>[]> search_work;  // nodes settled per destination
  std::atomic<std::size_t> table_bytes{0};
  std::size_t table_limit;
  std::mutex table_owner_mutex;
  std::vector<std::unique_ptr<Table>> table_owner;

  std::mutex scratch_mutex;
  std::vector<std::unique_ptr<Scratch>> scratch_pool;

  std::unique_ptr<detail::CellRouting> cells;

  Cache(const Topology& t, std::size_t limit, RoutingMethod method)
      : topology(t),
        out(t, Adjacency::Direction::out),
        link_ps(t.num_links()),
        name_rank(t.num_nodes()),
        tables(new std::atomic<const Table*>[t.num_nodes()]),
        search_work(new std::atomic<std::uint64_t>[t.num_nodes()]),
        table_limit(limit) {
    for (LinkId id = 0; id < t.num_links(); ++id)
      link_ps[id] = static_cast<std::uint64_t>(std::llround(t.link(id).latency * 1e12));
    in_begin.reserve(t.num_nodes() + 1);
    in_edges.reserve(t.num_links());
    const Adjacency in(t, Adjacency::Direction::in);
    for (NodeId n = 0; n < t.num_nodes(); ++n) {
      in_begin.push_back(static_cast<std::uint32_t>(in_edges.size()));
      for (LinkId id : in.of(n)) in_edges.push_back(InEdge{t.link(id).from, link_ps[id]});
    }
    in_begin.push_back(static_cast<std::uint32_t>(in_edges.size()));
    const std::vector<NodeId> order = nodes_by_name(t);
    for (std::uint32_t i = 0; i < order.size(); ++i) name_rank[order[i]] = i;
    for (std::size_t i = 0; i < t.num_nodes(); ++i) {
      tables[i].store(nullptr, std::memory_order_relaxed);
      search_work[i].store(0, std::memory_order_relaxed);
    }
    if (method == RoutingMethod::search) return;
    if (method == RoutingMethod::automatic && t.servers().size() < 2) return;
    std::string why;
    cells = detail::CellRouting::build(t, out, link_ps, name_rank, limit, why);
    if (!cells && method == RoutingMethod::cells)
      throw InputError("", "", "routing by cells is not possible here: " + why);
    if (cells && method == RoutingMethod::automatic && cells->cells() < 2) cells.reset();
  }

  std::unique_ptr<Scratch> acquire() {
    {
      std::lock_guard lock(scratch_mutex);
      if (!scratch_pool.empty()) {
        auto s = std::move(scratch_pool.back());
        scratch_pool.pop_back();
        return s;
      }
    }
    return std::make_unique<Scratch>(topology.num_nodes());
  }
  void release(std::unique_ptr<Scratch> s) {
    s->reset();
    std::lock_guard lock(scratch_mutex);
    scratch_pool.push_back(std::move(s));
  }

  // Backward Dijkstra from `to`. With `from` != kNoNode it stops once every node closer to `to`
  // than `from` is settled: that is all the walk from `from` needs. Returns the nodes settled.
  std::uint64_t search(Scratch& s, NodeId to, NodeId from) const {
    s.label[to] = Label{0, 0};
    s.touched.push_back(to);
    s.heap.push_back({s.label[to], to});
    return resume(s, from);
  }
  // Carries on a search stopped early: towards a farther `from`, or to the end (kNoNode).
  std::uint64_t resume(Scratch& s, NodeId from) const {
    std::uint64_t settled = 0;
    while (!s.heap.empty()) {
      if (from != kNoNode && s.label[from].finite() && !(s.heap.front().label < s.label[from]))
        break;
      std::pop_heap(s.heap.begin(), s.heap.end());
      const HeapEntry e = s.heap.back();
      s.heap.pop_back();
      if (s.label[e.node] < e.label) continue;  // stale entry
      ++settled;
      for (std::uint32_t i = in_begin[e.node]; i < in_begin[e.node + 1]; ++i) {
        const NodeId v = in_edges[i].from;
        const Label nl = extend(e.label, in_edges[i].ps);
        if (nl < s.label[v]) {
          if (!s.label[v].finite()) s.touched.push_back(v);
          s.label[v] = nl;
          s.heap.push_back({nl, v});
          std::push_heap(s.heap.begin(), s.heap.end());
        }
      }
    }
    return settled;
  }

  // Follows equal-cost links from `from` down the distance labels to `to`. Sets `chose` when
  // some hop had more than one equal-cost link (ECMP had a choice to make).
  // The next link from `u` towards the destination whose labels are `label`; with ECMP, picked
  // by hash among the equal-cost ones, else the first by (next node name, link id).
  LinkId next_link(const Label* label, NodeId u, bool ecmp, std::uint64_t hash,
                   std::vector<Candidate>& candidates, bool& chose) const {
    candidates.clear();
    Candidate best{std::numeric_limits<std::uint32_t>::max(), 0, kNoNode};
    std::size_t count = 0;
    const Label want = label[u];
    for (LinkId id : out.of(u)) {
      const NodeId v = topology.link(id).to;
      if (!label[v].finite() || extend(label[v], link_ps[id]) != want) continue;
      const Candidate c{name_rank[v], id, v};
      ++count;
      if (c < best) best = c;
      if (ecmp) candidates.push_back(c);
    }
    if (count == 0)
      throw InternalError("Router: no next hop on a shortest path from '" + topology.node(u).name +
                          "'");
    if (count > 1 && ecmp) {
      std::sort(candidates.begin(), candidates.end());
      chose = true;
      best = candidates[hash % count];
    }
    return best.link;
  }

  // Follows equal-cost links from `from` down the distance labels to `to`. Sets `chose` when
  // some hop had more than one equal-cost link (ECMP had a choice to make).
  Route walk(const Label* label, const LinkId* next, NodeId from, NodeId to, bool ecmp,
             std::uint64_t flow_key, bool& chose) const {
    Route r;
    chose = false;
    std::vector<Candidate> candidates;
    NodeId u = from;
    for (std::uint32_t hop = 0; u != to; ++hop) {
      const LinkId id =
          next != nullptr && !ecmp
              ? next[u]
              : next_link(label, u, ecmp, hop_hash(flow_key, from, to, hop), candidates, chose);
      const Link& l = topology.link(id);
      r.links.push_back(id);
      r.latency += l.latency;
      r.bandwidth = std::min(r.bandwidth, l.bandwidth);
      u = l.to;
    }
    r.path_class = classify(topology, r.links);
    return r;
  }

  [[noreturn]] void unreachable(NodeId from, NodeId to) const {
    throw InputError("", "",
                     "no route from '" + topology.node(from).name + "' to '" +
                         topology.node(to).name +
                         "': no chain of links joins them in that direction; add the missing "
                         "links (or make a link duplex)");
  }

  Route compute(NodeId from, NodeId to, bool ecmp, std::uint64_t flow_key, bool& chose) {
    if (from >= topology.num_nodes() || to >= topology.num_nodes())
      throw InternalError("Router: node id out of range");
    if (cells) {
      if (from == to) return Route{};
      auto r = cells->compute(from, to, ecmp, flow_key, chose);
      if (!r) unreachable(from, to);
      return std::move(*r);
    }
    if (const Table* table = tables[to].load(std::memory_order_acquire)) {
      if (!table->label[from].finite()) unreachable(from, to);
      return walk(table->label.data(), table->next.data(), from, to, ecmp, flow_key, chose);
    }
    auto scratch = acquire();
    const std::uint64_t work = search(*scratch, to, from);
    if (!scratch->label[from].finite()) {
      release(std::move(scratch));
      unreachable(from, to);
    }
    Route r = walk(scratch->label.data(), nullptr, from, to, ecmp, flow_key, chose);
    // Once the early-stopping searches towards `to` have cost half a complete one, this search
    // carries on to the end and becomes the destination's table: the rest costs at most as much
    // again, so any query pattern stays within twice the best, and a destination queried from
    // far away a few times (a tree's parent and children) costs one search instead of three.
    const std::uint64_t total = search_work[to].fetch_add(work) + work;
    if (2 * total >= topology.num_nodes()) build_table(to, *scratch);
    release(std::move(scratch));
    return r;
  }

  // `scratch` holds a search towards `to`, stopped early or not; it is finished here.
  void build_table(NodeId to, Scratch& scratch) {
    const std::size_t bytes = topology.num_nodes() * (sizeof(Label) + sizeof(LinkId));
    if (table_bytes.fetch_add(bytes) + bytes > table_limit) {
      table_bytes.fetch_sub(bytes);
      return;
    }
    resume(scratch, kNoNode);
    auto table = std::make_unique<Table>();
    table->label = scratch.label;
    table->next.assign(topology.num_nodes(), 0);
    std::vector<Candidate> candidates;
    bool chose = false;
    for (NodeId u = 0; u < topology.num_nodes(); ++u)
      if (u != to && table->label[u].finite())
        table->next[u] = next_link(table->label.data(), u, false, 0, candidates, chose);
    const Table* expected = nullptr;
    if (tables[to].compare_exchange_strong(expected, table.get(), std::memory_order_acq_rel)) {
      std::lock_guard lock(table_owner_mutex);
      table_owner.push_back(std::move(table));
    } else {
      table_bytes.fetch_sub(bytes);  // another thread published it first
    }
  }
};

Router::Router(const Topology& topology, RoutingOptions options)
    : topology_(topology),
      options_(options),
      cache_(new Cache(topology, options.table_memory, options.method)) {}

Router::~Router() {
  delete cache_;
}

const Route& Router::route(NodeId from, NodeId to) const {
  const std::uint64_t key = pair_key(from, to);
  auto& shard = cache_->plain[mix(key) % Cache::kShards];
  {
    std::shared_lock lock(shard.mutex);
    if (auto it = shard.routes.find(key); it != shard.routes.end()) return *it->second.route;
  }
  bool chose = false;
  auto r = std::make_unique<Route>(cache_->compute(from, to, false, 0, chose));
  std::unique_lock lock(shard.mutex);
  // If another thread stored it meanwhile, keep theirs: references already handed out stay valid.
  auto [it, inserted] = shard.routes.try_emplace(key, Cache::PlainRoute{std::move(r)});
  return *it->second.route;
}

const Route& Router::route(NodeId from, NodeId to, std::uint64_t flow_key) const {
  if (!options_.ecmp) return route(from, to);
  const Cache::FlowKey key{pair_key(from, to), flow_key};
  // A walk that met no choice took the pair's only shortest path, whatever the key: whether a
  // hop offers a choice does not depend on the key, and the hops before the first such hop do
  // not either.
  auto& plain = cache_->plain[mix(key.pair) % Cache::kShards];
  {
    std::shared_lock lock(plain.mutex);
    if (auto it = plain.routes.find(key.pair); it != plain.routes.end() && it->second.only)
      return *it->second.route;
  }
  auto& shard = cache_->flows[Cache::FlowKeyHash{}(key) % Cache::kShards];
  {
    std::shared_lock lock(shard.mutex);
    if (auto it = shard.routes.find(key); it != shard.routes.end()) return *it->second;
  }
  bool chose = false;
  Route r = cache_->compute(from, to, true, flow_key, chose);
  // Most pairs have a single shortest path; they share the plain entry instead of one per key.
  if (!chose) {
    const Route& only = route(from, to);
    std::unique_lock lock(plain.mutex);
    plain.routes.find(key.pair)->second.only = true;
    return only;
  }
  std::unique_lock lock(shard.mutex);
  auto [it, inserted] = shard.routes.try_emplace(key, std::make_unique<Route>(std::move(r)));
  return *it->second;
}

Route Router::compute(NodeId from, NodeId to, std::uint64_t flow_key) const {
  bool chose = false;
  return cache_->compute(from, to, options_.ecmp, flow_key, chose);
}

}  // namespace collsim::topo
