// The bulk converters' fast paths (16-bit lookup tables, fused host<->DL16 loops, typed strided
// gather/scatter, tiled transposing nests) against the generic element-wise path, bit for bit.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "catch.h"
#include "sim/formats/formats.h"

using namespace vspyre::fmt;

namespace {

std::vector<ConvertRules> all_rules() {
  std::vector<ConvertRules> out;
  for (int m = 0; m < 16; ++m) {
    ConvertRules r;
    r.dl16.rounding = (m & 1) ? Rounding::nearest_even : Rounding::nearest_ties_away;
    r.dl16.saturate = (m & 2) == 0;
    r.dl16.keep_zero_sign = (m & 4) == 0;
    r.dl16.ninf_decodes_to_nan = (m & 8) != 0;
    out.push_back(r);
  }
  return out;
}

std::vector<uint16_t> all_codes16() {
  std::vector<uint16_t> v(1 << 16);
  for (uint32_t c = 0; c < v.size(); ++c) v[c] = uint16_t(c);
  return v;
}

// fp32 inputs: specials, fp32 denormals, every DL16 rounding tie and its neighbours around 1.0,
// the DL16 range edges, random bit patterns.
std::vector<float> float_cases() {
  std::vector<float> v = {0.f, -0.f, 1.f, -1.f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::denorm_min(),
                          -std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max(), 8573157376.f, 8.6e9f, 9e9f,
                          std::ldexp(1.f, -31), std::ldexp(1.f, -32), std::ldexp(1.5f, -32)};
  for (uint32_t hi = 0; hi < (1u << 18); hi += 7) {  // sign, exponent, top 9 mantissa bits
    const uint32_t base = hi << 14;
    for (uint32_t low : {0x0000u, 0x1FFFu, 0x2000u, 0x2001u, 0x3FFFu}) {  // 0x2000: exact tie
      uint32_t b = base | low;
      float f;
      std::memcpy(&f, &b, 4);
      v.push_back(f);
    }
  }
  std::mt19937 rng(11);
  for (int i = 0; i < 200000; ++i) {
    uint32_t b = rng();
    float f;
    std::memcpy(&f, &b, 4);
    v.push_back(f);
  }
  for (uint32_t b = 1; b < 5000; ++b) {  // fp32 denormals
    float f;
    std::memcpy(&f, &b, 4);
    v.push_back(f);
  }
  return v;
}

template <class S, class D>
void same_as_generic(DataFormat from, const std::vector<S>& src, DataFormat to,
                     const ConvertRules& r) {
  std::vector<D> fast(src.size() + 3), slow(src.size() + 3);
  convert(from, src.data(), to, fast.data(), src.size(), r);
  convert_generic(from, src.data(), to, slow.data(), src.size(), r);
  REQUIRE(std::memcmp(fast.data(), slow.data(), src.size() * sizeof(D)) == 0);
  // Short runs take the non-table path; they must agree too.
  for (size_t i = 0; i + 17 <= src.size() && i < 4000; i += 17) {
    D a[17], b[17];
    convert(from, src.data() + i, to, a, 17, r);
    convert_generic(from, src.data() + i, to, b, 17, r);
    REQUIRE(std::memcmp(a, b, sizeof(a)) == 0);
  }
}

}  // namespace

TEST_CASE("formats: fast 16-bit host <-> DL16 conversions equal the generic path for every code and rule", "[formats][fast]") {
  const auto codes = all_codes16();
  for (const auto& r : all_rules()) {
    INFO("rules away=" << (r.dl16.rounding == Rounding::nearest_ties_away) << " sat=" << r.dl16.saturate
                       << " zero=" << r.dl16.keep_zero_sign << " nan=" << r.dl16.ninf_decodes_to_nan);
    same_as_generic<uint16_t, uint16_t>(DataFormat::IEEE_FP16, codes, DataFormat::SEN169_FP16, r);
    same_as_generic<uint16_t, uint16_t>(DataFormat::BFLOAT16, codes, DataFormat::SEN169_FP16, r);
    same_as_generic<uint16_t, uint16_t>(DataFormat::SEN169_FP16, codes, DataFormat::IEEE_FP16, r);
    same_as_generic<uint16_t, uint16_t>(DataFormat::SEN169_FP16, codes, DataFormat::BFLOAT16, r);
    same_as_generic<uint16_t, float>(DataFormat::SEN169_FP16, codes, DataFormat::IEEE_FP32, r);
    same_as_generic<uint16_t, float>(DataFormat::IEEE_FP16, codes, DataFormat::IEEE_FP32, r);
  }
  // And against the scalar codecs (independent of the bulk code) for the default rules.
  std::vector<uint16_t> d(codes.size()), h(codes.size());
  convert(DataFormat::IEEE_FP16, codes.data(), DataFormat::SEN169_FP16, d.data(), codes.size());
  convert(DataFormat::SEN169_FP16, codes.data(), DataFormat::IEEE_FP16, h.data(), codes.size());
  for (uint32_t c = 0; c < codes.size(); ++c) {
    REQUIRE(d[c] == dl16_from_float(fp16_to_float(uint16_t(c))));
    const float x = dl16_to_float(uint16_t(c));
    REQUIRE(h[c] == fp16_from_float(x));
  }
}

TEST_CASE("formats: fast fp32 <-> DL16 conversions equal the generic path incl. ties, denormals, inf, nan", "[formats][fast]") {
  const auto xs = float_cases();
  for (const auto& r : all_rules()) {
    same_as_generic<float, uint16_t>(DataFormat::IEEE_FP32, xs, DataFormat::SEN169_FP16, r);
  }
  const auto codes = all_codes16();
  for (const auto& r : all_rules())
    same_as_generic<uint16_t, float>(DataFormat::SEN169_FP16, codes, DataFormat::IEEE_FP32, r);
  // Same-format copies are bit copies (NaN payloads included).
  same_as_generic<uint16_t, uint16_t>(DataFormat::SEN169_FP16, codes, DataFormat::SEN169_FP16, k_default_rules);
  same_as_generic<float, float>(DataFormat::IEEE_FP32, xs, DataFormat::IEEE_FP32, k_default_rules);
}

namespace {

// Element-wise reference of convert_nest: the nest's own loop order, one generic conversion per
// element.
void reference_nest(DataFormat from, const void* src, DataFormat to, void* dst, const StridedNest& n,
                    const ConvertRules& r) {
  const size_t rank = n.size.size();
  for (auto s : n.size)
    if (s <= 0) return;
  std::vector<int64_t> idx(rank, 0);
  while (true) {
    int64_t so = n.offset_src, d_o = n.offset_dst;
    for (size_t k = 0; k < rank; ++k) {
      so += idx[k] * n.stride_src[k];
      d_o += idx[k] * n.stride_dst[k];
    }
    uint64_t in = 0, out = 0;
    write_code(from, &in, 0, read_code(from, src, size_t(so)));
    convert_generic(from, &in, to, &out, 1, r);
    write_code(to, dst, size_t(d_o), read_code(to, &out, 0));
    size_t k = 0;
    for (; k < rank; ++k) {
      if (++idx[k] < n.size[k]) break;
      idx[k] = 0;
    }
    if (k == rank) return;
  }
}

struct NestCase {
  const char* what;
  StridedNest nest;
  size_t src_elems, dst_elems;
};

std::vector<NestCase> nest_cases() {
  std::vector<NestCase> c;
  // Transposes (tiled): sizes not multiples of the tile, both directions.
  c.push_back({"transpose 300x130 src-strided", {{300, 130}, {130, 1}, {1, 300}, 0, 0}, 300 * 130, 300 * 130});
  c.push_back({"transpose 130x300 dst-strided", {{130, 300}, {1, 130}, {300, 1}, 0, 0}, 300 * 130, 300 * 130});
  // A 3-D permutation with offsets.
  c.push_back({"3-D permute + offsets", {{7, 33, 5}, {165, 5, 1}, {1, 7, 231}, 3, 11}, 3 + 7 * 33 * 5, 11 + 7 * 33 * 5});
  // Negative strides (a flipped transpose).
  c.push_back({"negative strides", {{70, 90}, {-90, 1}, {1, 70}, 69 * 90, 0}, 70 * 90, 70 * 90});
  // Stick-layout style: innermost unit stride both sides, outer loops permuted.
  c.push_back({"stick layout", {{64, 3, 2}, {1, 100, 64}, {1, 64, 192}, 0, 0}, 400, 384});
  // Duplicates on the destination (stride 0): not injective, the loop order decides the value.
  c.push_back({"dst duplicates", {{50, 40}, {40, 1}, {1, 0}, 0, 0}, 2000, 50});
  // Strided innermost on both sides.
  c.push_back({"both strided", {{100, 20}, {3, 300}, {2, 200}, 1, 1}, 1 + 300 * 20, 1 + 200 * 20});
  return c;
}

template <class S>
std::vector<uint8_t> random_src(DataFormat f, size_t n, std::mt19937& rng) {
  std::vector<uint8_t> v(bytes_for(f, n) + 16);
  for (auto& b : v) b = uint8_t(rng());
  if (f == DataFormat::IEEE_FP32) {  // mostly ordinary values, some specials from the raw bits
    std::uniform_real_distribution<float> u(-1e4f, 1e4f);
    for (size_t i = 0; i < n; i += 3) store_element(f, v.data(), i, u(rng));
  }
  return v;
}

}  // namespace

TEST_CASE("formats: strided and tiled convert_nest equals the element-wise reference", "[formats][fast]") {
  struct P {
    DataFormat from, to;
  };
  const std::vector<P> pairs = {
      {DataFormat::IEEE_FP16, DataFormat::SEN169_FP16}, {DataFormat::SEN169_FP16, DataFormat::IEEE_FP16},
      {DataFormat::IEEE_FP32, DataFormat::SEN169_FP16}, {DataFormat::SEN169_FP16, DataFormat::IEEE_FP32},
      {DataFormat::BFLOAT16, DataFormat::SEN169_FP16},  {DataFormat::SEN169_FP16, DataFormat::SEN169_FP16},
      {DataFormat::IEEE_FP32, DataFormat::IEEE_FP32},   {DataFormat::IEEE_INT64, DataFormat::IEEE_INT32},
      {DataFormat::IEEE_FP32, DataFormat::SENINT8},     {DataFormat::IEEE_FP32, DataFormat::SENINT4},
      {DataFormat::SENINT4, DataFormat::IEEE_FP32},     {DataFormat::BOOL, DataFormat::SEN169_FP16},
  };
  std::mt19937 rng(3);
  for (const auto& p : pairs) {
    for (const auto& c : nest_cases()) {
      INFO(name(p.from) << " -> " << name(p.to) << ": " << c.what);
      const auto src = random_src<uint8_t>(p.from, c.src_elems, rng);
      std::vector<uint8_t> fast(bytes_for(p.to, c.dst_elems) + 16), slow;
      for (auto& b : fast) b = uint8_t(rng());  // bytes the nest leaves alone must survive
      slow = fast;
      convert_nest(p.from, src.data(), p.to, fast.data(), c.nest);
      reference_nest(p.from, src.data(), p.to, slow.data(), c.nest, k_default_rules);
      REQUIRE(fast == slow);
    }
  }
}
