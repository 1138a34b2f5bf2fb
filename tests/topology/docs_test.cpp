#include <catch2/catch.hpp>
#include <filesystem>

#include "tests/common/files.hpp"
#include "topology/loader.hpp"
#include "topology_test_util.hpp"

using namespace collsim;

TEST_CASE("every JSON example of docs/topology-format.md loads") {
  const std::string doc =
      test::read_file(std::string(COLLSIM_SOURCE_DIR) + "/docs/topology-format.md");
  REQUIRE(!doc.empty());
  int examples = 0;
  for (std::size_t at = doc.find("```json\n"); at != std::string::npos;
       at = doc.find("```json\n", at + 1)) {
    const std::size_t begin = at + 8, end = doc.find("```", begin);
    REQUIRE(end != std::string::npos);
    const std::string text = doc.substr(begin, end - begin);
    INFO(text);
    CHECK_NOTHROW(topo::parse_topology(text, "example.json"));
    ++examples;
  }
  CHECK(examples >= 4);
}

TEST_CASE("every shipped config validates and cites its sources") {
  int configs = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(COLLSIM_SOURCE_DIR) + "/configs")) {
    if (entry.path().extension() != ".json") continue;
    const std::string text = test::read_file(entry.path());
    // Topology files have "nodes" or "servers"; other JSON (calibration examples) is skipped.
    if (text.find("\"nodes\"") == std::string::npos) continue;
    INFO(entry.path().string());
    CHECK_NOTHROW(topo::load_topology(entry.path().string()));
    CHECK(text.find("\"sources\"") != std::string::npos);
    ++configs;
  }
  CHECK(configs >= 5);
}
