// Device number formats of the Spyre card (DL16, fp8, packed ints, ...), host<->device element
// conversion, and the stick-tiled device layout (shared/spyre/formats.md section D).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace vspyre::fmt {

// ---------------------------------------------------------------------------------------------
// Format names
// ---------------------------------------------------------------------------------------------

// senlib `DataFormats`. Values 0..18 match the public torch-spyre pybind stubs (SEN169_FP16 = 0,
// IEEE_FP16 = 15 as in an observed DCI). The last three appear only in the SDSC JSON schema; their
// numeric values are not public, so ours are placeholders.
enum class DataFormat : int32_t {
  SEN169_FP16 = 0,  // DL16
  IEEE_FP32 = 1,
  INVALID = 2,
  SEN143_FP8 = 3,   // E4M3FN
  SEN152_FP8 = 4,   // E5M2
  SEN153_FP9 = 5,   // 1-5-3, stored in a 16-bit container
  SENINT2 = 6,
  SENINT4 = 7,
  SENINT8 = 8,
  SENINT16 = 9,
  SENINT24 = 10,    // stored in a 32-bit container
  IEEE_INT64 = 11,
  IEEE_INT32 = 12,
  SENUINT32 = 13,
  SENUINT2 = 14,
  IEEE_FP16 = 15,
  BOOL = 16,        // one byte, 0 or 1
  BFLOAT16 = 17,
  SEN18F_FP24 = 18, // name only: no conversion
  SEN080_FP8 = 19,  // name only
  SEN053_FP8 = 20,  // name only
  SEN121_FP4 = 21,  // name only
};

inline constexpr DataFormat k_all_formats[] = {
    DataFormat::SEN169_FP16, DataFormat::IEEE_FP32,  DataFormat::INVALID,
    DataFormat::SEN143_FP8,  DataFormat::SEN152_FP8, DataFormat::SEN153_FP9,
    DataFormat::SENINT2,     DataFormat::SENINT4,    DataFormat::SENINT8,
    DataFormat::SENINT16,    DataFormat::SENINT24,   DataFormat::IEEE_INT64,
    DataFormat::IEEE_INT32,  DataFormat::SENUINT32,  DataFormat::SENUINT2,
    DataFormat::IEEE_FP16,   DataFormat::BOOL,       DataFormat::BFLOAT16,
    DataFormat::SEN18F_FP24, DataFormat::SEN080_FP8, DataFormat::SEN053_FP8,
    DataFormat::SEN121_FP4,
};

inline constexpr int64_t k_stick_bytes = 128;

// Exact enumerator name ("SEN169_FP16"). Also accepts "DL16" as an alias.
std::optional<DataFormat> data_format_from_name(std::string_view name);
std::string_view name(DataFormat f);
// Bits one element occupies in memory (container size: 16 for SEN153_FP9, 32 for SENINT24);
// 0 for INVALID.
int bits_per_element(DataFormat f);
// Integer formats (signed, unsigned and BOOL), the ones int_min/int_max/int_from_double accept.
bool is_integer(DataFormat f);
// Elements in one 128-byte stick; 0 when the format has no stick geometry (INVALID, SEN18F_FP24).
int64_t elements_per_stick(DataFormat f);
// True when convert()/load_element()/store_element() handle the format.
bool is_convertible(DataFormat f);
// Bytes that n contiguous elements occupy (sub-byte formats round up to whole bytes).
size_t bytes_for(DataFormat f, size_t n);

// ---------------------------------------------------------------------------------------------
// Conversion rules. Every uncertain choice lives here so that a measurement can correct it.
// ---------------------------------------------------------------------------------------------

enum class Rounding { nearest_even, nearest_ties_away };

struct Dl16Rules {
  // IBM's DLFloat patent: one rounding mode, nearest with ties away from zero.
  Rounding rounding = Rounding::nearest_ties_away;
  // formats.md marks saturation on overflow as an inference; IBM's NNPA stickifier clips too.
  // false: finite overflow becomes the NaN/inf code.
  bool saturate = true;
  // The merged NaN/inf code 0x7FFF/0xFFFF decodes to a signed infinity (so -inf masks survive
  // exp/max); true: it decodes to NaN, as IBM's NNPA reference converter does.
  bool ninf_decodes_to_nan = false;
  // Sign of zero is "don't care" in the patent; keep it so -0.0 round-trips.
  bool keep_zero_sign = true;
};

struct ConvertRules {
  Dl16Rules dl16;
  // fp8/fp9: finite values beyond the largest finite code saturate to it; E4M3FN (no infinity)
  // also maps +-inf to +-448. false: overflow gives inf (E5M2, FP9) or NaN (E4M3FN).
  bool fp8_saturate = true;
};

inline constexpr ConvertRules k_default_rules{};

// ---------------------------------------------------------------------------------------------
// Scalar conversions
// ---------------------------------------------------------------------------------------------

// DL16 = SEN169_FP16: 1 sign | 6 exponent (bias 31) | 9 fraction, value 2^(e-31)*(1+f/512) for
// every code except 0x0000/0x8000 (zero) and 0x7FFF/0xFFFF (NaN-or-infinity). No subnormals.
inline constexpr uint16_t k_dl16_zero = 0x0000;
inline constexpr uint16_t k_dl16_one = 0x3E00;
inline constexpr uint16_t k_dl16_max = 0x7FFE;   // 2^32 * (1 + 510/512) ~ 8.573e9
inline constexpr uint16_t k_dl16_min = 0x0001;   // 2^-31 * (1 + 1/512)
inline constexpr uint16_t k_dl16_ninf = 0x7FFF;  // NaN and infinity share this code
inline constexpr double k_dl16_max_value = 8573157376.0;

uint16_t dl16_from_float(float x, const Dl16Rules& r = k_default_rules.dl16);
uint16_t dl16_from_double(double x, const Dl16Rules& r = k_default_rules.dl16);
float dl16_to_float(uint16_t c, const Dl16Rules& r = k_default_rules.dl16);
double dl16_to_double(uint16_t c, const Dl16Rules& r = k_default_rules.dl16);

// OCP E4M3FN: bias 7, subnormals, no infinity, NaN = S.1111.111, max 448. Round to nearest even.
uint8_t e4m3_from_float(float x, bool saturate = true);
uint8_t e4m3_from_double(double x, bool saturate = true);
float e4m3_to_float(uint8_t c);
// OCP E5M2: bias 15, subnormals, infinities, max 57344. Round to nearest even.
uint8_t e5m2_from_float(float x, bool saturate = true);
uint8_t e5m2_from_double(double x, bool saturate = true);
float e5m2_to_float(uint8_t c);
// SEN153_FP9 (assumed IEEE-like 1-5-3: bias 15, subnormals, inf/NaN, max 61440), low 9 bits.
uint16_t fp9_from_float(float x, bool saturate = true);
float fp9_to_float(uint16_t c);
// IEEE binary16 and bfloat16 host formats: round to nearest even, overflow to infinity.
uint16_t fp16_from_float(float x);
uint16_t fp16_from_double(double x);
float fp16_to_float(uint16_t c);
uint16_t bf16_from_float(float x);
uint16_t bf16_from_double(double x);
float bf16_to_float(uint16_t c);

// Integers from real values: round to nearest even, saturate to the format's range, NaN -> 0.
// `f` is one of the integer formats or BOOL (nonzero -> 1).
int64_t int_from_double(double x, DataFormat f);
// Range of an integer format (BOOL: 0..1).
int64_t int_min(DataFormat f);
int64_t int_max(DataFormat f);

// Packed sub-byte integers: element i lives in byte i*bits/8, lowest bits first (element 0 of a
// SENINT4 pair is the low nibble).
int int4_get(const void* base, size_t i);           // -8..7
void int4_set(void* base, size_t i, int v);          // v must already be in range
int int2_get(const void* base, size_t i);           // -2..1
unsigned uint2_get(const void* base, size_t i);     // 0..3

// Raw element code (bit pattern, zero-extended) at element index i, and its inverse.
uint64_t read_code(DataFormat f, const void* base, size_t i);
void write_code(DataFormat f, void* base, size_t i, uint64_t code);
// One element as a double (exact for every convertible format except IEEE_INT64 beyond 2^53),
// and one element stored from a double with the rules above.
double load_element(DataFormat f, const void* base, size_t i,
                    const ConvertRules& r = k_default_rules);
void store_element(DataFormat f, void* base, size_t i, double v,
                   const ConvertRules& r = k_default_rules);

// ---------------------------------------------------------------------------------------------
// Bulk conversion
// ---------------------------------------------------------------------------------------------

// n elements, both buffers contiguous and starting at element 0. Same format: bit copy.
// Every conversion rounds once from the exact source value (IEEE_INT64 sources above 2^53 are
// first rounded to double). Throws std::invalid_argument for a non-convertible format.
void convert(DataFormat from, const void* src, DataFormat to, void* dst, size_t n,
             const ConvertRules& r = k_default_rules);

// The same conversion without the fast paths (contiguous fused loops, 16-bit lookup tables):
// the element-wise reference that tests hold every fast path to, bit for bit.
void convert_generic(DataFormat from, const void* src, DataFormat to, void* dst, size_t n,
                     const ConvertRules& r = k_default_rules);

// Strided variant; offsets and strides are in elements of each side's own format.
void convert_strided(DataFormat from, const void* src, int64_t src_offset, int64_t src_stride,
                     DataFormat to, void* dst, int64_t dst_offset, int64_t dst_stride,
                     size_t n, const ConvertRules& r = k_default_rules);

// True when distinct index tuples of loops (sizes, element strides) reach distinct elements:
// sorted by |stride|, each stride exceeds the span of all the finer dimensions. Conservative.
bool loops_injective(const std::vector<int64_t>& size, const std::vector<int64_t>& stride);

// One DCI loop nest (flex-api.md 5.2 data_conversion_stride_info): sizes and strides innermost
// FIRST, all in elements of each side's format.
struct StridedNest {
  std::vector<int64_t> size;
  std::vector<int64_t> stride_src;
  std::vector<int64_t> stride_dst;
  int64_t offset_src = 0;
  int64_t offset_dst = 0;
};
void convert_nest(DataFormat from, const void* src, DataFormat to, void* dst,
                  const StridedNest& nest, const ConvertRules& r = k_default_rules);

// The source/destination pairs the runtime's isDCIConversionSupported accepts (flex-api.md 5.2).
bool dci_pair_supported(DataFormat from, DataFormat to);

// ---------------------------------------------------------------------------------------------
// Stick-tiled layout (formats.md D.2)
// ---------------------------------------------------------------------------------------------

// A device tensor is a dense row-major array of shape device_size (outermost first) whose last
// dimension is one 128-byte stick, or whose last two are (a 2-D stick: torch-spyre's fp8
// weights, stickSize_ [2, 64], two rows of 64 one-byte elements). dim_map[k] names the host
// dimension device dimension k walks, or -1 for a synthetic dimension (only coordinate 0 holds
// data). A host dimension may appear in
// several device dimensions: they split its index mixed-radix, the later (inner) one finer. The
// stick dimension therefore appears as the stick count and as the last (within-stick) dimension.
struct StickLayout {
  std::vector<int64_t> device_size;
  std::vector<int32_t> dim_map;
  DataFormat format = DataFormat::INVALID;

  bool operator==(const StickLayout&) const = default;
};

// torch-spyre's default: [d1, ..., d(n-2), ceil(d(n-1)/eps), d0, eps]; 1-D [ceil(n/eps), eps];
// 0-D [1, eps] with one value in lane 0.
StickLayout default_stick_layout(std::span<const int64_t> host_size, DataFormat device_format);
// torch-spyre's SpyreTensorLayout(size, strides, dtype, dim_order): the device dims are
// [dim_order[1..n-1] (the last one as a stick count), dim_order[0], eps]. A trailing -1
// (dim_order one longer than host_size) gives the "sparse" layout: one value per stick, lane 0.
StickLayout stick_layout_with_dim_order(std::span<const int64_t> host_size,
                                        std::span<const int32_t> dim_order,
                                        DataFormat device_format);
// Bytes of the device image: 128 x product of device_size[0..n-2].
uint64_t device_image_bytes(const StickLayout& layout);
// Byte offset in the device image of host element `host_coord` (the element must not sit in a
// sub-byte position other than 0 for this to be a whole byte; the bit offset is byte*8 + bit).
uint64_t device_byte_offset(const StickLayout& layout, std::span<const int64_t> host_coord);
// Device element index (row-major over device_size) of host element `host_coord`.
int64_t device_element_index(const StickLayout& layout, std::span<const int64_t> host_coord);
// torch-spyre's stride_map: the host element stride of a step along each device dimension
// (-1 for synthetic or size-1 dimensions).
std::vector<int64_t> stride_map(const StickLayout& layout, std::span<const int64_t> host_size,
                                std::span<const int64_t> host_strides);
// Throws std::invalid_argument when the layout cannot describe a host tensor of this rank/size.
void validate(const StickLayout& layout, std::span<const int64_t> host_size);

// A strided host tensor: sizes, strides and offset in elements of `format`.
struct HostTensor {
  const void* data = nullptr;
  DataFormat format = DataFormat::INVALID;
  std::span<const int64_t> size;
  std::span<const int64_t> stride;
  int64_t offset = 0;
};
struct MutableHostTensor {
  void* data = nullptr;
  DataFormat format = DataFormat::INVALID;
  std::span<const int64_t> size;
  std::span<const int64_t> stride;
  int64_t offset = 0;
};

// Row-major (contiguous) strides for a shape.
std::vector<int64_t> contiguous_strides(std::span<const int64_t> size);

enum class Padding { zero, leave };

// Host -> device image (device_image_bytes(layout) bytes at `device`), converting each element
// to layout.format. Padding lanes and synthetic positions are zeroed or left as they were.
void host_to_device(const HostTensor& host, const StickLayout& layout, void* device,
                    Padding padding = Padding::zero, const ConvertRules& r = k_default_rules);
// Device image -> host tensor, converting to host.format. Only the host elements are written.
void device_to_host(const void* device, const StickLayout& layout, const MutableHostTensor& host,
                    const ConvertRules& r = k_default_rules);

}  // namespace vspyre::fmt
