// vspyre::ops casts, quantisation, top-k, pooling, gather/scatter and the opFuncName dispatch.
#include "catch.h"

#include <cmath>
#include <set>
#include <string>

#include "ops_test_util.h"

using namespace ops_test;

TEST_CASE("ops: casts dl16tofp32 fp32todl16 fp8todl16 round once") {
  const auto x = randv(200, -1e4, 1e4, DataFormat::IEEE_FP32, 50);
  Buf F(DataFormat::IEEE_FP32, {200}, x), D(DataFormat::SEN169_FP16, {200}), F2(DataFormat::IEEE_FP32, {200});
  const ops::TensorView f[] = {F.v()}, d[] = {D.v()}, f2[] = {F2.v()};
  ops::run("fp32todl16", f, d);
  ops::run("dl16tofp32", d, f2);
  for (size_t i = 0; i < 200; ++i) {
    CHECK(D.at(i) == fmt::dl16_to_double(fmt::dl16_from_float(float(x[i]))));
    CHECK(F2.at(i) == D.at(i));  // widening is exact
  }
  const auto e = randv(100, -400, 400, DataFormat::SEN143_FP8, 51);
  Buf E(DataFormat::SEN143_FP8, {100}, e), ED(DataFormat::SEN169_FP16, {100});
  const ops::TensorView ev[] = {E.v()}, edv[] = {ED.v()};
  ops::run("fp8todl16", ev, edv);
  for (size_t i = 0; i < 100; ++i) CHECK(close(ED.at(i), e[i], k_dl16_rel));
  // identity into the same format is a bit copy
  Buf D2(DataFormat::SEN169_FP16, {200});
  const ops::TensorView d2[] = {D2.v()};
  ops::run("identity", d, d2);
  CHECK(D2.bytes == D.bytes);
}

TEST_CASE("ops: csqint8 and csqint4 quantise with scaleact shiftact, round half even, saturate") {
  Buf X(DataFormat::SEN169_FP16, {8}, {0.25, 0.75, -0.25, 1.25, 100, -100, 3.0, -2.5});
  Buf Q8(DataFormat::SENINT8, {8}), Q4(DataFormat::SENINT4, {8});
  ops::Attrs a;
  a.set("scaleact", 2.0).set("shiftact", 0.0);
  const ops::TensorView in[] = {X.v()}, o8[] = {Q8.v()}, o4[] = {Q4.v()};
  ops::run("csqint8wt", in, o8, a);
  CHECK(Q8.values() == std::vector<double>{0, 2, 0, 2, 127, -128, 6, -5});
  ops::run("csqint4", in, o4, a);
  CHECK(Q4.values() == std::vector<double>{0, 2, 0, 2, 7, -8, 6, -5});
  a.set("shiftact", 1.0);
  ops::run("csqint8mb", in, o8, a);
  CHECK(Q8.values() == std::vector<double>{2, 2, 0, 4, 127, -128, 7, -4});
  // qfp8: E4M3 within 2^-3, saturating at 448
  const auto v = randv(64, -600, 600, DataFormat::SEN169_FP16, 52);
  Buf V(DataFormat::SEN169_FP16, {64}, v), Q(DataFormat::SEN143_FP8, {64});
  const ops::TensorView vi[] = {V.v()}, qo[] = {Q.v()};
  ops::run("qfp8ch", vi, qo);
  for (size_t i = 0; i < 64; ++i) CHECK(close(Q.at(i), std::clamp(v[i], -448.0, 448.0), 1.0 / 16, 1.0 / 512));
  // generic affine quantize / dequantize round trip
  Buf Z(DataFormat::SENINT8, {64}), Back(DataFormat::IEEE_FP32, {64});
  ops::quantize(V.v(), Z.v(), 5.0, 3.0);
  ops::dequantize(Z.v(), Back.v(), 5.0, 3.0);
  for (size_t i = 0; i < 64; ++i) {
    const double q = std::clamp(double(std::nearbyint(float(v[i]) / 5.0f + 3.0f)), -128.0, 127.0);
    CHECK(Z.at(i) == q);
    CHECK(Back.at(i) == (q - 3) * 5);
  }
}

TEST_CASE("ops: topkvalue and topkindex with ties along a non-last dim") {
  // [5, 2]; top-3 along dim 0.
  Buf X(DataFormat::SEN169_FP16, {5, 2}, {1, -1, 7, -3, 7, -2, -5, 0, 3, -1});
  Buf V(DataFormat::SEN169_FP16, {3, 2}), I(DataFormat::IEEE_INT32, {3, 2});
  const ops::TensorView in[] = {X.v()}, vo[] = {V.v()}, io[] = {I.v()};
  ops::run("topkvalue", in, vo);
  ops::run("topkindex", in, io);
  CHECK(V.values() == std::vector<double>{7, 0, 7, -1, 3, -1});
  CHECK(I.values() == std::vector<double>{1, 3, 2, 0, 4, 4});
}

TEST_CASE("ops: maxpool avgpool avgpoolnmap 2-D with padding") {
  const int64_t H = 5, W = 6;
  const auto x = randv(size_t(2 * H * W), -9, 9, DataFormat::SEN169_FP16, 60);
  Buf X(DataFormat::SEN169_FP16, {2, H, W}, x);
  ops::Attrs a;
  a.kernel_h = a.kernel_w = 3;
  a.stride_h = a.stride_w = 2;
  a.pad_h = a.pad_w = 1;
  const int64_t OH = 3, OW = 3;
  for (int op = 0; op < 3; ++op) {
    Buf O(DataFormat::IEEE_FP32, {2, OH, OW});
    ops::pool2d(ops::Pool(op), X.v(), O.v(), a);
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double mx = -INFINITY, s = 0;
          int cnt = 0;
          for (int64_t y = 0; y < 3; ++y)
            for (int64_t z = 0; z < 3; ++z) {
              const int64_t ih = oh * 2 - 1 + y, iw = ow * 2 - 1 + z;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              const double v = x[size_t((c * H + ih) * W + iw)];
              mx = std::max(mx, v);
              s += v;
              ++cnt;
            }
          const double ref = op == 0 ? mx : op == 1 ? s / 9 : s / cnt;
          CHECK(close(O.at(size_t((c * OH + oh) * OW + ow)), ref, 1e-6, 1e-6));
        }
  }
  // Window inferred from the shapes, pooling over dims 0 and 1 of an HWC tensor.
  Buf Y(DataFormat::SEN169_FP16, {4, 4, 2}, randv(32, -1, 1, DataFormat::SEN169_FP16, 61));
  Buf P(DataFormat::SEN169_FP16, {2, 2, 2});
  ops::Attrs b;
  b.pool_dim_h = 0;
  b.pool_dim_w = 1;
  const ops::TensorView in[] = {Y.v()}, out[] = {P.v()};
  ops::run("maxpoolfwd", in, out, b);
  const auto y = Y.values();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t c = 0; c < 2; ++c) {
        double mx = -INFINITY;
        for (int64_t u = 0; u < 2; ++u)
          for (int64_t v = 0; v < 2; ++v) mx = std::max(mx, y[size_t(((2 * i + u) * 4 + 2 * j + v) * 2 + c)]);
        CHECK(P.at(size_t((i * 2 + j) * 2 + c)) == mx);
      }
}

TEST_CASE("ops: gather and scatter along a dim with an int32 index tensor") {
  Buf S(DataFormat::SEN169_FP16, {3, 4}, {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23});
  Buf I(DataFormat::IEEE_INT32, {2, 4}, {2, 0, 1, 2, 0, 0, 2, 1});
  Buf G(DataFormat::SEN169_FP16, {2, 4});
  ops::gather(S.v(), I.v(), G.v(), 0);
  CHECK(G.values() == std::vector<double>{20, 1, 12, 23, 0, 1, 22, 13});
  Buf I1(DataFormat::IEEE_INT32, {3, 2}, {3, 0, 1, 1, 2, 3});
  Buf G1(DataFormat::IEEE_FP32, {3, 2});
  ops::Attrs a;
  a.dim = 1;
  const ops::TensorView gin[] = {S.v(), I1.v()}, gout[] = {G1.v()};
  ops::run("gather", gin, gout, a);
  CHECK(G1.values() == std::vector<double>{3, 0, 11, 11, 22, 23});

  Buf Src(DataFormat::SEN169_FP16, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  Buf Out(DataFormat::SEN169_FP16, {3, 4});
  ops::scatter(S.v(), I.v(), Src.v(), Out.v(), 0);
  CHECK(Out.values() == std::vector<double>{5, 6, 2, 3, 10, 11, 3, 8, 1, 21, 7, 4});
  ops::scatter(S.v(), I.v(), Src.v(), Out.v(), 0, true);
  CHECK(Out.values() == std::vector<double>{5, 9, 2, 3, 10, 11, 15, 21, 21, 21, 29, 27});
  // Integer data moves exactly through int64, beyond fp32's 2^24.
  Buf BigS(DataFormat::IEEE_INT32, {2}, {16777217, -2147483647}), BigI(DataFormat::IEEE_INT32, {2}, {1, 0});
  Buf BigO(DataFormat::IEEE_INT32, {2});
  ops::gather(BigS.v(), BigI.v(), BigO.v(), 0);
  CHECK(BigO.values() == std::vector<double>{-2147483647, 16777217});
  Buf Bad(DataFormat::IEEE_INT32, {2, 4}, {3, 0, 0, 0, 0, 0, 0, -1});
  CHECK_THROWS_AS(ops::gather(S.v(), Bad.v(), G.v(), 0), std::out_of_range);
}

TEST_CASE("ops: dispatch covers the C.2 opFuncNames") {
  const char* c2[] = {
      "batchmatmul", "batchmatmulfp8", "batchmatmulint8", "batchmatmulint4", "conv2d", "conv2dfp8",
      "conv2dint8", "conv2dint4", "add", "sub", "revsub", "mul", "realdiv", "maximum", "minimum",
      "equal", "notequal", "greaterequal", "lesserequal", "greaterthan", "lesserthan", "biasadd",
      "where3", "fnms", "layernormnorm", "abs", "exp", "fastexp", "fastsigmoid", "gelufwd",
      "identity", "leakyrelufwd", "log", "mish", "neg", "reciprocal", "relufwd", "relu6fwd",
      "rsqrt", "sigmoid", "silu", "sqrt", "tanh", "clip", "softplus", "layernormscale", "sum",
      "max", "min", "mean", "absmax", "exx2", "exx2_zeromean", "sumnonstick", "maxnonstick",
      "minnonstick", "meannonstick", "absmaxnonstick", "quantscalepertoken",
      "quantscalepertokenfp8", "avgpoolfwd", "avgpoolnmapfwd", "maxpoolfwd",
      "depthwiseconv2dnative", "topkvalue", "topkindex", "csqint4wt", "csqint4", "csqint8ch",
      "csqint8mb", "csqint8wt", "qfp8ch", "qfp8mb", "qfp8wt", "fp32todl16", "dl16tofp32",
      "fp8todl16", "ReStickifyOpHBM", "shuffle", "floor"};
  for (const char* n : c2) {
    INFO(n);
    CHECK(ops::is_supported(n));
  }
  CHECK_FALSE(ops::is_supported("batchnormfwd"));
  CHECK_FALSE(ops::is_supported("maskbyindex"));
  CHECK_FALSE(ops::is_supported("nosuchop"));
  CHECK(ops::supported_ops().size() > 80);
  Buf A(DataFormat::SEN169_FP16, {2}, {1, 2}), O(DataFormat::SEN169_FP16, {2});
  const ops::TensorView one[] = {A.v()}, two[] = {A.v(), A.v()}, out[] = {O.v()};
  CHECK_THROWS_AS(ops::run("nosuchop", one, out), std::invalid_argument);
  CHECK_THROWS_AS(ops::run("add", one, out), std::invalid_argument);
  ops::run("add", two, out);
  CHECK(O.values() == std::vector<double>{2, 4});
  Buf Wrong(DataFormat::SEN169_FP16, {3});
  const ops::TensorView wout[] = {Wrong.v()};
  CHECK_THROWS_AS(ops::run("add", two, wout), std::invalid_argument);
}
