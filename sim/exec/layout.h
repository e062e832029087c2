// Internal: how one labeled tensor of one SDSC maps onto device memory (formats.md B.2, B.5, B.6).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/exec/exec.h"
#include "sim/ops/ops.h"

namespace vspyre::exec::detail {

struct CoreSlice {
  uint32_t core = 0;
  uint64_t start = 0;           // HBM address or LX byte offset of the slice origin's stick
  std::vector<int64_t> origin;  // per layout dim (innermost first), in units (sticks for the
  std::vector<int64_t> units;   // stick dim, elements otherwise): slice origin and extent
};

struct MappedTensor {
  TensorInfo info;
  std::vector<std::string> layout;     // layoutDimOrder_, innermost first
  size_t stick_pos = 0;                // position of the stick dim in `layout`
  std::vector<int64_t> full_units;     // per layout dim: units of the whole tensor
  std::vector<int64_t> full_stride;    // bytes per unit step in the whole tensor (HBM image)
  std::vector<int64_t> slice_units;    // LX: units of one core's slice (steady state)
  std::vector<int64_t> slice_stride;   // LX: bytes per unit step inside a core's slice
  std::vector<CoreSlice> cores;
  // The host axis holding the two lanes of an EXX2 statistics stick (exx2_lanes), -1 otherwise.
  int exx2_axis = -1;
};

// True when labeled tensor `lds` of `s` is a LayerNorm statistics stick in torch-spyre's EXX2
// arrangement: the output of `exx2` / `exx2_zeromean`, the input of `layernormscale`, or the
// second input of `layernormnorm`, with `scale_` -2 on its stick dim. Such a stick holds two
// values per row, not one: lane 0 E[x] (0 with a zero mean), lane 1 E[x^2]. [inf] torch-spyre's
// ElementArrangement::EXX2 ("two values per stick") says there are two; which lane holds which
// is not public, and only these three ops read or write them.
bool exx2_lanes(const bundle::Sdsc& s, uint32_t lds);
// Which input of op `op` holds EXX2 statistics: 0 for layernormscale, 1 for layernormnorm, -1
// for any other op (exx2 and exx2_zeromean write them).
inline int exx2_stats_input(std::string_view op) {
  return op == "layernormscale" ? 0 : op == "layernormnorm" ? 1 : -1;
}

// Calls fn(i) for the row-major index i (over `size`, axes named by `dims`) of every element at
// a coordinate the SDSC's coordinateMasking_ covers; a dim of size 1 here (reduced, broadcast)
// is not masked. Returns how many calls it made. The executor and the reference both use it.
template <class Fn>
int64_t for_each_masked(const bundle::Sdsc& s, const std::vector<std::string>& dims,
                        const std::vector<int64_t>& size, Fn&& fn) {
  int64_t calls = 0;
  for (const auto& [dim, ranges] : s.coordinate_masking) {
    size_t k = 0;
    while (k < dims.size() && dims[k] != dim) ++k;
    if (k == dims.size() || size[k] <= 1) continue;
    int64_t inner = 1, outer = 1;
    for (size_t j = 0; j < size.size(); ++j)
      if (j < k) outer *= size[j];
      else if (j > k) inner *= size[j];
    for (const auto& [start, len] : ranges)
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t c = std::max<int64_t>(start, 0); c < std::min(start + len, size[k]); ++c)
          for (int64_t e = 0; e < inner; ++e, ++calls) fn((o * size[k] + c) * inner + e);
  }
  return calls;
}

// True when the layout's sticks are its last device dim (every layout but a 2-D stick's): the
// streamed paths walk images a whole stick at a time.
inline bool one_dim_stick(const fmt::StickLayout& l) {
  return !l.device_size.empty() && l.device_size.back() == fmt::elements_per_stick(l.format);
}

// Throws ExecError naming the SDSC file and the field.
MappedTensor map_tensor(const bundle::ResolvedExecution& r, uint32_t lds_idx);

// Calls fn(image_offset, slice_offset, bytes) for each contiguous run of core slice `cs`:
// image_offset into the full-tensor image; slice_offset from cs.start (HBM: full-tensor strides,
// LX: slice strides).
template <class Fn>
void for_each_run(const MappedTensor& t, const CoreSlice& cs, Fn&& fn) {
  const bool lx = t.info.placement == bundle::Placement::lx;
  const auto& rel_stride = lx ? t.slice_stride : t.full_stride;
  const auto& rel_units = lx ? t.slice_units : t.full_units;
  const size_t n = t.layout.size();
  // Merge inner dims that the slice covers whole in both the image and its own addressing.
  size_t inner = 1;
  int64_t run_units = cs.units[0];
  while (inner < n && cs.units[inner - 1] == t.full_units[inner - 1] &&
         cs.units[inner - 1] == rel_units[inner - 1]) {
    run_units *= cs.units[inner];
    ++inner;
  }
  const uint64_t run_bytes = uint64_t(run_units) * uint64_t(t.full_stride[0]);
  int64_t image_base = 0;
  for (size_t d = 0; d < n; ++d) image_base += cs.origin[d] * t.full_stride[d];
  std::vector<int64_t> k(n, 0);
  for (;;) {
    int64_t io = image_base, so = 0;
    for (size_t d = inner; d < n; ++d) {
      io += k[d] * t.full_stride[d];
      so += k[d] * rel_stride[d];
    }
    fn(uint64_t(io), uint64_t(so), run_bytes);
    size_t d = inner;
    for (; d < n; ++d) {
      if (++k[d] < cs.units[d]) break;
      k[d] = 0;
    }
    if (d == n) break;
  }
}

// Image elements [e0, e0 + count) of a tensor laid out with device dims `dsize` (the last one
// the eps lanes of a stick; e0 and count whole sticks), a stick at a time: fn(e, base) with e the
// stick's first element counted from e0 and base the sum, over the stick's other device
// coordinates, of coordinate x step[dim]. With `step` from fmt::stride_map for an operand
// broadcast over the layout, base is that operand's host element at the stick's lane 0. The
// executor's streamed path and the reference's streamed check expand broadcast operands so.
template <class Fn>
void for_each_stick_base(const std::vector<int64_t>& dsize, const std::vector<int64_t>& step, int64_t eps,
                         int64_t e0, int64_t count, Fn&& fn) {
  const size_t nd = dsize.size();
  std::vector<int64_t> idx(nd, 0);
  int64_t rest = e0 / eps;
  for (size_t k = nd - 1; k-- > 0;) {
    idx[k] = rest % dsize[k];
    rest /= dsize[k];
  }
  for (int64_t e = 0; e < count; e += eps) {
    int64_t base = 0;
    for (size_t k = 0; k + 1 < nd; ++k) base += idx[k] * step[k];
    fn(e, base);
    for (size_t k = nd - 1; k-- > 0;) {
      if (++idx[k] < dsize[k]) break;
      idx[k] = 0;
    }
  }
}

// The host element step of a step along each device dim of `layout` (the image of a tensor of
// logical shape `size`) for an operand of logical shape `operand`, of the same rank and of size 1
// where it is broadcast: its contiguous strides, 0 along the broadcast dims, through
// fmt::stride_map, with -1 (a dim of one unit) read as 0. With for_each_stick_base it gives the
// operand's element at each stick of the image.
std::vector<int64_t> broadcast_steps(const fmt::StickLayout& layout, const std::vector<int64_t>& size,
                                     const std::vector<int64_t>& operand);

// A gather's or scatter's value tensor view (bundle::IndirectAccess) against its memory: row r
// of the view's image (the bytes of its inner, direct dims; r counts the indirect dims in image
// order) is row index[r] of the value tensor, at base + index[r] x row_bytes.
struct IndirectRows {
  uint64_t row_bytes = 0;
  std::vector<uint64_t> index;  // per view row: the value tensor's row
};
// For each row r of the value view: the host-order position, in the index tensor `index_info`,
// of the element that picks it. Throws ExecError naming the SDSC when the view reaches past the
// index tensor (their dims disagree).
std::vector<int64_t> indirect_index_positions(const bundle::IndirectAccess& ia, const MappedTensor& value,
                                              const TensorInfo& index_info);
// `index_host`: the index tensor's host-order device-format elements (`index_info`). Throws
// ExecError naming the SDSC and the tensor when an index is at or past `bound` (0: unchecked).
IndirectRows indirect_rows(const bundle::IndirectAccess& ia, const MappedTensor& value, const TensorInfo& index_info,
                           const std::vector<uint8_t>& index_host, uint64_t bound);
// The value tensor's row count for indirect access `ia` of plan[pos]: the largest image an
// earlier execution reads or writes, not through an index, at the value tensor's address (the
// tensor the gather reads: torch-spyre copies the source there first), over the view's row
// bytes. 0 when no earlier execution does.
uint64_t value_rows(const std::vector<bundle::ResolvedExecution>& plan, size_t pos, const bundle::IndirectAccess& ia);
// Bytes of one row of the value view `value` (the full stride of its innermost indirect dim).
uint64_t indirect_row_bytes(const bundle::IndirectAccess& ia, const MappedTensor& value);

// A top-k's axes from its shapes: the input scans `scan` (more than one element there, one in
// the output) and the output holds k along `kax` (one element in the input); or one axis does
// both (the input longer there). False when the shapes differ otherwise.
bool topk_axes(const std::vector<int64_t>& in, const std::vector<int64_t>& out, int& scan, int& kax);
// A top-k whose input scans one axis (size > 1 in the input, 1 in the output) and whose output
// holds k along another (1 in the input): `out` becomes a view of the same data with the k axis in
// the scanned axis's place, `scan` that axis. False (nothing changed) when the shapes are not so.
bool topk_view(const ops::TensorView& in, ops::TensorView& out, int& scan);

bool is_reduction(std::string_view op);  // the output is listed as an input (accumulator)
bool is_matmul(std::string_view op);
bool is_mappable(std::string_view op);   // shapes follow from N_ (not conv/pool/indirect)
// A convolution over the SDSC's two windows, by dim name: depthwise (torch-spyre's
// depthwiseconv2dnative: input [.., H, W, C], weight [KH, KW, C], output [.., OH, OW, C]) or full
// (its direct conv2d: input [.., H, W, Cin], weight [Cout, KH, KW, Cin], output [.., OH, OW,
// Cout]): views of the host tensors as NCHW, OIHW (depthwise: one input channel per group) and
// NOHW for vspyre::ops::conv2d. False when the dims do not fit that shape.
bool conv_views(const bundle::Sdsc& s, const ops::TensorView& x, const TensorInfo& xi, const ops::TensorView& w,
                const TensorInfo& wi, const ops::TensorView& o, const TensorInfo& oi, ops::TensorView& xv,
                ops::TensorView& wv, ops::TensorView& ov);
// The windows' stride and padding as conv2d takes them (ExecError on uneven padding or dilation).
void conv_attrs(const bundle::Sdsc& s, ops::Attrs& a);
// 2-D pooling: mappable when the SDSC gives its two windows (N_.paddingSizes_, Sdsc::windows).
bool is_pool(std::string_view op);
// The pooling parameters of `s`'s two windows (the first is H) on input `in`: window, stride,
// padding and the input's host axes of the two windowed dims. Throws ExecError on an uneven
// padding (padFront_ != padBack_), which vspyre::ops::pool2d does not take.
void pool_attrs(const bundle::Sdsc& s, const TensorInfo& in, ops::Attrs& a);

// The fp16 <-> fp32 conversions' staggered element order (torch-spyre's element arrangements
// FP32_TO_DL16 and DL16_TO_FP32, `torch_spyre/_inductor/customops.py`, stagger_to_standard_ea):
// the SFP packs two 32-lane fp32 sticks into one 64-lane 16-bit stick four lanes at a time, and
// unpacks one 16-bit stick into two fp32 sticks the same way. Along the stick axis, in groups of
// 64 elements, fp32todl16's output position 8k + 4s + w (s < 2, w < 4) holds input element
// 32s + 4k + w, and dl16tofp32's output position 32s + 4k + w holds input element 8k + 4s + w:
// each undoes the other, so a round trip gives the standard order back.
//
// The host axis along which `op` (from `in` to `out`) staggers its output, or -1 when it does not
// (any op but fp32todl16 and dl16tofp32). Throws ExecError naming the SDSC when the op staggers but
// the tensors do not fit the model: the stick axes differ, or its size is not a multiple of 64
// (lanes past the size would carry data the host-order executor does not hold).
int stagger_axis(const bundle::Sdsc& s, std::string_view op, const TensorInfo& in, const TensorInfo& out);
// Element j of a 64-group of `op`'s staggered output comes from element stagger_source(op, j).
int64_t stagger_source(std::string_view op, int64_t j);
// Reorders host-order elements of `elem_bytes` bytes each, shaped `size`, along `axis` as `op`
// staggers its output: new[.., g + j, ..] = old[.., g + stagger_source(op, j), ..].
void stagger(std::string_view op, uint8_t* data, size_t elem_bytes, const std::vector<int64_t>& size, int axis);

}  // namespace vspyre::exec::detail
