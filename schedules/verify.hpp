#pragma once
// The plan verifier: proves, by symbolic execution, that a plan computes its collective.
//
// Every element of every buffer holds a symbolic value: a multiset of terms "input of rank q at
// element e + d". Inputs start as one term each; copies and transfers move values (shifting d),
// reductions add multisets. The ops run in one order that respects streams, dependencies and
// send/recv matching; if no such order reaches every op, the plan can deadlock and the ops that
// can never run are named. At the end each output must hold the collective's value: for
// allreduce every rank's contribution exactly once at the same element, for the others the
// right piece.
//
// Along the way, vector clocks over the plan's streams find conflicting accesses that nothing
// orders: a write and another access to the same bytes of one rank's buffer with neither
// dependency, stream order nor a transfer between them. That check costs O(ops x streams) and
// is skipped (races_checked false) beyond 4e8; the value check always runs.
// Cost otherwise: O(ops x (log segments + p)); plans of p <= 64 ranks and a few hundred
// thousand ops take well under a second (docs/plan-format.md).
#include <string>
#include <vector>

#include "schedules/plan.hpp"

namespace collsim::sched {

struct VerifyReport {
  std::vector<std::string> problems;  // empty when the plan is correct
  std::size_t ops_run = 0;            // ops the symbolic execution reached
  bool races_checked = false;         // false when the plan was too large for the race check
  bool ok() const { return problems.empty(); }
};

// Never throws for a wrong plan: every problem becomes a line of the report. `max_problems`
// bounds the report (a last line counts the rest).
VerifyReport verify(const Plan& plan, std::size_t max_problems = 20);

// Bytes of `buffer` the plan's collective gives each rank (input and output; scratch and host
// are unbounded and return 0).
Bytes buffer_bytes(const Plan& plan, BufferId buffer);

}  // namespace collsim::sched
