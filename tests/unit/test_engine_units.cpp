// Units: sizes, frequencies, times and bandwidths are parsed in one place (sim/engine/units.h).
#include "catch.h"

#include <string>

#include "sim/engine/units.h"

using namespace vspyre;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("engine: parse_size accepts every binary and decimal unit", "[engine][units]") {
  CHECK(parse_size("0B").value() == 0u);
  CHECK(parse_size("1B").value() == 1u);
  CHECK(parse_size("128B").value() == 128u);
  CHECK(parse_size("1KiB").value() == 1024u);
  CHECK(parse_size("64KiB").value() == 65536u);
  CHECK(parse_size("2MiB").value() == 2u * 1024 * 1024);
  CHECK(parse_size("3GiB").value() == 3ull * 1024 * 1024 * 1024);
  CHECK(parse_size("1TiB").value() == 1ull << 40);
  CHECK(parse_size("1KB").value() == 1000u);
  CHECK(parse_size("5MB").value() == 5000000u);
  CHECK(parse_size("128GB").value() == 128000000000ull);
  CHECK(parse_size("2TB").value() == 2000000000000ull);
  // Fractions that come out whole, spaces, exponents.
  CHECK(parse_size("1.5KiB").value() == 1536u);
  CHECK(parse_size("0.5MiB").value() == 524288u);
  CHECK(parse_size("  4 KiB  ").value() == 4096u);
  CHECK(parse_size("1e3B").value() == 1000u);
  CHECK(parse_size("2.5e1B").value() == 25u);
  CHECK(parse_size("+8B").value() == 8u);
}

TEST_CASE("engine: parse_size rejects bad sizes with a reason", "[engine][units]") {
  std::string why;
  CHECK_FALSE(parse_size("2MIB", &why));
  CHECK(contains(why, "unknown unit 'MIB'"));
  CHECK(contains(why, "expected a size such as 2MiB"));
  CHECK(contains(why, "units: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB"));

  why.clear();
  CHECK_FALSE(parse_size("4096", &why));
  CHECK(contains(why, "'4096' has no unit"));

  why.clear();
  CHECK_FALSE(parse_size("MiB", &why));
  CHECK(contains(why, "no number in 'MiB'"));
  CHECK(contains(why, "expected a size"));

  why.clear();
  CHECK_FALSE(parse_size("-4KiB", &why));
  CHECK(why == "a size cannot be negative: '-4KiB'");

  why.clear();
  CHECK_FALSE(parse_size("1.5B", &why));
  CHECK(why == "'1.5B' is not a whole number of bytes");

  why.clear();
  CHECK_FALSE(parse_size("1.2.3KiB", &why));
  CHECK(contains(why, "'1.2.3' is not a number"));

  CHECK_FALSE(parse_size(""));
  CHECK_FALSE(parse_size("2 MiB extra"));
  CHECK_FALSE(parse_size("2mib"));    // units are case-sensitive
  CHECK_FALSE(parse_size("2GHz"));    // a frequency is not a size
  CHECK_FALSE(parse_size("100TB0"));  // trailing junk
  CHECK_FALSE(parse_size("20000000TB"));  // does not fit 64 bits
  CHECK_FALSE(parse_size("nanB"));
}

TEST_CASE("engine: parse_frequency Hz to GHz", "[engine][units]") {
  CHECK(parse_frequency("1Hz").value() == Approx(1.0));
  CHECK(parse_frequency("250kHz").value() == Approx(250e3));
  CHECK(parse_frequency("800MHz").value() == Approx(800e6));
  CHECK(parse_frequency("1.5GHz").value() == Approx(1.5e9));
  CHECK(parse_frequency("1.5 GHz").value() == Approx(1.5e9));
  std::string why;
  CHECK_FALSE(parse_frequency("0GHz", &why));
  CHECK(why == "a frequency must be positive: '0GHz'");
  why.clear();
  CHECK_FALSE(parse_frequency("-1GHz", &why));
  CHECK(contains(why, "cannot be negative"));
  why.clear();
  CHECK_FALSE(parse_frequency("1.5GHzz", &why));
  CHECK(contains(why, "unknown unit 'GHzz'"));
  CHECK(contains(why, "units: Hz, kHz, MHz, GHz"));
  CHECK_FALSE(parse_frequency("1.5ghz"));
  CHECK_FALSE(parse_frequency("1.5"));
  CHECK_FALSE(parse_frequency("1.5KHz"));
}

TEST_CASE("engine: parse_time ps to s and cycles", "[engine][units]") {
  auto ps = [](const char* t) { return parse_time(t).value().value; };
  CHECK(ps("7ps") == Approx(7));
  CHECK(ps("3ns") == Approx(3e3));
  CHECK(ps("2.5us") == Approx(2.5e6));
  CHECK(ps("2.5µs") == Approx(2.5e6));
  CHECK(ps("4ms") == Approx(4e9));
  CHECK(ps("1s") == Approx(1e12));
  CHECK(ps("0ns") == Approx(0));
  CHECK_FALSE(parse_time("3ns").value().in_cycles);

  auto c = parse_time("4cycles").value();
  CHECK(c.in_cycles);
  CHECK(c.value == Approx(4));
  auto c1 = parse_time("1cycle").value();
  CHECK(c1.in_cycles);
  CHECK(c1.value == Approx(1));
  CHECK(parse_time("20 cycles").value().in_cycles);

  // Cycles convert with the owning clock; absolute times ignore it.
  CHECK(c.to_ps(1e9) == Approx(4000));
  CHECK(c.to_ps(2e9) == Approx(2000));
  CHECK(parse_time("4cycles")->to_ps(1.5e9) == Approx(4e12 / 1.5e9));
  CHECK(parse_time("5ns")->to_ps(1.5e9) == Approx(5000));

  std::string why;
  CHECK_FALSE(parse_time("-4cycles", &why));
  CHECK(why == "a time cannot be negative: '-4cycles'");
  why.clear();
  CHECK_FALSE(parse_time("3nS", &why));
  CHECK(contains(why, "unknown unit 'nS'"));
  CHECK(contains(why, "3ns or 4cycles"));
  why.clear();
  CHECK_FALSE(parse_time("4cyc", &why));
  CHECK(contains(why, "cycles"));
  CHECK_FALSE(parse_time("cycles"));
  CHECK_FALSE(parse_time("-3ns"));
  CHECK_FALSE(parse_time("10"));
}

TEST_CASE("engine: parse_bandwidth B/s to TB/s and binary units", "[engine][units]") {
  CHECK(parse_bandwidth("1B/s").value() == Approx(1));
  CHECK(parse_bandwidth("3KB/s").value() == Approx(3e3));
  CHECK(parse_bandwidth("500MB/s").value() == Approx(5e8));
  CHECK(parse_bandwidth("150GB/s").value() == Approx(150e9));
  CHECK(parse_bandwidth("204.8GB/s").value() == Approx(204.8e9));
  CHECK(parse_bandwidth("1.2TB/s").value() == Approx(1.2e12));
  CHECK(parse_bandwidth("1KiB/s").value() == Approx(1024));
  CHECK(parse_bandwidth("2MiB/s").value() == Approx(2.0 * 1024 * 1024));
  CHECK(parse_bandwidth("16GiB/s").value() == Approx(16.0 * 1024 * 1024 * 1024));
  CHECK(parse_bandwidth("1TiB/s").value() == Approx(1024.0 * 1024 * 1024 * 1024));
  std::string why;
  CHECK_FALSE(parse_bandwidth("150GBps", &why));
  CHECK(contains(why, "unknown unit 'GBps'"));
  CHECK(contains(why, "expected a bandwidth such as 150GB/s"));
  CHECK_FALSE(parse_bandwidth("150GB"));
  CHECK_FALSE(parse_bandwidth("-1GB/s"));
  CHECK_FALSE(parse_bandwidth("GB/s"));
}

TEST_CASE("engine: format_* give readable quantities that parse back", "[engine][units]") {
  CHECK(format_size(0) == "0B");
  CHECK(format_size(100) == "100B");
  CHECK(format_size(1024) == "1KiB");
  CHECK(format_size(1536) == "1536B");
  CHECK(format_size(2u * 1024 * 1024) == "2MiB");
  CHECK(format_size(3ull << 30) == "3GiB");
  CHECK(format_size(1ull << 40) == "1TiB");
  CHECK(format_size(128000000000ull) == "128GB");
  CHECK(format_size(5000000) == "5MB");
  CHECK(format_size(1000) == "1KB");
  CHECK(format_size(4096000) == "4000KiB");
  CHECK(format_size(2000000000000ull) == "2TB");
  CHECK(format_frequency(1.5e9) == "1.5GHz");
  CHECK(format_frequency(800e6) == "800MHz");
  CHECK(format_frequency(32e3) == "32kHz");
  CHECK(format_frequency(50) == "50Hz");
  CHECK(format_time_ps(0.5) == "0.5ps");
  CHECK(format_time_ps(3000) == "3ns");
  CHECK(format_time_ps(2.5e6) == "2.5us");
  CHECK(format_time_ps(4e9) == "4ms");
  CHECK(format_time_ps(2e12) == "2s");
  CHECK(format_bandwidth(204.8e9) == "204.8GB/s");
  CHECK(format_bandwidth(1.2e12) == "1.2TB/s");
  CHECK(format_bandwidth(500e6) == "500MB/s");
  CHECK(format_bandwidth(3e3) == "3KB/s");
  CHECK(format_bandwidth(12) == "12B/s");

  for (uint64_t b : {0ull, 1ull, 4096ull, 1536ull, 64ull << 20, 7ull << 30, 128000000000ull, 123456789ull})
    CHECK(parse_size(format_size(b)).value() == b);
  for (double hz : {1.0, 1e3, 1.5e9, 933e6})
    CHECK(parse_frequency(format_frequency(hz)).value() == Approx(hz));
  for (double ps : {1.0, 2500.0, 3e6, 60e9, 5e12})
    CHECK(parse_time(format_time_ps(ps)).value().value == Approx(ps));
  for (double bps : {1.0, 2e3, 204.8e9, 64e9, 3.2e12})
    CHECK(parse_bandwidth(format_bandwidth(bps)).value() == Approx(bps));
}
