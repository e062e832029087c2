// The `vspyre` command. Exit codes: 0 success, 1 bad input (one clear line on stderr), 2 internal error.
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <systemc>

#include "models/card.h"
#include "models/plan_runner.h"
#include "models/probes.h"
#include "sim/engine/error.h"
#include "sim/engine/log.h"
#include "sim/engine/simulation.h"
#include "sim/bundle/bundle.h"
#include "sim/plan/lower.h"

namespace vspyre {
namespace {

const char* kUsage =
    "usage: vspyre <command> [options]\n"
    "\n"
    "commands:\n"
    "  describe   list every component type and parameter (unit, default, provenance, description)\n"
    "  probe      the card's own bandwidth and throughput tests: memory | ring | pcie | pt\n"
    "  run        time a compiled kernel bundle (bundle.mlir + sdsc_*.json) on the card\n"
    "  sweep      a what-if sweep (configs/sweeps/*.yaml): many cards x plans -> CSV + plots\n"
    "  validate   predicted against measured Spyre kernel times (bench/validation/measured.yaml)\n"
    "\n"
    "  vspyre --version          print the version\n"
    "  vspyre <command> --help   options of one command\n";

const char* kDescribeHelp =
    "usage: vspyre describe [--config FILE] [-p key.path=value ...] [--json]\n"
    "\n"
    "Lists every registered component type and every parameter the code reads, with its unit kind,\n"
    "default, provenance (datasheet, measured, derived, estimate) and description. With --config,\n"
    "also the value the config gives and where it comes from.\n";

const char* kProbeHelp =
    "usage: vspyre probe memory|ring|pcie|pt [--config FILE] [-p key.path=value ...] [--json]\n"
    "                    [--out DIR] [--trace FILE] [--debug FLAGS]\n"
    "\n"
    "  memory  one-direction read, one-direction write and balanced copy, from 1, 2, 4, ... cores\n"
    "  ring    neighbour and farthest-core transfers, one flow and all cores at once\n"
    "  pcie    host-to-device and device-to-host for sizes from 4 KiB to 1 GiB\n"
    "  pt      a large fp16 matmul tile on one core\n"
    "\n"
    "Without --config the default card (configs/spyre.yaml, or $VSPYRE_CONFIG) is used.\n";

const char* kRunHelp =
    "usage: vspyre run BUNDLE_DIR [--config FILE] [-p key.path=value ...] [--out DIR] [--json]\n"
    "                  [--trace FILE] [--dump-plan FILE] [--no-data] [--debug FLAGS]\n"
    "\n"
    "Loads the bundle (BUNDLE_DIR/bundle.mlir and the sdsc_*.json files it names), lowers it to a\n"
    "per-core plan (DMA in, compute on PT or SFP, DMA out, ring combines, one launch cost) and runs\n"
    "that plan on the card. Prints the kernel time, per-core PT/SFP utilisation, bytes per level\n"
    "(LPDDR5 read/write, LX, ring) and the bottleneck.\n"
    "\n"
    "  --json            one JSON object: kernel_time_us, cores_used, per_core, bytes, bottleneck, ...\n"
    "  --out DIR         write stats.json, trace.json and config.resolved.yaml into DIR\n"
    "  --trace FILE      write a Chrome trace of every engine\n"
    "  --dump-plan FILE  write the lowered plan in protobuf text format\n"
    "  --no-data         timing only (numerics are not run by this command yet)\n"
    "\n"
    "Arguments get distinct device addresses; dimension arguments take their max_value.\n";

struct Args {
  std::string command;
  std::vector<std::string> positional;
  SimOptions sim;
  bool config_given = false;
  bool json = false;
  bool help = false;
  std::string out_dir, trace_file, debug, dump_plan;
  bool no_data = false;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto need = [&](const char* what) -> std::string {
      if (i + 1 >= argc) throw InputError(s + ": expects " + what);
      return argv[++i];
    };
    if (s == "--help" || s == "-h") a.help = true;
    else if (s == "--version") a.command = a.command.empty() ? "--version" : a.command;
    else if (s == "--config" || s == "-c") {
      a.sim.config_file = need("a config file");
      a.config_given = true;
    } else if (s == "-p") a.sim.overrides.push_back(need("key.path=value"));
    else if (s.rfind("-p", 0) == 0 && s.size() > 2 && s.find('=') != std::string::npos) a.sim.overrides.push_back(s.substr(2));
    else if (s == "--json") a.json = true;
    else if (s == "--out") a.out_dir = need("a directory");
    else if (s == "--trace") a.trace_file = need("a file name");
    else if (s == "--debug") a.debug = need("a comma-separated list of debug flags");
    else if (s == "--dump-plan") a.dump_plan = need("a file name");
    else if (s == "--no-data") a.no_data = true;
    else if (!s.empty() && s[0] == '-') throw InputError("unknown option '" + s + "' (see --help)");
    else if (a.command.empty()) a.command = s;
    else a.positional.push_back(s);
  }
  return a;
}

// `from` names where the list came from: "--debug" or "VSPYRE_DEBUG".
void enable_debug(const std::string& list, const std::string& from) {
  auto unknown = DebugFlag::enable(list);
  if (!unknown.empty()) {
    std::string known;
    for (auto* f : DebugFlag::all()) known += std::string(known.empty() ? "" : ", ") + f->name();
    std::string msg = from + ": unknown flag '" + unknown.front() + "' (flags: " + known + ", all)";
    std::vector<std::string> names{"all"};
    for (auto* f : DebugFlag::all()) names.emplace_back(f->name());
    if (auto s = did_you_mean(unknown.front(), names)) msg += "; did you mean '" + *s + "'?";
    throw InputError(msg);
  }
}

std::string value_or(const ParamSpec& s) { return s.value_text ? *s.value_text : s.default_text; }

int cmd_describe(const Args& a) {
  if (a.help) {
    std::fputs(kDescribeHelp, stdout);
    return 0;
  }
  Simulation sim(resolve_config(a.sim));
  // One entry per type: the first instance built. Types the card does not use are built alone.
  std::map<std::string, const Component*> seen;
  for (const Component* c : sim.components()) seen.emplace(c->type_name(), c);
  std::vector<std::unique_ptr<Component>> extra;
  for (const auto& name : Registry::instance().names()) {
    if (seen.count(name)) continue;
    BuildContext ctx{sim, nullptr, name, "describe_" + name, -1};
    extra.push_back(Registry::instance().find(name)->make(("describe_" + name).c_str(), ctx));
    seen.emplace(name, extra.back().get());
  }
  nlohmann::json j = nlohmann::json::array();
  for (const auto& [name, comp] : seen) {
    nlohmann::json params = nlohmann::json::array();
    for (const auto& s : comp->params().all_specs()) {
      nlohmann::json p{{"name", s.path},
                       {"kind", param_kind_name(s.kind)},
                       {"default", s.default_text},
                       {"provenance", provenance_name(s.provenance)},
                       {"description", s.description}};
      if (!s.source.empty()) p["source"] = s.source;
      if (!s.choices.empty()) p["choices"] = s.choices;
      if (a.config_given) {
        p["value"] = value_or(s);
        if (s.value_provenance) p["value_provenance"] = provenance_name(*s.value_provenance);
        if (!s.value_source.empty()) p["value_source"] = s.value_source;
      }
      params.push_back(p);
    }
    j.push_back({{"type", name}, {"description", Registry::instance().find(name)->description}, {"example_path", comp->path()},
                 {"parameters", params}});
  }
  if (a.json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << version_string() << "\n";
  if (a.config_given) std::cout << "config: " << a.sim.config_file << "\n";
  for (const auto& t : j) {
    std::cout << "\n" << t["type"].get<std::string>() << ": " << t["description"].get<std::string>() << "\n";
    std::printf("  %-22s %-10s %-12s %-10s %s\n", "parameter", "kind", a.config_given ? "value" : "default", "provenance",
                "description");
    for (const auto& p : t["parameters"]) {
      const std::string shown = a.config_given ? p["value"].get<std::string>() : p["default"].get<std::string>();
      const std::string prov = p.contains("value_provenance") ? p["value_provenance"].get<std::string>()
                                                               : p["provenance"].get<std::string>();
      std::string desc = p["description"].get<std::string>();
      if (p.contains("source")) desc += " [" + p["source"].get<std::string>() + "]";
      if (a.config_given && shown != p["default"].get<std::string>()) desc += " (default " + p["default"].get<std::string>() + ")";
      std::printf("  %-22s %-10s %-12s %-10s %s\n", p["name"].get<std::string>().c_str(), p["kind"].get<std::string>().c_str(),
                  shown.c_str(), prov.c_str(), desc.c_str());
    }
  }
  return 0;
}

int cmd_probe(Args a) {
  if (a.help) {
    std::fputs(kProbeHelp, stdout);
    return 0;
  }
  if (a.positional.size() != 1) throw InputError("probe: name one probe: memory, ring, pcie or pt (see --help)");
  const std::string which = a.positional[0];
  static const std::set<std::string> probes{"memory", "ring", "pcie", "pt"};
  if (!probes.count(which)) {
    std::string msg = "probe: unknown probe '" + which + "' (expected memory, ring, pcie or pt)";
    if (auto s = did_you_mean(which, {"memory", "ring", "pcie", "pt"})) msg += "; did you mean '" + *s + "'?";
    throw InputError(msg);
  }
  if (!a.config_given) a.sim.config_file = default_config_path();
  Simulation sim(resolve_config(a.sim), !a.trace_file.empty() || !a.out_dir.empty());
  Card& card = sim.top_as<Card>();
  nlohmann::json r;
  if (which == "memory") r = probe_memory(card);
  else if (which == "ring") r = probe_ring(card);
  else if (which == "pcie") r = probe_pcie(card);
  else r = probe_pt(card);
  r["probe"] = which;
  r["config"] = a.sim.config_file;
  if (!a.out_dir.empty()) sim.write_outputs(a.out_dir, {{"probe", r}});
  if (!a.trace_file.empty()) sim.trace()->write(a.trace_file);
  if (a.json) std::cout << r.dump(2) << "\n";
  else {
    std::cout << "probe " << which << " on " << a.sim.config_file << "\n";
    print_probe(which, r);
  }
  return 0;
}

int cmd_run(Args a) {
  if (a.help) {
    std::fputs(kRunHelp, stdout);
    return 0;
  }
  if (a.positional.size() != 1) throw InputError("run: name one bundle directory (see --help)");
  if (!a.config_given) a.sim.config_file = default_config_path();
  Simulation sim(resolve_config(a.sim), !a.trace_file.empty() || !a.out_dir.empty());
  Card& card = sim.top_as<Card>();
  const plan::CardParams params = plan_card_params(card);
  bundle::CardLimits limits;
  limits.cores = params.cores;
  if (!card.cores().empty()) {
    limits.lx_bytes = card.core(0).lx_size();
    limits.lx_reserved = card.core(0).lx_size() - card.core(0).lx_usable();
  }
  plan::Plan p;
  try {
    const bundle::LoadedBundle lb = bundle::load_bundle(a.positional[0], limits);
    const auto resolved = bundle::resolve(lb, plan::default_bindings(lb), limits);
    p = plan::lower(lb, resolved, params);
  } catch (const bundle::LoadError& e) {
    throw InputError(e.what());
  } catch (const plan::LowerError& e) {
    throw InputError(e.what());
  }
  if (!a.dump_plan.empty()) {
    std::ofstream out(a.dump_plan, std::ios::binary | std::ios::trunc);
    out << plan::to_text(p);
    if (!out) throw InputError("--dump-plan: cannot write '" + a.dump_plan + "'");
  }
  if (!a.no_data) std::fputs("vspyre: note: data is not simulated yet; running timing only (as with --no-data)\n", stderr);
  const PlanResult r = run_plan(card, p);
  nlohmann::json j = r.to_json();
  j["bundle"] = a.positional[0];
  j["config"] = a.sim.config_file;
  if (!a.out_dir.empty()) sim.write_outputs(a.out_dir, {{"run", j}});
  if (!a.trace_file.empty()) sim.trace()->write(a.trace_file);
  if (a.json) std::cout << j.dump(2) << "\n";
  else {
    std::cout << "run " << a.positional[0] << " on " << a.sim.config_file << "\n";
    std::cout << format_result(r);
  }
  return 0;
}

int run(int argc, char** argv) {
  Args a = parse_args(argc, argv);
  if (!a.debug.empty()) enable_debug(a.debug, "--debug");
  if (const char* env = std::getenv("VSPYRE_DEBUG"); env && *env) enable_debug(env, "VSPYRE_DEBUG");
  if (a.command == "--version") {
    std::cout << version_string() << "\n";
    return 0;
  }
  if (a.command.empty()) {
    std::fputs(kUsage, a.help ? stdout : stderr);
    return a.help ? 0 : 1;
  }
  if (a.command == "describe") return cmd_describe(a);
  if (a.command == "probe") return cmd_probe(a);
  if (a.command == "run") return cmd_run(a);
  std::string msg = "unknown command '" + a.command + "' (commands: describe, probe, run, sweep, validate; see --help)";
  if (auto s = did_you_mean(a.command, {"describe", "probe", "run", "sweep", "validate"})) msg += "; did you mean '" + *s + "'?";
  throw InputError(msg);
}

}  // namespace
}  // namespace vspyre

int sc_main(int argc, char** argv) {
  // SystemC's own warnings go to stderr; keep its report handler from calling abort on errors.
  sc_core::sc_report_handler::set_actions(sc_core::SC_ERROR, sc_core::SC_THROW);
  try {
    return vspyre::run(argc, argv);
  } catch (const vspyre::InputError& e) {
    std::fprintf(stderr, "vspyre: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vspyre: internal error: %s\n", e.what());
    return 2;
  }
}

// SystemC prints a banner on stdout when its kernel starts, which would corrupt --json output;
// our own main() switches it off before handing over to SystemC, which then calls sc_main.
// `vspyre sweep` and `vspyre validate` orchestrate many runs; that part is Python
// (scripts/vspyre_<command>.py), which calls this binary back for every simulation.
static int forward_to_script(const char* command, int argc, char** argv) {
  char self[PATH_MAX];
  if (!realpath("/proc/self/exe", self)) std::snprintf(self, sizeof self, "%s", argv[0]);
  std::string script = std::string(VSPYRE_DEFAULT_CONFIG_DIR) + "/../scripts/vspyre_" + command + ".py";
  std::vector<char*> args = {const_cast<char*>("python3"), script.data(), const_cast<char*>("--vspyre"), self};
  for (int i = 2; i <= argc; ++i) args.push_back(argv[i]);  // argv[argc] is the terminating nullptr
  execvp("python3", args.data());
  std::fprintf(stderr, "vspyre: error: cannot run python3 for 'vspyre %s': %s\n", command, std::strerror(errno));
  return 1;
}

int main(int argc, char** argv) {
  if (argc >= 2 && (std::strcmp(argv[1], "sweep") == 0 || std::strcmp(argv[1], "validate") == 0))
    return forward_to_script(argv[1], argc, argv);
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
  return sc_core::sc_elab_and_sim(argc, argv);
}
