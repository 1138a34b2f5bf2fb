#pragma once
// Quantities with units, as written in JSON files and on the command line.
//
// Inside collsim every quantity is a plain number in SI base units: seconds (double), bytes per
// second (double) and bytes (exact 64-bit integer). Units exist only at the edges, where text is
// parsed or printed, so the engine never converts anything.
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

namespace collsim {

using Bytes = std::uint64_t;

// A cost parameter that is absent costs nothing: infinite bandwidth, zero latency.
inline constexpr double kUnlimited = std::numeric_limits<double>::infinity();

// Valid ranges; values outside are input errors, so that NaN, Inf and 1e308 never reach the engine.
inline constexpr double kMaxBandwidth = 1e15;      // bytes/s (1 PB/s)
inline constexpr double kMaxDuration = 1e6;        // seconds (about 11.6 days)
inline constexpr Bytes kMaxSize = Bytes{1} << 50;  // 1 PiB

// Thrown for text that is not a valid quantity. The message says what was found, what is
// expected and gives an example; callers add the file and location.
class UnitError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// "25GB/s", "25 GB/s", "200Gb/s", "12.5GiB/s" -> bytes per second.
// Decimal prefixes are powers of 1000, binary ones (Ki, Mi, Gi, Ti) powers of 1024; a lower-case
// "b" means bits. A bare number is refused with a suggested unit.
double parse_bandwidth(std::string_view text);

// "1us", "500 ns", "2.5ms", "0s" -> seconds. Units: ps, ns, us (or µs), ms, s.
double parse_duration(std::string_view text);

// "64MiB", "1GB", "4096", "1.5KiB" -> bytes. A bare integer is bytes. The result must be a whole
// number of bytes no larger than kMaxSize.
Bytes parse_size(std::string_view text);

// Short human forms used in tables and echoed configurations: "25 GB/s", "1.5 us", "64 MiB".
std::string format_bandwidth(double bytes_per_second);
std::string format_duration(double seconds);
std::string format_size(Bytes bytes);
// An estimate of a size, rounded ("53.9 GiB"): printed to the byte it would claim a precision it
// does not have.
std::string format_size_estimate(double bytes);

}  // namespace collsim
