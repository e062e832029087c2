// Gathers and scatters (bundle::IndirectAccess) as the real torch-spyre compiler writes them
// (tests/fixtures/captured/README.md, "Gathers and scatters"): the loader's checks, the
// executor's rows against a gather computed here on the host from the inputs as memory holds
// them, and the plan's index load and per-row runs.
#include "catch.h"

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bundle_test_util.h"
#include "models/card.h"
#include "models/plan_runner.h"
#include "sim/bundle/bundle.h"
#include "sim/engine/simulation.h"
#include "sim/exec/exec.h"
#include "sim/exec/reference.h"
#include "sim/plan/lower.h"
#include "test_files.h"

namespace fs = std::filesystem;
using namespace vspyre;
using Json = nlohmann::ordered_json;

namespace {

using bundle_test::k_captured;
using bundle_test::slurp;
const fs::path k_gather = k_captured / "gather_128x256_i32_c1";
const fs::path k_scatter = k_captured / "index_put_128x256_i32_c1";
const fs::path k_embedding = k_captured / "embedding_32000x512_ids2x128_c1";

// The kernel tensors of `dir` and its plan, ready to run.
struct Kernel {
  bundle::LoadedBundle lb;
  bundle::Bindings b;
  std::vector<bundle::ResolvedExecution> plan;
  std::vector<exec::KernelTensor> kts;
  explicit Kernel(const fs::path& dir) : lb(bundle::load_bundle(dir)) {
    b = plan::default_bindings(lb);
    plan = bundle::resolve(lb, b);
    kts = exec::kernel_tensors(lb, plan, b);
  }
  const exec::KernelTensor& arg(size_t i) const {
    for (const auto& kt : kts)
      if (kt.arg_index == i && kt.offset == 0) return kt;
    FAIL("no kernel tensor for arg" << i);
    return kts.front();
  }
};

// Writes integer row numbers to an index tensor.
void put_indices(exec::Memory& mem, const exec::TensorInfo& info, const std::vector<uint32_t>& rows) {
  REQUIRE(size_t(info.numel()) == rows.size());
  std::vector<uint8_t> raw(fmt::bytes_for(info.format, rows.size()));
  for (size_t i = 0; i < rows.size(); ++i) fmt::store_element(info.format, raw.data(), i, double(rows[i]));
  exec::write_tensor_raw(mem, info, raw);
}

}  // namespace

TEST_CASE("indirect: the loader reads torch-spyre's gather as a value tensor reached through an index", "[indirect]") {
  const auto lb = bundle::load_bundle(k_embedding);
  const bundle::Sdsc& s = lb.sdsc("sdsc_1.json");
  REQUIRE(s.indirect.size() == 1);
  const bundle::IndirectAccess& ia = s.indirect[0];
  CHECK(ia.value_lds == 1);
  CHECK(ia.index_lds == 0);
  CHECK(ia.dims == std::vector<std::string>{"mb", "x"});  // a 2-D index: both dims of the view's rows
  CHECK(s.is_index_tensor(0));
  CHECK(s.compute_ops.at(0).index_inputs == std::vector<uint32_t>{0});
  CHECK(lb.sdsc("sdsc_0.json").indirect.empty());
}

TEST_CASE("indirect: a malformed gather is refused naming the file, the JSON path and the rule", "[indirect]") {
  const std::string text = slurp(k_gather / "sdsc_1.json");
  auto inner = [](Json& j) -> Json& { return j.begin().value()["dscs_"][0].begin().value(); };
  const std::vector<bundle_test::Refusal> cases = {
      {"unknown indirectAllocType_", [&](Json& j) { inner(j)["scheduleTree_"][1]["indirectAllocType_"] = "paged"; },
       "scheduleTree_/1/indirectAllocType_", "unknown indirectAllocType_ 'paged'"},
      {"address-type index", [&](Json& j) { inner(j)["scheduleTree_"][0]["indexTensorType_"] = "address"; },
       "scheduleTree_/0", "indexTensorType_ 'address' is not supported"},
      {"related allocation not the pair",
       [&](Json& j) { inner(j)["scheduleTree_"][1]["relatedIndirectAccessAlloc_"] = "allocate-Tensor2_hbm"; },
       "scheduleTree_/0", "relatedIndirectAccessAlloc_ 'allocate-Tensor1_hbm' must name this SDSC's value_tensor"},
      {"index bounded per dim", [&](Json& j) { inner(j)["scheduleTree_"][1]["maxDimSizes_"][1] = 4; },
       "scheduleTree_/1", "only -1 (direct) and 1 (replaced by the index) are supported"},
      {"stick dim indirect", [&](Json& j) { inner(j)["scheduleTree_"][1]["maxDimSizes_"] = Json::array({1, 1}); },
       "scheduleTree_/1", "makes the stick dimension 'out' indirect"},
      {"no indirect dim", [&](Json& j) { inner(j)["scheduleTree_"][1]["maxDimSizes_"] = Json::array({-1, -1}); },
       "scheduleTree_/1", "needs maxDimSizes_ 1 on the dims its index replaces"},
      {"index not listed by the op", [&](Json& j) { inner(j)["computeOp_"][0].erase("indirectAccessIndexLabeledDs"); },
       "computeOp_/0", "which indirectAccessIndexLabeledDs does not list"},
      {"index as an operand",
       [&](Json& j) { inner(j)["computeOp_"][0]["inputLabeledDs"] = Json::array({"Tensor0-idx0", "Tensor1-idx1"}); },
       "computeOp_/0", "index tensor 0 is an operand"},
      {"KERNEL_IDX tensor without an index allocation",
       [&](Json& j) {
         inner(j)["scheduleTree_"][0]["indirectAllocType_"] = "no_indirection";
       },
       "scheduleTree_/0", "has dsType_ \"KERNEL_IDX\" but its allocation's indirectAllocType_ is not"},
      {"index tensor in a float format",
       [&](Json& j) {
         inner(j)["labeledDs_"][0]["dataFormat_"] = "IEEE_FP32";
       },
       "scheduleTree_/0", "must be SENUINT32 or IEEE_INT32"},
      {"index tensor in LX",
       [&](Json& j) {
         inner(j)["labeledDs_"][0]["memOrg_"]["lx"] = Json{{"isPresent", 1}};
         inner(j)["scheduleTree_"][0]["component_"] = "lx";
       },
       "scheduleTree_/0/indirectAllocType_", "must be in hbm, not lx"},
  };
  bundle_test::check_refusals(text, "sdsc_1.json", cases);
}

TEST_CASE("indirect: indexing x by i gathers the rows its index picks, repeats and the last row included", "[indirect]") {
  Kernel k(k_gather);
  const auto& x = k.arg(0);
  const auto& idx = k.arg(1);
  const auto& out = k.arg(2);
  CHECK(idx.index_bound == 128);  // the rows of the source the compiler copies first
  exec::SparseMemory mem;
  exec::write_tensor(mem, x.info, exec::random_values(3, 0, size_t(x.info.numel())));
  std::vector<uint32_t> rows(32);
  for (size_t p = 0; p < rows.size(); ++p) rows[p] = uint32_t((p * 37 + 5) % 128);
  rows[0] = 127;
  rows[1] = 127;
  rows[31] = 0;
  put_indices(mem, idx.info, rows);
  const std::vector<float> xs = exec::read_tensor(mem, x.info);
  exec::run(k.lb, k.plan, mem);
  const std::vector<float> got = exec::read_tensor(mem, out.info);
  REQUIRE(got.size() == 32 * 256);
  size_t wrong = 0;
  for (size_t p = 0; p < 32; ++p)
    for (size_t c = 0; c < 256; ++c) wrong += got[p * 256 + c] != xs[rows[p] * 256 + c];
  CHECK(wrong == 0);
  const exec::RefResult ref = exec::reference(k.plan, k.kts, mem);
  // The reference was taken after the run: the inputs are still in memory (the outputs do not
  // overlap them), so it gathers the same rows.
  for (size_t i = 0; i < k.kts.size(); ++i)
    if (k.kts[i].written) {
      REQUIRE(ref.outputs.count(i));
      CHECK(exec::compare(got, ref.outputs.at(i)).pass);
    }
}

TEST_CASE("indirect: index_put writes each source row to the row its index picks and keeps the others", "[indirect]") {
  Kernel k(k_scatter);
  const auto& x = k.arg(0);
  const auto& idx = k.arg(1);
  const auto& src = k.arg(2);
  const auto& out = k.arg(3);
  exec::SparseMemory mem;
  exec::write_tensor(mem, x.info, exec::random_values(4, 0, size_t(x.info.numel())));
  exec::write_tensor(mem, src.info, exec::random_values(4, 2, size_t(src.info.numel())));
  // Distinct rows, the first of them far from row 0: a scatter whose first row came out as
  // the index's own bytes (the image buffer reused while reading the index) is caught.
  std::vector<uint32_t> rows(32);
  for (size_t p = 0; p < rows.size(); ++p) rows[p] = uint32_t((p * 53 + 27) % 128);
  put_indices(mem, idx.info, rows);
  std::vector<float> want = exec::read_tensor(mem, x.info);
  const std::vector<float> s = exec::read_tensor(mem, src.info);
  for (size_t p = 0; p < 32; ++p) std::memcpy(&want[rows[p] * 256], &s[p * 256], 256 * sizeof(float));
  exec::run(k.lb, k.plan, mem);
  const std::vector<float> got = exec::read_tensor(mem, out.info);
  REQUIRE(got.size() == want.size());
  size_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) wrong += got[i] != want[i];
  CHECK(wrong == 0);
}

TEST_CASE("indirect: an embedding lookup with a 2-D index gathers table rows", "[indirect]") {
  Kernel k(k_embedding);
  const auto& table = k.arg(0);
  const auto& ids = k.arg(1);
  const auto& out = k.arg(2);
  CHECK(ids.index_bound == 32000);
  exec::SparseMemory mem;
  exec::write_tensor(mem, table.info, exec::random_values(5, 0, size_t(table.info.numel())));
  std::vector<uint32_t> rows(256);
  for (size_t p = 0; p < rows.size(); ++p) rows[p] = uint32_t((p * 7919 + 11) % 32000);
  put_indices(mem, ids.info, rows);  // host order [mb=2][x=128]
  const std::vector<float> t = exec::read_tensor(mem, table.info);
  exec::run(k.lb, k.plan, mem);
  const std::vector<float> got = exec::read_tensor(mem, out.info);
  REQUIRE(got.size() == 256 * 512);
  size_t wrong = 0;
  for (size_t p = 0; p < 256; ++p)
    for (size_t c = 0; c < 512; ++c) wrong += got[p * 512 + c] != t[size_t(rows[p]) * 512 + c];
  CHECK(wrong == 0);
}

TEST_CASE("indirect: an index past the gathered tensor's rows is an error naming the tensors", "[indirect]") {
  Kernel k(k_gather);
  exec::SparseMemory mem;
  exec::write_tensor(mem, k.arg(0).info, exec::random_values(3, 0, size_t(k.arg(0).info.numel())));
  std::vector<uint32_t> rows(32, 3);
  rows[7] = 128;
  put_indices(mem, k.arg(1).info, rows);
  try {
    exec::run(k.lb, k.plan, mem);
    FAIL("no error");
  } catch (const exec::ExecError& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("sdsc_1.json") != std::string::npos);
    CHECK(msg.find("is 128, outside the rows [0, 128)") != std::string::npos);
  }
}

TEST_CASE("indirect: random kernel inputs give an index tensor row numbers below the gathered rows", "[indirect]") {
  Kernel k(k_gather);
  exec::SparseMemory mem;
  for (const auto& kt : k.kts)
    if (kt.read_first) exec::write_random_input(mem, kt, 1);
  const std::vector<float> v = exec::read_tensor(mem, k.arg(1).info);
  float lo = 1e9f, hi = -1e9f;
  for (float x : v) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    CHECK(x == float(int(x)));
  }
  CHECK(lo >= 0);
  CHECK(hi <= 127);
  CHECK(hi - lo > 64);  // spread over the rows, not all 0
}

TEST_CASE("indirect: the plan loads the index, then the gathered rows one run each", "[indirect]") {
  SimOptions o;
  o.config_file = std::string(VSPYRE_SOURCE_DIR) + "/configs/spyre.yaml";
  Simulation sim(resolve_config(o));
  Card& card = sim.top_as<Card>();
  Kernel k(k_gather);
  const plan::Plan p = plan::lower(k.lb, k.plan, plan_card_params(card));
  const plan::Stage* st = nullptr;
  for (const auto& s : p.stages())
    if (s.sdsc() == "sdsc_1.json") st = &s;
  REQUIRE(st);
  REQUIRE(st->cores_size() == 1);
  const auto& ops = st->cores(0).ops();
  int index_load = -1, rows_load = -1;
  for (int i = 0; i < ops.size(); ++i) {
    if (ops[i].kind() != plan::Op::DMA_IN) continue;
    if (ops[i].tensor() == 0) index_load = i;
    if (ops[i].tensor() == 1) rows_load = i;
  }
  REQUIRE(index_load >= 0);
  REQUIRE(rows_load >= 0);
  CHECK(ops[index_load].bytes() == 128);      // 32 SENUINT32 indices: one stick
  CHECK(ops[rows_load].bytes() == 32 * 512);  // 32 rows of 256 DL16
  CHECK(ops[rows_load].run_bytes() == 512);   // one run per row
  const auto& deps = ops[rows_load].deps();
  CHECK(std::find(deps.begin(), deps.end(), uint32_t(index_load)) != deps.end());
  // And it runs on the card.
  const PlanResult r = run_plan(card, p);
  CHECK(r.kernel_ps > 0);
}

TEST_CASE("indirect: memory holds the indexed dims outermost, wherever a one-index view lists them", "[indirect]") {
  // torch-spyre lists an indexed dim of one index anywhere in the value view's layoutDimOrder_
  // (a size-1 dim has no stride to sort by): its index_select of one position from a
  // [16, 2, 2, 64] cache lists the indexed dim innermost with two dims of two outside it, and
  // its index_copy_ of one row along dim 2 of [1, 4, 64, 256] lists it innermost with 4 x 4
  // sticks outside. The card addresses the indexed dim at device position 0 (outermost), which
  // is where the copy before each writes it (IndirectAccess::memory_order).
  {
    Kernel k(k_captured / "index_select_1tok_16x2x2x64_c1");
    const bundle::Sdsc& s = k.lb.sdsc("sdsc_1.json");
    REQUIRE(s.indirect.size() == 1);
    CHECK(s.indirect[0].dims == std::vector<std::string>{"y"});
    CHECK(s.indirect[0].memory_order({"y", "x", "mb", "out"}) == std::vector<std::string>{"x", "mb", "out", "y"});
    const auto& cache = k.arg(0);
    const auto& idx = k.arg(1);
    const auto& out = k.arg(2);
    CHECK(idx.index_bound == 16);
    REQUIRE(out.info.numel() == 2 * 2 * 64);
    for (uint32_t p : {0u, 9u, 15u}) {
      INFO("position " << p);
      exec::SparseMemory mem;
      exec::write_tensor(mem, cache.info, exec::random_values(6, 0, size_t(cache.info.numel())));
      put_indices(mem, idx.info, {p});
      const std::vector<float> c = exec::read_tensor(mem, cache.info);
      exec::run(k.lb, k.plan, mem);
      const std::vector<float> got = exec::read_tensor(mem, out.info);  // [2, 2, 64, 1]
      size_t wrong = 0;
      for (size_t e = 0; e < 256; ++e) wrong += got[e] != c[p * 256 + e];  // cache[p]
      CHECK(wrong == 0);
    }
  }
  {
    Kernel k(k_captured / "index_copy_dim2_4x64x256_p1_c32");
    const auto& dst = k.arg(0);
    const auto& idx = k.arg(1);
    const auto& src = k.arg(2);
    CHECK(idx.index_bound == 64);
    REQUIRE(dst.info.size == std::vector<int64_t>{4, 64, 256});
    REQUIRE(src.info.numel() == 4 * 256);
    for (uint32_t row : {0u, 7u, 63u}) {
      INFO("row " << row);
      exec::SparseMemory mem;
      exec::write_tensor(mem, dst.info, exec::random_values(7, 0, size_t(dst.info.numel())));
      exec::write_tensor(mem, src.info, exec::random_values(7, 2, size_t(src.info.numel())));
      put_indices(mem, idx.info, {row});
      std::vector<float> want = exec::read_tensor(mem, dst.info);
      const std::vector<float> sv = exec::read_tensor(mem, src.info);  // [4, 256, 1]
      for (size_t h = 0; h < 4; ++h)
        for (size_t c = 0; c < 256; ++c) want[(h * 64 + row) * 256 + c] = sv[h * 256 + c];
      exec::run(k.lb, k.plan, mem);
      const std::vector<float> got = exec::read_tensor(mem, dst.info);
      size_t wrong = 0;
      for (size_t i = 0; i < got.size(); ++i) wrong += got[i] != want[i];
      CHECK(wrong == 0);
    }
  }
}
