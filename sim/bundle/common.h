// Shared pieces of the SuperDSC bundle loader: the error type, the card limits the loader
// validates against, and the device data-format and opFunc catalogues (formats.md C and D).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace vspyre::bundle {

// Every rejected input raises exactly this. The message is one line:
//   "<file>:<line>: <rule>"            for bundle.mlir
//   "<file>: <json path>: <rule>"      for SDSC JSON
struct LoadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What the loader checks a kernel plan against. Defaults are one Spyre card.
struct CardLimits {
  uint32_t cores = 32;
  uint64_t lx_bytes = 2ull << 20;         // scratchpad per core
  uint64_t lx_reserved = 64ull << 10;     // top of LX kept by the runtime; not usable by a plan
  uint32_t stick_bytes = 128;
  uint64_t per_core_span = 256ull << 20;  // HBM bytes one core may touch per tensor
  uint32_t max_labeled_ds = 8;
  // Caps that keep a hostile input from exhausting time or memory while unrolling.
  uint64_t max_executions = 1ull << 20;
  uint64_t max_symbol_bindings = 1ull << 24;  // summed over all unrolled executions

  uint64_t lx_usable() const { return lx_bytes > lx_reserved ? lx_bytes - lx_reserved : 0; }
};

// Device data formats, by their senlib enumerator names (formats.md D.1).
enum class DataFormat : uint8_t {
  sen169_fp16,
  ieee_fp16,
  bfloat16,
  ieee_fp32,
  sen143_fp8,
  sen152_fp8,
  sen153_fp9,
  sen18f_fp24,
  senint2,
  senint4,
  senint8,
  senint16,
  senint24,
  senuint2,
  senuint32,
  ieee_int32,
  ieee_int64,
  boolean,
};

std::optional<DataFormat> parse_data_format(std::string_view name);  // "SEN169_FP16" etc.
std::string_view to_string(DataFormat f);
// Storage bits per element, or 0 where the storage width is not known (FP9, INT24, FP24, BOOL).
uint32_t data_format_bits(DataFormat f);

enum class ExUnit : uint8_t { pt, sfp, pe };
enum class OpEngine : uint8_t { pt, sfp, backend };  // engine required by the opFunc table

// opFuncName catalogue: the SuperDSC-Bundle spec table (formats.md C.2) plus the two compare
// names torch-spyre also emits. Returns the engine the op must run on, or nullopt if unknown.
std::optional<OpEngine> op_func_engine(std::string_view op_func_name);
inline bool is_known_op_func(std::string_view op_func_name) {
  return op_func_engine(op_func_name).has_value();
}

// Makes an input-derived string safe for a one-line message: printable, bounded, quoted.
std::string quote(std::string_view s);

}  // namespace vspyre::bundle
