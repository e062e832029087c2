// The `vspyre` command. Exit codes: 0 success, 1 bad input (one clear line on stderr), 2 internal error.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include <google/protobuf/arena.h>

#include <nlohmann/json.hpp>
#include <systemc>

#include "models/card.h"
#include "models/plan_runner.h"
#include "models/probes.h"
#include "sim/engine/error.h"
#include "sim/engine/log.h"
#include "sim/engine/simulation.h"
#include "sim/bundle/bundle.h"
#include "sim/exec/exec.h"
#include "sim/exec/npy.h"
#include "sim/exec/reference.h"
#include "sim/ops/ops.h"
#include "sim/plan/lower.h"

namespace vspyre {
namespace {

const char* kUsage =
    "usage: vspyre <command> [options]\n"
    "\n"
    "commands:\n"
    "  describe   list every component type and parameter (unit, default, provenance, description)\n"
    "  probe      the card's own bandwidth and throughput tests: memory | ring | pcie | pt\n"
    "  run        run a compiled kernel bundle (bundle.mlir + sdsc_*.json) on the card: time and data\n"
    "  sweep      a what-if sweep (configs/sweeps/*.yaml): many cards x plans -> CSV + plots\n"
    "  validate   predicted against measured Spyre kernel times (bench/validation/measured.yaml)\n"
    "\n"
    "  vspyre --version          print the version\n"
    "  vspyre <command> --help   options of one command\n";

const char* kDescribeHelp =
    "usage: vspyre describe [--config FILE] [-p key.path=value ...] [--json]\n"
    "\n"
    "Lists every registered component type and every parameter the code reads, with its unit kind,\n"
    "the code's default, provenance (datasheet, measured, derived, estimate) and description, and\n"
    "the value the card has: the config's (without --config the default card's, configs/spyre.yaml\n"
    "or $VSPYRE_CONFIG) after any -p, with its provenance and source where the config gives them.\n";

const char* kProbeHelp =
    "usage: vspyre probe memory|ring|pcie|pt [--config FILE] [-p key.path=value ...] [--json]\n"
    "                    [--out DIR [--no-trace]] [--trace FILE] [--debug FLAGS]\n"
    "\n"
    "  memory  one-direction read, one-direction write and balanced copy, from 1, 2, 4, ... cores\n"
    "  ring    neighbour and farthest-core transfers, one flow and all cores at once\n"
    "  pcie    host-to-device and device-to-host for sizes from 4 KiB to 1 GiB\n"
    "  pt      a large fp16 matmul tile on one core\n"
    "\n"
    "Without --config the default card (configs/spyre.yaml, or $VSPYRE_CONFIG) is used.\n"
    "--out DIR writes stats.json, config.resolved.yaml and trace.json (not with --no-trace).\n"
    "--debug FLAGS: a comma-separated list of core, lpddr5 or all; the named models print what they\n"
    "do on stderr (also $VSPYRE_DEBUG).\n";

const char* kRunHelp =
    "usage: vspyre run BUNDLE_DIR [--config FILE] [-p key.path=value ...] [--out DIR [--no-trace]] [--json]\n"
    "                  [--trace FILE] [--dump-plan FILE] [--no-data] [--seed N]\n"
    "                  [--input NAME=FILE.npy ...] [--repeat N] [--host-times] [--debug FLAGS]\n"
    "\n"
    "Loads the bundle (BUNDLE_DIR/bundle.mlir and the sdsc_*.json files it names), lowers it to a\n"
    "per-core plan (DMA in, compute on PT or SFP, DMA out, ring combines, one launch cost) and runs\n"
    "that plan on the card. Prints the kernel time, per-core PT/SFP utilisation, bytes per level\n"
    "(LPDDR5 read/write, LX, ring) and the bottleneck.\n"
    "\n"
    "With data on (the default) it also computes the kernel: every kernel input gets values, in its\n"
    "device format at its argument's address; every SDSC op is computed in the device formats\n"
    "(sim/exec, vspyre::ops) and its outputs are written in the SDSC's stick layout. Each output is\n"
    "checked against a double-precision host reference (elementwise, reductions, matmul, copies;\n"
    "large matmuls on a sample of elements): max abs/rel error and PASS/FAIL against depth x the\n"
    "format's rounding unit, where depth is the number of device roundings on the path, times the\n"
    "magnitudes rounded on the way (sums also get what their fp32 accumulation can lose). A NaN\n"
    "must come out as NaN (in DL16, the merged NaN/inf code); a result beyond the format's range as\n"
    "its largest value or an infinity of that sign. A FAIL is reported, not an error: the exit code\n"
    "stays 0.\n"
    "\n"
    "  --json            one JSON object: kernel_time_us, cores_used, per_core, bytes, bottleneck,\n"
    "                    data {seed, tensors [{arg, offset, label, role, shape, check}], all_pass,\n"
    "                    host}; a tensor the bundle addresses at arg<i> + offset (a slice, half\n"
    "                    a cat) is its own entry, labelled arg<i>+<offset>\n"
    "  --out DIR         write stats.json, trace.json and config.resolved.yaml into DIR; with data,\n"
    "                    also <label>_input.npy / <label>_output.npy (host order, fp32); the files\n"
    "                    an earlier run wrote into DIR and this one does not are removed, unless\n"
    "                    changed since (DIR/.vspyre-run.json lists them); no other file is touched\n"
    "  --no-trace        with --out: no trace.json (recording it is most of a short run's host time\n"
    "                    and 100+ MB on a large kernel; vspyre sweep passes it)\n"
    "  --trace FILE      write a Chrome trace of every engine\n"
    "  --dump-plan FILE  write the lowered plan in protobuf text format\n"
    "  --no-data         timing only\n"
    "  --seed N          inputs are pseudo-random, uniform in [-1, 1), from this seed (default 1);\n"
    "                    the same seed gives bit-identical outputs\n"
    "  --input NAME=FILE.npy  values of kernel input NAME (arg<i>, i or arg<i>+<offset>) from a\n"
    "                    float16/32/64 .npy of the input's logical shape\n"
    "  --host-times      also report the host's seconds: loading and lowering, simulating (and the\n"
    "                    simulated over host time), in the text and in --json's and stats.json's\n"
    "                    `host`; with data also the data side's (executor, ops, total) in data.host.\n"
    "                    Without it (no `host`, data.host null) the output is the same, byte for\n"
    "                    byte, on every run of one plan, config and seed\n"
    "  --repeat N        run the kernel N times back to back on one card (1-1000, default 1), as a\n"
    "                    card is timed (a median over repetitions) and as the runtime shim runs a\n"
    "                    kernel launched again: each run finds the DRAM rows, refresh phase and\n"
    "                    memory queues the one before left. kernel_time_us and the breakdown are\n"
    "                    then the median run's (the lower of the two middle ones for even N);\n"
    "                    `repeat` lists every run's time. stats.json and the trace cover all runs\n"
    "  --debug FLAGS     a comma-separated list of core, lpddr5 or all: the named models print what\n"
    "                    they do, request by request, on stderr (also $VSPYRE_DEBUG)\n"
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
  uint64_t seed = 1;
  uint32_t repeat = 1;               // --repeat: runs back to back on one card
  std::vector<std::string> inputs;  // NAME=FILE.npy
  bool host_times = false;           // --host-times
  bool no_trace = false;             // --no-trace: --out without trace.json
  bool version = false;              // --version, anywhere
  std::set<std::string> given;       // the options given, as spelled (-p for -pkey=value)
};

// A command refuses an option it would otherwise ignore (`probe pt --repeat 5`).
void allow_only(const Args& a, const std::set<std::string>& allowed) {
  for (const auto& o : a.given)
    if (o != "--help" && o != "-h" && o != "--version" && !allowed.count(o)) {
      std::string list;
      for (const auto& x : allowed) list += (list.empty() ? "" : ", ") + x;
      throw InputError(a.command + ": option " + o + " does not apply (options: " + list + "; see --help)");
    }
}

// --no-trace says what --out leaves out: alone, or with --trace (which asks for one), it is a mistake.
void check_no_trace(const Args& a) {
  if (!a.no_trace) return;
  if (a.out_dir.empty()) throw InputError("--no-trace goes with --out (it leaves trace.json out of DIR)");
  if (!a.trace_file.empty()) throw InputError("--no-trace and --trace ask for opposite things: give one");
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto need = [&](const char* what) -> std::string {
      if (i + 1 >= argc) throw InputError(s + ": expects " + what);
      std::string v = argv[++i];
      if (v.empty()) throw InputError(s + ": expected " + what + ", got ''");
      return v;
    };
    if (!s.empty() && s[0] == '-') a.given.insert(s.rfind("-p", 0) == 0 && s.size() > 2 ? "-p" : s == "-c" ? "--config" : s);
    if (s == "--help" || s == "-h") a.help = true;
    else if (s == "--version") a.version = true;
    else if (s == "--config" || s == "-c") {
      const std::string c = need("a config file");
      if (a.config_given)  // the last would win, silently
        throw InputError(s + ": given twice ('" + a.sim.config_file + "' and '" + c +
                         "'); one config may include others (include: [a.yaml, b.yaml])");
      a.sim.config_file = c;
      a.config_given = true;
    } else if (s == "-p") a.sim.overrides.push_back(need("key.path=value"));
    else if (s.rfind("-p", 0) == 0 && s.size() > 2 && s.find('=') != std::string::npos) a.sim.overrides.push_back(s.substr(2));
    else if (s == "--json") a.json = true;
    else if (s == "--out") a.out_dir = need("a directory");
    else if (s == "--trace") a.trace_file = need("a file name");
    else if (s == "--debug") a.debug = need("a comma-separated list of debug flags");
    else if (s == "--dump-plan") a.dump_plan = need("a file name");
    else if (s == "--no-data") a.no_data = true;
    else if (s == "--seed") {
      const std::string v = need("an unsigned integer");
      char* end = nullptr;
      errno = 0;
      const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || v[0] == '-' || *end != '\0' || errno == ERANGE)
        throw InputError("--seed: expected an unsigned integer, got '" + v + "'");
      a.seed = x;
    } else if (s == "--repeat") {
      const std::string v = need("a whole number from 1 to 1000");
      char* end = nullptr;
      errno = 0;
      const long long x = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || errno == ERANGE || x < 1 || x > 1000)
        throw InputError("--repeat: expected a whole number from 1 to 1000, got '" + v + "'");
      a.repeat = static_cast<uint32_t>(x);
    } else if (s == "--input") {
      const std::string v = need("NAME=FILE.npy");
      const std::string name = v.substr(0, v.find('='));
      for (const auto& prev : a.inputs)
        if (prev.substr(0, prev.find('=')) == name)
          throw InputError("--input: " + name + " given twice ('" + prev + "' and '" + v + "')");
      a.inputs.push_back(v);
    }
    else if (s == "--host-times") a.host_times = true;
    else if (s == "--no-trace") a.no_trace = true;
    else if (!s.empty() && s[0] == '-') throw InputError("unknown option '" + s + "' (see --help)");
    else if (a.command.empty()) a.command = s;
    else a.positional.push_back(s);
  }
  return a;
}

// The files a run writes: --trace, --dump-plan, and in --out DIR stats.json, trace.json,
// config.resolved.yaml and the tensors' <label>_input.npy / _output.npy. None may be a file the
// run reads (`reads`: the config and every file it includes, the bundle's launch text, its
// bundle.mlir.ref and the SDSC files it names, each --input), whatever the spelling or link that
// reaches it; no two may be one file; none may be a directory or a link to nothing. The named
// outputs are checked once the config and the bundle have loaded, before the card runs (a trace
// written over sdsc_0.json destroyed the bundle; an --out that could not be made failed after the
// whole simulation); the tensors' files as they are written. --out is made only when something
// goes into it, so a run that fails leaves none behind.
namespace fs = std::filesystem;

class OutputGuard {
 public:
  OutputGuard(const Args& a, const std::vector<std::filesystem::path>& reads) : m_out(a.out_dir) {
    for (const auto& r : reads) {
      m_inputs.insert(canon(r));
      if (auto id = file_id(r)) m_input_ids.insert(*id);
    }
    if (!a.trace_file.empty()) check(a.trace_file, "--trace");
    if (!a.dump_plan.empty()) check(a.dump_plan, "--dump-plan");
    if (!m_out.empty()) {
      std::error_code ec;
      if (fs::exists(m_out, ec) && !fs::is_directory(m_out, ec))
        throw InputError("--out: '" + m_out.string() + "' exists and is not a directory");
      // The nearest directory that exists must let us make the rest.
      fs::path up = fs::absolute(m_out, ec);
      while (!up.empty() && !fs::exists(up, ec) && up.has_parent_path() && up.parent_path() != up) up = up.parent_path();
      if (!fs::is_directory(up, ec) || ::access(up.c_str(), W_OK | X_OK) != 0)
        throw InputError("--out: cannot create '" + m_out.string() + "': '" + up.string() + "' is not a directory this user can write in");
      for (const char* f : {"stats.json", "trace.json", "config.resolved.yaml"}) check(m_out / f, "--out");
    }
  }
  // `file`, about to be written by `what`: refused if the run reads it, something else writes it,
  // or it cannot be written. Files in --out are checked before --out exists.
  void check(const fs::path& file, const std::string& what) {
    std::error_code ec;
    const fs::path c = canon(file);
    // By path, and by identity: a hard link to a file the run reads has a path of its own.
    const auto id = file_id(file);
    if (m_inputs.count(c) || (id && m_input_ids.count(*id)))
      throw InputError(what + ": '" + file.string() + "' is a file this run reads; it would be overwritten");
    if (auto w = m_written.find(c); w != m_written.end())
      throw InputError(what + ": '" + file.string() + "' is also written by " + w->second);
    m_written.emplace(c, what);
    if (fs::is_directory(file, ec)) throw InputError(what + ": '" + file.string() + "' is a directory, not a file");
    if (fs::is_symlink(fs::symlink_status(file, ec)) && !fs::exists(file, ec))
      throw InputError(what + ": '" + file.string() + "' is a link to nothing");
    const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
    if (!m_out.empty() && canon(dir) == canon(m_out) && !fs::exists(dir, ec)) return;  // --out, made later
    if (!fs::is_directory(dir, ec))
      throw InputError(what + ": cannot write '" + file.string() + "': no directory '" + dir.string() + "'");
    if (fs::exists(file, ec) ? ::access(file.c_str(), W_OK) != 0 : ::access(dir.c_str(), W_OK | X_OK) != 0)
      throw InputError(what + ": cannot write '" + file.string() + "': " + std::strerror(errno));
  }
  // --out DIR/name, checked and DIR made: for the tensors' files as the data run writes them.
  fs::path out_file(const std::string& name) {
    const fs::path f = m_out / name;
    check(f, "--out");
    make_out();
    m_out_names.insert(name);
    return f;
  }
  // After the run has written its files into --out (`written`: the names write_outputs gave, with
  // the tensors' files out_file handed out): a run into a DIR an earlier run wrote would leave
  // that run's trace.json or tensors beside the new results, and nothing would tell them apart.
  // So each run records what it wrote in DIR/.vspyre-run.json (name, size, modification time),
  // and the next run into DIR removes the files of that list it did not write again, if each is
  // still as that run left it. A file the user made or changed is never removed: one that a
  // run could have written (stats.json, trace.json, config.resolved.yaml, *_input.npy,
  // *_output.npy) but this one did not gets a note on stderr instead.
  void finish(const std::vector<std::string>& written) {
    if (m_out.empty()) return;
    for (const auto& n : written) m_out_names.insert(n);
    const fs::path mark = m_out / kRunMark;
    std::map<std::string, FileStamp> before;  // the previous run's files, as it left them
    std::error_code ec;
    if (fs::exists(fs::symlink_status(mark, ec)) && !fs::is_regular_file(fs::symlink_status(mark, ec))) {
      std::fprintf(stderr, "vspyre: note: %s is not a file vspyre wrote (left as it was; no earlier output removed)\n", mark.string().c_str());
      return;
    }
    if (fs::is_regular_file(mark, ec)) {
      // Read without exceptions: this runs after the simulation, where a throw on this stack
      // trips AddressSanitizer's check of the SystemC thread stacks (a false report, but CI's).
      std::ifstream in(mark);
      const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
      bool ours = !j.is_discarded() && j.is_object() && j.contains("files") && j["files"].is_array();
      if (ours)
        for (const auto& f : j["files"]) {
          if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("size") ||
              !f["size"].is_number_unsigned() || !f.contains("mtime_ns") || !f["mtime_ns"].is_number_integer()) {
            ours = false;
            break;
          }
          before[f["name"].get<std::string>()] = {f["size"].get<uint64_t>(), f["mtime_ns"].get<int64_t>()};
        }
      if (!ours) {
        before.clear();  // not ours to read: every file in DIR counts as the user's
        std::fprintf(stderr, "vspyre: note: %s is not a list vspyre wrote; no earlier output in '%s' is removed\n",
                     mark.string().c_str(), m_out.string().c_str());
      }
    }
    for (fs::directory_iterator it(m_out, ec), end; !ec && it != end; it.increment(ec)) {
      const fs::directory_entry& entry = *it;
      const std::string name = entry.path().filename().string();
      if (m_out_names.count(name) || name == kRunMark) continue;
      auto was = before.find(name);
      const auto now = stamp(entry.path());
      if (was != before.end() && now && *now == was->second) {
        std::error_code rm;
        if (fs::remove(entry.path(), rm)) continue;
      }
      if (could_be_ours(name))
        std::fprintf(stderr, "vspyre: note: '%s' is not from this run (left as it was)\n", entry.path().string().c_str());
    }
    nlohmann::json files = nlohmann::json::array();
    for (const auto& n : m_out_names)
      if (auto st = stamp(m_out / n)) files.push_back({{"name", n}, {"size", st->size}, {"mtime_ns", st->mtime_ns}});
    std::ofstream out(mark, std::ios::trunc);
    out << nlohmann::json{{"written_by", "vspyre run/probe --out: the files of the last run into this directory"}, {"files", files}}.dump(1) << "\n";
    if (!out) throw InputError("--out: cannot write '" + mark.string() + "'");
  }
  void make_out() const {
    std::error_code ec;
    fs::create_directories(m_out, ec);
    if (ec) throw InputError("--out: cannot create '" + m_out.string() + "': " + ec.message());
  }

 private:
  // The device and inode of an existing file (what every path and hard link to it shares).
  static std::optional<std::pair<uint64_t, uint64_t>> file_id(const fs::path& p) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) return std::nullopt;
    return std::make_pair(static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino));
  }
  static fs::path canon(const fs::path& p) {
    std::error_code ec;
    const fs::path abs = fs::absolute(p, ec);
    fs::path c = fs::weakly_canonical(abs, ec);
    return ec ? abs.lexically_normal() : c;
  }
  static constexpr const char* kRunMark = ".vspyre-run.json";
  struct FileStamp {
    uint64_t size = 0;
    int64_t mtime_ns = 0;
    bool operator==(const FileStamp& o) const { return size == o.size && mtime_ns == o.mtime_ns; }
  };
  static std::optional<FileStamp> stamp(const fs::path& p) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    return FileStamp{static_cast<uint64_t>(st.st_size), static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  }
  static bool could_be_ours(const std::string& n) {
    auto ends = [&](const std::string& suf) { return n.size() > suf.size() && n.compare(n.size() - suf.size(), suf.size(), suf) == 0; };
    return n == "stats.json" || n == "trace.json" || n == "config.resolved.yaml" || ends("_input.npy") || ends("_output.npy");
  }
  fs::path m_out;
  std::set<std::string> m_out_names;  // the files this run wrote into --out
  std::set<fs::path> m_inputs;
  std::set<std::pair<uint64_t, uint64_t>> m_input_ids;
  std::map<fs::path, std::string> m_written;  // canonical path -> the option that writes it
};

// The loader names a bundle's files as the bundle does ("bundle.mlir:8: ...", "sdsc_0.json:
// /path: ..."); the user gave a directory, and may be running many: the file's path as the user
// can open it ("kernels/k1/sdsc_0.json: ...", or the launch text a bundle.mlir.ref names).
std::string with_bundle_path(const std::string& given, const std::string& msg) {
  namespace fs = std::filesystem;
  const auto colon = msg.find(':');
  if (colon == std::string::npos || colon == 0) return msg;
  const std::string file = msg.substr(0, colon);
  if (file.find('/') != std::string::npos) return msg;  // a path already
  std::error_code ec;
  const fs::path g(given);
  const bool is_dir = fs::is_directory(g, ec);
  const fs::path dir = is_dir ? g : g.parent_path();
  if (fs::is_regular_file(dir / file, ec)) return (dir / file).lexically_normal().string() + msg.substr(colon);
  try {  // the launch text a bundle.mlir.ref names (the directory's, or the ref given itself)
    const fs::path mlir = is_dir || g.filename() == bundle::k_bundle_ref ? bundle::bundle_mlir_path(dir) : g;
    if (mlir.filename() == file) return mlir.lexically_normal().string() + msg.substr(colon);
  } catch (const bundle::LoadError&) {
  }
  return msg;
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
  allow_only(a, {"--config", "-p", "--json", "--debug"});
  if (!a.positional.empty()) throw InputError("describe: takes no arguments, got '" + a.positional[0] + "' (see --help)");
  // Without --config, the default card (as run and probe): its values next to the code's defaults.
  SimOptions card = a.sim;
  if (!a.config_given) card.config_file = default_config_path();
  Simulation sim(resolve_config(card));
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
  // The simulation's own settings (sim:) first, as a pseudo-type.
  std::vector<std::pair<std::string, const Component*>> entries{{"Simulation", nullptr}};
  for (const auto& [name, comp] : seen) entries.emplace_back(name, comp);
  for (const auto& [name, comp] : entries) {
    nlohmann::json params = nlohmann::json::array();
    for (const auto& s : comp ? comp->params().all_specs() : sim.sim_params()) {
      nlohmann::json p{{"name", s.path},
                       {"kind", param_kind_name(s.kind)},
                       {"default", s.default_text},
                       {"provenance", provenance_name(s.provenance)},
                       {"description", s.description}};
      if (!s.source.empty()) p["source"] = s.source;
      if (!s.choices.empty()) p["choices"] = s.choices;
      {
        p["value"] = value_or(s);
        if (s.value_provenance) p["value_provenance"] = provenance_name(*s.value_provenance);
        if (!s.value_source.empty()) p["value_source"] = s.value_source;
      }
      params.push_back(p);
    }
    // Instances a key builds (card.core.count): one parameter of the parent.
    if (comp)
      for (const auto& c : comp->child_counts()) {
        nlohmann::json p{{"name", c.key + ".count"},
                         {"kind", "integer"},
                         {"default", std::to_string(c.default_value)},
                         {"provenance", "estimate"},
                         {"description", "instances of " + c.key + " (" + c.key + "_0 ... " + c.key + "_" +
                                             std::to_string(c.value - 1) + ")"},
                         {"value", std::to_string(c.value)}};
        if (!c.where.empty()) {
          p["value_provenance"] = c.provenance.empty() ? "override" : c.provenance;
          p["value_source"] = c.source.empty() ? c.where : c.source;
        }
        params.push_back(p);
      }
    const std::string desc = comp ? Registry::instance().find(name)->description : "simulation-wide settings (sim:)";
    j.push_back({{"type", name}, {"description", desc}, {"example_path", comp ? comp->path() : std::string("sim")},
                 {"parameters", params}});
  }
  if (a.json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << version_string() << "\n";
  std::cout << "config: " << card.config_file << "\n";
  for (const auto& t : j) {
    std::cout << "\n" << t["type"].get<std::string>() << ": " << t["description"].get<std::string>() << "\n";
    std::printf("  %-22s %-10s %-12s %-10s %s\n", "parameter", "kind", "value", "provenance", "description");
    for (const auto& p : t["parameters"]) {
      const std::string shown = p["value"].get<std::string>();
      const std::string prov = p.contains("value_provenance") ? p["value_provenance"].get<std::string>()
                                                               : p["provenance"].get<std::string>();
      std::string desc = p["description"].get<std::string>();
      // The source of the value shown: the config's where it gives one, else the code's.
      if (p.contains("value_source")) desc += " [" + p["value_source"].get<std::string>() + "]";
      else if (p.contains("source") && !p.contains("value_provenance")) desc += " [" + p["source"].get<std::string>() + "]";
      if (shown != p["default"].get<std::string>()) desc += " (default " + p["default"].get<std::string>() + ")";
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
  allow_only(a, {"--config", "-p", "--json", "--out", "--trace", "--debug", "--no-trace"});
  check_no_trace(a);
  if (a.positional.size() > 1)
    throw InputError("probe: one probe at a time, got '" + a.positional[0] + "' and '" + a.positional[1] + "' (see --help)");
  if (a.positional.size() != 1) throw InputError("probe: name one probe: memory, ring, pcie or pt (see --help)");
  const std::string which = a.positional[0];
  static const std::set<std::string> probes{"memory", "ring", "pcie", "pt"};
  if (!probes.count(which)) {
    std::string msg = "probe: unknown probe '" + which + "' (expected memory, ring, pcie or pt)";
    if (auto s = did_you_mean(which, {"memory", "ring", "pcie", "pt"})) msg += "; did you mean '" + *s + "'?";
    throw InputError(msg);
  }
  if (!a.config_given) a.sim.config_file = default_config_path();
  std::vector<std::filesystem::path> reads;
  Simulation sim(resolve_config(a.sim, &reads), !a.trace_file.empty() || !a.out_dir.empty(), a.no_trace);
  OutputGuard guard(a, reads);
  Card& card = sim.top_as<Card>();
  nlohmann::json r;
  if (which == "memory") r = probe_memory(card);
  else if (which == "ring") r = probe_ring(card);
  else if (which == "pcie") r = probe_pcie(card);
  else r = probe_pt(card);
  r["probe"] = which;
  r["config"] = a.sim.config_file;
  if (!a.out_dir.empty()) guard.finish(sim.write_outputs(a.out_dir, {{"probe", r}}));
  if (!a.trace_file.empty()) sim.trace()->write(a.trace_file);
  if (a.json) std::cout << r.dump(2) << "\n";
  else {
    std::cout << "probe " << which << " on " << a.sim.config_file << "\n";
    print_probe(which, r);
  }
  return 0;
}

// ---- vspyre run, data on --------------------------------------------------------------------

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "," : "") + std::to_string(s[i]);
  return t + "]";
}

// An --input array for kernel tensor kt: the tensor's shape (dims of size 1 aside: the same
// elements in the same order), and for an integer tensor whole numbers its format holds (an
// index tensor's below the rows it indexes). Anything else is the user's mistake, not a value
// to round, clamp or wrap.
void check_input(const std::string& file, const exec::NpyArray& arr, const exec::KernelTensor& kt,
                 const std::string& label) {
  auto squeezed = [](const std::vector<int64_t>& s) {
    std::vector<int64_t> r;
    for (int64_t d : s)
      if (d != 1) r.push_back(d);
    return r;
  };
  if (squeezed(arr.shape) != squeezed(kt.info.size) || arr.values.size() != size_t(kt.info.numel()))
    throw InputError("--input " + file + ": shape " + shape_text(arr.shape) + " does not match " + label + "'s " +
                     shape_text(kt.info.size));
  const fmt::DataFormat f = kt.info.format;
  if (!fmt::is_integer(f)) return;
  double lo = static_cast<double>(fmt::int_min(f)), hi = static_cast<double>(fmt::int_max(f));
  std::string what = "of " + std::string(fmt::name(f)) + ": whole numbers in [" + std::to_string(fmt::int_min(f)) +
                     ", " + std::to_string(fmt::int_max(f)) + "]";
  if (kt.index_bound) {
    lo = std::max(lo, 0.0);
    hi = std::min(hi, static_cast<double>(kt.index_bound) - 1);
    what = "an index tensor: its elements are row numbers, whole numbers in [0, " +
           std::to_string(kt.index_bound - 1) + "]";
  }
  for (size_t i = 0; i < arr.values.size(); ++i) {
    const double v = arr.values[i];
    if (!std::isfinite(v) || v != std::floor(v) || v < lo || v > hi) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.9g", v);
      throw InputError("--input " + file + ": element " + std::to_string(i) + " is " + buf + ", but " + label +
                       " is " + what + (std::fabs(v) > 16777216.0 && std::isfinite(v)
                                            ? " (and --input passes values as fp32: whole numbers beyond 2^24 "
                                              "are not exact)"
                                            : ""));
    }
  }
}

nlohmann::json run_data(const Args& a, const bundle::LoadedBundle& lb,
                        const std::vector<bundle::ResolvedExecution>& resolved,
                        const bundle::Bindings& bindings, const bundle::CardLimits& limits, OutputGuard& guard) {
  try {
    const auto t0 = std::chrono::steady_clock::now();
    exec::SparseMemory mem;
    const auto kts = exec::kernel_tensors(lb, resolved, bindings);
    // --input NAME=FILE.npy, NAME argN (or N), or argN+OFFSET for a view of argument N.
    std::map<size_t, std::string> given;  // by position in kts
    for (const auto& spec : a.inputs) {
      const auto eq = spec.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
        throw InputError("--input: expected NAME=FILE.npy, got '" + spec + "'");
      std::string name = spec.substr(0, eq);
      if (name.rfind("arg", 0) != 0) name = "arg" + name;
      size_t k = 0;
      while (k < kts.size() && !(kts[k].read_first && exec::kernel_tensor_label(kts[k]) == name)) ++k;
      if (k == kts.size()) {
        std::string names;
        for (const auto& t : kts)
          if (t.read_first) names += (names.empty() ? "" : ", ") + exec::kernel_tensor_label(t);
        throw InputError("--input: '" + spec.substr(0, eq) + "' is not a kernel input (inputs: " +
                         names + ")");
      }
      given[k] = spec.substr(eq + 1);
    }
    nlohmann::json tensors = nlohmann::json::array();
    std::map<size_t, nlohmann::json> entry;  // by position in kts
    for (size_t k = 0; k < kts.size(); ++k) {
      const exec::KernelTensor& kt = kts[k];
      const std::string label = exec::kernel_tensor_label(kt);
      nlohmann::json e{{"arg", kt.arg_index},
                       {"offset", kt.offset},
                       {"label", label},
                       {"name", lb.bundle.args[kt.arg_index].name},
                       {"role", kt.read_first ? (kt.written ? "inout" : "input") : "output"},
                       {"dims", kt.info.dims},
                       {"shape", kt.info.size},
                       {"format", std::string(fmt::name(kt.info.format))},
                       {"address", kt.info.base}};
      if (kt.read_first) {
        if (auto g = given.find(k); g != given.end()) {
          exec::NpyArray arr = exec::read_npy(g->second);
          check_input(g->second, arr, kt, label);
          exec::write_tensor(mem, kt.info, arr.values);
          e["source"] = g->second;
        } else {
          // A view's values are drawn from the seed moved by its offset (the argument itself: offset 0).
          // Written a chunk of the image at a time: no copy of the whole tensor.
          exec::write_random_input(mem, kt, a.seed);
          e["source"] = kt.index_bound ? "random indices below " + std::to_string(kt.index_bound) : "random";
        }
        if (!a.out_dir.empty())
          exec::write_npy(guard.out_file(label + "_input.npy"),
                          exec::read_tensor(mem, kt.info), kt.info.size);
      }
      entry[k] = e;
    }
    // Elementwise kernels over one image shape are checked after the run a chunk at a time
    // (exec::check_streamed: no tensor held whole); any other kernel's reference is computed
    // whole before the run, while its inputs are certainly intact.
    const bool streamed_check = exec::can_check_streamed(resolved, kts);
    exec::RefResult ref;
    if (!streamed_check) ref = exec::reference(resolved, kts, mem);
    exec::ExecOptions opt;
    opt.lx_bytes = limits.lx_bytes;
    const exec::ExecStats st = exec::run(lb, resolved, mem, opt);
    exec::StreamedCheck sc;
    if (streamed_check) {
      auto c = exec::check_streamed(resolved, kts, mem);
      if (!c) throw std::logic_error("exec::check_streamed declined a plan can_check_streamed took");
      sc = std::move(*c);
    }
    bool all_pass = true;
    int checked = 0;
    auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
    auto report = [&](nlohmann::json& e, const exec::Comparison& c, int roundings, bool sampled) {
      e["check"] = {{"compared", c.compared},
                    {"max_abs_err", num(c.max_abs)},
                    {"max_rel_err", num(c.max_rel)},
                    {"norm_err", num(c.norm_err)},
                    {"tolerance", c.tolerance},
                    {"roundings", roundings},
                    {"sampled", sampled},
                    {"result", c.pass ? "PASS" : "FAIL"}};
      all_pass = all_pass && c.pass;
      ++checked;
    };
    auto not_checked = [&](nlohmann::json& e, const std::map<size_t, std::string>& why, size_t k) {
      auto u = why.find(k);
      e["check"] = {{"result", "not checked"}, {"why", u != why.end() ? u->second : "no reference"}};
    };
    for (size_t k = 0; k < kts.size(); ++k) {
      const exec::KernelTensor& kt = kts[k];
      auto& e = entry[k];
      if (!kt.written) continue;
      // The output whole only when something needs it: --out, or the whole check.
      std::vector<float> out;
      if (!a.out_dir.empty() || !streamed_check) out = exec::read_tensor(mem, kt.info);
      if (!a.out_dir.empty())
        exec::write_npy(guard.out_file(exec::kernel_tensor_label(kt) + "_output.npy"),
                        out, kt.info.size);
      if (streamed_check) {
        if (auto it = sc.outputs.find(k); it != sc.outputs.end())
          report(e, it->second, sc.depth.at(k), false);
        else
          not_checked(e, sc.unavailable, k);
        continue;
      }
      if (auto it = ref.outputs.find(k); it != ref.outputs.end())
        report(e, exec::compare(out, it->second), it->second.depth, !it->second.have.empty());
      else
        not_checked(e, ref.unavailable, k);
    }
    for (auto& [_, e] : entry) tensors.push_back(e);
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return {{"seed", a.seed},
            {"tensors", tensors},
            {"checked", checked},
            {"all_pass", checked > 0 && all_pass},
            {"executions", st.executions},
            {"ops", st.ops},
            {"elements", st.elements},
            {"macs", st.macs},
            {"hbm_bytes_read", st.bytes_read},
            {"hbm_bytes_written", st.bytes_written},
            {"host", a.host_times ? nlohmann::json{{"exec_seconds", st.seconds},
                                                   {"compute_seconds", st.compute_seconds},
                                                   {"total_seconds", total}}
                                : nlohmann::json(nullptr)}};
  } catch (const exec::ExecError& e) {
    throw InputError(with_bundle_path(a.positional[0], e.what()));
  }
}

std::string format_data(const nlohmann::json& d) {
  std::string s;
  char buf[512];
  std::snprintf(buf, sizeof buf, "data: seed %llu, %llu ops, %.3g elements, %.3g MAC",
                (unsigned long long)d["seed"].get<uint64_t>(), (unsigned long long)d["ops"].get<uint64_t>(),
                double(d["elements"].get<uint64_t>()), double(d["macs"].get<uint64_t>()));
  s += buf;
  if (const auto& h = d["host"]; !h.is_null()) {
    std::snprintf(buf, sizeof buf, "; host %.3f s, of which executor %.3f s (ops %.3f s), the rest inputs, reference and checks",
                  h["total_seconds"].get<double>(), h["exec_seconds"].get<double>(), h["compute_seconds"].get<double>());
    s += buf;
  }
  s += "\n";
  for (const auto& t : d["tensors"]) {
    std::string shape = "[";
    for (size_t i = 0; i < t["shape"].size(); ++i) shape += (i ? "," : "") + std::to_string(t["shape"][i].get<int64_t>());
    shape += "]";
    std::snprintf(buf, sizeof buf, "  %-5s %-6s %-14s %-12s", t["label"].get<std::string>().c_str(), t["role"].get<std::string>().c_str(),
                  shape.c_str(), t["format"].get<std::string>().c_str());
    s += buf;
    if (t.contains("check")) {
      const auto& c = t["check"];
      if (c.contains("compared")) {
        auto g = [&](const char* k) { return c[k].is_null() ? INFINITY : c[k].get<double>(); };
        const bool within = g("norm_err") <= c["tolerance"].get<double>();
        std::snprintf(buf, sizeof buf, " vs double reference%s: max abs %.3g, max rel %.3g, err vs rounded magnitudes %.3g %s tol %.3g (%d roundings): %s",
                      c["sampled"].get<bool>() ? " (sampled)" : "", g("max_abs_err"), g("max_rel_err"), g("norm_err"),
                      within ? "<=" : ">", c["tolerance"].get<double>(), c["roundings"].get<int>(), c["result"].get<std::string>().c_str());
        s += buf;
      } else {
        s += " not checked: " + c["why"].get<std::string>();
      }
    } else if (t.contains("source")) {
      s += " " + t["source"].get<std::string>();
    }
    s += "\n";
  }
  if (d["checked"].get<int>() == 0)
    s += "data check: not checked (no output has a simple double reference)\n";
  else
    s += std::string("data check: ") + (d["all_pass"].get<bool>() ? "PASS" : "FAIL") + "\n";
  return s;
}

int cmd_run(Args a) {
  if (a.help) {
    std::fputs(kRunHelp, stdout);
    return 0;
  }
  allow_only(a, {"--config", "-p", "--json", "--out", "--trace", "--debug", "--no-trace", "--dump-plan", "--no-data", "--seed",
                 "--input", "--repeat", "--host-times"});
  check_no_trace(a);
  if (a.positional.size() != 1) throw InputError("run: name one bundle directory (see --help)");
  if (!a.config_given) a.sim.config_file = default_config_path();
  // Options that only data uses: refused with --no-data rather than ignored.
  if (a.no_data)
    for (const char* o : {"--input", "--seed"})
      if (a.given.count(o)) throw InputError(std::string(o) + " needs data on (drop --no-data)");
  namespace fs = std::filesystem;
  const fs::path bdir(a.positional[0]);
  {
    std::error_code ec;
    const std::string ext = bdir.extension().string();
    // A bundle's launch text may be named directly (bundle.mlir, bundle.mlir.ref, any *.mlir).
    if (fs::is_regular_file(bdir, ec) && ext != ".mlir" && ext != ".ref")
      throw InputError("run: '" + bdir.string() + "' is a file, not a bundle directory (nor a bundle.mlir)");
  }
  std::vector<fs::path> reads;  // every file this run reads: no output may be one of them
  Simulation sim(resolve_config(a.sim, &reads), !a.trace_file.empty() || !a.out_dir.empty(), a.no_trace);
  Card& card = sim.top_as<Card>();
  const plan::CardParams params = plan_card_params(card);
  bundle::CardLimits limits;
  limits.cores = params.cores;
  if (!card.cores().empty()) {
    limits.lx_bytes = card.core(0).lx_size();
    limits.lx_reserved = card.core(0).lx_size() - card.core(0).lx_usable();
  }
  using host_clock = std::chrono::steady_clock;
  const auto t_load = host_clock::now();
  auto seconds_since = [](host_clock::time_point t) { return std::chrono::duration<double>(host_clock::now() - t).count(); };
  google::protobuf::Arena arena;  // the plan's messages (see plan::lower)
  plan::Plan& p = *google::protobuf::Arena::CreateMessage<plan::Plan>(&arena);
  bundle::LoadedBundle lb;
  bundle::Bindings bindings;
  std::vector<bundle::ResolvedExecution> resolved;
  std::optional<OutputGuard> guard;
  try {
    lb = bundle::load_bundle(a.positional[0], limits);
    {
      std::error_code ec;
      const bool is_dir = fs::is_directory(bdir, ec);
      const fs::path ref = is_dir ? bdir / bundle::k_bundle_ref : bdir;  // the ref, if there is one
      const bool has_ref = ref.filename() == bundle::k_bundle_ref && fs::exists(ref, ec);
      if (has_ref) reads.push_back(ref);
      reads.push_back(is_dir || has_ref ? bundle::bundle_mlir_path(lb.dir) : bdir);
      for (const auto& [file, _] : lb.sdscs) reads.push_back(lb.dir / file);
    }
    for (const auto& spec : a.inputs)
      if (auto eq = spec.find('='); eq != std::string::npos) reads.emplace_back(spec.substr(eq + 1));
    guard.emplace(a, reads);
    bindings = plan::default_bindings(lb);
    resolved = bundle::resolve(lb, bindings, limits);
    // Every HBM tensor's per-core start addresses must fit one tensor in its stick layout, timed
    // or computed: a bundle the data run refuses is not timed either (nor compiled by
    // dxp_standalone, which checks the same).
    if (a.no_data) exec::kernel_tensors(lb, resolved, bindings);
    plan::lower(lb, resolved, params, p);
  } catch (const bundle::LoadError& e) {
    throw InputError(with_bundle_path(a.positional[0], e.what()));
  } catch (const exec::ExecError& e) {
    throw InputError(with_bundle_path(a.positional[0], e.what()));
  } catch (const plan::LowerError& e) {
    throw InputError(e.what());
  }
  if (!a.dump_plan.empty()) {
    std::ofstream out(a.dump_plan, std::ios::binary | std::ios::trunc);
    out << plan::to_text(p);
    if (!out) throw InputError("--dump-plan: cannot write '" + a.dump_plan + "'");
  }
  const double load_lower_s = seconds_since(t_load);
  nlohmann::json data;
  if (!a.no_data) data = run_data(a, lb, resolved, bindings, limits, *guard);
  // Back to back on one card: the median run stands for the kernel (a card is timed the same way).
  std::vector<PlanResult> runs;
  runs.reserve(a.repeat);
  const auto t_sim = host_clock::now();
  for (uint32_t i = 0; i < a.repeat; ++i) runs.push_back(run_plan(card, p));
  const double sim_s = seconds_since(t_sim);
  std::vector<size_t> order(runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return runs[x].kernel_ps < runs[y].kernel_ps; });
  const size_t median = order[(order.size() - 1) / 2];
  const PlanResult& r = runs[median];
  nlohmann::json j = r.to_json();
  if (a.repeat > 1) {
    nlohmann::json times = nlohmann::json::array();
    for (const PlanResult& x : runs) times.push_back(x.kernel_ps / 1e6);
    j["repeat"] = {{"runs", a.repeat},
                   {"median_run", median + 1},
                   {"kernel_times_us", times},
                   {"min_us", runs[order.front()].kernel_ps / 1e6},
                   {"max_us", runs[order.back()].kernel_ps / 1e6}};
  }
  if (!a.no_data) j["data"] = data;
  // Host seconds of the timing side (with data, data.host has the data side's): only when asked,
  // so that the output is otherwise the same byte for byte on every run.
  if (a.host_times)
    j["host"] = {{"load_lower_seconds", load_lower_s},
                 {"simulate_seconds", sim_s},
                 {"sim_over_host", sim_s > 0 ? r.kernel_ps / 1e12 * a.repeat / sim_s : 0.0}};
  j["bundle"] = a.positional[0];
  j["config"] = a.sim.config_file;
  if (!a.out_dir.empty()) guard->finish(sim.write_outputs(a.out_dir, {{"run", j}}));
  if (!a.trace_file.empty()) sim.trace()->write(a.trace_file);
  if (a.json) std::cout << j.dump(2) << "\n";
  else {
    std::cout << "run " << a.positional[0] << " on " << a.sim.config_file << "\n";
    std::cout << format_result(r);
    if (a.host_times) {
      char buf[256];
      std::snprintf(buf, sizeof buf, "host             load and lower %.3f s, simulate %.3f s (simulated / host time %.3g)\n",
                    j["host"]["load_lower_seconds"].get<double>(), j["host"]["simulate_seconds"].get<double>(),
                    j["host"]["sim_over_host"].get<double>());
      std::cout << buf;
    }
    if (a.repeat > 1) {
      char buf[256];
      std::snprintf(buf, sizeof buf, "repeat           %u runs back to back: first %.3f us, min %.3f, max %.3f; above: run %zu, the median\n",
                    a.repeat, runs.front().kernel_ps / 1e6, runs[order.front()].kernel_ps / 1e6,
                    runs[order.back()].kernel_ps / 1e6, median + 1);
      std::cout << buf;
      // Every run's time (up to 1000 runs: the README promises them), ten to a line.
      for (size_t i = 0; i < runs.size(); ++i) {
        std::snprintf(buf, sizeof buf, "%s%.3f", i % 10 == 0 ? (i ? "\n                 " : "runs us          ") : " ",
                      runs[i].kernel_ps / 1e6);
        std::cout << buf;
      }
      std::cout << "\n";
    }
    if (!a.no_data) std::cout << format_data(data);
  }
  return 0;
}

int run(int argc, char** argv) {
  Args a = parse_args(argc, argv);
  // Timing only: no GEMM in this process, so OpenBLAS's spinning worker threads go at once.
  if (a.command == "describe" || a.command == "probe" || (a.command == "run" && a.no_data)) ops::release_blas_threads();
  if (!a.debug.empty()) enable_debug(a.debug, "--debug");
  if (const char* env = std::getenv("VSPYRE_DEBUG"); env && *env) enable_debug(env, "VSPYRE_DEBUG");
  if (a.version) {  // whatever else the line says, as `vspyre run --version` always did
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
    const int code = vspyre::run(argc, argv);
    // What was printed must have arrived: a full disk or a closed pipe behind stdout (`> /dev/full`)
    // would otherwise lose the results with exit code 0. (std::cout writes through C's stdout.)
    std::cout.flush();
    if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) {
      std::fprintf(stderr, "vspyre: error: writing standard output failed: %s\n", std::strerror(errno ? errno : EIO));
      return 1;
    }
    return code;
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
