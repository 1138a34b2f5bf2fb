// The calibrate and validate commands end to end, through the collsim binary.
#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cuda_backend/calibration.hpp"
#include "cuda_backend/cuda_executor.hpp"
#include "tests/common/files.hpp"

using namespace collsim;

namespace {

struct Outcome {
  int status = -1;
  std::string output;  // stdout and stderr together
};

Outcome run_collsim(const std::string& arguments, const std::filesystem::path& dir) {
  const auto log = dir / "output.txt";
  const std::string command =
      std::string("\"") + COLLSIM_BINARY + "\" " + arguments + " > \"" + log.string() + "\" 2>&1";
  const int raw = std::system(command.c_str());
  Outcome o;
  o.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  o.output = test::read_file(log);
  return o;
}

// A fresh folder `name` in this process's scratch folder.
std::filesystem::path scratch_dir(const std::string& name) {
  const auto dir = test::scratch_dir() / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// `collsim validate --backend host ARGUMENTS` (on configs/one-gpu-4ranks.json unless they name a
// topology), one repetition per row and no warm-up, with the rows it wrote as CSV split into
// cells (the header first).
struct Validation {
  Outcome outcome;
  std::vector<std::vector<std::string>> csv;
  // Column `name` of every row after the header, joined with spaces and ended with one.
  std::string column(const std::string& name) const {
    std::string out;
    if (csv.empty()) return out;
    const auto at =
        static_cast<std::size_t>(std::find(csv[0].begin(), csv[0].end(), name) - csv[0].begin());
    for (std::size_t i = 1; i < csv.size(); ++i)
      if (at < csv[i].size()) out += csv[i][at] + " ";
    return out;
  }
};

Validation validate_host(const std::string& arguments, const std::filesystem::path& dir) {
  const auto file = dir / "validation.csv";
  std::filesystem::remove(file);
  Validation v;
  // The shipped default, found from any directory the tests run in.
  const std::string topology =
      arguments.find("--topology") == std::string::npos
          ? " --topology " + std::string(COLLSIM_SOURCE_DIR) + "/configs/one-gpu-4ranks.json"
          : "";
  v.outcome = run_collsim("validate --backend host --reps 1 --warmup 0 --out " + file.string() +
                              topology + " " + arguments,
                          dir);
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::stringstream fields(line);
    for (std::string cell; std::getline(fields, cell, ',');) cells.push_back(cell);
    v.csv.push_back(cells);
  }
  return v;
}

}  // namespace

TEST_CASE("cli: calibrate --backend host writes a file the loader accepts", "[backend][cli]") {
  REQUIRE(std::filesystem::exists(COLLSIM_BINARY));
  const auto dir = scratch_dir("calibrate");
  const auto file = dir / "calibration.json";
  const auto r = run_collsim(
      "calibrate --backend host --sizes 4KiB,64KiB --reps 2 --warmup 0 "
      "--out " +
          file.string(),
      dir);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("reduce_fp32"));
  const auto c = backend::load_calibration(file.string());
  CHECK(c.backend == "host");
  CHECK(c.fits.size() == 13);
}

TEST_CASE("cli: validate --backend host checks data and writes CSV", "[backend][cli]") {
  REQUIRE(std::filesystem::exists(COLLSIM_BINARY));
  const auto dir = scratch_dir("validate");
  const auto csv = dir / "validation.csv";
  const std::string topology = std::string(COLLSIM_SOURCE_DIR) + "/configs/one-gpu-4ranks.json";
  const auto r =
      run_collsim("validate --backend host --topology " + topology +
                      " --sizes 64KiB --chunks 1,2 --reps 1 --warmup 0 --out " + csv.string(),
                  dir);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("median |error|"));
  std::ifstream in(csv);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) ++lines;
  // Header + naive + ring k=1 + ring k=2.
  CHECK(lines == 4);
}

TEST_CASE("cli: validate --algos all runs every algorithm; auto is refused", "[backend][cli]") {
  REQUIRE(std::filesystem::exists(COLLSIM_BINARY));
  const auto dir = scratch_dir("validate-algos");
  const std::string topology = std::string(COLLSIM_SOURCE_DIR) + "/configs/one-gpu-4ranks.json";
  const auto v =
      validate_host("--topology " + topology + " --algos all --sizes 16KiB --chunks 1", dir);
  auto r = v.outcome;
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(v.column("algorithm") == "ring tree rhd rd hier direct naive ");
  // A summary line per algorithm before the overall one.
  CHECK_THAT(r.output, Catch::Contains("\nrhd    median |error|") &&
                           Catch::Contains("\nnaive  median |error|") &&
                           Catch::Contains("\nmedian |error|"));
  // A name given twice runs once.
  r = run_collsim("validate --backend host --topology " + topology +
                      " --algos ring,naive,ring --sizes 16KiB --chunks 1 --reps 1 --warmup 0",
                  dir);
  CHECK(r.status == 0);
  CHECK(r.output.find("ring     1") == r.output.rfind("ring     1"));
  CHECK(r.output.find("naive    1") != std::string::npos);
  r = run_collsim("validate --backend host --sizes 1MiB,4MiB --max-memory 32MiB", dir);
  CHECK(r.status == 2);
  CHECK_THAT(r.output,
             Catch::Contains("size 4 MiB needs about") && Catch::Contains("raise --max-memory"));
  CHECK_THAT(r.output, !Catch::Contains("median |error|"));
  r = run_collsim("validate --backend host --algos ring,auto", dir);
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Catch::Contains("--algos") && Catch::Contains("name the algorithms"));
  r = run_collsim("validate --backend host --algos rign", dir);
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Catch::Contains("did you mean \"ring\""));
}

TEST_CASE("cli: validate --collective runs the algorithms that implement it", "[backend][cli]") {
  REQUIRE(std::filesystem::exists(COLLSIM_BINARY));
  const auto dir = scratch_dir("validate-collective");
  const auto v = validate_host("--collective broadcast --algos all --sizes 16KiB --chunks 1", dir);
  INFO(v.outcome.output);
  CHECK(v.outcome.status == 0);
  CHECK_THAT(v.outcome.output, Catch::Contains("validating broadcast on"));
  CHECK(v.column("algorithm") == "ring tree direct naive ");
  CHECK(v.column("collective") == "broadcast broadcast broadcast broadcast ");
  CHECK(v.column("wrong_elements") == "0 0 0 0 ");
  auto r = run_collsim("validate --backend host --collective broadcast --algos rhd", dir);
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Catch::Contains("rhd does not implement broadcast") &&
                           Catch::Contains("ring, tree, direct, naive"));
  r = run_collsim("validate --backend host --collective allgathr", dir);
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Catch::Contains("allgather"));
}

TEST_CASE("cli: validate --host-memory pageable stages through pageable host buffers",
          "[backend][cli]") {
  REQUIRE(std::filesystem::exists(COLLSIM_BINARY));
  const auto dir = scratch_dir("validate-pageable");
  // Ranks without peer-to-peer stage every transfer through host memory; the H200's calibration
  // charges its pageable staging 0.72 and 0.64 bytes of a 7.85 GB/s memcpy per byte.
  const std::string source = COLLSIM_SOURCE_DIR;
  const std::string rows = "--topology " + source +
                           "/configs/one-gpu-4ranks-staged.json --calibration " + source +
                           "/docs/data/h200-2026-11-30/calibration.json --algos ring "
                           "--sizes 1MiB --chunks 2 --no-links";
  const auto pageable = validate_host(rows + " --host-memory pageable", dir);
  INFO(pageable.outcome.output);
  CHECK(pageable.outcome.status == 0);
  CHECK_THAT(pageable.outcome.output, Catch::Contains("fp32, pageable host memory,"));
  CHECK(pageable.column("wrong_elements") == "0 ");
  const auto pinned = validate_host(rows, dir);
  INFO(pinned.outcome.output);
  CHECK(pinned.outcome.status == 0);
  CHECK_THAT(pinned.outcome.output, Catch::Contains("fp32, pinned host memory,"));
  // Each of the 4 ranks copies 2 x 3/4 MiB to the host and as much back, all through the one
  // memcpy: the pageable row takes at least that traffic's time, plus latencies of tens of us,
  // where the pinned row's copies cross only their own PCIe links at 52 GB/s.
  const double memcpy_bound = 4 * 1.5 * 1048576 * (0.7206 + 0.6402) / 7.848885777768857e9;
  const double predicted = std::stod(pageable.column("predicted_s"));
  CHECK(predicted > memcpy_bound);
  CHECK(predicted < 1.1 * memcpy_bound);
  CHECK(std::stod(pinned.column("predicted_s")) < predicted / 4);
  const auto r = run_collsim("validate --backend host --host-memory swap", dir);
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Catch::Contains("--host-memory") && Catch::Contains("pageable"));
}

TEST_CASE("cli: validate --dtype runs every row in that type", "[backend][cli]") {
  REQUIRE(std::filesystem::exists(COLLSIM_BINARY));
  const auto dir = scratch_dir("validate-dtype");
  const auto v = validate_host("--dtype bf16 --sizes 16KiB --chunks 1", dir);
  INFO(v.outcome.output);
  CHECK(v.outcome.status == 0);
  CHECK_THAT(v.outcome.output, Catch::Contains("validating allreduce on") &&
                                   Catch::Contains("one-gpu-4ranks.json, bf16,"));
  CHECK(v.column("dtype") == "bf16 bf16 ");
  CHECK(v.column("collective") == "allreduce allreduce ");
  const auto r = run_collsim("validate --backend host --dtype int8", dir);
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Catch::Contains("--dtype") && Catch::Contains("bf16"));
}

TEST_CASE("cli: backend errors are usage errors with a way out", "[backend][cli]") {
  REQUIRE(std::filesystem::exists(COLLSIM_BINARY));
  const auto dir = scratch_dir("errors");
  auto r = run_collsim("calibrate --backend quantum --out " + (dir / "c.json").string(), dir);
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Catch::Contains("expected 'cuda' or 'host'"));
  r = run_collsim("calibrate --backend host --reps 1 --out " + (dir / "c.json").string(), dir);
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Catch::Contains("--reps"));
  if (!backend::cuda_available()) {
    r = run_collsim("calibrate --backend cuda --out " + (dir / "c.json").string(), dir);
    CHECK(r.status == 2);
    CHECK_THAT(r.output, Catch::Contains("use --backend host"));
  }
}
