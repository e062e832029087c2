#include <array>
#include <utility>

#include "sim/bundle/common.h"

namespace vspyre::bundle {
namespace {

struct FormatEntry {
  std::string_view name;
  DataFormat format;
  uint32_t bits;
};

constexpr std::array<FormatEntry, 18> k_formats{{
    {"SEN169_FP16", DataFormat::sen169_fp16, 16},
    {"IEEE_FP16", DataFormat::ieee_fp16, 16},
    {"BFLOAT16", DataFormat::bfloat16, 16},
    {"IEEE_FP32", DataFormat::ieee_fp32, 32},
    {"SEN143_FP8", DataFormat::sen143_fp8, 8},
    {"SEN152_FP8", DataFormat::sen152_fp8, 8},
    {"SEN153_FP9", DataFormat::sen153_fp9, 0},
    {"SEN18F_FP24", DataFormat::sen18f_fp24, 0},
    {"SENINT2", DataFormat::senint2, 2},
    {"SENINT4", DataFormat::senint4, 4},
    {"SENINT8", DataFormat::senint8, 8},
    {"SENINT16", DataFormat::senint16, 16},
    {"SENINT24", DataFormat::senint24, 0},
    {"SENUINT2", DataFormat::senuint2, 2},
    {"SENUINT32", DataFormat::senuint32, 32},
    {"IEEE_INT32", DataFormat::ieee_int32, 32},
    {"IEEE_INT64", DataFormat::ieee_int64, 64},
    {"BOOL", DataFormat::boolean, 0},
}};

struct OpEntry {
  std::string_view name;
  OpEngine engine;
};

// formats.md C.2. Ops with an empty engine column are "backend".
constexpr OpEntry k_ops[] = {
    {"batchmatmul", OpEngine::pt},      {"batchmatmulfp8", OpEngine::pt},
    {"batchmatmulint8", OpEngine::pt},  {"batchmatmulint4", OpEngine::pt},
    {"conv2d", OpEngine::pt},           {"conv2dfp8", OpEngine::pt},
    {"conv2dint8", OpEngine::pt},       {"conv2dint4", OpEngine::pt},
    {"add", OpEngine::sfp},             {"sub", OpEngine::sfp},
    {"revsub", OpEngine::sfp},          {"mul", OpEngine::sfp},
    {"realdiv", OpEngine::sfp},         {"maximum", OpEngine::sfp},
    {"minimum", OpEngine::sfp},         {"equal", OpEngine::sfp},
    {"notequal", OpEngine::sfp},        {"greaterequal", OpEngine::sfp},
    {"lesserequal", OpEngine::sfp},     {"greaterthan", OpEngine::sfp},
    {"lesserthan", OpEngine::sfp},      {"biasadd", OpEngine::sfp},
    {"where3", OpEngine::sfp},          {"fnms", OpEngine::sfp},
    {"batchnormfwd", OpEngine::sfp},    {"layernormnorm", OpEngine::sfp},
    {"abs", OpEngine::sfp},             {"exp", OpEngine::sfp},
    {"fastexp", OpEngine::sfp},         {"fastsigmoid", OpEngine::sfp},
    {"gelufwd", OpEngine::sfp},         {"identity", OpEngine::sfp},
    {"leakyrelufwd", OpEngine::sfp},    {"log", OpEngine::sfp},
    {"mish", OpEngine::sfp},            {"neg", OpEngine::sfp},
    {"reciprocal", OpEngine::sfp},      {"relufwd", OpEngine::sfp},
    {"relu6fwd", OpEngine::sfp},        {"rsqrt", OpEngine::sfp},
    {"sigmoid", OpEngine::sfp},         {"silu", OpEngine::sfp},
    {"sqrt", OpEngine::sfp},            {"tanh", OpEngine::sfp},
    {"clip", OpEngine::sfp},            {"softplus", OpEngine::sfp},
    {"layernormscale", OpEngine::sfp},  {"sum", OpEngine::sfp},
    {"max", OpEngine::sfp},             {"min", OpEngine::sfp},
    {"mean", OpEngine::sfp},            {"absmax", OpEngine::sfp},
    {"exx2", OpEngine::sfp},            {"exx2_zeromean", OpEngine::sfp},
    {"sumnonstick", OpEngine::sfp},     {"maxnonstick", OpEngine::sfp},
    {"minnonstick", OpEngine::sfp},     {"meannonstick", OpEngine::sfp},
    {"absmaxnonstick", OpEngine::sfp},  {"quantscalepertoken", OpEngine::sfp},
    // Emitted by torch-spyre at its pin (torch.floor and torch.ceil as -floor(-x); torch.prod),
    // not listed in formats.md C.2.
    {"floor", OpEngine::sfp},           {"prodnonstick", OpEngine::sfp},
    {"quantscalepertokenfp8", OpEngine::sfp}, {"avgpoolfwd", OpEngine::sfp},
    {"avgpoolnmapfwd", OpEngine::sfp},  {"maxpoolfwd", OpEngine::sfp},
    {"depthwiseconv2dnative", OpEngine::backend}, {"topkvalue", OpEngine::sfp},
    {"topkindex", OpEngine::sfp},       {"maskbyindex", OpEngine::backend},
    {"csqint4wt", OpEngine::sfp},       {"csqint4", OpEngine::sfp},
    {"csqint8ch", OpEngine::sfp},       {"csqint8mb", OpEngine::sfp},
    {"csqint8wt", OpEngine::sfp},       {"qfp8ch", OpEngine::sfp},
    {"qfp8mb", OpEngine::sfp},          {"qfp8wt", OpEngine::sfp},
    {"fp32todl16", OpEngine::sfp},      {"dl16tofp32", OpEngine::sfp},
    {"fp8todl16", OpEngine::sfp},       {"ReStickifyOpHBM", OpEngine::backend},
    {"shuffle", OpEngine::backend},
};

}  // namespace

std::optional<DataFormat> parse_data_format(std::string_view name) {
  for (const auto& e : k_formats)
    if (e.name == name) return e.format;
  return std::nullopt;
}

std::string_view to_string(DataFormat f) {
  for (const auto& e : k_formats)
    if (e.format == f) return e.name;
  return "INVALID";
}

uint32_t data_format_bits(DataFormat f) {
  for (const auto& e : k_formats)
    if (e.format == f) return e.bits;
  return 0;
}

std::optional<OpEngine> op_func_engine(std::string_view op_func_name) {
  for (const auto& e : k_ops)
    if (e.name == op_func_name) return e.engine;
  return std::nullopt;
}

std::string quote(std::string_view s) {
  constexpr size_t k_max = 80;
  std::string out = "'";
  size_t n = 0;
  for (char c : s) {
    if (n++ == k_max) {
      out += "...";
      break;
    }
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
      static constexpr char k_hex[] = "0123456789abcdef";
      out += "\\x";
      out += k_hex[u >> 4];
      out += k_hex[u & 15];
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

}  // namespace vspyre::bundle
