// vspyre::ops reductions (stick and non-stick), softmax blocks, quant scale per token.
#include "catch.h"

#include <cmath>

#include "ops_test_util.h"

using namespace ops_test;

namespace {

// Reference reduction of a dense [outer, n, inner] view.
std::vector<double> ref_reduce(const std::vector<double>& x, int64_t outer, int64_t n,
                               int64_t inner, const char* op) {
  std::vector<double> r(size_t(outer * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double s = 0, mx = -INFINITY, mn = INFINITY, am = 0, sq = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double v = x[size_t((o * n + j) * inner + i)];
        s += v;
        mx = std::max(mx, v);
        mn = std::min(mn, v);
        am = std::max(am, std::fabs(v));
        sq += v * v;
      }
      const std::string k = op;
      double v = k == "sum" ? s : k == "max" ? mx : k == "min" ? mn : k == "mean" ? s / n
               : k == "absmax" ? am : sq / n;
      r[size_t(o * inner + i)] = v;
    }
  return r;
}

}  // namespace

TEST_CASE("ops: reductions along stick and non-stick dims") {
  const std::vector<int64_t> s{5, 37, 6};
  const auto x = randv(size_t(numel(s)), -50, 50, DataFormat::SEN169_FP16, 11);
  Buf X(DataFormat::SEN169_FP16, s, x);
  const char* names[] = {"sum", "max", "min", "mean", "absmax", "exx2"};
  const ops::Reduce ops_[] = {ops::Reduce::sum, ops::Reduce::max, ops::Reduce::min,
                              ops::Reduce::mean, ops::Reduce::absmax, ops::Reduce::exx2};
  for (int dim = 0; dim < 3; ++dim) {
    const int64_t outer = dim == 0 ? 1 : dim == 1 ? 5 : 5 * 37;
    const int64_t inner = dim == 0 ? 37 * 6 : dim == 1 ? 6 : 1;
    std::vector<int64_t> keep = s;
    keep[size_t(dim)] = 1;
    for (int k = 0; k < 6; ++k) {
      Buf O(DataFormat::SEN169_FP16, keep);
      ops::reduce(ops_[k], X.v(), O.v(), dim);
      const auto ref = ref_reduce(x, outer, s[size_t(dim)], inner, names[k]);
      // fp32 accumulation error is tiny next to DL16's 2^-9; sums of mixed signs get an
      // absolute slack of n * 2^-24 * max|x| * n.
      for (size_t i = 0; i < ref.size(); ++i) {
        INFO(names[k] << " dim " << dim << " i " << i);
        CHECK(close(O.at(i), ref[i], k_dl16_rel, 1e-3));
      }
    }
  }
  // Dropped-dim output shape and name dispatch with the dim inferred from the shapes.
  Buf O(DataFormat::IEEE_FP32, {5, 6});
  const ops::TensorView in[] = {X.v()}, out[] = {O.v()};
  ops::run("sumnonstick", in, out);
  const auto ref = ref_reduce(x, 5, 37, 6, "sum");
  for (size_t i = 0; i < ref.size(); ++i) CHECK(close(O.at(i), ref[i], 1e-5, 1e-4));
}

TEST_CASE("ops: mean uses the scaling_factor constant, exx2_zeromean is the variance") {
  std::vector<double> x(1024);
  for (size_t i = 0; i < x.size(); ++i) x[i] = double(i % 17) - 8;
  Buf X(DataFormat::SEN169_FP16, {1, 1024}, x), O(DataFormat::IEEE_FP32, {1, 1});
  ops::Attrs a;
  a.set("scaling_factor", fmt::dl16_to_double(0x2A00));  // 1/1024 as the SDSC encodes it
  ops::reduce(ops::Reduce::mean, X.v(), O.v(), 1, a);
  double s = 0, sq = 0;
  for (double v : x) s += v;
  const double m = s / 1024;
  for (double v : x) sq += (v - m) * (v - m);
  CHECK(close(O.at(0), m, 1e-6, 1e-7));
  ops::reduce(ops::Reduce::exx2_zeromean, X.v(), O.v(), 1);
  CHECK(close(O.at(0), sq / 1024, 1e-5));
}

TEST_CASE("ops: softmax from DL16 blocks matches double softmax") {
  const std::vector<int64_t> s{4, 100};
  auto x = randv(400, -20, 20, DataFormat::SEN169_FP16, 12);
  x[5] = -1e9;  // a mask value
  Buf X(DataFormat::SEN169_FP16, s, x), O(DataFormat::SEN169_FP16, s);
  ops::softmax(X.v(), O.v(), 1);
  for (int r = 0; r < 4; ++r) {
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < 100; ++j) mx = std::max(mx, x[size_t(r * 100 + j)]);
    for (int j = 0; j < 100; ++j) sum += std::exp(x[size_t(r * 100 + j)] - mx);
    for (int j = 0; j < 100; ++j) {
      const double ref = std::exp(x[size_t(r * 100 + j)] - mx) / sum;
      // x - max is rounded to DL16 (abs error up to 40*2^-10 in the exponent), exp, sum and
      // division each round once more.
      CHECK(close(O.at(size_t(r * 100 + j)), ref, 4.0 / 512 + 40.0 / 1024, 1e-9));
    }
  }
}

TEST_CASE("ops: quantscalepertoken fp8 scales the clipped absmax by 1 over 448") {
  Buf X(DataFormat::SEN169_FP16, {3, 4}, {1, -8, 2, 3, 0, 0, 0, 0, 1000, 5, -7, 2});
  Buf O(DataFormat::IEEE_FP32, {3, 1});
  ops::Attrs a;
  a.set("clipMin", 1e-3).set("clipMax", 448);
  const ops::TensorView in[] = {X.v(), O.v()}, out[] = {O.v()};  // output listed as input too
  ops::run("quantscalepertokenfp8", in, out, a);
  CHECK(close(O.at(0), 8.0 / 448, 1e-6));
  CHECK(close(O.at(1), 1e-3 / 448, 1e-5));
  CHECK(close(O.at(2), 1.0, 1e-6));
}
