// Integer formats, packing, names/geometry and the DCI pair table.
#include "catch.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "sim/formats/formats.h"

using namespace vspyre::fmt;

TEST_CASE("formats: names round-trip and match senlib's numbering", "[formats][names]") {
  for (DataFormat f : k_all_formats) {
    const auto back = data_format_from_name(name(f));
    REQUIRE(back.has_value());
    CHECK(*back == f);
  }
  CHECK(data_format_from_name("DL16") == DataFormat::SEN169_FP16);
  CHECK_FALSE(data_format_from_name("sen169_fp16").has_value());
  CHECK_FALSE(data_format_from_name("").has_value());
  // Observed DCI: dataformat_src_ 15 (host fp16), dataformat_dst_ 0 (SEN169).
  CHECK(int(DataFormat::SEN169_FP16) == 0);
  CHECK(int(DataFormat::IEEE_FP16) == 15);
  CHECK(int(DataFormat::BFLOAT16) == 17);
  CHECK(int(DataFormat::SEN18F_FP24) == 18);
  CHECK(name(DataFormat::SENUINT32) == "SENUINT32");
}

TEST_CASE("formats: bits per element and elements per 128-byte stick", "[formats][names]") {
  CHECK(elements_per_stick(DataFormat::SEN169_FP16) == 64);
  CHECK(elements_per_stick(DataFormat::IEEE_FP16) == 64);
  CHECK(elements_per_stick(DataFormat::BFLOAT16) == 64);
  CHECK(elements_per_stick(DataFormat::SENINT16) == 64);
  CHECK(elements_per_stick(DataFormat::IEEE_FP32) == 32);
  CHECK(elements_per_stick(DataFormat::IEEE_INT32) == 32);
  CHECK(elements_per_stick(DataFormat::SENUINT32) == 32);
  CHECK(elements_per_stick(DataFormat::IEEE_INT64) == 16);
  CHECK(elements_per_stick(DataFormat::SEN143_FP8) == 128);
  CHECK(elements_per_stick(DataFormat::SEN152_FP8) == 128);
  CHECK(elements_per_stick(DataFormat::SENINT8) == 128);
  CHECK(elements_per_stick(DataFormat::SENINT4) == 256);
  CHECK(elements_per_stick(DataFormat::SENINT2) == 512);
  CHECK(elements_per_stick(DataFormat::SENUINT2) == 512);
  CHECK(elements_per_stick(DataFormat::INVALID) == 0);
  CHECK(elements_per_stick(DataFormat::SEN18F_FP24) == 0);
  CHECK(bits_per_element(DataFormat::SENINT4) == 4);
  CHECK(bits_per_element(DataFormat::SEN169_FP16) == 16);
  CHECK(bytes_for(DataFormat::SENINT4, 3) == 2);
  for (DataFormat f : k_all_formats)
    if (elements_per_stick(f) > 0) CHECK(elements_per_stick(f) * bits_per_element(f) == 1024);
  CHECK_FALSE(is_convertible(DataFormat::INVALID));
  CHECK_FALSE(is_convertible(DataFormat::SEN18F_FP24));
  CHECK(is_convertible(DataFormat::SENINT2));
  float x = 1.0f, y;
  CHECK_THROWS_AS(convert(DataFormat::INVALID, &x, DataFormat::IEEE_FP32, &y, 1), std::invalid_argument);
}

TEST_CASE("formats: DCI pair table has the documented source/destination pairs", "[formats][dci]") {
  int n = 0;
  for (DataFormat a : k_all_formats)
    for (DataFormat b : k_all_formats)
      if (dci_pair_supported(a, b)) {
        ++n;
        CHECK(is_convertible(a));
        CHECK(is_convertible(b));
      }
  CHECK(n == 34);  // flex-api.md says 35 but its table lists 34
  CHECK(dci_pair_supported(DataFormat::IEEE_FP16, DataFormat::SEN169_FP16));
  CHECK(dci_pair_supported(DataFormat::SEN169_FP16, DataFormat::IEEE_FP16));
  CHECK(dci_pair_supported(DataFormat::BOOL, DataFormat::SEN169_FP16));
  CHECK_FALSE(dci_pair_supported(DataFormat::IEEE_FP16, DataFormat::IEEE_FP16));
  CHECK_FALSE(dci_pair_supported(DataFormat::SEN152_FP8, DataFormat::IEEE_FP32));
}

TEST_CASE("formats: float to integer rounds half to even and saturates", "[formats][int]") {
  using D = DataFormat;
  CHECK(int_from_double(2.5, D::SENINT8) == 2);
  CHECK(int_from_double(3.5, D::SENINT8) == 4);
  CHECK(int_from_double(-2.5, D::SENINT8) == -2);
  CHECK(int_from_double(-0.4, D::SENINT8) == 0);
  CHECK(int_from_double(127.4, D::SENINT8) == 127);
  CHECK(int_from_double(127.5, D::SENINT8) == 127);
  CHECK(int_from_double(1e9, D::SENINT8) == 127);
  CHECK(int_from_double(-1e9, D::SENINT8) == -128);
  CHECK(int_from_double(std::nan(""), D::SENINT8) == 0);
  CHECK(int_from_double(INFINITY, D::SENINT16) == 32767);
  CHECK(int_from_double(-INFINITY, D::SENINT16) == -32768);
  CHECK(int_from_double(7.6, D::SENINT4) == 7);
  CHECK(int_from_double(-9, D::SENINT4) == -8);
  CHECK(int_from_double(1.2, D::SENINT2) == 1);
  CHECK(int_from_double(-3, D::SENINT2) == -2);
  CHECK(int_from_double(-1, D::SENUINT2) == 0);
  CHECK(int_from_double(9, D::SENUINT2) == 3);
  CHECK(int_from_double(1e8, D::SENINT24) == (1 << 23) - 1);
  CHECK(int_from_double(2147483647.6, D::IEEE_INT32) == INT32_MAX);
  CHECK(int_from_double(2147483646.5, D::IEEE_INT32) == 2147483646);
  CHECK(int_from_double(-2147483649.0, D::IEEE_INT32) == INT32_MIN);
  CHECK(int_from_double(1e19, D::IEEE_INT64) == INT64_MAX);
  CHECK(int_from_double(-1e19, D::IEEE_INT64) == INT64_MIN);
  CHECK(int_from_double(-1.0, D::SENUINT32) == 0);
  CHECK(int_from_double(5e9, D::SENUINT32) == int64_t(UINT32_MAX));
  CHECK(int_from_double(0.0, D::BOOL) == 0);
  CHECK(int_from_double(-0.1, D::BOOL) == 1);
  CHECK(int_min(D::SENINT4) == -8);
  CHECK(int_max(D::SENINT24) == 8388607);
  // Bulk float32 -> int8 agrees, and int32 in from float goes through the same rules.
  const float in[] = {2.5f, -2.5f, 300.0f, -300.0f, NAN, 0.5f, 1.5f};
  int8_t out[7];
  convert(D::IEEE_FP32, in, D::SENINT8, out, 7);
  const int8_t want[] = {2, -2, 127, -128, 0, 0, 2};
  CHECK(std::memcmp(out, want, 7) == 0);
  const float big[] = {3e9f, -3e9f, 2147483520.0f};
  int32_t o32[3];
  convert(D::IEEE_FP32, big, D::IEEE_INT32, o32, 3);
  CHECK(o32[0] == INT32_MAX);
  CHECK(o32[1] == INT32_MIN);
  CHECK(o32[2] == 2147483520);
}

TEST_CASE("formats: int4 packs two per byte, element 0 in the low nibble", "[formats][int]") {
  const float in[] = {1, -1, 7, -8, 3};
  uint8_t packed[3] = {0, 0, 0xA0};  // the high nibble of byte 2 belongs to element 5
  convert(DataFormat::IEEE_FP32, in, DataFormat::SENINT4, packed, 5);
  CHECK(packed[0] == 0xF1);
  CHECK(packed[1] == 0x87);
  CHECK(packed[2] == 0xA3);  // element 4 written, element 5 untouched
  CHECK(int4_get(packed, 0) == 1);
  CHECK(int4_get(packed, 1) == -1);
  CHECK(int4_get(packed, 3) == -8);
  CHECK(int4_get(packed, 5) == -6);
  float back[5];
  convert(DataFormat::SENINT4, packed, DataFormat::IEEE_FP32, back, 5);
  CHECK(std::memcmp(back, in, sizeof in) == 0);
  int4_set(packed, 1, 2);
  CHECK(packed[0] == 0x21);
  // Every nibble value decodes to its two's complement value.
  for (int v = -8; v < 8; ++v) {
    uint8_t b = uint8_t((unsigned(v) & 0xF) << 4);
    CHECK(int4_get(&b, 1) == v);
    CHECK(int4_get(&b, 0) == 0);
  }
}

TEST_CASE("formats: int2/uint2 pack four per byte, element 0 in the lowest bits", "[formats][int]") {
  const float in[] = {1, -2, 0, -1, 1};
  uint8_t packed[2] = {0, 0};
  convert(DataFormat::IEEE_FP32, in, DataFormat::SENINT2, packed, 5);
  CHECK(packed[0] == 0xC9);  // 01 | 10<<2 | 00<<4 | 11<<6
  CHECK(packed[1] == 0x01);
  CHECK(int2_get(packed, 1) == -2);
  CHECK(int2_get(packed, 3) == -1);
  const float u[] = {3, 0, 2, 1};
  uint8_t up = 0;
  convert(DataFormat::IEEE_FP32, u, DataFormat::SENUINT2, &up, 4);
  CHECK(up == 0x63);
  CHECK(uint2_get(&up, 0) == 3);
  CHECK(uint2_get(&up, 2) == 2);
}

TEST_CASE("formats: wide integers convert exactly through double", "[formats][int]") {
  const int64_t in64[] = {INT64_MAX, -5, int64_t(1) << 40, INT64_MIN};
  int32_t out32[4];
  convert(DataFormat::IEEE_INT64, in64, DataFormat::IEEE_INT32, out32, 4);
  CHECK(out32[0] == INT32_MAX);
  CHECK(out32[1] == -5);
  CHECK(out32[2] == INT32_MAX);
  CHECK(out32[3] == INT32_MIN);
  int64_t same[4];
  convert(DataFormat::IEEE_INT64, in64, DataFormat::IEEE_INT64, same, 4);  // bit copy
  CHECK(std::memcmp(same, in64, sizeof same) == 0);
  const uint32_t u32[] = {UINT32_MAX, 7};
  int64_t o64[2];
  convert(DataFormat::SENUINT32, u32, DataFormat::IEEE_INT64, o64, 2);
  CHECK(o64[0] == int64_t(UINT32_MAX));
  CHECK(o64[1] == 7);
  const int32_t i24[] = {-(1 << 23), (1 << 23) - 1, 0x00FFFFFF /* raw -1 in 24 bits */};
  float f24[3];
  convert(DataFormat::SENINT24, i24, DataFormat::IEEE_FP32, f24, 3);
  CHECK(f24[0] == -8388608.0f);
  CHECK(f24[1] == 8388607.0f);
  CHECK(f24[2] == -1.0f);
  // int32 -> DL16 rounds once from the exact integer (not via float).
  const int32_t odd[] = {16777217 /* 2^24+1 */, 1000};
  uint16_t d[2];
  convert(DataFormat::IEEE_INT32, odd, DataFormat::SEN169_FP16, d, 2);
  CHECK(d[0] == dl16_from_double(16777217.0));
  CHECK(dl16_to_float(d[1]) == 1000.0f);
}

TEST_CASE("formats: BOOL converts as nonzero -> 1 and back to 0/1", "[formats][int]") {
  const uint8_t b[] = {0, 1, 2, 255};
  uint16_t d[4];
  convert(DataFormat::BOOL, b, DataFormat::SEN169_FP16, d, 4);
  CHECK(d[0] == 0x0000);
  CHECK(d[1] == k_dl16_one);
  CHECK(d[2] == k_dl16_one);
  CHECK(d[3] == k_dl16_one);
  const uint16_t dl[] = {0x0000, 0x8000, 0x3E00, 0x0001, 0x7FFF};
  uint8_t o[5];
  convert(DataFormat::SEN169_FP16, dl, DataFormat::BOOL, o, 5);
  const uint8_t want[] = {0, 0, 1, 1, 1};
  CHECK(std::memcmp(o, want, 5) == 0);
}
