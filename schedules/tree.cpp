// Binary-tree schedules. Allreduce uses the double binary tree: two heap-shaped trees over the
// ranks, each carrying half of the buffer, chosen so that no rank is an inner node of both
// (their reductions never compete for one GPU's memory) and no pair of ranks is an edge of both
// (their transfers never share a link). Each tree reduces its half up to its root and
// broadcasts it back down, k chunks in a pipeline. Broadcast and reduce use one tree rooted at
// the root.
//
// Streams, per tree: the send to the parent, one receive per child, the reductions, the
// receive from the parent and one send per child each have their own stream, so a node
// receives from both children, and sends to both, at once.
#include <algorithm>
#include <array>
#include <deque>
#include <set>
#include <vector>

#include "schedules/algorithms.hpp"
#include "topology/error.hpp"

namespace collsim::sched::detail {

RankId BinaryTree::parent_of(std::uint32_t position) const {
  return position == 0 ? kNoRank : ranks[(position - 1) / 2];
}

namespace {

bool valid_pair(const BinaryTree& a, const BinaryTree& b) {
  const auto p = static_cast<std::uint32_t>(a.ranks.size());
  std::vector<char> inner_a(p, 0);
  for (std::uint32_t i = 0; 2 * i + 1 < p; ++i) inner_a[a.ranks[i]] = 1;
  for (std::uint32_t i = 0; 2 * i + 1 < p; ++i)
    if (inner_a[b.ranks[i]]) return false;
  std::set<std::pair<RankId, RankId>> edges;
  for (std::uint32_t i = 1; i < p; ++i) edges.insert(std::minmax(a.ranks[i], a.parent_of(i)));
  for (std::uint32_t i = 1; i < p; ++i)
    if (edges.count(std::minmax(b.ranks[i], b.parent_of(i)))) return false;
  return true;
}

}  // namespace

// The first tree places rank i at position i, so its inner nodes are ranks 0..h-1 (h = p/2)
// and its leaves h..p-1. The second tree is a heap too: its inner positions 0..h-1 take leaves
// of the first (p-1, p-2, ...), and its leaf positions take the first tree's inner nodes (and,
// for odd p, the one leaf left over). An inner node x of the first tree must not hang below one
// of its own children there, or the two trees would share that edge: each leaf position forbids
// exactly one x (the first-tree parent of the rank above it), so a greedy assignment with one
// swap at the end always succeeds when it can. Edges between two leaves of the first tree are
// never edges of it, so no other edge can be shared.
namespace {

// The second tree with the first tree's leaves taken in `order` for its inner positions (and
// the last one, for odd p, as a leaf); empty ranks when the greedy assignment fails.
BinaryTree second_tree(RankId p, const std::vector<RankId>& order) {
  const RankId h = p / 2;
  BinaryTree b;
  b.ranks.assign(p, kNoRank);
  for (RankId i = 0; i < h; ++i) b.ranks[i] = order[i];
  std::deque<RankId> pool;
  for (RankId x = 0; x < h; ++x) pool.push_back(x);
  if (p % 2) pool.push_back(order[h]);
  auto forbidden = [&](RankId j) {
    const RankId above = b.ranks[(j - 1) / 2];
    return above == 0 ? kNoRank : (above - 1) / 2;  // first-tree parent of `above`
  };
  for (RankId j = h; j < p; ++j) {
    const RankId bad = forbidden(j);
    if (pool.front() != bad) {
      b.ranks[j] = pool.front();
      pool.pop_front();
    } else if (pool.size() > 1) {
      b.ranks[j] = pool[1];
      pool.erase(pool.begin() + 1);
    } else {
      // Only the forbidden node is left: swap it with an earlier leaf position that accepts it.
      const RankId x = pool.front();
      pool.pop_front();
      bool placed = false;
      for (RankId i = h; i < j && !placed; ++i) {
        if (b.ranks[i] != bad && x != forbidden(i)) {
          b.ranks[j] = b.ranks[i];
          b.ranks[i] = x;
          placed = true;
        }
      }
      if (!placed) return {};
    }
  }
  return b;
}

}  // namespace

std::vector<BinaryTree> double_binary_tree(RankId p) {
  BinaryTree a;
  a.ranks.resize(p);
  for (RankId i = 0; i < p; ++i) a.ranks[i] = i;
  if (p < 4) return {a};
  // Candidate orders of the first tree's leaves: descending, then ascending rotated by t.
  const RankId h = p / 2, leaves = p - h;
  for (RankId t = 0; t <= leaves; ++t) {
    std::vector<RankId> order(leaves);
    for (RankId i = 0; i < leaves; ++i) order[i] = t == 0 ? p - 1 - i : h + (i + t - 1) % leaves;
    BinaryTree b = second_tree(p, order);
    if (!b.ranks.empty() && valid_pair(a, b)) return {a, b};
  }
  return {a};
}

namespace {

struct TreeLanes {
  Lanes up, down_in;
  Lanes child_in[2];
  Lanes child_out[2];
  StreamId reduce = 0;
};

TreeLanes tree_lanes(std::uint32_t tree, bool pipelined) {
  TreeLanes l;
  if (!pipelined) {
    l.up = l.down_in = l.child_in[0] = l.child_in[1] = l.child_out[0] = l.child_out[1] =
        Lanes::single();
    return l;
  }
  const Lanes c0 = Lanes::channel(3 * tree), c1 = Lanes::channel(3 * tree + 1),
              c2 = Lanes::channel(3 * tree + 2);
  l.up = c0;            // send to parent
  l.child_in[0] = c0;   // recv from left child
  l.child_in[1] = c1;   // recv from right child
  l.down_in = c2;       // recv from parent
  l.child_out[0] = c1;  // send to left child
  l.child_out[1] = c2;  // send to right child
  l.reduce = c0.reduce;
  return l;
}

// Reduces `chunks` of the input up `tree`; returns, per chunk, the op that finishes the sum at
// the root (in its output).
std::vector<OpId> reduce_up(Builder& b, const BinaryTree& tree, const TreeLanes& l,
                            const std::vector<Piece>& chunks) {
  const auto p = static_cast<std::uint32_t>(tree.ranks.size());
  std::vector<OpId> root_ready(chunks.size(), kNoOp);
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const Piece piece = chunks[c];
    if (piece.bytes == 0) continue;
    // arrived[i][j]: child j's partial sum has reached position i, in scratch region tmp[i][j].
    std::vector<std::array<std::pair<OpId, Region>, 2>> arrived(p);
    for (std::uint32_t i = p; i-- > 0;) {
      const RankId r = tree.ranks[i];
      const std::uint32_t children = (2 * i + 1 < p) + (2 * i + 2 < p);
      OpId last = kNoOp;
      for (std::uint32_t j = 0; j < children; ++j) {
        const auto [op, tmp] = arrived[i][j];
        last = b.reduce(
            r, {BufferId::output, piece.offset},
            j == 0 ? Region{BufferId::input, piece.offset} : Region{BufferId::output, piece.offset},
            tmp, piece.bytes, l.reduce, {op});
      }
      if (i == 0) {
        root_ready[c] = last;
        break;
      }
      const std::uint32_t parent = (i - 1) / 2;
      const RankId to = tree.ranks[parent];
      const Region src{children ? BufferId::output : BufferId::input, piece.offset};
      const Region tmp = b.fresh_scratch(to, piece.bytes);
      const std::uint32_t side = (i - 1) % 2;  // 0: left child, 1: right child
      const OpId op = b.move(r, src, to, tmp, piece.bytes, {last}, l.up, l.child_in[side]);
      arrived[parent][side] = {op, tmp};
    }
  }
  return root_ready;
}

// Broadcasts `chunks` from the root's `src` buffer down `tree` into every other output.
void broadcast_down(Builder& b, const BinaryTree& tree, const TreeLanes& l,
                    const std::vector<Piece>& chunks, BufferId root_src,
                    const std::vector<OpId>& root_ready) {
  const auto p = static_cast<std::uint32_t>(tree.ranks.size());
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const Piece piece = chunks[c];
    if (piece.bytes == 0) continue;
    std::vector<OpId> ready(p, kNoOp);
    ready[0] = root_ready.empty() ? kNoOp : root_ready[c];
    for (std::uint32_t i = 0; i < p; ++i) {
      for (std::uint32_t j = 0; j < 2; ++j) {
        const std::uint32_t child = 2 * i + 1 + j;
        if (child >= p) break;
        const Region src{i == 0 ? root_src : BufferId::output, piece.offset};
        ready[child] =
            b.move(tree.ranks[i], src, tree.ranks[child], {BufferId::output, piece.offset},
                   piece.bytes, {ready[i]}, l.child_out[j], l.down_in);
      }
    }
  }
}

BinaryTree rooted(RankId p, RankId root) {
  BinaryTree t;
  t.ranks.resize(p);
  for (RankId i = 0; i < p; ++i) t.ranks[i] = (root + i) % p;
  return t;
}

}  // namespace

void tree(Builder& b, const Job& job) {
  switch (job.collective) {
    case Collective::allreduce: {
      const auto trees = double_binary_tree(job.p);
      const auto halves = split({0, job.n}, static_cast<std::uint32_t>(trees.size()), job.element);
      for (std::uint32_t t = 0; t < trees.size(); ++t) {
        const TreeLanes l = tree_lanes(t, job.pipelined);
        const auto chunks = split(halves[t], job.k, job.element);
        const auto ready = reduce_up(b, trees[t], l, chunks);
        broadcast_down(b, trees[t], l, chunks, BufferId::output, ready);
      }
      return;
    }
    case Collective::reduce: {
      const auto chunks = split({0, job.n}, job.k, job.element);
      reduce_up(b, rooted(job.p, job.root), tree_lanes(0, job.pipelined), chunks);
      return;
    }
    case Collective::broadcast: {
      const TreeLanes l = tree_lanes(0, job.pipelined);
      b.copy(job.root, {BufferId::output, 0}, {BufferId::input, 0}, job.n, l.up.copy, {});
      const auto chunks = split({0, job.n}, job.k, job.element);
      broadcast_down(b, rooted(job.p, job.root), l, chunks, BufferId::input, {});
      return;
    }
    default:
      break;
  }
  throw InternalError("tree: collective not dispatched");
}

}  // namespace collsim::sched::detail
