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
      double s = 0, mx = -INFINITY, mn = INFINITY, am = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double v = x[size_t((o * n + j) * inner + i)];
        s += v;
        mx = std::max(mx, v);
        mn = std::min(mn, v);
        am = std::max(am, std::fabs(v));
      }
      const std::string k = op;
      double v = k == "sum" ? s : k == "max" ? mx : k == "min" ? mn : k == "mean" ? s / n
               : am;
      r[size_t(o * inner + i)] = v;
    }
  return r;
}

}  // namespace

TEST_CASE("ops: reductions along stick and non-stick dims") {
  const std::vector<int64_t> s{5, 37, 6};
  const auto x = randv(size_t(numel(s)), -50, 50, DataFormat::SEN169_FP16, 11);
  Buf X(DataFormat::SEN169_FP16, s, x);
  const char* names[] = {"sum", "max", "min", "mean", "absmax"};
  const ops::Reduce ops_[] = {ops::Reduce::sum, ops::Reduce::max, ops::Reduce::min,
                              ops::Reduce::mean, ops::Reduce::absmax};
  for (int dim = 0; dim < 3; ++dim) {
    const int64_t outer = dim == 0 ? 1 : dim == 1 ? 5 : 5 * 37;
    const int64_t inner = dim == 0 ? 37 * 6 : dim == 1 ? 6 : 1;
    std::vector<int64_t> keep = s;
    keep[size_t(dim)] = 1;
    for (int k = 0; k < 5; ++k) {
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

TEST_CASE("ops: mean uses the scaling_factor constant") {
  std::vector<double> x(1024);
  for (size_t i = 0; i < x.size(); ++i) x[i] = double(i % 17) - 8;
  Buf X(DataFormat::SEN169_FP16, {1, 1024}, x), O(DataFormat::IEEE_FP32, {1, 1});
  ops::Attrs a;
  a.set("scaling_factor", fmt::dl16_to_double(0x2A00));  // 1/1024 as the SDSC encodes it
  ops::reduce(ops::Reduce::mean, X.v(), O.v(), 1, a);
  double s = 0;
  for (double v : x) s += v;
  CHECK(close(O.at(0), s / 1024, 1e-6, 1e-7));
}

TEST_CASE("ops: LayerNorm and RMSNorm from exx2, layernormscale and layernormnorm") {
  // torch-spyre's decomposition: stats = exx2(x, 1/N) (two lanes per row: E[x], E[x^2]), rstd =
  // layernormscale(stats, eps), out = layernormnorm(x, stats, rstd, weight, bias).
  const int64_t R = 5, N = 96;
  auto x = randv(size_t(R * N), -3, 5, DataFormat::SEN169_FP16, 21);
  const auto w = randv(size_t(N), -2, 2, DataFormat::SEN169_FP16, 22);
  const auto b = randv(size_t(N), -1, 1, DataFormat::SEN169_FP16, 23);
  Buf X(DataFormat::SEN169_FP16, {R, N}, x), W(DataFormat::SEN169_FP16, {1, N}, w), B(DataFormat::SEN169_FP16, {1, N}, b);
  for (bool zero_mean : {false, true}) {
    INFO("zero mean " << zero_mean);
    Buf S(DataFormat::IEEE_FP32, {R, 2}), Rs(DataFormat::IEEE_FP32, {R, 64}), O(DataFormat::IEEE_FP32, {R, N});
    ops::Attrs a;
    a.dim = 1;
    a.set("eps", 1e-5);
    const ops::TensorView xin[] = {X.v()}, sout[] = {S.v()};
    ops::run(zero_mean ? "exx2_zeromean" : "exx2", xin, sout, a);
    const ops::TensorView sin[] = {S.v()}, rout[] = {Rs.v()};
    ops::run("layernormscale", sin, rout, a);
    const ops::TensorView nin[] = {X.v(), S.v(), ops::TensorView{Rs.bytes.data(), DataFormat::IEEE_FP32, {R, 1}, {64, 1}, 0},
                                   W.v(), B.v()};
    const ops::TensorView nout[] = {O.v()};
    ops::run("layernormnorm", nin, nout, a);
    for (int64_t r = 0; r < R; ++r) {
      double s = 0, sq = 0;
      for (int64_t j = 0; j < N; ++j) {
        s += x[size_t(r * N + j)];
        sq += x[size_t(r * N + j)] * x[size_t(r * N + j)];
      }
      const double mean = zero_mean ? 0 : s / N, ex2 = sq / N;
      CHECK(close(S.at(size_t(r * 2)), mean, 1e-6, 1e-6));
      CHECK(close(S.at(size_t(r * 2 + 1)), ex2, 1e-6));
      const double rstd = 1 / std::sqrt(ex2 - mean * mean + 1e-5);
      for (int64_t j = 0; j < 64; ++j) CHECK(close(Rs.at(size_t(r * 64 + j)), rstd, 1e-5));
      for (int64_t j = 0; j < N; ++j) {
        const double ref = (x[size_t(r * N + j)] - mean) * rstd * w[size_t(j)] + b[size_t(j)];
        CHECK(close(O.at(size_t(r * N + j)), ref, 1e-5, 1e-5));
      }
    }
  }
  // The constant useZeroMean = 1 on exx2 is exx2_zeromean.
  Buf S1(DataFormat::IEEE_FP32, {R, 2}), S2(DataFormat::IEEE_FP32, {R, 2});
  ops::Attrs z;
  z.set("useZeroMean", 1);
  ops::reduce(ops::Reduce::exx2, X.v(), S1.v(), 1, z);
  ops::reduce(ops::Reduce::exx2_zeromean, X.v(), S2.v(), 1);
  CHECK(S1.values() == S2.values());
  // Refused: statistics without two lanes, an exx2 output of one value per row.
  Buf One(DataFormat::IEEE_FP32, {R, 1}), Rs(DataFormat::IEEE_FP32, {R, 64});
  CHECK_THROWS_AS(ops::layernorm_scale(One.v(), Rs.v(), 1), std::invalid_argument);
  CHECK_THROWS_AS(ops::reduce(ops::Reduce::exx2, X.v(), One.v(), 1), std::invalid_argument);
  // One value per row (no lanes dim): layernormscale is 1/sqrt(v + eps).
  Buf V(DataFormat::IEEE_FP32, {R, 1}, {0.25, 1, 4, 9, 16}), VO(DataFormat::IEEE_FP32, {R, 1});
  const ops::TensorView vin[] = {V.v()}, vout[] = {VO.v()};
  ops::run("layernormscale", vin, vout);
  for (size_t i = 0; i < 5; ++i) CHECK(close(VO.at(i), 1 / std::sqrt(V.at(i) + 1e-5), 1e-6));
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
