// vspyre runtime shim: deeptools `sen_data_convert.h` (flex-api.md section 5.3).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "flex/flex_api.h"
#include "spyrecode-host-functions/sendataconvert/sen_host_ops.h"

namespace deeptools {

// Bit cast between equally sized trivially copyable types: BinaryConvert<uint32_t>(1.0f).
template <typename To, typename From>
inline To BinaryConvert(From v) {
  static_assert(sizeof(To) == sizeof(From), "BinaryConvert needs equal sizes");
  static_assert(std::is_trivially_copyable_v<To> && std::is_trivially_copyable_v<From>);
  To out;
  std::memcpy(&out, &v, sizeof(out));
  return out;
}

// DL16 (SEN169_FP16) bits of `v` in the low 16 bits: round to nearest, saturating.
FLEX_API uint32_t FloatToFp16Bin(float v);
// Inverse of FloatToFp16Bin (low 16 bits used).
FLEX_API float Fp16BinToFloat(uint32_t bits);

}  // namespace deeptools
