// The tests' scratch folder (tests/common/files.hpp) goes when its process ends: every test case
// runs in a process of its own, and folders that stayed piled up in /tmp by the hundred.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "tests/common/files.hpp"
#include "tests/reliability/process.hpp"

using namespace collsim;

// Hidden: run only by the case below, in a process of its own.
TEST_CASE("scratch folder of a child process", "[.scratch-child]") {
  const auto dir = test::scratch_dir();
  std::ofstream(dir / "kept-until-exit.txt") << "x";
  REQUIRE(std::filesystem::exists(dir / "kept-until-exit.txt"));
  std::cout << "scratch: " << dir.string() << '\n';
}

TEST_CASE("a test process's scratch folder is removed when the process exits", "[reliability]") {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const reliability::Outcome o =
      reliability::run_process({"[.scratch-child]"}, std::chrono::seconds(60), self);
  INFO(o.out << o.err);
  REQUIRE(o.exit_code == 0);
  const auto at = o.out.find("scratch: ");
  REQUIRE(at != std::string::npos);
  const std::string dir = o.out.substr(at + 9, o.out.find('\n', at) - at - 9);
  CHECK(dir.find("collsim-test-") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir));
}
