// The configuration tree: YAML with locations, include:, -p overrides, resolved YAML output.
#include "catch.h"
#include "test_files.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "sim/engine/config.h"
#include "sim/engine/error.h"

namespace fs = std::filesystem;
using namespace vspyre;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

using vspyre::testing::TempDir;

// The message of the InputError `f` throws; fails the test when it throws nothing.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("expected an InputError");
  return "";
}

const ConfigNode& at(const ConfigNode& root, const std::vector<std::string>& path) {
  const ConfigNode* n = &root;
  for (const auto& k : path) {
    n = n->find(k);
    REQUIRE(n != nullptr);
  }
  return *n;
}

}  // namespace

TEST_CASE("engine: config parse keeps file, line and column of every value", "[engine][config]") {
  const ConfigNode root = parse_config_text(
      "sim:\n"
      "  quantum: 1us\n"
      "card:\n"
      "  core:\n"
      "    count: 4\n"
      "    lx: {size: 2MiB}\n"
      "  list: [a, b]\n"
      "  empty:\n",
      "t.yaml");
  REQUIRE(root.is_map());
  const ConfigNode& quantum = at(root, {"sim", "quantum"});
  CHECK(quantum.is_scalar());
  CHECK(quantum.text() == "1us");
  CHECK(quantum.loc().str() == "t.yaml:2:12");
  CHECK(quantum.key_loc().str() == "t.yaml:2:3");
  const ConfigNode& size = at(root, {"card", "core", "lx", "size"});
  CHECK(size.text() == "2MiB");
  CHECK(size.loc().file == "t.yaml");
  CHECK(size.loc().line == 6);
  CHECK(size.loc().column == 16);
  const ConfigNode& list = at(root, {"card", "list"});
  REQUIRE(list.is_sequence());
  REQUIRE(list.items().size() == 2);
  CHECK(list.items()[1].text() == "b");
  CHECK(list.items()[1].loc().str() == "t.yaml:7:13");
  // `key:` with no value is null, located at its key.
  const ConfigNode& empty = at(root, {"card", "empty"});
  CHECK(empty.is_null());
  CHECK(empty.loc().str() == "t.yaml:8:3");
  // Entries keep file order.
  const auto& card = at(root, {"card"}).entries();
  REQUIRE(card.size() == 3);
  CHECK(card[0].first == "core");
  CHECK(card[1].first == "list");
  CHECK(card[2].first == "empty");
  CHECK(root.find("nope") == nullptr);
  CHECK(at(root, {"card"}).kind_name() == "a map");
  CHECK(list.kind_name() == "a list");
  CHECK(quantum.kind_name() == "a value");
  CHECK(empty.kind_name() == "nothing");
}

TEST_CASE("engine: an empty config is an empty map", "[engine][config]") {
  ConfigNode e = parse_config_text("", "e.yaml");
  CHECK(e.is_map());
  CHECK(e.entries().empty());
  ConfigNode c = parse_config_text("# only a comment\n", "c.yaml");
  CHECK(c.is_map());
  CHECK(c.entries().empty());
  TempDir t;
  ConfigNode f = load_config_file(t.write("empty.yaml", "\n"));
  CHECK(f.is_map());
  CHECK(f.entries().empty());
}

TEST_CASE("engine: config YAML syntax errors and duplicate keys name file:line:column", "[engine][config]") {
  const std::string dup = error_of([] { parse_config_text("card:\n  a: 1\n  b: 2\n  a: 3\n", "dup.yaml"); });
  CHECK(dup == "dup.yaml:4:3: duplicate key 'a'");
  const std::string syn = error_of([] { parse_config_text("card: [\n", "syn.yaml"); });
  CHECK(contains(syn, "syn.yaml:2:1: YAML syntax error"));
  const std::string tab = error_of([] { parse_config_text("a:\n  b: 1\n c: 2\n", "ind.yaml"); });
  CHECK(contains(tab, "ind.yaml:"));
  CHECK(contains(tab, "YAML syntax error"));
  const std::string key = error_of([] { parse_config_text("? [a, b]\n: 1\n", "k.yaml"); });
  CHECK(key == "k.yaml:1:3: a map key must be a plain name");
}

TEST_CASE("engine: config file must be a map and a missing file or a directory is an input error", "[engine][config]") {
  TempDir t;
  const std::string seq = t.write("seq.yaml", "- a\n- b\n");
  CHECK(error_of([&] { load_config_file(seq); }) == seq + ":1:1: a config file must be a map of keys, found a list");
  const std::string missing = (t.dir / "missing.yaml").string();
  CHECK(error_of([&] { load_config_file(missing); }) == missing + ": cannot open config file");
  // A directory is not a config (it used to read as an empty config and silently run defaults).
  CHECK(contains(error_of([&] { load_config_file(t.dir.string()); }), "is a directory"));
}

TEST_CASE("engine: include paths are relative to the including file and merge in order", "[engine][config]") {
  TempDir t;
  t.write("presets/mem.yaml",
          "card:\n  memory:\n    t_rcd: 18ns\n    banks: 16\n  ring: {width: 128B}\n");
  // Nested include: resolved relative to presets/, not to the top file or the cwd.
  t.write("presets/fast.yaml", "include: mem.yaml\ncard:\n  memory:\n    t_rcd: 15ns\n");
  t.write("base.yaml", "include: [presets/mem.yaml]\nsim:\n  quantum: 3us\ncard:\n  core: {count: 32}\n");
  const std::string top = t.write("whatif/top.yaml",
                                  "include: [../base.yaml, ../presets/fast.yaml]\n"
                                  "card:\n  core:\n    count: 64\n");
  const ConfigNode root = load_config_file(top);
  CHECK(root.find("include") == nullptr);
  CHECK(at(root, {"sim", "quantum"}).text() == "3us");
  CHECK(at(root, {"card", "core", "count"}).text() == "64");  // the including file wins
  CHECK(at(root, {"card", "memory", "t_rcd"}).text() == "15ns");  // later include wins
  CHECK(at(root, {"card", "memory", "banks"}).text() == "16");  // deep merge keeps the rest
  CHECK(at(root, {"card", "ring", "width"}).text() == "128B");
  // Values remember the file they came from.
  CHECK(contains(at(root, {"card", "memory", "t_rcd"}).loc().file, "fast.yaml"));
  CHECK(at(root, {"card", "memory", "t_rcd"}).loc().line == 4);
  CHECK(contains(at(root, {"card", "memory", "banks"}).loc().file, "mem.yaml"));
  CHECK(at(root, {"card", "memory", "banks"}).loc().line == 4);
  CHECK(contains(at(root, {"card", "core", "count"}).loc().file, "top.yaml"));
  CHECK(at(root, {"card", "core", "count"}).loc().line == 4);
}

TEST_CASE("engine: a file included twice is applied once, where it is first included", "[engine][config]") {
  // A what-if and spyre_flow.yaml both include the default card: included together, in either
  // order, the second must not apply the default card again over what the first set.
  TempDir t;
  t.write("card.yaml", "card:\n  memory:\n    t_rcd: 18ns\n    banks: 16\n    write_batch: 896B\n");
  t.write("whatif.yaml", "include: card.yaml\ncard:\n  memory:\n    t_rcd: 12ns\n");
  t.write("flow.yaml", "include: card.yaml\ncard:\n  memory:\n    write_batch: 384B\n");
  for (const char* order : {"include: [whatif.yaml, flow.yaml]\n", "include: [flow.yaml, whatif.yaml]\n"}) {
    INFO(order);
    std::vector<fs::path> read;
    const ConfigNode root = load_config_file(t.write("top.yaml", order), &read);
    CHECK(at(root, {"card", "memory", "t_rcd"}).text() == "12ns");
    CHECK(at(root, {"card", "memory", "write_batch"}).text() == "384B");
    CHECK(at(root, {"card", "memory", "banks"}).text() == "16");
    CHECK(read.size() == 4);  // top, the two, and card.yaml once
  }
}

TEST_CASE("engine: a file the config lists itself applies where listed, even if included before", "[engine][config]") {
  // Listed by the user after a what-if that (through the card) already pulled it in, a preset is
  // meant to win: applied again, with what it includes.
  TempDir t;
  t.write("base.yaml", "card:\n  memory:\n    banks: 16\n");
  t.write("preset.yaml", "include: base.yaml\ncard:\n  memory:\n    t_rl: 18ns\n");
  t.write("card.yaml", "include: preset.yaml\n");
  t.write("whatif.yaml", "include: card.yaml\ncard:\n  memory:\n    t_rl: 16ns\n    banks: 8\n");
  const ConfigNode back = load_config_file(t.write("back.yaml", "include: [whatif.yaml, preset.yaml]\n"));
  CHECK(at(back, {"card", "memory", "t_rl"}).text() == "18ns");
  CHECK(at(back, {"card", "memory", "banks"}).text() == "16");  // base.yaml, under the preset, again
}

TEST_CASE("engine: a parameter's long form replaces the one it overrides whole", "[engine][config]") {
  // Merged key by key, a later {value: 16ns} kept the earlier file's source, and describe cited it.
  ConfigNode root = parse_config_text("t_rl: {value: 18ns, provenance: estimate, source: LPDDR5}\nx: {a: 1, b: 2}\n", "a.yaml");
  root.merge_from(parse_config_text("t_rl: {value: 16ns, provenance: estimate}\nx: {b: 3}\n", "b.yaml"));
  CHECK(at(root, {"t_rl", "value"}).text() == "16ns");
  CHECK(root.find("t_rl")->find("source") == nullptr);
  CHECK(at(root, {"x", "a"}).text() == "1");  // a plain map still merges key by key
  CHECK(at(root, {"x", "b"}).text() == "3");
  // A scalar over a long form and a long form over a scalar replace too.
  root.merge_from(parse_config_text("t_rl: 14ns\n", "c.yaml"));
  CHECK(root.find("t_rl")->is_scalar());
  root.merge_from(parse_config_text("t_rl: {value: 12ns}\n", "d.yaml"));
  CHECK(at(root, {"t_rl", "value"}).text() == "12ns");
}

TEST_CASE("engine: include errors: missing file, cycle, wrong type", "[engine][config]") {
  TempDir t;
  const std::string miss = t.write("miss.yaml", "sim: {}\ninclude: [ok.yaml, nothere.yaml]\n");
  t.write("ok.yaml", "sim: {quantum: 2us}\n");
  const std::string m = error_of([&] { load_config_file(miss); });
  CHECK(contains(m, miss + ":2:20: included file 'nothere.yaml' not found"));

  const std::string self = t.write("self.yaml", "include: self.yaml\n");
  CHECK(contains(error_of([&] { load_config_file(self); }), self + ":1:10: include cycle"));
  t.write("a.yaml", "include: b.yaml\n");
  t.write("b.yaml", "card: {}\ninclude: [a.yaml]\n");
  const std::string cyc = error_of([&] { load_config_file((t.dir / "a.yaml").string()); });
  CHECK(contains(cyc, "b.yaml:2:11: include cycle"));
  // A diamond (two files including the same third) is not a cycle.
  t.write("d.yaml", "sim: {quantum: 5us}\n");
  t.write("l.yaml", "include: d.yaml\n");
  t.write("r.yaml", "include: d.yaml\n");
  const ConfigNode diamond = load_config_file(t.write("top.yaml", "include: [l.yaml, r.yaml]\n"));
  CHECK(at(diamond, {"sim", "quantum"}).text() == "5us");

  const std::string map = t.write("map.yaml", "include: {a: b}\n");
  CHECK(error_of([&] { load_config_file(map); }) ==
        map + ":1:10: 'include' expects a file name or a list of file names");
  const std::string nul = t.write("nul.yaml", "include: [~]\n");
  CHECK(error_of([&] { load_config_file(nul); }) == nul + ":1:11: 'include' expects file names, found nothing");
}

TEST_CASE("engine: -p overrides create and replace values, and mark a long-form value as theirs", "[engine][config]") {
  ConfigNode root = parse_config_text(
      "card:\n"
      "  core:\n"
      "    count: {value: 32, provenance: datasheet, source: IBM}\n"
      "    clock: 1.5GHz\n",
      "o.yaml");
  apply_override(root, "card.core.clock=2GHz");
  CHECK(at(root, {"card", "core", "clock"}).text() == "2GHz");
  CHECK(at(root, {"card", "core", "clock"}).loc().str() == "-p card.core.clock=2GHz");
  apply_override(root, "card.core.count=64");
  const ConfigNode& count = at(root, {"card", "core", "count"});
  REQUIRE(count.is_map());
  CHECK(at(count, {"value"}).text() == "64");
  CHECK(at(count, {"provenance"}).text() == "override");
  CHECK(at(count, {"source"}).text() == "-p card.core.count=64");  // IBM spoke for 32, not 64
  // Missing maps are created; '=' inside the value is kept.
  apply_override(root, "card.ring.width=256B");
  CHECK(at(root, {"card", "ring", "width"}).text() == "256B");
  apply_override(root, "sim.note=a=b");
  CHECK(at(root, {"sim", "note"}).text() == "a=b");
  // Keys keep their position when replaced.
  CHECK(at(root, {"card", "core"}).entries()[0].first == "count");
  CHECK(at(root, {"card", "core"}).entries()[1].first == "clock");
  // Overrides apply to an empty (defaults-only) config too.
  ConfigNode empty = ConfigNode::map(SourceLoc{"<defaults>"});
  apply_override(empty, "card.core.count=4");
  CHECK(at(empty, {"card", "core", "count"}).text() == "4");
}

TEST_CASE("engine: malformed -p overrides are errors naming the override", "[engine][config]") {
  ConfigNode root = parse_config_text("card:\n  core:\n    clock: 1GHz\n", "o.yaml");
  CHECK(error_of([&] { apply_override(root, "card.core.clock"); }) ==
        "-p card.core.clock: an override must look like key.path=value");
  CHECK(error_of([&] { apply_override(root, "=3"); }) == "-p =3: an override must look like key.path=value");
  CHECK(error_of([&] { apply_override(root, "card..clock=1"); }) ==
        "-p card..clock=1: empty key in override path 'card..clock'");
  CHECK(error_of([&] { apply_override(root, "card.core.=1"); }) ==
        "-p card.core.=1: empty key in override path 'card.core.'");
  CHECK(error_of([&] { apply_override(root, "card.core.clock.x=1"); }) ==
        "-p card.core.clock.x=1: 'card.core.clock' is a value, not a map, so it has no key 'x'");
}

TEST_CASE("engine: merge_from deep-merges maps and replaces everything else", "[engine][config]") {
  ConfigNode a = parse_config_text("x: {p: 1, q: [1, 2]}\ny: 2\n", "a.yaml");
  const ConfigNode b = parse_config_text("x: {q: [3], r: 4}\ny: {z: 1}\nw: 5\n", "b.yaml");
  a.merge_from(b);
  CHECK(at(a, {"x", "p"}).text() == "1");
  REQUIRE(at(a, {"x", "q"}).items().size() == 1);
  CHECK(at(a, {"x", "q"}).items()[0].text() == "3");
  CHECK(at(a, {"x", "r"}).text() == "4");
  CHECK(at(a, {"y", "z"}).text() == "1");
  CHECK(at(a, {"w"}).text() == "5");
  ConfigNode n;
  n.merge_from(b);
  CHECK(n.is_map());
  CHECK(at(n, {"w"}).text() == "5");
  a.erase("w");
  CHECK(a.find("w") == nullptr);
}

TEST_CASE("engine: resolved config YAML parses back to the same tree", "[engine][config]") {
  const std::string text =
      "sim:\n"
      "  quantum: 200ns\n"
      "card:\n"
      "  core:\n"
      "    count: {value: 32, provenance: datasheet, source: \"IBM: 32 cores, per card #1\"}\n"
      "    note: \"null\"\n"
      "    tilde: \"~\"\n"
      "    empty: \"\"\n"
      "    dash: \"-x\"\n"
      "    quote: \"say \\\"hi\\\" \\\\ ok\"\n"
      "    at: \"@home\"\n"
      "    q: \"?\"\n"
      "    blank:\n"
      "    emptymap: {}\n"
      "    emptylist: []\n"
      "  connect:\n"
      "    - core_*.mem -> memory.port\n"
      "    - {a: 1, b: [x, y]}\n"
      "    - [p, q]\n";
  const ConfigNode a = parse_config_text(text, "r.yaml");
  const std::string yaml = a.to_yaml();
  INFO(yaml);
  const ConfigNode b = parse_config_text(yaml, "resolved.yaml");
  CHECK(b.to_yaml() == yaml);
  const ConfigNode& core = at(b, {"card", "core"});
  CHECK(at(core, {"count", "source"}).text() == "IBM: 32 cores, per card #1");
  CHECK(at(core, {"note"}).is_scalar());
  CHECK(at(core, {"note"}).text() == "null");
  CHECK(at(core, {"tilde"}).is_scalar());
  CHECK(at(core, {"tilde"}).text() == "~");
  CHECK(at(core, {"empty"}).is_scalar());
  CHECK(at(core, {"empty"}).text() == "");
  CHECK(at(core, {"dash"}).text() == "-x");
  CHECK(at(core, {"quote"}).text() == "say \"hi\" \\ ok");
  CHECK(at(core, {"at"}).text() == "@home");
  CHECK(at(core, {"q"}).text() == "?");
  CHECK(at(core, {"blank"}).is_null());
  CHECK(at(core, {"emptymap"}).is_map());
  CHECK(at(core, {"emptymap"}).entries().empty());
  CHECK(at(core, {"emptylist"}).is_sequence());
  const ConfigNode& conn = at(b, {"card", "connect"});
  REQUIRE(conn.items().size() == 3);
  CHECK(conn.items()[0].text() == "core_*.mem -> memory.port");
  CHECK(at(conn.items()[1], {"a"}).text() == "1");
  CHECK(at(conn.items()[1], {"b"}).items()[1].text() == "y");
  REQUIRE(conn.items()[2].is_sequence());
  CHECK(conn.items()[2].items()[1].text() == "q");
}

TEST_CASE("engine: every YAML file under configs/ loads and its output parses back", "[engine][config]") {
  const fs::path configs = fs::path(VSPYRE_SOURCE_DIR) / "configs";
  REQUIRE(fs::is_directory(configs));
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(configs)) {
    if (!e.is_regular_file() || (e.path().extension() != ".yaml" && e.path().extension() != ".yml")) continue;
    // Sweep files describe many cards, not one; the sweep tool and its tests read them.
    if (e.path().parent_path().filename() == "sweeps") continue;
    INFO(e.path().string());
    ++files;
    ConfigNode root;
    REQUIRE_NOTHROW(root = load_config_file(e.path().string()));
    CHECK(root.is_map());
    CHECK(root.find("include") == nullptr);
    REQUIRE(root.find("card") != nullptr);
    CHECK(root.find("card")->is_map());
    const std::string yaml = root.to_yaml();
    ConfigNode back;
    REQUIRE_NOTHROW(back = parse_config_text(yaml, "resolved.yaml"));
    CHECK(back.to_yaml() == yaml);
  }
  CHECK(files >= 8);
}

TEST_CASE("engine: default config path is configs/spyre.yaml unless VSPYRE_CONFIG is set", "[engine][config]") {
  const char* old = std::getenv("VSPYRE_CONFIG");
  const std::string saved = old ? old : "";
  unsetenv("VSPYRE_CONFIG");
  const std::string def = default_config_path();
  CHECK(fs::path(def).filename() == "spyre.yaml");
  CHECK(fs::exists(def));
  CHECK(fs::equivalent(def, fs::path(VSPYRE_SOURCE_DIR) / "configs" / "spyre.yaml"));
  setenv("VSPYRE_CONFIG", "/some/where.yaml", 1);
  CHECK(default_config_path() == "/some/where.yaml");
  if (old) setenv("VSPYRE_CONFIG", saved.c_str(), 1);
  else unsetenv("VSPYRE_CONFIG");
}
