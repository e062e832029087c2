// Reductions over several dims in one SDSC (labeledDs_ scale_ [-1, -2]), as the real torch-spyre
// compiler writes torch.amax(x), x.sum(), x.mean() and amin over dims (0, 2)
// (tests/fixtures/captured/README.md, "Reductions over several dims"): the executor against
// values computed here on the host from the input as memory holds it.
#include "catch.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "bundle_test_util.h"
#include "sim/bundle/bundle.h"
#include "sim/exec/exec.h"
#include "sim/exec/reference.h"
#include "sim/plan/lower.h"

namespace fs = std::filesystem;
using namespace vspyre;

namespace {

using bundle_test::k_captured;
using bundle_test::run_captured;

}  // namespace

TEST_CASE("reduce dims: amax, sum and mean of a whole 256x256 tensor on 32 cores", "[exec][reduce]") {
  {
    const auto [x, y] = run_captured("amax_all_256x256_c32", 2);
    REQUIRE(x.size() == 256 * 256);
    REQUIRE(y.size() == 1);
    CHECK(y[0] == *std::max_element(x.begin(), x.end()));  // a copy of an input: exact
  }
  double sum = 0;
  {
    const auto [x, y] = run_captured("sum_all_256x256_c32", 2);
    REQUIRE(y.size() == 1);
    for (float v : x) sum += v;
    // One DL16 rounding of the result (half an ulp: 2^-10 relative) plus fp32 accumulation
    // (2^-24 per addition, of the magnitudes summed; 2^-20 of their total is generous).
    double mag = 0;
    for (float v : x) mag += std::fabs(v);
    CHECK(std::fabs(y[0] - sum) <= std::ldexp(std::fabs(sum), -10) + std::ldexp(mag, -20));
  }
  {
    const auto [x, y] = run_captured("mean_all_256x256_c32", 2);  // the same input (seed 2)
    REQUIRE(y.size() == 1);
    const double mean = sum / double(x.size());
    CHECK(std::fabs(y[0] - mean) <= std::ldexp(std::fabs(mean), -8) + 1e-6);
    CHECK(std::fabs(y[0]) < std::fabs(sum) / 1000);  // scaled once by 1/65536, not per dim
  }
}

TEST_CASE("reduce dims: amin over two dims that are not neighbours keeps the one between", "[exec][reduce]") {
  // torch.amin(x.reshape(16, 16, 256), dim=(0, 2)): the output keeps 16 values.
  const auto [x, y] = run_captured("amin_dims02_16x16x256_c32", 3);
  REQUIRE(x.size() == 16 * 16 * 256);
  REQUIRE(y.size() == 16);
  // The SDSC's dims are (mb, x, out) with x and out reduced: y[i] is the least of x[i, :, :].
  size_t wrong = 0;
  for (size_t i = 0; i < 16; ++i) {
    float m = INFINITY;
    for (size_t j = 0; j < 16 * 256; ++j) m = std::min(m, x[i * 16 * 256 + j]);
    wrong += y[i] != m;
  }
  CHECK(wrong == 0);
}

TEST_CASE("reduce dims: prodnonstick multiplies along its reduced dim, floor rounds down", "[exec][reduce]") {
  // torch.prod of [128, 64] fp16 as torch-spyre writes it (a restickify, then prodnonstick), with
  // factors near 1 so that the products stay far from DL16's range limits.
  {
    const bundle_test::Kernel k(k_captured / "prod_128x64_restick_c32");
    const auto& kts = k.kts;
    REQUIRE(kts.size() == 2);
    REQUIRE(kts[0].info.size == std::vector<int64_t>{128, 64});
    REQUIRE(kts[1].info.numel() == 128);
    std::vector<float> x(128 * 64);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 1.0f + float(int(i * 37 % 17) - 8) / 256.0f;  // exact in DL16
    exec::SparseMemory mem;
    exec::write_tensor(mem, kts[0].info, x);
    exec::run(k.lb, k.plan, mem);
    const std::vector<float> y = exec::read_tensor(mem, kts[1].info);
    double worst = 0;
    for (size_t r = 0; r < 128; ++r) {
      double p = 1;
      for (size_t c = 0; c < 64; ++c) p *= x[r * 64 + c];
      worst = std::max(worst, std::fabs(y[r] - p) / std::fabs(p));
    }
    CHECK(worst < std::ldexp(1.0, -9));  // one DL16 rounding and fp32 products
    const exec::RefResult ref = exec::reference(k.plan, kts, mem);
    REQUIRE(ref.outputs.count(1));
    CHECK(exec::compare(y, ref.outputs.at(1)).pass);
  }
  {
    const auto [x, y] = run_captured("floor_67x256_c4", 4);
    REQUIRE(x.size() == y.size());
    size_t wrong = 0;
    for (size_t i = 0; i < x.size(); ++i) wrong += y[i] != std::floor(x[i]);
    CHECK(wrong == 0);
  }
}
