#pragma once
// Runs the collsim binary from the repository root and compares outputs with golden files.
//
// Golden files live in tests/cli/golden/. COLLSIM_UPDATE_GOLDEN=1 rewrites them from the current
// output instead of comparing; review the diff before committing it.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/common/files.hpp"

namespace collsim::cli_test {

struct CliResult {
  int status = -1;
  std::string out;
  std::string err;
};

using test::read_file;
using test::scratch_dir;

// `args` is a shell fragment appended to the binary's path; the working directory is the
// repository root (or `cwd`) so that relative paths such as tests/cli/data/two-gpus.json work.
inline CliResult run_cli(const std::string& args, const std::string& cwd = COLLSIM_SOURCE_DIR) {
  static int counter = 0;
  const auto dir = scratch_dir();
  const auto out = dir / ("out" + std::to_string(counter) + ".txt");
  const auto err = dir / ("err" + std::to_string(counter) + ".txt");
  ++counter;
  const std::string command = "cd '" + cwd + "' && '" COLLSIM_BINARY "' " + args + " >'" +
                              out.string() + "' 2>'" + err.string() + "' </dev/null";
  const int raw = std::system(command.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

inline void check_golden(const std::string& name, const std::string& actual) {
  const std::filesystem::path path =
      std::filesystem::path(COLLSIM_SOURCE_DIR) / "tests" / "cli" / "golden" / name;
  const char* update = std::getenv("COLLSIM_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << actual;
    WARN("rewrote golden file " << path.string());
    return;
  }
  INFO("golden file " << path.string()
                      << " (COLLSIM_UPDATE_GOLDEN=1 rewrites it from the current output)");
  REQUIRE(std::filesystem::exists(path));
  CHECK(read_file(path) == actual);
}

// The lines of a CSV text, split into fields (no quoting needed for result rows).
inline std::vector<std::vector<std::string>> csv_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    std::string field;
    std::istringstream l(line);
    while (std::getline(l, field, ',')) fields.push_back(field);
    if (!line.empty() && line.back() == ',') fields.emplace_back();
    rows.push_back(fields);
  }
  return rows;
}

}  // namespace collsim::cli_test
