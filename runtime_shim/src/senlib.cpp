// senlib / deeptools helpers exported from libflex.so: the format table, DL16 constants, DCI
// debug dump, and vspyre's provisional HCM (program correction) format.
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "sim/formats/formats.h"
#include "spyrecode-host-functions/fast_process_hcm.h"
#include "spyrecode-host-functions/processSpyreCodeArtifacts.h"
#include "spyrecode-host-functions/sendataconvert/sen_data_convert.h"
#include "spyrecode-host-functions/sendataconvert/sen_host_ops.h"
#include "spyrecode-host-functions/spyrecode.h"
#include "util/sendefs/sendefs.h"

namespace fmt = vspyre::fmt;

static_assert(static_cast<int>(DataFormats::SEN169_FP16) == static_cast<int>(fmt::DataFormat::SEN169_FP16));
static_assert(static_cast<int>(DataFormats::IEEE_FP16) == static_cast<int>(fmt::DataFormat::IEEE_FP16));
static_assert(static_cast<int>(DataFormats::BFLOAT16) == static_cast<int>(fmt::DataFormat::BFLOAT16));
static_assert(static_cast<int>(DataFormats::SEN121_FP4) == static_cast<int>(fmt::DataFormat::SEN121_FP4));
static_assert(static_cast<int>(DataFormats::SENUINT2) == static_cast<int>(fmt::DataFormat::SENUINT2));
static_assert(static_cast<int>(DataFormats::IEEE_INT32) == static_cast<int>(fmt::DataFormat::IEEE_INT32));

// flex-api.md 5.1: elements per 128-byte stick. IEEE_INT32 is left out on purpose (torch-spyre
// special-cases it because "the DeepTools map is incomplete").
std::map<DataFormats, int> dataFormatToStickSize = {
    {DataFormats::SEN169_FP16, 64}, {DataFormats::IEEE_FP16, 64},  {DataFormats::BFLOAT16, 64},
    {DataFormats::SENINT16, 64},    {DataFormats::IEEE_FP32, 32},  {DataFormats::SENUINT32, 32},
    {DataFormats::SENINT8, 128},    {DataFormats::SEN143_FP8, 128}, {DataFormats::SEN152_FP8, 128},
    {DataFormats::SENINT4, 256},    {DataFormats::SENINT2, 512},   {DataFormats::SENUINT2, 512},
    {DataFormats::INVALID, 0},
};

namespace EnumsConversion {
std::string dataFormatsToString(DataFormats f) {
  return std::string(fmt::name(static_cast<fmt::DataFormat>(static_cast<int32_t>(f))));
}
}  // namespace EnumsConversion

void data_conversion_info::exportJson(std::ostream& os) const {
  nlohmann::json j;
  j["dci_dsName_"] = dci_dsName_;
  j["isHostToSen_"] = isHostToSen_;
  j["dataformat_src_"] = EnumsConversion::dataFormatsToString(dataformat_src_);
  j["dataformat_dst_"] = EnumsConversion::dataFormatsToString(dataformat_dst_);
  j["input_shape_"] = input_shape_;
  j["output_shape_"] = output_shape_;
  j["dcsi_"] = nlohmann::json::array();
  for (const auto& n : dcsi_)
    j["dcsi_"].push_back({{"size_", n.size_},
                          {"stride_src_", n.stride_src_},
                          {"stride_dst_", n.stride_dst_},
                          {"offset_src_", n.offset_src_},
                          {"offset_dst_", n.offset_dst_}});
  os << j.dump();
}

namespace deeptools {
uint32_t FloatToFp16Bin(float v) { return fmt::dl16_from_float(v); }
float Fp16BinToFloat(uint32_t bits) { return fmt::dl16_to_float(static_cast<uint16_t>(bits)); }
}  // namespace deeptools

// ---------------------------------------------------------------------------------------------
// HCM (provisional vspyre format; see spyrecode.h)
// ---------------------------------------------------------------------------------------------

void Hcm::importJsonStr(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("Hcm::importJsonStr: invalid JSON: ") + e.what());
  }
  if (!j.is_object()) throw std::runtime_error("Hcm::importJsonStr: expected a JSON object");
  Hcm out;
  if (j.contains("vdci")) {
    const auto& v = j["vdci"];
    if (!v.is_object())
      throw std::runtime_error("Hcm::importJsonStr: invalid vdci field (expected an object)");
    out.vdci.present = !v.empty();
    if (v.contains("inputSym_")) {
      const auto& syms = v["inputSym_"];
      if (!syms.is_array())
        throw std::runtime_error("Hcm::importJsonStr: invalid vdci field (inputSym_ must be an array)");
      for (size_t i = 0; i < syms.size(); ++i) {
        HcmInputSymbol s;
        s.offset = 8 * i;
        if (syms[i].is_string()) {
          s.name = syms[i].get<std::string>();
        } else if (syms[i].is_object()) {
          s.name = syms[i].value("name", std::string());
          if (syms[i].contains("offset")) s.offset = syms[i]["offset"].get<uint64_t>();
        } else {
          throw std::runtime_error("Hcm::importJsonStr: invalid vdci field (bad inputSym_ entry)");
        }
        out.vdci.output_size = std::max<uint64_t>(out.vdci.output_size, s.offset + 8);
        out.vdci.inputSym_.push_back(std::move(s));
      }
    }
    if (v.contains("output_size")) out.vdci.output_size = v["output_size"].get<uint64_t>();
  }
  if (j.contains("senConstants")) {
    if (!j["senConstants"].is_array())
      throw std::runtime_error("Hcm::importJsonStr: senConstants must be an array");
    for (const auto& c : j["senConstants"])
      if (c.is_number()) out.senConstants.push_back(c.get<int64_t>());
  }
  *this = std::move(out);
}

namespace deeptools {
namespace {
void write_blob(const Hcm& hcm, void* out, const int64_t* values) {
  if (!hcm.vdci.present)
    throw std::runtime_error("processComputeOnHostCommand: Expect one DCI in the HCM, found none");
  if (!out) throw std::runtime_error("processComputeOnHostCommand: null output buffer");
  auto* o = static_cast<uint8_t*>(out);
  for (size_t i = 0; i < hcm.vdci.inputSym_.size(); ++i) {
    const int64_t v = values ? values[i] : 0;
    std::memcpy(o + hcm.vdci.inputSym_[i].offset, &v, sizeof(v));
  }
}
}  // namespace

void processComputeOnHostCommand(Hcm& hcm, void* out, const void* input) {
  write_blob(hcm, out, static_cast<const int64_t*>(input));
}
void processComputeOnHostCommand(Hcm& hcm, void* out, std::nullptr_t) {
  write_blob(hcm, out, nullptr);
}
void processComputeOnHostCommand(Hcm& hcm, void* out, const std::vector<int64_t>* addresses) {
  if (addresses && addresses->size() != hcm.vdci.inputSym_.size())
    throw std::runtime_error("processComputeOnHostCommand: " + std::to_string(addresses->size()) +
                             " addresses for " + std::to_string(hcm.vdci.inputSym_.size()) +
                             " input symbols");
  write_blob(hcm, out, addresses ? addresses->data() : nullptr);
}

bool buildFastHcmPatchPlan(FastHcmPatchPlan& plan, const Hcm& hcm) {
  plan = FastHcmPatchPlan{};
  if (!hcm.vdci.present || hcm.vdci.output_size > UINT32_MAX - 1) return false;
  plan.output_size = static_cast<uint32_t>(hcm.vdci.output_size);
  plan.num_input_symbols = hcm.vdci.inputSym_.size();
  for (size_t i = 0; i < hcm.vdci.inputSym_.size(); ++i)
    plan.patches.push_back({hcm.vdci.inputSym_[i].offset, static_cast<uint32_t>(i)});
  plan.valid = true;
  return true;
}

bool processComputeOnHostCommandFast(FastHcmPatchPlan& plan, Hcm& hcm, void* out,
                                     const int64_t* addrs, size_t n) {
  if (!plan.valid || plan.num_input_symbols != n || !out) {
    std::vector<int64_t> v(addrs, addrs + n);
    processComputeOnHostCommand(hcm, out, &v);
    return false;
  }
  auto* o = static_cast<uint8_t*>(out);
  for (const auto& p : plan.patches) std::memcpy(o + p.output_offset, &addrs[p.input_index], 8);
  return true;
}
}  // namespace deeptools
