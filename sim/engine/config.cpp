#include "sim/engine/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace vspyre {
namespace fs = std::filesystem;

ConfigNode ConfigNode::scalar(std::string value, SourceLoc loc) {
  ConfigNode n;
  n.m_kind = Kind::Scalar;
  n.m_text = std::move(value);
  n.m_loc = std::move(loc);
  return n;
}
ConfigNode ConfigNode::null_at(SourceLoc loc) {
  ConfigNode n;
  n.m_loc = std::move(loc);
  return n;
}
ConfigNode ConfigNode::map(SourceLoc loc) {
  ConfigNode n;
  n.m_kind = Kind::Map;
  n.m_loc = std::move(loc);
  return n;
}
ConfigNode ConfigNode::sequence(SourceLoc loc) {
  ConfigNode n;
  n.m_kind = Kind::Sequence;
  n.m_loc = std::move(loc);
  return n;
}

std::string ConfigNode::kind_name() const {
  switch (m_kind) {
    case Kind::Null: return "nothing";
    case Kind::Scalar: return "a value";
    case Kind::Map: return "a map";
    case Kind::Sequence: return "a list";
  }
  return "?";
}

const ConfigNode* ConfigNode::find(std::string_view key) const {
  for (const auto& [k, v] : m_entries)
    if (k == key) return &v;
  return nullptr;
}
ConfigNode* ConfigNode::find(std::string_view key) {
  for (auto& [k, v] : m_entries)
    if (k == key) return &v;
  return nullptr;
}
ConfigNode& ConfigNode::set(const std::string& key, ConfigNode value) {
  if (m_kind == Kind::Null) m_kind = Kind::Map;
  if (auto* existing = find(key)) {
    *existing = std::move(value);
    return *existing;
  }
  m_entries.emplace_back(key, std::move(value));
  return m_entries.back().second;
}
void ConfigNode::erase(std::string_view key) {
  for (auto it = m_entries.begin(); it != m_entries.end(); ++it)
    if (it->first == key) {
      m_entries.erase(it);
      return;
    }
}

void ConfigNode::merge_from(const ConfigNode& over) {
  // A parameter's long form ({value: 16ns, provenance: estimate}) replaces the one it overrides
  // whole: merged key by key it kept the earlier file's source, so describe cited the LPDDR5
  // preset for the LPDDR5X value.
  if (over.is_map() && !over.find("value") && (is_map() || is_null())) {
    if (is_null()) {
      m_kind = Kind::Map;
      m_loc = over.m_loc;
    }
    for (const auto& [k, v] : over.m_entries) {
      if (auto* mine = find(k))
        mine->merge_from(v);
      else
        m_entries.emplace_back(k, v);
    }
    return;
  }
  *this = over;
}

namespace {

bool needs_quotes(const std::string& s) {
  if (s.empty()) return true;
  for (char c : s)
    if (c == ':' || c == '#' || c == '{' || c == '}' || c == '[' || c == ']' || c == ',' ||
        c == '\'' || c == '"' || c == '\n')
      return true;
  // Plain scalars YAML would read back as null, or that start with an indicator character.
  if (s == "~" || s == "null" || s == "Null" || s == "NULL") return true;
  return s.front() == ' ' || s.back() == ' ' || s.front() == '-' || s.front() == '*' ||
         s.front() == '&' || s.front() == '!' || s.front() == '|' || s.front() == '>' ||
         s.front() == '?' || s.front() == '%' || s.front() == '@' || s.front() == '`' ||
         s.front() == '\t' || s.back() == '\t';
}

std::string quoted(const std::string& s) {
  if (!needs_quotes(s)) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

void ConfigNode::emit(std::string& out, int indent) const {
  const std::string pad(indent, ' ');
  switch (m_kind) {
    case Kind::Null: out += " ~\n"; break;
    case Kind::Scalar: out += " " + quoted(m_text) + "\n"; break;
    case Kind::Map:
      if (m_entries.empty()) {
        out += " {}\n";
        break;
      }
      out += "\n";
      for (const auto& [k, v] : m_entries) {
        out += pad + quoted(k) + ":";
        v.emit(out, indent + 2);
      }
      break;
    case Kind::Sequence:
      if (m_items.empty()) {
        out += " []\n";
        break;
      }
      out += "\n";
      for (const auto& item : m_items) {
        out += pad + "-";
        if (item.is_map() && !item.m_entries.empty()) {
          // First entry on the dash line, the rest aligned under it.
          std::string sub;
          item.emit(sub, indent + 2);
          out += " " + sub.substr(sub.find_first_not_of(" \n"));
        } else {
          item.emit(out, indent + 2);
        }
      }
      break;
  }
}

std::string ConfigNode::to_yaml() const {
  std::string out;
  if (is_map()) {
    for (const auto& [k, v] : m_entries) {
      out += quoted(k) + ":";
      v.emit(out, 2);
    }
    return out;
  }
  emit(out, 0);
  return out;
}

namespace {

SourceLoc loc_of(const YAML::Node& n, const std::string& file) {
  const auto m = n.Mark();
  if (m.is_null()) return SourceLoc{file, 0, 0};
  return SourceLoc{file, m.line + 1, m.column + 1};
}

// A config is a few hundred values; YAML aliases (`*a`) can make a few lines stand for billions
// (a list of ten aliases of a list of ten ...): stop converting well before memory runs out.
constexpr size_t kMaxConfigNodes = 1000000;

ConfigNode convert(const YAML::Node& n, const std::string& file, size_t& budget) {
  const SourceLoc loc = loc_of(n, file);
  if (budget == 0)
    throw ConfigError(loc, "more than " + std::to_string(kMaxConfigNodes) +
                               " values (YAML aliases expanded): not a card config");
  --budget;
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: return ConfigNode::null_at(loc);
    case YAML::NodeType::Scalar: return ConfigNode::scalar(n.Scalar(), loc);
    case YAML::NodeType::Sequence: {
      ConfigNode c = ConfigNode::sequence(loc);
      for (const auto& item : n) c.push(convert(item, file, budget));
      return c;
    }
    case YAML::NodeType::Map: {
      ConfigNode c = ConfigNode::map(loc);
      std::set<std::string> seen;
      for (const auto& kv : n) {
        if (!kv.first.IsScalar())
          throw ConfigError(loc_of(kv.first, file), "a map key must be a plain name");
        const std::string key = kv.first.Scalar();
        if (!seen.insert(key).second)
          throw ConfigError(loc_of(kv.first, file), "duplicate key '" + key + "'");
        ConfigNode value = convert(kv.second, file, budget);
        if (value.is_null()) value = ConfigNode::null_at(loc_of(kv.first, file));
        value.set_key_loc(loc_of(kv.first, file));
        c.set(key, std::move(value));
      }
      return c;
    }
  }
  return ConfigNode();
}

ConfigNode parse_yaml(const std::string& text, const std::string& name) {
  try {
    YAML::Node root = YAML::Load(text);
    size_t budget = kMaxConfigNodes;
    return convert(root, name, budget);
  } catch (const YAML::Exception& e) {
    SourceLoc loc{name, e.mark.is_null() ? 0 : e.mark.line + 1,
                  e.mark.is_null() ? 0 : e.mark.column + 1};
    throw ConfigError(loc, "YAML syntax error: " + e.msg);
  }
}

// `applied`: the files merged so far in this load. A file that an included file includes again (a
// what-if and spyre_flow.yaml both include spyre.yaml) is applied once, where it was first
// included: applied again it would undo what the files between set (the what-if's memory, under
// the flow model). A file the user's own config lists (`top`) is applied in full where it is
// listed, even if included before: listed later, it is meant to win.
constexpr size_t kMaxConfigBytes = size_t{16} << 20;

ConfigNode load_with_includes(const fs::path& path, std::vector<fs::path>& stack, std::set<fs::path>& applied,
                              std::vector<fs::path>* read, bool top = false) {
  std::error_code ec;
  fs::path canon = fs::weakly_canonical(path, ec);
  if (ec) canon = path;
  for (const auto& p : stack)
    if (p == canon) throw ConfigError(SourceLoc{path.string()}, "include cycle: this file includes itself");
  if (fs::is_directory(path, ec)) throw InputError(path.string() + ": is a directory, not a config file");
  std::ifstream in(path);
  if (!in) throw InputError(path.string() + ": cannot open config file");
  if (read) read->push_back(canon);
  applied.insert(canon);
  // Read at most kMaxConfigBytes: a config is a few kilobytes, and a path such as /dev/zero would
  // otherwise be read until memory runs out. (A pipe, as `--config <(...)` gives, is fine.)
  std::string text;
  char chunk[65536];
  while (text.size() <= kMaxConfigBytes && in.read(chunk, sizeof chunk).gcount() > 0)
    text.append(chunk, static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxConfigBytes)
    throw InputError(path.string() + ": longer than " + std::to_string(kMaxConfigBytes >> 20) +
                     " MiB: not a config file");
  ConfigNode doc = parse_yaml(text, path.string());
  if (doc.is_null()) return ConfigNode::map(SourceLoc{path.string(), 1, 1});
  if (!doc.is_map())
    throw ConfigError(doc.loc(), "a config file must be a map of keys, found " + doc.kind_name());

  ConfigNode result = ConfigNode::map(doc.loc());
  if (const ConfigNode* inc = doc.find("include")) {
    std::vector<const ConfigNode*> files;
    if (inc->is_scalar()) files.push_back(inc);
    else if (inc->is_sequence())
      for (const auto& item : inc->items()) files.push_back(&item);
    else
      throw ConfigError(inc->loc(), "'include' expects a file name or a list of file names");
    stack.push_back(canon);
    for (const ConfigNode* f : files) {
      if (!f->is_scalar())
        throw ConfigError(f->loc(), "'include' expects file names, found " + f->kind_name());
      fs::path target = path.parent_path() / f->text();
      std::error_code xec;
      const bool there = fs::exists(target, xec);
      if (xec)  // a link loop, a directory it may not search, ...
        throw ConfigError(f->loc(), "included file '" + f->text() + "' cannot be read (" +
                                        fs::absolute(target, ec).lexically_normal().string() + "): " + xec.message());
      if (!there)
        throw ConfigError(f->loc(), "included file '" + f->text() + "' not found (looked for " +
                                        fs::absolute(target, ec).lexically_normal().string() + ")");
      std::error_code tec;
      fs::path target_canon = fs::weakly_canonical(target, tec);
      if (tec) target_canon = target;
      if (target_canon == canon || std::find(stack.begin(), stack.end(), target_canon) != stack.end())
        throw ConfigError(f->loc(), "include cycle: '" + f->text() + "' is already being included");
      if (!applied.count(target_canon)) {
        result.merge_from(load_with_includes(target, stack, applied, read));
      } else if (top) {  // listed again by the user: applied again, with everything it includes
        std::set<fs::path> fresh;
        result.merge_from(load_with_includes(target, stack, fresh, read));
        applied.insert(fresh.begin(), fresh.end());
      }  // else included before, through another file: once is enough
    }
    stack.pop_back();
    doc.erase("include");
  }
  result.merge_from(doc);
  return result;
}

}  // namespace

ConfigNode parse_config_text(const std::string& text, const std::string& name) {
  ConfigNode n = parse_yaml(text, name);
  if (n.is_null()) return ConfigNode::map(SourceLoc{name, 1, 1});
  return n;
}

ConfigNode load_config_file(const std::string& path, std::vector<fs::path>* files) {
  std::vector<fs::path> stack;
  std::set<fs::path> applied;
  return load_with_includes(fs::path(path), stack, applied, files, true);
}

void apply_override(ConfigNode& root, const std::string& assignment) {
  const SourceLoc loc{"-p " + assignment};
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError(loc, "an override must look like key.path=value");
  const std::string path = assignment.substr(0, eq);
  const std::string value = assignment.substr(eq + 1);
  ConfigNode* node = &root;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (key.empty()) throw ConfigError(loc, "empty key in override path '" + path + "'");
    if (!node->is_map() && !node->is_null())
      throw ConfigError(loc, "'" + path.substr(0, start ? start - 1 : 0) + "' is " +
                                 node->kind_name() + ", not a map, so it has no key '" + key + "'");
    if (dot == std::string::npos) {
      ConfigNode* existing = node->find(key);
      // A value like {value: 2MiB, provenance: ..., source: ...} becomes the override's: its
      // provenance "override", its source the -p (the old source spoke for the old value).
      if (existing && existing->is_map() && existing->find("value")) {
        existing->set("value", ConfigNode::scalar(value, loc));
        existing->set("provenance", ConfigNode::scalar("override", loc));
        existing->set("source", ConfigNode::scalar("-p " + assignment, loc));
      } else {
        node->set(key, ConfigNode::scalar(value, loc));
      }
      return;
    }
    ConfigNode* next = node->find(key);
    if (!next) next = &node->set(key, ConfigNode::map(loc));
    node = next;
    start = dot + 1;
  }
}

std::string default_config_path() {
  if (const char* env = std::getenv("VSPYRE_CONFIG"); env && *env) return env;
  return std::string(VSPYRE_DEFAULT_CONFIG_DIR) + "/spyre.yaml";
}

}  // namespace vspyre
