// vspyre runtime shim: deeptools `sen_host_ops.h` -- the data conversion info (DCI) that
// describes one host<->device DMA (flex-api.md section 5.2).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "flex/flex_api.h"
#include "util/sendefs/sendefs.h"

// One loop nest. Sizes and strides are innermost FIRST; offsets and strides count elements of
// each side's own format.
struct data_conversion_stride_info {
  std::vector<int64_t> size_;
  std::vector<int64_t> stride_src_;
  std::vector<int64_t> stride_dst_;
  int64_t offset_src_ = 0;
  int64_t offset_dst_ = 0;
};

struct FLEX_API data_conversion_info {
  std::string dci_dsName_;
  bool isHostToSen_ = false;
  DataFormats dataformat_src_ = DataFormats::INVALID;
  DataFormats dataformat_dst_ = DataFormats::INVALID;
  std::vector<data_conversion_stride_info> dcsi_;
  std::vector<int64_t> input_shape_;
  std::vector<int64_t> output_shape_;

  // Debug dump as JSON.
  void exportJson(std::ostream& os) const;
};
