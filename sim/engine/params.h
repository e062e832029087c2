// Parameters, declared where they are read. A component asks its ParamReader for each value with
// the value's default, unit kind, description and provenance in the same call, so `vspyre
// describe` prints exactly what the code reads, and any key in the config that no code asked for
// is reported as unknown (with a did-you-mean) instead of being silently ignored.
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "sim/engine/config.h"
#include "sim/engine/units.h"

namespace vspyre {

enum class Provenance { Datasheet, Measured, Derived, Estimate, Override };
std::string_view provenance_name(Provenance p);
std::optional<Provenance> provenance_from_name(std::string_view s);

// A value given in the long form {value: 2MiB, provenance: datasheet, source: "..."}: its keys
// checked (an unknown one is an error with a did-you-mean) and the node holding the value. A node
// that is not a map is its own value. `path` is the key as the config spells it, for errors.
struct LongForm {
  const ConfigNode* value = nullptr;
  std::optional<Provenance> provenance;
  std::string source;
};
LongForm read_long_form(const ConfigNode& node, const std::string& path);

enum class ParamKind { Int, Real, Bool, String, Choice, Size, Frequency, Time, Bandwidth };
std::string_view param_kind_name(ParamKind k);

struct ParamSpec {
  std::string path;  // relative to the component, e.g. "lx.size"
  ParamKind kind = ParamKind::Int;
  std::string default_text;
  std::string description;
  Provenance provenance = Provenance::Estimate;
  std::string source;                // where the default comes from, optional
  std::vector<std::string> choices;  // for Choice
  // Filled when a config supplied the value.
  std::optional<std::string> value_text;
  std::optional<Provenance> value_provenance;
  std::string value_source;
};

// Declaration-time metadata for one parameter read.
struct ParamInfo {
  std::string_view description;
  Provenance provenance = Provenance::Estimate;
  std::string_view source = {};
};

class ParamReader {
 public:
  // `node` may be null (all defaults). `where` names the component for messages ("card.core_3").
  ParamReader(const ConfigNode* node, std::string where, std::string prefix = "");

  int64_t get_int(std::string_view key, int64_t def, ParamInfo info, int64_t min = INT64_MIN,
                  int64_t max = INT64_MAX);
  double get_real(std::string_view key, double def, ParamInfo info, double min = -HUGE_VAL, double max = HUGE_VAL);
  bool get_bool(std::string_view key, bool def, ParamInfo info);
  std::string get_string(std::string_view key, std::string_view def, ParamInfo info);
  std::string get_choice(std::string_view key, std::string_view def,
                         const std::vector<std::string>& choices, ParamInfo info);
  uint64_t get_size(std::string_view key, std::string_view def, ParamInfo info);
  // `min` / `max`: bounds as frequencies ("1MHz"); empty: none.
  double get_frequency(std::string_view key, std::string_view def, ParamInfo info, std::string_view min = {},
                       std::string_view max = {});
  // A time of at most kMaxParamTimePs (1 s), or kMaxParamCycles cycles (1 s at the slowest
  // clock a card takes, 1 MHz).
  TimeValue get_time(std::string_view key, std::string_view def, ParamInfo info);
  static constexpr double kMaxParamTimePs = 1e12;
  static constexpr double kMaxParamCycles = 1e6;
  double get_bandwidth(std::string_view key, std::string_view def, ParamInfo info);

  // A nested group of parameters ("lx: {size: 2MiB}"); its keys are checked like ours.
  ParamReader& group(std::string_view key, std::string_view description);

  // Refuses this group's `key` (a dotted path below it, "lx.size"): one line naming where the
  // value came from (file:line:column, or the -p), the key as the config spells it
  // ("card.core.lx.size", not the instance "card.core_0") and `why`.
  [[noreturn]] void refuse(std::string_view key, const std::string& why) const;
  // Two keys that do not go together (row_size and interleave): both named with where each was
  // given (or "default"), since either may be the one the user changed.
  [[noreturn]] void refuse_pair(std::string_view a, std::string_view b, const std::string& why) const;
  // Where `key`'s value was given ("configs/spyre.yaml:12:5", "-p card.x=1"), or "default".
  std::string given_at(std::string_view key) const;
  // The group's path as a config spells it: instances built with `count:` from one key
  // ("card.core_0") are that key ("card.core").
  std::string config_path() const;

  // Keys the component handles itself (child components, `type`, `count`).
  void claim(std::string_view key) { m_claimed.insert(std::string(key)); }
  // Throws ConfigError for the first key in the config that nothing read or claimed.
  void check_unknown_keys() const;

  const std::vector<ParamSpec>& specs() const { return m_specs; }
  // All specs, this group's and nested groups', with full relative paths.
  std::vector<ParamSpec> all_specs() const;
  const std::string& where() const { return m_where; }
  const ConfigNode* node() const { return m_node; }

 private:
  // Returns the scalar text supplied for `key`, recording the spec. Null when defaulted.
  const ConfigNode* lookup(std::string_view key, ParamKind kind, std::string default_text,
                           const ParamInfo& info, std::vector<std::string> choices = {});
  [[noreturn]] void fail(const ConfigNode& at, std::string_view key, const std::string& why) const;

  const ConfigNode* m_node;
  std::string m_where;
  std::string m_prefix;
  std::vector<ParamSpec> m_specs;
  std::set<std::string> m_claimed;
  std::map<std::string, std::unique_ptr<ParamReader>, std::less<>> m_groups;
  std::vector<std::string> m_group_order;
};

// Edit distance based suggestion: the candidate nearest to `word`, if near enough.
std::optional<std::string> did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace vspyre
