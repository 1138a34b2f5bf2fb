// collsim plan and its subcommands, end to end through the binary: exit status 0 for a good
// plan, 1 for a wrong one (verify), 2 for a request that does not fit.
#include <catch2/catch.hpp>

#include "tests/cli/cli_support.hpp"

using collsim::cli_test::read_file;
using collsim::cli_test::run_cli;
using collsim::cli_test::scratch_dir;

TEST_CASE("collsim plan generates a plan that verify accepts and show describes", "[plan_cli]") {
  const std::string plan = (scratch_dir() / "ring.json").string();
  auto r = run_cli(
      "plan --algo ring --topology configs/dgx-h100.json --size 1MiB --chunks 2 "
      "--out '" +
      plan + "'");
  INFO(r.err);
  REQUIRE(r.status == 0);
  r = run_cli("plan verify '" + plan + "' --topology configs/dgx-h100.json");
  CHECK(r.status == 0);
  CHECK(r.out.find("ok:") != std::string::npos);
  r = run_cli("plan show '" + plan + "'");
  CHECK(r.status == 0);
  // 8 ranks, k = 2: 2 (p-1) k = 28 transfers per rank in a row on its send stream.
  CHECK(r.out.find("critical path: 28 ops") != std::string::npos);
  r = run_cli("plan simulate '" + plan + "' --topology configs/dgx-h100.json");
  CHECK(r.status == 0);
  CHECK(r.out.find("ring allreduce") != std::string::npos);
}

TEST_CASE("collsim plan verify exits 1 for a wrong plan", "[plan_cli]") {
  const std::string plan = (scratch_dir() / "empty.json").string();
  std::ofstream(plan) << R"({"format":"collsim-plan","version":1,"collective":"allreduce",)"
                         R"("size_bytes":8,"ranks":[null,null],"ops":[]})";
  const auto r = run_cli("plan verify '" + plan + "'");
  CHECK(r.status == 1);
  CHECK(r.err.find("rank 0 output bytes [0, 8) (chunk 0) is never written") != std::string::npos);
}

TEST_CASE("collsim plan refuses a pair that does not fit with exit 2", "[plan_cli]") {
  const auto r =
      run_cli("plan --algo rd --collective alltoall --topology configs/dgx-h100.json --size 1MiB");
  CHECK(r.status == 2);
  CHECK(r.err.find("algorithms for alltoall on 8 ranks: direct") != std::string::npos);
}

TEST_CASE("collsim plan import writes a plan that verifies", "[plan_cli]") {
  const std::string plan = (scratch_dir() / "imported.json").string();
  auto r =
      run_cli("plan import configs/msccl/ring-allreduce-4.xml --size 64KiB --out '" + plan + "'");
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(read_file(plan).find("\"algorithm\":\"msccl:ring-allreduce-4\"") != std::string::npos);
  r = run_cli("plan verify '" + plan + "'");
  CHECK(r.status == 0);
}
