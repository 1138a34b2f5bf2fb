#pragma once
// Values typed on the command line: single names and numbers, lists and ranges of them.
//
//   --size 64MiB              one value
//   --chunks 1,2,4,8          a list
//   --chunks 1:64:x2          a geometric range, 1 2 4 ... 64 (end included when reached)
//   --size 1MiB:8MiB:+1MiB    an arithmetic range
//   --size 1KiB:1MiB          a range with the default step x2
//   --algo ring,tree,hier     names, with a suggestion when one is misspelt
//
// Every failure is an InputError that names the option, what was found and what to type instead.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/generate.hpp"
#include "schedules/plan.hpp"
#include "topology/routing.hpp"
#include "topology/topology.hpp"
#include "topology/units.hpp"

namespace collsim::cli {

// Bounds that stop a typo such as 1B:1PiB:+1B from allocating gigabytes of points.
inline constexpr std::size_t kMaxListValues = 4096;
inline constexpr std::uint32_t kMaxChunks = 1u << 20;

// Chunk count meaning "search k in 1, 2, 4, ..., 64" (--chunks auto).
inline constexpr std::uint32_t kAutoChunks = 0;

std::vector<Bytes> parse_size_list(std::string_view text, const std::string& option);
// Positive integers (chunk counts, rank counts); the word "auto" gives kAutoChunks when
// `allow_auto` is set.
std::vector<std::uint32_t> parse_count_list(std::string_view text, const std::string& option,
                                            bool allow_auto = false);

sched::Collective parse_collective(std::string_view text, const std::string& option);
std::vector<sched::Collective> parse_collective_list(std::string_view text,
                                                     const std::string& option);
sched::DType parse_dtype(std::string_view text, const std::string& option);
std::vector<sched::DType> parse_dtype_list(std::string_view text, const std::string& option);
sched::HostMemory parse_host_memory(std::string_view text, const std::string& option);
// "ecmp" (flows hash onto equal-cost paths by flow key) or "shortest" (one path per pair).
topo::RoutingOptions parse_routing(std::string_view text, const std::string& option);

// An algorithm, or nullopt for "auto" (search every algorithm that fits).
using AlgoChoice = std::optional<sched::Algorithm>;
AlgoChoice parse_algo(std::string_view text, const std::string& option);
std::vector<AlgoChoice> parse_algo_list(std::string_view text, const std::string& option);
// A sweep's --algo for one collective: as parse_algo_list, where "all" stands for every algorithm
// that implements the collective, in all_algorithms()'s order, less those the list names itself.
std::vector<AlgoChoice> parse_sweep_algo_list(std::string_view text, sched::Collective collective,
                                              const std::string& option);
std::string to_string(const AlgoChoice& a);

// Every algorithm and collective, in the order the documentation lists them.
std::span<const sched::Algorithm> all_algorithms();
std::span<const sched::Collective> all_collectives();

// "0-7,16,gpu12": GPU indices (position in the topology's GPU list), index ranges or GPU names,
// in rank order. Empty text means every GPU of the topology.
std::vector<topo::NodeId> parse_ranks(std::string_view text, const topo::Topology& topology,
                                      const std::string& option);
// The inverse, compact: "0-3,8" when every rank is the GPU at that index of the topology.
std::string describe_ranks(std::span<const topo::NodeId> ranks, const topo::Topology& topology);

// The closest candidate within a small edit distance, for "did you mean ...?"; empty if none.
std::string closest_match(std::string_view found, std::span<const std::string_view> candidates);

// Splits on commas and trims blanks around each piece; empty pieces are kept so that callers
// can reject "1,,2".
std::vector<std::string_view> split_list(std::string_view text);

}  // namespace collsim::cli
