// Named debug flags. VSPYRE_DEBUG(flag, ...) costs one predictable branch when the flag is off:
// the message is not even formatted. Flags are switched on by `--debug a,b` or VSPYRE_DEBUG=a,b.
#pragma once
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace vspyre {

class DebugFlag {
 public:
  DebugFlag(const char* name, const char* description);
  bool on() const { return m_on; }
  const char* name() const { return m_name; }
  const char* description() const { return m_description; }
  static std::vector<DebugFlag*>& all();
  // Switches on the comma-separated flags ("all" for every one). Returns unknown names.
  static std::vector<std::string> enable(std::string_view list);

 private:
  const char* m_name;
  const char* m_description;
  bool m_on = false;
};

void debug_print(const DebugFlag& flag, double time_ps, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

}  // namespace vspyre

#define VSPYRE_DEBUG(flag, time_ps, ...)                                     \
  do {                                                                       \
    if (__builtin_expect((flag).on(), 0)) ::vspyre::debug_print((flag), (time_ps), __VA_ARGS__); \
  } while (0)
