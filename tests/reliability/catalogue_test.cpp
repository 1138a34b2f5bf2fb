// The catalogue of malformed and hostile inputs (tests/reliability/cases.json): every case runs
// through the collsim binary and, where the input is a file with a library loader, through the
// loader too. The contract for bad input is the same everywhere: exit status 2, a message on
// stderr naming the file, the JSON path or line, what was found and what was expected; never a
// crash, a hang, an "internal error" or NaN/Inf on stdout.
#include <algorithm>
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "cuda_backend/calibration.hpp"
#include "schedules/msccl_import.hpp"
#include "schedules/plan_json.hpp"
#include "sim/engine.hpp"
#include "tests/reliability/process.hpp"
#include "topology/error.hpp"
#include "topology/loader.hpp"
#include "topology/routing.hpp"

namespace collsim::reliability {
namespace {

using nlohmann::json;

const std::string kInputs = "tests/reliability/inputs/";

const json& cases() {
  static const json all = json::parse(
      read_file(std::filesystem::path(COLLSIM_SOURCE_DIR) / "tests/reliability/cases.json"));
  return all;
}

std::vector<json> cases_of(const std::string& loader) {
  std::vector<json> out;
  for (const json& c : cases())
    if (c.at("loader") == loader) out.push_back(c);
  return out;
}

// Paths are relative to the repository root, where run_process starts collsim; the library
// calls get the same text prefixed with the root so that diagnostics echo it verbatim.
std::string input_path(const json& c) {
  return kInputs + c.at("input").get<std::string>();
}

std::string expand(const std::string& arg, const json& c) {
  if (arg == "{input}") return input_path(c);
  if (arg == "{dgx}") return "configs/dgx-h100.json";
  if (arg == "{two}") return kInputs + "topology/valid-two.json";
  if (arg == "{one}") return kInputs + "topology/valid-one.json";
  return arg;
}

std::vector<std::string> arguments(const json& c) {
  std::vector<std::string> raw;
  const std::string loader = c.at("loader");
  if (c.contains("args"))
    raw = c.at("args").get<std::vector<std::string>>();
  else if (loader == "topology")
    raw = {"topo", "validate", "{input}"};
  else if (loader == "calibration")
    raw = {"run", "--topology", "{two}", "--size", "1MiB", "--calibration", "{input}"};
  else if (loader == "plan")
    raw = {"plan", "verify", "{input}"};
  else if (loader == "msccl")
    raw = {"plan", "import", "{input}", "--size", "1MiB"};
  std::vector<std::string> out;
  out.reserve(raw.size());
  for (const auto& a : raw) out.push_back(expand(a, c));
  return out;
}

// What stderr must contain. File loaders: the path and, through `topo validate`, the JSON path
// and the message; calibration through `run` only the path, since run reports the calibration
// file through its own wording.
std::vector<std::string> stderr_fragments(const json& c) {
  if (c.contains("stderr")) return c.at("stderr").get<std::vector<std::string>>();
  std::vector<std::string> out;
  if (c.at("exit") == 0) return out;
  out.push_back(input_path(c));
  if (c.at("loader") != "calibration") {
    if (!c.at("where").get<std::string>().empty()) out.push_back(c.at("where"));
    if (!c.at("message").get<std::string>().empty()) out.push_back(c.at("message"));
  }
  return out;
}

bool has_nan_or_inf(const std::string& text) {
  static const std::regex bad(R"((^|[^A-Za-z_])(nan|inf|infinity)([^A-Za-z_]|$))",
                              std::regex::icase);
  return std::regex_search(text, bad);
}

std::size_t count_lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

void check_through_binary(const json& c) {
  const auto args = arguments(c);
  std::string command = "collsim";
  for (const auto& a : args) command += " " + a;
  INFO("case " << c.at("name").get<std::string>() << ": " << command);
  const Outcome o = run_process(args);
  INFO("exit " << o.exit_code << ", signal " << o.signal << "\nstderr:\n"
               << o.err << "\nstdout:\n"
               << o.out.substr(0, 2000));
  REQUIRE_FALSE(o.timed_out);
  REQUIRE(o.signal == 0);
  CHECK(o.exit_code == c.at("exit").get<int>());
  CHECK(o.err.find("internal error") == std::string::npos);
  CHECK(o.err.find("terminate called") == std::string::npos);
  CHECK_FALSE(has_nan_or_inf(o.out));
  if (c.at("exit") != 0) {
    CHECK_FALSE(o.err.empty());
    // One problem, one short message: cascades of follow-on errors drown the cause.
    CHECK(count_lines(o.err) <= 8);
  }
  for (const auto& f : stderr_fragments(c)) {
    INFO("stderr should contain: " << f);
    CHECK(o.err.find(f) != std::string::npos);
  }
  if (c.contains("stdout"))
    for (const auto& f : c.at("stdout").get<std::vector<std::string>>()) {
      INFO("stdout should contain: " << f);
      CHECK(o.out.find(f) != std::string::npos);
    }
}

// The library must throw InputError whose first diagnostic names the file as given, with one
// diagnostic at the expected JSON path or line carrying the expected words.
template <typename Load>
void check_through_library(const json& c, Load load) {
  const std::string path = std::string(COLLSIM_SOURCE_DIR) + "/" + input_path(c);
  INFO("case " << c.at("name").get<std::string>() << ": " << path);
  // 0: the input is good; 1: it loads, and the check run on it (plan verify) fails.
  if (c.at("exit") == 0 || c.at("exit") == 1) {
    CHECK_NOTHROW(load(path));
    return;
  }
  try {
    load(path);
    FAIL("no InputError was thrown");
  } catch (const InputError& e) {
    INFO("what(): " << e.what());
    REQUIRE_FALSE(e.diagnostics().empty());
    CHECK(e.diagnostics().front().file == path);
    CHECK(std::string(e.what()).find(path) != std::string::npos);
    const std::string where = c.at("where");
    const std::string message = c.at("message");
    bool found = false;
    for (const Diagnostic& d : e.diagnostics())
      found = found || (d.where.find(where) != std::string::npos &&
                        d.message.find(message) != std::string::npos);
    INFO("expected a diagnostic at \"" << where << "\" containing \"" << message << "\"");
    CHECK(found);
  } catch (const std::exception& e) {
    FAIL("expected InputError; got another exception: " << e.what());
  }
}

}  // namespace

TEST_CASE("the catalogue holds at least 60 hostile inputs and every input file is used",
          "[reliability][catalogue]") {
  CHECK(cases().size() >= 60);
  std::set<std::string> names, used;
  for (const json& c : cases()) {
    INFO(c.dump());
    CHECK(names.insert(c.at("name").get<std::string>()).second);
    // Every case must pass: there is no allowed-to-fail list any more.
    CHECK_FALSE(c.contains("known_bug"));
    if (c.contains("input")) used.insert(input_path(c));
  }
  const auto root = std::filesystem::path(COLLSIM_SOURCE_DIR);
  for (const auto& e : std::filesystem::recursive_directory_iterator(root / kInputs)) {
    if (!e.is_regular_file()) continue;
    const auto rel = std::filesystem::relative(e.path(), root).string();
    // Fixtures that cases use through placeholders rather than "input".
    if (rel.ends_with("/valid-one.json") || rel.ends_with("calibration/valid.json")) continue;
    INFO("input file not used by any case: " << rel);
    CHECK(used.count(rel) == 1);
  }
}

TEST_CASE("topology catalogue through collsim topo validate", "[reliability][topology]") {
  for (const json& c : cases_of("topology")) check_through_binary(c);
}

TEST_CASE("topology catalogue through topo::load_topology", "[reliability][topology]") {
  for (const json& c : cases_of("topology"))
    check_through_library(c, [](const std::string& p) { return topo::load_topology(p); });
}

TEST_CASE("calibration catalogue through collsim run --calibration", "[reliability][calibration]") {
  for (const json& c : cases_of("calibration")) check_through_binary(c);
}

TEST_CASE("calibration catalogue through backend::load_calibration", "[reliability][calibration]") {
  for (const json& c : cases_of("calibration"))
    check_through_library(c, [](const std::string& p) { return backend::load_calibration(p); });
  // The well-formed file is the control: the loader accepts it.
  CHECK_NOTHROW(backend::load_calibration(std::string(COLLSIM_SOURCE_DIR) + "/" + kInputs +
                                          "calibration/valid.json"));
}

TEST_CASE("plan JSON catalogue through collsim plan verify", "[reliability][plan]") {
  for (const json& c : cases_of("plan")) check_through_binary(c);
}

TEST_CASE("plan JSON catalogue through sched::load_plan", "[reliability][plan]") {
  for (const json& c : cases_of("plan"))
    check_through_library(c, [](const std::string& p) { return sched::load_plan(p); });
}

TEST_CASE("MSCCL XML catalogue through collsim plan import", "[reliability][msccl]") {
  for (const json& c : cases_of("msccl")) check_through_binary(c);
}

TEST_CASE("MSCCL XML catalogue through sched::import_msccl", "[reliability][msccl]") {
  for (const json& c : cases_of("msccl"))
    check_through_library(c, [](const std::string& p) { return sched::import_msccl(p, 1 << 20); });
}

TEST_CASE("a plan whose transfers wait on each other is an engine InputError, not a hang",
          "[reliability][plan]") {
  // The catalogue's deadlock plans, bound to the two GPUs of valid-two.json so that they can be
  // simulated: each rank's send waits for a receive the other rank's send would satisfy.
  const std::string root = std::string(COLLSIM_SOURCE_DIR) + "/" + kInputs;
  const topo::Topology t = topo::load_topology(root + "topology/valid-two.json");
  const topo::Router router(t);
  for (const char* name : {"plan/deadlock-cycle.json", "plan/dep-forward.json"}) {
    std::string text = read_file(root + name);
    const auto at = text.find("[null,null]");
    REQUIRE(at != std::string::npos);
    text.replace(at, 11, R"(["gpu0","gpu1"])");
    const sched::Plan plan = sched::parse_plan(text, name, &t);
    INFO(name);
    sim::Options options;
    options.plan_file = name;
    try {
      (void)sim::simulate(router, plan, options);
      FAIL("simulated a plan that can never finish");
    } catch (const InputError& e) {
      const std::string what = e.what();
      INFO(what);
      CHECK(what.find(name) != std::string::npos);
      CHECK(what.find("/ops/0") != std::string::npos);
      CHECK(what.find("deadlocks") != std::string::npos);
      // The chain names every op it passes through: "A waits for B, which waits for C".
      CHECK(what.find("waits for ,") == std::string::npos);
      CHECK(what.find(", which waits for ") != std::string::npos);
    }
  }
}

TEST_CASE("command-line catalogue", "[reliability][cli]") {
  for (const json& c : cases_of("cli")) check_through_binary(c);
}

TEST_CASE("the harness tells a crash, a hang and a clean exit apart", "[reliability][harness]") {
  // /bin/sh stands in for collsim so that the checks above are known to be able to fail.
  const Outcome crash = run_process({"-c", "kill -SEGV $$"}, std::chrono::seconds(30), "/bin/sh");
  CHECK(crash.signal == SIGSEGV);
  const Outcome hang = run_process({"-c", "sleep 30"}, std::chrono::seconds(1), "/bin/sh");
  CHECK(hang.timed_out);
  const Outcome ok = run_process({"-c", "echo inf; exit 2"}, std::chrono::seconds(30), "/bin/sh");
  CHECK(ok.exit_code == 2);
  CHECK(has_nan_or_inf(ok.out));
  CHECK_FALSE(has_nan_or_inf("time_us 12.5 info\n"));
}

}  // namespace collsim::reliability
