// DL16 (SEN169_FP16) against an independent double-precision reference built from formats.md D.1.
#include "catch.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "sim/formats/formats.h"

using namespace vspyre::fmt;

namespace {

const double k_inf = std::numeric_limits<double>::infinity();

// value = (-1)^s * 2^(e-31) * (1 + f/512); 0x0000/0x8000 zero; 0x7FFF/0xFFFF NaN-or-inf.
double ref_value(uint16_t c) {
  const bool neg = c & 0x8000;
  const unsigned e = (c >> 9) & 63, f = c & 511;
  double v;
  if ((c & 0x7FFF) == 0)
    v = 0.0;
  else if ((c & 0x7FFF) == 0x7FFF)
    v = k_inf;
  else
    v = std::ldexp(1.0 + f / 512.0, int(e) - 31);
  return neg ? -v : v;
}

// Magnitude rounding as the rules state it: nearest, ties away from zero; code 0 stands for the
// unrepresentable 2^-31 while rounding (so anything that rounds there is zero); beyond the last
// finite code saturate. Found by binary search over the monotonic code values, not bit tricks.
uint16_t ref_encode(double x, bool ties_even = false, bool saturate = true) {
  if (std::isnan(x)) return 0x7FFF;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  if (std::isinf(a)) return sign | 0x7FFF;
  auto val = [](unsigned c) { return c == 0 ? std::ldexp(1.0, -31) : ref_value(uint16_t(c)); };
  if (a < std::ldexp(1.0, -31)) return sign;
  const double virtual_next = std::ldexp(1.0 + 511.0 / 512.0, 32);
  const double top_mid = (val(0x7FFE) + virtual_next) / 2;
  if (a > top_mid || (a == top_mid && !ties_even)) return sign | (saturate ? 0x7FFE : 0x7FFF);
  if (a >= val(0x7FFE)) return sign | 0x7FFE;
  unsigned lo = 0, hi = 0x7FFE;  // val(lo) <= a < val(hi)
  while (hi - lo > 1) {
    const unsigned mid = (lo + hi) / 2;
    (val(mid) <= a ? lo : hi) = mid;
  }
  const double dlo = a - val(lo), dhi = val(hi) - a;
  unsigned c;
  if (dlo < dhi) c = lo;
  else if (dhi < dlo) c = hi;
  else c = ties_even ? ((lo & 1) ? hi : lo) : hi;
  return uint16_t(sign | c);
}

}  // namespace

TEST_CASE("formats: DL16 known bit patterns from formats.md and flex-api.md", "[formats][dl16]") {
  CHECK(dl16_from_float(1.0f) == 0x3E00);
  CHECK(dl16_from_float(1.0f) == k_dl16_one);
  CHECK(dl16_from_float(0.0f) == 0x0000);
  // encode_constant evidence: 2^-8 -> 11776, 1e-5 -> 7327, 0.000347222 -> 9944.
  CHECK(dl16_from_float(std::ldexp(1.0f, -8)) == 11776);
  CHECK(dl16_from_float(1e-5f) == 7327);
  CHECK(dl16_from_float(0.000347222f) == 9944);
  CHECK(dl16_from_double(1e-5) == 7327);
  // mean_keepdim's 1/1024 constant, which IEEE fp16 would read as 0.046875.
  CHECK(dl16_from_float(1.0f / 1024) == 0x2A00);
  CHECK(dl16_to_float(0x2A00) == 1.0f / 1024);
  CHECK(fp16_to_float(0x2A00) == 0.046875f);
  // Largest finite value 2^32 * (1 + 510/512) ~ 8.573e9.
  CHECK(dl16_to_double(0x7FFE) == std::ldexp(1.0 + 510.0 / 512, 32));
  CHECK(dl16_to_double(k_dl16_max) == k_dl16_max_value);
  CHECK(dl16_to_double(0xFFFE) == -k_dl16_max_value);
  CHECK(dl16_to_float(0xBE00) == -1.0f);
  CHECK(dl16_to_float(0x3E01) == 1.0f + 1.0f / 512);
}

TEST_CASE("formats: DL16 decodes all 65536 codes like the formula", "[formats][dl16]") {
  int bad = 0;
  for (uint32_t c = 0; c < 65536; ++c) {
    const double want = ref_value(uint16_t(c));
    const double got_d = dl16_to_double(uint16_t(c));
    const float got_f = dl16_to_float(uint16_t(c));
    if (!(got_d == want && double(got_f) == want && std::signbit(got_d) == std::signbit(want))) ++bad;
  }
  CHECK(bad == 0);
  // Bulk decoder agrees with the scalar one, bit for bit.
  std::vector<uint16_t> codes(65536);
  for (uint32_t c = 0; c < 65536; ++c) codes[c] = uint16_t(c);
  std::vector<float> out(65536);
  convert(DataFormat::SEN169_FP16, codes.data(), DataFormat::IEEE_FP32, out.data(), 65536);
  for (uint32_t c = 0; c < 65536; ++c)
    if (std::bit_cast<uint32_t>(out[c]) != std::bit_cast<uint32_t>(dl16_to_float(uint16_t(c)))) ++bad;
  CHECK(bad == 0);
}

TEST_CASE("formats: DL16 round trip of every finite code (float, double, bulk)", "[formats][dl16]") {
  int bad = 0;
  std::vector<float> vals;
  std::vector<uint16_t> codes;
  for (uint32_t c = 0; c < 65536; ++c) {
    if ((c & 0x7FFF) == 0x7FFF) continue;
    const float v = dl16_to_float(uint16_t(c));
    if (dl16_from_float(v) != c || dl16_from_double(double(v)) != c) ++bad;
    vals.push_back(v);
    codes.push_back(uint16_t(c));
  }
  CHECK(bad == 0);
  std::vector<uint16_t> back(vals.size());
  convert(DataFormat::IEEE_FP32, vals.data(), DataFormat::SEN169_FP16, back.data(), vals.size());
  CHECK(back == codes);
}

TEST_CASE("formats: DL16 rounds to nearest with ties away from zero at every midpoint", "[formats][dl16]") {
  int bad = 0, checked = 0;
  for (uint32_t c = 1; c < 0x7FFE; ++c) {
    for (uint16_t sign : {uint16_t(0), uint16_t(0x8000)}) {
      const double lo = ref_value(uint16_t(c | sign)), hi = ref_value(uint16_t((c + 1) | sign));
      const double mid = (lo + hi) / 2;  // 11 significant bits: exact in float too
      const float midf = float(mid);
      if (double(midf) != mid) { ++bad; continue; }
      const uint16_t up = uint16_t((c + 1) | sign), down = uint16_t(c | sign);
      const float below = std::nextafter(midf, float(lo)), above = std::nextafter(midf, float(hi));
      if (dl16_from_float(midf) != up) ++bad;
      if (dl16_from_double(mid) != up) ++bad;
      if (dl16_from_float(below) != down || dl16_from_float(above) != up) ++bad;
      if (dl16_from_double(std::nextafter(mid, lo)) != down) ++bad;
      // The alternative rule, for when a measurement says ties go to even.
      Dl16Rules even;
      even.rounding = Rounding::nearest_even;
      if (dl16_from_float(midf, even) != ((c & 1) ? up : down)) ++bad;
      ++checked;
    }
  }
  CHECK(checked == 2 * (0x7FFE - 1));
  CHECK(bad == 0);
}

TEST_CASE("formats: DL16 matches the reference encoder on random doubles and floats", "[formats][dl16]") {
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> mant(-1.0, 1.0);
  std::uniform_int_distribution<int> ex(-40, 40);
  int bad = 0;
  for (int i = 0; i < 200000; ++i) {
    const double x = std::ldexp(mant(rng), ex(rng));
    if (dl16_from_double(x) != ref_encode(x)) ++bad;
    const float xf = float(x);
    if (dl16_from_float(xf) != ref_encode(double(xf))) ++bad;
    Dl16Rules even;
    even.rounding = Rounding::nearest_even;
    if (dl16_from_double(x, even) != ref_encode(x, true)) ++bad;
  }
  CHECK(bad == 0);
}

TEST_CASE("formats: DL16 has no denormals, the lowest binade is normal", "[formats][dl16]") {
  // e = 0, f != 0 is 2^-31 * (1 + f/512), not a subnormal.
  CHECK(dl16_to_double(0x0001) == std::ldexp(1.0 + 1.0 / 512, -31));
  CHECK(dl16_to_double(0x01FF) == std::ldexp(1.0 + 511.0 / 512, -31));
  CHECK(dl16_from_double(std::ldexp(1.0 + 1.0 / 512, -31)) == 0x0001);
  // 2^-31 itself would be code 0, which is zero: it and anything smaller flush to zero.
  CHECK(dl16_from_double(std::ldexp(1.0, -31)) == 0x0000);
  CHECK(dl16_from_double(std::ldexp(1.0, -40)) == 0x0000);
  CHECK(dl16_from_float(1e-30f) == 0x0000);
  CHECK(dl16_from_float(std::numeric_limits<float>::denorm_min()) == 0x0000);
  // Threshold: halfway between 2^-31 and the smallest nonzero code rounds (away) up to it.
  const double half = std::ldexp(1.0 + 1.0 / 1024, -31);
  CHECK(dl16_from_double(half) == 0x0001);
  CHECK(dl16_from_double(std::nextafter(half, 0.0)) == 0x0000);
  CHECK(dl16_from_double(-std::ldexp(1.0, -40)) == 0x8000);  // sign kept by default
  Dl16Rules unsigned_zero;
  unsigned_zero.keep_zero_sign = false;
  CHECK(dl16_from_double(-std::ldexp(1.0, -40), unsigned_zero) == 0x0000);
  CHECK(dl16_from_float(-0.0f, unsigned_zero) == 0x0000);
  CHECK(dl16_from_float(-0.0f) == 0x8000);
  CHECK(std::signbit(dl16_to_float(0x8000)));
  CHECK(dl16_to_float(0x8000) == 0.0f);
}

TEST_CASE("formats: DL16 saturation, overflow, NaN and infinity", "[formats][dl16]") {
  CHECK(dl16_from_float(1e10f) == 0x7FFE);
  CHECK(dl16_from_float(-1e10f) == 0xFFFE);
  CHECK(dl16_from_float(3.0e38f) == 0x7FFE);
  CHECK(dl16_from_double(1e300) == 0x7FFE);
  CHECK(dl16_from_float(std::numeric_limits<float>::infinity()) == 0x7FFF);
  CHECK(dl16_from_float(-std::numeric_limits<float>::infinity()) == 0xFFFF);
  CHECK(dl16_from_float(std::numeric_limits<float>::quiet_NaN()) == 0x7FFF);
  // A NaN's sign does not reach the code: x86 makes 0/0 a negative NaN, aarch64 a positive one,
  // and the merged code reads back as an infinity of its sign bit (relu(sqrt(-1)) was 0 on x86).
  CHECK(dl16_from_double(-std::numeric_limits<double>::quiet_NaN()) == 0x7FFF);
  CHECK(dl16_from_float(-std::numeric_limits<float>::quiet_NaN()) == 0x7FFF);
  volatile float zero = 0.0f;
  CHECK(dl16_from_float(zero / zero) == 0x7FFF);
  CHECK(dl16_to_float(dl16_from_float(std::sqrt(-1.0f + zero))) > 0);
  // The largest finite value is not an infinity: 0x7FFE is finite, e = 63 otherwise normal.
  CHECK(std::isfinite(dl16_to_float(0x7FFE)));
  CHECK(std::isfinite(dl16_to_float(0x7E00)));
  CHECK(dl16_to_double(0x7E00) == std::ldexp(1.0, 32));
  CHECK(dl16_to_float(0x7FFF) == std::numeric_limits<float>::infinity());
  CHECK(dl16_to_float(0xFFFF) == -std::numeric_limits<float>::infinity());
  Dl16Rules nan_rule;
  nan_rule.ninf_decodes_to_nan = true;
  CHECK(std::isnan(dl16_to_float(0x7FFF, nan_rule)));
  CHECK(std::isnan(dl16_to_double(0xFFFF, nan_rule)));
  // Without saturation, the overflow boundary is the midpoint above the max (ties away -> over).
  Dl16Rules no_sat;
  no_sat.saturate = false;
  const double top_mid = std::ldexp(1.0 + 510.5 / 512, 32);
  CHECK(dl16_from_double(top_mid, no_sat) == 0x7FFF);
  CHECK(dl16_from_double(std::nextafter(top_mid, 0.0), no_sat) == 0x7FFE);
  CHECK(dl16_from_double(-2 * top_mid, no_sat) == 0xFFFF);
  CHECK(dl16_from_double(top_mid) == 0x7FFE);
}

TEST_CASE("formats: every IEEE fp16 and bfloat16 value converts to DL16 like the reference", "[formats][dl16]") {
  std::vector<uint16_t> codes(65536), out(65536);
  for (uint32_t c = 0; c < 65536; ++c) codes[c] = uint16_t(c);
  int bad = 0;
  convert(DataFormat::IEEE_FP16, codes.data(), DataFormat::SEN169_FP16, out.data(), 65536);
  for (uint32_t c = 0; c < 65536; ++c) {
    const double v = double(fp16_to_float(uint16_t(c)));
    const uint16_t want = std::isnan(v) ? uint16_t(0x7FFF) : ref_encode(v);  // a NaN of either sign
    if (out[c] != want) ++bad;
  }
  CHECK(bad == 0);
  convert(DataFormat::BFLOAT16, codes.data(), DataFormat::SEN169_FP16, out.data(), 65536);
  for (uint32_t c = 0; c < 65536; ++c) {
    const double v = double(bf16_to_float(uint16_t(c)));
    const uint16_t want = std::isnan(v) ? uint16_t(0x7FFF) : ref_encode(v);  // a NaN of either sign
    if (out[c] != want) ++bad;
  }
  CHECK(bad == 0);
  // bf16 has 8 significant bits, so inside DL16's range the conversion is exact.
  for (uint32_t c = 0; c < 65536; ++c) {
    const float v = bf16_to_float(uint16_t(c));
    const float a = std::fabs(v);
    if (a > std::ldexp(1.0f, -31) && a < std::ldexp(1.0f, 33) && dl16_to_float(out[c]) != v) ++bad;
  }
  CHECK(bad == 0);
}

TEST_CASE("formats: DL16 host round-trip error floor is 2^-11 in 0.5..1", "[formats][dl16]") {
  // op_spec_lab measured this floor; it follows from 9 fraction bits with round to nearest.
  double worst = 0;
  for (uint32_t c = 0x3800; c < 0x3C00; ++c) {  // all fp16 values in [0.5, 1)
    const float x = fp16_to_float(uint16_t(c));
    const float back = dl16_to_float(dl16_from_float(x));
    worst = std::max(worst, std::fabs(double(back) - double(x)));
  }
  CHECK(worst == std::ldexp(1.0, -11));
}
