// vspyre runtime shim: senlib `util/sendefs/sendefs.h` (flex-api.md section 5.1).
// Device/host data format names, the stick-size table, DT_ERROR.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

#include "flex/flex_api.h"

// Numeric values match vspyre::fmt::DataFormat (sim/formats/formats.h) and the public
// torch-spyre pybind stubs (SEN169_FP16 = 0, IEEE_FP16 = 15).
enum class DataFormats : int32_t {
  SEN169_FP16 = 0,  // DL16: 1 sign, 6 exponent (bias 31), 9 fraction
  IEEE_FP32 = 1,
  INVALID = 2,
  SEN143_FP8 = 3,   // E4M3
  SEN152_FP8 = 4,   // E5M2
  SEN153_FP9 = 5,
  SENINT2 = 6,
  SENINT4 = 7,
  SENINT8 = 8,
  SENINT16 = 9,
  SENINT24 = 10,
  IEEE_INT64 = 11,
  IEEE_INT32 = 12,
  SENUINT32 = 13,
  SENUINT2 = 14,
  IEEE_FP16 = 15,
  BOOL = 16,
  BFLOAT16 = 17,
  SEN18F_FP24 = 18,
  SEN080_FP8 = 19,
  SEN053_FP8 = 20,
  SEN121_FP4 = 21,
};

// Elements per 128-byte stick, indexed with operator[] (a missing key reads 0 = unsupported).
// Non-const on purpose: torch-spyre indexes it with operator[].
FLEX_API extern std::map<DataFormats, int> dataFormatToStickSize;

namespace EnumsConversion {
// The enumerator name, e.g. "SEN169_FP16".
FLEX_API std::string dataFormatsToString(DataFormats f);
}  // namespace EnumsConversion

namespace senlib_detail {
[[noreturn]] inline void dt_error(const std::string& msg, const char* file, int line) {
  throw std::runtime_error(msg + " (" + file + ":" + std::to_string(line) + ")");
}
}  // namespace senlib_detail

#define DT_ERROR(msg) ::senlib_detail::dt_error((msg), __FILE__, __LINE__)
