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

// One tree's pipeline of chunks, built one (chunk, level) step at a time: up, the reductions of
// a level's positions and their sends to the parents; down, the sends from a level's positions
// to their children. Up runs positions from the last to the first, down from the first to the
// last, level by level, so that building a chunk's levels in turn gives the same ops in the same
// order as a pass over its positions. A chunk keeps what the next level of its pass needs only:
// in run order every chunk is in flight at once, and state for every position of every chunk
// would be k times the tree (100 MB at 131,072 GPUs and k = 8), written afresh as the plan grows.
class TreePipeline {
 public:
  TreePipeline(const BinaryTree& tree, const TreeLanes& lanes, std::vector<Piece> chunks,
               BufferId root_src)
      : tree_(tree),
        l_(lanes),
        chunks_(std::move(chunks)),
        root_src_(root_src),
        p_(static_cast<std::uint32_t>(tree.ranks.size())),
        arrived_(chunks_.size()),
        ready_(chunks_.size()) {
    while ((std::uint32_t{2} << depth_) - 1 < p_) ++depth_;
  }
  std::uint32_t depth() const { return depth_; }  // the leaves' deepest level
  std::size_t chunks() const { return chunks_.size(); }

  // Chunk c's reductions at the positions of `level` and their sends up; the root's (level 0)
  // last reduction finishes the chunk's sum. Levels go from depth() to 0.
  void up(Builder& b, std::size_t c, std::uint32_t level) {
    const Piece piece = chunks_[c];
    if (piece.bytes == 0) return;
    // here[i - first][j]: child j's partial sum has reached position i of this level, in scratch
    // region tmp (written by the level below); above: the same for the level above.
    const std::uint32_t first = first_of(level);
    const std::vector<Arrivals> here = std::move(arrived_[c]);
    std::vector<Arrivals> above(level == 0 ? 0 : width_of(level - 1));
    const std::uint32_t above_first = level == 0 ? 0 : first_of(level - 1);
    for (std::uint32_t i = first + width_of(level); i-- > first;) {
      const RankId r = tree_.ranks[i];
      const std::uint32_t children = (2 * i + 1 < p_) + (2 * i + 2 < p_);
      OpId last = kNoOp;
      for (std::uint32_t j = 0; j < children; ++j) {
        const auto [op, tmp] = here[i - first][j];
        last = b.reduce(
            r, {BufferId::output, piece.offset},
            j == 0 ? Region{BufferId::input, piece.offset} : Region{BufferId::output, piece.offset},
            tmp, piece.bytes, l_.reduce, {op});
      }
      if (i == 0) {
        ready_[c].assign(1, last);  // the chunk's sum is done: the broadcast down waits for it
        break;
      }
      const std::uint32_t parent = (i - 1) / 2;
      const RankId to = tree_.ranks[parent];
      const Region src{children ? BufferId::output : BufferId::input, piece.offset};
      const Region tmp = b.fresh_scratch(to, piece.bytes);
      const std::uint32_t side = (i - 1) % 2;  // 0: left child, 1: right child
      const OpId op = b.move(r, src, to, tmp, piece.bytes, {last}, l_.up, l_.child_in[side]);
      above[parent - above_first][side] = {op, tmp};
    }
    arrived_[c] = std::move(above);
  }

  // Chunk c's sends from the positions of `level` to their children. Levels go from 0 to
  // depth() - 1.
  void down(Builder& b, std::size_t c, std::uint32_t level) {
    const Piece piece = chunks_[c];
    if (piece.bytes == 0) return;
    // here[i - first]: chunk c has reached position i of this level through that op (kNoOp:
    // nothing to wait for, as at a broadcast's root); below: the same for the level below.
    const std::uint32_t first = first_of(level);
    std::vector<OpId> here = std::move(ready_[c]);
    if (level == 0 && here.empty()) here.assign(1, kNoOp);
    const bool leaves = level + 1 == depth_;  // the chunk then has reached every position
    std::vector<OpId> below(leaves ? 0 : width_of(level + 1));
    const std::uint32_t below_first = first_of(level + 1);
    const std::uint32_t end = first + width_of(level);
    for (std::uint32_t i = first; i < end; ++i) {
      for (std::uint32_t j = 0; j < 2; ++j) {
        const std::uint32_t child = 2 * i + 1 + j;
        if (child >= p_) break;
        const Region src{i == 0 ? root_src_ : BufferId::output, piece.offset};
        const OpId op =
            b.move(tree_.ranks[i], src, tree_.ranks[child], {BufferId::output, piece.offset},
                   piece.bytes, {here[i - first]}, l_.child_out[j], l_.down_in);
        if (!leaves) below[child - below_first] = op;
      }
    }
    ready_[c] = std::move(below);
  }

 private:
  using Arrivals = std::array<std::pair<OpId, Region>, 2>;
  // A level's first position, and how many positions it holds.
  static std::uint32_t first_of(std::uint32_t level) { return (std::uint32_t{1} << level) - 1; }
  std::uint32_t width_of(std::uint32_t level) const {
    return std::min(p_, 2 * first_of(level) + 1) - first_of(level);
  }

  const BinaryTree& tree_;
  TreeLanes l_;
  std::vector<Piece> chunks_;
  BufferId root_src_;
  std::uint32_t p_;
  std::uint32_t depth_ = 0;
  std::vector<std::vector<Arrivals>> arrived_;  // by chunk: for the level it builds next, up
  std::vector<std::vector<OpId>> ready_;        // by chunk: for the level it sends from next, down
};

// Whether the plan may list its ops in run order (run_pipelines()): may_run_order(), with the
// transfers along the edges of the trees.
bool run_order(const Builder& b, const Job& job, const std::vector<BinaryTree>& trees) {
  return may_run_order(job, [&] {
    for (const BinaryTree& t : trees)
      for (std::uint32_t i = 1; i < t.ranks.size(); ++i)
        if (b.staged(t.ranks[i], t.parent_of(i))) return true;
    return false;
  });
}

// The trees' pipelines, reduced up (`up`) and then broadcast down (`down`). In run order
// (`waves`): the ops of step s of every tree and chunk, in that order, then those of step s + 1,
// where chunk c reaches level depth - (s - c) up, and sends down from level s - c - depth - 1;
// otherwise tree by tree, and chunk by chunk up and then chunk by chunk down, as the pass over
// positions always built them. Both orders give every op the same dependencies, the same
// stream predecessors and the same order among the successors of any op, so the engine runs
// them alike to the bit; what differs is where an op's record lies. In run order the ops that
// run together are neighbours, and a whole plan registered in windows (sim/plan_windows.hpp)
// holds fewer at once: a 131,072-GPU tree reaches for fewer cache lines far apart.
void run_pipelines(Builder& b, std::vector<TreePipeline>& pipes, bool up, bool down, bool waves) {
  if (!waves) {
    for (TreePipeline& t : pipes) {
      if (up)
        for (std::size_t c = 0; c < t.chunks(); ++c)
          for (std::uint32_t level = t.depth() + 1; level-- > 0;) t.up(b, c, level);
      if (down)
        for (std::size_t c = 0; c < t.chunks(); ++c)
          for (std::uint32_t level = 0; level < t.depth(); ++level) t.down(b, c, level);
    }
    return;
  }
  std::size_t steps = 0;
  for (const TreePipeline& t : pipes) steps = std::max(steps, t.chunks() + 2 * t.depth() + 1);
  for (std::size_t s = 0; s < steps; ++s)
    for (TreePipeline& t : pipes)
      for (std::size_t c = 0; c < t.chunks() && c <= s; ++c) {
        const std::size_t after = s - c;  // steps since chunk c's first
        if (up && after <= t.depth()) t.up(b, c, static_cast<std::uint32_t>(t.depth() - after));
        const std::size_t down_first = up ? t.depth() + 1 : 0;
        if (down && after >= down_first && after - down_first < t.depth())
          t.down(b, c, static_cast<std::uint32_t>(after - down_first));
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
  std::vector<BinaryTree> trees;
  std::vector<TreePipeline> pipes;
  switch (job.collective) {
    case Collective::allreduce: {
      trees = double_binary_tree(job.p);
      const auto halves = split({0, job.n}, static_cast<std::uint32_t>(trees.size()), job.element);
      for (std::uint32_t t = 0; t < trees.size(); ++t)
        pipes.emplace_back(trees[t], tree_lanes(t, job.pipelined),
                           split(halves[t], job.k, job.element), BufferId::output);
      run_pipelines(b, pipes, true, true, run_order(b, job, trees));
      return;
    }
    case Collective::reduce: {
      trees.push_back(rooted(job.p, job.root));
      pipes.emplace_back(trees[0], tree_lanes(0, job.pipelined),
                         split({0, job.n}, job.k, job.element), BufferId::output);
      run_pipelines(b, pipes, true, false, run_order(b, job, trees));
      return;
    }
    case Collective::broadcast: {
      const TreeLanes l = tree_lanes(0, job.pipelined);
      b.copy(job.root, {BufferId::output, 0}, {BufferId::input, 0}, job.n, l.up.copy, {});
      trees.push_back(rooted(job.p, job.root));
      pipes.emplace_back(trees[0], l, split({0, job.n}, job.k, job.element), BufferId::input);
      run_pipelines(b, pipes, false, true, run_order(b, job, trees));
      return;
    }
    default:
      break;
  }
  throw InternalError("tree: collective not dispatched");
}

}  // namespace collsim::sched::detail
