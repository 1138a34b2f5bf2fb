// Same inputs, same outputs, byte for byte: for every shipped topology (configs/*.json, found at
// test time so that a new config is covered without editing this file), the same `collsim run`
// twice, and `collsim sweep` on 1, 2 and 3 threads. Wall time is the only column allowed to
// differ (docs/cli.md); --no-wall prints it as 0, and the CSV comparison without --no-wall drops
// that one column by its header name.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/reliability/process.hpp"

namespace collsim::reliability {
namespace {

std::vector<std::string> shipped_configs() {
  std::vector<std::string> out;
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(COLLSIM_SOURCE_DIR) / "configs"))
    if (e.path().extension() == ".json") out.push_back("configs/" + e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// At most the first 8 GPUs (two servers of the multi-server configs), so that every run stays a
// fraction of a second.
std::string rank_selection(const std::string& config) {
  const Outcome o = run_process({"topo", "validate", config});
  REQUIRE(o.exit_code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(o.out, m, std::regex(R"(\((\d+) GPUs\))")));
  const int gpus = std::stoi(m[1].str());
  REQUIRE(gpus >= 1);
  return gpus == 1 ? "0" : "0-" + std::to_string(std::min(gpus, 8) - 1);
}

// Drops the column named `column` from CSV text (result rows have no quoted commas).
std::string drop_csv_column(const std::string& csv, const std::string& column) {
  std::istringstream in(csv);
  std::string line, out;
  long index = -1;
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    std::stringstream fs(line);
    for (std::string f; std::getline(fs, f, ',');) fields.push_back(f);
    if (index < 0) {
      const auto it = std::find(fields.begin(), fields.end(), column);
      REQUIRE(it != fields.end());
      index = it - fields.begin();
    }
    if (static_cast<std::size_t>(index) < fields.size()) fields.erase(fields.begin() + index);
    for (std::size_t i = 0; i < fields.size(); ++i) out += (i ? "," : "") + fields[i];
    out += '\n';
  }
  return out;
}

std::vector<std::string> with(std::vector<std::string> args,
                              std::initializer_list<std::string> more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

}  // namespace

TEST_CASE("collsim run gives byte-identical output twice for every shipped config",
          "[reliability][determinism]") {
  const auto configs = shipped_configs();
  REQUIRE_FALSE(configs.empty());
  for (const std::string& config : configs) {
    const std::vector<std::string> base = {
        "run",    "--topology", config,     "--ranks", rank_selection(config), "--size", "4MiB",
        "--algo", "auto",       "--chunks", "4"};
    for (const char* format : {"table", "csv", "json"}) {
      const auto args = with(base, {"--format", format, "--no-wall"});
      INFO(config << " --format " << format);
      const Outcome first = run_process(args);
      const Outcome second = run_process(args);
      INFO("stderr: " << first.err);
      REQUIRE(first.exit_code == 0);
      CHECK(second.exit_code == 0);
      CHECK_FALSE(first.out.empty());
      CHECK(first.out == second.out);
      CHECK(first.err == second.err);
    }
    // Without --no-wall only the wall_s column may differ.
    const auto csv = with(base, {"--format", "csv"});
    const Outcome a = run_process(csv);
    const Outcome b = run_process(csv);
    REQUIRE(a.exit_code == 0);
    CHECK(drop_csv_column(a.out, "wall_s") == drop_csv_column(b.out, "wall_s"));
  }
}

TEST_CASE("collsim sweep gives the same CSV with 1, 2 and 3 threads for every shipped config",
          "[reliability][determinism]") {
  for (const std::string& config : shipped_configs()) {
    // Algorithms that do not fit a config (hier without servers, say) fail their rows the same
    // way on every thread count, which is part of what is compared.
    const std::vector<std::string> base = {"sweep",
                                           "--topology",
                                           config,
                                           "--ranks",
                                           rank_selection(config),
                                           "--algo",
                                           "ring,tree,rhd,hier,direct,auto",
                                           "--size",
                                           "64KiB:16MiB:x16",
                                           "--chunks",
                                           "1,8",
                                           "--format",
                                           "csv",
                                           "--no-wall"};
    INFO(config);
    const Outcome one = run_process(with(base, {"--jobs", "1"}));
    INFO("stderr: " << one.err);
    CHECK(one.exit_code != 3);
    CHECK(std::count(one.out.begin(), one.out.end(), '\n') > 1);
    for (const char* jobs : {"2", "3"}) {
      const Outcome many = run_process(with(base, {"--jobs", jobs}));
      INFO("--jobs " << jobs);
      CHECK(many.exit_code == one.exit_code);
      CHECK(many.out == one.out);
      CHECK(many.err == one.err);
    }
  }
}

}  // namespace collsim::reliability
