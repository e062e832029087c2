// fp8 (E4M3FN, E5M2), FP9, IEEE fp16 and bfloat16 against formula-built double references.
#include "catch.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "sim/formats/formats.h"

using namespace vspyre::fmt;

namespace {

struct Spec {
  int e, m, bias;
  bool ieee;  // IEEE specials; otherwise OCP FN (only all-ones is NaN, no infinity)
};
constexpr Spec k_e4m3{4, 3, 7, false}, k_e5m2{5, 2, 15, true}, k_fp9{5, 3, 15, true},
    k_fp16{5, 10, 15, true}, k_bf16{8, 7, 127, true};

// Value of a code from the textbook definition, in double.
double ref_value(const Spec& s, uint32_t c) {
  const uint32_t sign = (c >> (s.e + s.m)) & 1, e = (c >> s.m) & ((1u << s.e) - 1),
                 m = c & ((1u << s.m) - 1);
  const uint32_t emax = (1u << s.e) - 1;
  double v;
  if (s.ieee && e == emax)
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (!s.ieee && e == emax && m == (1u << s.m) - 1)
    v = std::numeric_limits<double>::quiet_NaN();
  else if (e == 0)
    v = std::ldexp(double(m), 1 - s.bias - s.m);
  else
    v = std::ldexp(1.0 + double(m) / double(1u << s.m), int(e) - s.bias);
  return sign ? -v : v;
}

uint32_t max_code(const Spec& s) {
  return s.ieee ? (((1u << s.e) - 2) << s.m) | ((1u << s.m) - 1)
                : (((1u << s.e) - 1) << s.m) | ((1u << s.m) - 2);
}

// Checks decode(all codes), encode(decode(c)) == c, and round-half-even at every midpoint
// between adjacent positive codes (including the subnormal ones) for one format.
// float_input: enc takes a float, so midpoint neighbours are float neighbours.
template <class Enc, class Dec>
void check_format(const Spec& s, Enc enc, Dec dec, bool float_input = false) {
  const uint32_t n = 1u << (1 + s.e + s.m);
  int bad = 0;
  for (uint32_t c = 0; c < n; ++c) {
    const double want = ref_value(s, c), got = double(dec(c));
    if (std::isnan(want)) {
      if (!std::isnan(got)) ++bad;
      continue;
    }
    if (got != want || std::signbit(got) != std::signbit(want)) ++bad;
    if (enc(want) != c) ++bad;
  }
  CHECK(bad == 0);
  const uint32_t sign_bit = 1u << (s.e + s.m);
  for (uint32_t c = 0; c < max_code(s); ++c) {
    for (uint32_t sg : {0u, sign_bit}) {
      const double lo = ref_value(s, c | sg), hi = ref_value(s, (c + 1) | sg);
      const double mid = (lo + hi) / 2;
      const uint32_t even = (c & 1) ? c + 1 : c;
      if (enc(mid) != (even | sg)) ++bad;
      const double below = float_input ? double(std::nextafter(float(mid), float(lo)))
                                       : std::nextafter(mid, lo);
      const double above = float_input ? double(std::nextafter(float(mid), float(hi)))
                                       : std::nextafter(mid, hi);
      if (float_input && double(float(mid)) != mid) ++bad;
      if (enc(below) != (c | sg)) ++bad;
      if (enc(above) != ((c + 1) | sg)) ++bad;
    }
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("formats: fp8 E4M3FN (SEN143_FP8) all 256 codes, ties to even", "[formats][fp8]") {
  check_format(k_e4m3, [](double x) { return uint32_t(e4m3_from_double(x)); },
               [](uint32_t c) { return e4m3_to_float(uint8_t(c)); });
  check_format(k_e4m3, [](double x) { return uint32_t(e4m3_from_float(float(x))); },
               [](uint32_t c) { return e4m3_to_float(uint8_t(c)); }, true);
  CHECK(e4m3_to_float(0x7E) == 448.0f);  // max, the spec's mulConst = 1/448
  CHECK(e4m3_to_float(0x01) == std::ldexp(1.0f, -9));
  CHECK(e4m3_to_float(0x08) == std::ldexp(1.0f, -6));
  CHECK(e4m3_to_float(0x38) == 1.0f);
  CHECK(std::isnan(e4m3_to_float(0x7F)));
  CHECK(std::isnan(e4m3_to_float(0xFF)));
  CHECK(e4m3_to_float(0x78) == 256.0f);  // e = 15 is a normal binade in the FN encoding
}

TEST_CASE("formats: fp8 E4M3FN saturation and overflow", "[formats][fp8]") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(e4m3_from_float(464.0f) == 0x7E);  // tie between 448 and (NaN's) 480: even is 448
  CHECK(e4m3_from_float(500.0f) == 0x7E);
  CHECK(e4m3_from_float(-1e9f) == 0xFE);
  CHECK(e4m3_from_float(inf) == 0x7E);
  CHECK(e4m3_from_float(-inf) == 0xFE);
  CHECK(e4m3_from_float(std::numeric_limits<float>::quiet_NaN()) == 0x7F);
  // Non-saturating: like torch's cast, >= 480 and infinities give NaN.
  CHECK(e4m3_from_float(464.0f, false) == 0x7E);
  CHECK(e4m3_from_float(480.0f, false) == 0x7F);
  CHECK(e4m3_from_float(-inf, false) == 0xFF);
  // Subnormal underflow: half the smallest subnormal ties to zero, above it rounds up.
  CHECK(e4m3_from_float(std::ldexp(1.0f, -10)) == 0x00);
  CHECK(e4m3_from_float(std::ldexp(1.5f, -10)) == 0x01);
  CHECK(e4m3_from_float(-std::ldexp(1.0f, -12)) == 0x80);
}

TEST_CASE("formats: fp8 E5M2 (SEN152_FP8) all 256 codes, specials", "[formats][fp8]") {
  check_format(k_e5m2, [](double x) { return uint32_t(e5m2_from_double(x)); },
               [](uint32_t c) { return e5m2_to_float(uint8_t(c)); });
  check_format(k_e5m2, [](double x) { return uint32_t(e5m2_from_float(float(x))); },
               [](uint32_t c) { return e5m2_to_float(uint8_t(c)); }, true);
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(e5m2_to_float(0x7B) == 57344.0f);
  CHECK(e5m2_to_float(0x7C) == inf);
  CHECK(e5m2_to_float(0xFC) == -inf);
  CHECK(std::isnan(e5m2_to_float(0x7D)));
  CHECK(e5m2_to_float(0x01) == std::ldexp(1.0f, -16));
  CHECK(e5m2_from_float(1e6f) == 0x7B);
  CHECK(e5m2_from_float(1e6f, false) == 0x7C);
  CHECK(e5m2_from_float(inf) == 0x7C);  // a real infinity stays infinite even when saturating
  CHECK(e5m2_from_float(-inf) == 0xFC);
}

TEST_CASE("formats: SEN153_FP9 all 512 codes", "[formats][fp9]") {
  check_format(k_fp9, [](double x) { return uint32_t(fp9_from_float(float(x))); },
               [](uint32_t c) { return fp9_to_float(uint16_t(c)); }, true);
  CHECK(fp9_to_float(0x0F7) == 61440.0f);
  CHECK(fp9_from_float(1e6f) == 0x0F7);
  CHECK(fp9_from_float(-1.0f) == 0x178);
}

TEST_CASE("formats: IEEE fp16 all 65536 codes, ties to even, overflow to inf", "[formats][fp16]") {
  check_format(k_fp16, [](double x) { return uint32_t(fp16_from_double(x)); },
               [](uint32_t c) { return fp16_to_float(uint16_t(c)); });
  check_format(k_fp16, [](double x) { return uint32_t(fp16_from_float(float(x))); },
               [](uint32_t c) { return fp16_to_float(uint16_t(c)); }, true);
  CHECK(fp16_from_float(65504.0f) == 0x7BFF);
  CHECK(fp16_from_float(65519.99f) == 0x7BFF);
  CHECK(fp16_from_float(65520.0f) == 0x7C00);
  CHECK(fp16_from_float(-1e20f) == 0xFC00);
  CHECK(fp16_from_float(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(fp16_from_float(std::ldexp(1.0f, -25)) == 0x0000);  // tie to even (zero)
  CHECK(fp16_from_float(std::ldexp(1.5f, -25)) == 0x0001);
  CHECK(fp16_from_float(std::ldexp(3.0f, -25)) == 0x0002);  // 1.5 ulp ties up to even 2
  CHECK(fp16_from_float(std::numeric_limits<float>::quiet_NaN()) == 0x7E00);
  CHECK(fp16_from_float(1.0f) == 0x3C00);
#ifdef __FLT16_MAX__
  // Cross-check with the compiler's own binary16 on random floats of all magnitudes.
  std::mt19937 rng(7);
  int bad = 0;
  for (int i = 0; i < 200000; ++i) {
    const float x = std::bit_cast<float>(uint32_t(rng()));
    if (std::isnan(x)) continue;
    const _Float16 h = static_cast<_Float16>(x);
    if (std::bit_cast<uint16_t>(h) != fp16_from_float(x)) ++bad;
  }
  CHECK(bad == 0);
#endif
}

TEST_CASE("formats: bfloat16 all 65536 codes, ties to even", "[formats][bf16]") {
  check_format(k_bf16, [](double x) { return uint32_t(bf16_from_double(x)); },
               [](uint32_t c) { return bf16_to_float(uint16_t(c)); });
  check_format(k_bf16, [](double x) { return uint32_t(bf16_from_float(float(x))); },
               [](uint32_t c) { return bf16_to_float(uint16_t(c)); }, true);
  CHECK(bf16_from_float(1.0f) == 0x3F80);
  CHECK(bf16_from_float(std::bit_cast<float>(0x3F808000u)) == 0x3F80);  // tie, even
  CHECK(bf16_from_float(std::bit_cast<float>(0x3F818000u)) == 0x3F82);  // tie, even
  CHECK(bf16_from_float(std::numeric_limits<float>::max()) == 0x7F80);  // rounds up to inf
  CHECK(bf16_from_float(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(bf16_from_float(std::bit_cast<float>(0x00018000u)) == 0x0002);  // subnormal tie
  CHECK((bf16_from_float(std::numeric_limits<float>::quiet_NaN()) & 0x7FC0) == 0x7FC0);
}
