#include "sim/engine/component.h"

#include <algorithm>

#include "sim/engine/simulation.h"

namespace vspyre {

Registry& Registry::instance() {
  static Registry r;
  return r;
}

bool Registry::add(ComponentType t) {
  const std::string name = t.name;
  if (!m_types.emplace(name, std::move(t)).second)
    throw std::logic_error("component type '" + name + "' registered twice");
  return true;
}

const ComponentType* Registry::find(std::string_view name) const {
  auto it = m_types.find(name);
  return it == m_types.end() ? nullptr : &it->second;
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : m_types) out.push_back(k);
  return out;
}

Component::Component(const sc_core::sc_module_name& name, BuildContext& ctx)
    : sc_core::sc_module(name),
      m_sim(ctx.sim),
      m_type(ctx.type),
      m_path(ctx.path),
      m_index(ctx.index),
      m_node(ctx.node),
      m_params(std::make_unique<ParamReader>(ctx.node, ctx.path)),
      m_stats(ctx.path) {
  m_params->claim("type");
  m_params->claim("count");
  m_params->claim("connect");
  const bool trace_me = m_params->get_bool(
      "trace", false, {"record this component's activity in the Perfetto trace", Provenance::Override});
  if (ctx.sim.traces(trace_me)) m_trace = ctx.sim.trace();
  ctx.sim.stats().add(&m_stats);
}

Component::~Component() = default;

Component* Component::make(const ConfigNode* node, std::string_view key, std::string_view default_type,
                           const std::string& instance_name, int index) {
  std::string type(default_type);
  if (node) {
    if (!node->is_map())
      throw ConfigError(node->loc(), m_path + "." + std::string(key) + ": expected a map describing a component, found " +
                                         node->kind_name());
    if (const ConfigNode* t = node->find("type")) {
      if (!t->is_scalar()) throw ConfigError(t->loc(), m_path + "." + std::string(key) + ".type: expected a type name");
      type = t->text();
    }
  }
  const ComponentType* ct = Registry::instance().find(type);
  if (!ct) {
    std::string msg = m_path + "." + std::string(key) + ".type: unknown component type '" + type + "'";
    if (auto s = did_you_mean(type, Registry::instance().names())) msg += "; did you mean '" + *s + "'?";
    throw ConfigError(node && node->find("type") ? node->find("type")->loc() : SourceLoc{m_path}, msg);
  }
  BuildContext ctx{m_sim, node, type, m_path + "." + instance_name, index};
  auto child = ct->make(sc_core::sc_module_name(instance_name.c_str()), ctx);
  try {
    child->params().check_unknown_keys();
  } catch (const InputError& e) {
    // A type set to another (card.core.type=Lpddr5) makes the old type's keys unknown: say so,
    // or the error points at a key the user did not touch.
    const ConfigNode* t = node ? node->find("type") : nullptr;
    if (!t || type == default_type) throw;
    throw InputError(std::string(e.what()) + " [" + m_path + "." + instance_name + " is a " + type + ", the type set at " +
                     t->loc().str() + "; its usual type is " + std::string(default_type) + "]");
  }
  m_children.push_back(std::move(child));
  return m_children.back().get();
}

void refuse_count(const ConfigNode* node, const std::string& path, std::string_view why) {
  if (node && node->is_map())
    if (const ConfigNode* c = node->find("count")) throw ConfigError(c->loc(), path + ".count: " + std::string(why));
}

Component* Component::build_one(std::string_view key, std::string_view default_type) {
  m_params->claim(key);
  const ConfigNode* node = m_node ? m_node->find(key) : nullptr;
  if (node && node->is_null()) node = nullptr;
  refuse_count(node, m_path + "." + std::string(key), "this component is not repeatable");
  return make(node, key, default_type, std::string(key), -1);
}

std::vector<Component*> Component::build_many(std::string_view key, std::string_view default_type,
                                               int default_count) {
  m_params->claim(key);
  const ConfigNode* node = m_node ? m_node->find(key) : nullptr;
  if (node && node->is_null()) node = nullptr;
  int64_t count = default_count;
  ChildCount info{std::string(key), default_count, default_count, {}, {}, {}};
  if (node && node->is_map()) {
    if (const ConfigNode* c = node->find("count")) {
      // The long form {value: 32, provenance: ..., source: ...} is allowed here as for parameters.
      LongForm lf = read_long_form(*c, m_params->config_path() + "." + std::string(key) + ".count");
      if (lf.provenance) info.provenance = std::string(provenance_name(*lf.provenance));
      info.source = std::move(lf.source);
      c = lf.value;
      char* end = nullptr;
      const long long v = c->is_scalar() ? std::strtoll(c->text().c_str(), &end, 10) : -1;
      if (!c->is_scalar() || c->text().empty() || *end != '\0' || v < 1 || v > 4096)
        throw ConfigError(c->loc(), m_params->config_path() + "." + std::string(key) +
                                        ".count: expected an integer from 1 to 4096, found " +
                                        (c->is_scalar() ? "'" + c->text() + "'" : c->kind_name()));
      count = v;
      info.where = c->loc().str();
    }
  }
  info.value = count;
  m_child_counts.push_back(info);
  std::vector<Component*> out;
  for (int i = 0; i < count; ++i)
    out.push_back(make(node, key, default_type, std::string(key) + "_" + std::to_string(i), i));
  return out;
}

void Component::throw_wrong_type(Component* c, std::string_view key) {
  throw ConfigError(m_node && m_node->find(key) ? m_node->find(key)->loc() : SourceLoc{m_path},
                    m_path + "." + std::string(key) + ": type '" + c->type_name() +
                        "' cannot be used here");
}

const SocketBinder* Component::initiator(const std::string& name) const {
  auto it = m_initiators.find(name);
  return it == m_initiators.end() ? nullptr : &it->second;
}
TargetSocket* Component::target(const std::string& name) const {
  auto it = m_targets.find(name);
  return it == m_targets.end() ? nullptr : it->second;
}
std::vector<std::string> Component::initiator_names() const {
  std::vector<std::string> v;
  for (const auto& [k, s] : m_initiators) v.push_back(k);
  return v;
}
std::vector<std::string> Component::target_names() const {
  std::vector<std::string> v;
  for (const auto& [k, s] : m_targets) v.push_back(k);
  return v;
}

// "core_*" matches core_0..core_N; "memory" matches the child named memory.
std::vector<Component*> Component::resolve(const std::string& pattern) const {
  std::vector<Component*> out;
  const bool wild = !pattern.empty() && pattern.back() == '*';
  const std::string stem = wild ? pattern.substr(0, pattern.size() - 1) : pattern;
  for (const auto& c : m_children) {
    const std::string n = c->basename();
    if (wild ? (n.rfind(stem, 0) == 0 && n.size() > stem.size()) : n == pattern) out.push_back(c.get());
  }
  return out;
}

void Component::bind_one(const std::string& spec, const SourceLoc& loc, BoundSet& bound) {
  const auto arrow = spec.find("->");
  auto trim = [](std::string s) {
    s.erase(0, s.find_first_not_of(" \t"));
    s.erase(s.find_last_not_of(" \t") + 1);
    return s;
  };
  if (arrow == std::string::npos)
    throw ConfigError(loc, m_path + ".connect: expected 'child.socket -> child.socket', found '" + spec + "'");
  const std::string from = trim(spec.substr(0, arrow)), to = trim(spec.substr(arrow + 2));
  auto split = [&](const std::string& end, std::string& comp, std::string& sock) {
    const auto dot = end.rfind('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == end.size())
      throw ConfigError(loc, m_path + ".connect: '" + end + "' must be child.socket");
    comp = end.substr(0, dot);
    sock = end.substr(dot + 1);
  };
  std::string fc, fs, tc, ts;
  split(from, fc, fs);
  split(to, tc, ts);
  auto froms = resolve(fc);
  auto tos = resolve(tc);
  if (froms.empty()) throw ConfigError(loc, m_path + ".connect: no child matches '" + fc + "'");
  if (tos.size() != 1) throw ConfigError(loc, m_path + ".connect: '" + tc + "' must name exactly one child");
  TargetSocket* t = tos[0]->target(ts);
  if (!t) {
    std::string msg = m_path + ".connect: " + tc + " has no target socket '" + ts + "'";
    if (auto s = did_you_mean(ts, tos[0]->target_names())) msg += "; did you mean '" + *s + "'?";
    throw ConfigError(loc, msg);
  }
  for (Component* f : froms) {
    const SocketBinder* i = f->initiator(fs);
    if (!i) {
      std::string msg = m_path + ".connect: " + f->basename() + " has no initiator socket '" + fs + "'";
      if (auto s = did_you_mean(fs, f->initiator_names())) msg += "; did you mean '" + *s + "'?";
      throw ConfigError(loc, msg);
    }
    // An initiator socket binds once; SystemC would only say so at the end of elaboration.
    if (!bound.emplace(f, fs).second)
      throw ConfigError(loc, m_path + ".connect: " + f->basename() + "." + fs + " is connected twice");
    (*i)(*t);
  }
}

void Component::connect(const std::vector<std::string>& default_connections) {
  const ConfigNode* list = m_node ? m_node->find("connect") : nullptr;
  BoundSet bound;
  // Every initiator a child exposes must be connected: an unbound socket would otherwise surface
  // only as a SystemC elaboration error, reported as an internal error.
  auto check_all_bound = [&](const std::function<void(const std::string&)>& fail) {
    for (const auto& c : m_children)
      for (const auto& name : c->initiator_names())
        if (!bound.count({c.get(), name})) fail(std::string(c->basename()) + "." + name);
  };
  if (!list || list->is_null()) {
    for (const auto& c : default_connections) bind_one(c, SourceLoc{m_path + " (built-in connections)"}, bound);
    check_all_bound([&](const std::string& s) {
      throw std::logic_error(m_path + ": built-in connections leave " + s + " unconnected");
    });
    return;
  }
  if (!list->is_sequence())
    throw ConfigError(list->loc(), m_path + ".connect: expected a list of 'a.socket -> b.socket'");
  for (const auto& item : list->items()) {
    if (!item.is_scalar()) throw ConfigError(item.loc(), m_path + ".connect: expected 'a.socket -> b.socket'");
    bind_one(item.text(), item.loc(), bound);
  }
  check_all_bound([&](const std::string& s) {
    throw ConfigError(list->loc(), m_path + ".connect: " + s + " is not connected to anything");
  });
}

}  // namespace vspyre
