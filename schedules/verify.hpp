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
// Limits (docs/plan-format.md): the values are checked along one legal order, so two
// conflicting accesses that the plan leaves unordered are not detected unless they make that
// order's result wrong. Cost is O(ops x (log segments + p)) time; plans of p <= 64 ranks and a
// few hundred thousand ops take well under a second.
#include <string>
#include <vector>

#include "schedules/plan.hpp"

namespace collsim::sched {

struct VerifyReport {
  std::vector<std::string> problems;  // empty when the plan is correct
  std::size_t ops_run = 0;            // ops the symbolic execution reached
  bool ok() const { return problems.empty(); }
};

// Never throws for a wrong plan: every problem becomes a line of the report. `max_problems`
// bounds the report (a last line counts the rest).
VerifyReport verify(const Plan& plan, std::size_t max_problems = 20);

// Bytes of `buffer` the plan's collective gives each rank (input and output; scratch and host
// are unbounded and return 0).
Bytes buffer_bytes(const Plan& plan, BufferId buffer);

}  // namespace collsim::sched
