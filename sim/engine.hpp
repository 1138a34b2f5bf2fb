#pragma once
// Replays a plan on a topology and reports when it finishes (docs/cost-model.md).
#include <cstdint>

#include "schedules/plan.hpp"
#include "topology/routing.hpp"

namespace collsim::sim {

struct Options;  // defined by the engine: traces, capacity changes, background flows
struct Result;   // defined by the engine: at least `double time` (s) and `std::uint64_t events`

}  // namespace collsim::sim
