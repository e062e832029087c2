// SDSC JSON (sdsc_<N>.json): the parts of one SuperDSC a simulator needs (formats.md B), loaded
// and validated against the format and the card. The raw JSON stays available for later lowering.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/bundle/common.h"

namespace vspyre::bundle {

enum class Placement : uint8_t { hbm, lx };

// One dimension name with a size, in file order. Names are bare ("mb"), without the
// trailing underscore N_/ss_/el_ use.
using DimSizes = std::vector<std::pair<std::string, int64_t>>;

struct LayoutInfo {  // primaryDsInfo_[role]
  std::vector<std::string> layout_dim_order;  // innermost first (B.5)
  std::vector<std::string> stick_dim_order;
  std::vector<int64_t> stick_size;  // elements of each stick dim in one stick
};

struct StartAddress {
  bool symbolic = false;
  int64_t value = 0;  // symbol id (< 0) when symbolic, else a literal byte address/offset
};

struct LabeledDs {  // labeledDs_[i]
  uint32_t idx = 0;
  std::string name;     // "Tensor0"
  std::string ds_type;  // OUTPUT, INPUT, KERNEL, KERNEL_IDX, ...
  std::vector<int32_t> scale;  // per layout dim: 1 normal, -1 reduced/broadcast, -2 reduced stick
  double word_length = 0;      // bytes per element as written
  DataFormat format = DataFormat::sen169_fp16;
  bool mem_hbm = false;  // memOrg_.hbm.isPresent
  bool mem_lx = false;   // memOrg_.lx.isPresent
};

struct Allocation {  // a scheduleTree_ node with nodeType_ "allocate"
  uint32_t node_index = 0;  // position in scheduleTree_
  std::string name;         // "allocate-Tensor0_hbm"
  uint32_t lds_idx = 0;
  Placement placement = Placement::hbm;
  bool symbolic = false;  // isStartAddrSymbolic_ (1 or true)
  std::vector<std::string> layout_dim_order;  // authoritative for this allocation
  std::vector<int64_t> max_dim_sizes;
  std::string indirect_alloc_type;  // "no_indirection" unless gather/paged
  // Indirect access (a gather or scatter, formats.md B.7): the other allocation of the pair
  // (relatedIndirectAccessAlloc_, by name_), and an index tensor's indexTensorType_.
  std::string related_indirect;
  std::string index_tensor_type;
  // padding_: the dims along which this tensor is a windowed op's input (Sdsc::windows), its
  // extent there the window's totalSize_ rather than N_.
  std::set<std::string> windowed;
  // backGapCore_: layout dim -> trailing gap in elements, the allocation's extent along that dim
  // beyond the SDSC's N_ (HBM: of the whole tensor, key "-1"; LX: of each core's slice, one key
  // per core, all equal). torch-spyre writes it for a tile of a larger tensor and a padded dim.
  std::map<std::string, int64_t> back_gap;
  // Start address of each core's slice for corelet 0, time 0, indexed by core id
  // (size = max used core id + 1; unused ids hold {false, 0}). HBM: absolute address or symbol;
  // LX: byte offset inside that core's LX.
  std::vector<StartAddress> start;
  // Derived from the layout, the labeled tensor and dataStageParam_ (max of ss_ and el_):
  uint64_t bytes_per_core = 0;  // stick-tiled footprint of one core's slice
  uint64_t span_per_core = 0;   // HBM: byte span of that slice inside the full tensor; LX: = bytes
  uint64_t tensor_bytes = 0;    // stick-tiled size of the whole tensor (full N_)
  std::string json_path;        // for messages
  // coordinates_ (B.6): per layout dimension, the coordinate folds from outer to inner, and the
  // per-state slice ownership (coreIdToWkSlice_; filled only for a shuffle's two states).
  struct Fold {
    int64_t alpha = 0;
    int64_t factor = 1;
    std::string label;  // core_fold, corelet_fold, row_fold, elem_arr_1, elem_arr_0
  };
  std::map<std::string, std::vector<Fold>> coord_folds;
  std::map<uint32_t, std::map<std::string, int64_t>> wk_slice;
};

struct ComputeOp {  // computeOp_[i]
  ExUnit ex_unit = ExUnit::sfp;
  std::string op_func_name;
  DataFormat data_format = DataFormat::sen169_fp16;  // attributes_.dataFormat_
  std::string fidelity;
  std::string location;
  std::vector<uint32_t> inputs;   // labeledDs_ indices ("Tensor<i>-idx<k>" -> k)
  std::vector<uint32_t> outputs;
  std::vector<uint32_t> index_inputs;  // indirectAccessIndexLabeledDs
};

struct Constant {  // constantInfo_[key]
  std::string key;
  std::string name;  // "scaling_factor"
  DataFormat format = DataFormat::sen169_fp16;
  std::vector<uint64_t> raw;  // encodings from the first data_ entry, in dataFormat_
};

struct ScheduleStep {  // coreIdToDscSchedule[core][i]
  int32_t data_dsc = -1;
  int32_t dl_dsc = -1;
  bool before_sync = false;
  bool after_sync = false;
};

// A value tensor the SDSC reads (a gather) or writes (a scatter) through an index tensor, as
// torch-spyre writes them for x[i], index_select, embedding and index_put: the value tensor's
// view has the op's dims, and along `dims` (maxDimSizes_ 1: the index tensor's dims, the
// outermost of the view's layout) the row it reaches is not the iteration coordinate but the
// index tensor's element there. Row r of the view (in the layout's order of `dims`) is the
// value tensor's row index[r], each row being the view's inner dims (the real tensor's row
// stride). Validated by the loader.
struct IndirectAccess {
  uint32_t value_lds = 0;
  uint32_t index_lds = 0;
  std::vector<std::string> dims;  // the value view's layout dims the index replaces, innermost first
  // The value tensor's layout as memory holds it: its direct dims in their layoutDimOrder_ order
  // (innermost first), then the indexed dims, outermost. The card addresses the indexed dims at
  // device position 0 (torch-spyre's tests: "Indirect access addresses the indexed dimension
  // through the *device* layout and requires it at device position 0"; torch-spyre copies a
  // tensor into such a layout first), while the compiler may list an indexed dim of one index
  // anywhere (a size-1 dim has no stride to sort it by): an index_copy_ of one row lists it
  // innermost, with the other dims' sticks outside it.
  std::vector<std::string> memory_order(const std::vector<std::string>& layout) const {
    std::vector<std::string> out;
    for (const auto& d : layout)
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) out.push_back(d);
    for (const auto& d : layout)
      if (std::find(dims.begin(), dims.end(), d) != dims.end()) out.push_back(d);
    return out;
  }
};

// N_.paddingSizes_[dim] (a pooling window; torch-spyre's avgpoolfwd): output positions along
// `dim` read the input at position * stride - pad_front + k * dilation for k over the window dim
// `window_dim`, the input being `total` long along `dim`.
struct Window {
  std::string dim, window_dim;
  int64_t total = 0, stride = 1, dilation = 1, pad_front = 0, pad_back = 0;
  // The input positions `out` consecutive outputs read, for a window of `window` positions.
  int64_t span(int64_t out, int64_t window) const {
    return out <= 0 ? 0 : (out - 1) * stride + (window - 1) * dilation + 1;
  }
};

struct Sdsc {
  std::string file;      // name used in messages
  std::string key;       // envelope key "5_realdiv"
  int64_t index = 0;     // the <N> of the key
  std::string dsc_name;  // dscs_[0] key ("realdiv"); empty when there is no compute DSC
  uint32_t num_cores = 0;
  std::vector<uint32_t> core_ids;                   // ascending
  std::vector<std::pair<std::string, uint32_t>> slices_per_dim;  // numWkSlicesPerDim_, file order
  std::map<uint32_t, std::map<std::string, uint32_t>> core_slice;  // coreIdToWkSlice_
  std::map<uint32_t, uint32_t> core_dsc;                          // coreIdToDsc_
  std::map<uint32_t, std::vector<ScheduleStep>> core_schedule;    // coreIdToDscSchedule
  uint32_t num_data_dscs = 0;  // entries of dataOpdscs_ + datadscs_ (not interpreted)
  DimSizes n;                  // N_: full size of each dimension
  DimSizes ss;                 // dataStageParam_["0"].ss_: per-core steady-state size
  DimSizes el;                 // dataStageParam_["0"].el_: per-core epilogue size
  std::map<std::string, LayoutInfo> primary_ds_info;  // role -> layout class
  std::vector<Allocation> allocations;
  std::vector<LabeledDs> labeled_ds;  // index == ldsIdx_
  std::vector<Constant> constants;
  // coordinateMasking_: dim -> [start, start + length) ranges of that dim whose input elements
  // the ops read as the constant maskingConstId_ names (torch-spyre: the padding lanes of a
  // padded stick dim, as the reduction's identity or exp's -inf). Empty: no masking.
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> coordinate_masking;
  int masking_constant = -1;  // index in `constants` of the mask value; >= 0 iff masking
  std::vector<ComputeOp> compute_ops;
  std::vector<IndirectAccess> indirect;  // one per value tensor read or written through an index
  std::vector<Window> windows;           // N_.paddingSizes_, in file order
  std::map<std::string, std::vector<int64_t>> dim_symbols;  // dimToSymbolMapping_ ids per dim
  std::vector<int64_t> symbols;  // every symbol id the SDSC references, ascending, unique
  nlohmann::ordered_json raw;    // the whole file

  // Lookups; return -1 / nullptr if absent.
  int64_t n_of(std::string_view dim) const;
  int64_t ss_of(std::string_view dim) const;
  int64_t el_of(std::string_view dim) const;
  uint32_t slices_of(std::string_view dim) const;  // 1 if the dim is not divided
  const Allocation* allocation(uint32_t lds_idx, Placement p) const;
  const LayoutInfo* layout_for(const LabeledDs& ds) const;  // primary_ds_info[ds_type]
  const IndirectAccess* indirect_of(uint32_t value_lds) const;  // nullptr: a plain tensor
  const Window* window_of(std::string_view dim) const;          // nullptr: no window over dim
  bool is_index_tensor(uint32_t lds) const;
  // ds.scale_ entry of `dim`. scale_ follows the primaryDsInfo_ layout of the tensor's role, which
  // an allocation may order differently (a broadcast operand laid out [out, mb] under a primary
  // [mb, out]); 1 when the dim is not in that layout.
  int32_t scale_of(const LabeledDs& ds, std::string_view dim) const;
  // A ReStickifyOpHBM pads its iteration space so that both tensors' stick dims are whole sticks:
  // a dim that is one tensor's stick dim and the other's non-stick dim then iterates past the
  // tensors' extent, and torch-spyre (superdsc.py) writes the non-stick tensor's backGapCore_ on
  // it the other way round (padded iteration extent minus the tensor's). Both tensors are that
  // many elements short of N_ along the dim: dim -> shortfall. Only gaps that fit padding count
  // (see the definition); empty for any other SDSC.
  std::map<std::string, int64_t> restickify_pad() const;
};

// Parses and validates one SDSC. `file_name` labels error messages.
Sdsc parse_sdsc_json(std::string_view text, std::string_view file_name,
                     const CardLimits& limits = {});

}  // namespace vspyre::bundle
