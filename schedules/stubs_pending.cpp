#include "schedules/algorithms.hpp"
#include "topology/error.hpp"

namespace collsim::sched::detail {

void hierarchical(Builder&, const Job&, const std::vector<std::vector<RankId>>&) {
  throw InputError("", "--algo", "hier is not implemented yet");
}

}  // namespace collsim::sched::detail
