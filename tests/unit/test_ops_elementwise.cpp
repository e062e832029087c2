// vspyre::ops elementwise opFuncs against double-precision references (formats.md C.2).
#include "catch.h"

#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "ops_test_util.h"

using namespace ops_test;

namespace {

// Broadcast reference: shapes right-aligned.
std::vector<double> ref_binary(const std::vector<double>& a, const std::vector<int64_t>& as,
                               const std::vector<double>& b, const std::vector<int64_t>& bs,
                               const std::vector<int64_t>& os,
                               const std::function<double(double, double)>& f) {
  std::vector<double> r(size_t(numel(os)));
  const size_t R = os.size();
  std::vector<int64_t> idx(R);
  for (size_t i = 0; i < r.size(); ++i) {
    int64_t t = int64_t(i);
    for (size_t k = R; k-- > 0;) {
      idx[k] = t % os[k];
      t /= os[k];
    }
    auto off = [&](const std::vector<int64_t>& s) {
      int64_t o = 0;
      for (size_t k = 0; k < s.size(); ++k) {
        const int64_t c = s[k] == 1 ? 0 : idx[k + R - s.size()];
        o = o * s[k] + c;
      }
      return size_t(o);
    };
    r[i] = f(a[off(as)], b[off(bs)]);
  }
  return r;
}

}  // namespace

TEST_CASE("ops: binary DL16 with broadcasting matches double reference") {
  const std::vector<int64_t> as{3, 1, 5}, bs{4, 1}, os{3, 4, 5};
  const auto a = randv(15, -100, 100, DataFormat::SEN169_FP16, 1);
  auto b = randv(4, -3, 3, DataFormat::SEN169_FP16, 2);
  b[1] = 0.0;  // zero operand (and divide by zero)
  Buf A(DataFormat::SEN169_FP16, as, a), B(DataFormat::SEN169_FP16, bs, b);
  struct Case {
    ops::Binary op;
    std::function<double(double, double)> f;
  };
  const std::vector<Case> cases{
      {ops::Binary::add, [](double x, double y) { return x + y; }},
      {ops::Binary::sub, [](double x, double y) { return x - y; }},
      {ops::Binary::revsub, [](double x, double y) { return y - x; }},
      {ops::Binary::mul, [](double x, double y) { return x * y; }},
      {ops::Binary::div, [](double x, double y) { return x / y; }},
      {ops::Binary::maximum, [](double x, double y) { return std::max(x, y); }},
      {ops::Binary::minimum, [](double x, double y) { return std::min(x, y); }},
  };
  for (const auto& c : cases) {
    Buf O(DataFormat::SEN169_FP16, os);
    ops::binary(c.op, A.v(), B.v(), O.v());
    const auto ref = ref_binary(a, as, b, bs, os, c.f);
    for (size_t i = 0; i < ref.size(); ++i) {
      INFO("op " << int(c.op) << " i " << i << " ref " << ref[i] << " got " << O.at(i));
      // x/0 is +-inf in fp32; DL16 stores the merged NaN/inf code, read back as +-inf.
      CHECK(close(O.at(i), ref[i], k_dl16_rel, k_dl16_tiny));
    }
  }
}

TEST_CASE("ops: pow and comparisons on odd sizes and fp32 output") {
  const std::vector<int64_t> s{7, 13};
  auto a = randv(91, 0.1, 4, DataFormat::SEN169_FP16, 3);
  auto b = randv(91, -2, 2, DataFormat::SEN169_FP16, 4);
  for (size_t i = 0; i < 91; i += 5) b[i] = a[i];  // ties for the compares
  Buf A(DataFormat::SEN169_FP16, s, a), B(DataFormat::SEN169_FP16, s, b);
  Buf P(DataFormat::IEEE_FP32, s);
  ops::binary(ops::Binary::pow, A.v(), B.v(), P.v());
  for (size_t i = 0; i < 91; ++i) CHECK(close(P.at(i), std::pow(a[i], b[i]), 1e-6));
  struct Cmp {
    ops::Binary op;
    std::function<bool(double, double)> f;
  };
  for (const auto& c : std::vector<Cmp>{{ops::Binary::equal, std::equal_to<double>()},
                                        {ops::Binary::notequal, std::not_equal_to<double>()},
                                        {ops::Binary::greaterequal, std::greater_equal<double>()},
                                        {ops::Binary::lesserequal, std::less_equal<double>()},
                                        {ops::Binary::greaterthan, std::greater<double>()},
                                        {ops::Binary::lesserthan, std::less<double>()}}) {
    Buf O(DataFormat::SEN169_FP16, s);
    ops::binary(c.op, A.v(), B.v(), O.v());
    for (size_t i = 0; i < 91; ++i) CHECK(O.at(i) == (c.f(a[i], b[i]) ? 1.0 : 0.0));
  }
}

TEST_CASE("ops: DL16 results saturate to the largest finite value") {
  Buf A(DataFormat::SEN169_FP16, {4}, {6e9, -6e9, 8e9, 1e5});
  Buf B(DataFormat::SEN169_FP16, {4}, {4e9, -4e9, 8e9, 1e5});
  Buf O(DataFormat::SEN169_FP16, {4});
  ops::binary(ops::Binary::add, A.v(), B.v(), O.v());
  CHECK(O.at(0) == fmt::k_dl16_max_value);
  CHECK(O.at(1) == -fmt::k_dl16_max_value);
  CHECK(O.at(2) == fmt::k_dl16_max_value);
  CHECK(close(O.at(3), 2e5, k_dl16_rel));
  ops::binary(ops::Binary::mul, A.v(), B.v(), O.v());
  CHECK(O.at(0) == fmt::k_dl16_max_value);
  CHECK(O.at(3) == fmt::k_dl16_max_value);  // 1e10 > 8.57e9
  // Tiny products fall below DL16's smallest normal and flush to zero.
  Buf T(DataFormat::SEN169_FP16, {1}, {1e-6});
  ops::binary(ops::Binary::mul, T.v(), T.v(), O.v());
  CHECK(O.at(0) == 0.0);
}

TEST_CASE("ops: unary math matches double reference in DL16") {
  const size_t n = 301;
  auto x = randv(n, -6, 6, DataFormat::SEN169_FP16, 5);
  x[0] = 0.0;
  x[1] = -0.0;
  auto pos = randv(n, 1e-3, 1e4, DataFormat::SEN169_FP16, 6);
  struct Case {
    ops::Unary op;
    std::function<double(double)> f;
    bool positive;
    double abs;
  };
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  auto sp = [](double v) { return v > 20 ? v : std::log1p(std::exp(v)); };
  const std::vector<Case> cases{
      {ops::Unary::abs, [](double v) { return std::fabs(v); }, false, 0},
      {ops::Unary::neg, [](double v) { return -v; }, false, 0},
      {ops::Unary::exp, [](double v) { return std::exp(v); }, false, 0},
      {ops::Unary::log, [](double v) { return std::log(v); }, true, 1e-6},
      {ops::Unary::sqrt, [](double v) { return std::sqrt(v); }, true, 0},
      {ops::Unary::rsqrt, [](double v) { return 1 / std::sqrt(v); }, true, 0},
      {ops::Unary::reciprocal, [](double v) { return 1 / v; }, true, 0},
      {ops::Unary::tanh, [](double v) { return std::tanh(v); }, false, 1e-6},
      {ops::Unary::sigmoid, sig, false, 1e-6},
      {ops::Unary::gelu, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, false, 1e-6},
      {ops::Unary::silu, [&](double v) { return v * sig(v); }, false, 1e-6},
      {ops::Unary::relu, [](double v) { return v > 0 ? v : 0.0; }, false, 0},
      {ops::Unary::relu6, [](double v) { return std::min(std::max(v, 0.0), 6.0); }, false, 0},
      {ops::Unary::leakyrelu, [](double v) { return v >= 0 ? v : 0.01 * v; }, false, 1e-7},
      {ops::Unary::mish, [&](double v) { return v * std::tanh(sp(v)); }, false, 1e-6},
      {ops::Unary::softplus, sp, false, 1e-6},
      {ops::Unary::floor, [](double v) { return std::floor(v); }, false, 0},
      {ops::Unary::layernormscale, [](double v) { return 1 / std::sqrt(v + 1e-5); }, true, 0},
  };
  for (const auto& c : cases) {
    const auto& in = c.positive ? pos : x;
    Buf I(DataFormat::SEN169_FP16, {int64_t(n)}, in), O(DataFormat::SEN169_FP16, {int64_t(n)});
    ops::unary(c.op, I.v(), O.v());
    for (size_t i = 0; i < n; ++i) {
      INFO("op " << int(c.op) << " x " << in[i] << " got " << O.at(i) << " ref " << c.f(in[i]));
      CHECK(close(O.at(i), c.f(in[i]), k_dl16_rel, c.abs + k_dl16_tiny));
    }
  }
  // gelu tanh form, clip with constants, exp overflow saturates.
  Buf I(DataFormat::SEN169_FP16, {int64_t(n)}, x), O(DataFormat::IEEE_FP32, {int64_t(n)});
  ops::Attrs at;
  at.gelu_tanh = true;
  ops::unary(ops::Unary::gelu, I.v(), O.v(), at);
  for (size_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double ref = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    CHECK(close(O.at(i), ref, 1e-5, 1e-6));
  }
  ops::Attrs cl;
  cl.set("clipMin", -1.5).set("clipMax", 2.25);
  ops::unary(ops::Unary::clip, I.v(), O.v(), cl);
  for (size_t i = 0; i < n; ++i) CHECK(O.at(i) == std::min(std::max(x[i], -1.5), 2.25));
  Buf Big(DataFormat::SEN169_FP16, {2}, {30.0, 100.0}), BO(DataFormat::SEN169_FP16, {2});
  ops::unary(ops::Unary::exp, Big.v(), BO.v());
  CHECK(BO.at(0) == fmt::k_dl16_max_value);  // e^30 = 1.07e13 saturates
  CHECK(BO.at(1) == std::numeric_limits<double>::infinity());  // fp32 inf: the NaN/inf code
}

TEST_CASE("ops: gelu keeps its relative precision far below zero, in both forms") {
  // 0.5 x (1 + erf(x / sqrt 2)) in fp32 cancelled to 0 for x below about -4.4 (gelu(-5.65) =
  // -4.6e-8 came out as -0.0), and the tanh form the same way: the result has a few fp32 ulps of
  // relative error, down to x = -9 (Phi(-9) = 1e-19).
  std::vector<double> x;
  for (double v = -9.0; v <= -3.0; v += 0.125) x.push_back(v);
  const int64_t n = int64_t(x.size());
  Buf I(DataFormat::SEN169_FP16, {n}, x), O(DataFormat::IEEE_FP32, {n});
  ops::unary(ops::Unary::gelu, I.v(), O.v());
  for (size_t i = 0; i < x.size(); ++i) {
    const double ref = 0.5 * x[i] * std::erfc(-x[i] / std::sqrt(2.0));
    INFO("erf form, x " << x[i] << " got " << O.at(i) << " ref " << ref);
    CHECK(O.at(i) < 0);
    CHECK(std::fabs(O.at(i) - ref) <= 1e-5 * std::fabs(ref));
  }
  ops::Attrs at;
  at.gelu_tanh = true;
  ops::unary(ops::Unary::gelu, I.v(), O.v(), at);
  for (size_t i = 0; i < x.size(); ++i) {
    // 0.5 x (1 + tanh z) = x / (1 + e^(-2z)), which double evaluates without cancelling.
    const double z = std::sqrt(2 / M_PI) * (x[i] + 0.044715 * x[i] * x[i] * x[i]);
    const double ref = x[i] / (1 + std::exp(-2 * z));
    INFO("tanh form, x " << x[i] << " got " << O.at(i) << " ref " << ref);
    if (ref < -1e-37) CHECK(std::fabs(O.at(i) - ref) <= 1e-4 * std::fabs(ref));  // (fp32's normal range)
  }
}

TEST_CASE("ops: strided views, where3, fnms") {
  // A transposed input view: a [3,5] buffer read as its [5,3] transpose.
  const auto a = randv(15, -4, 4, DataFormat::SEN169_FP16, 7);
  Buf A(DataFormat::SEN169_FP16, {3, 5}, a);
  ops::TensorView at{A.bytes.data(), DataFormat::SEN169_FP16, {5, 3}, {1, 5}, 0};
  Buf One(DataFormat::SEN169_FP16, {1}, {1.0}), O(DataFormat::IEEE_FP32, {5, 3});
  ops::binary(ops::Binary::add, at, One.v(), O.v());
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 3; ++j) CHECK(O.at(size_t(i * 3 + j)) == a[size_t(j * 5 + i)] + 1.0);

  const auto b = randv(15, -4, 4, DataFormat::SEN169_FP16, 8);
  Buf B(DataFormat::SEN169_FP16, {3, 5}, b);
  Buf C(DataFormat::BOOL, {3, 1}, {1, 0, 1});
  Buf W(DataFormat::SEN169_FP16, {3, 5});
  ops::where3(C.v(), A.v(), B.v(), W.v());
  for (size_t i = 0; i < 15; ++i) CHECK(W.at(i) == ((i / 5) != 1 ? a[i] : b[i]));

  Buf Cc(DataFormat::SEN169_FP16, {5}, {1, 2, 3, 4, 5}), F(DataFormat::IEEE_FP32, {3, 5});
  ops::fnms(A.v(), B.v(), Cc.v(), F.v());
  for (size_t i = 0; i < 15; ++i) CHECK(close(F.at(i), double(i % 5 + 1) - a[i] * b[i], 1e-6, 1e-6));

}

TEST_CASE("ops: fp8 E4M3 elementwise rounds within 2^-3") {
  const auto a = randv(64, -200, 200, DataFormat::SEN143_FP8, 9);
  const auto b = randv(64, -2, 2, DataFormat::SEN143_FP8, 10);
  Buf A(DataFormat::SEN143_FP8, {64}, a), B(DataFormat::SEN143_FP8, {64}, b);
  Buf O(DataFormat::SEN143_FP8, {64});
  ops::binary(ops::Binary::mul, A.v(), B.v(), O.v());
  for (size_t i = 0; i < 64; ++i) {
    const double ref = std::clamp(a[i] * b[i], -448.0, 448.0);  // E4M3 saturates at 448
    CHECK(close(O.at(i), ref, 1.0 / 8, 1.0 / 512));
  }
}

TEST_CASE("ops: integer elementwise is exact and saturates") {
  Buf A(DataFormat::SENINT8, {6}, {-128, -5, 0, 7, 100, 127});
  Buf B(DataFormat::SENINT8, {6}, {-1, 3, 9, -7, 100, 1});
  Buf O(DataFormat::SENINT8, {6}), W(DataFormat::IEEE_INT32, {6});
  ops::binary(ops::Binary::add, A.v(), B.v(), O.v());
  CHECK(O.values() == std::vector<double>{-128, -2, 9, 0, 127, 127});
  ops::binary(ops::Binary::mul, A.v(), B.v(), W.v());
  CHECK(W.values() == std::vector<double>{128, -15, 0, -49, 10000, 127});
}

TEST_CASE("ops: unary and identity broadcast a size-1 input dim to the output (torch-spyre's cat)") {
  // cat([x, x], dim=0) as the compiler writes it: identity from x [1, 4, 6] into out [2, 4, 6].
  const auto x = randv(24, -4, 4, DataFormat::SEN169_FP16, 11);
  Buf X(DataFormat::SEN169_FP16, {1, 4, 6}, x), O(DataFormat::SEN169_FP16, {2, 4, 6});
  ops::unary(ops::Unary::identity, X.v(), O.v());
  for (size_t i = 0; i < 48; ++i) CHECK(O.at(i) == x[i % 24]);
  // ... and along the stick dim's neighbour: x [4, 1, 6] into [4, 2, 6] (cat on dim 1).
  Buf Y(DataFormat::SEN169_FP16, {4, 1, 6}, x), P(DataFormat::SEN169_FP16, {4, 2, 6});
  ops::unary(ops::Unary::identity, Y.v(), P.v());
  for (size_t i = 0; i < 48; ++i) CHECK(P.at(i) == x[(i / 12) * 6 + i % 6]);
  // A math op broadcasts the same way; a missing leading dim counts as size 1.
  Buf Z(DataFormat::SEN169_FP16, {4, 6}, x), N(DataFormat::IEEE_FP32, {3, 4, 6});
  ops::unary(ops::Unary::neg, Z.v(), N.v());
  for (size_t i = 0; i < 72; ++i) CHECK(N.at(i) == -x[i % 24]);
  // Shapes that do not broadcast still fail, naming both.
  Buf Bad(DataFormat::SEN169_FP16, {3, 4, 6});
  CHECK_THROWS_WITH(ops::unary(ops::Unary::identity, P.v(), Bad.v()),
                    Catch::Contains("(4,2,6)") && Catch::Contains("(3,4,6)"));
}

// Elementwise ops run through fp32 in chunks of the output's flat index (ops.cpp, k_chunk):
// across chunk boundaries, with operands read in chunks, broadcast along either dim or a scalar,
// every element must come out as one fp32 operation rounded once, bit for bit.
TEST_CASE("ops: elementwise ops over several chunks round each element as one fp32 op") {
  const DataFormat F = DataFormat::SEN169_FP16;
  const std::vector<int64_t> os{3, 11001};  // 33003 elements: two whole chunks and a partial one
  const auto a = randv(3 * 11001, -50, 50, F, 11);
  const auto brow = randv(11001, -4, 4, F, 12);
  const auto bcol = randv(3, -4, 4, F, 13);
  const std::vector<double> scalar{1.0};
  Buf A(F, os, a);
  // One element rounded as the op does it: fp32 operands, one fp32 result, converted once.
  auto round_one = [&](float v) {
    uint16_t code = 0;
    fmt::convert(DataFormat::IEEE_FP32, &v, F, &code, 1, fmt::k_default_rules);
    return code;
  };
  auto code_at = [](const Buf& b, size_t i) {
    uint16_t c = 0;
    std::memcpy(&c, b.bytes.data() + 2 * i, 2);
    return c;
  };
  struct Operand {
    std::vector<int64_t> size;
    std::vector<double> v;
    std::function<size_t(size_t, size_t)> at;  // (row, col) -> index into v
  };
  const std::vector<Operand> bs{
      {os, randv(3 * 11001, -4, 4, F, 14), [](size_t r, size_t c) { return r * 11001 + c; }},
      {{1, 11001}, brow, [](size_t, size_t c) { return c; }},
      {{3, 1}, bcol, [](size_t r, size_t) { return r; }},
      {{1}, scalar, [](size_t, size_t) { return size_t(0); }},
  };
  for (const auto& bo : bs) {
    Buf B(F, bo.size, bo.v);
    Buf O(F, os);
    ops::binary(ops::Binary::mul, A.v(), B.v(), O.v());
    size_t wrong = 0;
    for (size_t r = 0; r < 3; ++r)
      for (size_t c = 0; c < 11001; ++c) {
        const size_t i = r * 11001 + c;
        const float want = float(a[i]) * float(bo.v[bo.at(r, c)]);
        if (code_at(O, i) != round_one(want)) ++wrong;
      }
    INFO("operand b of " << bo.size.size() << " dims, " << bo.v.size() << " elements");
    CHECK(wrong == 0);
    // The operands swapped: the broadcast one first.
    Buf O2(F, os);
    ops::binary(ops::Binary::sub, B.v(), A.v(), O2.v());
    wrong = 0;
    for (size_t r = 0; r < 3; ++r)
      for (size_t c = 0; c < 11001; ++c) {
        const size_t i = r * 11001 + c;
        if (code_at(O2, i) != round_one(float(bo.v[bo.at(r, c)]) - float(a[i]))) ++wrong;
      }
    CHECK(wrong == 0);
  }
  // Unary, and the same op into a strided (non-dense) output, which takes the whole-tensor path.
  Buf E(F, os);
  ops::unary(ops::Unary::exp, A.v(), E.v());
  size_t wrong = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (code_at(E, i) != round_one(std::exp(float(a[i])))) ++wrong;
  CHECK(wrong == 0);
  Buf W(F, {3, 2 * 11001});
  ops::TensorView strided = W.v();
  strided.size = os;
  strided.stride = {2 * 11001, 2};
  ops::unary(ops::Unary::exp, A.v(), strided);
  wrong = 0;
  for (size_t r = 0; r < 3; ++r)
    for (size_t c = 0; c < 11001; ++c)
      if (code_at(W, r * 2 * 11001 + 2 * c) != code_at(E, r * 11001 + c)) ++wrong;
  CHECK(wrong == 0);
  // Three operands (fnms: c - a*b, one fused fp32 op): a same-shape operand read in chunks, a row
  // and a column broadcast gathered by offsets, in each of the three places.
  Buf Same(F, os, bs[0].v), Row(F, {1, 11001}, brow), Col(F, {3, 1}, bcol);
  const std::array<const Operand*, 3> kinds{&bs[0], &bs[1], &bs[2]};
  const std::array<Buf*, 3> bufs{&Same, &Row, &Col};
  for (size_t rot = 0; rot < 3; ++rot) {
    const size_t ia = rot, ib = (rot + 1) % 3, ic = (rot + 2) % 3;
    Buf O3(F, os);
    ops::fnms(bufs[ia]->v(), bufs[ib]->v(), bufs[ic]->v(), O3.v());
    wrong = 0;
    for (size_t r = 0; r < 3; ++r)
      for (size_t c = 0; c < 11001; ++c) {
        const float x = float(kinds[ia]->v[kinds[ia]->at(r, c)]), y = float(kinds[ib]->v[kinds[ib]->at(r, c)]),
                    z = float(kinds[ic]->v[kinds[ic]->at(r, c)]);
        if (code_at(O3, r * 11001 + c) != round_one(std::fma(-x, y, z))) ++wrong;
      }
    INFO("fnms with the same-shape operand in place " << (3 - rot) % 3);
    CHECK(wrong == 0);
  }
}
