// The `vspyre` command line: --version, --help on each command, describe, probe pt, config errors
// and exit codes (0 ok, 1 bad input with one clear stderr line, 2 internal error). Runs the real
// binary ($VSPYRE_BIN) with stdout and stderr captured separately.
#include "catch.h"
#include "test_files.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/engine/component.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

using vspyre::testing::slurp;

// Under AddressSanitizer, SystemC's user-level threads make ASan print a three-line notice on
// the first exception thrown after the kernel has switched stacks (google/sanitizers#189). It is
// not vspyre's output; drop exactly those lines so the one-line-error checks still hold.
std::string strip_asan_notice(const std::string& s) {
  std::string out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("==", 0) == 0 && line.find("ASan is ignoring requested __asan_handle_no_return") != std::string::npos) continue;
    if (line == "False positive error reports may follow") continue;
    if (line == "For details see https://github.com/google/sanitizers/issues/189") continue;
    out += line + "\n";
  }
  return out;
}

size_t lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

using vspyre::testing::TempDir;

struct Result {
  int code = -1;
  std::string out, err;
};

std::string bin() {
  const char* b = std::getenv("VSPYRE_BIN");
  REQUIRE(b != nullptr);
  REQUIRE(fs::exists(b));
  return b;
}

// Runs vspyre with `args` (each quoted for the shell); `env` is prepended as VAR=value pairs.
Result run(const std::vector<std::string>& args, const std::string& env = "") {
  TempDir t;
  std::string cmd = env.empty() ? "" : env + " ";
  cmd += quote(bin());
  for (const auto& a : args) cmd += " " + quote(a);
  const fs::path out = t.dir / "stdout", err = t.dir / "stderr";
  cmd += " >" + quote(out.string()) + " 2>" + quote(err.string()) + " </dev/null";
  const int status = std::system(cmd.c_str());
  Result r;
  REQUIRE(status != -1);
  REQUIRE(WIFEXITED(status));
  r.code = WEXITSTATUS(status);
  r.out = slurp(out);
  r.err = strip_asan_notice(slurp(err));
  UNSCOPED_INFO("command: " << cmd << "\nexit: " << r.code << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
  return r;
}

// A bad-input failure: exit 1, nothing on stdout, exactly one stderr line that says `message`.
void check_input_error(const Result& r, const std::string& message) {
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(lines(r.err) == 1);
  CHECK(r.err.rfind("vspyre: error: ", 0) == 0);
  CHECK(contains(r.err, message));
}

std::string config_path(const std::string& rel) {
  return (fs::path(VSPYRE_SOURCE_DIR) / "configs" / rel).string();
}

const json* find_type(const json& describe, const std::string& type) {
  for (const auto& t : describe)
    if (t["type"] == type) return &t;
  return nullptr;
}

const json* find_param(const json& type, const std::string& name) {
  for (const auto& p : type["parameters"])
    if (p["name"] == name) return &p;
  return nullptr;
}

}  // namespace

TEST_CASE("cli: --version prints the version and exits 0", "[cli]") {
  const Result r = run({"--version"});
  CHECK(r.code == 0);
  CHECK(r.out == std::string("vspyre ") + VSPYRE_VERSION + " (SystemC " + sc_core::sc_release() + ")\n");
  CHECK(r.err.empty());
}

TEST_CASE("cli: --help prints usage on stdout and exits 0", "[cli]") {
  const Result r = run({"--help"});
  CHECK(r.code == 0);
  CHECK(r.out.rfind("usage: vspyre <command>", 0) == 0);
  CHECK(contains(r.out, "describe"));
  CHECK(contains(r.out, "probe"));
  CHECK(contains(r.out, "--version"));
  CHECK(r.err.empty());
  const Result h = run({"-h"});
  CHECK(h.code == 0);
  CHECK(h.out == r.out);
}

TEST_CASE("cli: no command prints usage on stderr and exits 1", "[cli]") {
  const Result r = run({});
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("usage: vspyre <command>", 0) == 0);
}

TEST_CASE("cli: describe --help and probe --help describe their options", "[cli]") {
  const Result d = run({"describe", "--help"});
  CHECK(d.code == 0);
  CHECK(d.out.rfind("usage: vspyre describe", 0) == 0);
  CHECK(contains(d.out, "--config FILE"));
  CHECK(contains(d.out, "--json"));
  CHECK(d.err.empty());
  const Result p = run({"probe", "--help"});
  CHECK(p.code == 0);
  CHECK(p.out.rfind("usage: vspyre probe", 0) == 0);
  for (const char* w : {"memory", "ring", "pcie", "pt", "--out DIR", "--trace FILE", "--debug FLAGS", "-p key.path=value"})
    CHECK(contains(p.out, w));
  CHECK(p.err.empty());
  // --help wins over everything else on the line, including a probe name.
  const Result pp = run({"probe", "pt", "--help"});
  CHECK(pp.code == 0);
  CHECK(pp.out == p.out);
}

TEST_CASE("cli: unknown command fails with exit 1 and suggests the right one", "[cli]") {
  check_input_error(run({"describ"}),
                    "unknown command 'describ' (commands: describe, probe, run, sweep, validate; see --help); did you mean 'describe'?");
  const Result far = run({"simulate"});
  check_input_error(far, "unknown command 'simulate'");
  CHECK_FALSE(contains(far.err, "did you mean"));
}

TEST_CASE("cli: unknown option and missing option argument fail with exit 1", "[cli]") {
  check_input_error(run({"describe", "--frobnicate"}), "unknown option '--frobnicate' (see --help)");
  check_input_error(run({"describe", "--config"}), "--config: expects a config file");
  check_input_error(run({"probe", "pt", "-p"}), "-p: expects key.path=value");
  check_input_error(run({"probe", "pt", "--out"}), "--out: expects a directory");
}

TEST_CASE("cli: an option a command does not use, or a stray argument, is refused, not ignored", "[cli]") {
  check_input_error(run({"probe", "pt", "--repeat", "5"}),
                    "probe: option --repeat does not apply (options: --config, --debug, --json, --no-trace, --out, --trace, -p; see --help)");
  check_input_error(run({"probe", "pt", "--no-data"}), "probe: option --no-data does not apply");
  check_input_error(run({"probe", "pt", "--seed", "5"}), "probe: option --seed does not apply");
  check_input_error(run({"describe", "--out", "x"}), "describe: option --out does not apply");
  check_input_error(run({"describe", "memory"}), "describe: takes no arguments, got 'memory' (see --help)");
  check_input_error(run({"probe", "memory", "extra"}), "probe: one probe at a time, got 'memory' and 'extra' (see --help)");
  check_input_error(run({"probe", "ring", "-p", "card.core.count=1"}),
                    "probe ring: the card has 1 core; the ring probe needs 2 or more (card.core.count)");
  check_input_error(run({"probe", "pcie", "-p", "card.host_link.lanes=3"}),
                    "card.host_link.lanes: 3 is not a PCIe link width (1, 2, 4, 8, 12, 16 or 32)");
  // Each command's own options, in both spellings of -p and --config.
  CHECK(run({"probe", "pt", "-c", config_path("spyre.yaml"), "-pcard.core.lx.size=1MiB", "--json"}).code == 0);
}

TEST_CASE("cli: a bad bundle's error names its file by the path the user can open", "[cli]") {
  // The loader names files as the bundle does ("sdsc_0.json: /: invalid JSON"): with many bundles
  // in flight the user could not tell which.
  TempDir t;
  const fs::path b = t.dir / "k1";
  fs::copy(fs::path(VSPYRE_SOURCE_DIR) / "tests" / "fixtures" / "bundles" / "neg_2048x1024_c32", b);
  const std::string sdsc = slurp(b / "sdsc_0.json");
  { std::ofstream(b / "sdsc_0.json") << sdsc.substr(0, 100); }
  check_input_error(run({"run", b.string(), "--no-data"}), (b / "sdsc_0.json").string() + ": /: invalid JSON");
  { std::ofstream(b / "sdsc_0.json") << sdsc; }
  const std::string mlir = slurp(b / "bundle.mlir");
  { std::ofstream(b / "bundle.mlir") << mlir.substr(0, 300); }
  check_input_error(run({"run", b.string(), "--no-data"}), (b / "bundle.mlir").string() + ":4: ");
}

TEST_CASE("cli: a component's size or type error names what the user set", "[cli]") {
  // lx.size 0 blamed lx.reserved; a core made an Lpddr5 blamed spyre.yaml's clock line alone.
  check_input_error(run({"probe", "pt", "-p", "card.core.lx.size=0B"}),
                    "card.core.lx.size: must be a positive multiple of 128B, got 0 B");
  check_input_error(run({"probe", "pt", "-p", "card.core.lx.pt_line=200B"}),
                    "card.core.lx.pt_line: must be a positive multiple of 128B, got 200 B");
  check_input_error(run({"probe", "pt", "-p", "card.core.lx.reserved=2MiB"}),
                    "card.core.lx.reserved (-p card.core.lx.reserved=2MiB) and lx.size (" + config_path("spyre.yaml") + ":");
  check_input_error(run({"probe", "pt", "-p", "card.core.lx.reserved=2MiB"}),
                    "): the reserved part must be smaller than LX (2MiB reserved of 2MiB)");
  check_input_error(run({"probe", "pt", "-p", "card.core.type=Lpddr5"}),
                    "[card.core_0 is a Lpddr5, the type set at -p card.core.type=Lpddr5; its usual type is Core]");
}

TEST_CASE("cli: run never writes over a file it reads, and finds an unwritable output before it runs", "[cli]") {
  TempDir t;
  const fs::path b = t.dir / "b";
  fs::copy(fs::path(VSPYRE_SOURCE_DIR) / "tests" / "fixtures" / "bundles" / "neg_2048x1024_c32", b);
  const std::string sdsc = slurp(b / "sdsc_0.json"), mlir = slurp(b / "bundle.mlir");
  // A trace over the bundle's SDSC destroyed the bundle; a plan dump over its bundle.mlir too;
  // also with the bundle named by its bundle.mlir.
  check_input_error(run({"run", b.string(), "--no-data", "--trace", (b / "sdsc_0.json").string()}),
                    "--trace: '" + (b / "sdsc_0.json").string() + "' is a file this run reads; it would be overwritten");
  check_input_error(run({"run", b.string(), "--no-data", "--dump-plan", (b / "." / "bundle.mlir").string()}),
                    "is a file this run reads; it would be overwritten");
  check_input_error(run({"run", (b / "bundle.mlir").string(), "--no-data", "--trace", (b / "sdsc_0.json").string()}),
                    "is a file this run reads");
  // The launch text a bundle.mlir.ref names, whether the directory or the ref itself is given.
  const fs::path k = t.dir / "k", launch = t.dir / "launch";
  fs::create_directories(k);
  fs::create_directories(launch);
  fs::copy_file(b / "sdsc_0.json", k / "sdsc_0.json");
  fs::copy_file(b / "bundle.mlir", launch / "bundle.mlir");
  { std::ofstream(k / "bundle.mlir.ref") << "# elsewhere\n../launch/bundle.mlir\n"; }
  for (const fs::path& given : {k, k / "bundle.mlir.ref"})
    check_input_error(run({"run", given.string(), "--no-data", "--trace", (launch / "bundle.mlir").string()}),
                      "is a file this run reads");
  check_input_error(run({"run", k.string(), "--no-data", "--trace", (k / "bundle.mlir.ref").string()}),
                    "is a file this run reads");
  // A config and what it includes, at any depth.
  const std::string inc = t.write("cfg/inc.yaml", "include: [" + config_path("spyre.yaml") + "]\n");
  const std::string cfg = t.write("cfg/card.yaml", "include: [inc.yaml]\n");
  check_input_error(run({"run", b.string(), "--no-data", "--config", cfg, "--trace", cfg}),
                    "--trace: '" + cfg + "' is a file this run reads");
  check_input_error(run({"probe", "pt", "--config", cfg, "--trace", inc}), "--trace: '" + inc + "' is a file this run reads");
  CHECK(run({"probe", "pt", "--config", cfg, "--out", (t.dir / "cfg").string()}).code == 0);  // beside them is fine
  CHECK(slurp(b / "sdsc_0.json") == sdsc);
  CHECK(slurp(b / "bundle.mlir") == mlir);
  CHECK(slurp(launch / "bundle.mlir") == mlir);
  // Other files in the bundle's directory are not inputs: a run may write its outputs there, again and again.
  for (int i = 0; i < 2; ++i) {
    CHECK(run({"run", b.string(), "--no-data", "--trace", (b / "t.json").string()}).code == 0);
    CHECK(run({"run", b.string(), "--no-data", "--out", b.string()}).code == 0);
  }
  // Found before the card runs (it was found after the whole simulation), and before --out is made.
  check_input_error(run({"run", b.string(), "--no-data", "--trace", (t.dir / "no" / "t.json").string()}),
                    "--trace: cannot write '" + (t.dir / "no" / "t.json").string() + "': no directory");
  check_input_error(run({"run", b.string(), "--no-data", "--dump-plan", t.dir.string()}), "is a directory, not a file");
  check_input_error(run({"run", b.string(), "--no-data", "--out", cfg}), "--out: '" + cfg + "' exists and is not a directory");
  check_input_error(run({"run", b.string(), "--no-data", "--trace", (t.dir / "x.json").string(), "--dump-plan",
                         (t.dir / "x.json").string()}),
                    "--dump-plan: '" + (t.dir / "x.json").string() + "' is also written by --trace");
  fs::create_symlink(t.dir / "nowhere" / "t.json", t.dir / "dangling.json");
  check_input_error(run({"run", b.string(), "--no-data", "--trace", (t.dir / "dangling.json").string()}),
                    "is a link to nothing");
  check_input_error(run({"probe", "pt", "--trace", (t.dir / "no" / "t.json").string()}), "--trace: cannot write");
  check_input_error(run({"run", (t.dir / "nosuch").string(), "--out", (t.dir / "o1").string()}), "nosuch");
  check_input_error(run({"probe", "pt", "--config", (t.dir / "nosuch.yaml").string(), "--out", (t.dir / "o2").string()}),
                    "nosuch.yaml");
  CHECK_FALSE(fs::exists(t.dir / "o1"));
  CHECK_FALSE(fs::exists(t.dir / "o2"));
  check_input_error(run({"run", b.string(), "--out", ""}), "--out: expected a directory, got ''");
  check_input_error(run({"run", b.string(), "--trace", ""}), "--trace: expected a file name, got ''");
  // A file that is not a bundle's launch text is not parsed as one.
  check_input_error(run({"run", cfg}), "run: '" + cfg + "' is a file, not a bundle directory (nor a bundle.mlir)");
  CHECK(run({"run", (b / "bundle.mlir").string(), "--no-data", "--trace", (t.dir / "t.json").string()}).code == 0);
  CHECK(fs::exists(t.dir / "t.json"));
}

TEST_CASE("cli: the tensors' files in --out are outputs like the others", "[cli]") {
  TempDir t;
  const fs::path b = t.dir / "b";
  fs::copy(fs::path(VSPYRE_SOURCE_DIR) / "tests" / "fixtures" / "bundles" / "neg_2048x1024_c32", b);
  const std::string sdsc = slurp(b / "sdsc_0.json");
  // A link in --out to a file the run reads was written through.
  fs::create_directories(t.dir / "o3");
  fs::create_symlink(b / "sdsc_0.json", t.dir / "o3" / "arg0_input.npy");
  check_input_error(run({"run", b.string(), "--out", (t.dir / "o3").string()}), "is a file this run reads");
  CHECK(slurp(b / "sdsc_0.json") == sdsc);
  // A tensor's file and --trace or --dump-plan on one file: one was lost.
  check_input_error(run({"run", b.string(), "--out", (t.dir / "o5").string(), "--trace", (t.dir / "o5" / "arg0_input.npy").string()}),
                    "is also written by --trace");
  // The same file spelt relative and absolute.
  check_input_error(run({"run", b.string(), "--no-data", "--trace", "t1.json", "--dump-plan", (fs::current_path() / "t1.json").string()}),
                    "is also written by --trace");
  fs::remove(fs::current_path() / "t1.json");
  // An --input in --out under a name the run does not write is fine (neg writes arg0_input and arg1_output).
  const Result first = run({"run", b.string(), "--out", (t.dir / "o1").string()});
  REQUIRE(first.code == 0);
  fs::copy_file(t.dir / "o1" / "arg0_input.npy", t.dir / "o1" / "arg2_output.npy");
  CHECK(run({"run", b.string(), "--out", (t.dir / "o1").string(), "--input", "arg0=" + (t.dir / "o1" / "arg2_output.npy").string()}).code == 0);
  check_input_error(run({"run", b.string(), "--out", (t.dir / "o1").string(), "--input", "arg0=" + (t.dir / "o1" / "arg0_input.npy").string()}),
                    "arg0_input.npy' is a file this run reads");
  // A run that fails leaves no --out behind.
  check_input_error(run({"run", b.string(), "--out", (t.dir / "onew").string(), "--input", "zzz=x.npy"}), "is not a kernel input");
  check_input_error(run({"run", b.string(), "--out", (t.dir / "onew").string(), "--input", "arg0=" + (t.dir / "nosuch.npy").string()}),
                    "nosuch.npy");
  CHECK_FALSE(fs::exists(t.dir / "onew"));
}

TEST_CASE("cli: options that only data uses are refused with --no-data, and --version answers anywhere", "[cli]") {
  const std::string f = (fs::path(VSPYRE_SOURCE_DIR) / "tests" / "fixtures" / "bundles" / "neg_2048x1024_c32").string();
  check_input_error(run({"run", f, "--no-data", "--seed", "5"}), "--seed needs data on (drop --no-data)");
  // --host-times reports the timing side's host seconds too, so it goes with --no-data; without it
  // the output has no host seconds at all.
  const Result h = run({"run", f, "--no-data", "--host-times", "--json"});
  REQUIRE(h.code == 0);
  const json hj = json::parse(h.out);
  CHECK(hj["host"]["simulate_seconds"].get<double>() > 0);
  CHECK(hj["host"]["load_lower_seconds"].get<double>() > 0);
  CHECK(hj["host"]["sim_over_host"].get<double>() > 0);
  CHECK_FALSE(json::parse(run({"run", f, "--no-data", "--json"}).out).contains("host"));
  CHECK(contains(run({"run", f, "--no-data", "--host-times"}).out, "host             load and lower "));
  check_input_error(run({"run", f, "--no-data", "--input", "arg0=x.npy"}), "--input needs data on (drop --no-data)");
  for (const char* cmd : {"run", "describe", "probe"}) {
    const Result v = run({cmd, "--version"});
    CHECK(v.code == 0);
    CHECK(v.out.rfind(std::string("vspyre ") + VSPYRE_VERSION, 0) == 0);
  }
}

TEST_CASE("cli: describe lists every registered type and every parameter", "[cli]") {
  const Result r = run({"describe", "--json"});
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  const json j = json::parse(r.out);
  REQUIRE(j.is_array());
  std::set<std::string> types;
  for (const auto& t : j) types.insert(t["type"].get<std::string>());
  auto names = vspyre::Registry::instance().names();
  names.push_back("Simulation");  // the sim: settings, first
  CHECK(types == std::set<std::string>(names.begin(), names.end()));
  CHECK(j[0]["type"] == "Simulation");
  for (const char* t : {"Card", "Core", "Ring", "Lpddr5", "PcieLink"}) CHECK(types.count(t) == 1);
  // Every parameter a config can set is listed: sim.quantum, and the core count (a key's count:).
  REQUIRE(find_param(j[0], "quantum"));  // relative to example_path "sim", as every type's
  CHECK(j[0]["example_path"] == "sim");
  const json* count = find_param(*find_type(j, "Card"), "core.count");
  REQUIRE(count);
  CHECK((*count)["value"] == "32");
  CHECK((*count)["value_source"] == "IBM: 32 cores per card");
  for (const auto& t : j) {
    INFO(t["type"].get<std::string>());
    CHECK_FALSE(t["description"].get<std::string>().empty());
    REQUIRE(t["parameters"].is_array());
    CHECK_FALSE(t["parameters"].empty());
    for (const auto& p : t["parameters"]) {
      INFO(p.dump());
      for (const char* k : {"name", "kind", "default", "provenance", "description"}) CHECK(p.contains(k));
      CHECK(p.contains("value"));  // the default card's (no config given)
      const std::string prov = p["provenance"];
      CHECK((prov == "datasheet" || prov == "measured" || prov == "derived" || prov == "estimate" ||
             prov == "override"));
    }
  }
  const json* core = find_type(j, "Core");
  REQUIRE(core);
  CHECK((*core)["example_path"] == "card.core_0");
  const json* lx = find_param(*core, "lx.size");
  REQUIRE(lx);
  CHECK((*lx)["kind"] == "size");
  CHECK((*lx)["default"] == "2MiB");
  CHECK((*lx)["provenance"] == "datasheet");
  const json* clock = find_param(*core, "clock");
  REQUIRE(clock);
  CHECK((*clock)["kind"] == "frequency");
  CHECK((*clock)["default"] == "1.5GHz");
  const json* ring = find_type(j, "Ring");
  REQUIRE(ring);
  REQUIRE(find_param(*ring, "hop_latency"));
  CHECK((*find_param(*ring, "hop_latency"))["kind"] == "time");
  const json* mem = find_type(j, "Lpddr5");
  REQUIRE(mem);
  REQUIRE(find_param(*mem, "capacity"));
  CHECK((*find_param(*mem, "capacity"))["default"] == "128GB");

  // The table lists the same types and parameters, one row each with kind, default, provenance.
  const Result text = run({"describe"});
  REQUIRE(text.code == 0);
  CHECK(text.out.rfind(std::string("vspyre ") + VSPYRE_VERSION, 0) == 0);
  for (const auto& t : j) {
    CHECK(contains(text.out, "\n" + t["type"].get<std::string>() + ": " + t["description"].get<std::string>() + "\n"));
    for (const auto& p : t["parameters"]) CHECK(contains(text.out, "  " + p["name"].get<std::string>() + " "));
  }
  std::istringstream in(text.out);
  std::string line;
  bool found = false;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string name, kind, def, prov;
    row >> name >> kind >> def >> prov;
    if (name == "lx.size") {
      found = true;
      CHECK(kind == "size");
      CHECK(def == "2MiB");
      CHECK(prov == "datasheet");
    }
  }
  CHECK(found);
}

TEST_CASE("cli: describe --config shows the config's values and provenance", "[cli]") {
  const Result r = run({"describe", "--config", config_path("whatif/lx_4mib.yaml"), "--json"});
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  const json* core = find_type(j, "Core");
  REQUIRE(core);
  const json* lx = find_param(*core, "lx.size");
  REQUIRE(lx);
  CHECK((*lx)["value"] == "4MiB");
  CHECK((*lx)["default"] == "2MiB");
  CHECK((*lx)["value_provenance"] == "override");
  CHECK((*lx)["value_source"] == "what-if");
  const json* reserved = find_param(*core, "lx.reserved");
  REQUIRE(reserved);
  CHECK((*reserved)["value"] == "64KiB");
  CHECK((*reserved)["value_provenance"] == "measured");
  // Types the config does not use still appear, with their defaults as values.
  CHECK(find_type(j, "Card") != nullptr);

  const Result text = run({"describe", "--config", config_path("whatif/lx_4mib.yaml")});
  REQUIRE(text.code == 0);
  CHECK(contains(text.out, "config: " + config_path("whatif/lx_4mib.yaml") + "\n"));
  bool found = false;
  std::istringstream in(text.out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string name, kind, value, prov;
    row >> name >> kind >> value >> prov;
    if (name != "lx.size") continue;
    found = true;
    CHECK(value == "4MiB");
    CHECK(prov == "override");
    CHECK(contains(line, "(default 2MiB)"));
    // The source of the value shown (the what-if's), not the code's for its default.
    CHECK(contains(line, "[what-if]"));
    CHECK_FALSE(contains(line, "IBM"));
  }
  CHECK(found);
}

TEST_CASE("cli: -p overrides reach describe in both spellings, with or without --config", "[cli]") {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"describe", "--json", "-p", "card.core.lx.size=1MiB", "--config",
                                 config_path("spyre.yaml")},
        std::vector<std::string>{"describe", "--json", "-pcard.core.lx.size=1MiB", "-c", config_path("spyre.yaml")},
        std::vector<std::string>{"describe", "--json", "-p", "card.core.lx.size=1MiB"}}) {
    const Result r = run(args);
    REQUIRE(r.code == 0);
    const json j = json::parse(r.out);
    const json* lx = find_param(*find_type(j, "Core"), "lx.size");
    REQUIRE(lx);
    CHECK((*lx)["value"] == "1MiB");
    CHECK((*lx)["value_provenance"] == "override");
    CHECK((*lx)["value_source"] == "-p card.core.lx.size=1MiB");
  }
}

TEST_CASE("cli: describe without --config describes the default card, and its defaults are that card's", "[cli]") {
  // As run and probe: the default card's values. And a config that does not include spyre.yaml
  // starts from the code's defaults, which are the default card's: a partial config changes what
  // it names and nothing else (launch_overhead was 15us in the code and 1us on the card).
  const Result r = run({"describe", "--json"});
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  int params = 0;
  for (const auto& t : j)
    for (const auto& p : t["parameters"]) {
      INFO(t["type"].get<std::string>() << " " << p.dump());
      ++params;
      // Numbers the config writes 1.0 and the code 1: the same value.
      const std::string v = p["value"], d = p["default"];
      const bool same_number = !v.empty() && !d.empty() && std::isdigit(static_cast<unsigned char>(v[0])) &&
                               std::isdigit(static_cast<unsigned char>(d[0])) &&
                               v.find_first_not_of("0123456789.e+-") == std::string::npos &&
                               std::stod(v) == std::stod(d);
      CHECK((v == d || same_number));
    }
  CHECK(params > 50);
}

TEST_CASE("cli: every YAML file under configs/ loads (one process each)", "[cli]") {
  const fs::path configs = fs::path(VSPYRE_SOURCE_DIR) / "configs";
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(configs)) {
    if (!e.is_regular_file() || (e.path().extension() != ".yaml" && e.path().extension() != ".yml")) continue;
    // Sweep files describe many cards, not one; the sweep tool and its tests read them.
    if (e.path().parent_path().filename() == "sweeps") continue;
    ++files;
    INFO(e.path().string());
    const Result r = run({"describe", "--config", e.path().string(), "--json"});
    CHECK(r.code == 0);
    CHECK(r.err.empty());
    if (r.code != 0) continue;
    const json j = json::parse(r.out);
    CHECK(find_type(j, "Core") != nullptr);
    CHECK(find_type(j, "Card") != nullptr);
  }
  CHECK(files >= 8);
}

TEST_CASE("cli: a config with a misspelt key fails with exit 1, file and line, key and right name", "[cli]") {
  TempDir t;
  const std::string f = t.write("misspelt.yaml",
                                "# a what-if with a typo\n"
                                "include: [" + config_path("spyre.yaml") + "]\n"
                                "card:\n"
                                "  core:\n"
                                "    lx:\n"
                                "      sise: 4MiB\n");
  for (const char* cmd : {"describe", "probe"}) {
    std::vector<std::string> args{cmd};
    if (std::string(cmd) == "probe") args.push_back("pt");
    args.push_back("--config");
    args.push_back(f);
    const Result r = run(args);
    check_input_error(r, f + ":6:7: unknown key 'sise' in card.core.lx; did you mean 'size'?");
  }
}

TEST_CASE("cli: config error classes each give exit 1 and file:line:column", "[cli]") {
  TempDir t;
  // wrong type
  check_input_error(run({"describe", "--config", t.write("type.yaml", "card:\n  core:\n    corelets: two\n")}),
                    t.dir.string() + "/type.yaml:3:15: card.core.corelets: expected an integer, found 'two'");
  // missing value, short and long form
  check_input_error(run({"describe", "--config", t.write("nov.yaml", "card:\n  ring:\n    width:\n")}),
                    t.dir.string() + "/nov.yaml:3:5: card.ring.width: no value given (expected a size)");
  check_input_error(
      run({"describe", "--config", t.write("lf.yaml", "card:\n  ring:\n    width: {provenance: datasheet}\n")}),
      t.dir.string() + "/lf.yaml:3:12: card.ring.width: a parameter given as a map needs a 'value' key");
  // bad unit
  check_input_error(run({"describe", "--config", t.write("unit.yaml", "card:\n  core:\n    clock: 1.5GHzz\n")}),
                    t.dir.string() + "/unit.yaml:3:12: card.core.clock: '1.5GHzz' has unknown unit 'GHzz'");
  // YAML syntax
  check_input_error(run({"describe", "--config", t.write("syntax.yaml", "card: [\n")}),
                    t.dir.string() + "/syntax.yaml:2:1: YAML syntax error");
  // unknown component type
  check_input_error(run({"describe", "--config", t.write("ty.yaml", "card:\n  ring:\n    type: Rnig\n")}),
                    t.dir.string() + "/ty.yaml:3:11: card.ring.type: unknown component type 'Rnig'; did you mean 'Ring'?");
}

TEST_CASE("cli: missing config file and bad -p override fail with exit 1", "[cli]") {
  TempDir t;
  const std::string missing = (t.dir / "nope.yaml").string();
  check_input_error(run({"describe", "--config", missing}), missing + ": cannot open config file");
  check_input_error(run({"describe", "--config", t.dir.string()}), t.dir.string() + ": is a directory");
  check_input_error(run({"describe", "-p", "card.core.clok=2GHz"}),
                    "-p card.core.clok=2GHz: unknown key 'clok' in card.core; did you mean 'clock'?");
  check_input_error(run({"describe", "-p", "card.core.clock"}),
                    "-p card.core.clock: an override must look like key.path=value");
  check_input_error(run({"describe", "-p", "card.core.clock=3GHZ"}),
                    "-p card.core.clock=3GHZ: card.core.clock: '3GHZ' has unknown unit 'GHZ'");
}

TEST_CASE("cli: values that would hang a run or fill the host's memory are refused by name", "[cli]") {
  // Each of these ran before: a zero or negative data rate and a bin or port too slow for one
  // stick left the calendars looking for room forever (or growing until the kernel killed the
  // process); a zero row size divided by zero; a 1 Hz clock ran for hours; negative SFP cycles
  // gave negative compute times.
  check_input_error(run({"describe", "-p", "card.memory.data_rate_mtps=0"}),
                    "card.memory.data_rate_mtps: value 0 out of range [1, 1e+06]");
  check_input_error(run({"describe", "-p", "card.memory.data_rate_mtps=-1"}),
                    "card.memory.data_rate_mtps: value -1 out of range [1, 1e+06]");
  check_input_error(run({"describe", "-p", "card.memory.row_size=0B"}),
                    "card.memory.row_size (-p card.memory.row_size=0B) and interleave (" + config_path("spyre.yaml") + ":");
  check_input_error(run({"describe", "-p", "card.memory.row_size=0B"}),
                    "): a row (0 B) must be a positive multiple of the interleave (256 B)");
  check_input_error(run({"describe", "-p", "card.memory.bin=10ns"}),
                    "card.memory.bin: 10ns holds less than one 128 B stick's bus time on a channel (10ns at "
                    "data_rate_mtps 6400, less refresh's share): raise the bin or the data rate");
  check_input_error(run({"describe", "-p", "card.memory.bin=1ps"}), "card.memory.bin: 1ps holds less than one");
  check_input_error(run({"describe", "-p", "card.memory.bin=100ns", "-p", "card.memory.history=1s"}),
                    "card.memory.bin: 100ns against a history of 1s keeps more than 1048576 bins a channel");
  // No time on the card comes near a second: past it, simulated time overflowed (exit 2) or a
  // seeded jitter wrapped round to a plausible-looking kernel time.
  check_input_error(run({"describe", "-p", "card.memory.history=10s"}),
                    "card.memory.history: '10s' out of range [0, 1s]");
  check_input_error(run({"describe", "-p", "card.launch_overhead=2e7s"}),
                    "card.launch_overhead: '2e7s' out of range [0, 1s]");
  check_input_error(run({"describe", "-p", "card.launch_jitter=2e7s"}), "card.launch_jitter: '2e7s' out of range [0, 1s]");
  check_input_error(run({"describe", "-p", "card.core.dma.op_jitter=1e10s"}),
                    "card.core.dma.op_jitter: '1e10s' out of range [0, 1s]");
  check_input_error(run({"describe", "-p", "card.core.dma.issue_interval=2e6cycles"}),
                    "card.core.dma.issue_interval: '2e6cycles' out of range [0, 1e6cycles]");
  check_input_error(run({"describe", "-p", "card.memory.port_bandwidth=100MB/s"}),
                    "card.memory.port_bandwidth: a 128 B stick takes 1.28us at the port, longer than a calendar bin "
                    "(bin 1us): raise port_bandwidth or the bin");
  check_input_error(run({"describe", "-p", "card.core.clock=1Hz"}), "card.core.clock: '1Hz' out of range [1MHz, inf]");
  check_input_error(run({"describe", "-p", "card.ring.clock=500kHz"}),
                    "card.ring.clock: '500kHz' out of range [1MHz, inf]");
  check_input_error(run({"describe", "-p", "card.plan.sfp_cycles.simple=-1"}),
                    "card.plan.sfp_cycles.simple: value -1 out of range [0, inf]");
  // Before: SystemC's "uncaught exception" from an engine thread, exit 2.
  check_input_error(run({"probe", "memory", "-p", "card.memory.capacity=1GiB"}),
                    "probe memory: 32 cores x 256MiB regions need more than card.memory.capacity (1GiB)");
  // The edges themselves are fine.
  CHECK(run({"describe", "-p", "card.core.clock=1MHz", "-p", "card.memory.data_rate_mtps=100", "-p",
             "card.memory.port_bandwidth=200MB/s", "-p", "card.plan.sfp_cycles.simple=0", "-p",
             "card.launch_overhead=1s", "-p", "card.core.dma.issue_interval=1e6cycles"})
            .code == 0);
}

TEST_CASE("cli: an incomplete connect: list is bad input, not an internal error", "[cli]") {
  TempDir t;
  const std::string f = t.write("conn.yaml",
                                "card:\n  core: {count: 2}\n  connect:\n    - core_*.mem -> memory.port\n");
  check_input_error(run({"probe", "pt", "--config", f}),
                    f + ":4:5: card.connect: core_0.ring is not connected to anything");
  const std::string twice = t.write("twice.yaml",
                                    "card:\n  core: {count: 2}\n  connect:\n"
                                    "    - core_*.mem -> memory.port\n"
                                    "    - core_*.ring -> ring.port\n"
                                    "    - core_1.mem -> memory.port\n");
  check_input_error(run({"probe", "pt", "--config", twice}), twice + ":6:7: card.connect: core_1.mem is connected twice");
}

TEST_CASE("cli: probe without a name or with a misspelt name fails with exit 1", "[cli]") {
  check_input_error(run({"probe"}), "probe: name one probe: memory, ring, pcie or pt (see --help)");
  check_input_error(run({"probe", "rnig"}),
                    "probe: unknown probe 'rnig' (expected memory, ring, pcie or pt); did you mean 'ring'?");
}

TEST_CASE("cli: probe pt --json prints one JSON object on stdout", "[cli]") {
  const Result r = run({"probe", "pt", "--json"});
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  const json j = json::parse(r.out);  // nothing else on stdout (no SystemC banner)
  CHECK(j["probe"] == "pt");
  CHECK(j["config"] == config_path("spyre.yaml"));
  const Result text = run({"probe", "pt"});
  REQUIRE(text.code == 0);
  CHECK(text.out.rfind("probe pt on " + config_path("spyre.yaml") + "\n", 0) == 0);
}

TEST_CASE("cli: probe uses $VSPYRE_CONFIG as the default card", "[cli]") {
  const Result r = run({"probe", "pt", "--json"}, "VSPYRE_CONFIG=" + quote(config_path("whatif/cores_64.yaml")));
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out)["config"] == config_path("whatif/cores_64.yaml"));
  TempDir t;
  const std::string missing = (t.dir / "gone.yaml").string();
  check_input_error(run({"probe", "pt"}, "VSPYRE_CONFIG=" + quote(missing)), missing + ": cannot open config file");
}

TEST_CASE("cli: probe pt --out writes resolved config, stats tree and Perfetto trace", "[cli]") {
  TempDir t;
  const fs::path out = t.dir / "results";
  const Result r = run({"probe", "pt", "--config", config_path("whatif/cores_64.yaml"), "-p", "sim.quantum=60ns", "--out",
                        out.string()});
  REQUIRE(r.code == 0);
  REQUIRE(fs::exists(out / "config.resolved.yaml"));
  REQUIRE(fs::exists(out / "stats.json"));
  REQUIRE(fs::exists(out / "trace.json"));

  // Resolved config: includes merged, overrides applied, and it is a valid config on its own.
  const std::string resolved = slurp(out / "config.resolved.yaml");
  CHECK(resolved.rfind("# Fully resolved configuration, written by vspyre ", 0) == 0);
  CHECK_FALSE(contains(resolved, "include:"));
  CHECK(contains(resolved, "t_rcd:"));  // from the memory preset two includes down
  const Result again = run({"describe", "--json", "--config", (out / "config.resolved.yaml").string()});
  REQUIRE(again.code == 0);
  const json d = json::parse(again.out);
  CHECK((*find_param(*find_type(d, "Core"), "clock"))["value"] == "1.5GHz");

  // Stats: one tree keyed by object path.
  std::ifstream sin(out / "stats.json");
  const json s = json::parse(sin);
  CHECK(s["vspyre"]["version"] == VSPYRE_VERSION);
  CHECK(s["probe"]["probe"] == "pt");
  const json& card = s["stats"]["card"];
  CHECK(card["cores"].get<double>() == Approx(64));
  CHECK(card.contains("core_0"));
  CHECK(card.contains("core_63"));
  CHECK_FALSE(card.contains("core_64"));
  CHECK(card["core_0"]["macs"].get<double>() > 0);
  CHECK(s["units"].contains("card.core_7.macs"));
  CHECK(s["units"]["card.core_7.macs"]["unit"] == "MAC");

  // Trace: valid JSON, complete events with durations, process and thread names.
  std::ifstream tin(out / "trace.json");
  const json tr = json::parse(tin);
  REQUIRE(tr["traceEvents"].is_array());
  std::map<int, std::string> processes;
  std::set<std::pair<int, int>> threads;
  int complete = 0;
  for (const auto& e : tr["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") processes[e["pid"].get<int>()] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "thread_name") threads.insert({e["pid"].get<int>(), e["tid"].get<int>()});
    if (e["ph"] == "X") {
      ++complete;
      CHECK(e["dur"].get<double>() >= 0);
      CHECK(e["ts"].get<double>() >= 0);
      CHECK(processes.count(e["pid"].get<int>()) == 1);  // metadata comes first
      CHECK(threads.count({e["pid"].get<int>(), e["tid"].get<int>()}) == 1);
    }
  }
  CHECK(complete > 0);
  CHECK_FALSE(processes.empty());
}

TEST_CASE("cli: probe pt --trace writes a Perfetto trace file", "[cli]") {
  TempDir t;
  const fs::path trace = t.dir / "pt.json";
  const Result r = run({"probe", "pt", "-p", "card.core.count=2", "--trace", trace.string()});
  REQUIRE(r.code == 0);
  std::ifstream in(trace);
  REQUIRE(in);
  const json tr = json::parse(in);
  int complete = 0, meta = 0;
  for (const auto& e : tr["traceEvents"]) {
    complete += e["ph"] == "X";
    meta += e["ph"] == "M";
  }
  CHECK(complete > 0);
  CHECK(meta > 0);
  CHECK(tr["displayTimeUnit"] == "ns");
}

TEST_CASE("cli: --out into an impossible place fails with exit 1", "[cli]") {
  TempDir t;
  const std::string file = t.write("plain", "x");
  check_input_error(run({"probe", "pt", "-p", "card.core.count=2", "--out", file + "/sub"}),
                    "--out: cannot create '" + file + "/sub': ");
}

TEST_CASE("cli: --debug switches named flags on and rejects unknown ones", "[cli]") {
  const Result on = run({"probe", "pt", "-p", "card.core.count=2", "--debug", "core"});
  CHECK(on.code == 0);
  CHECK(contains(on.err, "[core] "));
  CHECK_FALSE(contains(on.err, "[lpddr5] "));
  const Result off = run({"probe", "pt", "-p", "card.core.count=2"});
  CHECK(off.code == 0);
  CHECK_FALSE(contains(off.err, "[core] "));
  const Result bad = run({"probe", "pt", "--debug", "cores"});
  check_input_error(bad, "--debug: unknown flag 'cores' (flags: ");
  CHECK(contains(bad.err, "core"));
  CHECK(contains(bad.err, "all)"));
  CHECK(contains(bad.err, "did you mean 'core'?"));
  const Result env = run({"probe", "pt", "-p", "card.core.count=2"}, "VSPYRE_DEBUG=core");
  CHECK(env.code == 0);
  CHECK(contains(env.err, "[core] "));
  check_input_error(run({"describe"}, "VSPYRE_DEBUG=nosuchflag"), "VSPYRE_DEBUG: unknown flag 'nosuchflag'");
}

TEST_CASE("cli: a what-if or preset with the flow model keeps both, in either order", "[cli]") {
  // configs/spyre_flow.yaml and the LPDDR5X what-if both include spyre.yaml, and the preset used
  // to carry the request model's write_batch: combined, the later file undid the earlier one
  // (LPDDR5X lost, or the flow model's write_batch lost) and neg 2048x4096 ran anywhere from 229 to
  // 345 us. Now every order is the same card: LPDDR5X timings and the flow model's parameters.
  TempDir t;
  std::vector<std::string> memory;
  const std::vector<std::vector<std::string>> orders = {{"whatif/lpddr5x_8533.yaml", "spyre_flow.yaml"},
                                                        {"spyre_flow.yaml", "whatif/lpddr5x_8533.yaml"},
                                                        {"spyre_flow.yaml", "presets/lpddr5x_8533.yaml"}};
  for (const auto& files : orders) {
    std::string text = "include: [";
    for (const auto& f : files) text += (&f == &files.front() ? "\"" : ", \"") + config_path(f) + "\"";
    const std::string f = t.write("c.yaml", text + "]\n");
    const Result r = run({"describe", "--json", "--config", f});
    REQUIRE(r.code == 0);
    const json j = json::parse(r.out);
    const json* mem = find_type(j, "Lpddr5");
    REQUIRE(mem);
    std::string values;
    for (const char* k : {"data_rate_mtps", "t_rl", "write_batch", "reorder_rows", "reorder_window", "t_hide",
                          "coalesce_window"}) {
      const json* p = find_param(*mem, k);
      REQUIRE(p);
      values += std::string(k) + "=" + (*p)["value"].get<std::string>() + " ";
    }
    INFO(text << " -> " << values);
    CHECK(contains(values, "data_rate_mtps=8533 "));
    CHECK(contains(values, "write_batch=384B "));
    memory.push_back(values);
  }
  CHECK(memory[0] == memory[1]);
  CHECK(memory[1] == memory[2]);
}

TEST_CASE("cli: --no-trace leaves trace.json out of --out, and goes only with --out", "[cli]") {
  TempDir t;
  const fs::path out = t.dir / "o";
  const Result r = run({"probe", "pt", "--json", "--out", out.string(), "--no-trace"});
  REQUIRE(r.code == 0);
  CHECK(fs::exists(out / "stats.json"));
  CHECK(fs::exists(out / "config.resolved.yaml"));
  CHECK_FALSE(fs::exists(out / "trace.json"));
  check_input_error(run({"probe", "pt", "--no-trace"}), "--no-trace goes with --out");
  check_input_error(run({"probe", "pt", "--out", (t.dir / "p").string(), "--no-trace", "--trace", (t.dir / "x.json").string()}),
                    "--no-trace and --trace ask for opposite things");
  check_input_error(run({"describe", "--no-trace"}), "describe: option --no-trace does not apply");
}

TEST_CASE("cli: a run into an earlier run's --out removes what that run wrote and this one does not, never the user's files", "[cli]") {
  TempDir t;
  const fs::path b = t.dir / "b";
  fs::copy(fs::path(VSPYRE_SOURCE_DIR) / "tests" / "fixtures" / "bundles" / "neg_2048x1024_c32", b);
  const fs::path o = t.dir / "o";
  REQUIRE(run({"run", b.string(), "--out", o.string()}).code == 0);
  for (const char* f : {"stats.json", "config.resolved.yaml", "trace.json", "arg0_input.npy", "arg1_output.npy", ".vspyre-run.json"})
    CHECK(fs::exists(o / f));
  // The user's own files, one named as a run's would be, and one of the run's files changed since.
  { std::ofstream(o / "notes.txt") << "mine\n"; }
  { std::ofstream(o / "arg7_output.npy") << "mine\n"; }
  { std::ofstream(o / "arg1_output.npy", std::ios::app) << "changed"; }
  // Timing only, no trace: the earlier trace and input tensor were that run's and go; the changed
  // output tensor and the user's files stay, and the two a run could have written are named.
  const Result r = run({"run", b.string(), "--no-data", "--no-trace", "--out", o.string()});
  REQUIRE(r.code == 0);
  CHECK(fs::exists(o / "stats.json"));
  CHECK_FALSE(fs::exists(o / "trace.json"));
  CHECK_FALSE(fs::exists(o / "arg0_input.npy"));
  CHECK(fs::exists(o / "arg1_output.npy"));
  CHECK(fs::exists(o / "notes.txt"));
  CHECK(fs::exists(o / "arg7_output.npy"));
  CHECK(contains(r.err, "arg1_output.npy' is not from this run (left as it was)"));
  CHECK(contains(r.err, "arg7_output.npy' is not from this run (left as it was)"));
  CHECK_FALSE(contains(r.err, "notes.txt"));
  // The list now names only this run's files: the next run leaves what it does not own alone.
  const json mark = json::parse(slurp(o / ".vspyre-run.json"));
  std::set<std::string> names;
  for (const auto& f : mark["files"]) names.insert(f["name"].get<std::string>());
  CHECK(names == std::set<std::string>{"config.resolved.yaml", "stats.json"});
  REQUIRE(run({"run", b.string(), "--out", o.string()}).code == 0);
  CHECK(fs::exists(o / "trace.json"));
  CHECK(fs::exists(o / "arg0_input.npy"));
  // A mark that is not vspyre's list removes nothing; a link in its place is not written through.
  { std::ofstream(o / ".vspyre-run.json") << "not json"; }
  const Result bad = run({"run", b.string(), "--no-data", "--no-trace", "--out", o.string()});
  REQUIRE(bad.code == 0);
  CHECK(fs::exists(o / "trace.json"));
  CHECK(contains(bad.err, "is not a list vspyre wrote"));
  fs::remove(o / ".vspyre-run.json");
  fs::create_symlink(b / "sdsc_0.json", o / ".vspyre-run.json");
  const std::string sdsc = slurp(b / "sdsc_0.json");
  const Result link = run({"run", b.string(), "--no-data", "--no-trace", "--out", o.string()});
  REQUIRE(link.code == 0);
  CHECK(slurp(b / "sdsc_0.json") == sdsc);
  CHECK(fs::exists(o / "trace.json"));
}

TEST_CASE("cli: sim.seed, which nothing read, is refused with the seeds that act", "[cli]") {
  check_input_error(run({"describe", "-p", "sim.seed=2"}),
                    "-p sim.seed=2: sim.seed: nothing reads it; card.launch_seed seeds the cores' start times");
  TempDir t;
  const std::string f = t.write("s.yaml", "include: " + config_path("spyre.yaml") + "\nsim:\n  seed: 3\n");
  check_input_error(run({"describe", "--config", f}), f + ":3:3: sim.seed: nothing reads it");
}

TEST_CASE("cli: --no-trace records no trace even where the config turns tracing on", "[cli]") {
  TempDir t;
  const std::string f = t.write("tr.yaml", "include: " + config_path("spyre.yaml") + "\ncard:\n  core:\n    trace: true\n");
  const fs::path out = t.dir / "o";
  const std::string b = (fs::path(VSPYRE_SOURCE_DIR) / "tests" / "fixtures" / "bundles" / "neg_2048x1024_c32").string();
  REQUIRE(run({"run", b, "--no-data", "--config", f, "--out", out.string(), "--no-trace"}).code == 0);
  CHECK(fs::exists(out / "stats.json"));
  CHECK_FALSE(fs::exists(out / "trace.json"));
  const fs::path out2 = t.dir / "o2";  // without it, the config's trace: true records the cores
  REQUIRE(run({"run", b, "--no-data", "--config", f, "--out", out2.string()}).code == 0);
  CHECK(fs::exists(out2 / "trace.json"));
}

TEST_CASE("cli: inputs an audit found crashing, hanging or silently misread are refused by name", "[cli]") {
  // (stop 49; each was an internal error, an out-of-memory kill, a hang or a silent exit 0)
  TempDir t;
  const fs::path fixtures = fs::path(VSPYRE_SOURCE_DIR) / "tests" / "fixtures";
  // Results printed into a full disk: exit 1, not 0 with the results lost.
  {
    const std::string cmd = quote(bin()) + " describe --json >/dev/full 2>" + quote((t.dir / "full.err").string());
    const int status = std::system(cmd.c_str());
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
    CHECK(contains(slurp(t.dir / "full.err"), "vspyre: error: writing standard output failed"));
  }
  // A hard link to a file the run reads is that file.
  const fs::path b = t.dir / "b";
  fs::copy(fixtures / "bundles" / "relu_neg_demote", b);
  const std::string sdsc = slurp(b / "sdsc_0.json");
  fs::create_hard_link(b / "sdsc_0.json", t.dir / "hl.json");
  check_input_error(run({"run", b.string(), "--no-data", "--trace", (t.dir / "hl.json").string()}),
                    "is a file this run reads; it would be overwritten");
  CHECK(slurp(b / "sdsc_0.json") == sdsc);
  // An include that is a link to itself; a config that never ends; aliases that expand to billions.
  fs::create_symlink("loop.yaml", t.dir / "loop.yaml");
  const std::string looping = t.write("looping.yaml", "include: [loop.yaml]\n");
  check_input_error(run({"describe", "--config", looping}), "included file 'loop.yaml' cannot be read");
  check_input_error(run({"describe", "--config", "/dev/zero"}), "/dev/zero: longer than 16 MiB: not a config file");
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 12; ++i) {
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) bomb += std::string(j ? ", " : "") + "*a" + std::to_string(i - 1);
    bomb += "]\n";
  }
  check_input_error(run({"describe", "--config", t.write("bomb.yaml", bomb)}), "YAML aliases expanded");
  // A device as the bundle: there, but not a file ("not found" before).
  check_input_error(run({"run", "/dev/null", "--no-data"}), "'/dev/null' is not a regular file");
  // card.count was read by nothing (every other component refuses a count it cannot take).
  check_input_error(run({"describe", "-p", "card.count=2"}), "card.count: the card is not repeatable");
  // The same option twice: the last no longer wins unseen.
  check_input_error(run({"describe", "--config", config_path("spyre.yaml"), "--config", config_path("spyre_flow.yaml")}),
                    "--config: given twice");
  check_input_error(run({"run", b.string(), "--input", "arg0=a.npy", "--input", "arg0=b.npy"}), "--input: arg0 given twice");
  // An index tensor whose dims disagree with the view it indexes (scale_ -1): the data run read
  // past it (an internal error; the executor read outside its buffer).
  const fs::path g = t.dir / "g";
  fs::copy(fixtures / "captured" / "gather_128x256_i32_c1", g);
  {
    json j = json::parse(slurp(g / "sdsc_1.json"));
    j.begin().value()["dscs_"][0]["identity"]["labeledDs_"][0]["scale_"][0] = -1;
    std::ofstream(g / "sdsc_1.json") << j.dump();
  }
  check_input_error(run({"run", g.string()}), (g / "sdsc_1.json").string() + ": index tensor Tensor0 holds 1 indices");
  // A pooling window over a totalSize_ far past what N_'s outputs reach: the data run sized its
  // input by it (2^40: out of memory), the timing run timed it.
  const fs::path ap = t.dir / "ap";
  fs::copy(fixtures / "captured" / "avgpool_k2s2_2x3x8x8_c1", ap);
  {
    json j = json::parse(slurp(ap / "sdsc_0.json"));
    j["0_avgpoolfwd"]["dscs_"][0]["avgpoolfwd"]["N_"]["paddingSizes_"]["i"]["totalSize_"] = 1099511627776LL;
    std::ofstream(ap / "sdsc_0.json") << j.dump();
  }
  for (const bool data : {false, true}) {
    std::vector<std::string> args = {"run", ap.string()};
    if (!data) args.push_back("--no-data");
    check_input_error(run(args), "totalSize_ 1099511627776 with its padding holds more windows than N_'s 4 outputs");
  }
}
