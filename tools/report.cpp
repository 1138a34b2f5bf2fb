#include "tools/report.hpp"

#include <fmt/format.h>

#include <cmath>

#include "topology/error.hpp"

namespace collsim::cli {
namespace {

void put(std::FILE* out, const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), out);
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        else
          out += c;
    }
  }
  return out + "\"";
}

// CSV fields are names and numbers; an error message may hold commas or quotes.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

}  // namespace

Format parse_format(const std::string& text, const std::string& option) {
  if (text == "table") return Format::table;
  if (text == "csv") return Format::csv;
  if (text == "json") return Format::json;
  throw InputError("", option,
                   fmt::format("unknown format \"{}\"; expected table, csv or json", text));
}

double bus_factor(sched::Collective collective, std::uint32_t ranks) {
  if (ranks == 0) return 0;
  const double p = ranks;
  switch (collective) {
    case sched::Collective::allreduce:
      return 2 * (p - 1) / p;
    case sched::Collective::reduce_scatter:
    case sched::Collective::allgather:
    case sched::Collective::alltoall:
      return (p - 1) / p;
    case sched::Collective::broadcast:
    case sched::Collective::reduce:
      return 1;
  }
  return 1;
}

double Row::algbw() const {
  return time > 0 ? static_cast<double>(size) / time : 0;
}
double Row::busbw() const {
  return algbw() * bus_factor(collective, ranks);
}

std::string format_number(double v) {
  // A zero-time point (empty plan) has no bandwidth; never print inf or nan.
  if (!std::isfinite(v)) return "0";
  return fmt::format("{}", v);
}

ReportWriter::ReportWriter(std::FILE* out, Format format, bool show_wall)
    : out_(out), format_(format), show_wall_(show_wall) {}

void ReportWriter::begin(const std::vector<std::string>& echo) {
  switch (format_) {
    case Format::table:
      for (const auto& line : echo) put(out_, fmt::format("# {}\n", line));
      put(out_, "#\n");
      put(out_, fmt::format("#{:>14} {:>13} {:>5} {:>15} {:>7} {:>6} {:>13} {:>12} {:>12}\n",
                            "size(B)", "count", "type", "collective", "algo", "k", "time(us)",
                            "algbw(GB/s)", "busbw(GB/s)"));
      break;
    case Format::csv:
      put(out_, fmt::format("{}\n", kCsvHeader));
      break;
    case Format::json:
      break;
  }
  std::fflush(out_);
}

void ReportWriter::row(const Row& r) {
  const double wall = show_wall_ ? r.wall : 0.0;
  switch (format_) {
    case Format::table:
      if (r.ok()) {
        put(out_, fmt::format(" {:>14} {:>13} {:>5} {:>15} {:>7} {:>6} {:>13.2f} {:>12.2f} "
                              "{:>12.2f}\n",
                              r.size, r.count(), sched::to_string(r.dtype),
                              sched::to_string(r.collective), r.algo, r.chunks, r.time * 1e6,
                              r.algbw() / 1e9, r.busbw() / 1e9));
      } else {
        put(out_,
            fmt::format(" {:>14} {:>13} {:>5} {:>15} {:>7} {:>6}  failed: {}\n", r.size, r.count(),
                        sched::to_string(r.dtype), sched::to_string(r.collective), r.algo,
                        r.chunks == 0 ? std::string("auto") : std::to_string(r.chunks), r.error));
      }
      break;
    case Format::csv:
      if (r.ok()) {
        put(out_, fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                              sched::to_string(r.collective), r.algo, csv_field(r.topology),
                              r.ranks, r.size, r.count(), sched::to_string(r.dtype), r.chunks,
                              format_number(r.time * 1e6), format_number(r.algbw() / 1e9),
                              format_number(r.busbw() / 1e9), r.events, format_number(wall)));
      } else {
        // The numbers stay empty so that a failed point can never be mistaken for a result; the
        // error itself goes to stderr.
        put(out_, fmt::format("{},{},{},{},{},{},{},{},,,,,\n", sched::to_string(r.collective),
                              r.algo, csv_field(r.topology), r.ranks, r.size, r.count(),
                              sched::to_string(r.dtype), r.chunks));
      }
      break;
    case Format::json: {
      std::string line = fmt::format(
          "{{\"collective\":{},\"algo\":{},\"topology\":{},\"ranks\":{},\"size_bytes\":{},"
          "\"count\":{},\"dtype\":{},\"chunks\":{}",
          json_string(std::string(sched::to_string(r.collective))), json_string(r.algo),
          json_string(r.topology), r.ranks, r.size, r.count(),
          json_string(std::string(sched::to_string(r.dtype))), r.chunks);
      if (r.ok())
        line += fmt::format(
            ",\"time_us\":{},\"algbw_GBps\":{},\"busbw_GBps\":{},\"events\":{},\"wall_s\":{}}}\n",
            format_number(r.time * 1e6), format_number(r.algbw() / 1e9),
            format_number(r.busbw() / 1e9), r.events, format_number(wall));
      else
        line += fmt::format(
            ",\"time_us\":null,\"algbw_GBps\":null,\"busbw_GBps\":null,\"events\":null,"
            "\"wall_s\":null,\"error\":{}}}\n",
            json_string(r.error));
      put(out_, line);
      break;
    }
  }
  std::fflush(out_);
}

void ReportWriter::end(const std::vector<std::string>& notes) {
  if (format_ == Format::table)
    for (const auto& line : notes) put(out_, fmt::format("# {}\n", line));
  std::fflush(out_);
}

}  // namespace collsim::cli
