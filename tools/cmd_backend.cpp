#include "tools/commands.hpp"

namespace collsim::cli {

void add_backend_commands(CLI::App& /*app*/) {}

}  // namespace collsim::cli
