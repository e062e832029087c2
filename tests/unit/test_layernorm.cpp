// LayerNorm as torch-spyre lowers it (exx2 -> layernormscale -> layernormnorm, the statistics in
// its EXX2 arrangement: two values per stick), on four captured kernels
// (tests/fixtures/captured/README.md, "LayerNorm"): the executor's output against F.layer_norm
// computed here in double from the inputs as memory holds them. This does not use the bundle
// reference (which shares the executor's reading of the EXX2 lanes); it checks that the chain
// as a whole is a LayerNorm.
#include "catch.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "bundle_test_util.h"
#include "sim/exec/exec.h"

using namespace vspyre;

namespace {

struct Case {
  const char* name;
  int64_t rows, cols;
  bool residual;  // x = arg0 + arg1
  double eps;
};

// The largest |device - F.layer_norm| over the output, in units of the output's scale
// (|x - mean| * rstd * |w| + |b|, at least 1).
double worst_error(const Case& c, uint64_t seed) {
  const bundle_test::Kernel k(bundle_test::k_captured / c.name);
  const size_t nin = c.residual ? 4 : 3;
  REQUIRE(k.kts.size() == nin + 1);
  exec::SparseMemory mem;
  for (size_t i = 0; i < nin; ++i) exec::write_random_input(mem, k.kts[i], seed + i);
  exec::run(k.lb, k.plan, mem);
  std::vector<std::vector<float>> in;
  for (size_t i = 0; i < nin; ++i) in.push_back(exec::read_tensor(mem, k.kts[i].info));
  const std::vector<float> y = exec::read_tensor(mem, k.kts[nin].info);
  const int64_t R = c.rows, C = c.cols;
  REQUIRE(int64_t(y.size()) == R * C);
  const auto& w = in[nin - 2];
  const auto& b = in[nin - 1];
  auto bcast = [&](const std::vector<float>& v, int64_t j) { return double(v.size() == 1 ? v[0] : v[size_t(j)]); };
  double worst = 0;
  for (int64_t r = 0; r < R; ++r) {
    std::vector<double> x(static_cast<size_t>(C), 0.0);
    double s = 0;
    for (int64_t j = 0; j < C; ++j) {
      // The card rounds the residual add into DL16 first; here it is exact (within the bound).
      x[size_t(j)] = in[0][size_t(r * C + j)] + (c.residual ? double(in[1][size_t(r * C + j)]) : 0.0);
      s += x[size_t(j)];
    }
    const double mean = s / double(C);
    double var = 0;
    for (double v : x) var += (v - mean) * (v - mean);
    const double rstd = 1 / std::sqrt(var / double(C) + c.eps);
    for (int64_t j = 0; j < C; ++j) {
      const double ref = (x[size_t(j)] - mean) * rstd * bcast(w, j) + bcast(b, j);
      const double scale = std::max(1.0, std::fabs((x[size_t(j)] - mean) * rstd * bcast(w, j)) + std::fabs(bcast(b, j)));
      worst = std::max(worst, std::fabs(y[size_t(r * C + j)] - ref) / scale);
    }
  }
  return worst;
}

}  // namespace

TEST_CASE("layernorm: exx2, layernormscale and layernormnorm compute F.layer_norm on the captured kernels",
          "[exec][layernorm]") {
  // The statistics are stored in DL16 (E[x], E[x^2]: 2^-10 each), the variance is their
  // difference, rstd and the output are rounded once each: the result is good to a few DL16
  // ulps of its scale, 2^-6 with room to spare. A kernel that took E[x^2] for the mean, lost
  // the second lane, or applied weight and bias to the wrong dim is off by order 1.
  const Case cases[] = {{"layernorm_64x256_c32", 64, 256, false, 1e-5},
                        {"layernorm_noaffine_256x128_c32", 256, 128, false, 1e-5},
                        {"add_layernorm_64x256_c32", 64, 256, true, 1e-6},
                        {"layernorm_40x1024_c20", 40, 1024, false, 1e-5}};
  for (const Case& c : cases) {
    INFO(c.name);
    const double e = worst_error(c, 7);
    INFO("worst error " << e);
    CHECK(e <= std::ldexp(1.0, -6));
  }
}
