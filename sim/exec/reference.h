// A double-precision logical reference for a bundle: the same program order, but every op
// computed in double on logical (host-order) tensors with no device rounding, no stick layout and
// no vspyre::ops. Kernel inputs are taken as the device holds them (already in the device
// format), so the comparison measures what the card's arithmetic and rounding add. Only the ops
// whose reference is simple are covered (elementwise unary/binary, reductions, matmul, copies);
// a kernel output that depends on anything else is reported as not checked.
//
// Alongside each value the reference carries a forward error bound (RefTensor::m): a magnitude
// such that the device's accumulated rounding error in that element is at most about
// depth x eps(format) x m. It is propagated to first order from the kernel inputs (exact, error 0)
// through every op, each op adding one rounding of its own result, so a chain that cancels (the
// intermediate a+b of (a+b)+c is rounded at |a+b| ~ 1, then c brings the result down to ~0.01) is
// judged against the magnitudes that actually got rounded, not against the small final |r|.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sim/exec/exec.h"

namespace vspyre::exec {

struct RefTensor {
  std::vector<std::string> dims;  // outermost first
  std::vector<int64_t> size;
  std::vector<double> v;          // row-major over size
  std::vector<uint8_t> have;      // empty: every element computed; else 1 where computed
  int depth = 0;                  // device roundings on the longest path from the inputs
  // Forward error bound, same layout as v; empty means m = |v|. The device value of element i
  // is expected within depth x eps(format) x m[i] of v[i] (eps: format_epsilon, twice the
  // largest relative error of one rounding, so the bound has a factor 2 to spare). Equivalently
  // E = depth x m is the error budget in units of eps: 0 for a kernel input (depth 0), and each op
  // makes E_out = (first-order propagation of its operands' E) + |result| (its own rounding).
  // Hence a single op on kernel inputs has m = |v| exactly, and m never hides a wrong layout:
  // compare() uses max(m, |v|).
  std::vector<double> m;
  fmt::DataFormat format = fmt::DataFormat::INVALID;  // the device format it is rounded to
};

struct RefOptions {
  // A matmul with more multiply-accumulates than this computes only a deterministic sample of
  // its output elements (about `sample_elements` of them).
  uint64_t full_macs_limit = 1ull << 28;
  uint64_t sample_elements = 4096;
};

struct RefResult {
  // By position in the `kernel` vector given to reference() (a kernel tensor: an argument or a
  // view of one).
  std::map<size_t, RefTensor> outputs;
  std::map<size_t, std::string> unavailable;  // why not computed
};

// Evaluates the bundle. `mem` holds the kernel inputs (written before exec::run); it is only read.
RefResult reference(const std::vector<bundle::ResolvedExecution>& plan,
                    const std::vector<KernelTensor>& kernel, Memory& mem,
                    const RefOptions& opt = {});

struct Comparison {
  uint64_t compared = 0;
  double max_abs = 0;      // max |device - reference|
  double max_rel = 0;      // max |device - reference| / |reference| over nonzero references
  // max |d - r| / max(m, |r|) (at least the format's floor under its tiny, reference.cpp), m the reference's error bound
  // (RefTensor::m): the error relative to the magnitudes that got rounded on the way. What the
  // tolerance bounds. Where the reference is NaN the device must give NaN or, in DL16, the merged
  // NaN/inf code; beyond the format's largest finite value (or infinite), its largest value or
  // an infinity of the same sign; anything else gives inf.
  double norm_err = 0;
  double tolerance = 0;    // depth x one unit in the last place of the format (relative)
  bool pass = false;
};
// Compares device values (host order, as read_tensor gives them) with a reference.
Comparison compare(std::span<const float> device, const RefTensor& ref);

// The reference and its comparison with the device's results in one go, a chunk of the tensors'
// device images at a time, holding no tensor whole: for `vspyre run` with data on kernels of
// hundreds of MB, where reference() and read_tensor() would hold several GB of doubles and
// floats (a 16384x16384 copy: 4.7 GB, 20 s of its 21 s). A plan qualifies when
//  - every op is elementwise (ops::is_elementwise) with one output, and no SDSC masks coordinates;
//  - every tensor but the broadcast operands has one shape and one stick layout, whose image
//    has no padding (element k of every image is then the same logical coordinate), and none is
//    a tile of a larger one;
//  - each tensor read is a kernel input or written by an earlier op in the same view; a broadcast
//    operand (the same rank, size 1 where it differs: a row, a column, one element) is a kernel
//    input, read whole and expanded along the images (fmt::stride_map, as the executor does);
//  - no HBM tensor the plan writes overlaps a kernel input it reads, so the inputs are still in
//    `mem` after exec::run;
//  - every kernel output is in that shape and layout.
// Each op is computed as reference() computes it (the same functions, error bounds and
// roundings) on the chunk's elements in image order; the comparison's maxima are those of
// compare() on the whole tensors. Call it after exec::run. nullopt: the plan does not qualify (use reference()).
struct StreamedCheck {
  std::map<size_t, Comparison> outputs;       // by position in `kernel`, as RefResult::outputs
  std::map<size_t, int> depth;                // the reference's roundings of each (RefTensor::depth)
  std::map<size_t, std::string> unavailable;  // why not computed
};
bool can_check_streamed(const std::vector<bundle::ResolvedExecution>& plan,
                        const std::vector<KernelTensor>& kernel);
std::optional<StreamedCheck> check_streamed(const std::vector<bundle::ResolvedExecution>& plan,
                                            const std::vector<KernelTensor>& kernel, Memory& mem,
                                            const RefOptions& opt = {});
// Relative precision of one rounding into `f` (2^-fraction bits); 0 for formats without one.
double format_epsilon(fmt::DataFormat f);

}  // namespace vspyre::exec
