// vspyre runtime shim: deeptools `spyrecode.h` -- the host-compute metadata (HCM) of a
// ComputeOnHost step (flex-api.md section 5.4).
//
// The real HCM schema is not public. vspyre defines its own (see runtime_shim/README.md):
//   {"vdci": {"inputSym_": [{"name": "arg0", "offset": 0}, ...]}, "senConstants": [...]}
// and the correction blob is the little-endian int64 address of input symbol i at byte
// `offset` (default 8*i).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flex/flex_api.h"

struct HcmInputSymbol {
  std::string name;
  uint64_t offset = 0;  // byte offset of the int64 DMVA in the correction blob
};

struct HcmVdci {
  bool present = false;  // true when the HCM carries one (non-empty) DCI
  std::vector<HcmInputSymbol> inputSym_;
  uint64_t output_size = 0;  // bytes of the correction blob (default 8 * inputSym_.size())
};

struct FLEX_API Hcm {
  HcmVdci vdci;
  std::vector<int64_t> senConstants;

  // Parses the JSON text of a ComputeOnHost "hcm" property. Throws std::runtime_error on bad
  // input (text containing "vdci field" when `vdci` is not an object).
  void importJsonStr(const std::string& json);
};
