// The component API that every hardware model sees. A component is a SystemC module built by the
// builder from its config node; it reads its parameters through params() (declaring default,
// unit, description and provenance in the same call), declares its stats in stats(), builds its
// children by config key, and exposes TLM sockets by name so that the builder can bind them from
// the config's `connect:` list.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <systemc>
#include <tlm>

#include "sim/engine/config.h"
#include "sim/engine/params.h"
#include "sim/engine/stats.h"
#include "sim/engine/trace.h"

namespace vspyre {

class Simulation;
class Component;

// What the builder hands a component's constructor.
struct BuildContext {
  Simulation& sim;
  const ConfigNode* node = nullptr;  // this instance's map (shared by all instances of a count)
  std::string type;
  std::string path;  // "card.core_3"
  int index = -1;    // instance index when built with count, else -1
};

// A `count:` in the map `node` (at config path `path`) of something built once: a ConfigError at
// the key, "<path>.count: <why>". Nothing when node is null, not a map, or has no count.
void refuse_count(const ConfigNode* node, const std::string& path, std::string_view why);

// Any target socket of the base protocol (simple, multi-passthrough, ...); initiators are kept
// as binders so that sockets of any multiplicity can be bound by name.
using TargetSocket = tlm::tlm_base_target_socket_b<32, tlm::tlm_fw_transport_if<>, tlm::tlm_bw_transport_if<>>;
using SocketBinder = std::function<void(TargetSocket&)>;

class Component : public sc_core::sc_module {
 public:
  Component(const sc_core::sc_module_name& name, BuildContext& ctx);
  ~Component() override;

  const std::string& type_name() const { return m_type; }
  const std::string& path() const { return m_path; }
  int index() const { return m_index; }
  ParamReader& params() { return *m_params; }
  const ParamReader& params() const { return *m_params; }
  StatGroup& stats() { return m_stats; }
  Simulation& sim() { return m_sim; }
  bool tracing() const { return m_trace != nullptr; }
  TraceWriter* trace() { return m_trace; }

  // Children built from this component's config under `key`. A missing key builds
  // `default_type` with defaults. `count:` in the config (or default_count) builds key_0..key_N-1.
  template <class T>
  T* build_child(std::string_view key, std::string_view default_type) {
    return checked<T>(build_one(key, default_type), key);
  }
  template <class T>
  std::vector<T*> build_children(std::string_view key, std::string_view default_type, int default_count) {
    std::vector<T*> out;
    for (Component* c : build_many(key, default_type, default_count)) out.push_back(checked<T>(c, key));
    return out;
  }
  const std::vector<std::unique_ptr<Component>>& children() const { return m_children; }
  // The `count:` of each key built with build_children, for describe: the value, the code's
  // default, and where a config set it (its long form's provenance and source, if given).
  struct ChildCount {
    std::string key;
    int64_t value = 0, default_value = 0;
    std::string where, provenance, source;  // empty when the code's default
  };
  const std::vector<ChildCount>& child_counts() const { return m_child_counts; }

  template <class Socket>
  void expose_initiator(const std::string& name, Socket& s) {
    m_initiators[name] = [&s](TargetSocket& t) { s.bind(t); };
  }
  void expose_target(const std::string& name, TargetSocket& s) { m_targets[name] = &s; }
  const SocketBinder* initiator(const std::string& name) const;
  TargetSocket* target(const std::string& name) const;
  std::vector<std::string> initiator_names() const;
  std::vector<std::string> target_names() const;

  // Binds sockets as the config's `connect:` list says, with defaults from code when absent.
  // Entries look like "core_*.mem -> memory.port" (`*` matches every instance).
  void connect(const std::vector<std::string>& default_connections);

 private:
  Component* build_one(std::string_view key, std::string_view default_type);
  std::vector<Component*> build_many(std::string_view key, std::string_view default_type, int default_count);
  Component* make(const ConfigNode* node, std::string_view key, std::string_view default_type,
                  const std::string& instance_name, int index);
  template <class T>
  T* checked(Component* c, std::string_view key) {
    auto* t = dynamic_cast<T*>(c);
    if (!t) throw_wrong_type(c, key);
    return t;
  }
  [[noreturn]] void throw_wrong_type(Component* c, std::string_view key);
  using BoundSet = std::set<std::pair<const Component*, std::string>>;
  void bind_one(const std::string& spec, const SourceLoc& loc, BoundSet& bound);
  std::vector<Component*> resolve(const std::string& pattern) const;

  Simulation& m_sim;
  std::string m_type, m_path;
  int m_index;
  const ConfigNode* m_node;
  std::unique_ptr<ParamReader> m_params;
  StatGroup m_stats;
  TraceWriter* m_trace = nullptr;
  std::vector<std::unique_ptr<Component>> m_children;
  std::vector<ChildCount> m_child_counts;
  std::map<std::string, SocketBinder> m_initiators;
  std::map<std::string, TargetSocket*> m_targets;
};

// The registry of component types. A model registers itself in its own .cpp with
// VSPYRE_REGISTER_COMPONENT; the models are an OBJECT library so these registrations survive linking.
struct ComponentType {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<Component>(const sc_core::sc_module_name&, BuildContext&)> make;
};

class Registry {
 public:
  static Registry& instance();
  bool add(ComponentType t);
  const ComponentType* find(std::string_view name) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, ComponentType, std::less<>> m_types;
};

}  // namespace vspyre

#define VSPYRE_REGISTER_COMPONENT(Class, Name, Description)                                  \
  namespace {                                                                                \
  [[maybe_unused]] const bool vspyre_registered_##Class = ::vspyre::Registry::instance().add( \
      {Name, Description, [](const ::sc_core::sc_module_name& n, ::vspyre::BuildContext& c) { \
         return std::unique_ptr<::vspyre::Component>(new Class(n, c));                       \
       }});                                                                                  \
  }
