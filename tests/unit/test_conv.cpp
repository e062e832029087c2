// torch-spyre's direct conv2d on the PT array (config.conv2d_direct_lowering, as its own
// test_conv2d_direct_* run it) and a depthwise convolution whose second spatial dim is one wide
// (tests/fixtures/captured/README.md, "Direct convolutions"): the executor against sums computed
// here on the host from the inputs as memory holds them, with the tensors' axes found by name.
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

// A host-order tensor read from memory, addressed by dim name (absent dims: coordinate 0).
struct Named {
  std::vector<std::string> dims;
  std::vector<int64_t> size;
  std::vector<float> v;
  int64_t extent(const std::string& d) const {
    const auto it = std::find(dims.begin(), dims.end(), d);
    return it == dims.end() ? 1 : size[size_t(it - dims.begin())];
  }
  float at(const std::vector<std::pair<std::string, int64_t>>& coord) const {
    int64_t off = 0;
    for (size_t i = 0; i < dims.size(); ++i) {
      int64_t c = 0;
      for (const auto& [d, x] : coord)
        if (d == dims[i]) c = x;
      off = off * size[i] + c;
    }
    return v[size_t(off)];
  }
};

struct Ran {
  Named x, w, y;
  bool reference_passes = false;
};

Ran run(const std::string& name, uint64_t seed) {
  const bundle_test::Kernel k(k_captured / name);
  const auto& kts = k.kts;
  REQUIRE(kts.size() == 3);
  exec::SparseMemory mem;
  exec::write_random_input(mem, kts[0], seed);
  exec::write_random_input(mem, kts[1], seed + 1);
  exec::run(k.lb, k.plan, mem);
  Ran r;
  Named* out[3] = {&r.x, &r.w, &r.y};
  for (size_t i = 0; i < 3; ++i) *out[i] = Named{kts[i].info.dims, kts[i].info.size, exec::read_tensor(mem, kts[i].info)};
  const exec::RefResult ref = exec::reference(k.plan, kts, mem);
  r.reference_passes = ref.outputs.count(2) && exec::compare(r.y.v, ref.outputs.at(2)).pass;
  return r;
}

// y[i, j, out] = sum over (ki, kj, in) of x[i + ki, j + kj, in] w[out, ki, kj, in]: stride 1, no
// padding, as both conv2d captures are. Returns the largest error relative to the magnitudes
// summed (one DL16 rounding of the result is 2^-10 of its own magnitude; fp32 sums add little).
double conv_error(const Ran& r, bool depthwise) {
  const int64_t OH = r.y.extent("i"), OW = r.y.extent("j"), CO = r.y.extent("out");
  const int64_t KH = r.w.extent("ki"), KW = r.w.extent("kj"), CI = depthwise ? 1 : r.x.extent("in");
  double worst = 0;
  for (int64_t i = 0; i < OH; ++i)
    for (int64_t j = 0; j < OW; ++j)
      for (int64_t o = 0; o < CO; ++o) {
        double sum = 0, mag = 0;
        for (int64_t ki = 0; ki < KH; ++ki)
          for (int64_t kj = 0; kj < KW; ++kj)
            for (int64_t c = 0; c < CI; ++c) {
              const std::string cin = depthwise ? "out" : "in";
              const double p = double(r.x.at({{"i", i + ki}, {"j", j + kj}, {cin, depthwise ? o : c}})) *
                               double(r.w.at({{"out", o}, {"ki", ki}, {"kj", kj}, {"in", c}}));
              sum += p;
              mag += std::fabs(p);
            }
        const double got = r.y.at({{"i", i}, {"j", j}, {"out", o}});
        worst = std::max(worst, std::fabs(got - sum) / std::max(mag, 1e-3));
      }
  return worst;
}

}  // namespace

TEST_CASE("conv: a direct conv2d sums every input channel over each window", "[conv]") {
  // torch.conv2d of [1, 64, 8, 8] by [64, 64, 3, 3] on 18 cores: input [i, j, in], weight
  // [out, ki, kj, in], output [i, j, out] by name.
  const Ran r = run("conv2d_1x64x8x8_k3_c18", 11);
  REQUIRE(r.y.extent("i") == 6);
  REQUIRE(r.y.extent("j") == 6);
  REQUIRE(r.x.extent("in") == 64);
  CHECK(conv_error(r, false) < std::ldexp(1.0, -9));
  CHECK(r.reference_passes);
}

TEST_CASE("conv: a kernel one wide on a spatial dim has one window, the dim passes through", "[conv]") {
  // A [64, 64, 1, 3] kernel: no window for i (8 outputs from 8 inputs), one for j (6 from 8).
  const Ran r = run("conv2d_1x64x8x8_k1x3_c24", 12);
  REQUIRE(r.y.extent("i") == 8);
  REQUIRE(r.y.extent("j") == 6);
  CHECK(r.w.extent("ki") == 1);
  CHECK(conv_error(r, false) < std::ldexp(1.0, -9));
  CHECK(r.reference_passes);
}

TEST_CASE("conv: a depthwise convolution over an N x C x H x 1 input keeps the one-wide window N_ leaves out",
          "[conv]") {
  // torch-spyre's test_dwise_conv2d_1x3x64x1_ksize_3x1: N_ has no j; its window (totalSize_ 1)
  // and the input's padding_ on j remain.
  const auto lb = bundle::load_bundle(k_captured / "dwconv_1x3x64x1_k3x1_c31");
  const bundle::Sdsc& s = lb.sdsc("sdsc_0.json");
  REQUIRE(s.windows.size() == 2);
  CHECK(s.windows[1].dim == "j");
  CHECK(s.windows[1].total == 1);
  const Ran r = run("dwconv_1x3x64x1_k3x1_c31", 13);
  REQUIRE(r.y.extent("i") == 62);
  CHECK(conv_error(r, true) < std::ldexp(1.0, -9));
  CHECK(r.reference_passes);
}
