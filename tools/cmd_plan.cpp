#include "tools/commands.hpp"

namespace collsim::cli {

void add_plan_commands(CLI::App& /*app*/) {}

}  // namespace collsim::cli
