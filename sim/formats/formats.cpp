// Element formats: names, scalar codecs and the bulk converters.
#include "sim/formats/formats.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

namespace vspyre::fmt {
namespace {

// ---------------------------------------------------------------------------------------------
// Generic small-float codec. A format is described at compile time so each bulk loop is a
// straight-line function of one element that the compiler can if-convert and vectorise.
// ---------------------------------------------------------------------------------------------

template <class T>
struct FloatBits;
template <>
struct FloatBits<float> {
  using U = uint32_t;
  static constexpr int man = 23, bias = 127, total = 32;
  static constexpr U inf_bits = 0x7F800000u;
};
template <>
struct FloatBits<double> {
  using U = uint64_t;
  static constexpr int man = 52, bias = 1023, total = 64;
  static constexpr U inf_bits = 0x7FF0000000000000ull;
};

template <class T>
constexpr T pow2(int e) {
  T r = 1;
  for (int i = 0; i < e; ++i) r *= 2;
  for (int i = 0; i < -e; ++i) r /= 2;
  return r;
}

// How the all-ones exponent is used.
enum class Special {
  ieee,        // all-ones exponent: infinity (m = 0) or NaN; subnormals
  finite_nan,  // OCP "FN": only S.1..1.1..1 is NaN, no infinity; subnormals
  dl16,        // all-ones code is NaN-or-infinity; code 0 is zero; no subnormals
};

template <int E, int M, int Bias, Special S>
struct Mini {
  static constexpr int exp_bits = E, man_bits = M, bias = Bias;
  static constexpr Special special = S;
  static constexpr uint32_t sign_bit = 1u << (E + M);
  static constexpr uint32_t exp_max = (1u << E) - 1;
  static constexpr uint32_t man_mask = (1u << M) - 1;
  static constexpr uint32_t max_code =
      S == Special::ieee ? ((exp_max - 1) << M) | man_mask : (exp_max << M) | (man_mask - 1);
  static constexpr uint32_t nan_code =
      S == Special::ieee ? (exp_max << M) | (1u << (M - 1)) : (exp_max << M) | man_mask;
  static constexpr uint32_t inf_code = S == Special::ieee ? exp_max << M : nan_code;
  static constexpr uint32_t overflow_code = S == Special::ieee ? inf_code : nan_code;
  static constexpr bool subnormals = S != Special::dl16;
  // Unbiased exponent of the lowest binade that holds normal numbers.
  static constexpr int min_exp = subnormals ? 1 - Bias : -Bias;
};

using Dl16 = Mini<6, 9, 31, Special::dl16>;
using Fp16 = Mini<5, 10, 15, Special::ieee>;
using Bf16 = Mini<8, 7, 127, Special::ieee>;
using E4m3 = Mini<4, 3, 7, Special::finite_nan>;
using E5m2 = Mini<5, 2, 15, Special::ieee>;
using Fp9 = Mini<5, 3, 15, Special::ieee>;

static_assert(E4m3::max_code == 0x7E && E4m3::nan_code == 0x7F);
static_assert(E5m2::max_code == 0x7B && E5m2::inf_code == 0x7C);
static_assert(Fp16::max_code == 0x7BFF && Bf16::max_code == 0x7F7F);
static_assert(Dl16::max_code == 0x7FFE && Dl16::nan_code == 0x7FFF);

// Single rounding from the exact value of x (float or double) to format F. Written as selects
// over values computed unconditionally (unsigned wrap-around is harmless) so that the bulk loops
// vectorise.
template <class F, class T>
inline uint32_t encode(T x, bool saturate, bool ties_away) {
  using FB = FloatBits<T>;
  using U = typename FB::U;
  constexpr U sign_mask = U(1) << (FB::total - 1);
  constexpr int shift = FB::man - F::man_bits;
  constexpr U half = U(1) << (shift - 1);
  constexpr U min_norm = U(F::min_exp + FB::bias) << FB::man;
  const U u = std::bit_cast<U>(x);
  const uint32_t sign = (u & sign_mask) ? F::sign_bit : 0u;
  const U a = u & ~sign_mask;

  // Normal range: rebias the exponent in place, then round the fraction by adding just under
  // half an output ulp (plus the kept lsb for ties-to-even); a carry bumps the exponent.
  U r = a - (U(FB::bias - F::bias) << FB::man);
  r += ties_away ? half : U(half - 1 + ((r >> shift) & 1));
  const U c = r >> shift;
  const uint32_t over = saturate ? F::max_code : F::overflow_code;
  uint32_t code = c > U(F::max_code) ? over : uint32_t(c);

  if constexpr (F::subnormals) {
    // Scale so one subnormal ulp is 1.0 (exact: powers of two), then let the FPU round to an
    // integer (default mode: nearest even) by pushing it into the range where ulp == 1.
    constexpr T scale_a = pow2<T>(F::bias - 1), scale_b = pow2<T>(F::man_bits);
    constexpr T magic = pow2<T>(FB::man);
    const T q = std::bit_cast<T>(a) * scale_a * scale_b;
    const uint32_t sub = uint32_t(std::bit_cast<U>(T(q + magic)) - std::bit_cast<U>(magic));
    code = a < min_norm ? sub : code;
  } else {
    // DL16: below 2^-31 nothing is representable (code 0 is zero, not 2^-31).
    code = a < min_norm ? 0u : code;
  }
  uint32_t special = F::inf_code;  // infinity keeps its meaning where the format has one
  if constexpr (F::special == Special::finite_nan) special = saturate ? F::max_code : F::nan_code;
  special = a > FB::inf_bits ? F::nan_code : special;
  code = a >= FB::inf_bits ? special : code;
  // A NaN's sign means nothing, and the host's differs (x86's default NaN is negative, aarch64's
  // positive): every NaN gets the positive code, so that where the format merges NaN with
  // infinity (DL16) a computed NaN reads back as the same infinity on every machine.
  return (a > FB::inf_bits ? 0u : sign) | code;
}

template <class F, class T>
inline T decode(uint32_t c, bool ninf_to_nan) {
  using FB = FloatBits<T>;
  using U = typename FB::U;
  const bool neg = (c & F::sign_bit) != 0;
  const uint32_t mag = c & (F::sign_bit - 1);
  const uint32_t e = mag >> F::man_bits, m = mag & F::man_mask;
  T v;
  if (F::special == Special::ieee && e == F::exp_max) {
    v = m ? std::numeric_limits<T>::quiet_NaN() : std::numeric_limits<T>::infinity();
  } else if (F::special != Special::ieee && mag == F::nan_code) {
    v = (F::special == Special::dl16 && !ninf_to_nan) ? std::numeric_limits<T>::infinity()
                                                       : std::numeric_limits<T>::quiet_NaN();
  } else if (mag == 0) {
    v = 0;
  } else if (F::subnormals && e == 0) {
    v = T(m) * pow2<T>(1 - F::bias - F::man_bits);
  } else {
    v = std::bit_cast<T>(U(U(int(e) - F::bias + FB::bias) << FB::man) |
                         (U(m) << (FB::man - F::man_bits)));
  }
  return neg ? -v : v;
}

// DL16 decode without branches, for the bulk loops.
template <bool NinfNan>
inline float dl16_decode_fast(uint16_t c) {
  const uint32_t s = uint32_t(c & 0x8000u) << 16;
  const uint32_t em = c & 0x7FFFu;
  uint32_t bits = (em << 14) + (uint32_t(127 - 31) << 23);
  bits = em == 0 ? 0u : bits;
  bits = em == 0x7FFFu ? (NinfNan ? 0x7FC00000u : 0x7F800000u) : bits;
  return std::bit_cast<float>(bits | s);
}

// IEEE fp16 decode without branches: normals by rebiasing, subnormals by an exact int->float
// multiply (avoids denormal float operands), inf/NaN keep their payload.
inline float fp16_decode_fast(uint16_t h) {
  const uint32_t s = uint32_t(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7FFFu;
  const uint32_t normal = (em << 13) + (uint32_t(127 - 15) << 23);
  const uint32_t sub = std::bit_cast<uint32_t>(float(int32_t(em)) * pow2<float>(-24));
  uint32_t bits = em < 0x400u ? sub : normal;
  bits = em >= 0x7C00u ? ((em << 13) | 0x7F800000u) : bits;
  return std::bit_cast<float>(bits | s);
}

template <class F>
struct Table {
  std::array<float, size_t(1) << (F::exp_bits + F::man_bits + 1)> v;
  Table() {
    for (size_t i = 0; i < v.size(); ++i) v[i] = decode<F, float>(uint32_t(i), true);
  }
};
template <class F>
const Table<F>& table() {
  static const Table<F> t;
  return t;
}

// Round to nearest even in T (magnitudes >= 2^man are already integers).
template <class T>
inline T rne(T x) {
  constexpr T magic = pow2<T>(FloatBits<T>::man);
  const T ax = std::fabs(x);
  const T r = ax < magic ? T((ax + magic) - magic) : ax;
  return std::copysign(r, x);
}

struct IntRange {
  int64_t lo, hi;
};
constexpr IntRange int_range(DataFormat f) {
  switch (f) {
    case DataFormat::SENINT2: return {-2, 1};
    case DataFormat::SENINT4: return {-8, 7};
    case DataFormat::SENINT8: return {-128, 127};
    case DataFormat::SENINT16: return {-32768, 32767};
    case DataFormat::SENINT24: return {-(int64_t(1) << 23), (int64_t(1) << 23) - 1};
    case DataFormat::IEEE_INT32: return {INT32_MIN, INT32_MAX};
    case DataFormat::IEEE_INT64: return {INT64_MIN, INT64_MAX};
    case DataFormat::SENUINT32: return {0, UINT32_MAX};
    case DataFormat::SENUINT2: return {0, 3};
    case DataFormat::BOOL: return {0, 1};
    default: return {0, 0};
  }
}

template <class T>
inline int64_t to_int(T x, int64_t lo, int64_t hi) {
  if (x != x) return 0;
  const T r = rne(x);
  // T(hi) may round up to a power of two (2^31 in float, 2^63 in double): comparing with >=
  // saturates everything that would not fit, before the cast could overflow.
  if (r >= T(hi)) return hi;
  if (r <= T(lo)) return lo;
  return int64_t(r);
}


// Formats whose every value is exactly a float; the others go through double.
bool exact_in_float(DataFormat f) {
  return f != DataFormat::IEEE_INT32 && f != DataFormat::IEEE_INT64 &&
         f != DataFormat::SENUINT32;
}

[[noreturn]] void bad_format(DataFormat f, const char* what) {
  throw std::invalid_argument(std::string("vspyre::fmt: ") + what + ": format " +
                              std::string(name(f)) + " is not convertible");
}

void require_convertible(DataFormat f) {
  if (!is_convertible(f)) bad_format(f, "convert");
}

// ---------------------------------------------------------------------------------------------
// Bulk decode/encode of one contiguous run into/from T (float or double). One switch per run.
// ---------------------------------------------------------------------------------------------

template <class S, class T>
void widen(const void* src, T* out, size_t n) {
  const S* s = static_cast<const S*>(src);
  for (size_t i = 0; i < n; ++i) out[i] = T(s[i]);
}

template <class F, class T>
void decode_table_run(const void* src, T* out, size_t n) {
  const auto& t = table<F>().v;
  if constexpr (F::exp_bits + F::man_bits + 1 <= 8) {
    const uint8_t* s = static_cast<const uint8_t*>(src);
    for (size_t i = 0; i < n; ++i) out[i] = T(t[s[i]]);
  } else {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    for (size_t i = 0; i < n; ++i) out[i] = T(t[s[i] & (t.size() - 1)]);
  }
}

template <class T>
void decode_run(DataFormat f, const void* src, T* out, size_t n, const ConvertRules& r) {
  switch (f) {
    case DataFormat::SEN169_FP16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      if (r.dl16.ninf_decodes_to_nan)
        for (size_t i = 0; i < n; ++i) out[i] = T(dl16_decode_fast<true>(s[i]));
      else
        for (size_t i = 0; i < n; ++i) out[i] = T(dl16_decode_fast<false>(s[i]));
      return;
    }
    case DataFormat::IEEE_FP32: return widen<float>(src, out, n);
    case DataFormat::IEEE_FP16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) out[i] = T(fp16_decode_fast(s[i]));
      return;
    }
    case DataFormat::BFLOAT16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) out[i] = T(std::bit_cast<float>(uint32_t(s[i]) << 16));
      return;
    }
    case DataFormat::SEN143_FP8: return decode_table_run<E4m3>(src, out, n);
    case DataFormat::SEN152_FP8: return decode_table_run<E5m2>(src, out, n);
    case DataFormat::SEN153_FP9: return decode_table_run<Fp9>(src, out, n);
    case DataFormat::SENINT8: return widen<int8_t>(src, out, n);
    case DataFormat::SENINT16: return widen<int16_t>(src, out, n);
    case DataFormat::SENINT24: {
      const uint32_t* s = static_cast<const uint32_t*>(src);
      for (size_t i = 0; i < n; ++i) out[i] = T(int32_t(s[i] << 8) >> 8);
      return;
    }
    case DataFormat::IEEE_INT32: return widen<int32_t>(src, out, n);
    case DataFormat::IEEE_INT64: return widen<int64_t>(src, out, n);
    case DataFormat::SENUINT32: return widen<uint32_t>(src, out, n);
    case DataFormat::BOOL: {
      const uint8_t* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) out[i] = s[i] ? T(1) : T(0);
      return;
    }
    case DataFormat::SENINT4: {
      const uint8_t* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) {
        const unsigned nib = (s[i >> 1] >> ((i & 1) * 4)) & 0xF;
        out[i] = T(int(nib ^ 8u) - 8);
      }
      return;
    }
    case DataFormat::SENINT2:
    case DataFormat::SENUINT2: {
      const uint8_t* s = static_cast<const uint8_t*>(src);
      const bool is_signed = f == DataFormat::SENINT2;
      for (size_t i = 0; i < n; ++i) {
        const unsigned v = (s[i >> 2] >> ((i & 3) * 2)) & 3u;
        out[i] = is_signed ? T(int(v ^ 2u) - 2) : T(v);
      }
      return;
    }
    default: bad_format(f, "decode");
  }
}

template <class S, class T>
void narrow_int(const T* in, void* dst, size_t n, DataFormat f) {
  const IntRange rg = int_range(f);
  S* d = static_cast<S*>(dst);
  for (size_t i = 0; i < n; ++i) d[i] = S(to_int(in[i], rg.lo, rg.hi));
}

template <class F, class S, class T>
void encode_float_run(const T* in, void* dst, size_t n, bool saturate, bool ties_away) {
  S* d = static_cast<S*>(dst);
  for (size_t i = 0; i < n; ++i) d[i] = S(encode<F>(in[i], saturate, ties_away));
}

// Writes n packed elements of `bits` bits; a trailing partial byte keeps its other elements.
template <class T>
void encode_packed(const T* in, void* dst, size_t n, DataFormat f) {
  const int bits = bits_per_element(f);
  const int per_byte = 8 / bits;
  const IntRange rg = int_range(f);
  const unsigned mask = (1u << bits) - 1;
  uint8_t* d = static_cast<uint8_t*>(dst);
  const size_t full = n / per_byte;
  for (size_t b = 0; b < full; ++b) {
    unsigned byte = 0;
    for (int k = 0; k < per_byte; ++k)
      byte |= (unsigned(to_int(in[b * per_byte + k], rg.lo, rg.hi)) & mask) << (k * bits);
    d[b] = uint8_t(byte);
  }
  for (size_t i = full * per_byte; i < n; ++i)
    write_code(f, dst, i, uint64_t(to_int(in[i], rg.lo, rg.hi)) & mask);
}

template <class T>
void encode_run(DataFormat f, const T* in, void* dst, size_t n, const ConvertRules& r) {
  const bool sat8 = r.fp8_saturate;
  switch (f) {
    case DataFormat::SEN169_FP16: {
      const bool away = r.dl16.rounding == Rounding::nearest_ties_away;
      encode_float_run<Dl16, uint16_t>(in, dst, n, r.dl16.saturate, away);
      if (!r.dl16.keep_zero_sign) {
        uint16_t* d = static_cast<uint16_t*>(dst);
        for (size_t i = 0; i < n; ++i) d[i] = d[i] == 0x8000 ? 0 : d[i];
      }
      return;
    }
    case DataFormat::IEEE_FP32: {
      float* d = static_cast<float*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = float(in[i]);
      return;
    }
    case DataFormat::IEEE_FP16: return encode_float_run<Fp16, uint16_t>(in, dst, n, false, false);
    case DataFormat::BFLOAT16: return encode_float_run<Bf16, uint16_t>(in, dst, n, false, false);
    case DataFormat::SEN143_FP8: return encode_float_run<E4m3, uint8_t>(in, dst, n, sat8, false);
    case DataFormat::SEN152_FP8: return encode_float_run<E5m2, uint8_t>(in, dst, n, sat8, false);
    case DataFormat::SEN153_FP9: return encode_float_run<Fp9, uint16_t>(in, dst, n, sat8, false);
    case DataFormat::SENINT8: return narrow_int<int8_t>(in, dst, n, f);
    case DataFormat::SENINT16: return narrow_int<int16_t>(in, dst, n, f);
    case DataFormat::SENINT24: return narrow_int<int32_t>(in, dst, n, f);
    case DataFormat::IEEE_INT32: return narrow_int<int32_t>(in, dst, n, f);
    case DataFormat::IEEE_INT64: return narrow_int<int64_t>(in, dst, n, f);
    case DataFormat::SENUINT32: return narrow_int<uint32_t>(in, dst, n, f);
    case DataFormat::BOOL: {
      uint8_t* d = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = in[i] != T(0) ? 1 : 0;
      return;
    }
    case DataFormat::SENINT4:
    case DataFormat::SENINT2:
    case DataFormat::SENUINT2:
      return encode_packed(in, dst, n, f);
    default: bad_format(f, "encode");
  }
}

// Fused single-pass loops for the host<->DL16 pairs every tensor copy uses. The rule flags are
// template parameters so that each loop body is branch-free and vectorises.
template <bool Away, bool Sat, bool KeepZeroSign, class Dec, class S>
void to_dl16(const S* s, uint16_t* d, size_t n, Dec dec) {
  for (size_t i = 0; i < n; ++i) {
    const uint16_t c = uint16_t(encode<Dl16>(dec(s[i]), Sat, Away));
    d[i] = (!KeepZeroSign && c == 0x8000) ? uint16_t(0) : c;
  }
}

template <class Dec, class S>
bool to_dl16_dispatch(const S* s, uint16_t* d, size_t n, Dec dec, const Dl16Rules& r) {
  const bool away = r.rounding == Rounding::nearest_ties_away;
  if (!r.keep_zero_sign) return false;  // rare: leave it to the generic path
  if (away && r.saturate) to_dl16<true, true, true>(s, d, n, dec);
  else if (away) to_dl16<true, false, true>(s, d, n, dec);
  else if (r.saturate) to_dl16<false, true, true>(s, d, n, dec);
  else to_dl16<false, false, true>(s, d, n, dec);
  return true;
}

template <bool NinfNan, class Enc, class S>
void from_dl16(const uint16_t* s, S* d, size_t n, Enc enc) {
  for (size_t i = 0; i < n; ++i) d[i] = enc(dl16_decode_fast<NinfNan>(s[i]));
}

const uint8_t* byte_at(const void* p, size_t bytes) { return static_cast<const uint8_t*>(p) + bytes; }
uint8_t* byte_at(void* p, size_t bytes) { return static_cast<uint8_t*>(p) + bytes; }

// The generic two-pass path (decode each chunk to float/double, encode it): the reference every
// fast path must match bit for bit.
void convert_generic_run(DataFormat from, const void* src, DataFormat to, void* dst, size_t n,
                         const ConvertRules& r) {
  // Chunks of 1024 keep the intermediate in L1 and byte-aligned for every packed format.
  constexpr size_t chunk = 1024;
  auto run = [&](auto* tmp) {
    using T = std::remove_pointer_t<decltype(tmp)>;
    for (size_t i = 0; i < n; i += chunk) {
      const size_t k = std::min(chunk, n - i);
      decode_run<T>(from, byte_at(src, bytes_for(from, i)), tmp, k, r);
      encode_run<T>(to, tmp, byte_at(dst, bytes_for(to, i)), k, r);
    }
  };
  if (exact_in_float(from)) {
    alignas(64) float tmp[chunk];
    run(tmp);
  } else {
    alignas(64) double tmp[chunk];
    run(tmp);
  }
}

// 16-bit <-> 16-bit pairs (host fp16/bf16 <-> DL16): a 64 Ki-entry table per rule combination,
// filled by the generic path itself, so a lookup is bit-identical to it by construction.
struct Table16 {
  std::once_flag once;
  std::unique_ptr<uint16_t[]> v;
};
// Index of the table for a pair and rules; -1 when the pair has none.
int table16_index(DataFormat from, DataFormat to, const ConvertRules& r) {
  using D = DataFormat;
  const auto host16 = [](D f) { return f == D::IEEE_FP16 ? 0 : f == D::BFLOAT16 ? 1 : -1; };
  if (to == D::SEN169_FP16 && host16(from) >= 0) {
    // Every rule that the encoder reads (saturation cannot trigger from fp16, but is keyed anyway).
    const int rules = (r.dl16.rounding == Rounding::nearest_ties_away ? 1 : 0) |
                      (r.dl16.saturate ? 2 : 0) | (r.dl16.keep_zero_sign ? 4 : 0);
    return host16(from) * 8 + rules;  // 0..15
  }
  if (from == D::SEN169_FP16 && host16(to) >= 0)
    return 16 + host16(to) * 2 + (r.dl16.ninf_decodes_to_nan ? 1 : 0);  // 16..19
  return -1;
}
const uint16_t* table16(DataFormat from, DataFormat to, const ConvertRules& r) {
  const int k = table16_index(from, to, r);
  if (k < 0) return nullptr;
  static Table16 tables[20];
  Table16& t = tables[k];
  std::call_once(t.once, [&] {
    auto codes = std::make_unique<uint16_t[]>(size_t(1) << 16);
    for (uint32_t c = 0; c < (1u << 16); ++c) codes[c] = uint16_t(c);
    t.v = std::make_unique<uint16_t[]>(size_t(1) << 16);
    convert_generic_run(from, codes.get(), to, t.v.get(), size_t(1) << 16, r);
  });
  return t.v.get();
}
void lookup16(const uint16_t* table, const uint16_t* s, uint16_t* d, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = table[s[i]];
}

// Returns false when the pair has no fused loop.
bool convert_fused(DataFormat from, const void* src, DataFormat to, void* dst, size_t n,
                   const ConvertRules& r) {
  using D = DataFormat;
  // Short runs (single elements from store_element, tiny tensors) skip the table so that a
  // process that never converts in bulk never builds one (65536 generic conversions, once).
  if (n >= 1024) {
    if (const uint16_t* t = table16(from, to, r)) {
      lookup16(t, static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), n);
      return true;
    }
  }
  if (to == D::SEN169_FP16) {
    uint16_t* d = static_cast<uint16_t*>(dst);
    switch (from) {
      case D::IEEE_FP32:
        return to_dl16_dispatch(static_cast<const float*>(src), d, n, [](float x) { return x; }, r.dl16);
      case D::IEEE_FP16:
        return to_dl16_dispatch(static_cast<const uint16_t*>(src), d, n,
                                [](uint16_t c) { return fp16_decode_fast(c); }, r.dl16);
      case D::BFLOAT16:
        return to_dl16_dispatch(static_cast<const uint16_t*>(src), d, n,
                                [](uint16_t c) { return std::bit_cast<float>(uint32_t(c) << 16); },
                                r.dl16);
      default: return false;
    }
  }
  if (from == D::SEN169_FP16) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    auto go = [&](auto* d, auto enc) {
      if (r.dl16.ninf_decodes_to_nan) from_dl16<true>(s, d, n, enc);
      else from_dl16<false>(s, d, n, enc);
      return true;
    };
    switch (to) {
      case D::IEEE_FP32: return go(static_cast<float*>(dst), [](float x) { return x; });
      case D::IEEE_FP16:
        return go(static_cast<uint16_t*>(dst),
                  [](float x) { return uint16_t(encode<Fp16>(x, false, false)); });
      case D::BFLOAT16:
        return go(static_cast<uint16_t*>(dst),
                  [](float x) { return uint16_t(encode<Bf16>(x, false, false)); });
      default: return false;
    }
  }
  return false;
}

void copy_same(DataFormat f, const void* src, void* dst, size_t n) {
  const int bits = bits_per_element(f);
  const size_t whole = n * size_t(bits) / 8;
  std::memcpy(dst, src, whole);
  if (bits < 8)
    for (size_t i = whole * 8 / size_t(bits); i < n; ++i) write_code(f, dst, i, read_code(f, src, i));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Names and geometry
// ---------------------------------------------------------------------------------------------

std::string_view name(DataFormat f) {
  switch (f) {
    case DataFormat::SEN169_FP16: return "SEN169_FP16";
    case DataFormat::IEEE_FP32: return "IEEE_FP32";
    case DataFormat::INVALID: return "INVALID";
    case DataFormat::SEN143_FP8: return "SEN143_FP8";
    case DataFormat::SEN152_FP8: return "SEN152_FP8";
    case DataFormat::SEN153_FP9: return "SEN153_FP9";
    case DataFormat::SENINT2: return "SENINT2";
    case DataFormat::SENINT4: return "SENINT4";
    case DataFormat::SENINT8: return "SENINT8";
    case DataFormat::SENINT16: return "SENINT16";
    case DataFormat::SENINT24: return "SENINT24";
    case DataFormat::IEEE_INT64: return "IEEE_INT64";
    case DataFormat::IEEE_INT32: return "IEEE_INT32";
    case DataFormat::SENUINT32: return "SENUINT32";
    case DataFormat::SENUINT2: return "SENUINT2";
    case DataFormat::IEEE_FP16: return "IEEE_FP16";
    case DataFormat::BOOL: return "BOOL";
    case DataFormat::BFLOAT16: return "BFLOAT16";
    case DataFormat::SEN18F_FP24: return "SEN18F_FP24";
    case DataFormat::SEN080_FP8: return "SEN080_FP8";
    case DataFormat::SEN053_FP8: return "SEN053_FP8";
    case DataFormat::SEN121_FP4: return "SEN121_FP4";
  }
  return "INVALID";
}

std::optional<DataFormat> data_format_from_name(std::string_view n) {
  if (n == "DL16") return DataFormat::SEN169_FP16;
  for (DataFormat f : k_all_formats)
    if (name(f) == n) return f;
  return std::nullopt;
}

int bits_per_element(DataFormat f) {
  switch (f) {
    case DataFormat::INVALID: return 0;
    case DataFormat::SENINT2: case DataFormat::SENUINT2: return 2;
    case DataFormat::SENINT4: case DataFormat::SEN121_FP4: return 4;
    case DataFormat::SEN143_FP8: case DataFormat::SEN152_FP8: case DataFormat::SENINT8:
    case DataFormat::BOOL: case DataFormat::SEN080_FP8: case DataFormat::SEN053_FP8:
      return 8;
    case DataFormat::SEN169_FP16: case DataFormat::IEEE_FP16: case DataFormat::BFLOAT16:
    case DataFormat::SENINT16: case DataFormat::SEN153_FP9:
      return 16;
    case DataFormat::SEN18F_FP24: return 24;
    case DataFormat::IEEE_FP32: case DataFormat::IEEE_INT32: case DataFormat::SENUINT32:
    case DataFormat::SENINT24:
      return 32;
    case DataFormat::IEEE_INT64: return 64;
  }
  return 0;
}

int64_t elements_per_stick(DataFormat f) {
  const int bits = bits_per_element(f);
  if (bits == 0 || (k_stick_bytes * 8) % bits != 0) return 0;  // FP24 does not tile a stick
  return k_stick_bytes * 8 / bits;
}

bool is_convertible(DataFormat f) {
  switch (f) {
    case DataFormat::INVALID: case DataFormat::SEN18F_FP24: case DataFormat::SEN080_FP8:
    case DataFormat::SEN053_FP8: case DataFormat::SEN121_FP4:
      return false;
    default:
      return true;
  }
}

size_t bytes_for(DataFormat f, size_t n) { return (n * size_t(bits_per_element(f)) + 7) / 8; }

// ---------------------------------------------------------------------------------------------
// Scalar codecs
// ---------------------------------------------------------------------------------------------

uint16_t dl16_from_float(float x, const Dl16Rules& r) {
  uint16_t c = uint16_t(encode<Dl16>(x, r.saturate, r.rounding == Rounding::nearest_ties_away));
  return (!r.keep_zero_sign && c == 0x8000) ? uint16_t(0) : c;
}
uint16_t dl16_from_double(double x, const Dl16Rules& r) {
  uint16_t c = uint16_t(encode<Dl16>(x, r.saturate, r.rounding == Rounding::nearest_ties_away));
  return (!r.keep_zero_sign && c == 0x8000) ? uint16_t(0) : c;
}
float dl16_to_float(uint16_t c, const Dl16Rules& r) {
  return decode<Dl16, float>(c, r.ninf_decodes_to_nan);
}
double dl16_to_double(uint16_t c, const Dl16Rules& r) {
  return decode<Dl16, double>(c, r.ninf_decodes_to_nan);
}

uint8_t e4m3_from_float(float x, bool sat) { return uint8_t(encode<E4m3>(x, sat, false)); }
uint8_t e4m3_from_double(double x, bool sat) { return uint8_t(encode<E4m3>(x, sat, false)); }
float e4m3_to_float(uint8_t c) { return table<E4m3>().v[c]; }
uint8_t e5m2_from_float(float x, bool sat) { return uint8_t(encode<E5m2>(x, sat, false)); }
uint8_t e5m2_from_double(double x, bool sat) { return uint8_t(encode<E5m2>(x, sat, false)); }
float e5m2_to_float(uint8_t c) { return table<E5m2>().v[c]; }
uint16_t fp9_from_float(float x, bool sat) { return uint16_t(encode<Fp9>(x, sat, false)); }
float fp9_to_float(uint16_t c) { return table<Fp9>().v[c & 0x1FF]; }
uint16_t fp16_from_float(float x) { return uint16_t(encode<Fp16>(x, false, false)); }
uint16_t fp16_from_double(double x) { return uint16_t(encode<Fp16>(x, false, false)); }
float fp16_to_float(uint16_t c) { return decode<Fp16, float>(c, true); }
uint16_t bf16_from_float(float x) { return uint16_t(encode<Bf16>(x, false, false)); }
uint16_t bf16_from_double(double x) { return uint16_t(encode<Bf16>(x, false, false)); }
float bf16_to_float(uint16_t c) { return std::bit_cast<float>(uint32_t(c) << 16); }

int64_t int_min(DataFormat f) {
  if (!is_integer(f)) bad_format(f, "int_min");
  return int_range(f).lo;
}
int64_t int_max(DataFormat f) {
  if (!is_integer(f)) bad_format(f, "int_max");
  return int_range(f).hi;
}
int64_t int_from_double(double x, DataFormat f) {
  if (!is_integer(f)) bad_format(f, "int_from_double");
  if (f == DataFormat::BOOL) return x != 0.0 ? 1 : 0;
  const IntRange rg = int_range(f);
  return to_int(x, rg.lo, rg.hi);
}

int int4_get(const void* base, size_t i) {
  const unsigned nib = (static_cast<const uint8_t*>(base)[i >> 1] >> ((i & 1) * 4)) & 0xF;
  return int(nib ^ 8u) - 8;
}
void int4_set(void* base, size_t i, int v) { write_code(DataFormat::SENINT4, base, i, unsigned(v) & 0xF); }
int int2_get(const void* base, size_t i) {
  return int(read_code(DataFormat::SENINT2, base, i) ^ 2u) - 2;
}
unsigned uint2_get(const void* base, size_t i) {
  return unsigned(read_code(DataFormat::SENUINT2, base, i));
}

uint64_t read_code(DataFormat f, const void* base, size_t i) {
  const uint8_t* p = static_cast<const uint8_t*>(base);
  switch (bits_per_element(f)) {
    case 2: return (p[i >> 2] >> ((i & 3) * 2)) & 3u;
    case 4: return (p[i >> 1] >> ((i & 1) * 4)) & 0xFu;
    case 8: return p[i];
    case 16: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); return v; }
    case 32: { uint32_t v; std::memcpy(&v, p + 4 * i, 4); return v; }
    case 64: { uint64_t v; std::memcpy(&v, p + 8 * i, 8); return v; }
    default: bad_format(f, "read_code");
  }
}

void write_code(DataFormat f, void* base, size_t i, uint64_t code) {
  uint8_t* p = static_cast<uint8_t*>(base);
  switch (bits_per_element(f)) {
    case 2: {
      const unsigned sh = (i & 3) * 2;
      p[i >> 2] = uint8_t((p[i >> 2] & ~(3u << sh)) | ((code & 3u) << sh));
      return;
    }
    case 4: {
      const unsigned sh = (i & 1) * 4;
      p[i >> 1] = uint8_t((p[i >> 1] & ~(0xFu << sh)) | ((code & 0xFu) << sh));
      return;
    }
    case 8: p[i] = uint8_t(code); return;
    case 16: { uint16_t v = uint16_t(code); std::memcpy(p + 2 * i, &v, 2); return; }
    case 32: { uint32_t v = uint32_t(code); std::memcpy(p + 4 * i, &v, 4); return; }
    case 64: std::memcpy(p + 8 * i, &code, 8); return;
    default: bad_format(f, "write_code");
  }
}

double load_element(DataFormat f, const void* base, size_t i, const ConvertRules& r) {
  require_convertible(f);
  uint64_t code = read_code(f, base, i);
  double v;
  decode_run<double>(f, &code, &v, 1, r);  // little-endian: the code sits at element 0
  return v;
}

void store_element(DataFormat f, void* base, size_t i, double v, const ConvertRules& r) {
  require_convertible(f);
  uint64_t code = 0;
  encode_run<double>(f, &v, &code, 1, r);
  write_code(f, base, i, code);
}

// ---------------------------------------------------------------------------------------------
// Bulk
// ---------------------------------------------------------------------------------------------

namespace {
// convert() and convert_generic(): the same checks and shortcuts; only `fast` tries the fused
// and table-driven paths first.
void convert_checked(DataFormat from, const void* src, DataFormat to, void* dst, size_t n,
                     const ConvertRules& r, bool fast) {
  require_convertible(from);
  require_convertible(to);
  if (n == 0) return;
  if (from == to) return copy_same(from, src, dst, n);
  if (fast && convert_fused(from, src, to, dst, n, r)) return;
  convert_generic_run(from, src, to, dst, n, r);
}
}  // namespace

void convert(DataFormat from, const void* src, DataFormat to, void* dst, size_t n,
             const ConvertRules& r) {
  convert_checked(from, src, to, dst, n, r, true);
}

void convert_generic(DataFormat from, const void* src, DataFormat to, void* dst, size_t n,
                     const ConvertRules& r) {
  convert_checked(from, src, to, dst, n, r, false);
}

namespace {

// Strided gather/scatter of whole-byte elements (8, 16, 32 or 64 bits): one switch per run, a
// typed loop per element.
template <class U>
void gather_t(const void* base, int64_t off, int64_t stride, void* out, size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(base);
  U* o = static_cast<U*>(out);
  for (size_t i = 0; i < n; ++i)
    std::memcpy(o + i, b + (off + int64_t(i) * stride) * int64_t(sizeof(U)), sizeof(U));
}
template <class U>
void scatter_t(const void* in, void* base, int64_t off, int64_t stride, size_t n) {
  uint8_t* b = static_cast<uint8_t*>(base);
  const U* s = static_cast<const U*>(in);
  for (size_t i = 0; i < n; ++i)
    std::memcpy(b + (off + int64_t(i) * stride) * int64_t(sizeof(U)), s + i, sizeof(U));
}
template <class Fn>
void by_size(int bytes, Fn&& fn) {
  switch (bytes) {
    case 1: return fn(uint8_t{});
    case 2: return fn(uint16_t{});
    case 4: return fn(uint32_t{});
    default: return fn(uint64_t{});
  }
}
void gather(int bytes, const void* base, int64_t off, int64_t stride, void* out, size_t n) {
  by_size(bytes, [&](auto u) { gather_t<decltype(u)>(base, off, stride, out, n); });
}
void scatter(int bytes, const void* in, void* base, int64_t off, int64_t stride, size_t n) {
  by_size(bytes, [&](auto u) { scatter_t<decltype(u)>(in, base, off, stride, n); });
}

// A 2-D tile of n0 x n1 elements (loop 0 index i, loop 1 index j) held in a buffer as
// buf[i * n1 + j] (i_major) or buf[j * n0 + i]. Each side's memory is walked with the finer of
// its two strides innermost; the buffer is small enough for L1 either way.
inline int64_t iabs(int64_t v) { return v < 0 ? -v : v; }
template <class U, bool Gather>
void tile_move(U* buf, bool i_major, void* mem, int64_t off, int64_t s0, int64_t s1, size_t n0,
               size_t n1) {
  uint8_t* b = static_cast<uint8_t*>(mem);
  const int64_t sz = int64_t(sizeof(U));
  const size_t bi = i_major ? n1 : 1, bj = i_major ? 1 : n0;  // buffer strides of i and j
  auto move = [&](U* e, uint8_t* m) {
    if constexpr (Gather) std::memcpy(e, m, sizeof(U));
    else std::memcpy(m, e, sizeof(U));
  };
  if (iabs(s1) < iabs(s0)) {
    for (size_t i = 0; i < n0; ++i) {
      uint8_t* row = b + (off + int64_t(i) * s0) * sz;
      U* e = buf + i * bi;
      for (size_t j = 0; j < n1; ++j) move(e + j * bj, row + int64_t(j) * s1 * sz);
    }
  } else {
    for (size_t j = 0; j < n1; ++j) {
      uint8_t* col = b + (off + int64_t(j) * s1) * sz;
      U* e = buf + j * bj;
      for (size_t i = 0; i < n0; ++i) move(e + i * bi, col + int64_t(i) * s0 * sz);
    }
  }
}

}  // namespace

// True when distinct index tuples of the loops (sizes, strides) reach distinct elements: sorted
// by |stride|, each stride must exceed the span of all the finer dimensions. Conservative.
bool loops_injective(const std::vector<int64_t>& size, const std::vector<int64_t>& stride) {
  std::vector<std::pair<int64_t, int64_t>> d;  // |stride|, size
  for (size_t k = 0; k < size.size(); ++k)
    if (size[k] > 1) d.emplace_back(iabs(stride[k]), size[k]);
  std::sort(d.begin(), d.end());
  int64_t span = 0;
  for (const auto& [st, sz] : d) {
    if (st <= span) return false;
    span += (sz - 1) * st;
  }
  return true;
}


void convert_strided(DataFormat from, const void* src, int64_t src_offset, int64_t src_stride,
                     DataFormat to, void* dst, int64_t dst_offset, int64_t dst_stride, size_t n,
                     const ConvertRules& r) {
  require_convertible(from);
  require_convertible(to);
  if (n == 0) return;
  const int fb = bits_per_element(from), tb = bits_per_element(to);
  if (src_stride == 1 && dst_stride == 1 && (src_offset * fb) % 8 == 0 &&
      (dst_offset * tb) % 8 == 0) {
    return convert(from, byte_at(src, size_t(src_offset * fb / 8)), to,
                   byte_at(dst, size_t(dst_offset * tb / 8)), n, r);
  }
  if (fb >= 8 && tb >= 8) {
    // Whole-byte elements: typed gather (skipped when the source is unit-stride), one bulk
    // conversion per chunk, typed scatter (skipped when the destination is unit-stride).
    const int fs = fb / 8, ts = tb / 8;
    constexpr size_t chunk = 1024;
    alignas(64) uint64_t in[chunk], out[chunk];
    for (size_t i = 0; i < n; i += chunk) {
      const size_t k = std::min(chunk, n - i);
      const int64_t so = src_offset + int64_t(i) * src_stride;
      const int64_t d_o = dst_offset + int64_t(i) * dst_stride;
      const void* run_src = in;
      if (src_stride == 1) run_src = byte_at(src, size_t(so * fs));
      else gather(fs, src, so, src_stride, in, k);
      void* run_dst = dst_stride == 1 ? byte_at(dst, size_t(d_o * ts)) : static_cast<void*>(out);
      convert(from, run_src, to, run_dst, k, r);
      if (dst_stride != 1) scatter(ts, out, dst, d_o, dst_stride, k);
    }
    return;
  }
  // Sub-byte elements: gather codes into a dense run, convert it, scatter. 64 bits per slot
  // covers every format.
  constexpr size_t chunk = 256;
  uint64_t in[chunk], out[chunk];
  for (size_t i = 0; i < n; i += chunk) {
    const size_t k = std::min(chunk, n - i);
    for (size_t j = 0; j < k; ++j)
      write_code(from, in, j, read_code(from, src, size_t(src_offset + int64_t(i + j) * src_stride)));
    convert(from, in, to, out, k, r);
    for (size_t j = 0; j < k; ++j)
      write_code(to, dst, size_t(dst_offset + int64_t(i + j) * dst_stride), read_code(to, out, j));
  }
}

void convert_nest(DataFormat from, const void* src, DataFormat to, void* dst,
                  const StridedNest& nest, const ConvertRules& r) {
  const size_t rank = nest.size.size();
  if (nest.stride_src.size() != rank || nest.stride_dst.size() != rank)
    throw std::invalid_argument("vspyre::fmt::convert_nest: size/stride rank mismatch");
  if (rank == 0) {
    return convert_strided(from, src, nest.offset_src, 1, to, dst, nest.offset_dst, 1, 1, r);
  }
  for (int64_t s : nest.size)
    if (s <= 0) return;
  require_convertible(from);
  require_convertible(to);
  const int fb = bits_per_element(from), tb = bits_per_element(to);
  // Transposing nests (the innermost loop not unit-stride on one side) go tile by tile over
  // loops 0 and 1, so that both sides stay in cache. Tiling reorders the writes, so only when
  // the destination is provably written at most once per element.
  const bool tile = rank >= 2 && fb >= 8 && tb >= 8 && nest.size[0] > 1 && nest.size[1] > 1 &&
                    (nest.stride_src[0] != 1 || nest.stride_dst[0] != 1) &&
                    loops_injective(nest.size, nest.stride_dst);
  constexpr int64_t T = 128;  // 128 x 128 elements (measured best for an fp16 transpose)
  std::vector<uint64_t> tin, tout;
  if (tile) {
    tin.resize(size_t(T * T));
    tout.resize(size_t(T * T));
  }
  // Odometer over dims first..rank-1; dims below `first` are one run (or tile).
  const size_t first = tile ? 2 : 1;
  std::vector<int64_t> idx(rank, 0);
  int64_t so = nest.offset_src, d_o = nest.offset_dst;
  while (true) {
    if (!tile) {
      convert_strided(from, src, so, nest.stride_src[0], to, dst, d_o, nest.stride_dst[0],
                      size_t(nest.size[0]), r);
    } else {
      const int fs = fb / 8, ts = tb / 8;
      const int64_t ss0 = nest.stride_src[0], ss1 = nest.stride_src[1];
      const int64_t ds0 = nest.stride_dst[0], ds1 = nest.stride_dst[1];
      for (int64_t j0 = 0; j0 < nest.size[1]; j0 += T) {
        const size_t n1 = size_t(std::min(T, nest.size[1] - j0));
        for (int64_t i0 = 0; i0 < nest.size[0]; i0 += T) {
          const size_t n0 = size_t(std::min(T, nest.size[0] - i0));
          const int64_t s_off = so + i0 * ss0 + j0 * ss1, d_off = d_o + i0 * ds0 + j0 * ds1;
          // The buffer follows the source's walk; the conversion is element-wise.
          const bool i_major = iabs(ss1) < iabs(ss0);
          by_size(fs, [&](auto u) {
            using U = decltype(u);
            tile_move<U, true>(reinterpret_cast<U*>(tin.data()), i_major,
                               const_cast<void*>(src), s_off, ss0, ss1, n0, n1);
          });
          convert(from, tin.data(), to, tout.data(), n0 * n1, r);
          by_size(ts, [&](auto u) {
            using U = decltype(u);
            tile_move<U, false>(reinterpret_cast<U*>(tout.data()), i_major, dst, d_off, ds0, ds1,
                                n0, n1);
          });
        }
      }
    }
    size_t k = first;
    for (; k < rank; ++k) {
      ++idx[k];
      so += nest.stride_src[k];
      d_o += nest.stride_dst[k];
      if (idx[k] < nest.size[k]) break;
      so -= nest.stride_src[k] * nest.size[k];
      d_o -= nest.stride_dst[k] * nest.size[k];
      idx[k] = 0;
    }
    if (k >= rank) return;
  }
}

bool dci_pair_supported(DataFormat from, DataFormat to) {
  using D = DataFormat;
  struct Pair {
    D from, to;
  };
  // flex-api.md 5.2, from torch-spyre types_mapping.h isDCIConversionSupported.
  static constexpr Pair pairs[] = {
      {D::IEEE_FP32, D::IEEE_FP32},   {D::IEEE_FP32, D::SEN169_FP16},  {D::IEEE_FP32, D::BFLOAT16},
      {D::IEEE_FP32, D::SEN143_FP8},  {D::IEEE_FP32, D::SENINT4},      {D::IEEE_FP32, D::SENINT8},
      {D::IEEE_FP32, D::SENUINT2},    {D::SEN169_FP16, D::IEEE_FP32},  {D::SEN169_FP16, D::SEN169_FP16},
      {D::SEN169_FP16, D::SENINT16},  {D::SEN169_FP16, D::BOOL},       {D::SEN169_FP16, D::IEEE_FP16},
      {D::SEN169_FP16, D::IEEE_INT64}, {D::SEN169_FP16, D::BFLOAT16},  {D::IEEE_FP16, D::IEEE_FP32},
      {D::IEEE_FP16, D::BFLOAT16},    {D::IEEE_FP16, D::SEN169_FP16},  {D::SENINT16, D::SEN169_FP16},
      {D::BFLOAT16, D::IEEE_FP32},    {D::BFLOAT16, D::SEN169_FP16},   {D::SEN143_FP8, D::IEEE_FP32},
      {D::SEN143_FP8, D::SEN143_FP8}, {D::SENINT4, D::IEEE_FP32},      {D::SENINT4, D::SENINT4},
      {D::SENINT8, D::IEEE_FP32},     {D::SENINT8, D::SENINT8},        {D::SENUINT2, D::IEEE_FP32},
      {D::BOOL, D::SEN169_FP16},      {D::IEEE_INT64, D::SEN169_FP16}, {D::IEEE_INT64, D::IEEE_INT32},
      {D::IEEE_INT32, D::IEEE_INT64}, {D::IEEE_INT32, D::IEEE_INT32},  {D::SENUINT32, D::IEEE_INT64},
      {D::SENUINT32, D::SENUINT32},
  };
  for (const Pair& p : pairs)
    if (p.from == from && p.to == to) return true;
  return false;
}

bool is_integer(DataFormat f) {
  switch (f) {
    case DataFormat::SENINT2: case DataFormat::SENINT4: case DataFormat::SENINT8:
    case DataFormat::SENINT16: case DataFormat::SENINT24: case DataFormat::IEEE_INT32:
    case DataFormat::IEEE_INT64: case DataFormat::SENUINT32: case DataFormat::SENUINT2:
    case DataFormat::BOOL:
      return true;
    default:
      return false;
  }
}

}  // namespace vspyre::fmt
