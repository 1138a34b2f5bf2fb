#include "schedules/generate.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <string>

#include "schedules/algorithms.hpp"
#include "topology/error.hpp"

namespace collsim::sched {

namespace {

constexpr std::array kAlgorithms{Algorithm::ring,     Algorithm::tree, Algorithm::rhd,
                                 Algorithm::rd,       Algorithm::hier, Algorithm::direct,
                                 Algorithm::pairwise, Algorithm::naive};
constexpr std::array kCollectives{Collective::allreduce, Collective::reduce_scatter,
                                  Collective::allgather, Collective::broadcast,
                                  Collective::reduce,    Collective::alltoall};

}  // namespace

bool supports(Algorithm a, Collective c) {
  switch (c) {
    case Collective::allreduce:
      return a != Algorithm::pairwise;
    case Collective::reduce_scatter:
    case Collective::allgather:
      return a == Algorithm::ring || a == Algorithm::direct || a == Algorithm::pairwise;
    case Collective::broadcast:
    case Collective::reduce:
      return a == Algorithm::ring || a == Algorithm::tree || a == Algorithm::direct ||
             a == Algorithm::naive;
    case Collective::alltoall:
      return a == Algorithm::direct || a == Algorithm::pairwise;
  }
  return false;
}

std::string join(const std::vector<Algorithm>& v) {
  std::string s;
  for (Algorithm a : v) s += (s.empty() ? "" : ", ") + std::string(to_string(a));
  return s.empty() ? "none" : s;
}

namespace {

// hier's groups: the ranks of each server in rank order, servers in the order of their ids.
// Throws InputError when a GPU is in no server or servers hold different numbers of ranks.
std::vector<std::vector<RankId>> server_groups(const topo::Topology& t,
                                               const std::vector<topo::NodeId>& rank_gpu) {
  std::map<std::int32_t, std::vector<RankId>> by_server;
  for (RankId r = 0; r < rank_gpu.size(); ++r) {
    const auto s = t.node(rank_gpu[r]).server;
    if (s == topo::kNone)
      throw InputError("", "--algo hier",
                       "hier needs every GPU in a server, but '" + t.node(rank_gpu[r]).name +
                           "' belongs to none; use ring or tree, or add servers to the topology");
    by_server[s].push_back(r);
  }
  std::vector<std::vector<RankId>> groups;
  groups.reserve(by_server.size());
  for (auto& [s, ranks] : by_server) groups.push_back(std::move(ranks));
  for (const auto& g : groups)
    if (g.size() != groups.front().size())
      throw InputError("", "--algo hier",
                       "hier needs the same number of GPUs in every server (found " +
                           std::to_string(groups.front().size()) + " and " +
                           std::to_string(g.size()) + "); use ring or tree");
  return groups;
}

}  // namespace

std::string_view to_string(Algorithm a) {
  switch (a) {
    case Algorithm::ring:
      return "ring";
    case Algorithm::tree:
      return "tree";
    case Algorithm::rhd:
      return "rhd";
    case Algorithm::rd:
      return "rd";
    case Algorithm::hier:
      return "hier";
    case Algorithm::direct:
      return "direct";
    case Algorithm::pairwise:
      return "pairwise";
    case Algorithm::naive:
      return "naive";
  }
  return "?";
}

std::optional<Algorithm> parse_algorithm(std::string_view name) {
  for (Algorithm a : kAlgorithms)
    if (to_string(a) == name) return a;
  return std::nullopt;
}

std::optional<Collective> parse_collective(std::string_view name) {
  for (Collective c : kCollectives)
    if (to_string(c) == name) return c;
  return std::nullopt;
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : {DType::fp32, DType::fp16, DType::bf16})
    if (to_string(t) == name) return t;
  return std::nullopt;
}

std::optional<HostMemory> parse_host_memory(std::string_view name) {
  for (HostMemory m : {HostMemory::pinned, HostMemory::pageable})
    if (to_string(m) == name) return m;
  return std::nullopt;
}

std::span<const Algorithm> all_algorithms() {
  return kAlgorithms;
}
std::span<const Collective> all_collectives() {
  return kCollectives;
}

std::vector<Algorithm> algorithms_for(Collective collective, RankId ranks) {
  std::vector<Algorithm> out;
  for (Algorithm a : kAlgorithms)
    if (supports(a, collective) && ranks > 0) out.push_back(a);
  return out;
}

namespace {

// Transfers of hier over p ranks in `servers` servers, k chunks: rings of g = p / servers inside
// the servers and of `servers` along the rails, each a reduce-scatter and an allgather.
double hier_transfers(double p, double servers, double k) {
  const double g = p / servers;
  return 2 * ((g - 1) + (servers - 1)) * p * k;
}

}  // namespace

std::string why_not(const PlanRequest& req, RankId p) {
  const std::string pair =
      std::string(to_string(req.algorithm)) + " " + std::string(to_string(req.collective));
  if (p == 0) return "the topology has no GPUs to take part";
  if (!supports(req.algorithm, req.collective))
    return "algorithm '" + std::string(to_string(req.algorithm)) + "' does not implement " +
           std::string(to_string(req.collective)) + "; algorithms for " +
           std::string(to_string(req.collective)) + " on " + std::to_string(p) +
           " ranks: " + join(algorithms_for(req.collective, p));
  const std::size_t e = dtype_size(req.dtype);
  if (req.size == 0) return "the size is 0 bytes; give at least one element";
  if (req.size % e != 0)
    return "the size " + std::to_string(req.size) + " bytes is not a whole number of " +
           std::string(to_string(req.dtype)) + " elements (" + std::to_string(e) + " bytes each)";
  const bool per_rank = req.collective == Collective::reduce_scatter ||
                        req.collective == Collective::allgather ||
                        req.collective == Collective::alltoall;
  if (per_rank && req.size % (Bytes{p} * e) != 0)
    return std::string(to_string(req.collective)) +
           " splits the buffer into one piece per rank: the size " + std::to_string(req.size) +
           " bytes must be a multiple of " + std::to_string(p) + " ranks x " + std::to_string(e) +
           " bytes";
  if (req.chunks == 0) return "chunks must be at least 1";
  const Bytes elements = req.size / e;
  if (req.chunks > elements)
    return "chunks (" + std::to_string(req.chunks) + ") exceeds the element count (" +
           std::to_string(elements) + "); use at most " + std::to_string(elements);
  if (req.algorithm == Algorithm::naive && req.chunks != 1)
    return "the naive schedule moves the whole buffer at once and cannot pipeline; use --chunks 1 "
           "or a pipelined algorithm (ring, tree, ...)";
  // Plans address ops with 32-bit ids; refuse early rather than fill memory and fail late.
  {
    const double P = p, K = req.chunks;
    double log_p = 0;
    for (RankId q = 1; q < p; q *= 2) ++log_p;
    double transfers = 0;
    switch (req.algorithm) {
      case Algorithm::ring:
        transfers = 2 * (P - 1) * K * P;
        break;
      case Algorithm::hier:
        // 2 (g - 1) + 2 (s - 1) steps of p k transfers for s servers of g GPUs; the servers are
        // not known here, so the fewest steps any shape has (g = s = sqrt p). generate() checks
        // the actual shape.
        transfers = hier_transfers(P, std::sqrt(P), K);
        break;
      case Algorithm::direct:
      case Algorithm::pairwise:
        transfers = P * (P - 1) * K;
        break;
      case Algorithm::tree:
        transfers = 4 * P * K;
        break;
      case Algorithm::rd:
      case Algorithm::rhd:
        transfers = 2 * P * (log_p + 1) * K;
        break;
      case Algorithm::naive:
        transfers = 2 * P;
        break;
    }
    // Two ops per transfer, up to two staging copies, and about one reduction; a rotated plan
    // holds the ops of rotation ranks of p.
    const double held = req.rotation != 0 ? static_cast<double>(req.rotation) / P : 1.0;
    const double ops = 5 * transfers * held;
    if (ops > 4e9)
      return "the plan would hold about " + std::to_string(static_cast<long long>(ops)) +
             " ops, beyond the 2^32 a plan can address; use fewer chunks (--chunks) or ranks";
  }
  if ((req.collective == Collective::broadcast || req.collective == Collective::reduce) &&
      req.root >= p)
    return "root " + std::to_string(req.root) + " is not a rank (ranks are 0.." +
           std::to_string(p - 1) + ")";
  return {};
}

bool streams(const PlanRequest& req, RankId p) {
  const bool ring_family =
      req.algorithm == Algorithm::ring &&
      (req.collective == Collective::allreduce || req.collective == Collective::reduce_scatter ||
       req.collective == Collective::allgather);
  // hier: reduce-scatter and allgather rings inside the servers and along the rails, one batch
  // per step (schedules/hier.cpp).
  const bool hier = req.algorithm == Algorithm::hier && req.collective == Collective::allreduce;
  // An empty piece generates no ops, so the next step's op for it would wait on nothing of the
  // step before: batches are exact only when every piece holds an element. The ring cuts the
  // buffer into p segments of k pieces; hier into k chunks of g segments of S pieces (g GPUs in
  // each of S servers), and nested splits of whole elements leave the smallest piece
  // floor(elements / (k g S)) = floor(elements / (p k)) elements: the same condition.
  return (ring_family || hier) && p > 1 &&
         req.size / dtype_size(req.dtype) >= std::uint64_t{p} * req.chunks;
}

RankId rotation_unit(const topo::Router& router, const PlanRequest& req) {
  const topo::Topology& t = router.topology();
  const std::vector<topo::NodeId> ranks = req.ranks.empty() ? t.gpus() : req.ranks;
  const auto p = static_cast<RankId>(ranks.size());
  // The op count of a rotated plan is checked when it is generated, with its rotation.
  PlanRequest smallest = req;
  smallest.rotation = 1;
  if (p < 2 || !why_not(smallest, p).empty()) return 0;
  const std::uint64_t elements = req.size / dtype_size(req.dtype);
  const bool ring_family =
      req.algorithm == Algorithm::ring &&
      (req.collective == Collective::allreduce || req.collective == Collective::reduce_scatter ||
       req.collective == Collective::allgather);
  // Rank r and r + 1 move pieces of equal size only when every piece is: the ring cuts the
  // buffer into p segments of k pieces, hier into k chunks of g segments of S pieces.
  const bool even = elements > 0 && elements % (std::uint64_t{p} * req.chunks) == 0;
  if (ring_family) return even ? 1 : 0;
  if (req.algorithm == Algorithm::direct || req.algorithm == Algorithm::pairwise) {
    // Channel i of every rank sends to the rank i + 1 further on (pairwise: its i-th send):
    // relative to the rank, so any rotation keeps it. The one-shot allreduce sends the same chunks
    // from every rank, the allgather and alltoall pieces of n / p each; the reduce_scatter's
    // segments must be equal.
    switch (req.collective) {
      case Collective::allreduce:
      case Collective::allgather:
      case Collective::alltoall:
        return 1;
      case Collective::reduce_scatter:
        return elements % p == 0 ? 1 : 0;
      case Collective::broadcast:
      case Collective::reduce:
        return 0;
    }
  }
  if (req.algorithm != Algorithm::hier || req.collective != Collective::allreduce || !even)
    return 0;
  std::vector<std::vector<RankId>> groups;
  try {
    groups = server_groups(t, ranks);
  } catch (const InputError&) {
    return 0;
  }
  // Rotating by one server maps servers and rails onto themselves only when servers hold
  // consecutive ranks in the order hier walks them.
  const auto g = static_cast<RankId>(groups.front().size());
  for (std::size_t i = 0; i < groups.size(); ++i)
    for (RankId l = 0; l < g; ++l)
      if (groups[i][l] != i * g + l) return 0;
  return g;
}

Plan generate(const topo::Router& router, const PlanRequest& req) {
  Plan plan;
  generate(router, req, plan, {});
  return plan;
}

void generate(const topo::Router& router, const PlanRequest& req, Plan& plan,
              const std::function<void()>& batch) {
  if (plan.num_ops() != 0) throw InternalError("generate into a plan that has ops");
  const topo::Topology& t = router.topology();
  plan.collective = req.collective;
  plan.algorithm = std::string(to_string(req.algorithm));
  plan.dtype = req.dtype;
  plan.size = req.size;
  plan.chunks = req.chunks;
  plan.root = req.root;
  plan.host_memory = req.host_memory;
  plan.rank_gpu = req.ranks.empty() ? t.gpus() : req.ranks;
  std::vector<topo::NodeId> seen = plan.rank_gpu;
  std::sort(seen.begin(), seen.end());
  for (std::size_t i = 0; i < seen.size(); ++i) {
    if (seen[i] >= t.num_nodes() || t.node(seen[i]).kind != topo::NodeKind::gpu)
      throw InputError("", "ranks", "node " + std::to_string(seen[i]) + " is not a GPU");
    if (i && seen[i] == seen[i - 1])
      throw InputError("", "ranks", "GPU '" + t.node(seen[i]).name + "' appears twice");
  }
  const RankId p = plan.num_ranks();
  if (auto why = why_not(req, p); !why.empty())
    throw InputError("",
                     "--algo " + std::string(to_string(req.algorithm)) + " --collective " +
                         std::string(to_string(req.collective)),
                     why);
  if (req.rotation != 0) {
    const RankId unit = rotation_unit(router, req);
    if (unit == 0 || req.rotation % unit != 0 || p % req.rotation != 0)
      throw InternalError("rotation " + std::to_string(req.rotation) +
                          " does not map this plan onto itself (see rotation_unit)");
    plan.rotation = req.rotation;
  }

  detail::Job job;
  job.collective = req.collective;
  job.p = p;
  job.n = req.size;
  job.k = req.chunks;
  job.root = req.root;
  job.element = dtype_size(req.dtype);
  job.pipelined = req.algorithm != Algorithm::naive;
  job.run_order = req.run_order;
  Builder b(router, plan, job.element);
  if (batch && streams(req, p)) b.on_batch(batch);
  if (p == 1) {
    detail::local_copy(b, job);
    if (batch) batch();
    return;
  }
  switch (req.algorithm) {
    case Algorithm::ring:
      detail::ring(b, job);
      break;
    case Algorithm::tree:
      detail::tree(b, job);
      break;
    case Algorithm::rhd:
      detail::halving_doubling(b, job);
      break;
    case Algorithm::rd:
      detail::recursive_doubling(b, job);
      break;
    case Algorithm::direct:
      detail::direct(b, job);
      break;
    case Algorithm::pairwise:
      detail::pairwise(b, job);
      break;
    case Algorithm::naive:
      detail::naive(b, job);
      break;
    case Algorithm::hier: {
      const std::vector<std::vector<RankId>> groups = server_groups(t, plan.rank_gpu);
      if (const double ops = 5 * hier_transfers(p, static_cast<double>(groups.size()), req.chunks) *
                             plan.ranks_held() / p;
          ops > 4e9)
        throw InputError("", "--algo hier",
                         "the plan would hold about " +
                             std::to_string(static_cast<long long>(ops)) +
                             " ops, beyond the 2^32 a plan can address; use fewer chunks "
                             "(--chunks) or ranks");
      detail::hierarchical(b, job, groups);
      break;
    }
  }
  b.finish();
  if (batch) batch();
}

}  // namespace collsim::sched
