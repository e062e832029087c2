// torch-spyre's scaled fp8 matmul (torch._scaled_mm after quantize_fp8_with_scale and
// quantize_weight_fp8_with_scale), whose fp8 weight is packed two rows to a stick
// (primaryDsInfo_ KERNEL stickSize_ [2, 64]: torch-spyre's ElementArrangement::QFP8WT):
// the 2-D stick layout itself, and two captured kernels (tests/fixtures/captured/README.md,
// "Scaled fp8 matmul") against the same chain of roundings computed here on the host.
#include "catch.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "bundle_test_util.h"
#include "models/card.h"
#include "models/plan_runner.h"
#include "sim/engine/simulation.h"
#include "sim/exec/exec.h"
#include "sim/formats/formats.h"
#include "sim/plan/lower.h"

using namespace vspyre;

TEST_CASE("formats: a 2-D stick holds two rows of an fp8 weight", "[formats][layout]") {
  // Host [K=6, N=128] fp8 as torch-spyre's QFP8WT weight: units of 64 N-lanes outermost, then
  // pairs of K rows, then the stick: 2 rows of 64 lanes.
  const std::vector<int64_t> host{6, 128};
  const fmt::StickLayout l{{2, 3, 2, 64}, {1, 0, 0, 1}, fmt::DataFormat::SEN143_FP8};
  REQUIRE_NOTHROW(fmt::validate(l, host));
  CHECK(fmt::device_image_bytes(l) == 6 * 128);  // six sticks, not twelve
  const int64_t at[] = {3, 70};                  // N unit 1, K pair 1, row 1, lane 6
  CHECK(fmt::device_element_index(l, at) == ((1 * 3 + 1) * 2 + 1) * 64 + 6);
  std::vector<float> x(6 * 128);
  std::iota(x.begin(), x.end(), 0.0f);
  for (auto& v : x) v = float(int(v) % 29 - 14);  // exact in E4M3
  const std::vector<int64_t> stride{128, 1};
  std::vector<uint8_t> image(fmt::device_image_bytes(l), 0xAA);
  fmt::host_to_device({x.data(), fmt::DataFormat::IEEE_FP32, host, stride, 0}, l, image.data(), fmt::Padding::zero);
  for (int64_t k = 0; k < 6; ++k)
    for (int64_t n = 0; n < 128; ++n) {
      const int64_t c[] = {k, n};
      CHECK(fmt::e4m3_to_float(image[size_t(fmt::device_element_index(l, c))]) == x[size_t(k * 128 + n)]);
    }
  std::vector<float> back(x.size(), -1.0f);
  fmt::device_to_host(image.data(), l, {back.data(), fmt::DataFormat::IEEE_FP32, host, stride, 0});
  CHECK(back == x);
  // Two dims that do not make one stick are refused.
  const fmt::StickLayout bad{{2, 2, 3, 64}, {1, 0, 0, 1}, fmt::DataFormat::SEN143_FP8};
  CHECK_THROWS_AS(fmt::validate(bad, host), std::invalid_argument);
}

namespace {

float dl16(double v) { return fmt::dl16_to_float(fmt::dl16_from_double(v)); }

// The captured kernel `name` ([M,K] @ [K,N]) on seeded random inputs: the largest difference
// from the host's chain, in DL16 ulps (2^-9 relative) of the chain's largest magnitude.
double worst_ulps(const char* name, int64_t M, int64_t K, int64_t N, uint64_t seed) {
  const bundle_test::Kernel k(bundle_test::k_captured / name);
  REQUIRE(k.kts.size() == 6);  // scale_a, a, scale_b, b, bias, out
  exec::SparseMemory mem;
  for (size_t i = 0; i < 5; ++i) exec::write_random_input(mem, k.kts[i], seed + i);
  exec::run(k.lb, k.plan, mem);
  std::vector<std::vector<float>> in;
  for (size_t i = 0; i < 5; ++i) in.push_back(exec::read_tensor(mem, k.kts[i].info));
  const std::vector<float> y = exec::read_tensor(mem, k.kts[5].info);
  REQUIRE(int64_t(in[1].size()) == M * K);
  REQUIRE(int64_t(in[3].size()) == K * N);
  REQUIRE(int64_t(y.size()) == M * N);
  // quantize: reciprocal of the scale, times it, clip to the E4M3 range, to E4M3; each SDSC's
  // result rounded into its format (DL16, then E4M3).
  auto quantize = [](const std::vector<float>& x, float scale) {
    const float inv = dl16(1.0f / scale);
    std::vector<float> q(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const float c = std::clamp(dl16(x[i] * inv), -448.0f, 448.0f);
      q[i] = fmt::e4m3_to_float(fmt::e4m3_from_float(c));
    }
    return q;
  };
  const float sa = in[0][0], sb = in[2][0], bias = in[4][0];
  const auto qa = quantize(in[1], sa), qb = quantize(in[3], sb);
  double worst = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;  // products of E4M3 values are exact; so is this sum, to 2^-40 of it
      for (int64_t j = 0; j < K; ++j) acc += double(qa[size_t(m * K + j)]) * qb[size_t(j * N + n)];
      // The epilogue: three SDSCs (x scale_a, x scale_b, + bias), each rounding to DL16.
      const float y2 = dl16(double(dl16(double(dl16(acc)) * sa)) * sb);
      const float ref = dl16(double(y2) + bias);
      // In ulps of the largest magnitude in the chain (the bias add may cancel).
      const double mag = std::max({std::fabs(double(ref)), std::fabs(double(y2)), std::fabs(double(bias)), 1.0});
      const double ulp = std::ldexp(mag, -9);
      worst = std::max(worst, std::fabs(double(y[size_t(m * N + n)]) - ref) / ulp);
    }
  return worst;
}

}  // namespace

TEST_CASE("fp8 mm: the scaled fp8 matmul with a two-row-stick weight computes the host's chain of roundings",
          "[exec][fp8]") {
  // The device sums in fp32 (sgemm) and the host in double: the same DL16 rounding of nearly
  // the same sum. They could differ by one ulp where the sum lies at a rounding boundary (0 on
  // these inputs: every output is bit-identical). A weight used in the wrong orientation, or a
  // stick layout that wrote rows where it reads others, moves the results by their whole size.
  CHECK(worst_ulps("fp8_scaled_mm_128x128x128_c32", 128, 128, 128, 11) <= 1.0);
  CHECK(worst_ulps("fp8_scaled_mm_256x512x1024_c32", 256, 512, 1024, 12) <= 1.0);
}

TEST_CASE("fp8 mm: the plan moves the two-row-stick weight at its own size", "[plan][fp8]") {
  // [512, 1024] fp8 = 512 KiB. The lowering used to count the weight's first stick dim only as
  // a stick dim: (512 / 2) x 1024 sticks, 64 times the tensor (1146 us against 68 us simulated).
  SimOptions o;
  o.config_file = std::string(VSPYRE_SOURCE_DIR) + "/configs/spyre.yaml";
  Simulation sim(resolve_config(o));
  Card& card = sim.top_as<Card>();
  const bundle_test::Kernel k(bundle_test::k_captured / "fp8_scaled_mm_256x512x1024_c32");
  const plan::Plan p = plan::lower(k.lb, k.plan, plan_card_params(card));
  const uint64_t weight = 512 * 1024;
  auto bytes = [&](const char* sdsc, plan::Op::Kind kind, uint32_t tensor, std::map<uint32_t, uint64_t>& per_core) {
    for (const auto& st : p.stages())
      if (st.sdsc() == sdsc)
        for (const auto& cp : st.cores())
          for (const auto& op : cp.ops())
            if (op.kind() == kind && op.tensor() == tensor) per_core[cp.core()] += op.bytes();
  };
  std::map<uint32_t, uint64_t> stored, loaded;
  bytes("sdsc_7.json", plan::Op::DMA_OUT, 1, stored);  // qfp8wt writes the weight, 8 cores
  uint64_t total = 0;
  for (const auto& [_, b] : stored) total += b;
  CHECK(stored.size() == 8);
  CHECK(total == weight);
  bytes("sdsc_8.json", plan::Op::DMA_IN, 1, loaded);  // every core reads all of it (K, N unsplit)
  CHECK(loaded.size() == 32);
  for (const auto& [core, b] : loaded) {
    INFO("core " << core);
    CHECK(b == weight);
  }
  const PlanResult r = run_plan(card, p);
  CHECK(r.kernel_ps > 0);
}
