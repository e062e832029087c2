// The configuration tree. YAML files are read into ConfigNodes that remember the file, line and
// column of every value, so that any error later (an unknown key, a bad unit, a wrong type) can
// point at the exact spot. `include:` merges other files (paths relative to the including file),
// `-p a.b.c=value` overrides one scalar, and the resolved tree can be written back as YAML.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <filesystem>
#include <vector>

#include "sim/engine/error.h"

namespace vspyre {

class ConfigNode {
 public:
  enum class Kind { Null, Scalar, Map, Sequence };

  ConfigNode() = default;
  static ConfigNode scalar(std::string value, SourceLoc loc);
  static ConfigNode map(SourceLoc loc);
  static ConfigNode null_at(SourceLoc loc);
  static ConfigNode sequence(SourceLoc loc);

  Kind kind() const { return m_kind; }
  bool is_map() const { return m_kind == Kind::Map; }
  bool is_scalar() const { return m_kind == Kind::Scalar; }
  bool is_sequence() const { return m_kind == Kind::Sequence; }
  bool is_null() const { return m_kind == Kind::Null; }
  const SourceLoc& loc() const { return m_loc; }
  // Where this node's key stands, when it is a map value read from a file (else its own loc).
  const SourceLoc& key_loc() const { return m_key_loc.line ? m_key_loc : m_loc; }
  void set_key_loc(SourceLoc loc) { m_key_loc = std::move(loc); }
  const std::string& text() const { return m_text; }
  std::string kind_name() const;

  // Map access, in file order.
  const std::vector<std::pair<std::string, ConfigNode>>& entries() const { return m_entries; }
  const ConfigNode* find(std::string_view key) const;
  ConfigNode* find(std::string_view key);
  // Inserts or replaces, keeping the position of an existing key.
  ConfigNode& set(const std::string& key, ConfigNode value);
  void erase(std::string_view key);

  const std::vector<ConfigNode>& items() const { return m_items; }
  void push(ConfigNode item) { m_items.push_back(std::move(item)); }

  // Deep merge: maps merge key by key, everything else is replaced by `over`.
  void merge_from(const ConfigNode& over);

  std::string to_yaml() const;

 private:
  void emit(std::string& out, int indent) const;

  Kind m_kind = Kind::Null;
  SourceLoc m_loc;
  SourceLoc m_key_loc;
  std::string m_text;
  std::vector<std::pair<std::string, ConfigNode>> m_entries;
  std::vector<ConfigNode> m_items;
};

// Reads a YAML file with its includes resolved. Throws ConfigError on any problem.
// `files`, when given, receives every file read (the file and what it includes, at any depth).
ConfigNode load_config_file(const std::string& path, std::vector<std::filesystem::path>* files = nullptr);
// Parses YAML text (for tests and for -p values); `name` is used in messages.
ConfigNode parse_config_text(const std::string& text, const std::string& name);

// Applies "a.b.c=value". Creates missing maps. Throws ConfigError for a malformed override.
void apply_override(ConfigNode& root, const std::string& assignment);

// The default card config: $VSPYRE_CONFIG, else the source tree's configs/spyre.yaml.
std::string default_config_path();

}  // namespace vspyre
