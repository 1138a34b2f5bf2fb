#include "schedules/algorithms.hpp"
#include "topology/error.hpp"

namespace collsim::sched::detail {

namespace {
[[noreturn]] void pending(const char* name) {
  throw InputError("", "--algo", std::string(name) + " is not implemented yet");
}
}  // namespace

void halving_doubling(Builder&, const Job&) {
  pending("rhd");
}
void recursive_doubling(Builder&, const Job&) {
  pending("rd");
}
void hierarchical(Builder&, const Job&, const std::vector<std::vector<RankId>>&) {
  pending("hier");
}

}  // namespace collsim::sched::detail
