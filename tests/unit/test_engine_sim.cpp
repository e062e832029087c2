// Simulations built from configs: every registered component type with its defaults, every YAML
// file under configs/, count:, overrides, config errors through the builder, resolved outputs.
// SystemC elaborates once per process, so each test case here builds at most one Simulation
// (ctest runs every case as its own process); no SECTIONs or GENERATEs.
#include "catch.h"
#include "test_files.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/engine/component.h"
#include "sim/engine/config.h"
#include "sim/engine/error.h"
#include "sim/engine/simulation.h"
#include "sim/engine/units.h"

namespace fs = std::filesystem;
using namespace vspyre;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string config_path(const std::string& rel) {
  return (fs::path(VSPYRE_SOURCE_DIR) / "configs" / rel).string();
}

using vspyre::testing::TempDir;

ConfigNode resolve(const std::string& file, std::vector<std::string> overrides = {}) {
  SimOptions o;
  o.config_file = file;
  o.overrides = std::move(overrides);
  return resolve_config(o);
}

// The message of the InputError building a simulation from `file` throws.
std::string build_error(const std::string& file, std::vector<std::string> overrides = {}) {
  try {
    Simulation sim(resolve(file, std::move(overrides)));
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("expected the config to be rejected");
  return "";
}

std::vector<const Component*> of_type(Simulation& sim, const std::string& type) {
  std::vector<const Component*> out;
  for (const Component* c : sim.components())
    if (c->type_name() == type) out.push_back(c);
  return out;
}

const Component* by_path(Simulation& sim, const std::string& path) {
  for (const Component* c : sim.components())
    if (c->path() == path) return c;
  return nullptr;
}

const ParamSpec* spec(const Component* c, const std::string& path) {
  static std::vector<ParamSpec> keep;  // all_specs() returns by value
  keep = c->params().all_specs();
  for (const auto& s : keep)
    if (s.path == path) return &s;
  return nullptr;
}

// The value a component uses for a parameter: the config's, else the default.
std::string value_of(const Component* c, const std::string& path) {
  REQUIRE(c != nullptr);
  const ParamSpec* s = spec(c, path);
  REQUIRE(s != nullptr);
  return s->value_text ? *s->value_text : s->default_text;
}

// Does `text` parse as the kind of value `s` declares?
bool parses(const ParamSpec& s, const std::string& text) {
  switch (s.kind) {
    case ParamKind::Size: return parse_size(text).has_value();
    case ParamKind::Frequency: return parse_frequency(text).has_value();
    case ParamKind::Time: return parse_time(text).has_value();
    case ParamKind::Bandwidth: return parse_bandwidth(text).has_value();
    case ParamKind::Bool: return text == "true" || text == "false";
    case ParamKind::Choice:
      for (const auto& c : s.choices)
        if (c == text) return true;
      return false;
    case ParamKind::Int: {
      char* end = nullptr;
      std::strtoll(text.c_str(), &end, 10);
      return !text.empty() && *end == '\0';
    }
    case ParamKind::Real: {
      char* end = nullptr;
      std::strtod(text.c_str(), &end);
      return !text.empty() && *end == '\0';
    }
    case ParamKind::String: return true;
  }
  return false;
}

// What every config-built card must satisfy; returns the number of cores.
size_t check_card(Simulation& sim) {
  REQUIRE(sim.top().path() == "card");
  const auto cores = of_type(sim, "Core");
  for (size_t i = 0; i < cores.size(); ++i) {
    CHECK(cores[i]->path() == "card.core_" + std::to_string(i));
    CHECK(cores[i]->index() == static_cast<int>(i));
  }
  CHECK(of_type(sim, "Ring").size() == 1);
  CHECK(of_type(sim, "Lpddr5").size() == 1);
  CHECK(of_type(sim, "PcieLink").size() == 1);
  CHECK(by_path(sim, "card.ring") != nullptr);
  CHECK(by_path(sim, "card.memory") != nullptr);
  CHECK(by_path(sim, "card.host_link") != nullptr);
  for (const Component* c : sim.components()) {
    INFO(c->path());
    for (const auto& s : c->params().all_specs()) {
      INFO(s.path);
      CHECK(parses(s, s.value_text ? *s.value_text : s.default_text));
    }
  }
  // The stats tree has one entry per component, keyed by path.
  const nlohmann::json j = sim.stats().to_json();
  CHECK(j["stats"].contains("card"));
  for (const Component* c : cores) CHECK(j["stats"]["card"].contains(c->basename()));
  return cores.size();
}

}  // namespace

TEST_CASE("engine: registry builds every registered type with its defaults", "[engine][registry]") {
  const auto names = Registry::instance().names();
  const std::set<std::string> got(names.begin(), names.end());
  for (const char* t : {"Card", "Core", "Ring", "Lpddr5", "PcieLink"}) CHECK(got.count(t) == 1);
  CHECK(Registry::instance().find("NoSuchType") == nullptr);
  CHECK_THROWS_AS(Registry::instance().add({"Core", "again", nullptr}), std::logic_error);

  Simulation sim(ConfigNode::map(SourceLoc{"<defaults>"}));
  std::vector<std::unique_ptr<Component>> alone;
  for (const auto& name : names) {
    INFO(name);
    const ComponentType* t = Registry::instance().find(name);
    REQUIRE(t != nullptr);
    CHECK(t->name == name);
    CHECK_FALSE(t->description.empty());
    BuildContext ctx{sim, nullptr, name, "alone_" + name, -1};
    REQUIRE_NOTHROW(alone.push_back(t->make(("alone_" + name).c_str(), ctx)));
    const Component& c = *alone.back();
    CHECK(c.type_name() == name);
    CHECK(c.path() == "alone_" + name);
    CHECK_NOTHROW(c.params().check_unknown_keys());
    const auto specs = c.params().all_specs();
    CHECK_FALSE(specs.empty());
    std::set<std::string> paths;
    for (const auto& s : specs) {
      INFO(s.path);
      CHECK(paths.insert(s.path).second);  // each parameter declared once
      CHECK_FALSE(s.description.empty());
      CHECK_FALSE(s.value_text.has_value());
      CHECK(parses(s, s.default_text));
    }
  }
  // The defaults-only card is the Spyre card: 32 cores.
  CHECK(check_card(sim) == 32);
}

TEST_CASE("engine: config configs/spyre.yaml builds the 32-core card", "[engine][configs]") {
  Simulation sim(resolve(config_path("spyre.yaml")));
  CHECK(check_card(sim) == 32);
  CHECK(sim.quantum_ps() == Approx(50000));
  const Component* core = by_path(sim, "card.core_31");
  CHECK(value_of(core, "lx.size") == "2MiB");
  CHECK(value_of(core, "clock") == "1.5GHz");
  const ParamSpec* lx = spec(core, "lx.size");
  CHECK(lx->value_provenance == std::optional<Provenance>(Provenance::Datasheet));
  CHECK(lx->value_source == "IBM: 2 MiB scratchpad per core");
  // The memory timings come from the included preset.
  const Component* mem = by_path(sim, "card.memory");
  CHECK(value_of(mem, "data_rate_mtps") == "6400");
  CHECK(value_of(mem, "t_rcd") == "18ns");
  CHECK(value_of(by_path(sim, "card.host_link"), "gen") == "5");
  CHECK(value_of(by_path(sim, "card.ring"), "width") == "128B");
  CHECK(sim.top().stats().get("cores") == Approx(32));
}

TEST_CASE("engine: config configs/presets/lpddr5_6400.yaml builds a card", "[engine][configs]") {
  Simulation sim(resolve(config_path("presets/lpddr5_6400.yaml")));
  CHECK(check_card(sim) == 32);
  CHECK(value_of(by_path(sim, "card.memory"), "data_rate_mtps") == "6400");
  CHECK(value_of(by_path(sim, "card.memory"), "t_refi") == "3906ns");
}

TEST_CASE("engine: config configs/presets/lpddr5x_8533.yaml builds a card", "[engine][configs]") {
  Simulation sim(resolve(config_path("presets/lpddr5x_8533.yaml")));
  CHECK(check_card(sim) == 32);
  CHECK(value_of(by_path(sim, "card.memory"), "data_rate_mtps") == "8533");
  CHECK(value_of(by_path(sim, "card.memory"), "t_rl") == "16ns");
}

TEST_CASE("engine: config configs/whatif/cores_64.yaml gives 64 cores", "[engine][configs]") {
  Simulation sim(resolve(config_path("whatif/cores_64.yaml")));
  CHECK(check_card(sim) == 64);
  CHECK(by_path(sim, "card.core_63") != nullptr);
  CHECK(by_path(sim, "card.core_64") == nullptr);
  CHECK(sim.top().stats().get("cores") == Approx(64));
  // Everything else is spyre.yaml's.
  CHECK(value_of(by_path(sim, "card.core_0"), "lx.size") == "2MiB");
  CHECK(value_of(by_path(sim, "card.memory"), "t_rcd") == "18ns");
  CHECK(sim.stats().to_json()["stats"]["card"].contains("core_63"));
}

TEST_CASE("engine: config configs/whatif/lpddr5x_8533.yaml swaps the memory preset", "[engine][configs]") {
  Simulation sim(resolve(config_path("whatif/lpddr5x_8533.yaml")));
  CHECK(check_card(sim) == 32);
  const Component* mem = by_path(sim, "card.memory");
  CHECK(value_of(mem, "data_rate_mtps") == "8533");
  CHECK(value_of(mem, "t_rl") == "16ns");
  CHECK(value_of(mem, "t_rl") == "16ns");
  CHECK(value_of(mem, "capacity") == "128GB");  // from spyre.yaml
}

TEST_CASE("engine: config configs/whatif/lx_4mib.yaml gives 4 MiB of LX per core", "[engine][configs]") {
  Simulation sim(resolve(config_path("whatif/lx_4mib.yaml")));
  CHECK(check_card(sim) == 32);
  for (const Component* c : of_type(sim, "Core")) {
    CHECK(parse_size(value_of(c, "lx.size")).value() == 4u << 20);
    CHECK(spec(c, "lx.size")->value_provenance == std::optional<Provenance>(Provenance::Override));
    CHECK(value_of(c, "lx.reserved") == "64KiB");
  }
}

TEST_CASE("engine: config configs/whatif/pcie_gen6.yaml gives a Gen6 host link", "[engine][configs]") {
  Simulation sim(resolve(config_path("whatif/pcie_gen6.yaml")));
  CHECK(check_card(sim) == 32);
  CHECK(value_of(by_path(sim, "card.host_link"), "gen") == "6");
  CHECK(value_of(by_path(sim, "card.host_link"), "lanes") == "16");
}

TEST_CASE("engine: config configs/whatif/ring_256b.yaml gives a 256 B ring", "[engine][configs]") {
  Simulation sim(resolve(config_path("whatif/ring_256b.yaml")));
  CHECK(check_card(sim) == 32);
  CHECK(parse_size(value_of(by_path(sim, "card.ring"), "width")).value() == 256u);
}

TEST_CASE("engine: config configs/whatif/no_channel_xor.yaml maps the channels without the row hash", "[engine][configs]") {
  Simulation sim(resolve(config_path("whatif/no_channel_xor.yaml")));
  CHECK(check_card(sim) == 32);
  const Component* mem = by_path(sim, "card.memory");
  CHECK(value_of(mem, "channel_xor") == "false");
  CHECK(spec(mem, "channel_xor")->value_provenance == std::optional<Provenance>(Provenance::Override));
  CHECK(value_of(mem, "bank_xor") == "true");  // everything else is spyre.yaml's
  CHECK(value_of(mem, "interleave") == "256B");
}

TEST_CASE("engine: -p overrides reach the built card (count, long form, new keys)", "[engine][sim]") {
  Simulation sim(resolve(config_path("spyre.yaml"),
                         {"card.core.count=4", "card.core.lx.size=1MiB", "sim.quantum=1us"}));
  CHECK(check_card(sim) == 4);
  CHECK(sim.quantum_ps() == Approx(1e6));
  const Component* core = by_path(sim, "card.core_3");
  CHECK(value_of(core, "lx.size") == "1MiB");
  CHECK(spec(core, "lx.size")->value_provenance == std::optional<Provenance>(Provenance::Override));
  // The resolved config shows the override.
  CHECK(sim.config().find("card")->find("core")->find("count")->find("value")->text() == "4");
}

TEST_CASE("engine: per-component trace: true and --trace switch recording on", "[engine][sim]") {
  TempDir t;
  const std::string f = t.write("trace.yaml", "card:\n  ring:\n    trace: true\n  core:\n    count: 2\n");
  Simulation sim(resolve(f));
  CHECK(check_card(sim) == 2);
  CHECK(by_path(sim, "card.ring")->tracing());
  CHECK_FALSE(by_path(sim, "card.core_0")->tracing());
  CHECK_FALSE(by_path(sim, "card.memory")->tracing());
  CHECK(value_of(by_path(sim, "card.ring"), "trace") == "true");
}

TEST_CASE("engine: trace_all makes every component record", "[engine][sim]") {
  Simulation sim(resolve(config_path("spyre.yaml"), {"card.core.count=2"}), true);
  for (Component* c : std::vector<Component*>{const_cast<Component*>(by_path(sim, "card.core_1")), &sim.top()})
    CHECK(c->tracing());
  for (const Component* c : sim.components()) CHECK(c->tracing());
}

TEST_CASE("engine: a misspelt key in a config file fails naming file:line:column and the right name",
          "[engine][configerr]") {
  TempDir t;
  const std::string f = t.write("bad.yaml",
                                "include: [" + config_path("spyre.yaml") + "]\n"
                                "card:\n"
                                "  core:\n"
                                "    lx:\n"
                                "      sise: 4MiB\n");
  // include paths are relative; an absolute one must still work (../ from a temp dir would not).
  const std::string m = build_error(f);
  CHECK(m == f + ":5:7: unknown key 'sise' in card.core.lx; did you mean 'size'? (expected one of: "
                 "pt_line, pt_line_time, reserved, size)");
}

TEST_CASE("engine: a misspelt parameter of a component fails with did-you-mean", "[engine][configerr]") {
  TempDir t;
  const std::string f = t.write("bad.yaml", "card:\n  host_link:\n    lanse: 8\n");
  const std::string m = build_error(f);
  CHECK(contains(m, f + ":3:5: unknown key 'lanse' in card.host_link; did you mean 'lanes'?"));
  CHECK(contains(m, "expected one of:"));
}

TEST_CASE("engine: a misspelt top-level key fails with did-you-mean", "[engine][configerr]") {
  TempDir t;
  const std::string f = t.write("bad.yaml", "simm:\n  seed: 3\n");
  CHECK(build_error(f) == f + ":1:1: unknown key 'simm' in config; did you mean 'sim'? (expected one of: card, sim)");
}

TEST_CASE("engine: an unknown component type fails with did-you-mean", "[engine][configerr]") {
  TempDir t;
  const std::string f = t.write("bad.yaml", "card:\n  memory:\n    type: Lpddr\n");
  CHECK(build_error(f) == f + ":3:11: card.memory.type: unknown component type 'Lpddr'; did you mean 'Lpddr5'?");
}

TEST_CASE("engine: an unknown card type fails with did-you-mean", "[engine][configerr]") {
  TempDir t;
  const std::string f = t.write("bad.yaml", "card:\n  type: Crad\n");
  CHECK(build_error(f) == f + ":2:9: card.type: unknown component type 'Crad'; did you mean 'Card'?");
}

TEST_CASE("engine: a component of the wrong type in a slot is rejected", "[engine][configerr]") {
  TempDir t;
  const std::string f = t.write("bad.yaml", "card:\n  memory:\n    type: Ring\n");
  CHECK(build_error(f) == f + ":3:5: card.memory: type 'Ring' cannot be used here");
}

TEST_CASE("engine: count: must be an integer from 1 to 4096", "[engine][configerr]") {
  TempDir t;
  const std::string f = t.write("bad.yaml", "card:\n  core:\n    count: 0\n");
  CHECK(build_error(f) == f + ":3:12: card.core.count: expected an integer from 1 to 4096, found '0'");
}

TEST_CASE("engine: count: in long form must be an integer too", "[engine][configerr]") {
  TempDir t;
  const std::string f = t.write("bad.yaml", "card:\n  core:\n    count: {value: many, provenance: estimate}\n");
  CHECK(build_error(f) == f + ":3:20: card.core.count: expected an integer from 1 to 4096, found 'many'");
}

TEST_CASE("engine: count: in long form has its keys checked as a parameter's", "[engine][configerr]") {
  // The long form is read by the same code as a parameter's: a misspelt key, a bad provenance or
  // a missing value is an error, not silently ignored.
  TempDir t;
  const std::string a = t.write("a.yaml", "card:\n  core:\n    count: {value: 4, provnance: datasheet}\n");
  CHECK(build_error(a) == a + ":3:23: card.core.count: unknown key 'provnance' in a parameter (expected value, "
                             "provenance, source); did you mean 'provenance'?");
  const std::string b = t.write("b.yaml", "card:\n  core:\n    count: {value: 4, provenance: guess}\n");
  CHECK(build_error(b) == b + ":3:35: card.core.count.provenance: expected one of datasheet, measured, derived, "
                             "estimate, override");
  const std::string c = t.write("c.yaml", "card:\n  core:\n    count: {provenance: datasheet}\n");
  CHECK(build_error(c) == c + ":3:12: card.core.count: a parameter given as a map needs a 'value' key");
  const std::string d = t.write("d.yaml", "card:\n  core:\n    count: {value: 4, source: [a, b]}\n");
  CHECK(build_error(d) == d + ":3:31: card.core.count.source: expected text, found a list");
}

TEST_CASE("engine: count: on a component that is not repeatable is rejected", "[engine][configerr]") {
  TempDir t;
  const std::string f = t.write("bad.yaml", "card:\n  ring:\n    count: 2\n");
  CHECK(build_error(f) == f + ":3:12: card.ring.count: this component is not repeatable");
}

TEST_CASE("engine: a wrong type for a parameter through the builder", "[engine][configerr]") {
  TempDir t;
  const std::string f = t.write("bad.yaml", "card:\n  core:\n    corelets: [1, 2]\n");
  CHECK(build_error(f) == f + ":3:15: card.core.corelets: expected an integer, found a list");
}

TEST_CASE("engine: a missing value through the builder", "[engine][configerr]") {
  TempDir t;
  const std::string f = t.write("bad.yaml", "card:\n  core:\n    clock: {provenance: datasheet}\n");
  CHECK(build_error(f) == f + ":3:12: card.core.clock: a parameter given as a map needs a 'value' key");
}

TEST_CASE("engine: a bad unit through the builder", "[engine][configerr]") {
  TempDir t;
  const std::string f = t.write("bad.yaml", "card:\n  ring:\n    width: 128b\n");
  const std::string m = build_error(f);
  CHECK(contains(m, f + ":3:12: card.ring.width: '128b' has unknown unit 'b' (expected a size such as 2MiB"));
}

TEST_CASE("engine: sim.quantum in cycles is rejected (the simulation has no clock)", "[engine][configerr]") {
  TempDir t;
  const std::string f = t.write("bad.yaml", "sim:\n  quantum: 100cycles\n");
  CHECK(contains(build_error(f), f + ":2:12: sim.quantum: expected a time in ps, ns, us, ms or s"));
}

TEST_CASE("engine: a misspelt -p override key fails naming the override and the right name", "[engine][configerr]") {
  const std::string m = build_error(config_path("spyre.yaml"), {"card.core.clok=2GHz"});
  CHECK(contains(m, "-p card.core.clok=2GHz: unknown key 'clok' in card.core; did you mean 'clock'?"));
}

TEST_CASE("engine: a bad connect: entry names the socket and suggests the right one", "[engine][configerr]") {
  TempDir t;
  const std::string f = t.write("bad.yaml",
                                "card:\n  core: {count: 2}\n  connect:\n"
                                "    - core_*.mem -> memory.prot\n"
                                "    - core_*.ring -> ring.port\n");
  CHECK(build_error(f) == f + ":4:7: card.connect: memory has no target socket 'prot'; did you mean 'port'?");
}

TEST_CASE("engine: a connect: entry without an arrow is rejected", "[engine][configerr]") {
  TempDir t;
  const std::string f = t.write("bad.yaml", "card:\n  core: {count: 2}\n  connect:\n    - core_*.mem memory.port\n");
  CHECK(build_error(f) == f + ":4:7: card.connect: expected 'child.socket -> child.socket', found 'core_*.mem memory.port'");
}

TEST_CASE("engine: write_outputs writes resolved config and stats tree beside the results", "[engine][sim]") {
  TempDir t;
  Simulation sim(resolve(config_path("whatif/lx_4mib.yaml"), {"card.core.count=3"}));
  const fs::path out = t.dir / "results" / "run1";
  sim.write_outputs(out.string(), {{"note", "hello"}});
  REQUIRE(fs::exists(out / "config.resolved.yaml"));
  REQUIRE(fs::exists(out / "stats.json"));
  CHECK_FALSE(fs::exists(out / "trace.json"));  // nothing was recorded

  // The resolved config has its includes merged and reloads to the same card.
  const ConfigNode resolved = load_config_file((out / "config.resolved.yaml").string());
  CHECK(resolved.find("include") == nullptr);
  const ConfigNode* core = resolved.find("card")->find("core");
  REQUIRE(core);
  CHECK(core->find("count")->find("value")->text() == "3");
  CHECK(core->find("count")->find("provenance")->text() == "override");
  CHECK(core->find("lx")->find("size")->find("value")->text() == "4MiB");
  CHECK(resolved.find("card")->find("memory")->find("t_rcd")->find("value")->text() == "18ns");
  CHECK(resolved.to_yaml() == sim.config().to_yaml());

  std::ifstream in(out / "stats.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  CHECK(j["note"] == "hello");
  CHECK(j["vspyre"]["version"] == VSPYRE_VERSION);
  const auto& card = j["stats"]["card"];
  CHECK(card.contains("core_0"));
  CHECK(card.contains("core_2"));
  CHECK_FALSE(card.contains("core_3"));
  CHECK(card.contains("memory"));
  CHECK(card.contains("ring"));
  CHECK(card.contains("host_link"));
  CHECK(card["cores"].get<double>() == Approx(3));
  CHECK(j["units"].contains("card.cores"));
}

TEST_CASE("engine: write_outputs into an impossible directory is an input error", "[engine][sim]") {
  TempDir t;
  const std::string file = t.write("plain_file", "x");
  Simulation sim(ConfigNode::map(SourceLoc{"<defaults>"}));
  CHECK_THROWS_AS(sim.write_outputs(file + "/sub"), InputError);
}

TEST_CASE("engine: version string names vspyre and SystemC", "[engine][sim]") {
  const std::string v = version_string();
  CHECK(v.rfind(std::string("vspyre ") + VSPYRE_VERSION, 0) == 0);
  CHECK(contains(v, "SystemC"));
}

TEST_CASE("engine: a connect: list that leaves an initiator unbound is a config error", "[engine][configerr]") {
  TempDir t;
  const std::string f = t.write("bad.yaml", "card:\n  core: {count: 2}\n  connect:\n    - core_*.mem -> memory.port\n");
  CHECK(build_error(f) == f + ":4:5: card.connect: core_0.ring is not connected to anything");
}

TEST_CASE("engine: a connect: list that binds an initiator twice is a config error", "[engine][configerr]") {
  TempDir t;
  const std::string f = t.write("bad.yaml",
                                "card:\n  core: {count: 2}\n  connect:\n"
                                "    - core_*.ring -> ring.port\n"
                                "    - core_*.mem -> memory.port\n"
                                "    - core_0.mem -> memory.port\n");
  CHECK(build_error(f) == f + ":6:7: card.connect: core_0.mem is connected twice");
}

TEST_CASE("engine: an explicit complete connect: list builds the card", "[engine][sim]") {
  TempDir t;
  const std::string f = t.write("ok.yaml",
                                "card:\n  core: {count: 3}\n  connect:\n"
                                "    - core_*.ring -> ring.port\n"
                                "    - core_*.mem -> memory.port\n");
  Simulation sim(resolve(f));
  CHECK(check_card(sim) == 3);
}
