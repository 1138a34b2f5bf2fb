#pragma once
// Entry point of the schedule generators: one plan for an (algorithm, collective) pair on a
// topology, split into k pipelined chunks (docs/algorithms.md).
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/plan.hpp"
#include "topology/routing.hpp"

namespace collsim::sched {

enum class Algorithm : std::uint8_t { ring, tree, rhd, rd, hier, direct, pairwise, naive };
std::string_view to_string(Algorithm a);

// Command-line names: "ring", "tree", "rhd", "rd", "hier", "direct", "pairwise", "naive"; nullopt
// otherwise.
std::optional<Algorithm> parse_algorithm(std::string_view name);
// "allreduce", "reduce_scatter", "allgather", "broadcast", "reduce", "alltoall".
std::optional<Collective> parse_collective(std::string_view name);
// "fp32", "fp16", "bf16".
std::optional<DType> parse_dtype(std::string_view name);
std::optional<HostMemory> parse_host_memory(std::string_view name);  // "pinned", "pageable"

std::span<const Algorithm> all_algorithms();
std::span<const Collective> all_collectives();

struct PlanRequest {
  Collective collective = Collective::allreduce;
  Algorithm algorithm = Algorithm::ring;
  Bytes size = 0;  // nccl-tests convention, see Plan::size
  DType dtype = DType::fp32;
  std::uint32_t chunks = 1;         // k >= 1; 1 is the monolithic schedule
  RankId root = 0;                  // broadcast and reduce
  std::vector<topo::NodeId> ranks;  // GPUs taking part, rank order; empty means every GPU
  HostMemory host_memory = HostMemory::pinned;  // the host buffer that staging copies use
  // 0, or build the rotated plan of ranks [0, rotation) only (Plan::rotation): a multiple of
  // rotation_unit() that divides the rank count.
  RankId rotation = 0;
  // Ops listed in the order they run where that changes no result (detail::may_run_order(): the
  // tree's waves, each rank's chunks of a ring or hier step together); false: chunk by chunk, as
  // for staged transfers, for tests that compare the two.
  bool run_order = true;
};

// Whether the algorithm has a schedule for the collective, before rank-count restrictions.
bool supports(Algorithm a, Collective c);
// The algorithms generate() accepts for a collective on p ranks (ignoring size and k).
std::vector<Algorithm> algorithms_for(Collective collective, RankId ranks);
// "ring, tree, ..." for messages; "none" when empty.
std::string join(const std::vector<Algorithm>& algorithms);

// Empty when the request fits; otherwise what is wrong and what would fit. Does not look at the
// topology beyond the rank count (hier needs servers: generate() checks that).
std::string why_not(const PlanRequest& req, RankId p);

// Throws InputError when the algorithm does not fit the collective, the rank count or the size.
// A request that does not fit is refused, never replaced by another algorithm.
Plan generate(const topo::Router& router, const PlanRequest& request);

// The same plan, built into `plan` (which must be empty) in batches: `batch()` runs after each
// batch and once at the end, and may drop finished ops from the plan (sim::simulate_streaming).
// Ring allreduce, reduce_scatter and allgather, and hier allreduce, come in one batch per ring
// step when every piece holds at least one element; every other request comes in one batch.
void generate(const topo::Router& router, const PlanRequest& request, Plan& plan,
              const std::function<void()>& batch);
// The smallest rotation of ranks that maps the plan for `request` onto itself, up to offsets in
// buffers (which no time depends on), or 0 when there is none the generators can build: 1 for
// the ring allreduce, reduce_scatter and allgather and g for hier allreduce on servers of g GPUs
// holding consecutive ranks, when every piece has the same size; 1 for the direct allreduce,
// allgather and alltoall, and reduce_scatter on equal segments. Whether the topology
// is symmetric too is for the engine to find out (sim/rotation.hpp).
RankId rotation_unit(const topo::Router& router, const PlanRequest& request);

// Whether generate(..., batch) hands `request` over in more than one batch.
bool streams(const PlanRequest& request, RankId p);

}  // namespace collsim::sched
