#include "topology/units.hpp"

#include <catch2/catch.hpp>

using namespace collsim;

TEST_CASE("bandwidth units: decimal bytes, binary bytes and bits") {
  CHECK(parse_bandwidth("25GB/s") == 25e9);
  CHECK(parse_bandwidth("25 GB/s") == 25e9);
  CHECK(parse_bandwidth("1GiB/s") == 1073741824.0);
  // 400 Gb/s is 400e9 bits/s = 50e9 bytes/s.
  CHECK(parse_bandwidth("400Gb/s") == 50e9);
  CHECK(parse_bandwidth("12.5e0 GB/s") == 12.5e9);
}

TEST_CASE("durations") {
  CHECK(parse_duration("1us") == 1e-6);
  CHECK(parse_duration("500ns") == Approx(5e-7).epsilon(1e-15));
  CHECK(parse_duration("0s") == 0.0);
  CHECK(parse_duration("2ms") == 2e-3);
}

TEST_CASE("sizes: bare integers are bytes, decimal and binary prefixes") {
  CHECK(parse_size("4096") == 4096u);
  CHECK(parse_size("64MiB") == 64u * 1024 * 1024);
  CHECK(parse_size("1GB") == 1000000000u);
  CHECK(parse_size("1.5KiB") == 1536u);
}

TEST_CASE("bad quantities are refused with a message that suggests the fix") {
  CHECK_THROWS_WITH(parse_bandwidth("25"),
                    Catch::Contains("has no unit") && Catch::Contains("25GB/s"));
  CHECK_THROWS_WITH(parse_duration("1"), Catch::Contains("1us"));
  CHECK_THROWS_WITH(parse_bandwidth("25 furlongs"), Catch::Contains("unknown bandwidth unit"));
  CHECK_THROWS_WITH(parse_bandwidth("0GB/s"), Catch::Contains("positive"));
  CHECK_THROWS_WITH(parse_bandwidth("-5GB/s"), Catch::Contains("positive"));
  CHECK_THROWS_WITH(parse_bandwidth("1e308GB/s"), Catch::Contains("maximum"));
  CHECK_THROWS_WITH(parse_duration("-1us"), Catch::Contains("negative"));
  CHECK_THROWS_AS(parse_bandwidth("nanGB/s"), UnitError);
  CHECK_THROWS_AS(parse_bandwidth("infGB/s"), UnitError);
  CHECK_THROWS_AS(parse_bandwidth(""), UnitError);
  CHECK_THROWS_AS(parse_bandwidth("GB/s"), UnitError);
  CHECK_THROWS_WITH(parse_size("99999999999GiB"), Catch::Contains("maximum"));
  CHECK_THROWS_WITH(parse_size("0"), Catch::Contains("positive"));
  CHECK_THROWS_WITH(parse_size("1.5B"), Catch::Contains("whole number"));
  CHECK_THROWS_AS(parse_size("\x01\x02garbage"), UnitError);
}

TEST_CASE("formatting picks a readable unit") {
  CHECK(format_bandwidth(25e9) == "25 GB/s");
  CHECK(format_duration(1.5e-6) == "1.5 us");
  CHECK(format_size(64u << 20) == "64 MiB");
  CHECK(format_size(1000) == "1000 B");
  CHECK(format_bandwidth(kUnlimited) == "unlimited");
}

TEST_CASE("overflow and garbage in quantities") {
  // strtod overflows to infinity: refused as above the maximum, never passed on as Inf.
  CHECK_THROWS_WITH(parse_bandwidth("1e400GB/s"), Catch::Contains("maximum"));
  CHECK_THROWS_WITH(parse_duration("1e400s"), Catch::Contains("maximum"));
  CHECK_THROWS_WITH(parse_duration("2e6s"), Catch::Contains("maximum"));
  CHECK_THROWS_AS(parse_bandwidth("0x10GB/s"), UnitError);
  CHECK_THROWS_AS(parse_bandwidth("25 GB/s extra"), UnitError);
  CHECK_THROWS_AS(parse_bandwidth("25GB/s/s"), UnitError);
  CHECK_THROWS_AS(parse_duration("1..5us"), UnitError);
  CHECK_THROWS_AS(parse_duration("us"), UnitError);
  CHECK_THROWS_AS(parse_duration("   "), UnitError);
  CHECK_THROWS_AS(parse_duration("NaNus"), UnitError);
  CHECK_THROWS_AS(parse_duration("\xff\xfe"), UnitError);
  // 1 PB/s is the largest bandwidth accepted; one bit more is refused.
  CHECK(parse_bandwidth("1000TB/s") == 1e15);
  CHECK_THROWS_WITH(parse_bandwidth("1001TB/s"), Catch::Contains("maximum"));
}
