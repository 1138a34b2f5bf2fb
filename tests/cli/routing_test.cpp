#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "tests/cli/cli_support.hpp"

using collsim::cli_test::run_cli;

namespace {

// time_us is the 9th CSV column (collective,algo,topology,ranks,size_bytes,count,dtype,chunks,
// time_us,...).
double time_us(const std::string& csv) {
  const auto row = csv.substr(csv.find('\n') + 1);
  std::size_t at = 0;
  for (int column = 0; column < 8; ++column) at = row.find(',', at) + 1;
  return std::stod(row.substr(at));
}

}  // namespace

TEST_CASE("ecmp spreads tree traffic over the spines that shortest-path routing piles onto one",
          "[cli][routing]") {
  // 64 ranks on 8 servers of the rail-optimised cluster: tree edges join GPUs of different
  // rails, whose traffic crosses the spine layer. With one shortest path per pair every such
  // flow between two leaves takes the same spine and they share it; hashed over the equal-cost
  // spines they share less, so the collective must finish strictly sooner.
  const std::string args =
      "run --topology configs/cluster-1024.json --algo tree --size 16MiB --chunks 2 "
      "--ranks 0-63 --format csv --no-wall --routing ";
  const auto ecmp = run_cli(args + "ecmp");
  const auto shortest = run_cli(args + "shortest");
  REQUIRE(ecmp.status == 0);
  REQUIRE(shortest.status == 0);
  CHECK(time_us(ecmp.out) < time_us(shortest.out));
}

TEST_CASE("routing is ecmp by default and a wrong name is a usage error", "[cli][routing]") {
  const auto table = run_cli("run --topology tests/cli/data/two-gpus.json --size 1MiB");
  REQUIRE(table.status == 0);
  CHECK(table.out.find("# routing     ecmp") != std::string::npos);
  const auto bad = run_cli("run --topology tests/cli/data/two-gpus.json --size 1MiB --routing x");
  CHECK(bad.status == 2);
  CHECK(bad.err.find("expected ecmp or shortest") != std::string::npos);
}

TEST_CASE("the symmetry flag runs one rank per orbit where routes allow, and says why not",
          "[cli][symmetry]") {
  const std::string args =
      "run --topology configs/dgx-h100.json --algo ring --size 8MiB --chunks 4 --no-wall ";
  const auto all = run_cli(args + "--format csv --routing shortest");
  const auto one = run_cli(args + "--format csv --routing shortest --symmetry");
  REQUIRE(all.status == 0);
  REQUIRE(one.status == 0);
  CHECK(std::abs(time_us(one.out) - time_us(all.out)) <= 1e-9 * time_us(all.out));
  CHECK(one.err.find("rotation by 1 ranks: 1 of 8 ranks simulated") != std::string::npos);

  const auto table = run_cli(args + "--routing shortest --symmetry");
  REQUIRE(table.status == 0);
  CHECK(table.out.find("# reproduce") != std::string::npos);
  CHECK(table.out.find("--symmetry") != std::string::npos);
  CHECK(table.out.find("# symmetry: one rank per orbit") != std::string::npos);

  // Hashed paths break the rotation on the cluster: every rank runs, and the note says so.
  const auto ecmp = run_cli(
      "run --topology configs/cluster-1024.json --algo ring --size 1MiB --ranks 0-63 --symmetry");
  REQUIRE(ecmp.status == 0);
  CHECK(ecmp.out.find("# symmetry: every rank simulated") != std::string::npos);
  CHECK(ecmp.out.find("--routing shortest") != std::string::npos);
}

TEST_CASE("the memory limit judges a symmetric run by the ranks it simulates", "[cli][symmetry]") {
  // Every rank of the 1024-GPU ring needs about 34.5 MiB, a rank per leaf group (256) a quarter.
  const std::string args =
      "run --topology configs/cluster-1024.json --size 1MiB --chunks 1 --routing shortest "
      "--max-memory 20MiB";
  const auto one = run_cli(args + " --symmetry");
  INFO(one.err);
  REQUIRE(one.status == 0);
  CHECK(one.out.find("rotation by 256 ranks: 256 of 1024 ranks simulated") != std::string::npos);
  const auto all = run_cli(args);
  CHECK(all.status == 2);
  CHECK(all.err.find("needs about 34.5 MiB") != std::string::npos);
}
