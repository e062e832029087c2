// The fp16 <-> fp32 conversions' staggered element order (exec::detail::stagger_axis), on
// bundles the real torch-spyre compiler wrote (tests/fixtures/captured/README.md, "Staggered
// conversions"): fp32todl16 and dl16tofp32 leave their outputs in the order the card's SFP packs
// and unpacks sticks, a round trip gives the input back, and torch-spyre's stagger_to_standard_ea
// (a vector times a permutation matrix) restores the standard order.
#include "catch.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bundle_test_util.h"
#include "sim/bundle/bundle.h"
#include "sim/exec/exec.h"
#include "sim/exec/layout.h"
#include "sim/exec/reference.h"
#include "sim/formats/formats.h"
#include "sim/plan/lower.h"
#include "test_files.h"

namespace fs = std::filesystem;
using namespace vspyre;
using Json = nlohmann::ordered_json;

namespace {

using bundle_test::k_captured;
using bundle_test::Kernel;
using bundle_test::slurp;

// Which element of a 64-group of the input each output position holds, written out from the
// layout torch-spyre documents (customops.py, stagger_to_standard_ea): fp16 position p = 8k + w
// holds fp32 element 4k + w for w < 4 and 4k + (w - 4) + 32 otherwise.
int64_t fp16_position_holds(int64_t p) {
  const int64_t k = p / 8, w = p % 8;
  return w < 4 ? 4 * k + w : 4 * k + (w - 4) + 32;
}

// DL16 rounding of an fp32 value, as the device stores it.
float dl16(float v) {
  uint16_t bits = 0;
  fmt::store_element(fmt::DataFormat::SEN169_FP16, &bits, 0, double(v));
  return float(fmt::load_element(fmt::DataFormat::SEN169_FP16, &bits, 0));
}

}  // namespace

TEST_CASE("stagger: the source index of every position is a permutation and the two conversions undo each other",
          "[stagger]") {
  std::vector<int> seen_a(64, 0), seen_b(64, 0);
  for (int64_t j = 0; j < 64; ++j) {
    const int64_t a = exec::detail::stagger_source("fp32todl16", j);
    const int64_t b = exec::detail::stagger_source("dl16tofp32", j);
    REQUIRE(a >= 0);
    REQUIRE(a < 64);
    REQUIRE(b >= 0);
    REQUIRE(b < 64);
    ++seen_a[size_t(a)];
    ++seen_b[size_t(b)];
    CHECK(a == fp16_position_holds(j));
    // fp32todl16 then dl16tofp32: position j of the result holds element j of the input.
    CHECK(exec::detail::stagger_source("fp32todl16", exec::detail::stagger_source("dl16tofp32", j)) == j);
  }
  CHECK(std::count(seen_a.begin(), seen_a.end(), 1) == 64);
  CHECK(std::count(seen_b.begin(), seen_b.end(), 1) == 64);
  // The first four lanes stay, the next four come from the second fp32 stick.
  CHECK(exec::detail::stagger_source("fp32todl16", 3) == 3);
  CHECK(exec::detail::stagger_source("fp32todl16", 4) == 32);
  CHECK(exec::detail::stagger_source("fp32todl16", 8) == 4);
}

TEST_CASE("stagger: fp32todl16 leaves each 64-group of the stick dim in the card's packed order", "[stagger]") {
  // x.to(float16) of fp32 [4, 64], 4 cores; its output checked against the reference too
  const auto [x, y] = bundle_test::run_captured("fp32todl16_4x64_c4", 3);
  REQUIRE(x.size() == 4 * 64);
  REQUIRE(y.size() == 4 * 64);
  size_t wrong = 0, moved = 0;
  for (size_t r = 0; r < 4; ++r)
    for (int64_t p = 0; p < 64; ++p) {
      const float want = dl16(x[r * 64 + size_t(fp16_position_holds(p))]);
      wrong += y[r * 64 + size_t(p)] != want;
      moved += y[r * 64 + size_t(p)] != dl16(x[r * 64 + size_t(p)]);
    }
  CHECK(wrong == 0);
  CHECK(moved > 100);  // not the standard order
}

TEST_CASE("stagger: dl16tofp32 unpacks in the card's order, and fp32todl16's order undoes it",
          "[stagger]") {
  // dl16tofp32 of fp16 [4, 128] on 8 cores; then the executor's fp32todl16 order (the one the
  // fp32todl16 capture above is checked against) applied to its output.
  const auto [x, w] = bundle_test::run_captured("dl16tofp32_4x128_c8", 5);  // checked against the reference too
  REQUIRE(w.size() == x.size());
  // The fp32 result is staggered: position 32s + 4k + v holds element 8k + 4s + v (exact: widening).
  size_t wrong = 0;
  for (size_t r = 0; r < 4; ++r)
    for (int64_t g = 0; g < 128; g += 64)
      for (int64_t q = 0; q < 64; ++q) {
        const int64_t s = q / 32, kk = (q % 32) / 4, v = q % 4;
        wrong += w[r * 128 + size_t(g + q)] != x[r * 128 + size_t(g + 8 * kk + 4 * s + v)];
      }
  CHECK(wrong == 0);

  // Back: the executor's own fp32todl16 on the staggered values restores x exactly.
  std::vector<uint8_t> host(fmt::bytes_for(fmt::DataFormat::IEEE_FP32, w.size()));
  for (size_t i = 0; i < w.size(); ++i) fmt::store_element(fmt::DataFormat::IEEE_FP32, host.data(), i, double(w[i]));
  exec::detail::stagger("fp32todl16", host.data(), 4, {4, 128}, 1);
  size_t back = 0;
  for (size_t i = 0; i < x.size(); ++i) back += float(fmt::load_element(fmt::DataFormat::IEEE_FP32, host.data(), i)) != x[i];
  CHECK(back == 0);
}

TEST_CASE("stagger: torch-spyre's stagger_to_standard_ea restores the standard order on the virtual card",
          "[stagger]") {
  // fp32 [64] -> fp16 (fp32todl16, staggered), then stagger_to_standard_ea: a ReStickifyOpHBM of
  // the permutation matrix P and the vector times it (a batchmatmul with no M dim).
  Kernel down(k_captured / "fp32todl16_64_c1");
  Kernel mm(k_captured / "unstagger_mm_64_c1");
  REQUIRE(down.kts.size() == 2);
  REQUIRE(mm.kts.size() == 3);
  exec::SparseMemory mem;
  exec::write_random_input(mem, down.kts[0], 7);
  const std::vector<float> x = exec::read_tensor(mem, down.kts[0].info);
  exec::run(down.lb, down.plan, mem);
  const std::vector<float> staggered = exec::read_tensor(mem, down.kts[1].info);
  REQUIRE(staggered.size() == 64);

  // P as torch-spyre builds it: P[logical, physical] = 1 where fp16 position `physical` holds
  // element `logical`; the kernel multiplies by P.t() (arg0), the vector is arg1.
  const exec::KernelTensor* pk = nullptr;
  const exec::KernelTensor* vk = nullptr;
  const exec::KernelTensor* ok = nullptr;
  for (const auto& kt : mm.kts) (kt.arg_index == 0 ? pk : kt.arg_index == 1 ? vk : ok) = &kt;
  REQUIRE(pk);
  REQUIRE(vk);
  REQUIRE(ok);
  REQUIRE(pk->info.numel() == 64 * 64);
  std::vector<float> p(64 * 64, 0.0f);
  for (int64_t phys = 0; phys < 64; ++phys) p[size_t(fp16_position_holds(phys) * 64 + phys)] = 1.0f;
  exec::write_tensor(mem, pk->info, p);
  exec::write_tensor(mem, vk->info, staggered);
  exec::run(mm.lb, mm.plan, mem);
  const std::vector<float> y = exec::read_tensor(mem, ok->info);
  REQUIRE(y.size() == 64);
  size_t wrong = 0;
  for (size_t i = 0; i < 64; ++i) wrong += y[i] != dl16(x[i]);  // a permutation: exact
  CHECK(wrong == 0);
}

TEST_CASE("stagger: a conversion whose stick dim is not whole 64-groups is refused, naming the SDSC", "[stagger]") {
  // The [4, 64] capture with N_ and every size of the stick dim cut to 32: the packed order would
  // put half of each row in lanes past the dim's size.
  vspyre::testing::TempDir tmp;
  const fs::path src = k_captured / "fp32todl16_4x64_c4";
  fs::copy_file(src / "bundle.mlir", tmp.dir / "bundle.mlir");
  std::string text = slurp(src / "sdsc_0.json");
  Json j = Json::parse(text);
  Json& inner = j.begin().value()["dscs_"][0].begin().value();
  inner["N_"]["out_"] = 32;
  for (auto& [_, st] : inner["dataStageParam_"].items())
    for (const char* key : {"ss_", "el_"}) st[key]["out_"] = 32;
  std::ofstream(tmp.dir / "sdsc_0.json") << j.dump();
  Kernel k(tmp.dir);
  exec::SparseMemory mem;
  exec::write_random_input(mem, k.kts[0], 3);
  try {
    exec::run(k.lb, k.plan, mem);
    FAIL("expected ExecError");
  } catch (const exec::ExecError& e) {
    const std::string what = e.what();
    CHECK(what.find("sdsc_0.json") != std::string::npos);
    CHECK(what.find("fp32todl16") != std::string::npos);
    CHECK(what.find("multiple of 64") != std::string::npos);
  }
}
