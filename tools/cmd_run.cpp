#include "tools/commands.hpp"

namespace collsim::cli {

void add_run_commands(CLI::App& /*app*/) {}

}  // namespace collsim::cli
