// The collsim command line. Exit status: 0 success, 1 a check failed (for example wrong elements
// after an execution), 2 bad input or usage, 3 an internal error (a bug in collsim).
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "tools/commands.hpp"
#include "tools/exit_codes.hpp"
#include "tools/huge_pages_option.hpp"
#include "topology/error.hpp"
#include "topology/freed_memory.hpp"
#include "topology/huge_pages.hpp"

namespace {

int run(int argc, char** argv) {
  using namespace collsim;
  CLI::App app{"collsim: simulate GPU collective communication on a cluster described in JSON"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "collsim 0.1.0");
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "Log what collsim is doing to stderr");
  std::string huge_pages = "hot";
  cli::add_huge_pages_option(app, huge_pages);
  app.parse_complete_callback([&] {
    spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::warn);
    huge_pages::set_advice(cli::huge_pages_advice(huge_pages));
  });
  spdlog::set_pattern("collsim: %l: %v");

  cli::add_topo_commands(app);
  cli::add_plan_commands(app);
  cli::add_run_commands(app);
  cli::add_backend_commands(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return cli::kExitUsage;
  } catch (const InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return cli::kExitUsage;
  } catch (const cli::CheckFailed& e) {
    std::fprintf(stderr, "check failed: %s\n", e.what());
    return cli::kExitCheckFailed;
  } catch (const InternalError& e) {
    std::fprintf(stderr,
                 "internal error: %s\nThis is a bug in collsim. Please report it with the command "
                 "line and the input files attached.\n",
                 e.what());
    return cli::kExitInternal;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory; try a smaller problem or --max-memory\n");
    return cli::kExitInternal;
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "internal error: %s\nThis is a bug in collsim. Please report it with the command "
                 "line and the input files attached.\n",
                 e.what());
    return cli::kExitInternal;
  }
  return cli::kExitOk;
}

}  // namespace

// Building the command line can throw too (bad_alloc); nothing leaves main as an exception.
int main(int argc, char** argv) {
  collsim::keep_freed_memory();  // a sweep runs many simulations in one process
  try {
    return run(argc, argv);
  } catch (...) {
    std::fputs(
        "internal error: an exception escaped the command line\nThis is a bug in collsim. "
        "Please report it with the command line and the input files attached.\n",
        stderr);
    return collsim::cli::kExitInternal;
  }
}
