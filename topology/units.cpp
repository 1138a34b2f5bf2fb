#include "topology/units.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <string>

namespace collsim {
namespace {

struct Unit {
  std::string_view name;
  double factor;
};

constexpr Unit kBandwidthUnits[] = {
    {"B/s", 1.0},
    {"kB/s", 1e3},
    {"KB/s", 1e3},
    {"MB/s", 1e6},
    {"GB/s", 1e9},
    {"TB/s", 1e12},
    {"KiB/s", 1024.0},
    {"MiB/s", 1048576.0},
    {"GiB/s", 1073741824.0},
    {"TiB/s", 1099511627776.0},
    {"b/s", 0.125},
    {"kb/s", 125.0},
    {"Kb/s", 125.0},
    {"Mb/s", 1.25e5},
    {"Gb/s", 1.25e8},
    {"Tb/s", 1.25e11},
    {"Gbps", 1.25e8},
    {"Mbps", 1.25e5},
    {"GBps", 1e9},
    {"MBps", 1e6},
};

constexpr Unit kDurationUnits[] = {
    {"ps", 1e-12}, {"ns", 1e-9}, {"us", 1e-6}, {"\xC2\xB5s", 1e-6}, {"ms", 1e-3}, {"s", 1.0},
};

constexpr Unit kSizeUnits[] = {
    {"B", 1.0},
    {"kB", 1e3},
    {"KB", 1e3},
    {"MB", 1e6},
    {"GB", 1e9},
    {"TB", 1e12},
    {"KiB", 1024.0},
    {"MiB", 1048576.0},
    {"GiB", 1073741824.0},
    {"TiB", 1099511627776.0},
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits "12.5 GB/s" into its number and unit. Only plain decimal numbers are accepted: no hex,
// no "inf" or "nan", no sign other than a leading minus (which the callers then reject).
bool split_number(std::string_view text, double& value, std::string_view& unit) {
  text = trim(text);
  std::size_t i = 0;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
  std::size_t digits = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++digits;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    std::size_t j = i + 1;
    if (j < text.size() && (text[j] == '-' || text[j] == '+')) ++j;
    std::size_t exp_digits = 0;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j, ++exp_digits;
    if (exp_digits > 0) i = j;
  }
  const std::string number(text.substr(0, i));
  char* end = nullptr;
  value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size()) return false;
  unit = trim(text.substr(i));
  return true;
}

const Unit* find_unit(std::string_view unit, const Unit* begin, const Unit* end) {
  for (const Unit* u = begin; u != end; ++u)
    if (u->name == unit) return u;
  return nullptr;
}

std::string quoted(std::string_view s) {
  return fmt::format("\"{}\"", s);
}

}  // namespace

double parse_bandwidth(std::string_view text) {
  double value = 0;
  std::string_view unit;
  if (!split_number(text, value, unit))
    throw UnitError(fmt::format("expected a bandwidth such as \"25GB/s\" or \"400Gb/s\"; found {}",
                                quoted(text)));
  if (unit.empty())
    throw UnitError(
        fmt::format("bandwidth {} has no unit; write it as \"{}GB/s\" (bytes) or "
                    "\"{}Gb/s\" (bits)",
                    quoted(text), trim(text), trim(text)));
  const Unit* u = find_unit(unit, std::begin(kBandwidthUnits), std::end(kBandwidthUnits));
  if (u == nullptr)
    throw UnitError(
        fmt::format("unknown bandwidth unit {} in {}; use B/s, KB/s, MB/s, GB/s, TB/s, "
                    "KiB/s, MiB/s, GiB/s, or Mb/s, Gb/s, Tb/s for bits",
                    quoted(unit), quoted(text)));
  const double bps = value * u->factor;
  if (!(bps > 0)) throw UnitError(fmt::format("bandwidth {} must be positive", quoted(text)));
  if (!std::isfinite(bps) || bps > kMaxBandwidth)
    throw UnitError(
        fmt::format("bandwidth {} is above the supported maximum of 1 PB/s", quoted(text)));
  return bps;
}

double parse_duration(std::string_view text) {
  double value = 0;
  std::string_view unit;
  if (!split_number(text, value, unit))
    throw UnitError(
        fmt::format("expected a duration such as \"1us\" or \"500ns\"; found {}", quoted(text)));
  if (unit.empty())
    throw UnitError(fmt::format("duration {} has no unit; write it as \"{}us\" (or ns, ms, s)",
                                quoted(text), trim(text)));
  const Unit* u = find_unit(unit, std::begin(kDurationUnits), std::end(kDurationUnits));
  if (u == nullptr)
    throw UnitError(fmt::format("unknown duration unit {} in {}; use ps, ns, us, ms or s",
                                quoted(unit), quoted(text)));
  const double s = value * u->factor;
  if (s < 0 || std::signbit(s))
    throw UnitError(fmt::format("duration {} must not be negative", quoted(text)));
  if (!std::isfinite(s) || s > kMaxDuration)
    throw UnitError(
        fmt::format("duration {} is above the supported maximum of 1e6 s", quoted(text)));
  return s;
}

Bytes parse_size(std::string_view text) {
  double value = 0;
  std::string_view unit;
  if (!split_number(text, value, unit))
    throw UnitError(fmt::format("expected a size such as \"64MiB\", \"1GB\" or \"4096\"; found {}",
                                quoted(text)));
  double factor = 1.0;
  if (!unit.empty()) {
    const Unit* u = find_unit(unit, std::begin(kSizeUnits), std::end(kSizeUnits));
    if (u == nullptr)
      throw UnitError(
          fmt::format("unknown size unit {} in {}; use B, KB, MB, GB, TB (powers of "
                      "1000) or KiB, MiB, GiB, TiB (powers of 1024)",
                      quoted(unit), quoted(text)));
    factor = u->factor;
  }
  const double bytes = value * factor;
  if (!(bytes > 0)) throw UnitError(fmt::format("size {} must be positive", quoted(text)));
  if (!std::isfinite(bytes) || bytes > static_cast<double>(kMaxSize))
    throw UnitError(fmt::format("size {} is above the supported maximum of 1 PiB", quoted(text)));
  if (bytes != std::floor(bytes))
    throw UnitError(fmt::format("size {} is not a whole number of bytes", quoted(text)));
  return static_cast<Bytes>(bytes);
}

namespace {
std::string trimmed_number(double v) {
  std::string s = fmt::format("{:.6g}", v);
  return s;
}
}  // namespace

std::string format_bandwidth(double bytes_per_second) {
  if (std::isinf(bytes_per_second)) return "unlimited";
  if (bytes_per_second >= 1e12) return trimmed_number(bytes_per_second / 1e12) + " TB/s";
  if (bytes_per_second >= 1e9) return trimmed_number(bytes_per_second / 1e9) + " GB/s";
  if (bytes_per_second >= 1e6) return trimmed_number(bytes_per_second / 1e6) + " MB/s";
  if (bytes_per_second >= 1e3) return trimmed_number(bytes_per_second / 1e3) + " KB/s";
  return trimmed_number(bytes_per_second) + " B/s";
}

std::string format_duration(double s) {
  if (std::isinf(s)) return "unbounded";
  if (s == 0) return "0 s";
  if (s < 1e-6) return trimmed_number(s * 1e9) + " ns";
  if (s < 1e-3) return trimmed_number(s * 1e6) + " us";
  if (s < 1) return trimmed_number(s * 1e3) + " ms";
  return trimmed_number(s) + " s";
}

std::string format_size(Bytes b) {
  constexpr struct {
    Bytes factor;
    const char* name;
  } kBinary[] = {{Bytes{1} << 40, "TiB"},
                 {Bytes{1} << 30, "GiB"},
                 {Bytes{1} << 20, "MiB"},
                 {Bytes{1} << 10, "KiB"}};
  for (const auto& u : kBinary)
    if (b >= u.factor && b % u.factor == 0) return fmt::format("{} {}", b / u.factor, u.name);
  return fmt::format("{} B", b);
}

std::string format_size_estimate(double bytes) {
  constexpr double kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024, kTiB = kGiB * 1024;
  if (bytes >= 1024 * kTiB) return fmt::format("{:.3g} TiB", bytes / kTiB);
  if (bytes >= kTiB) return fmt::format("{:.1f} TiB", bytes / kTiB);
  if (bytes >= kGiB) return fmt::format("{:.1f} GiB", bytes / kGiB);
  if (bytes >= kMiB) return fmt::format("{:.1f} MiB", bytes / kMiB);
  return fmt::format("{:.1f} KiB", bytes / kKiB);
}

}  // namespace collsim
