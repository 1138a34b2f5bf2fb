#include "tools/huge_pages_option.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

using namespace collsim;
using huge_pages::Advice;

namespace {
// The advice that parsing `args` with the default "hot" gives; nothing when refused.
std::optional<Advice> parsed(std::vector<std::string> args) {
  CLI::App app{"test"};
  std::string value = "hot";
  cli::add_huge_pages_option(app, value);
  app.add_subcommand("run");
  args.insert(args.begin(), "collsim");
  std::vector<char*> argv;
  argv.reserve(args.size());
  for (std::string& a : args) argv.push_back(a.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
    return std::nullopt;
  }
  return cli::huge_pages_advice(value);
}
}  // namespace

TEST_CASE("the huge pages option takes a mode, bare means all, and the environment agrees",
          "[cli]") {
  ::unsetenv("COLLSIM_HUGE_PAGES");
  CHECK(parsed({"run"}) == Advice::hot);
  CHECK(parsed({"--huge-pages", "run"}) == Advice::all);
  CHECK(parsed({"--huge-pages=off", "run"}) == Advice::off);
  CHECK(parsed({"--huge-pages=hot", "run"}) == Advice::hot);
  CHECK(parsed({"--huge-pages=all", "run"}) == Advice::all);
  CHECK(parsed({"--huge-pages", "off", "run"}) == Advice::off);
  CHECK(parsed({"--huge-pages=cold", "run"}) == std::nullopt);
  const std::pair<const char*, std::optional<Advice>> from_env[] = {
      {"1", Advice::all},   {"true", Advice::all}, {"on", Advice::all},    {"yes", Advice::all},
      {"all", Advice::all}, {"hot", Advice::hot},  {"0", Advice::off},     {"false", Advice::off},
      {"no", Advice::off},  {"off", Advice::off},  {"maybe", std::nullopt}};
  for (const auto& [word, advice] : from_env) {
    INFO("COLLSIM_HUGE_PAGES=" << word);
    ::setenv("COLLSIM_HUGE_PAGES", word, 1);
    CHECK(parsed({"run"}) == advice);
    CHECK(parsed({"--huge-pages=off", "run"}) == Advice::off);  // the command line wins
  }
  ::unsetenv("COLLSIM_HUGE_PAGES");
}
