#include "catch.h"

#include <filesystem>
#include <string>

#include "bundle_test_util.h"
#include "sim/bundle/bundle.h"

namespace fs = std::filesystem;
using namespace vspyre::bundle;

namespace {

using bundle_test::k_data;

Bundle parse_file(const std::string& name) {
  return parse_bundle_mlir(read_text_file(k_data / name, name), name);
}

Bindings bases(const Bundle& b) {
  Bindings x;
  for (size_t i = 0; i < b.args.size(); ++i) x.args.push_back((i + 1) << 32);
  return x;
}

std::string error_of(const std::string& text, const Bindings* bindings = nullptr,
                     const CardLimits& limits = {}) {
  try {
    Bundle b = parse_bundle_mlir(text, "bundle.mlir");
    if (bindings) unroll(b, *bindings, limits);
  } catch (const LoadError& e) {
    return e.what();
  }
  return "";
}

std::string wrap(const std::string& body, const std::string& params = "") {
  return "module {\n  func.func @sdsc_bundle(" + params + ") {\n" + body + "\n    return\n  }\n}\n";
}

}  // namespace

TEST_CASE("bundle: every spec example parses and unrolls", "[bundle]") {
  BUNDLE_REQUIRE_DATA();
  struct Case {
    const char* file;
    size_t executions;
  } cases[] = {
      {"ifspec_bundle_example_1-single-no-sym.mlir", 1},
      {"ifspec_bundle_example_2-softmax-no-sym.mlir", 6},
      {"ifspec_bundle_example_3-single-fake-sym.mlir", 1},
      {"ifspec_bundle_example_4-loop-multi.mlir", 16},
  };
  for (const auto& c : cases) {
    INFO(c.file);
    Bundle b = parse_file(c.file);
    CHECK(b.args.empty());
    CHECK(count_executions(b) == c.executions);
    CHECK(unroll(b, {}).size() == c.executions);
  }
}

TEST_CASE("bundle: spec example 4 binds loop-dependent affine addresses", "[bundle]") {
  BUNDLE_REQUIRE_DATA();
  Bundle b = parse_file("ifspec_bundle_example_4-loop-multi.mlir");
  REQUIRE(b.num_loops == 1);
  auto ex = unroll(b, {});
  REQUIRE(ex.size() == 16);
  for (int64_t i = 0; i < 8; ++i) {
    const Execution& a = ex[static_cast<size_t>(2 * i)];
    const Execution& bb = ex[static_cast<size_t>(2 * i + 1)];
    CHECK(a.sdsc_file == "sdscA.json");
    CHECK(bb.sdsc_file == "sdscB.json");
    CHECK(a.loop_indices == std::vector<int64_t>{i});
    CHECK(a.symbols.at(-1) == static_cast<uint64_t>(1024 + 128 * i));
    CHECK(a.symbols.at(-2) == static_cast<uint64_t>(12288 + 1024 * i));
    CHECK(a.symbols.at(-3) == static_cast<uint64_t>(12288 + 1024 * i + 256));
    CHECK(bb.symbols.at(-6) == static_cast<uint64_t>(17888 + 256 * i));
    CHECK(bb.symbols.at(-7) == static_cast<uint64_t>(17888 + 256 * i + 512));
  }
}

TEST_CASE("bundle: spec example 3 accepts a bare symbol_ids key over two lines", "[bundle]") {
  BUNDLE_REQUIRE_DATA();
  Bundle b = parse_file("ifspec_bundle_example_3-single-fake-sym.mlir");
  auto ex = unroll(b, {});
  REQUIRE(ex.size() == 1);
  CHECK(ex[0].sdsc_file == "sdscGelu.json");
  CHECK(ex[0].symbols == std::map<int64_t, uint64_t>{{-1, 1024}, {-2, 1152}, {-3, 4096}, {-4, 4224}});
}

TEST_CASE("bundle: every real torch-spyre bundle parses with symbolic args", "[bundle]") {
  BUNDLE_REQUIRE_DATA();
  struct Case {
    const char* file;
    size_t args, executions, first_symbols;
  } cases[] = {
      {"spyrecli_add_3d_bundle.mlir", 3, 1, 96},
      {"spyrecli_bmm_bundle.mlir", 3, 1, 24},
      {"spyrecli_mean_keepdim_bundle.mlir", 2, 1, 64},
      {"spyrecli_mm_bundle.mlir", 3, 1, 44},
      {"spyrecli_softmax_bundle.mlir", 2, 6, 32},
  };
  for (const auto& c : cases) {
    INFO(c.file);
    Bundle b = parse_file(c.file);
    CHECK(b.func_name == "sdsc_bundle");
    CHECK(b.args.size() == c.args);
    CHECK_FALSE(b.pool_bytes.has_value());
    auto ex = unroll(b, bases(b));
    REQUIRE(ex.size() == c.executions);
    CHECK(ex[0].symbols.size() == c.first_symbols);
    CHECK(ex[0].sdsc_file == "sdsc_0.json");
  }
}

TEST_CASE("bundle: symbol operands are affine in the arguments", "[bundle]") {
  BUNDLE_REQUIRE_DATA();
  Bundle b = parse_file("spyrecli_softmax_bundle.mlir");
  const auto& e0 = std::get<Execute>(b.steps.at(0).node);
  REQUIRE(e0.operands.size() == 32);
  // Core 5's slice of arg 0 is 5 * 16 rows * 128 B past the base.
  CHECK(e0.operands[5].constant == 5 * 2048);
  REQUIRE(e0.operands[5].terms.size() == 1);
  CHECK(e0.operands[5].terms[0].kind == AtomKind::arg);
  CHECK(e0.operands[5].terms[0].index == 0);
  CHECK(e0.operands[5].terms[0].coeff == 1);
  const auto& e5 = std::get<Execute>(b.steps.at(5).node);
  CHECK(e5.symbol_ids.front() == -33);
  CHECK(e5.operands[0].terms[0].index == 1);
}

TEST_CASE("bundle: pool, dimension args and nested loops", "[bundle]") {
  const std::string text = R"(
#m = affine_map<(d0, d1)[s0] -> (s0 + 4096 * d0 + (d1 * 2) * 128 - 0)>
module {
  func.func @k(%arg_0_base_addr: !sdscbundle.input_arg<index>,
               %n: !sdscbundle.input_arg<index, granularity=64, max_value=4096>) {
    %pool = sdscbundle.device_mem_allocate 65536 bytes : index
    %a = sdscbundle.input_arg_extract value from %arg_0_base_addr : !sdscbundle.input_arg<index> -> index
    %dim = sdscbundle.input_arg_extract value from %n : !sdscbundle.input_arg<index, granularity=64, max_value=4096> -> index
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %off = arith.constant 256 : index
    %p1 = arith.addi %pool, %off : index
    scf.for %i = %c0 to %c2 step %c1 {
      scf.for %j = %c0 to %c3 step %c1 {
        %x = affine.apply #m(%i, %j)[%a]
        sdscbundle.sdsc_execute (%x, %p1, %dim) {sdsc_filename = "s.json", symbol_ids = [-1, -2, -3]}
      }
    }
    return
  }
}
)";
  Bundle b = parse_bundle_mlir(text, "bundle.mlir");
  REQUIRE(b.args.size() == 2);
  CHECK_FALSE(b.args[0].is_dimension);
  CHECK(b.args[1].is_dimension);
  CHECK(b.args[1].granularity == 64);
  CHECK(b.args[1].max_value == 4096);
  CHECK(b.pool_bytes == std::optional<uint64_t>(65536));
  CHECK(b.num_loops == 2);
  Bindings bi{{1 << 20, 512}, 1 << 30};
  auto ex = unroll(b, bi);
  REQUIRE(ex.size() == 6);
  CHECK(ex[5].loop_indices == std::vector<int64_t>{1, 2});
  CHECK(ex[5].symbols.at(-1) == (1u << 20) + 4096 + 2 * 2 * 128);
  CHECK(ex[5].symbols.at(-2) == (1u << 30) + 256);
  CHECK(ex[5].symbols.at(-3) == 512);

  const Bindings bad_dim{{1 << 20, 500}, 0}, big_dim{{1 << 20, 8192}, 0}, short_args{{1 << 20}, 0};
  CHECK(error_of(text, &bad_dim).find("granularity") != std::string::npos);
  CHECK(error_of(text, &big_dim).find("max_value") != std::string::npos);
  CHECK(error_of(text, &short_args).find("2 arguments but 1") != std::string::npos);
}

TEST_CASE("bundle: malformed bundle.mlir inputs raise LoadError with file:line and rule", "[bundle]") {
  const std::string loop_head =
      "    %c0 = arith.constant 0 : index\n    %c1 = arith.constant 1 : index\n";
  const std::string arg = "%arg_0_base_addr: !sdscbundle.input_arg<index>";
  const std::string extract =
      "    %a = sdscbundle.input_arg_extract value from %arg_0_base_addr : "
      "!sdscbundle.input_arg<index> -> index\n";
  std::string truncated = wrap(loop_head + "    scf.for %i = %c0 to %c1 step %c1 {\n    }");
  truncated = truncated.substr(0, truncated.find("step %c1 {") + 10);
  struct Case {
    const char* name;
    std::string text;
    const char* rule;
    bool unroll = false;
  } cases[] = {
      {"non-constant loop bound",
       wrap(loop_head + extract + "    scf.for %i = %c0 to %a step %c1 {\n    }", arg),
       "bundle.mlir:6: non-constant loop upper bound"},
      {"non-positive step",
       wrap(loop_head + "    scf.for %i = %c0 to %c1 step %c0 {\n    }"), "loop step must be positive"},
      {"bad affine map: floordiv",
       wrap(loop_head + "    %x = affine.apply affine_map<(d0) -> (d0 floordiv 2)>(%c1)"),
       "bad affine map"},
      {"bad affine map: product of dims",
       wrap(loop_head + "    %x = affine.apply affine_map<(d0, d1) -> (d0 * d1)>(%c1, %c1)"),
       "bad affine map: product"},
      {"bad affine map: undefined alias", wrap(loop_head + "    %x = affine.apply #nope(%c1)"),
       "bad affine map: undefined alias"},
      {"bad affine map: arity",
       wrap(loop_head + "    %x = affine.apply affine_map<(d0)[s0] -> (d0 + s0)>(%c1)"),
       "bad affine map: it takes 1 dims and 1 symbols"},
      {"bad affine map: two results",
       wrap(loop_head + "    %x = affine.apply affine_map<(d0) -> (d0, d0)>(%c1)"),
       "exactly one result"},
      {"symbol count mismatch",
       wrap(loop_head + "    sdscbundle.sdsc_execute (%c0, %c1) {sdsc_filename=\"s.json\", \"symbol_ids\"=[-1]}"),
       "symbol count mismatch: 2 operands but 1 symbol_ids"},
      {"positive symbol id",
       wrap(loop_head + "    sdscbundle.sdsc_execute (%c0) {sdsc_filename=\"s.json\", symbol_ids=[3]}"),
       "must be negative"},
      {"duplicate symbol id",
       wrap(loop_head + "    sdscbundle.sdsc_execute (%c0, %c1) {sdsc_filename=\"s.json\", symbol_ids=[-1, -1]}"),
       "duplicate symbol id"},
      {"missing sdsc_filename",
       wrap("    sdscbundle.sdsc_execute () {symbol_ids=[]}"), "without sdsc_filename"},
      {"escaping sdsc_filename",
       wrap("    sdscbundle.sdsc_execute () {sdsc_filename=\"../x.json\"}"), "relative path"},
      {"unknown attribute",
       wrap("    sdscbundle.sdsc_execute () {sdsc_filename=\"x.json\", fast=1}"), "unknown or repeated sdsc_execute attribute"},
      {"unsupported op", wrap("    scf.if %c0 {\n    }"), "unsupported operation 'scf.if'"},
      {"unsupported value op", wrap("    %x = arith.muli %a, %b : index"), "unsupported operation 'arith.muli'"},
      {"undefined value",
       wrap("    sdscbundle.sdsc_execute (%ghost) {sdsc_filename=\"x.json\", symbol_ids=[-1]}"),
       "use of undefined value '%ghost'"},
      {"parameter without extract",
       wrap("    sdscbundle.sdsc_execute (%arg_0_base_addr) {sdsc_filename=\"x.json\", symbol_ids=[-1]}", arg),
       "without sdscbundle.input_arg_extract"},
      {"redefinition", wrap(loop_head + "    %c0 = arith.constant 5 : index"), "redefinition of '%c0'"},
      {"missing return",
       "module {\n  func.func @k() {\n    sdscbundle.sdsc_execute () {sdsc_filename=\"x.json\"}\n  }\n}\n",
       "must end with return"},
      {"truncated", truncated, "unexpected end of file"},
      {"two functions",
       "module {\n func.func @a() {\n return\n }\n func.func @b() {\n return\n }\n}\n",
       "exactly one func.func"},
      {"bad character", wrap("    ?"), "unexpected character"},
      {"unterminated string", wrap("    sdscbundle.sdsc_execute () {sdsc_filename=\"x.json}"),
       "unterminated string"},
      {"integer overflow", wrap("    %c = arith.constant 99999999999999999999 : index"),
       "integer literal out of range"},
      {"pool inside loop",
       wrap(loop_head + "    scf.for %i = %c0 to %c1 step %c1 {\n      %p = sdscbundle.device_mem_allocate 64 bytes : index\n    }"),
       "device_mem_allocate inside scf.for"},
      {"dimension arg needs both keys",
       wrap("", "%n: !sdscbundle.input_arg<index, granularity=64>"), "needs both granularity and max_value"},
      {"function results", "module {\n func.func @a() -> index {\n return\n }\n}\n", "must not return values"},
      {"negative symbol value",
       wrap("    %c = arith.constant -128 : index\n    sdscbundle.sdsc_execute (%c) {sdsc_filename=\"x.json\", symbol_ids=[-1]}"),
       "evaluates to negative value", true},
      {"too many executions",
       wrap(loop_head + "    %n = arith.constant 1000000000000 : index\n    scf.for %i = %c0 to %n step %c1 {\n      scf.for %j = %c0 to %n step %c1 {\n        sdscbundle.sdsc_execute () {sdsc_filename=\"x.json\"}\n      }\n    }"),
       "executions, above the limit", true},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    Bindings none;
    std::string msg = error_of(c.text, c.unroll ? &none : nullptr);
    INFO(msg);
    CHECK(msg.rfind("bundle.mlir:", 0) == 0);
    CHECK(msg.find(c.rule) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
}

TEST_CASE("bundle: huge loops with an empty body do not hang", "[bundle]") {
  std::string text = wrap(
      "    %c0 = arith.constant 0 : index\n    %c1 = arith.constant 1 : index\n"
      "    %n = arith.constant 9000000000000000000 : index\n"
      "    scf.for %i = %c0 to %n step %c1 {\n      scf.for %j = %c0 to %n step %c1 {\n      }\n    }\n"
      "    sdscbundle.sdsc_execute () {sdsc_filename=\"x.json\"}");
  Bundle b = parse_bundle_mlir(text, "bundle.mlir");
  CHECK(unroll(b, {}).size() == 1);
}
