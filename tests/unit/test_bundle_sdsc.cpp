#include "catch.h"

#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "bundle_test_util.h"
#include "sim/bundle/bundle.h"

namespace fs = std::filesystem;
using namespace vspyre::bundle;
using Json = nlohmann::ordered_json;

namespace {

using bundle_test::k_data;

std::string text_of(const std::string& name) { return read_text_file(k_data / name, name); }

Sdsc load(const std::string& name, const CardLimits& limits = {}) {
  return parse_sdsc_json(text_of(name), name, limits);
}

// The compute descriptor object inside an SDSC: dscs_[0][<op>].
Json& dsc(Json& j) {
  Json& sd = j.begin().value();
  return sd["dscs_"][0].begin().value();
}

std::string error_of(const std::string& text, const std::string& name, const CardLimits& limits = {}) {
  try {
    parse_sdsc_json(text, name, limits);
  } catch (const LoadError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("bundle: every real SDSC loads", "[bundle]") {
  BUNDLE_REQUIRE_DATA();
  struct Case {
    const char* file;
    const char* key;
    const char* op;
    ExUnit unit;
    uint32_t cores;
    size_t tensors, symbols;
  } cases[] = {
      {"spyrecli_add_3d_sdsc_0.json", "0_add", "add", ExUnit::sfp, 32, 3, 96},
      {"spyrecli_bmm_sdsc_0.json", "0_batchmatmul", "batchmatmul", ExUnit::pt, 8, 3, 24},
      {"spyrecli_mean_keepdim_sdsc_0.json", "0_mean", "mean", ExUnit::sfp, 32, 2, 64},
      {"spyrecli_mm_sdsc_0.json", "0_batchmatmul", "batchmatmul", ExUnit::pt, 32, 3, 44},
      {"spyrecli_softmax_sdsc_0.json", "0_identity", "identity", ExUnit::sfp, 32, 2, 32},
      {"spyrecli_softmax_sdsc_1.json", "1_max", "max", ExUnit::sfp, 32, 2, 0},
      {"spyrecli_softmax_sdsc_2.json", "2_sub", "sub", ExUnit::sfp, 32, 3, 0},
      {"spyrecli_softmax_sdsc_3.json", "3_exp", "exp", ExUnit::sfp, 32, 2, 0},
      {"spyrecli_softmax_sdsc_4.json", "4_sum", "sum", ExUnit::sfp, 32, 2, 0},
      {"spyrecli_softmax_sdsc_5.json", "5_realdiv", "realdiv", ExUnit::sfp, 32, 3, 32},
  };
  for (const auto& c : cases) {
    INFO(c.file);
    Sdsc s = load(c.file);
    CHECK(s.key == c.key);
    CHECK(s.dsc_name == c.op);
    REQUIRE(s.compute_ops.size() == 1);
    CHECK(s.compute_ops[0].op_func_name == c.op);
    CHECK(s.compute_ops[0].ex_unit == c.unit);
    CHECK(s.compute_ops[0].data_format == DataFormat::sen169_fp16);
    CHECK(s.num_cores == c.cores);
    CHECK(s.core_ids.size() == c.cores);
    CHECK(s.labeled_ds.size() == c.tensors);
    CHECK(s.allocations.size() == c.tensors);
    CHECK(s.symbols.size() == c.symbols);
    CHECK(s.raw.is_object());
    for (uint32_t core : s.core_ids) {
      REQUIRE(s.core_schedule.at(core).size() == 1);
      CHECK(s.core_schedule.at(core)[0].dl_dsc == 0);
      CHECK(s.core_schedule.at(core)[0].data_dsc == -1);
    }
  }
}

TEST_CASE("bundle: work division and sizes of the mm SDSC", "[bundle]") {
  BUNDLE_REQUIRE_DATA();
  Sdsc s = load("spyrecli_mm_sdsc_0.json");
  REQUIRE(s.slices_per_dim.size() == 3);
  CHECK(s.slices_per_dim[0] == std::pair<std::string, uint32_t>{"mb", 8});
  CHECK(s.slices_per_dim[1] == std::pair<std::string, uint32_t>{"out", 4});
  CHECK(s.n_of("in") == 1024);
  CHECK(s.ss_of("mb") == 64);
  CHECK(s.el_of("out") == 64);
  // First key varies fastest over core ids.
  CHECK(s.core_slice.at(13).at("mb") == 5);
  CHECK(s.core_slice.at(13).at("out") == 1);
  CHECK(s.primary_ds_info.at("KERNEL").stick_dim_order == std::vector<std::string>{"out"});
  CHECK(s.primary_ds_info.at("INPUT").layout_dim_order == std::vector<std::string>{"mb", "in"});
  // Input A has only 8 row slices: cores c and c+8 share its symbol.
  const Allocation* a = s.allocation(0, Placement::hbm);
  REQUIRE(a);
  CHECK(a->symbolic);
  CHECK(a->start[3].value == a->start[11].value);
  CHECK(a->bytes_per_core == 64 * 16 * 128);  // 64 rows x 16 K-sticks
  const Allocation* out = s.allocation(2, Placement::hbm);
  REQUIRE(out);
  CHECK(out->bytes_per_core == 64 * 128);
  CHECK(out->span_per_core == 64 * 128);
  CHECK(out->tensor_bytes == 512 * 256 * 2);
  CHECK(s.labeled_ds[1].ds_type == "KERNEL");
}

TEST_CASE("bundle: softmax SDSCs keep intermediates in LX at literal offsets", "[bundle]") {
  BUNDLE_REQUIRE_DATA();
  Sdsc s0 = load("spyrecli_softmax_sdsc_0.json");
  const Allocation* lx = s0.allocation(1, Placement::lx);
  REQUIRE(lx);
  CHECK_FALSE(lx->symbolic);
  CHECK(lx->start[17].value == 2048);
  CHECK(lx->bytes_per_core == 16 * 1024 * 2);
  CHECK(s0.labeled_ds[1].mem_lx);
  CHECK_FALSE(s0.labeled_ds[1].mem_hbm);
  Sdsc s1 = load("spyrecli_softmax_sdsc_1.json");
  CHECK(s1.labeled_ds[1].scale == std::vector<int32_t>{1, -2});
  CHECK(s1.allocation(1, Placement::lx)->bytes_per_core == 16 * 128);  // one stick per row
  Sdsc s2 = load("spyrecli_softmax_sdsc_2.json");
  CHECK(s2.allocation(2, Placement::lx)->start[0].value == 34816);
  CHECK(s2.compute_ops[0].inputs == std::vector<uint32_t>{0, 1});
  CHECK(s2.compute_ops[0].outputs == std::vector<uint32_t>{2});
}

TEST_CASE("bundle: mean keeps its DL16 scaling constant", "[bundle]") {
  BUNDLE_REQUIRE_DATA();
  Sdsc s = load("spyrecli_mean_keepdim_sdsc_0.json");
  REQUIRE(s.constants.size() == 1);
  CHECK(s.constants[0].name == "scaling_factor");
  CHECK(s.constants[0].format == DataFormat::sen169_fp16);
  CHECK(s.constants[0].raw == std::vector<uint64_t>{10752});
  CHECK(s.compute_ops[0].inputs == std::vector<uint32_t>{0, 1});
}

TEST_CASE("bundle: isStartAddrSymbolic_ accepts both 1 and true", "[bundle]") {
  BUNDLE_REQUIRE_DATA();
  Json j = Json::parse(text_of("spyrecli_bmm_sdsc_0.json"));
  for (auto& node : dsc(j)["scheduleTree_"]) node["isStartAddrSymbolic_"] = true;
  Sdsc s = parse_sdsc_json(j.dump(), "sdsc_0.json");
  CHECK(s.allocations[0].symbolic);
  CHECK(s.symbols.size() == 24);
  // constantInfo_ may also be the string "{}".
  dsc(j)["constantInfo_"] = "{}";
  CHECK(parse_sdsc_json(j.dump(), "sdsc_0.json").constants.empty());
}

TEST_CASE("bundle: malformed SDSC inputs raise LoadError naming file, path and rule", "[bundle]") {
  BUNDLE_REQUIRE_DATA();
  using Mutate = std::function<void(Json&)>;
  struct Case {
    const char* name;
    const char* source;
    Mutate mutate;
    const char* path;  // expected JSON path fragment
    const char* rule;
    CardLimits limits = {};
  };
  const char* sm5 = "spyrecli_softmax_sdsc_5.json";
  const char* sm2 = "spyrecli_softmax_sdsc_2.json";
  const char* mm = "spyrecli_mm_sdsc_0.json";
  CardLimits small_span;
  small_span.per_core_span = 4096;
  CardLimits eight_cores;
  eight_cores.cores = 8;
  std::vector<Case> cases = {
      {"unknown op", sm5, [](Json& j) { dsc(j)["computeOp_"][0]["opFuncName"] = "frobnicate"; },
       "/5_realdiv/dscs_/0/realdiv/computeOp_/0/opFuncName", "unknown opFuncName 'frobnicate'"},
      {"coordinate dim not in the layout", mm,
       [](Json& j) { dsc(j)["scheduleTree_"][0]["coordinates_"]["coordInfo"]["zz"] = Json::object(); },
       "coordinates_/coordInfo/zz", "not in the allocation's layoutDimOrder_"},
      {"slice owner not a core id", mm,
       [](Json& j) { dsc(j)["scheduleTree_"][0]["coordinates_"]["coreIdToWkSlice_"]["core0"] = Json::object(); },
       "coordinates_/coreIdToWkSlice_/core0", "is not a number"},
      {"negative slice index", mm,
       [](Json& j) { dsc(j)["scheduleTree_"][0]["coordinates_"]["coreIdToWkSlice_"]["0"]["mb"] = -1; },
       "coordinates_/coreIdToWkSlice_/0/mb", ""},
      {"wrong engine", mm, [](Json& j) { dsc(j)["computeOp_"][0]["exUnit"] = "sfp"; },
       "computeOp_/0/exUnit", "runs on the pt array"},
      {"unknown exUnit", sm5, [](Json& j) { dsc(j)["computeOp_"][0]["exUnit"] = "gpu"; },
       "computeOp_/0/exUnit", "unknown exUnit"},
      {"LX overflow", sm2,
       [](Json& j) {
         for (auto& v : dsc(j)["scheduleTree_"][2]["startAddressCoreCorelet_"]["data_"]) v = "2015232";
       },
       "scheduleTree_/2/startAddressCoreCorelet_/data_/[0, 0, 0]", "LX overflow"},
      {"misaligned LX address", sm2,
       [](Json& j) { dsc(j)["scheduleTree_"][2]["startAddressCoreCorelet_"]["data_"]["[1, 0, 0]"] = "34818"; },
       "scheduleTree_/2/startAddressCoreCorelet_/data_/[1, 0, 0]", "not aligned to the 128-byte stick"},
      {"missing core start address", sm2,
       [](Json& j) { dsc(j)["scheduleTree_"][0]["startAddressCoreCorelet_"]["data_"].erase("[3, 0, 0]"); },
       "scheduleTree_/0/startAddressCoreCorelet_/data_", "no start address for core 3"},
      {"literal where symbol expected", sm5,
       [](Json& j) { dsc(j)["scheduleTree_"][2]["startAddressCoreCorelet_"]["data_"]["[4, 0, 0]"] = "4096"; },
       "scheduleTree_/2/startAddressCoreCorelet_/data_/[4, 0, 0]", "not a (negative) symbol id"},
      {"negative literal", sm5,
       [](Json& j) { dsc(j)["scheduleTree_"][0]["startAddressCoreCorelet_"]["data_"]["[4, 0, 0]"] = "-7"; },
       "scheduleTree_/0/startAddressCoreCorelet_/data_/[4, 0, 0]", "without isStartAddrSymbolic_"},
      {"bad fold key", sm5,
       [](Json& j) {
         auto& d = dsc(j)["scheduleTree_"][0]["startAddressCoreCorelet_"]["data_"];
         d.erase("[4, 0, 0]");
         d["[4, x, 0]"] = "2048";
       },
       "data_/[4, x, 0]", "fold key"},
      {"too many labeled tensors", sm2,
       [](Json& j) {
         auto& l = dsc(j)["labeledDs_"];
         while (l.size() < 9) l.push_back(l[0]);
       },
       "/2_sub/dscs_/0/sub/labeledDs_", "too many labeled tensors: 9"},
      {"unknown data format", sm5, [](Json& j) { dsc(j)["labeledDs_"][1]["dataFormat_"] = "FP13"; },
       "labeledDs_/1/dataFormat_", "unknown data format 'FP13'"},
      {"unknown compute format", sm5,
       [](Json& j) { dsc(j)["computeOp_"][0]["attributes_"]["dataFormat_"] = "INVALID"; },
       "computeOp_/0/attributes_/dataFormat_", "unknown data format"},
      {"wordLength mismatch", sm5, [](Json& j) { dsc(j)["labeledDs_"][0]["wordLength"] = 4; },
       "labeledDs_/0/wordLength", "does not match SEN169_FP16"},
      {"unknown dsType_", sm5, [](Json& j) { dsc(j)["labeledDs_"][0]["dsType_"] = "BOGUS"; },
       "labeledDs_/0/dsType_", "unknown dsType_"},
      {"bad scale", sm5, [](Json& j) { dsc(j)["labeledDs_"][0]["scale_"][0] = 3; },
       "labeledDs_/0/scale_/0", "scale_ entries"},
      {"core id out of range", sm5,
       [](Json& j) {
         auto& m = j.begin().value()["coreIdToWkSlice_"];
         Json v = m["31"];
         m.erase("31");
         m["40"] = v;
       },
       "/5_realdiv/coreIdToWkSlice_/40", "core id 40 out of range"},
      {"too many cores", sm5, [](Json& j) { j.begin().value()["numCoresUsed_"] = 33; },
       "/5_realdiv/numCoresUsed_", "exceeds the card's 32 cores"},
      {"cores beyond a smaller card", mm, [](Json&) {}, "/0_batchmatmul/numCoresUsed_",
       "exceeds the card's 8 cores", eight_cores},
      {"slices product", sm5, [](Json& j) { j.begin().value()["numWkSlicesPerDim_"]["mb"] = 16; },
       "/5_realdiv/numWkSlicesPerDim_", "product of slices is 16"},
      {"two cores, one slice", sm5, [](Json& j) { j.begin().value()["coreIdToWkSlice_"]["7"]["mb"] = 3; },
       "/5_realdiv/coreIdToWkSlice_/7", "two cores own the same slice"},
      {"slice index out of range", sm5, [](Json& j) { j.begin().value()["coreIdToWkSlice_"]["7"]["mb"] = 32; },
       "coreIdToWkSlice_/7/mb", "outside [0, 31]"},
      {"coreIdsUsed_ differs", sm5, [](Json& j) { dsc(j)["coreIdsUsed_"][5] = 0; },
       "realdiv/coreIdsUsed_", "coreIdsUsed_ differs"},
      {"schedule names a missing DSC", sm5,
       [](Json& j) { j.begin().value()["coreIdToDscSchedule"]["3"][0][1] = 2; },
       "coreIdToDscSchedule/3/0/1", "does not name an existing DSC"},
      {"schedules differ", sm5,
       [](Json& j) { j.begin().value()["coreIdToDscSchedule"]["3"][0][3] = 1; },
       "coreIdToDscSchedule/3", "identical schedules"},
      {"ss_ inconsistent with N_", sm5,
       [](Json& j) { dsc(j)["dataStageParam_"]["0"]["ss_"]["mb_"] = 17; },
       "dataStageParam_/0/ss_", "work division inconsistent"},
      {"slice not a whole number of sticks", mm,
       [](Json& j) { dsc(j)["primaryDsInfo_"]["OUTPUT"]["stickSize_"][0] = 48; },
       "primaryDsInfo_/OUTPUT/stickDimOrder_", "whole number of sticks"},
      {"per-core HBM span", mm, [](Json&) {}, "scheduleTree_/0", "per-core HBM span", small_span},
      {"bad operand reference", sm5, [](Json& j) { dsc(j)["computeOp_"][0]["inputLabeledDs"][0] = "Tensor9-idx9"; },
       "computeOp_/0/inputLabeledDs/0", "does not name a labeled tensor"},
      {"missing N_", sm5, [](Json& j) { dsc(j).erase("N_"); }, "/5_realdiv/dscs_/0/realdiv",
       "missing required field 'N_'"},
      {"layout dim unknown", sm5, [](Json& j) { dsc(j)["scheduleTree_"][1]["layoutDimOrder_"][0] = "zz"; },
       "scheduleTree_/1/layoutDimOrder_/0", "not in N_"},
      {"bad component", sm5, [](Json& j) { dsc(j)["scheduleTree_"][1]["component_"] = "ddr"; },
       "scheduleTree_/1/component_", "must be \"hbm\" or \"lx\""},
      {"hbm allocation of an LX-only tensor", sm5,
       [](Json& j) { dsc(j)["scheduleTree_"][1]["component_"] = "hbm"; }, "scheduleTree_/1/component_",
       "memOrg_"},
      {"no compute and no data op", sm5, [](Json& j) { j.begin().value()["dscs_"] = Json::array(); },
       "/5_realdiv/dscs_", "neither dscs_ nor dataOpdscs_"},
      {"envelope with two keys", sm5, [](Json& j) { j["6_extra"] = Json::object(); }, "/",
       "exactly one key"},
      {"bad envelope key", sm5,
       [](Json& j) {
         Json v = j.begin().value();
         j = Json::object();
         j["realdiv"] = v;
       },
       "/realdiv", "is not \"<N>_<opfunc>\""},
      {"constant does not fit its format", "spyrecli_mean_keepdim_sdsc_0.json",
       [](Json& j) { dsc(j)["constantInfo_"]["0"]["data_"]["data_"]["[0, 0, 0]"][0] = "70000"; },
       "constantInfo_/0/data_/data_/[0, 0, 0]/0", "does not fit SEN169_FP16"},
      {"backGapCore_ on a dim the allocation lacks", mm,
       [](Json& j) { dsc(j)["scheduleTree_"][0]["backGapCore_"] = {{"zz", {{"-1", "64"}}}}; },
       "scheduleTree_/0/backGapCore_/zz", "not in the allocation's layoutDimOrder_"},
      {"backGapCore_ that differs per core", sm2,
       [](Json& j) {
         const std::string d = dsc(j)["scheduleTree_"][2]["layoutDimOrder_"][0].get<std::string>();
         dsc(j)["scheduleTree_"][2]["backGapCore_"] = {{d, {{"0", "64"}, {"1", "32"}}}};
       },
       "scheduleTree_/2/backGapCore_/", "differs from another core's 64 (per-core gaps are not supported)"},
      {"backGapCore_ gap not a number", mm,
       [](Json& j) {
         const std::string d = dsc(j)["scheduleTree_"][0]["layoutDimOrder_"][0].get<std::string>();
         dsc(j)["scheduleTree_"][0]["backGapCore_"] = {{d, {{"-1", "sixty"}}}};
       },
       "scheduleTree_/0/backGapCore_/", "expected a decimal element count, got 'sixty'"},
      {"backGapCore_ core key that is not a used core", mm,
       [](Json& j) {
         const std::string d = dsc(j)["scheduleTree_"][0]["layoutDimOrder_"][0].get<std::string>();
         dsc(j)["scheduleTree_"][0]["backGapCore_"] = {{d, {{"99", "1"}}}};
       },
       "scheduleTree_/0/backGapCore_/", "core key '99' is neither \"-1\" nor a used core id"},
      {"coordinateMasking_ on a dim not in N_", mm,
       [](Json& j) { dsc(j)["coordinateMasking_"] = {{"zz", {{0, 1}}}}; },
       "coordinateMasking_/zz", "is not in N_"},
      {"coordinateMasking_ range past N_", mm,
       [](Json& j) {
         const int64_t n = dsc(j)["N_"]["mb_"].get<int64_t>();
         dsc(j)["coordinateMasking_"] = {{"mb", {{n - 1, 2}}}};
         dsc(j)["maskingConstId_"] = 0;
       },
       "coordinateMasking_/mb/0", "runs past N_"},
      {"coordinateMasking_ without its mask constant", mm,
       [](Json& j) {
         dsc(j)["coordinateMasking_"] = {{"mb", {{0, 1}}}};
         dsc(j)["maskingConstId_"] = 3;
       },
       "maskingConstId_", "no constantInfo_ entry '3' for the mask value"},
      {"wrong type", sm5, [](Json& j) { j.begin().value()["numCoresUsed_"] = "32"; },
       "/5_realdiv/numCoresUsed_", "expected an integer"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    Json j = Json::parse(text_of(c.source));
    c.mutate(j);
    std::string msg = error_of(j.dump(), "sdsc_9.json", c.limits);
    INFO(msg);
    CHECK(msg.rfind("sdsc_9.json: ", 0) == 0);
    CHECK(msg.find(c.path) != std::string::npos);
    CHECK(msg.find(c.rule) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
}

TEST_CASE("bundle: malformed SDSC text is rejected, never crashes", "[bundle]") {
  BUNDLE_REQUIRE_DATA();
  std::string text = text_of("spyrecli_softmax_sdsc_3.json");
  for (size_t cut : {size_t{0}, size_t{1}, text.size() / 3, text.size() / 2, text.size() - 1}) {
    INFO(cut);
    std::string msg = error_of(text.substr(0, cut), "sdsc_3.json");
    CHECK(msg.rfind("sdsc_3.json: /: invalid JSON", 0) == 0);
  }
  std::string deep(100000, '[');
  CHECK(error_of(deep, "sdsc_3.json").find("nested deeper") != std::string::npos);
  CHECK(error_of("[1, 2]", "sdsc_3.json").find("expected an object") != std::string::npos);
  CHECK(error_of("{\"0_x\": []}", "sdsc_3.json").find("/0_x: expected an object") != std::string::npos);
}

TEST_CASE("bundle: a coordinate fold with factor_ 0 loads (the compiler writes it for index_select)", "[bundle]") {
  BUNDLE_REQUIRE_DATA();
  Json j = Json::parse(text_of("spyrecli_mm_sdsc_0.json"));
  dsc(j)["scheduleTree_"][0]["coordinates_"]["coordInfo"]["mb"]["folds"]["dim_prop_attr"][3]["factor_"] = 0;
  const Sdsc s = parse_sdsc_json(j.dump(), "sdsc_0.json");
  CHECK(s.allocations[0].coord_folds.at("mb").at(3).factor == 0);
}

TEST_CASE("bundle: backGapCore_ widens an HBM tensor and each core's LX slice", "[bundle]") {
  BUNDLE_REQUIRE_DATA();
  // HBM (the mm input, node 0): the whole tensor grows by the gap along the dim.
  Json j = Json::parse(text_of("spyrecli_mm_sdsc_0.json"));
  const Sdsc plain = parse_sdsc_json(j.dump(), "sdsc_0.json");
  const Allocation& a0 = plain.allocations.at(0);
  REQUIRE(a0.placement == Placement::hbm);
  const std::string outer = a0.layout_dim_order.back();  // a non-stick dim of more than one element
  const int64_t n = plain.n_of(outer);
  REQUIRE(n > 1);
  dsc(j)["scheduleTree_"][0]["backGapCore_"] = {{outer, {{"-1", std::to_string(n)}}}};
  const Sdsc gapped = parse_sdsc_json(j.dump(), "sdsc_0.json");
  CHECK(gapped.allocations.at(0).back_gap == std::map<std::string, int64_t>{{outer, n}});
  CHECK(gapped.allocations.at(0).tensor_bytes == 2 * a0.tensor_bytes);  // twice the extent
  CHECK(gapped.allocations.at(0).bytes_per_core == a0.bytes_per_core);  // the same slices
  // LX (a softmax intermediate): each core's slice grows, one key per core, all equal.
  Json l = Json::parse(text_of("spyrecli_softmax_sdsc_2.json"));
  const Sdsc lplain = parse_sdsc_json(l.dump(), "sdsc_2.json");
  const Allocation& x = lplain.allocations.at(2);
  REQUIRE(x.placement == Placement::lx);
  Json per_core = Json::object();
  for (uint32_t c : lplain.core_ids) per_core[std::to_string(c)] = 64;  // integers load too
  // The stick dim: 64 more elements is one more stick per row of sticks.
  const std::string stick = lplain.layout_for(lplain.labeled_ds.at(x.lds_idx))->stick_dim_order.at(0);
  dsc(l)["scheduleTree_"][2]["backGapCore_"] = {{stick, per_core}};
  const Sdsc lgapped = parse_sdsc_json(l.dump(), "sdsc_2.json");
  const Allocation& y = lgapped.allocations.at(2);
  CHECK(y.back_gap.at(stick) == 64);
  CHECK(y.bytes_per_core > x.bytes_per_core);
  CHECK(y.tensor_bytes == x.tensor_bytes);
}
