#include "sim/engine/params.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace vspyre {

std::string_view provenance_name(Provenance p) {
  switch (p) {
    case Provenance::Datasheet: return "datasheet";
    case Provenance::Measured: return "measured";
    case Provenance::Derived: return "derived";
    case Provenance::Estimate: return "estimate";
    case Provenance::Override: return "override";
  }
  return "?";
}

std::optional<Provenance> provenance_from_name(std::string_view s) {
  for (auto p : {Provenance::Datasheet, Provenance::Measured, Provenance::Derived,
                 Provenance::Estimate, Provenance::Override})
    if (provenance_name(p) == s) return p;
  return std::nullopt;
}

std::string_view param_kind_name(ParamKind k) {
  switch (k) {
    case ParamKind::Int: return "integer";
    case ParamKind::Real: return "number";
    case ParamKind::Bool: return "boolean";
    case ParamKind::String: return "string";
    case ParamKind::Choice: return "choice";
    case ParamKind::Size: return "size";
    case ParamKind::Frequency: return "frequency";
    case ParamKind::Time: return "time";
    case ParamKind::Bandwidth: return "bandwidth";
  }
  return "?";
}

namespace {

// "an integer", "a size": for messages.
std::string a_kind(ParamKind k) {
  const std::string_view n = param_kind_name(k);
  const bool vowel = !n.empty() && std::string_view("aeiou").find(n.front()) != std::string_view::npos;
  return (vowel ? "an " : "a ") + std::string(n);
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t sub = prev[j - 1] + (std::tolower(a[i - 1]) == std::tolower(b[j - 1]) ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::optional<std::string> did_you_mean(std::string_view word,
                                        const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  // Near means: at most a third of the word changed, and at least one edit allowed.
  if (best && best_d <= std::max<size_t>(1, (word.size() + 2) / 3)) return best;
  return std::nullopt;
}

ParamReader::ParamReader(const ConfigNode* node, std::string where, std::string prefix)
    : m_node(node), m_where(std::move(where)), m_prefix(std::move(prefix)) {
  if (m_node && m_node->is_null()) m_node = nullptr;
  if (m_node && !m_node->is_map())
    throw ConfigError(m_node->loc(), "'" + config_path() + "' expects a map of parameters, found " +
                                         m_node->kind_name());
}

void ParamReader::fail(const ConfigNode& at, std::string_view key, const std::string& why) const {
  throw ConfigError(at.loc(), config_path() + "." + std::string(key) + ": " + why);
}

std::string ParamReader::config_path() const {
  // The top-level reader is "config" (Simulation): its groups are the config's own keys ("sim").
  if (m_where.rfind("config.", 0) == 0) return ParamReader(nullptr, m_where.substr(7)).config_path();
  std::string out;
  size_t start = 0;
  while (start <= m_where.size()) {
    size_t end = m_where.find('.', start);
    if (end == std::string::npos) end = m_where.size();
    std::string seg = m_where.substr(start, end - start);
    const size_t us = seg.rfind('_');
    if (us != std::string::npos && us + 1 < seg.size() && us > 0 &&
        seg.find_first_not_of("0123456789", us + 1) == std::string::npos)
      seg.resize(us);
    out += (out.empty() ? "" : ".") + seg;
    start = end + 1;
  }
  return out;
}

namespace {
// The node that gives `key` (a dotted path below `node`), its long form's value, or null.
const ConfigNode* node_of(const ConfigNode* node, std::string_view key) {
  const ConfigNode* at = node;
  size_t start = 0;
  while (at && start <= key.size()) {
    size_t end = key.find('.', start);
    if (end == std::string_view::npos) end = key.size();
    at = at->is_map() ? at->find(key.substr(start, end - start)) : nullptr;
    start = end + 1;
  }
  if (at && at->is_map())
    if (const ConfigNode* v = at->find("value")) at = v;
  return at;
}
}  // namespace

LongForm read_long_form(const ConfigNode& node, const std::string& path) {
  LongForm out;
  out.value = &node;
  if (!node.is_map()) return out;
  out.value = node.find("value");
  if (!out.value) throw ConfigError(node.loc(), path + ": a parameter given as a map needs a 'value' key");
  for (const auto& [k, sub] : node.entries()) {
    if (k == "value") continue;
    if (k == "provenance") {
      out.provenance = sub.is_scalar() ? provenance_from_name(sub.text()) : std::nullopt;
      if (!out.provenance)
        throw ConfigError(sub.loc(), path + ".provenance: expected one of datasheet, measured, derived, estimate, override");
    } else if (k == "source") {
      if (!sub.is_scalar()) throw ConfigError(sub.loc(), path + ".source: expected text, found " + sub.kind_name());
      out.source = sub.text();
    } else {
      std::string msg = "unknown key '" + k + "' in a parameter (expected value, provenance, source)";
      if (auto s = did_you_mean(k, {"value", "provenance", "source"})) msg += "; did you mean '" + *s + "'?";
      throw ConfigError(sub.key_loc(), path + ": " + msg);
    }
  }
  return out;
}

std::string ParamReader::given_at(std::string_view key) const {
  const ConfigNode* at = node_of(m_node, key);
  return at ? at->loc().str() : "default";
}

void ParamReader::refuse_pair(std::string_view a, std::string_view b, const std::string& why) const {
  throw InputError(config_path() + "." + std::string(a) + " (" + given_at(a) + ") and " + std::string(b) + " (" +
                   given_at(b) + "): " + why);
}

void ParamReader::refuse(std::string_view key, const std::string& why) const {
  const ConfigNode* at = node_of(m_node, key);
  const std::string what = config_path() + "." + std::string(key) + ": " + why;
  if (at) throw ConfigError(at->loc(), what);
  throw InputError(what);
}

const ConfigNode* ParamReader::lookup(std::string_view key, ParamKind kind, std::string default_text,
                                      const ParamInfo& info, std::vector<std::string> choices) {
  ParamSpec spec;
  spec.path = m_prefix + std::string(key);
  for (const auto& s : m_specs)
    if (s.path == spec.path) throw std::logic_error(m_where + ": parameter '" + spec.path + "' declared twice");
  spec.kind = kind;
  spec.default_text = std::move(default_text);
  spec.description = std::string(info.description);
  spec.provenance = info.provenance;
  spec.source = std::string(info.source);
  spec.choices = std::move(choices);
  const ConfigNode* value = m_node ? m_node->find(key) : nullptr;
  if (value && value->is_null()) fail(*value, key, "no value given (expected " + a_kind(kind) + ")");
  if (value) {
    LongForm lf = read_long_form(*value, config_path() + "." + std::string(key));
    spec.value_provenance = lf.provenance;
    spec.value_source = std::move(lf.source);
    value = lf.value;
  }
  if (value && !value->is_scalar())
    fail(*value, key, "expected " + a_kind(kind) + ", found " + value->kind_name());
  if (value) spec.value_text = value->text();
  m_specs.push_back(std::move(spec));
  return value;
}

int64_t ParamReader::get_int(std::string_view key, int64_t def, ParamInfo info, int64_t min, int64_t max) {
  const ConfigNode* v = lookup(key, ParamKind::Int, std::to_string(def), info);
  if (!v) return def;
  const std::string& t = v->text();
  char* end = nullptr;
  errno = 0;
  // Decimal, or hexadecimal with 0x; never octal, so "010" is ten as YAML 1.2 reads it.
  const size_t sign = (!t.empty() && (t[0] == '-' || t[0] == '+')) ? 1 : 0;
  const bool hex = t.size() > sign + 2 && t[sign] == '0' && (t[sign + 1] == 'x' || t[sign + 1] == 'X');
  const long long x = std::strtoll(t.c_str(), &end, hex ? 16 : 10);
  if (t.empty() || end != t.c_str() + t.size() || errno == ERANGE)
    fail(*v, key, "expected an integer, found '" + t + "'");
  if (x < min || x > max)
    fail(*v, key, "value " + t + " out of range [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  return x;
}

double ParamReader::get_real(std::string_view key, double def, ParamInfo info, double min, double max) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", def);
  const ConfigNode* v = lookup(key, ParamKind::Real, buf, info);
  if (!v) return def;
  const std::string& t = v->text();
  char* end = nullptr;
  const double x = std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size() || !std::isfinite(x))
    fail(*v, key, "expected a number, found '" + t + "'");
  if (x < min || x > max) {
    char range[96];
    std::snprintf(range, sizeof range, "[%g, %g]", min, max);
    fail(*v, key, "value " + t + " out of range " + range);
  }
  return x;
}

bool ParamReader::get_bool(std::string_view key, bool def, ParamInfo info) {
  const ConfigNode* v = lookup(key, ParamKind::Bool, def ? "true" : "false", info);
  if (!v) return def;
  const std::string& t = v->text();
  if (t == "true" || t == "yes" || t == "on") return true;
  if (t == "false" || t == "no" || t == "off") return false;
  fail(*v, key, "expected true or false, found '" + t + "'");
}

std::string ParamReader::get_string(std::string_view key, std::string_view def, ParamInfo info) {
  const ConfigNode* v = lookup(key, ParamKind::String, std::string(def), info);
  return v ? v->text() : std::string(def);
}

std::string ParamReader::get_choice(std::string_view key, std::string_view def,
                                    const std::vector<std::string>& choices, ParamInfo info) {
  const ConfigNode* v = lookup(key, ParamKind::Choice, std::string(def), info, choices);
  if (!v) return std::string(def);
  if (std::find(choices.begin(), choices.end(), v->text()) != choices.end()) return v->text();
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
  std::string msg = "'" + v->text() + "' is not one of: " + list;
  if (auto s = did_you_mean(v->text(), choices)) msg += "; did you mean '" + *s + "'?";
  fail(*v, key, msg);
}

uint64_t ParamReader::get_size(std::string_view key, std::string_view def, ParamInfo info) {
  const ConfigNode* v = lookup(key, ParamKind::Size, std::string(def), info);
  std::string why;
  auto r = parse_size(v ? v->text() : def, &why);
  if (!r) {
    if (!v) throw std::logic_error("bad default for " + m_where + "." + std::string(key) + ": " + why);
    fail(*v, key, why);
  }
  return *r;
}

double ParamReader::get_frequency(std::string_view key, std::string_view def, ParamInfo info, std::string_view min,
                                  std::string_view max) {
  const ConfigNode* v = lookup(key, ParamKind::Frequency, std::string(def), info);
  std::string why;
  auto r = parse_frequency(v ? v->text() : def, &why);
  if (!r) {
    if (!v) throw std::logic_error("bad default for " + m_where + "." + std::string(key) + ": " + why);
    fail(*v, key, why);
  }
  auto bound = [&](std::string_view b) {
    std::string bad;
    auto x = parse_frequency(b, &bad);
    if (!x) throw std::logic_error("bad bound for " + m_where + "." + std::string(key) + ": " + bad);
    return *x;
  };
  if (v && ((!min.empty() && *r < bound(min)) || (!max.empty() && *r > bound(max))))
    fail(*v, key,
         "'" + v->text() + "' out of range [" + std::string(min.empty() ? "0" : min) + ", " +
             std::string(max.empty() ? "inf" : max) + "]");
  return *r;
}

TimeValue ParamReader::get_time(std::string_view key, std::string_view def, ParamInfo info) {
  const ConfigNode* v = lookup(key, ParamKind::Time, std::string(def), info);
  std::string why;
  auto r = parse_time(v ? v->text() : def, &why);
  if (!r) {
    if (!v) throw std::logic_error("bad default for " + m_where + "." + std::string(key) + ": " + why);
    fail(*v, key, why);
  }
  // Every time on the card is a latency, an interval or a window: none comes near a second, and
  // one past it (2e7s) overflowed simulated time or wrapped the seeded jitters.
  if (v && (r->in_cycles ? r->value > kMaxParamCycles : r->value > kMaxParamTimePs))
    fail(*v, key, "'" + v->text() + "' out of range [0, " + (r->in_cycles ? "1e6cycles" : "1s") + "]");
  return *r;
}

double ParamReader::get_bandwidth(std::string_view key, std::string_view def, ParamInfo info) {
  const ConfigNode* v = lookup(key, ParamKind::Bandwidth, std::string(def), info);
  std::string why;
  auto r = parse_bandwidth(v ? v->text() : def, &why);
  if (!r) {
    if (!v) throw std::logic_error("bad default for " + m_where + "." + std::string(key) + ": " + why);
    fail(*v, key, why);
  }
  return *r;
}

ParamReader& ParamReader::group(std::string_view key, std::string_view description) {
  auto it = m_groups.find(key);
  if (it != m_groups.end()) return *it->second;
  (void)description;
  const ConfigNode* sub = m_node ? m_node->find(key) : nullptr;
  auto reader = std::make_unique<ParamReader>(sub, m_where + "." + std::string(key),
                                              m_prefix + std::string(key) + ".");
  m_group_order.emplace_back(key);
  return *m_groups.emplace(std::string(key), std::move(reader)).first->second;
}

void ParamReader::check_unknown_keys() const {
  if (m_node) {
    std::vector<std::string> known;
    for (const auto& s : m_specs) known.push_back(s.path.substr(m_prefix.size()));
    for (const auto& g : m_group_order) known.push_back(g);
    for (const auto& c : m_claimed) known.push_back(c);
    for (const auto& [k, v] : m_node->entries()) {
      if (std::find(known.begin(), known.end(), k) != known.end()) continue;
      std::string msg = "unknown key '" + k + "' in " + config_path();
      if (auto s = did_you_mean(k, known)) msg += "; did you mean '" + *s + "'?";
      std::vector<std::string> sorted = known;
      std::sort(sorted.begin(), sorted.end());
      std::string list;
      for (const auto& x : sorted) list += (list.empty() ? "" : ", ") + x;
      msg += " (expected one of: " + list + ")";
      throw ConfigError(v.key_loc().file.empty() ? m_node->loc() : v.key_loc(), msg);
    }
  }
  for (const auto& g : m_group_order) m_groups.find(g)->second->check_unknown_keys();
}

std::vector<ParamSpec> ParamReader::all_specs() const {
  std::vector<ParamSpec> out = m_specs;
  for (const auto& g : m_group_order) {
    auto sub = m_groups.find(g)->second->all_specs();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

}  // namespace vspyre
