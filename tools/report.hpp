#pragma once
// Result rows of `collsim run` and `collsim sweep`, and the three ways of printing them:
// a table in the spirit of nccl-tests, CSV with units in the column names, and JSON lines.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "schedules/plan.hpp"
#include "topology/units.hpp"

namespace collsim::cli {

enum class Format { table, csv, json };
Format parse_format(const std::string& text, const std::string& option);

// One simulated point. A failed point keeps its inputs and carries the error instead of numbers.
struct Row {
  sched::Collective collective = sched::Collective::allreduce;
  std::string algo;      // the algorithm simulated ("auto" only when an auto search failed)
  std::string topology;  // the topology's name
  std::uint32_t ranks = 0;
  Bytes size = 0;  // nccl-tests convention (Plan::size)
  sched::DType dtype = sched::DType::fp32;
  std::uint32_t chunks = 0;  // 0 only when an auto search failed
  double time = 0;           // simulated seconds
  std::uint64_t events = 0;
  double wall = 0;  // seconds of host time spent on the point; not deterministic
  std::string error;

  std::uint64_t count() const { return size / sched::dtype_size(dtype); }
  double algbw() const;  // bytes/s: size / time
  double busbw() const;  // bytes/s: algbw * bus_factor
  bool ok() const { return error.empty(); }
};

// nccl-tests' factor from algorithm bandwidth to bus bandwidth, which makes the figure comparable
// to a link's bandwidth whatever the rank count: allreduce 2(p-1)/p; reduce_scatter, allgather
// and alltoall (p-1)/p; broadcast and reduce 1.
double bus_factor(sched::Collective collective, std::uint32_t ranks);

// The exact CSV header; JSON lines use the same keys.
inline constexpr const char* kCsvHeader =
    "collective,algo,topology,ranks,size_bytes,count,dtype,chunks,time_us,algbw_GBps,busbw_GBps,"
    "events,wall_s";

// Writes rows as they come; the caller gives them in input order.
class ReportWriter {
 public:
  // `echo` lines describe the configuration; the table prints them as "# " comments, CSV and
  // JSON leave them out so that the files stay machine-readable.
  ReportWriter(std::FILE* out, Format format, bool show_wall);
  void begin(const std::vector<std::string>& echo);
  void row(const Row& row);
  // Free-form lines after the rows (the table prints them as comments).
  void end(const std::vector<std::string>& notes);

 private:
  std::FILE* out_;
  Format format_;
  bool show_wall_;
};

// Numbers as printed in CSV and JSON: shortest text that reads back to the same double, fixed
// by the value alone, so that outputs are byte-identical from run to run.
std::string format_number(double v);

}  // namespace collsim::cli
