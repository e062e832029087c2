// Parameters: typed reads with default, description and provenance; every class of config error
// (unknown key, wrong type, missing value, bad unit) names file:line:column, the key and what was
// expected, with a did-you-mean for near misses.
#include "catch.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/engine/config.h"
#include "sim/engine/error.h"
#include "sim/engine/params.h"

using namespace vspyre;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {  // a ConfigError, or an InputError where no file names the value
    return e.what();
  }
  FAIL("expected a ConfigError");
  return "";
}

// A copy of the spec at `path` (all_specs() returns by value); empty when absent.
std::optional<ParamSpec> spec(const ParamReader& r, const std::string& path) {
  for (const auto& s : r.all_specs())
    if (s.path == path) return s;
  return std::nullopt;
}

}  // namespace

TEST_CASE("engine: params read typed values with units", "[engine][params]") {
  const ConfigNode root = parse_config_text(
      "n: 12\n"
      "hex: 0x10\n"
      "dec: 010\n"
      "neg: -3\n"
      "r: 2.5e3\n"
      "b1: yes\n"
      "b2: off\n"
      "s: hello world\n"
      "c: fast\n"
      "size: 4MiB\n"
      "f: 800MHz\n"
      "t: 5ns\n"
      "tc: 3cycles\n"
      "bw: 64GB/s\n",
      "p.yaml");
  ParamReader r(&root, "x");
  CHECK(r.get_int("n", 1, {"n"}) == 12);
  CHECK(r.get_int("hex", 1, {"hex"}) == 16);
  CHECK(r.get_int("dec", 1, {"dec"}) == 10);  // decimal, as YAML 1.2 reads it, not octal 8
  CHECK(r.get_int("neg", 1, {"neg"}) == -3);
  CHECK(r.get_real("r", 1, {"r"}) == Approx(2500));
  CHECK(r.get_bool("b1", false, {"b1"}) == true);
  CHECK(r.get_bool("b2", true, {"b2"}) == false);
  CHECK(r.get_string("s", "", {"s"}) == "hello world");
  CHECK(r.get_choice("c", "slow", {"slow", "fast"}, {"c"}) == "fast");
  CHECK(r.get_size("size", "2MiB", {"size"}) == 4u * 1024 * 1024);
  CHECK(r.get_frequency("f", "1GHz", {"f"}) == Approx(800e6));
  const TimeValue t = r.get_time("t", "1ns", {"t"});
  CHECK_FALSE(t.in_cycles);
  CHECK(t.value == Approx(5000));
  const TimeValue tc = r.get_time("tc", "1ns", {"tc"});
  CHECK(tc.in_cycles);
  CHECK(tc.to_ps(1.5e9) == Approx(2000));
  CHECK(r.get_bandwidth("bw", "1GB/s", {"bw"}) == Approx(64e9));
  CHECK_NOTHROW(r.check_unknown_keys());
}

TEST_CASE("engine: params refuse a number or a frequency outside its range, with file and line", "[engine][params]") {
  const ConfigNode root = parse_config_text("r: -0.5\nok: 0\nf: 10kHz\ng: 2MHz\n", "p.yaml");
  ParamReader r(&root, "x");
  CHECK_THROWS_WITH(r.get_real("r", 1, {"r"}, 0), "p.yaml:1:4: x.r: value -0.5 out of range [0, inf]");
  CHECK(r.get_real("ok", 1, {"ok"}, 0, 10) == 0);
  CHECK_THROWS_WITH(r.get_frequency("f", "1GHz", {"f"}, "1MHz"), "p.yaml:3:4: x.f: '10kHz' out of range [1MHz, inf]");
  CHECK_THROWS_WITH(r.get_frequency("g", "1GHz", {"g"}, "", "1MHz"), "p.yaml:4:4: x.g: '2MHz' out of range [0, 1MHz]");
  // Defaults are the code's and are not checked against the bounds.
  ParamReader d(nullptr, "y");
  CHECK(d.get_frequency("clock", "1.5GHz", {"clock"}, "1MHz") == Approx(1.5e9));
}

TEST_CASE("engine: params fall back to defaults and record default, description, provenance", "[engine][params]") {
  ParamReader r(nullptr, "card.core_0");
  CHECK(r.get_int("corelets", 2, {"corelets per core", Provenance::Datasheet, "IBM"}) == 2);
  CHECK(r.get_real("ratio", 0.25, {"a ratio", Provenance::Measured}) == Approx(0.25));
  CHECK(r.get_bool("on", true, {"switch", Provenance::Override}) == true);
  CHECK(r.get_string("name", "core", {"name"}) == "core");
  CHECK(r.get_choice("mode", "b", {"a", "b"}, {"mode", Provenance::Derived}) == "b");
  ParamReader& lx = r.group("lx", "scratchpad");
  CHECK(lx.get_size("size", "2MiB", {"LX SRAM", Provenance::Datasheet, "IBM: 2 MiB"}) == 2u << 20);
  CHECK(r.get_frequency("clock", "1.5GHz", {"clock", Provenance::Derived}) == Approx(1.5e9));
  CHECK(r.get_time("lat", "4cycles", {"latency"}).in_cycles);
  CHECK(r.get_bandwidth("bw", "204.8GB/s", {"bw"}) == Approx(204.8e9));
  CHECK(&r.group("lx", "again") == &lx);  // a group is made once
  CHECK_NOTHROW(r.check_unknown_keys());

  const auto specs = r.all_specs();
  REQUIRE(specs.size() == 9);
  const auto c = spec(r, "corelets");
  REQUIRE(c);
  CHECK(c->kind == ParamKind::Int);
  CHECK(c->default_text == "2");
  CHECK(c->description == "corelets per core");
  CHECK(c->provenance == Provenance::Datasheet);
  CHECK(c->source == "IBM");
  CHECK_FALSE(c->value_text.has_value());
  const auto s = spec(r, "lx.size");
  REQUIRE(s);
  CHECK(s->kind == ParamKind::Size);
  CHECK(s->default_text == "2MiB");
  CHECK(s->source == "IBM: 2 MiB");
  CHECK(spec(r, "ratio")->default_text == "0.25");
  CHECK(spec(r, "ratio")->provenance == Provenance::Measured);
  CHECK(spec(r, "on")->default_text == "true");
  CHECK(spec(r, "mode")->choices == std::vector<std::string>{"a", "b"});
  CHECK(spec(r, "lat")->provenance == Provenance::Estimate);  // the default provenance
  // Group specs come after the group owner's own specs, with full relative paths.
  CHECK(specs.back().path == "lx.size");
  CHECK(lx.where() == "card.core_0.lx");
}

TEST_CASE("engine: params long form carries value, provenance and source", "[engine][params]") {
  const ConfigNode root = parse_config_text(
      "count: {value: 32, provenance: datasheet, source: \"IBM: 32 cores\"}\n"
      "clock: {value: 1.5GHz}\n"
      "lx:\n"
      "  size: {value: 4MiB, provenance: override, source: what-if}\n",
      "lf.yaml");
  ParamReader r(&root, "card.core_0");
  CHECK(r.get_int("count", 1, {"count", Provenance::Estimate}) == 32);
  CHECK(r.get_frequency("clock", "1GHz", {"clock", Provenance::Derived}) == Approx(1.5e9));
  CHECK(r.group("lx", "").get_size("size", "2MiB", {"size", Provenance::Datasheet}) == 4u << 20);
  CHECK_NOTHROW(r.check_unknown_keys());
  const auto c = spec(r, "count");
  REQUIRE(c);
  CHECK(c->value_text == std::optional<std::string>("32"));
  CHECK(c->value_provenance == std::optional<Provenance>(Provenance::Datasheet));
  CHECK(c->value_source == "IBM: 32 cores");
  CHECK(c->provenance == Provenance::Estimate);  // the code's own provenance is kept apart
  const auto k = spec(r, "clock");
  CHECK(k->value_text == std::optional<std::string>("1.5GHz"));
  CHECK_FALSE(k->value_provenance.has_value());
  const auto s = spec(r, "lx.size");
  CHECK(s->value_provenance == std::optional<Provenance>(Provenance::Override));
  CHECK(s->value_source == "what-if");
}

TEST_CASE("engine: config error class unknown key: file:line:column, key, expected, did-you-mean", "[engine][params]") {
  const ConfigNode root = parse_config_text(
      "clock: 1GHz\n"
      "lx:\n"
      "  size: 2MiB\n"
      "  sise: 4MiB\n",
      "unk.yaml");
  ParamReader r(&root, "card.core_0");
  r.claim("type");
  r.get_frequency("clock", "1GHz", {"clock"});
  ParamReader& lx = r.group("lx", "");
  lx.get_size("size", "2MiB", {"size"});
  lx.get_size("reserved", "64KiB", {"reserved"});
  CHECK(error_of([&] { r.check_unknown_keys(); }) ==
        "unk.yaml:4:3: unknown key 'sise' in card.core.lx; did you mean 'size'? "
        "(expected one of: reserved, size)");

  // Far from every known key: no suggestion, but the list of what is expected.
  const ConfigNode far = parse_config_text("clock: 1GHz\nwibble: 3\n", "far.yaml");
  ParamReader f(&far, "card.ring");
  f.claim("type");
  f.get_frequency("clock", "1GHz", {"clock"});
  CHECK(error_of([&] { f.check_unknown_keys(); }) ==
        "far.yaml:2:1: unknown key 'wibble' in card.ring (expected one of: clock, type)");

  // Unknown key inside a long-form parameter.
  const ConfigNode lf = parse_config_text("clock: {value: 1GHz, provenence: datasheet}\n", "lf.yaml");
  ParamReader l(&lf, "card.core_0");
  CHECK(error_of([&] { l.get_frequency("clock", "1GHz", {"clock"}); }) ==
        "lf.yaml:1:22: card.core.clock: unknown key 'provenence' in a parameter (expected value, "
        "provenance, source); did you mean 'provenance'?");
  // A bad provenance name.
  const ConfigNode bp = parse_config_text("clock: {value: 1GHz, provenance: guess}\n", "bp.yaml");
  ParamReader b(&bp, "card.core_0");
  CHECK(error_of([&] { b.get_frequency("clock", "1GHz", {"clock"}); }) ==
        "bp.yaml:1:34: card.core.clock.provenance: expected one of datasheet, measured, derived, "
        "estimate, override");
}

TEST_CASE("engine: config error class wrong type: scalar where a map is needed and vice versa", "[engine][params]") {
  const ConfigNode root = parse_config_text(
      "corelets: two\n"
      "lanes: [1, 2]\n"
      "big: 99\n"
      "ratio: fast\n"
      "on: maybe\n"
      "mode: fsat\n"
      "frac: 1.5\n"
      "lx: 4MiB\n",
      "wt.yaml");
  ParamReader r(&root, "card.core_0");
  CHECK(error_of([&] { r.get_int("corelets", 2, {"c"}); }) ==
        "wt.yaml:1:11: card.core.corelets: expected an integer, found 'two'");
  CHECK(error_of([&] { r.get_int("lanes", 2, {"l"}); }) ==
        "wt.yaml:2:8: card.core.lanes: expected an integer, found a list");
  CHECK(error_of([&] { r.get_int("big", 2, {"b"}, 1, 16); }) ==
        "wt.yaml:3:6: card.core.big: value 99 out of range [1, 16]");
  CHECK(error_of([&] { r.get_real("ratio", 1, {"r"}); }) ==
        "wt.yaml:4:8: card.core.ratio: expected a number, found 'fast'");
  CHECK(error_of([&] { r.get_bool("on", false, {"o"}); }) ==
        "wt.yaml:5:5: card.core.on: expected true or false, found 'maybe'");
  CHECK(error_of([&] { r.get_choice("mode", "slow", {"slow", "fast"}, {"m"}); }) ==
        "wt.yaml:6:7: card.core.mode: 'fsat' is not one of: slow, fast; did you mean 'fast'?");
  CHECK(error_of([&] { r.get_int("frac", 1, {"f"}); }) ==
        "wt.yaml:7:7: card.core.frac: expected an integer, found '1.5'");
  CHECK(error_of([&] { r.group("lx", "scratchpad"); }) ==
        "wt.yaml:8:5: 'card.core.lx' expects a map of parameters, found a value");
  const ConfigNode map = parse_config_text("size: {a: 1}\n", "m.yaml");
  ParamReader m(&map, "c");
  CHECK(error_of([&] { m.get_size("size", "1B", {"s"}); }) ==
        "m.yaml:1:7: c.size: a parameter given as a map needs a 'value' key");
  const ConfigNode seq = parse_config_text("size: {value: [1]}\n", "s.yaml");
  ParamReader s(&seq, "c");
  CHECK(error_of([&] { s.get_size("size", "1B", {"s"}); }) ==
        "s.yaml:1:15: c.size: expected a size, found a list");
  const ConfigNode huge = parse_config_text("n: 99999999999999999999\n", "h.yaml");
  ParamReader h(&huge, "c");
  CHECK(error_of([&] { h.get_int("n", 1, {"n"}); }) == "h.yaml:1:4: c.n: expected an integer, found '99999999999999999999'");
}

TEST_CASE("engine: config error class missing value: key with no value, long form without value", "[engine][params]") {
  const ConfigNode root = parse_config_text(
      "clock:\n"
      "lx:\n"
      "  size: {provenance: datasheet, source: IBM}\n"
      "count:\n",
      "mv.yaml");
  ParamReader r(&root, "card.core_0");
  CHECK(error_of([&] { r.get_frequency("clock", "1GHz", {"clock"}); }) ==
        "mv.yaml:1:1: card.core.clock: no value given (expected a frequency)");
  CHECK(error_of([&] { r.get_int("count", 1, {"count"}); }) ==
        "mv.yaml:4:1: card.core.count: no value given (expected an integer)");
  ParamReader& lx = r.group("lx", "");
  CHECK(error_of([&] { lx.get_size("size", "2MiB", {"size"}); }) ==
        "mv.yaml:3:9: card.core.lx.size: a parameter given as a map needs a 'value' key");
}

TEST_CASE("engine: config error class bad unit: names the value, the unit and the units expected", "[engine][params]") {
  const ConfigNode root = parse_config_text(
      "clock: 1.5GHzz\n"
      "size: 2MB/s\n"
      "lat: 3 nsec\n"
      "bw: 150GB\n"
      "bare: 4096\n",
      "bu.yaml");
  ParamReader r(&root, "card.core_0");
  CHECK(error_of([&] { r.get_frequency("clock", "1GHz", {"c"}); }) ==
        "bu.yaml:1:8: card.core.clock: '1.5GHzz' has unknown unit 'GHzz' (expected a frequency such as "
        "1.5GHz; units: Hz, kHz, MHz, GHz)");
  const std::string size = error_of([&] { r.get_size("size", "1B", {"s"}); });
  CHECK(contains(size, "bu.yaml:2:7: card.core.size: '2MB/s' has unknown unit 'MB/s'"));
  CHECK(contains(size, "expected a size such as 2MiB"));
  const std::string lat = error_of([&] { r.get_time("lat", "1ns", {"l"}); });
  CHECK(contains(lat, "bu.yaml:3:6: card.core.lat: '3 nsec' has unknown unit 'nsec'"));
  CHECK(contains(lat, "cycles"));
  const std::string bw = error_of([&] { r.get_bandwidth("bw", "1GB/s", {"b"}); });
  CHECK(contains(bw, "bu.yaml:4:5: card.core.bw: '150GB' has unknown unit 'GB'"));
  CHECK(contains(bw, "GiB/s"));
  CHECK(contains(error_of([&] { r.get_size("bare", "1B", {"s"}); }),
                 "bu.yaml:5:7: card.core.bare: '4096' has no unit"));
}

TEST_CASE("engine: a bad default in code is an internal error, not an input error", "[engine][params]") {
  ParamReader r(nullptr, "card.x");
  try {
    r.get_size("size", "2 Mebibytes", {"s"});
    FAIL("expected a logic_error");
  } catch (const InputError&) {
    FAIL("a bad default must not be reported as the user's input error");
  } catch (const std::logic_error& e) {
    CHECK(contains(e.what(), "bad default for card.x.size"));
  }
}

TEST_CASE("engine: a parameter reader needs a map and a null node means defaults", "[engine][params]") {
  const ConfigNode root = parse_config_text("a: 3\nb:\n", "n.yaml");
  CHECK(error_of([&] { ParamReader(root.find("a"), "card.a"); }) ==
        "n.yaml:1:4: 'card.a' expects a map of parameters, found a value");
  ParamReader nul(root.find("b"), "card.b");
  CHECK(nul.node() == nullptr);
  CHECK(nul.get_int("x", 5, {"x"}) == 5);
}

TEST_CASE("engine: did_you_mean suggests near misses only", "[engine][params]") {
  const std::vector<std::string> keys{"clock", "corelets", "lx", "pt", "sfp", "dma", "count"};
  CHECK(did_you_mean("clok", keys) == std::optional<std::string>("clock"));
  CHECK(did_you_mean("corlets", keys) == std::optional<std::string>("corelets"));
  CHECK(did_you_mean("Clock", keys) == std::optional<std::string>("clock"));  // case-insensitive
  CHECK(did_you_mean("cuont", keys) == std::optional<std::string>("count"));
  CHECK(did_you_mean("dmb", keys) == std::optional<std::string>("dma"));
  CHECK_FALSE(did_you_mean("frequency", keys).has_value());
  CHECK_FALSE(did_you_mean("xyz", keys).has_value());
  CHECK_FALSE(did_you_mean("clock", {}).has_value());
}

TEST_CASE("engine: provenance and kind names", "[engine][params]") {
  for (auto p : {Provenance::Datasheet, Provenance::Measured, Provenance::Derived, Provenance::Estimate,
                 Provenance::Override})
    CHECK(provenance_from_name(provenance_name(p)) == std::optional<Provenance>(p));
  CHECK(provenance_name(Provenance::Datasheet) == "datasheet");
  CHECK(provenance_name(Provenance::Estimate) == "estimate");
  CHECK_FALSE(provenance_from_name("Datasheet").has_value());
  CHECK_FALSE(provenance_from_name("").has_value());
  CHECK(param_kind_name(ParamKind::Size) == "size");
  CHECK(param_kind_name(ParamKind::Frequency) == "frequency");
  CHECK(param_kind_name(ParamKind::Time) == "time");
  CHECK(param_kind_name(ParamKind::Bandwidth) == "bandwidth");
  CHECK(param_kind_name(ParamKind::Int) == "integer");
}

TEST_CASE("engine: a component refuses a value by the key the config spells, where it was given", "[engine]") {
  const ConfigNode root = parse_config_text("lx:\n  size: 0B\nclock: 1GHz\n", "rf.yaml");
  ParamReader r(&root, "card.core_0");
  CHECK(r.config_path() == "card.core");
  CHECK(error_of([&] { r.refuse("lx.size", "must be positive"); }) == "rf.yaml:2:9: card.core.lx.size: must be positive");
  CHECK(error_of([&] { r.refuse("clock", "too slow"); }) == "rf.yaml:3:8: card.core.clock: too slow");
  // A key the config does not give (a default, or a check across two keys): no location to name.
  CHECK(error_of([&] { r.refuse("lanes", "odd"); }) == "card.core.lanes: odd");
  ParamReader g(nullptr, "card.memory");
  CHECK(g.config_path() == "card.memory");
  CHECK(error_of([&] { g.refuse("bin", "must be positive"); }) == "card.memory.bin: must be positive");
  // Only a numbered instance's suffix goes: names that merely contain '_' stay.
  CHECK(ParamReader(nullptr, "card.core_12.lx").config_path() == "card.core.lx");
  CHECK(ParamReader(nullptr, "card.tie_order_x").config_path() == "card.tie_order_x");
  CHECK(ParamReader(nullptr, "card.port_").config_path() == "card.port_");
}
