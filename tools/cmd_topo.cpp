#include "tools/commands.hpp"

namespace collsim::cli {

void add_topo_commands(CLI::App& /*app*/) {}

}  // namespace collsim::cli
