#include "sim/engine/simulation.h"

#include <filesystem>
#include <fstream>

#include "sim/engine/error.h"

namespace vspyre {

std::string version_string() {
  return std::string("vspyre ") + VSPYRE_VERSION + " (SystemC " + sc_core::sc_release() + ")";
}

ConfigNode resolve_config(const SimOptions& opts, std::vector<std::filesystem::path>* files) {
  ConfigNode root = opts.config_file.empty() ? ConfigNode::map(SourceLoc{"<defaults>"})
                                             : load_config_file(opts.config_file, files);
  for (const auto& o : opts.overrides) apply_override(root, o);
  return root;
}

Simulation::Simulation(ConfigNode config, bool trace_all, bool trace_none)
    : m_config(std::move(config)),
      m_trace_all(trace_all),
      m_trace_none(trace_none),
      m_trace(std::make_unique<TraceWriter>()) {
  ParamReader top(&m_config, "config");
  top.claim("card");
  ParamReader& simp = top.group("sim", "simulation-wide settings");
  const TimeValue quantum = simp.get_time(
      "quantum", "50ns",
      {"temporal-decoupling quantum: how far a model may run ahead of the others (with the request DMA "
       "model on threads it changes results: the validation table is fitted at 50 ns)",
       Provenance::Override});
  if (quantum.in_cycles) {
    // There is no simulation-wide clock to count cycles of.
    simp.refuse("quantum", "expected a time in ps, ns, us, ms or s, not in cycles (the simulation has no clock of its own)");
  }
  m_quantum_ps = quantum.value;
  // sim.seed was read and used by nothing (a sweep over it changed nothing): refused by name, with
  // the seeds that do act.
  if (const ConfigNode* s = simp.node() ? simp.node()->find("seed") : nullptr)
    throw ConfigError(s->key_loc(), "sim.seed: nothing reads it; card.launch_seed seeds the cores' start times and "
                                    "each DMA operation's setup jitter, and vspyre run --seed the input data");
  top.check_unknown_keys();
  // Named relative to `sim`, as describe names every type's parameters relative to its path.
  for (ParamSpec s : simp.all_specs()) {
    s.path.erase(0, std::string_view("sim.").size());
    m_sim_params.push_back(std::move(s));
  }

  const ConfigNode* card = m_config.find("card");
  if (card && !card->is_map() && !card->is_null())
    throw ConfigError(card->loc(), "card: expected a map describing the card, found " + card->kind_name());
  if (card && card->is_null()) card = nullptr;
  refuse_count(card, "card", "the card is not repeatable (one card per simulation)");  // a sweep varies cards
  std::string type = "Card";
  if (card && card->find("type")) type = card->find("type")->text();
  const ComponentType* ct = Registry::instance().find(type);
  if (!ct) {
    std::string msg = "card.type: unknown component type '" + type + "'";
    if (auto s = did_you_mean(type, Registry::instance().names())) msg += "; did you mean '" + *s + "'?";
    throw ConfigError(card->find("type")->loc(), msg);
  }
  sc_core::sc_get_curr_simcontext();  // make sure the kernel exists before modules do
  BuildContext ctx{*this, card, type, "card", -1};
  m_top = ct->make("card", ctx);
  m_top->params().check_unknown_keys();
}

Simulation::~Simulation() = default;

std::vector<const Component*> Simulation::components() const {
  std::vector<const Component*> out;
  std::vector<const Component*> stack{m_top.get()};
  while (!stack.empty()) {
    const Component* c = stack.back();
    stack.pop_back();
    out.push_back(c);
    for (auto it = c->children().rbegin(); it != c->children().rend(); ++it) stack.push_back(it->get());
  }
  return out;
}

std::vector<std::string> Simulation::write_outputs(const std::string& dir, const nlohmann::json& extra) const {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw InputError(dir + ": cannot create output directory: " + ec.message());
  {
    std::ofstream out(dir + "/config.resolved.yaml");
    if (!out) throw InputError(dir + "/config.resolved.yaml: cannot write");
    out << "# Fully resolved configuration, written by " << version_string() << "\n" << m_config.to_yaml();
  }
  {
    nlohmann::json j = m_stats.to_json();
    j["vspyre"] = {{"version", VSPYRE_VERSION}, {"systemc", sc_core::sc_release()}};
    for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
    std::ofstream out(dir + "/stats.json");
    if (!out) throw InputError(dir + "/stats.json: cannot write");
    out << j.dump(1) << "\n";
  }
  std::vector<std::string> written{"config.resolved.yaml", "stats.json"};
  if (m_trace && m_trace->event_count() > 0) {
    m_trace->write(dir + "/trace.json");
    written.emplace_back("trace.json");
  }
  return written;
}

}  // namespace vspyre
