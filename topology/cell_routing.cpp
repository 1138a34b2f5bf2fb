#include "topology/cell_routing.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "topology/error.hpp"
#include "topology/radix_queue.hpp"

namespace collsim::topo::detail {
namespace {

struct HeapEntry {
  Label label;
  std::uint32_t index;
  bool operator<(const HeapEntry& o) const { return o.label < label; }  // min-heap
};

constexpr std::uint64_t kMaxTotalPs = std::uint64_t{1} << 62;

// A core table: the distances to one core node, packed (CellRouting::Impl::pack()).
using CoreTable = std::vector<std::uint64_t>;

}  // namespace

struct CellRouting::Impl {
  const Topology& topology;
  const Adjacency& out;
  const Adjacency in;
  std::span<const std::uint64_t> ps;
  std::span<const std::uint32_t> name_rank;

  // Each node's cell: its server, or the group of servers links join it to; kNone in the core.
  std::vector<std::int32_t> cell_of;
  std::size_t cells = 0;
  // Each node's position among its cell's nodes, or among the core nodes.
  std::vector<std::uint32_t> local;
  // Per cell: its nodes, the links leaving it (exits) and entering it (entries), each a range
  // of one flat array, in id order.
  std::vector<std::uint32_t> node_begin, exit_begin, entry_begin;
  std::vector<NodeId> cell_nodes;
  std::vector<LinkId> exits, entries;
  // leave[leave_begin[c] + v * exits(c) + i]: the cheapest way from node v of cell c out over
  // its exit i, inside c, exit link included.
  std::vector<std::size_t> leave_begin;
  std::vector<Label> leave;

  std::vector<NodeId> core;
  // Each core node's out-links, in `out` order, with what next_towards() reads of them: a spine
  // has a link to every leaf, and each of its next-link lists reads them all.
  struct CoreLink {
    LinkId link;
    NodeId to;
    std::uint32_t to_core;  // the head's core index, or kNotCore (a self-loop's too)
    std::uint64_t ps;
    std::uint64_t step;  // packed (ps, 1 hop), for a core head: a core arc, within pack()'s bounds
  };
  static constexpr std::uint32_t kNotCore = ~std::uint32_t{0};
  std::vector<std::uint32_t> core_out_begin;
  std::vector<CoreLink> core_out;
  // Core distances packed in one word, picoseconds above `hop_bits` bits of hops, so that the
  // word's order is the label's and a sum of words is the word of the sum: build() checks that
  // every distance of the core graph, and every label a search tries, fits. A table then takes
  // half the memory (130 MiB at 131,072 GPUs), and its search compares and adds one word per arc.
  unsigned hop_bits = 0;
  static constexpr std::uint64_t kFar = ~std::uint64_t{0};  // unreached
  std::uint64_t pack(Label l) const { return l.ps << hop_bits | l.hops; }
  Label unpack(std::uint64_t w) const {
    if (w == kFar) return Label{};
    return {w >> hop_bits, static_cast<std::uint32_t>(w & ((std::uint64_t{1} << hop_bits) - 1))};
  }
  using Table = CoreTable;
  // The core graph, its arcs grouped by head, as columns: arc a joins arc_from[a] to its head
  // at a cost of arc_cost[a] (packed). A table's search reads them in order, every arc of every
  // core node, once per table.
  std::vector<std::uint32_t> arc_begin;
  std::vector<std::uint32_t> arc_from;
  std::vector<std::uint64_t> arc_cost;
  // Twins: core nodes with the same arcs in (from the same nodes at the same costs), numbered
  // by class, kNotTwin for a node with none. Once a search has settled one of a class, the
  // others settle no lower and their arcs can lower no label: the search skips them. The 16
  // spines of a rail-optimised fabric are twins, each with an arc from each of 4,096 leaves:
  // 38 % of a table's arcs.
  static constexpr std::uint32_t kNotTwin = ~std::uint32_t{0};
  std::vector<std::uint32_t> twin_class;
  std::uint32_t twin_classes = 0;
  // Twins by their links out (to the same nodes at the same latencies, in the same order), by
  // class: at the same distance from a target, the same positions of their lists are tight, and
  // next_towards() scans one spine's 4,096 links for each target instead of every spine's.
  std::vector<std::uint32_t> out_twin_class;

  // D(., t) for core target t, packed, built on first use and never changed afterwards.
  std::unique_ptr<std::atomic<const Table*>[]> dist;
  mutable std::mutex dist_owner_mutex;
  mutable std::vector<std::unique_ptr<Table>> dist_owner;
  // Tables and next-link lists are kept while they fit; past it each is rebuilt when needed.
  std::size_t memory_limit = 0;
  mutable std::atomic<std::size_t> memory_used{0};

  // The equal-cost links from core node u towards core node t, in Candidate order.
  static constexpr std::size_t kShards = 64;
  struct NextShard {
    std::shared_mutex mutex;
    std::unordered_map<std::uint64_t, std::vector<Candidate>> next;
  };
  std::unique_ptr<NextShard[]> next_shards{new NextShard[kShards]};
  // The tight positions of an out-twin class's lists towards core node t, for its members at
  // distance `at` from t.
  struct Tight {
    std::uint64_t at;
    std::vector<std::uint32_t> positions;
  };
  struct TightShard {
    std::shared_mutex mutex;
    std::unordered_map<std::uint64_t, Tight> tight;
  };
  std::unique_ptr<TightShard[]> tight_shards{new TightShard[kShards]};

  Impl(const Topology& t, const Adjacency& o, std::span<const std::uint64_t> p,
       std::span<const std::uint32_t> r)
      : topology(t), out(o), in(t, Adjacency::Direction::in), ps(p), name_rank(r) {}

  std::int32_t cell(NodeId n) const { return cell_of[n]; }
  bool in_core(NodeId n) const { return cell(n) == kNone; }
  std::span<const NodeId> nodes_of(std::size_t c) const {
    return {cell_nodes.data() + node_begin[c], cell_nodes.data() + node_begin[c + 1]};
  }
  std::span<const LinkId> exits_of(std::size_t c) const {
    return {exits.data() + exit_begin[c], exits.data() + exit_begin[c + 1]};
  }
  std::span<const LinkId> entries_of(std::size_t c) const {
    return {entries.data() + entry_begin[c], entries.data() + entry_begin[c + 1]};
  }
  const Label* leave_row(NodeId v) const {
    const auto c = static_cast<std::size_t>(cell(v));
    return leave.data() + leave_begin[c] + std::size_t{local[v]} * exits_of(c).size();
  }

  // Cells alike inside (the servers of one template: as many nodes, the same links between the
  // same positions at the same latencies) are at the same distances inside, by position. Each class
  // of two cells or more keeps them for every pair of its nodes, inside[target * nodes + v], where
  // they fit the memory limit; other cells search again for each route that needs them.
  std::vector<std::uint32_t> cell_class;
  std::vector<std::vector<Label>> class_inside;

  // Distances inside cell c to its node `target`, by local index: its class's, or a search's
  // into `scratch`.
  const Label* inside_of(std::size_t c, NodeId target, std::vector<Label>& scratch,
                         std::vector<HeapEntry>& heap) const {
    const std::vector<Label>& kept = class_inside[cell_class[c]];
    if (!kept.empty()) return kept.data() + std::size_t{local[target]} * nodes_of(c).size();
    inside_to(c, target, scratch, heap);
    return scratch.data();
  }

  // Distances inside cell c to its node `target`, by local index.
  void inside_to(std::size_t c, NodeId target, std::vector<Label>& label,
                 std::vector<HeapEntry>& heap) const {
    label.assign(nodes_of(c).size(), Label{});
    heap.clear();
    label[local[target]] = Label{0, 0};
    heap.push_back({label[local[target]], local[target]});
    const auto inside = static_cast<std::int32_t>(c);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end());
      const HeapEntry e = heap.back();
      heap.pop_back();
      if (label[e.index] < e.label) continue;
      for (LinkId id : in.of(nodes_of(c)[e.index])) {
        const NodeId v = topology.link(id).from;
        if (cell(v) != inside) continue;
        const Label nl = extend(e.label, ps[id]);
        if (nl < label[local[v]]) {
          label[local[v]] = nl;
          heap.push_back({nl, local[v]});
          std::push_heap(heap.begin(), heap.end());
        }
      }
    }
  }

  // Servers joined by a link share a cell, so that no link joins two cells; cells are numbered
  // in the order of their first server.
  void assign_cells() {
    const std::size_t servers = topology.servers().size();
    std::vector<std::size_t> parent(servers);
    for (std::size_t i = 0; i < servers; ++i) parent[i] = i;
    const auto root = [&](std::size_t i) {
      while (parent[i] != i) i = parent[i] = parent[parent[i]];
      return i;
    };
    for (const Link& l : topology.links()) {
      const std::int32_t a = topology.node(l.from).server, b = topology.node(l.to).server;
      if (a == kNone || b == kNone || a == b) continue;
      const std::size_t ra = root(static_cast<std::size_t>(a)),
                        rb = root(static_cast<std::size_t>(b));
      parent[std::max(ra, rb)] = std::min(ra, rb);
    }
    std::vector<std::int32_t> number(servers, kNone);
    for (std::size_t i = 0; i < servers; ++i) {
      const std::size_t r = root(i);
      if (number[r] == kNone) number[r] = static_cast<std::int32_t>(cells++);
      number[i] = number[r];
    }
    cell_of.assign(topology.num_nodes(), kNone);
    for (NodeId n = 0; n < topology.num_nodes(); ++n)
      if (topology.node(n).server != kNone)
        cell_of[n] = number[static_cast<std::size_t>(topology.node(n).server)];
  }

  void index_cells() {
    assign_cells();
    local.assign(topology.num_nodes(), 0);
    node_begin.assign(cells + 1, 0);
    exit_begin.assign(cells + 1, 0);
    entry_begin.assign(cells + 1, 0);
    for (NodeId n = 0; n < topology.num_nodes(); ++n) {
      if (in_core(n)) {
        local[n] = static_cast<std::uint32_t>(core.size());
        core.push_back(n);
      } else {
        local[n] = node_begin[static_cast<std::size_t>(cell(n)) + 1]++;
      }
    }
    for (const Link& l : topology.links()) {
      if (!in_core(l.from) && in_core(l.to))
        ++exit_begin[static_cast<std::size_t>(cell(l.from)) + 1];
      if (in_core(l.from) && !in_core(l.to))
        ++entry_begin[static_cast<std::size_t>(cell(l.to)) + 1];
    }
    for (std::size_t c = 0; c < cells; ++c) {
      node_begin[c + 1] += node_begin[c];
      exit_begin[c + 1] += exit_begin[c];
      entry_begin[c + 1] += entry_begin[c];
    }
    cell_nodes.resize(node_begin[cells]);
    exits.resize(exit_begin[cells]);
    entries.resize(entry_begin[cells]);
    for (NodeId n = 0; n < topology.num_nodes(); ++n)
      if (!in_core(n)) cell_nodes[node_begin[static_cast<std::size_t>(cell(n))] + local[n]] = n;
    std::vector<std::uint32_t> exit_fill(exit_begin.begin(), exit_begin.end() - 1);
    std::vector<std::uint32_t> entry_fill(entry_begin.begin(), entry_begin.end() - 1);
    for (LinkId id = 0; id < topology.num_links(); ++id) {
      const Link& l = topology.link(id);
      if (!in_core(l.from) && in_core(l.to))
        exits[exit_fill[static_cast<std::size_t>(cell(l.from))]++] = id;
      if (in_core(l.from) && !in_core(l.to))
        entries[entry_fill[static_cast<std::size_t>(cell(l.to))]++] = id;
    }
  }

  void classify_cells() {
    // A cell's inside: its number of nodes, and its links as (head, tail, latency) triples by
    // position, in a canonical order.
    using Links = std::vector<std::tuple<std::uint32_t, std::uint32_t, std::uint64_t>>;
    using Inside = std::pair<std::size_t, Links>;
    std::map<Inside, std::uint32_t> classes;
    std::vector<std::size_t> first_cell, members;
    cell_class.resize(cells);
    for (std::size_t c = 0; c < cells; ++c) {
      Inside inside{nodes_of(c).size(), {}};
      for (const NodeId n : nodes_of(c))
        for (LinkId id : in.of(n))
          if (cell(topology.link(id).from) == static_cast<std::int32_t>(c))
            inside.second.emplace_back(local[n], local[topology.link(id).from], ps[id]);
      std::sort(inside.second.begin(), inside.second.end());
      const auto [it, fresh] =
          classes.try_emplace(std::move(inside), static_cast<std::uint32_t>(first_cell.size()));
      if (fresh) {
        first_cell.push_back(c);
        members.push_back(0);
      }
      cell_class[c] = it->second;
      ++members[it->second];
    }
    class_inside.resize(first_cell.size());
    std::vector<Label> label;
    std::vector<HeapEntry> heap;
    for (std::size_t k = 0; k < first_cell.size(); ++k) {
      const auto nodes = nodes_of(first_cell[k]);
      if (members[k] < 2 || !reserve(nodes.size() * nodes.size() * sizeof(Label))) continue;
      class_inside[k].reserve(nodes.size() * nodes.size());
      for (const NodeId target : nodes) {
        inside_to(first_cell[k], target, label, heap);
        class_inside[k].insert(class_inside[k].end(), label.begin(), label.end());
      }
    }
  }

  void build_leave_tables() {
    leave_begin.assign(cells + 1, 0);
    for (std::size_t c = 0; c < cells; ++c)
      leave_begin[c + 1] = leave_begin[c] + nodes_of(c).size() * exits_of(c).size();
    leave.assign(leave_begin[cells], Label{});
    std::vector<Label> label;
    std::vector<HeapEntry> heap;
    for (std::size_t c = 0; c < cells; ++c) {
      const auto x = exits_of(c);
      for (std::size_t i = 0; i < x.size(); ++i) {
        const Label* inside = inside_of(c, topology.link(x[i]).from, label, heap);
        for (std::size_t v = 0; v < nodes_of(c).size(); ++v)
          if (inside[v].finite())
            leave[leave_begin[c] + v * x.size() + i] = extend(inside[v], ps[x[i]]);
      }
    }
  }

  // The core graph: core links, and for each cell one arc per (entry, exit) pair at the
  // cheapest way through it. Parallel arcs keep only the cheapest: a search needs no more.
  // False, with the reason in `why`, when its distances do not fit a packed word.
  bool build_core_graph(std::string& why) {
    struct Raw {
      std::uint32_t head, from;
      Label cost;
    };
    std::vector<Raw> raw;
    for (LinkId id = 0; id < topology.num_links(); ++id) {
      const Link& l = topology.link(id);
      if (in_core(l.from) && in_core(l.to) && l.from != l.to)
        raw.push_back({local[l.to], local[l.from], Label{ps[id], 1}});
    }
    for (std::size_t c = 0; c < cells; ++c) {
      const auto x = exits_of(c);
      for (LinkId f : entries_of(c)) {
        const Link& fl = topology.link(f);
        const Label* row = leave_row(fl.to);
        for (std::size_t i = 0; i < x.size(); ++i) {
          const NodeId z = topology.link(x[i]).to;
          if (z == fl.from || !row[i].finite()) continue;
          raw.push_back({local[z], local[fl.from], join(Label{ps[f], 1}, row[i])});
        }
      }
    }
    // Ordered by (head, from, cost): placed by head first, then sorted within each head's few
    // hundred arcs. One sort of the million arcs of a 131,072-GPU cluster cost 1.3 G instructions.
    std::vector<std::uint32_t> head_begin(core.size() + 1, 0);
    for (const Raw& r : raw) ++head_begin[r.head + 1];
    for (std::size_t k = 0; k < core.size(); ++k) head_begin[k + 1] += head_begin[k];
    {
      std::vector<Raw> by_head(raw.size());
      std::vector<std::uint32_t> next(head_begin.begin(), head_begin.end() - 1);
      for (const Raw& r : raw) by_head[next[r.head]++] = r;
      raw = std::move(by_head);
    }
    for (std::size_t k = 0; k < core.size(); ++k)
      std::sort(raw.begin() + head_begin[k], raw.begin() + head_begin[k + 1],
                [](const Raw& a, const Raw& b) {
                  return a.from != b.from ? a.from < b.from : a.cost < b.cost;
                });
    // A shortest path crosses each core node once, so its distance is at most (n - 1) times
    // the dearest arc, and a label a search tries one arc more: n times, in each field.
    std::uint64_t most_ps = 0, most_hops = 0;
    for (const Raw& r : raw) {
      most_ps = std::max(most_ps, r.cost.ps);
      most_hops = std::max<std::uint64_t>(most_hops, r.cost.hops);
    }
    // n * m < 2^(bit_width(n) + bit_width(m)); a spare bit keeps every label below kFar.
    const auto n = static_cast<std::uint64_t>(core.size());
    hop_bits = static_cast<unsigned>(std::bit_width(n) + std::bit_width(most_hops));
    const auto ps_bits = static_cast<unsigned>(std::bit_width(n) + std::bit_width(most_ps));
    if (hop_bits + ps_bits > 63) {
      why = "distances between switches may need more than 63 bits (" + std::to_string(ps_bits) +
            " of picoseconds and " + std::to_string(hop_bits) + " of hops)";
      return false;
    }
    arc_begin.assign(core.size() + 1, 0);
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (i > 0 && raw[i].head == raw[i - 1].head && raw[i].from == raw[i - 1].from) continue;
      arc_from.push_back(raw[i].from);
      arc_cost.push_back(pack(raw[i].cost));
      ++arc_begin[raw[i].head + 1];
    }
    for (std::size_t k = 0; k < core.size(); ++k) arc_begin[k + 1] += arc_begin[k];
    twin_classes = find_twins(
        arc_begin,
        [&](std::uint32_t a) {
          return std::pair{arc_from[a], arc_cost[a]};
        },
        twin_class);
    core_out_begin.assign(1, 0);
    for (const NodeId u : core) {
      for (LinkId id : out.of(u)) {
        const NodeId v = topology.link(id).to;
        const bool arc = in_core(v) && v != u;
        core_out.push_back({id, v, arc ? local[v] : kNotCore, ps[id], arc ? pack({ps[id], 1}) : 0});
      }
      core_out_begin.push_back(static_cast<std::uint32_t>(core_out.size()));
    }
    find_twins(
        core_out_begin,
        [&](std::uint32_t i) {
          return std::pair{core_out[i].to, core_out[i].ps};
        },
        out_twin_class);
    // Value-initialised: every pointer starts null.
    dist = std::make_unique<std::atomic<const Table*>[]>(core.size());
    return true;
  }

  // Twins among the core nodes with lists (arcs in, links out) of at least kTwinArcs entries:
  // shorter ones save too little to pay for the check.
  static constexpr std::uint32_t kTwinArcs = 16;
  // Numbers the classes of two core nodes or more whose lists, from `begin`, are the same entry
  // for entry (each entry two words, `words(i)`), into `classes`; kNotTwin for the others.
  // Returns how many there are.
  template <typename Words>
  std::uint32_t find_twins(const std::vector<std::uint32_t>& begin, Words words,
                           std::vector<std::uint32_t>& classes) const {
    classes.assign(core.size(), kNotTwin);
    std::map<std::vector<std::uint64_t>, std::vector<std::uint32_t>> by_list;
    for (std::uint32_t k = 0; k < core.size(); ++k) {
      if (begin[k + 1] - begin[k] < kTwinArcs) continue;
      std::vector<std::uint64_t> list;
      for (std::uint32_t i = begin[k]; i < begin[k + 1]; ++i) {
        const auto [first, second] = words(i);
        list.push_back(first);
        list.push_back(second);
      }
      by_list[std::move(list)].push_back(k);
    }
    std::uint32_t count = 0;
    for (const auto& [list, nodes] : by_list) {
      if (nodes.size() < 2) continue;
      for (const std::uint32_t k : nodes) classes[k] = count;
      ++count;
    }
    return count;
  }

  bool reserve(std::size_t bytes) const {
    if (memory_used.fetch_add(bytes) + bytes <= memory_limit) return true;
    memory_used.fetch_sub(bytes);
    return false;
  }

  // D(., target), packed; in `keep` when it could not be kept here.
  const Table& table(std::uint32_t target, std::unique_ptr<Table>& keep) const {
    if (const auto* t = dist[target].load(std::memory_order_acquire)) return *t;
    auto label = std::make_unique<Table>(core.size(), kFar);
    // A table is the same whatever order a search settles equal labels in.
    thread_local RadixQueue<std::uint32_t> queue;
    queue.clear();
    queue.push(0, target);
    // Local pointers: the labels written below could alias the columns' vectors as far as the
    // compiler knows, and it reloaded each column's address at every arc.
    std::uint64_t* const labels = label->data();
    const std::uint32_t* const begin = arc_begin.data();
    const std::uint32_t* const from = arc_from.data();
    const std::uint64_t* const cost = arc_cost.data();
    labels[target] = 0;
    std::vector<bool> twin_settled(twin_classes);
    while (!queue.empty()) {
      const auto [at, k] = queue.pop();
      if (labels[k] < at) continue;
      if (const std::uint32_t c = twin_class[k]; c != kNotTwin) {
        if (twin_settled[c]) continue;
        twin_settled[c] = true;
      }
      // Settled labels and arcs sum below kFar (build_core_graph()).
      for (std::uint32_t a = begin[k], end = begin[k + 1]; a < end; ++a) {
        const std::uint64_t nl = at + cost[a];
        std::uint64_t& old = labels[from[a]];
        if (nl < old) {
          old = nl;
          queue.push(nl, from[a]);
        }
      }
    }
    const std::size_t bytes = label->size() * sizeof(std::uint64_t);
    if (!reserve(bytes)) {
      keep = std::move(label);
      return *keep;
    }
    const Table* expected = nullptr;
    if (!dist[target].compare_exchange_strong(expected, label.get(), std::memory_order_acq_rel)) {
      memory_used.fetch_sub(bytes);
      return *expected;  // another thread published it first
    }
    std::lock_guard lock(dist_owner_mutex);
    dist_owner.push_back(std::move(label));
    return *dist_owner.back();
  }

  // Distance from any node to core node t, given t's table.
  Label to_core(NodeId v, const Table& d) const {
    if (in_core(v)) return unpack(d[local[v]]);
    const auto x = exits_of(static_cast<std::size_t>(cell(v)));
    const Label* row = leave_row(v);
    Label best;
    for (std::size_t i = 0; i < x.size(); ++i)
      best = std::min(best, join(row[i], unpack(d[local[topology.link(x[i]).to]])));
    return best;
  }

  // The positions in core node u's list of links of those on a shortest path towards the core
  // node whose table is `d`.
  std::vector<std::uint32_t> tight_positions(std::uint32_t u, const Table& d) const {
    std::vector<std::uint32_t> positions;
    // A spine has a link to every leaf: its links to core nodes compare packed words.
    const std::uint64_t du = d[u];
    const Label here = unpack(du);
    const std::uint32_t begin = core_out_begin[u];
    for (std::uint32_t i = begin; i < core_out_begin[u + 1]; ++i) {
      const CoreLink& l = core_out[i];
      bool tight = false;
      if (l.to_core != kNotCore) {
        const std::uint64_t dv = d[l.to_core];
        tight = dv != kFar && dv + l.step == du;
      } else {
        const Label lv = to_core(l.to, d);
        tight = lv.finite() && extend(lv, l.ps) == here;
      }
      if (tight) positions.push_back(i - begin);
    }
    return positions;
  }

  // The equal-cost links from core node u towards core node t, whose table is `d`; in `spill`
  // when the list could not be kept here.
  const std::vector<Candidate>& next_towards(std::uint32_t u, std::uint32_t t, const Table& d,
                                             std::vector<Candidate>& spill) const {
    const std::uint64_t key = (std::uint64_t{u} << 32) | t;
    NextShard& shard = next_shards[mix(key) % kShards];
    {
      std::shared_lock lock(shard.mutex);
      if (auto it = shard.next.find(key); it != shard.next.end()) return it->second;
    }
    std::vector<Candidate> found;
    const auto add = [&](std::uint32_t i) {
      const CoreLink& l = core_out[core_out_begin[u] + i];
      found.push_back({name_rank[l.to], l.link, l.to});
    };
    const std::uint64_t du = d[u];
    const std::uint32_t c = out_twin_class[u];
    if (c == kNotTwin) {
      for (const std::uint32_t i : tight_positions(u, d)) add(i);
    } else {
      const std::uint64_t twin_key = (std::uint64_t{c} << 32) | t;
      TightShard& tshard = tight_shards[mix(twin_key) % kShards];
      bool known = false;
      {
        std::shared_lock lock(tshard.mutex);
        if (auto it = tshard.tight.find(twin_key);
            it != tshard.tight.end() && it->second.at == du) {
          known = true;
          for (const std::uint32_t i : it->second.positions) add(i);
        }
      }
      if (!known) {
        std::vector<std::uint32_t> positions = tight_positions(u, d);
        for (const std::uint32_t i : positions) add(i);
        const std::size_t bytes = 64 + positions.size() * sizeof(std::uint32_t);
        if (reserve(bytes)) {
          std::unique_lock lock(tshard.mutex);
          if (!tshard.tight.try_emplace(twin_key, Tight{du, std::move(positions)}).second)
            memory_used.fetch_sub(bytes);  // kept first by another thread or another distance
        }
      }
    }
    std::sort(found.begin(), found.end());
    // A map node and its list: about 64 bytes besides the candidates.
    const std::size_t bytes = 64 + found.size() * sizeof(Candidate);
    if (!reserve(bytes)) {
      spill = std::move(found);
      return spill;
    }
    std::unique_lock lock(shard.mutex);
    const auto [it, inserted] = shard.next.try_emplace(key, std::move(found));
    if (!inserted) memory_used.fetch_sub(bytes);  // another thread kept it first
    return it->second;
  }
};

namespace {

// What a route towards one destination needs: the distances inside its cell and, for each
// entry into that cell, the core table of the entry's tail and the cost from there.
struct Destination {
  struct Entry {
    LinkId link;
    std::uint32_t tail;  // core index
    Label cost;          // from the tail, over the entry, to the destination
    const CoreTable* table;
  };
  std::int32_t cell;
  const Label* inside = nullptr;     // by local index; none for a core node
  const CoreTable* table = nullptr;  // a core destination's own table
  std::vector<Entry> entries;
  std::vector<std::unique_ptr<CoreTable>> kept;  // tables the router could not keep
};

// A route's working vectors, kept by each thread from one route to the next: a route allocated
// about 25 small vectors, a fifth of the instructions of routing a tree of 16,384 GPUs.
struct Scratch {
  Destination dest;
  std::vector<Label> inside, exits_label;
  std::vector<HeapEntry> heap;
  std::vector<Candidate> candidates, spill;
  std::vector<std::uint32_t> tails;
  std::vector<LinkId> links;
};

}  // namespace

CellRouting::CellRouting(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CellRouting::~CellRouting() = default;

std::unique_ptr<CellRouting> CellRouting::build(const Topology& topology, const Adjacency& out,
                                                std::span<const std::uint64_t> link_ps,
                                                std::span<const std::uint32_t> name_rank,
                                                std::size_t memory_limit, std::string& why) {
  std::uint64_t total = 0;
  for (LinkId id = 0; id < topology.num_links(); ++id) {
    total += std::min(link_ps[id], kMaxTotalPs);
    if (total >= kMaxTotalPs) {
      why = "link latencies add up to more than 2^62 ps";
      return nullptr;
    }
  }
  auto impl = std::make_unique<Impl>(topology, out, link_ps, name_rank);
  impl->memory_limit = memory_limit;
  impl->index_cells();
  impl->classify_cells();
  impl->build_leave_tables();
  if (!impl->build_core_graph(why)) return nullptr;
  return std::unique_ptr<CellRouting>(new CellRouting(std::move(impl)));
}

std::size_t CellRouting::cells() const {
  return impl_->cells;
}

std::optional<Route> CellRouting::compute(NodeId from, NodeId to, bool ecmp, std::uint64_t flow_key,
                                          bool& chose) const {
  const Impl& m = *impl_;
  const Topology& t = m.topology;
  thread_local Scratch scratch;
  Destination& dest = scratch.dest;
  dest.cell = m.cell(to);
  dest.inside = nullptr;
  dest.table = nullptr;
  dest.entries.clear();
  dest.kept.clear();
  if (dest.cell == kNone)
    dest.table = &m.table(m.local[to], dest.kept.emplace_back());
  else
    dest.inside =
        m.inside_of(static_cast<std::size_t>(dest.cell), to, scratch.inside, scratch.heap);
  // The destination cell's entries and their tables, found when a label first needs the core:
  // most routes of a tree stay inside one server, where every way out costs more than the way
  // inside and no label reads them.
  bool entries_found = dest.cell == kNone;
  const auto entries = [&]() -> const std::vector<Destination::Entry>& {
    if (!entries_found) {
      entries_found = true;
      for (LinkId f : m.entries_of(static_cast<std::size_t>(dest.cell))) {
        const Link& l = t.link(f);
        const Label in = dest.inside[m.local[l.to]];
        if (in.finite())
          dest.entries.push_back({f, m.local[l.from], extend(in, m.ps[f]),
                                  &m.table(m.local[l.from], dest.kept.emplace_back())});
      }
    }
    return dest.entries;
  };
  const auto core_label = [&](std::uint32_t k) {
    if (dest.table != nullptr) return m.unpack((*dest.table)[k]);
    Label best;
    for (const auto& e : entries()) best = std::min(best, join(m.unpack((*e.table)[k]), e.cost));
    return best;
  };
  // The core labels of the heads of one cell's exits: a walk asks for the labels of many nodes
  // of the cell it is in (every neighbour of every hop there), and each needs all of them, once
  // one of its ways out is cheaper than its way inside.
  std::int32_t exits_cell = kNone;
  std::vector<Label>& exits_label = scratch.exits_label;
  const auto label = [&](NodeId v) {
    if (m.in_core(v)) return core_label(m.local[v]);
    const std::int32_t cell = m.cell(v);
    const auto x = m.exits_of(static_cast<std::size_t>(cell));
    Label best = cell == dest.cell ? dest.inside[m.local[v]] : Label{};
    const Label* row = m.leave_row(v);
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (!(row[i] < best)) continue;
      if (exits_cell != cell) {
        exits_cell = cell;
        exits_label.clear();
        for (LinkId e : x) exits_label.push_back(core_label(m.local[t.link(e).to]));
      }
      best = std::min(best, join(row[i], exits_label[i]));
    }
    return best;
  };

  Label here = label(from);
  if (!here.finite()) return std::nullopt;
  Route r;
  chose = false;
  std::vector<Candidate>& candidates = scratch.candidates;
  std::vector<Candidate>& spill = scratch.spill;
  std::vector<LinkId>& links = scratch.links;
  links.clear();
  NodeId u = from;
  for (std::uint32_t hop = 0; u != to; ++hop) {
    candidates.clear();
    if (!m.in_core(u)) {
      for (LinkId id : m.out.of(u)) {
        const NodeId v = t.link(id).to;
        const Label lv = label(v);
        if (lv.finite() && extend(lv, m.ps[id]) == here)
          candidates.push_back({m.name_rank[v], id, v});
      }
      std::sort(candidates.begin(), candidates.end());
    } else if (dest.table != nullptr) {
      const auto& c = m.next_towards(m.local[u], m.local[to], *dest.table, spill);
      candidates.assign(c.begin(), c.end());
    } else {
      // Every shortest path from here last enters the destination's cell over an entry whose
      // total is `here`; its first link is that entry or a first link towards the entry's tail.
      std::vector<std::uint32_t>& tails = scratch.tails;
      tails.clear();
      for (const auto& e : entries()) {
        if (join(m.unpack((*e.table)[m.local[u]]), e.cost) != here) continue;
        if (e.tail == m.local[u]) {
          const NodeId x = t.link(e.link).to;
          candidates.push_back({m.name_rank[x], e.link, x});
        } else if (std::find(tails.begin(), tails.end(), e.tail) == tails.end()) {
          tails.push_back(e.tail);
          const auto& c = m.next_towards(m.local[u], e.tail, *e.table, spill);
          candidates.insert(candidates.end(), c.begin(), c.end());
        }
      }
      std::sort(candidates.begin(), candidates.end());
      candidates.erase(
          std::unique(candidates.begin(), candidates.end(),
                      [](const Candidate& a, const Candidate& b) { return a.link == b.link; }),
          candidates.end());
    }
    if (candidates.empty())
      throw InternalError("CellRouting: no next hop on a shortest path from '" + t.node(u).name +
                          "'");
    const Candidate* pick = &candidates.front();
    if (ecmp && candidates.size() > 1) {
      chose = true;
      pick = &candidates[hop_hash(flow_key, from, to, hop) % candidates.size()];
    }
    const Link& l = t.link(pick->link);
    links.push_back(pick->link);
    r.latency += l.latency;
    r.bandwidth = std::min(r.bandwidth, l.bandwidth);
    u = pick->next;
    here = label(u);
  }
  r.links.assign(links.begin(), links.end());
  r.path_class = classify(t, r.links);
  dest.kept.clear();  // tables beyond the memory limit are not kept past their route
  return r;
}

}  // namespace collsim::topo::detail
