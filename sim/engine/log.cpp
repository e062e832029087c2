#include "sim/engine/log.h"

#include <cstdarg>

namespace vspyre {

DebugFlag::DebugFlag(const char* name, const char* description) : m_name(name), m_description(description) {
  all().push_back(this);
}

std::vector<DebugFlag*>& DebugFlag::all() {
  static std::vector<DebugFlag*> flags;
  return flags;
}

std::vector<std::string> DebugFlag::enable(std::string_view list) {
  std::vector<std::string> unknown;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = list.find(',', start);
    const std::string_view name = list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (!name.empty()) {
      bool found = false;
      for (auto* f : all())
        if (name == "all" || name == f->m_name) {
          f->m_on = true;
          found = true;
        }
      if (!found) unknown.emplace_back(name);
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return unknown;
}

void debug_print(const DebugFlag& flag, double time_ps, const char* fmt, ...) {
  std::fprintf(stderr, "%14.3f ns [%s] ", time_ps / 1e3, flag.name());
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
}

}  // namespace vspyre
