// One simulation: a resolved config, the card built from it, the stats tree and the trace.
// SystemC allows one elaboration per process; a Simulation is meant to be the only one alive.
#pragma once
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "sim/engine/component.h"
#include "sim/engine/config.h"
#include "sim/engine/stats.h"
#include "sim/engine/trace.h"

namespace vspyre {

struct SimOptions {
  std::string config_file;              // empty: built-in defaults only
  std::vector<std::string> overrides;   // "-p a.b=c"
  bool trace_all = false;               // --trace: every component records
  uint64_t seed = 1;
};

// Loads config_file (if any) and applies the overrides. `files`, when given, receives every
// config file read (config_file and its includes).
ConfigNode resolve_config(const SimOptions& opts, std::vector<std::filesystem::path>* files = nullptr);

class Simulation {
 public:
  // Builds the top component (`card:` in the config) and binds it. Throws ConfigError on bad input.
  // `trace_all`: every component records trace events (--trace, --out); `trace_none`: none does,
  // whatever the config's `trace: true` says (--out --no-trace).
  explicit Simulation(ConfigNode config, bool trace_all = false, bool trace_none = false);
  ~Simulation();

  Component& top() { return *m_top; }
  template <class T>
  T& top_as() { return dynamic_cast<T&>(*m_top); }
  StatsRegistry& stats() { return m_stats; }
  TraceWriter* trace() { return m_trace.get(); }
  const ConfigNode& config() const { return m_config; }
  // Simulation-wide knobs under `sim:`.
  double quantum_ps() const { return m_quantum_ps; }
  // The `sim:` parameters as read, named relative to `sim` ("quantum"), for `describe`.
  const std::vector<ParamSpec>& sim_params() const { return m_sim_params; }

  // Whether a component records trace events: every one with --trace or --out, one whose config
  // says `trace: true` (`component_asks`) otherwise; none with --out --no-trace.
  bool traces(bool component_asks) const { return !m_trace_none && (m_trace_all || component_asks); }
  // Every component's parameters, in build order, for `describe`.
  std::vector<const Component*> components() const;
  // Writes config.resolved.yaml, stats.json and (if tracing) trace.json into `dir`.
  // Returns the names of the files written into dir (trace.json only when the trace has events).
  std::vector<std::string> write_outputs(const std::string& dir, const nlohmann::json& extra = {}) const;

 private:
  ConfigNode m_config;
  bool m_trace_all, m_trace_none;
  double m_quantum_ps = 1e6;
  std::vector<ParamSpec> m_sim_params;
  StatsRegistry m_stats;
  std::unique_ptr<TraceWriter> m_trace;
  std::unique_ptr<Component> m_top;
};

std::string version_string();

}  // namespace vspyre
