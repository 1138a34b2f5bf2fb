#pragma once
// The JSON form of a plan (docs/plan-format.md): written by `collsim plan`, read by every
// command that takes a plan file. Reading validates like the topology loader: every problem is
// reported at once, each naming the JSON pointer of the op or field, what was found and what
// is expected.
#include <iosfwd>
#include <string>
#include <string_view>

#include "schedules/plan.hpp"
#include "topology/topology.hpp"

namespace collsim::sched {

// Writes the plan; with a topology, ranks are written as GPU names, otherwise as node ids.
// The output depends only on the plan (and names): same plan, same bytes.
void write_plan(std::ostream& out, const Plan& plan, const topo::Topology* topology = nullptr);
void save_plan(const std::string& path, const Plan& plan, const topo::Topology* topology = nullptr);

// Reads a plan. Ranks given by GPU name are resolved in `topology`; without one, ranks keep
// kNoNode as their GPU (enough to verify or show a plan, not to simulate it). Throws
// InputError listing every problem.
Plan load_plan(const std::string& path, const topo::Topology* topology = nullptr);
Plan parse_plan(std::string_view text, const std::string& file,
                const topo::Topology* topology = nullptr);

}  // namespace collsim::sched
