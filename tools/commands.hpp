#pragma once
// Each group of subcommands lives in its own file and registers itself on the root app.
#include <CLI/CLI.hpp>

namespace collsim::cli {

void add_topo_commands(CLI::App& app);     // topo show|validate|route|dot
void add_plan_commands(CLI::App& app);     // plan (generate), plan verify|show
void add_run_commands(CLI::App& app);      // run, sweep
void add_backend_commands(CLI::App& app);  // calibrate, validate

}  // namespace collsim::cli
