// vspyre::ops batchmatmul (DL16, fp8, int8, int4) and conv2d against double references.
#include "catch.h"

#include <cmath>

#include "ops_test_util.h"

using namespace ops_test;

namespace {

// C = A[b] x B[b] for dense [nb, M, K] x [nb, K, N] (nb = 1 broadcast); also sum |a||b|.
void ref_mm(const std::vector<double>& a, const std::vector<double>& b, int64_t nba, int64_t nbb,
            int64_t M, int64_t K, int64_t N, std::vector<double>& c, std::vector<double>& mag) {
  const int64_t nb = std::max(nba, nbb);
  c.assign(size_t(nb * M * N), 0);
  mag.assign(c.size(), 0);
  for (int64_t q = 0; q < nb; ++q)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0, m = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double x = a[size_t(((nba == 1 ? 0 : q) * M + i) * K + k)];
          const double y = b[size_t(((nbb == 1 ? 0 : q) * K + k) * N + j)];
          s += x * y;
          m += std::fabs(x * y);
        }
        c[size_t((q * M + i) * N + j)] = s;
        mag[size_t((q * M + i) * N + j)] = m;
      }
}

}  // namespace

TEST_CASE("ops: batchmatmul DL16 odd sizes with batch broadcast") {
  const int64_t M = 37, K = 61, N = 45;
  const auto a = randv(size_t(3 * M * K), -4, 4, DataFormat::SEN169_FP16, 21);
  const auto b = randv(size_t(K * N), -4, 4, DataFormat::SEN169_FP16, 22);
  Buf A(DataFormat::SEN169_FP16, {3, M, K}, a), B(DataFormat::SEN169_FP16, {1, K, N}, b);
  Buf O(DataFormat::SEN169_FP16, {3, M, N});
  const ops::TensorView in[] = {A.v(), B.v()}, out[] = {O.v()};
  ops::run("batchmatmul", in, out);
  std::vector<double> c, mag;
  ref_mm(a, b, 3, 1, M, K, N, c, mag);
  for (size_t i = 0; i < c.size(); ++i) {
    // One DL16 rounding of the result plus fp32 accumulation (K * 2^-24 * sum|a*b|).
    CHECK(close(O.at(i), c[i], k_dl16_rel, double(K) * 0x1p-24 * mag[i] + k_dl16_tiny));
  }
}

TEST_CASE("ops: matmul with a transposed view and 4-D batch broadcast") {
  const int64_t M = 5, K = 70, N = 9;
  const auto a = randv(size_t(2 * M * K), -1, 1, DataFormat::SEN169_FP16, 23);
  const auto bt = randv(size_t(3 * N * K), -1, 1, DataFormat::SEN169_FP16, 24);  // [3, N, K]
  Buf A(DataFormat::SEN169_FP16, {2, 1, M, K}, a), Bt(DataFormat::SEN169_FP16, {3, N, K}, bt);
  ops::TensorView bv{Bt.bytes.data(), DataFormat::SEN169_FP16, {3, K, N}, {N * K, 1, K}, 0};
  Buf O(DataFormat::IEEE_FP32, {2, 3, M, N});
  ops::matmul(A.v(), bv, O.v());
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t q = 0; q < 3; ++q)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double s = 0, m = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double x = a[size_t((p * M + i) * K + k)] * bt[size_t((q * N + j) * K + k)];
            s += x;
            m += std::fabs(x);
          }
          CHECK(close(O.at(size_t(((p * 3 + q) * M + i) * N + j)), s, 0, double(K) * 0x1p-24 * m + 1e-9));
        }
  // A K mismatch is rejected.
  Buf Bad(DataFormat::SEN169_FP16, {K + 1, N});
  CHECK_THROWS_AS(ops::matmul(A.v(), Bad.v(), O.v()), std::invalid_argument);
}

TEST_CASE("ops: batchmatmulfp8 E4M3 operands, DL16 and fp8 outputs") {
  const int64_t M = 16, K = 128, N = 33;
  const auto a = randv(size_t(M * K), -3, 3, DataFormat::SEN143_FP8, 25);
  const auto b = randv(size_t(K * N), -3, 3, DataFormat::SEN143_FP8, 26);
  Buf A(DataFormat::SEN143_FP8, {M, K}, a), B(DataFormat::SEN143_FP8, {K, N}, b);
  Buf O(DataFormat::SEN169_FP16, {M, N}), O8(DataFormat::SEN143_FP8, {M, N});
  const ops::TensorView in[] = {A.v(), B.v()}, out[] = {O.v()}, out8[] = {O8.v()};
  ops::run("batchmatmulfp8", in, out);
  ops::run("batchmatmulfp8", in, out8);
  std::vector<double> c, mag;
  ref_mm(a, b, 1, 1, M, K, N, c, mag);
  for (size_t i = 0; i < c.size(); ++i) {
    CHECK(close(O.at(i), c[i], k_dl16_rel, double(K) * 0x1p-24 * mag[i] + k_dl16_tiny));
    CHECK(close(O8.at(i), std::clamp(c[i], -448.0, 448.0), 1.0 / 8, 1.0 / 512 + double(K) * 0x1p-24 * mag[i]));
  }
}

TEST_CASE("ops: batchmatmulint8 is exact on the sgemm and the integer paths") {
  for (int64_t K : {64, 2048}) {  // bound 64*2^14 < 2^24 (sgemm); 2048*2^14 = 2^25 (int loop)
    const int64_t M = 7, N = 65;
    auto a = randi(size_t(M * K), -128, 127, 30);
    auto b = randi(size_t(K * N), -128, 127, 31);
    for (int64_t k = 0; k < K; ++k) {  // one extreme row/column: the exact answer exceeds 2^24
      a[size_t(k)] = -128;
      b[size_t(k * N)] = -128;
    }
    Buf A(DataFormat::SENINT8, {M, K}, a), B(DataFormat::SENINT8, {K, N}, b);
    Buf O(DataFormat::IEEE_INT32, {M, N}), OD(DataFormat::SEN169_FP16, {M, N});
    const ops::TensorView in[] = {A.v(), B.v()}, out[] = {O.v()}, outd[] = {OD.v()};
    ops::run("batchmatmulint8", in, out);
    ops::run("batchmatmulint8", in, outd);
    std::vector<double> c, mag;
    ref_mm(a, b, 1, 1, M, K, N, c, mag);
    INFO("K " << K);
    CHECK(c[0] == 16384.0 * double(K));
    for (size_t i = 0; i < c.size(); ++i) {
      CHECK(O.at(i) == c[i]);
      CHECK(OD.at(i) == fmt::dl16_to_double(fmt::dl16_from_double(c[i])));  // one rounding
    }
  }
}

TEST_CASE("ops: batchmatmulint4 is exact") {
  const int64_t M = 9, K = 257, N = 31;
  const auto a = randi(size_t(2 * M * K), -8, 7, 32);
  const auto b = randi(size_t(2 * K * N), -8, 7, 33);
  Buf A(DataFormat::SENINT4, {2, M, K}, a), B(DataFormat::SENINT4, {2, K, N}, b);
  Buf O(DataFormat::IEEE_INT32, {2, M, N});
  const ops::TensorView in[] = {A.v(), B.v()}, out[] = {O.v()};
  ops::run("batchmatmulint4", in, out);
  std::vector<double> c, mag;
  ref_mm(a, b, 2, 2, M, K, N, c, mag);
  for (size_t i = 0; i < c.size(); ++i) CHECK(O.at(i) == c[i]);
}

TEST_CASE("ops: conv2d DL16 with stride and padding, int8 exact, depthwise") {
  const int64_t Nn = 2, C = 4, H = 9, W = 7, O = 6, kh = 3, kw = 2;
  const auto x = randv(size_t(Nn * C * H * W), -2, 2, DataFormat::SEN169_FP16, 40);
  const auto w = randv(size_t(O * 2 * kh * kw), -2, 2, DataFormat::SEN169_FP16, 41);
  ops::Attrs at;
  at.stride_h = 2;
  at.stride_w = 1;
  at.pad_h = 1;
  at.pad_w = 1;
  at.groups = 2;
  const int64_t OH = (H + 2 - kh) / 2 + 1, OW = (W + 2 - kw) / 1 + 1;
  auto ref = [&](const std::vector<double>& xv, const std::vector<double>& wv, int64_t groups,
                 int64_t Oc, std::vector<double>& mag) {
    const int64_t Cg = C / groups, Og = Oc / groups;
    std::vector<double> r(size_t(Nn * Oc * OH * OW));
    mag.assign(r.size(), 0);
    for (int64_t n = 0; n < Nn; ++n)
      for (int64_t o = 0; o < Oc; ++o)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            double s = 0, m = 0;
            const int64_t g = o / Og;
            for (int64_t c = 0; c < Cg; ++c)
              for (int64_t y = 0; y < kh; ++y)
                for (int64_t z = 0; z < kw; ++z) {
                  const int64_t ih = oh * 2 - 1 + y, iw = ow - 1 + z;
                  if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                  const double p = xv[size_t(((n * C + g * Cg + c) * H + ih) * W + iw)] *
                                   wv[size_t(((o * Cg + c) * kh + y) * kw + z)];
                  s += p;
                  m += std::fabs(p);
                }
            const size_t i = size_t(((n * Oc + o) * OH + oh) * OW + ow);
            r[i] = s;
            mag[i] = m;
          }
    return r;
  };
  {
    Buf X(DataFormat::SEN169_FP16, {Nn, C, H, W}, x), Wt(DataFormat::SEN169_FP16, {O, 2, kh, kw}, w);
    Buf Out(DataFormat::SEN169_FP16, {Nn, O, OH, OW});
    ops::conv2d(X.v(), Wt.v(), Out.v(), at);
    std::vector<double> mag;
    const auto r = ref(x, w, 2, O, mag);
    for (size_t i = 0; i < r.size(); ++i) CHECK(close(Out.at(i), r[i], k_dl16_rel, 1e-5 + k_dl16_tiny));
  }
  {
    const auto xi = randi(size_t(Nn * C * H * W), -128, 127, 42);
    const auto wi = randi(size_t(O * 2 * kh * kw), -128, 127, 43);
    Buf X(DataFormat::SENINT8, {Nn, C, H, W}, xi), Wt(DataFormat::SENINT8, {O, 2, kh, kw}, wi);
    Buf Out(DataFormat::IEEE_INT32, {Nn, O, OH, OW});
    const ops::TensorView in[] = {X.v(), Wt.v()}, out[] = {Out.v()};
    ops::run("conv2dint8", in, out, at);
    std::vector<double> mag;
    const auto r = ref(xi, wi, 2, O, mag);
    for (size_t i = 0; i < r.size(); ++i) CHECK(Out.at(i) == r[i]);
  }
  {
    const auto wd = randv(size_t(C * kh * kw), -2, 2, DataFormat::SEN169_FP16, 44);
    Buf X(DataFormat::SEN169_FP16, {Nn, C, H, W}, x), Wt(DataFormat::SEN169_FP16, {C, 1, kh, kw}, wd);
    Buf Out(DataFormat::IEEE_FP32, {Nn, C, OH, OW});
    const ops::TensorView in[] = {X.v(), Wt.v()}, out[] = {Out.v()};
    ops::run("depthwiseconv2dnative", in, out, at);
    std::vector<double> mag;
    const auto r = ref(x, wd, C, C, mag);
    for (size_t i = 0; i < r.size(); ++i) CHECK(close(Out.at(i), r[i], 1e-6, 1e-6));
  }
}
