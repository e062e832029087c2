// Values with units, parsed in one place. Every size, frequency, time and bandwidth in a config
// goes through these functions, so "2MiB", "1.5GHz", "3ns", "4cycles" and "150GB/s" mean the same
// thing everywhere.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vspyre {

// A duration that may be given in cycles of the owning component's clock.
struct TimeValue {
  double value = 0;  // picoseconds, or cycles when in_cycles
  bool in_cycles = false;
  double to_ps(double clock_hz) const { return in_cycles ? value * 1e12 / clock_hz : value; }
};

// Each returns std::nullopt with `why` filled when the text is not a valid quantity of that kind.
std::optional<uint64_t> parse_size(std::string_view text, std::string* why = nullptr);
std::optional<double> parse_frequency(std::string_view text, std::string* why = nullptr);  // Hz
std::optional<TimeValue> parse_time(std::string_view text, std::string* why = nullptr);
std::optional<double> parse_bandwidth(std::string_view text, std::string* why = nullptr);  // B/s

// Human-readable forms used by `describe` and the reports.
std::string format_size(uint64_t bytes);
std::string format_frequency(double hz);
std::string format_time_ps(double ps);
std::string format_bandwidth(double bytes_per_s);

}  // namespace vspyre
