// End-to-end tests of `collsim run` and `collsim sweep`: the binary is run on small topologies
// under tests/cli/data whose costs can be derived by hand.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/cli/cli_support.hpp"
#include "tools/report.hpp"

using namespace collsim::cli_test;

namespace {

const std::string kTwo = "--topology tests/cli/data/two-gpus.json";
const std::string kFour = "--topology tests/cli/data/four-gpus-switch.json";

// Column index of a CSV header field.
std::size_t column(const std::vector<std::string>& header, const std::string& name) {
  for (std::size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return i;
  FAIL("no column " << name);
  return 0;
}

// The CSV rows of a sweep that must succeed, each as its fields `names` joined by spaces.
std::vector<std::string> sweep_rows(const std::string& args,
                                    std::initializer_list<const char*> names) {
  const auto r = run_cli("sweep " + args + " --format csv --no-wall");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto rows = csv_rows(r.out);
  std::vector<std::string> out;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    std::string key;
    for (const char* name : names) key += (key.empty() ? "" : " ") + rows[i][column(rows[0], name)];
    out.push_back(key);
  }
  return out;
}

}  // namespace

TEST_CASE("run prints the golden table", "[cli][golden]") {
  const auto r = run_cli("run " + kTwo + " --algo ring --size 1GB --chunks 1");
  INFO(r.err);
  REQUIRE(r.status == 0);
  check_golden("run_two_gpus_table.txt", r.out);
}

TEST_CASE("run --format csv prints the golden header and row", "[cli][golden]") {
  const auto r =
      run_cli("run " + kTwo + " --algo ring --size 1GB --chunks 1 --format csv --no-wall");
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.rfind(std::string(collsim::cli::kCsvHeader) + "\n", 0) == 0);
  check_golden("run_two_gpus.csv", r.out);
}

TEST_CASE("ring allreduce on two GPUs takes 2 latencies + size / bandwidth", "[cli]") {
  // Ring allreduce on p = 2: 2(p-1) = 2 steps of S/p bytes over one 100 GB/s, 1 us link, and
  // nothing else costs anything in the file: t = 2 x (1 us + 0.5 GB / 100 GB/s) = 10002 us.
  // algbw = 1 GB / 10002 us = 99.98 GB/s; busbw = algbw x 2(p-1)/p = algbw.
  const auto r = run_cli("run " + kTwo + " --algo ring --size 1GB --format csv --no-wall");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto rows = csv_rows(r.out);
  REQUIRE(rows.size() == 2);
  const auto& h = rows[0];
  CHECK(std::stod(rows[1][column(h, "time_us")]) == Approx(10002).epsilon(1e-9));
  CHECK(std::stod(rows[1][column(h, "busbw_GBps")]) == Approx(1e9 / 10002e-6 / 1e9));
  CHECK(rows[1][column(h, "count")] == "250000000");
  CHECK(rows[1][column(h, "ranks")] == "2");
}

TEST_CASE("a pageable host buffer makes staged allreduce slower, and only that", "[cli]") {
  // The T4 box stages GPU-to-GPU data through host memory; a pageable buffer adds the host's
  // memcpy to every device-host copy, so the time can only grow. Two NVLink GPUs never stage.
  auto time_us = [](const std::string& args) {
    const auto r = run_cli("run " + args + " --format csv --no-wall");
    INFO(args << "\n" << r.err);
    REQUIRE(r.status == 0);
    const auto rows = csv_rows(r.out);
    REQUIRE(rows.size() == 2);
    return std::stod(rows[1][column(rows[0], "time_us")]);
  };
  const std::string t4 = "--topology configs/t4x4-pcie.json --algo ring --size 64MiB --chunks 4";
  CHECK(time_us(t4 + " --host-memory pageable") > 1.5 * time_us(t4));
  CHECK(time_us(t4 + " --host-memory pinned") == time_us(t4));
  const std::string nvlink = kTwo + " --algo ring --size 1GB";
  CHECK(time_us(nvlink + " --host-memory pageable") == time_us(nvlink));
  // The plan says so, and the table's reproduce line keeps the option.
  const auto plan = run_cli("plan " + t4 + " --host-memory pageable");
  CHECK_THAT(plan.out, Catch::Contains("\"host_memory\":\"pageable\""));
  const auto table = run_cli("run " + t4 + " --host-memory pageable --no-wall");
  CHECK_THAT(table.out, Catch::Contains("--host-memory pageable"));
}

TEST_CASE("bus bandwidth never exceeds what the links allow", "[cli]") {
  // Any allreduce must move 2(p-1)/p x S bytes through each GPU's port, so busbw = 2(p-1)/p x
  // S / t can at most equal the port bandwidth: 100 GB/s on two-gpus, 50 GB/s on the switch.
  for (const auto& [topology, limit] : {std::pair{kTwo, 100.0}, std::pair{kFour, 50.0}}) {
    const auto r = run_cli("sweep " + topology +
                           " --algo ring,tree,rhd,rd,direct,naive --size 1KiB:1GiB:x32 "
                           "--chunks 1,8 --format csv --no-wall --jobs 2");
    INFO(topology << "\n" << r.err);
    REQUIRE((r.status == 0 || r.status == 2));
    const auto rows = csv_rows(r.out);
    REQUIRE(rows.size() > 1);
    const std::size_t busbw = column(rows[0], "busbw_GBps");
    std::size_t checked = 0;
    for (std::size_t i = 1; i < rows.size(); ++i) {
      if (rows[i][busbw].empty()) continue;  // a point the algorithm does not fit
      INFO(r.out.substr(0, 2000));
      CHECK(std::stod(rows[i][busbw]) <= limit * (1 + 1e-12));
      ++checked;
    }
    CHECK(checked >= 8);  // ring alone gives 5 sizes x 2 chunk counts = 10 rows
  }
}

TEST_CASE("json lines carry the CSV keys", "[cli]") {
  const auto r =
      run_cli("run " + kFour + " --algo ring --size 1MiB --chunks 4 --format json --no-wall");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  std::string keys;
  for (const auto& [key, value] : j.items()) keys += (keys.empty() ? "" : ",") + key;
  // nlohmann::json sorts keys; compare as sets by sorting the CSV header too.
  std::vector<std::string> header = csv_rows(collsim::cli::kCsvHeader)[0];
  std::sort(header.begin(), header.end());
  std::string expected;
  for (const auto& h : header) expected += (expected.empty() ? "" : ",") + h;
  CHECK(keys == expected);
  CHECK(j["ranks"] == 4);
  CHECK(j["chunks"] == 4);
  CHECK(j["size_bytes"] == 1048576);
}

TEST_CASE("bad values exit with status 2 and say what to do", "[cli][errors]") {
  struct Case {
    std::string args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"run " + kTwo + " --size 0", "positive"},
      {"run " + kTwo + " --size=-1MiB", "positive"},
      {"run " + kTwo + " --size 12XB", "unknown size unit"},
      {"run " + kTwo + " --size 1MiB --chunks 0", "at least 1"},
      // 1 KiB of fp32 is 256 elements.
      {"run " + kTwo + " --size 1KiB --chunks 512", "larger than the element count 256"},
      {"run " + kTwo + " --size 6 --dtype fp32", "whole number of fp32 elements"},
      {"run " + kTwo + " --size 1MiB --algo rign", "did you mean \"ring\""},
      {"run " + kTwo + " --size 1MiB --collective allreduc", "did you mean \"allreduce\""},
      {"run " + kTwo + " --size 1MiB --dtype fp64", "unknown data type"},
      {"run " + kTwo + " --size 1MiB --host-memory pagable", "did you mean \"pageable\""},
      {"plan " + kTwo + " --size 1MiB --host-memory swap", "expected one of pinned, pageable"},
      {"run " + kTwo + " --size 1MiB --chunks 1,2", "use collsim sweep"},
      {"run " + kTwo + " --size 1MiB --format xml", "table, csv or json"},
      {"run " + kTwo + " --size 1MiB --ranks 0-5", "out of range"},
      {"run --topology tests/cli/data/missing.json --size 1MiB", "missing.json"},
      {"sweep " + kTwo + " --size 1:1GiB:+1", "coarser"},
      {"sweep " + kTwo + " --size 1KiB:4GiB:x4 --chunks 1:8:+1 --max-points 10",
       "more than --max-points 10"},
      {"sweep " + kTwo + " --size 64:1 --chunks 1", "upwards"},
      // Any plan needs more than a byte; the estimate is refused before the plan is built.
      {"run " + kTwo + " --size 1MiB --max-memory 1", "--max-memory"},
      {"run " + kTwo + " --size 1MiB --max-memory lots", "share of physical memory"},
      // The ring's 34.5 MiB fit 36 MiB alone, not beside the topology's 2.7 MiB.
      {"run --topology configs/cluster-1024.json --size 1MiB --chunks 1 --max-memory 36MiB",
       "besides about 2.7 MiB for the topology"},
      // One rank per orbit: each rotation tried is judged at its share of the plan.
      {"run --topology configs/cluster-1024.json --size 1MiB --chunks 1 --routing shortest "
       "--symmetry --max-memory 6MiB",
       "tried as one rank per orbit of a rotation by 128 (128 of the 1024 simulated)"},
      {"run " + kTwo + " --size 1MiB --trace-only 0", "--trace-only requires --trace"},
      {"run --topology configs/cluster-1024.json --size 1MiB --ranks 0-63 --trace-only 100 "
       "--trace unused.json",
       "GPU 'dgx012/gpu4' does not take part in the run (--ranks 0-63)"},
      // std::size_t options: CLI11 alone would read a negative count as a huge one.
      {"run " + kTwo + " --size 1MiB --bottlenecks -3", "expected a whole number"},
      {"run " + kTwo + " --size 1MiB --bottlenecks 0", "at least 1"},
      {"sweep " + kTwo + " --size 1MiB --max-points -3", "expected a whole number"},
  };
  for (const Case& c : cases) {
    const auto r = run_cli(c.args);
    INFO(c.args << "\nstdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::Contains(c.message));
    CHECK_THAT(r.err, !Catch::Contains("internal error"));
  }
}

TEST_CASE("an algorithm that does not fit the collective is refused and not replaced",
          "[cli][errors]") {
  // A double binary tree has no all-to-all; hierarchical needs servers and the switch file has
  // none. The generator's message passes through with exit status 2 and no result.
  for (const std::string& args : {"run " + kFour + " --collective alltoall --algo tree --size 1MiB",
                                  "run " + kFour + " --algo hier --size 1MiB"}) {
    const auto r = run_cli(args);
    INFO(args << "\n" << r.out << r.err);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::Contains("error: --algo"));
    CHECK(r.out.empty());
  }
}

TEST_CASE("a sweep gives the same CSV whatever the thread count", "[cli][sweep]") {
  const std::string args = "sweep " + kFour +
                           " --algo ring,direct,auto --size 1KiB:16MiB:x4 --chunks 1,2,4 "
                           "--format csv --no-wall";
  const auto one = run_cli(args + " --jobs 1");
  const auto two = run_cli(args + " --jobs 2");
  INFO(one.err << two.err);
  REQUIRE(one.status == two.status);
  CHECK(one.out == two.out);
  // 3 algorithms x 8 sizes (1, 4, 16, ..., 16384 KiB) x 3 chunk counts, plus the header.
  CHECK(csv_rows(one.out).size() == 1 + 3 * 8 * 3);
}

TEST_CASE("sweeps of the shipped configs give the same CSV with 1 and 2 threads", "[cli][sweep]") {
  for (const std::string config :
       {"configs/dgx-h100.json", "configs/t4x4-pcie.json", "configs/hetero-rack.json"}) {
    if (!std::filesystem::exists(std::filesystem::path(COLLSIM_SOURCE_DIR) / config)) continue;
    const std::string args = "sweep --topology " + config +
                             " --algo ring,tree,direct --size 64KiB:64MiB:x32 --chunks 1,4 "
                             "--format csv --no-wall";
    const auto one = run_cli(args + " --jobs 1");
    const auto two = run_cli(args + " --jobs 2");
    INFO(config << "\n" << one.err);
    CHECK(one.status == two.status);
    CHECK(one.err == two.err);
    CHECK(one.out == two.out);
    // 3 algorithms x 3 sizes x 2 chunk counts, plus the header.
    CHECK(csv_rows(one.out).size() == 1 + 3 * 3 * 2);
  }
}

TEST_CASE("sweep rows come in input order: chunks fastest then sizes then algorithms",
          "[cli][sweep]") {
  const std::vector<std::string> expect = {"ring 1024 2",   "ring 1024 1",   "ring 4096 2",
                                           "ring 4096 1",   "direct 1024 2", "direct 1024 1",
                                           "direct 4096 2", "direct 4096 1"};
  CHECK(sweep_rows(kFour + " --algo ring,direct --size 1KiB,4KiB --chunks 2,1 --jobs 2",
                   {"algo", "size_bytes", "chunks"}) == expect);
}

TEST_CASE("a sweep's --algo all is every algorithm that implements each collective",
          "[cli][sweep]") {
  // The DGX is one server, which hier needs; on a topology without servers its row would fail.
  const std::vector<std::string> expect = {
      "allreduce ring",    "allreduce tree",   "allreduce rhd",   "allreduce rd",
      "allreduce hier",    "allreduce direct", "allreduce naive", "alltoall direct",
      "alltoall pairwise", "broadcast ring",   "broadcast tree",  "broadcast direct",
      "broadcast naive"};
  CHECK(sweep_rows("--topology configs/dgx-h100.json --algo all "
                   "--collective allreduce,alltoall,broadcast --size 64KiB",
                   {"collective", "algo"}) == expect);
  // Named algorithms keep their place, and "all" adds the others once, after them; auto's row
  // names what it picked.
  const auto named = sweep_rows(
      kFour + " --algo direct,all,auto --collective reduce_scatter --size 64KiB", {"algo"});
  REQUIRE(named.size() == 4);
  CHECK(named[0] == "direct");
  CHECK(named[1] == "ring");
  CHECK(named[2] == "pairwise");
  // run simulates one algorithm: "all" is refused there, with what to give instead.
  const auto one = run_cli("run " + kFour + " --algo all --size 64KiB");
  CHECK(one.status == 2);
  CHECK_THAT(one.err, Catch::Contains("--algo") && Catch::Contains("auto"));
}

TEST_CASE("a failed sweep point is reported and does not lose the others", "[cli][sweep]") {
  // 1 KiB of fp32 is 256 elements: k = 512 cannot be cut.
  const auto r =
      run_cli("sweep " + kTwo + " --algo ring --size 1KiB --chunks 1,512,2 --format csv --no-wall");
  CHECK(r.status == 2);
  const auto rows = csv_rows(r.out);
  REQUIRE(rows.size() == 4);
  const std::size_t time = column(rows[0], "time_us");
  CHECK_FALSE(rows[1][time].empty());
  CHECK(rows[2][time].empty());
  CHECK_FALSE(rows[3][time].empty());
  CHECK_THAT(r.err, Catch::Contains("point 2") && Catch::Contains("element count") &&
                        Catch::Contains("1 of 3 points failed"));
}

TEST_CASE("the progress bar shows done/total and time left on request", "[cli][sweep]") {
  const auto quiet = run_cli("sweep " + kTwo + " --size 1KiB,2KiB --format csv");
  CHECK(quiet.status == 0);
  CHECK(quiet.err.empty());  // stderr is not a terminal here
  const auto shown = run_cli("sweep " + kTwo + " --size 1KiB,2KiB --format csv --progress");
  CHECK(shown.status == 0);
  CHECK_THAT(shown.err, Catch::Contains("2/2 points") && Catch::Contains("left"));
}

TEST_CASE("run --progress changes nothing on stdout", "[cli]") {
  // 2 x 63 x 8 x 64 sends and as many receives: past 2^16 events, so the engine reports
  // progress; whether the line is drawn depends on the run taking a second.
  const std::string args =
      "run --topology configs/cluster-1024.json --ranks 0-63 --size 64MiB --chunks 8 --no-wall";
  const auto quiet = run_cli(args);
  const auto shown = run_cli(args + " --progress");
  REQUIRE(quiet.status == 0);
  CHECK(shown.status == 0);
  CHECK(shown.out == quiet.out);
  CHECK(quiet.err.empty());
  if (!shown.err.empty()) CHECK_THAT(shown.err, Catch::Contains("ring allreduce k=8: "));
}

TEST_CASE("huge pages change no result, and a bad COLLSIM_HUGE_PAGES is refused", "[cli]") {
  // The tree is simulated whole, and several of its arrays pass the 4 MiB from which an array
  // gets a mapping of its own, plan columns and engine records alike, so each choice advises
  // some of them.
  const std::string args =
      "run --topology configs/cluster-1024.json --algo tree --size 1GiB --chunks 8 --no-wall";
  const auto plain = run_cli(args);
  REQUIRE(plain.status == 0);
  for (const char* choice :
       {"--huge-pages ", "--huge-pages=off ", "--huge-pages=hot ", "--huge-pages=all "}) {
    INFO(choice);
    const auto huge = run_cli(choice + args);
    CHECK(huge.status == 0);
    CHECK(huge.out == plain.out);
  }
  const auto bad_flag = run_cli("--huge-pages=cold " + args);
  ::setenv("COLLSIM_HUGE_PAGES", "maybe", 1);
  const auto bad = run_cli(args);
  ::setenv("COLLSIM_HUGE_PAGES", "1", 1);
  const auto from_env = run_cli(args);
  ::unsetenv("COLLSIM_HUGE_PAGES");
  CHECK(bad_flag.status == 2);
  CHECK_THAT(bad_flag.err, Catch::Contains("--huge-pages") && Catch::Contains("cold"));
  CHECK(bad.status == 2);
  CHECK_THAT(bad.err, Catch::Contains("--huge-pages") && Catch::Contains("maybe"));
  CHECK(bad.out.empty());
  CHECK(from_env.status == 0);
  CHECK(from_env.out == plain.out);
}

TEST_CASE("run with --algo auto says what it picked and the runner-up", "[cli][auto]") {
  const auto r = run_cli("run " + kFour + " --algo auto --size 4MiB");
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("# auto picked") && Catch::Contains("runner-up") &&
                        Catch::Contains("chunks      auto (free"));
}

TEST_CASE("the sharing limit stops heavy sharing, and auto counts the pair as refused",
          "[cli][auto]") {
  const std::string dgx = "run --topology configs/dgx-h100.json --size 64MiB";
  // The one-shot allreduce's 56 flows cross the NVSwitch's ports together, far past 1000 flows
  // re-shared; the limit decides from counts, so the message is the same on every machine.
  const auto direct = run_cli(dgx + " --algo direct --max-reshared 1e3");
  CHECK(direct.status == 2);
  CHECK_THAT(direct.err, Catch::Contains("--max-reshared: direct allreduce k=1 stopped at") &&
                             Catch::Contains("against the limit of 1e+03"));
  CHECK(run_cli(dgx + " --algo direct").status == 0);
  // A pair stopped by the limit is refused, and the algorithm's larger k are not tried: alone
  // in the search, direct has nothing left.
  const auto alone = run_cli(dgx + " --algo direct --chunks auto --max-reshared 1e3");
  CHECK(alone.status == 2);
  CHECK_THAT(alone.err, Catch::Contains("tried 1 pair, refused because:") &&
                            Catch::Contains("direct k=1: --max-reshared: direct allreduce k=1"));
  // Among the others, the tree is refused from k = 8 on; the pick stays, and the notes say what
  // was refused.
  const auto picked = run_cli(dgx + " --algo auto --max-reshared 1e3");
  INFO(picked.err);
  REQUIRE(picked.status == 0);
  CHECK_THAT(picked.out, Catch::Contains("auto picked rhd with k = 2") &&
                             Catch::Contains("refused by the generator, the size or a limit") &&
                             Catch::Contains("tree); run one"));
  const auto unlimited = run_cli(dgx + " --algo auto --max-reshared 0");
  REQUIRE(unlimited.status == 0);
  CHECK_THAT(unlimited.out, Catch::Contains("auto picked rhd with k = 2") &&
                                Catch::Contains("6 pairs were refused by the generator, the size "
                                                "or a limit (naive)"));
  // Alone in the search of an alltoall at one k, pairwise is picked and direct named refused.
  const auto one = run_cli(
      "run --topology configs/dgx-h100.json --collective alltoall --size 64MiB --algo auto "
      "--chunks 1 --max-reshared 100");
  INFO(one.err);
  REQUIRE(one.status == 0);
  CHECK_THAT(one.out, Catch::Contains("auto picked pairwise with k = 1: ") &&
                          Catch::Contains("us, the only pair tried") &&
                          Catch::Contains("# 1 pair was refused by the generator, the size or a "
                                          "limit (direct); run it with --algo"));
  CHECK(run_cli(dgx + " --max-reshared -1").status == 2);
  const auto fraction = run_cli(dgx + " --max-reshared 1.5");
  CHECK(fraction.status == 2);
  CHECK_THAT(fraction.err, Catch::Contains("1.5 is not a count of flows"));
}

TEST_CASE("the fast auto search picks what the full one picks on the shipped DGX", "[cli][auto]") {
  // Time against k falls then rises for these schedules, so stopping at the first rise loses
  // nothing; the rows (pick, time, events) must be identical.
  const std::string args =
      "sweep --topology configs/dgx-h100.json --algo auto --size 64KiB,4MiB,256MiB --format csv "
      "--no-wall --auto-search ";
  const auto full = run_cli(args + "full");
  const auto fast = run_cli(args + "fast");
  INFO(full.err << fast.err);
  REQUIRE(full.status == 0);
  REQUIRE(fast.status == 0);
  CHECK(csv_rows(full.out).size() == 4);
  CHECK(full.out == fast.out);
}

TEST_CASE("an auto search's notes are those of every pair simulated to its end", "[cli][auto]") {
  // Auto stops a pair once it is slower than the best pairs of two algorithms; the winner, the
  // runner-up, the best other algorithm and, for the fast search, the pairs tried must still be
  // what the times of every pair, from a sweep that runs each to its end, say they are.
  const std::string algos = "ring,tree,rhd,rd,hier,direct,naive";
  const std::string ks = "1,2,4,8,16,32,64";
  for (const auto& [topology, size] :
       {std::pair<std::string, std::string>{"configs/dgx-h100.json", "64MiB"},
        {"configs/dgx-h100.json", "64KiB"},
        {"tests/cli/data/four-gpus-switch.json", "16MiB"},
        {"configs/t4x4-pcie.json", "4MiB"}}) {
    const std::string where = "--topology " + topology + " --size " + size + " --max-reshared 0";
    const auto sweep = run_cli("sweep " + where + " --algo " + algos + " --chunks " + ks +
                               " --format csv --no-wall");
    // Naive refuses k > 1, so the sweep reports failed points; every row is there all the same.
    INFO(topology << " " << size << "\n" << sweep.err);
    REQUIRE(csv_rows(sweep.out).size() == 50);
    struct Pair {
      std::string algo, k;
      double us;
    };
    std::vector<Pair> pairs;  // in the order auto tries them; refused pairs left out
    std::size_t fast_tried = 0;
    std::string last_algo;
    double previous = 0;
    bool stopped = false;
    for (const auto& row : csv_rows(sweep.out)) {
      if (row.size() < 9 || row[0] == "collective" || row[8].empty()) continue;
      const double us = std::stod(row[8]);
      if (row[1] != last_algo) {
        last_algo = row[1];
        stopped = false;
      } else if (!stopped && us > previous) {
        stopped = true;
        ++fast_tried;  // the first rise is tried, then the algorithm ends
      }
      if (!stopped) ++fast_tried;
      previous = us;
      pairs.push_back({row[1], row[7], us});
    }
    REQUIRE(pairs.size() > 10);
    const Pair* best = &pairs.front();
    for (const Pair& p : pairs)
      if (p.us < best->us) best = &p;
    const Pair* runner = nullptr;
    const Pair* other = nullptr;
    for (const Pair& p : pairs) {
      if (&p == best) continue;
      if (runner == nullptr || p.us < runner->us) runner = &p;
      if (p.algo != best->algo && (other == nullptr || p.us < other->us)) other = &p;
    }
    const auto note = [&](const char* what, const Pair& p) {
      return fmt::format("# {} {} with k = {}: {:.2f} us ({:+.1f}%)", what, p.algo, p.k, p.us,
                         (p.us / best->us - 1) * 100);
    };
    for (const std::string search : {"full", "fast"}) {
      const auto picked = run_cli("run " + where + " --algo auto --auto-search " + search);
      INFO(search << "\n" << picked.out << picked.err);
      REQUIRE(picked.status == 0);
      CHECK_THAT(picked.out, Catch::Contains(fmt::format("# auto picked {} with k = {}: {:.2f} us",
                                                         best->algo, best->k, best->us)));
      CHECK_THAT(picked.out, Catch::Contains(note("runner-up", *runner)));
      if (other != runner)
        CHECK_THAT(picked.out, Catch::Contains(note("best other algorithm", *other)));
      const std::size_t tried = search == "full" ? pairs.size() : fast_tried;
      CHECK_THAT(picked.out, Catch::Contains(fmt::format("of {} pairs tried", tried)));
    }
  }
}

TEST_CASE("the reproduce line of a table gives the same table", "[cli][golden]") {
  for (const std::string& args :
       {"run " + kFour + " --algo auto --size 4MiB --ranks 3,1,0",
        "sweep " + kFour + " --algo ring,auto --size 1KiB:1MiB:x32 --nranks 2,4 --jobs 2",
        "run " + kTwo + " --collective broadcast --root 1 --size 1MB --chunks 4 --dtype bf16"}) {
    const auto first = run_cli(args);
    INFO(args << "\n" << first.out << first.err);
    REQUIRE(first.status == 0);
    const std::string marker = "# reproduce   collsim ";
    const auto at = first.out.find(marker);
    REQUIRE(at != std::string::npos);
    const auto end = first.out.find('\n', at);
    const std::string again = first.out.substr(at + marker.size(), end - at - marker.size());
    const auto second = run_cli(again);
    INFO(again << "\n" << second.err);
    CHECK(second.status == 0);
    CHECK(second.out == first.out);
  }
}

TEST_CASE("run with --trace writes a Chrome trace of the simulated run", "[cli][trace]") {
  const auto path = scratch_dir() / "run.trace.json";
  const auto r = run_cli("run " + kTwo + " --size 1MiB --chunks 2 --trace " + path.string());
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("# trace written to"));
  const auto trace = nlohmann::json::parse(read_file(path));
  REQUIRE(trace.contains("traceEvents"));
  CHECK(trace["traceEvents"].size() > 0);

  // --trace-only keeps the ops of the GPUs named; the note gives the file's size.
  const auto one_path = scratch_dir() / "run.trace-only.json";
  const auto one = run_cli(
      "run --topology configs/cluster-1024.json --size 1MiB --ranks 0-15 "
      "--trace-only dgx001/gpu0 --trace " +
      one_path.string());
  INFO(one.err);
  REQUIRE(one.status == 0);
  CHECK_THAT(one.out, Catch::Contains(" KiB)"));
  std::set<int> pids;
  const auto kept = nlohmann::json::parse(read_file(one_path));
  for (const auto& e : kept["traceEvents"])
    if (e["ph"] == "X") pids.insert(e["pid"].get<int>());
  CHECK(pids.size() == 1);
}

TEST_CASE("run --bottlenecks lists the busiest resources with their utilisation", "[cli]") {
  // Ring allreduce of S = 1 MB on two GPUs: each direction of the 100 GB/s, 1 us link carries
  // S/2 twice, in 2 x 5 us of draining, and the run takes t = 2 x (1 us + 5 us) = 12 us:
  // utilisation = 1 MB / (100 GB/s x 12 us) = 83.3 %, busy 10 / 12 = 83.3 %. The reductions
  // drain through GPU memory, which the file leaves unlimited: instant, 0 %.
  const auto r = run_cli("run " + kTwo + " --size 1MB --bottlenecks 2");
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("# bottlenecks: the 2 busiest of 4 resources"));
  const std::string first = "#        83.3 %   83.3 %     976.6 KiB  gpu0->gpu1\n";
  const std::string second = "#        83.3 %   83.3 %     976.6 KiB  gpu1->gpu0\n";
  // Ties go to the lower resource id: gpu0->gpu1 first.
  const auto at = r.out.find(first);
  REQUIRE(at != std::string::npos);
  CHECK(r.out.find(second) == at + first.size());
  CHECK_THAT(r.out, !Catch::Contains("memory"));        // only 2 asked for
  CHECK_THAT(r.out, !Catch::Contains("copy engines"));  // no copies in this plan
}

TEST_CASE("run --bottlenecks shows copy engines, and goes to stderr beside CSV", "[cli]") {
  // The T4 box stages every transfer through host memory: every GPU runs copies on its 3
  // engines. With CSV on stdout the report goes to stderr, and stdout stays one CSV row.
  const auto r = run_cli(
      "run --topology configs/t4x4-pcie.json --size 64MiB --chunks 4 --bottlenecks 2 "
      "--format csv --no-wall");
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(csv_rows(r.out).size() == 2);
  CHECK_THAT(r.err, Catch::Contains("collsim: bottlenecks: the 2 busiest of"));
  CHECK_THAT(r.err, Catch::Contains("copy engines: the 2 of 4 GPUs that ran copies"));
  CHECK_THAT(r.err, Catch::Contains("        3  "));  // the engine count column
}

TEST_CASE("run with --calibration replaces the parameters of matching GPUs and says so",
          "[cli][calibration]") {
  // A quick host calibration (threads and memcpy) stands in for a GPU's; its model "*" matches
  // every GPU, so both GPUs of the file take its parameters.
  const auto path = scratch_dir() / "calibration.json";
  const auto cal = run_cli(
      "calibrate --backend host --sizes 4KiB,64KiB --reps 2 --warmup 0 --out " + path.string());
  INFO(cal.err);
  REQUIRE(cal.status == 0);
  const auto r = run_cli("run " + kTwo + " --size 1MiB --calibration " + path.string());
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("# calibration " + path.string()) &&
                        Catch::Contains("applied to 2 GPUs") &&
                        Catch::Contains("--calibration " + path.string()));
  const auto bad =
      run_cli("run " + kTwo + " --size 1MiB --calibration tests/cli/data/two-gpus.json");
  CHECK(bad.status == 2);
  CHECK_THAT(bad.err, Catch::Contains("two-gpus.json"));
}

TEST_CASE("the messages in docs/errors.md are what collsim prints", "[cli][docs]") {
  // Each "$ collsim ARGS" of the document's real messages is followed by the lines it prints, up to
  // a blank line; "  ..." ends the lines compared. The exit status is 2 unless a "# exit N" comment
  // says otherwise.
  // Only the section "Real messages": the Ctrl-C example further on needs a Ctrl-C.
  const std::string text =
      read_file(std::filesystem::path(COLLSIM_SOURCE_DIR) / "docs" / "errors.md");
  const auto begin = text.find("## Real messages");
  REQUIRE(begin != std::string::npos);
  std::istringstream doc(text.substr(begin, text.find("\n## ", begin) - begin));
  std::string line;
  std::size_t examples = 0;
  const std::string prompt = "$ collsim ";
  std::getline(doc, line);
  while (doc) {
    if (line.rfind(prompt, 0) != 0) {
      std::getline(doc, line);
      continue;
    }
    std::string args = line.substr(prompt.size());
    int status = 2;
    if (const auto hash = args.find('#'); hash != std::string::npos) {
      const auto exit_at = args.find("exit ", hash);
      if (exit_at != std::string::npos) status = std::stoi(args.substr(exit_at + 5));
      args.erase(hash);
    }
    std::vector<std::string> shown;
    while (std::getline(doc, line) && !line.empty() && line.rfind(prompt, 0) != 0 &&
           line.rfind("```", 0) != 0)
      shown.push_back(line);
    const auto r = run_cli(args);
    std::vector<std::string> printed;
    std::istringstream out(r.err + r.out);
    for (std::string l; std::getline(out, l);) printed.push_back(l);
    INFO("collsim " << args << "\nstdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.status == status);
    for (std::size_t i = 0; i < shown.size() && shown[i] != "  ..."; ++i) {
      INFO("line " << i + 1 << " of the example");
      REQUIRE(i < printed.size());
      CHECK(printed[i] == shown[i]);
    }
    ++examples;
  }
  CHECK(examples >= 10);
}

namespace {

// Every command of a document that starts with `prompt`, with its continuation lines (those
// after a line that ends with a backslash), is run from a scratch folder that sees the
// repository's configs/, docs/, tests/ and tools/, so that examples may write files freely.
// Commands for which `skip` is true are not run. Returns how many ran.
std::size_t run_document_commands(const std::string& document, const std::string& prompt,
                                  const std::function<bool(const std::string&)>& skip = {}) {
  const auto dir = scratch_dir() / "docs";
  std::filesystem::create_directories(dir);
  for (const char* sub : {"configs", "docs", "tests", "tools"}) {
    const auto link = dir / sub;
    if (!std::filesystem::exists(link))
      std::filesystem::create_directory_symlink(std::filesystem::path(COLLSIM_SOURCE_DIR) / sub,
                                                link);
  }
  std::istringstream doc(read_file(std::filesystem::path(COLLSIM_SOURCE_DIR) / document));
  std::string line;
  std::size_t ran = 0;
  while (std::getline(doc, line)) {
    if (line.rfind(prompt, 0) != 0) continue;
    std::string args = line.substr(prompt.size());
    while (!args.empty() && args.back() == '\\' && std::getline(doc, line)) {
      args.pop_back();
      args += line;
    }
    if (skip && skip(args)) continue;
    const auto r = run_cli(args, dir.string());
    INFO(document << ": collsim " << args << "\nstderr: " << r.err);
    CHECK(r.status == 0);
    ++ran;
  }
  return ran;
}

}  // namespace

TEST_CASE("the examples in docs/cli.md and docs/calibration-format.md run", "[cli][docs]") {
  CHECK(run_document_commands("docs/cli.md", "$ collsim ") >= 5);
  CHECK(run_document_commands("docs/calibration-format.md", "$ collsim ") >= 1);
}

TEST_CASE("the commands of README.md run", "[cli][docs]") {
  // The device's commands need a GPU, which no test assumes.
  const auto on_device = [](const std::string& args) {
    return args.find("--backend cuda") != std::string::npos;
  };
  CHECK(run_document_commands("README.md", "build/release/tools/collsim ", on_device) >= 6);
}
