#include "sim/engine/units.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>

namespace vspyre {
namespace {

struct Unit {
  std::string_view name;
  double scale;
};

// Splits "1.5GHz" into 1.5 and "GHz". Spaces between number and unit are allowed.
bool split_number(std::string_view text, double& number, std::string_view& unit, std::string* why) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.' ||
                             text[i] == '-' || text[i] == '+' ||
                             ((text[i] == 'e' || text[i] == 'E') && i > 0 && i + 1 < text.size() &&
                              (std::isdigit(static_cast<unsigned char>(text[i + 1])) ||
                               text[i + 1] == '-' || text[i + 1] == '+'))))
    ++i;
  if (i == 0) {
    if (why) *why = "no number in '" + std::string(text) + "'";
    return false;
  }
  std::string num(text.substr(0, i));
  char* end = nullptr;
  number = std::strtod(num.c_str(), &end);
  if (end != num.c_str() + num.size() || !std::isfinite(number)) {
    if (why) *why = "'" + num + "' is not a number";
    return false;
  }
  unit = text.substr(i);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front()))) unit.remove_prefix(1);
  return true;
}

template <size_t N>
std::optional<double> parse_with(std::string_view text, const std::array<Unit, N>& units,
                                 const char* kind, const char* example, std::string* why) {
  double number = 0;
  std::string_view unit;
  if (!split_number(text, number, unit, why)) {
    if (why) *why += std::string(" (expected a ") + kind + " such as " + example + ")";
    return std::nullopt;
  }
  for (const auto& u : units) {
    if (u.name == unit) {
      if (number < 0) {
        if (why) *why = std::string("a ") + kind + " cannot be negative: '" + std::string(text) + "'";
        return std::nullopt;
      }
      return number * u.scale;
    }
  }
  if (why) {
    std::string list;
    for (const auto& u : units) list += (list.empty() ? "" : ", ") + std::string(u.name);
    *why = std::string("'") + std::string(text) + "' has " +
           (unit.empty() ? std::string("no unit") : "unknown unit '" + std::string(unit) + "'") +
           " (expected a " + kind + " such as " + example + "; units: " + list + ")";
  }
  return std::nullopt;
}

constexpr std::array<Unit, 9> kSizeUnits{{{"B", 1},
                                          {"KiB", 1024.0},
                                          {"MiB", 1024.0 * 1024},
                                          {"GiB", 1024.0 * 1024 * 1024},
                                          {"TiB", 1024.0 * 1024 * 1024 * 1024},
                                          {"KB", 1e3},
                                          {"MB", 1e6},
                                          {"GB", 1e9},
                                          {"TB", 1e12}}};
constexpr std::array<Unit, 4> kFreqUnits{{{"Hz", 1}, {"kHz", 1e3}, {"MHz", 1e6}, {"GHz", 1e9}}};
constexpr std::array<Unit, 6> kTimeUnits{
    {{"ps", 1}, {"ns", 1e3}, {"us", 1e6}, {"µs", 1e6}, {"ms", 1e9}, {"s", 1e12}}};
constexpr std::array<Unit, 9> kBwUnits{{{"B/s", 1},
                                        {"KB/s", 1e3},
                                        {"MB/s", 1e6},
                                        {"GB/s", 1e9},
                                        {"TB/s", 1e12},
                                        {"KiB/s", 1024.0},
                                        {"MiB/s", 1024.0 * 1024},
                                        {"GiB/s", 1024.0 * 1024 * 1024},
                                        {"TiB/s", 1024.0 * 1024 * 1024 * 1024}}};

std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

std::optional<uint64_t> parse_size(std::string_view text, std::string* why) {
  auto v = parse_with(text, kSizeUnits, "size", "2MiB", why);
  if (!v) return std::nullopt;
  if (*v != std::floor(*v) || *v > 1.8e19) {
    if (why) *why = "'" + std::string(text) + "' is not a whole number of bytes";
    return std::nullopt;
  }
  return static_cast<uint64_t>(*v);
}

std::optional<double> parse_frequency(std::string_view text, std::string* why) {
  auto v = parse_with(text, kFreqUnits, "frequency", "1.5GHz", why);
  if (v && *v <= 0) {
    if (why) *why = "a frequency must be positive: '" + std::string(text) + "'";
    return std::nullopt;
  }
  return v;
}

std::optional<TimeValue> parse_time(std::string_view text, std::string* why) {
  double number = 0;
  std::string_view unit;
  std::string ignored;
  if (split_number(text, number, unit, &ignored) && (unit == "cycle" || unit == "cycles")) {
    if (number < 0) {
      if (why) *why = "a time cannot be negative: '" + std::string(text) + "'";
      return std::nullopt;
    }
    return TimeValue{number, true};
  }
  constexpr std::array<Unit, 8> units{{{"ps", 1},
                                       {"ns", 1e3},
                                       {"us", 1e6},
                                       {"µs", 1e6},
                                       {"ms", 1e9},
                                       {"s", 1e12},
                                       {"cycles", 0},
                                       {"cycle", 0}}};
  auto v = parse_with(text, units, "time", "3ns or 4cycles", why);
  if (!v) return std::nullopt;
  return TimeValue{*v, false};
}

std::optional<double> parse_bandwidth(std::string_view text, std::string* why) {
  return parse_with(text, kBwUnits, "bandwidth", "150GB/s", why);
}

std::string format_size(uint64_t bytes) {
  // The exact form with the smallest number: 128GB rather than 125000000KiB, 2MiB rather than
  // 2097152B; binary units first on a tie.
  static constexpr std::array<std::pair<uint64_t, const char*>, 8> units{
      {{1ull << 40, "TiB"}, {1ull << 30, "GiB"}, {1ull << 20, "MiB"}, {1ull << 10, "KiB"},
       {1000000000000ull, "TB"}, {1000000000ull, "GB"}, {1000000ull, "MB"}, {1000ull, "KB"}}};
  uint64_t best = bytes;
  const char* best_name = "B";
  for (auto [scale, name] : units)
    if (bytes >= scale && bytes % scale == 0 && bytes / scale < best) {
      best = bytes / scale;
      best_name = name;
    }
  return std::to_string(best) + best_name;
}

std::string format_frequency(double hz) {
  if (hz >= 1e9) return fmt_double(hz / 1e9) + "GHz";
  if (hz >= 1e6) return fmt_double(hz / 1e6) + "MHz";
  if (hz >= 1e3) return fmt_double(hz / 1e3) + "kHz";
  return fmt_double(hz) + "Hz";
}

std::string format_time_ps(double ps) {
  if (ps >= 1e12) return fmt_double(ps / 1e12) + "s";
  if (ps >= 1e9) return fmt_double(ps / 1e9) + "ms";
  if (ps >= 1e6) return fmt_double(ps / 1e6) + "us";
  if (ps >= 1e3) return fmt_double(ps / 1e3) + "ns";
  return fmt_double(ps) + "ps";
}

std::string format_bandwidth(double bps) {
  if (bps >= 1e12) return fmt_double(bps / 1e12) + "TB/s";
  if (bps >= 1e9) return fmt_double(bps / 1e9) + "GB/s";
  if (bps >= 1e6) return fmt_double(bps / 1e6) + "MB/s";
  if (bps >= 1e3) return fmt_double(bps / 1e3) + "KB/s";
  return fmt_double(bps) + "B/s";
}

}  // namespace vspyre
