#include "tools/report.hpp"

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

using namespace collsim;
using namespace collsim::cli;

namespace {

std::string render(Format format, const Row& row, bool show_wall = true) {
  char* buffer = nullptr;
  std::size_t size = 0;
  std::FILE* f = open_memstream(&buffer, &size);
  {
    ReportWriter w(f, format, show_wall);
    w.begin({"collsim test"});
    w.row(row);
    w.end({"note"});
  }
  std::fclose(f);
  std::string out(buffer, size);
  std::free(buffer);
  return out;
}

Row sample() {
  Row r;
  r.collective = sched::Collective::allreduce;
  r.algo = "ring";
  r.topology = "two-gpus";
  r.ranks = 2;
  r.size = 1000000000;  // 1 GB
  r.dtype = sched::DType::fp32;
  r.chunks = 1;
  r.time = 0.010002;  // 2 x 1 us + 1 GB / 100 GB/s
  r.events = 12;
  r.wall = 0.125;
  return r;
}

}  // namespace

TEST_CASE("bus bandwidth factors follow nccl-tests", "[cli][report]") {
  // allreduce 2(p-1)/p: p = 4 -> 1.5; p = 2 -> 1.
  CHECK(bus_factor(sched::Collective::allreduce, 4) == Approx(1.5));
  CHECK(bus_factor(sched::Collective::allreduce, 2) == Approx(1.0));
  // (p-1)/p: p = 8 -> 0.875.
  CHECK(bus_factor(sched::Collective::reduce_scatter, 8) == Approx(0.875));
  CHECK(bus_factor(sched::Collective::allgather, 8) == Approx(0.875));
  CHECK(bus_factor(sched::Collective::alltoall, 8) == Approx(0.875));
  CHECK(bus_factor(sched::Collective::broadcast, 8) == 1.0);
  CHECK(bus_factor(sched::Collective::reduce, 8) == 1.0);
}

TEST_CASE("a row in each format", "[cli][report]") {
  const Row r = sample();
  // algbw = 1e9 B / 0.010002 s = 99.98 GB/s; busbw = algbw x 2(2-1)/2 = algbw. CSV and JSON
  // print the shortest text that reads back to the same double.
  CHECK(r.algbw() / 1e9 == Approx(99.980003999));
  CHECK(r.busbw() == Approx(r.algbw()));
  CHECK(r.count() == 250000000);

  const std::string csv = render(Format::csv, r);
  CHECK(csv == std::string(kCsvHeader) +
                   "\nallreduce,ring,two-gpus,2,1000000000,250000000,fp32,1,10002,"
                   "99.98000399920015,99.98000399920015,12,0.125\n");
  CHECK(render(Format::csv, r, false).find(",12,0\n") != std::string::npos);

  const std::string json = render(Format::json, r);
  CHECK(json ==
        "{\"collective\":\"allreduce\",\"algo\":\"ring\",\"topology\":\"two-gpus\",\"ranks\":2,"
        "\"size_bytes\":1000000000,\"count\":250000000,\"dtype\":\"fp32\",\"chunks\":1,"
        "\"time_us\":10002,\"algbw_GBps\":99.98000399920015,\"busbw_GBps\":99.98000399920015,"
        "\"events\":12,\"wall_s\":0.125}\n");

  const std::string table = render(Format::table, r);
  CHECK(table.rfind("# collsim test\n", 0) == 0);
  CHECK(table.find("10002.00") != std::string::npos);
  CHECK(table.find("99.98") != std::string::npos);
  CHECK(table.find("# note\n") != std::string::npos);
}

TEST_CASE("failed rows carry no numbers", "[cli][report]") {
  Row r = sample();
  r.error = "k = 9 is larger than the element count, \"quoted\"";
  const std::string csv = render(Format::csv, r);
  CHECK(csv.find("\nallreduce,ring,two-gpus,2,1000000000,250000000,fp32,1,,,,,\n") !=
        std::string::npos);
  const std::string json = render(Format::json, r);
  CHECK(json.find("\"time_us\":null") != std::string::npos);
  CHECK(json.find("\"error\":\"k = 9 is larger than the element count, \\\"quoted\\\"\"") !=
        std::string::npos);
  CHECK(render(Format::table, r).find("failed: k = 9") != std::string::npos);
}

TEST_CASE("numbers never print as inf or nan", "[cli][report]") {
  Row r = sample();
  r.time = 0;  // an empty plan: no bandwidth to speak of
  CHECK(r.algbw() == 0);
  CHECK(format_number(std::numeric_limits<double>::infinity()) == "0");
  CHECK(format_number(std::numeric_limits<double>::quiet_NaN()) == "0");
  const std::string csv = render(Format::csv, r);
  CHECK(csv.find("inf") == std::string::npos);
  CHECK(csv.find("nan") == std::string::npos);
}
