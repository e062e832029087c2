// Operation semantics with data on (issue 4): the SuperDSC opFuncs of formats.md C.2 computed on
// host buffers of device-format elements. Every op loads its operands to fp32 (exact for DL16,
// fp8, fp16, bf16 and small ints), computes in fp32 as the SFP does, and rounds each result once
// into the output's format with vspyre::fmt's conversion rules. Matmul runs through OpenBLAS
// sgemm (float formats) or an exact integer path (int8/int4). Tensors are logical (host order,
// strided) views: the stick layout is vspyre::fmt's business, not this library's.
//
// Errors (shape mismatch, unsupported format, unknown op) throw std::invalid_argument; an index
// outside its dimension (gather/scatter) throws std::out_of_range.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/formats/formats.h"

namespace vspyre::ops {

using fmt::DataFormat;

// A strided view of device-format elements. `stride` and `offset` are in elements of `format`
// (sub-byte formats count elements, not bytes); an empty `stride` means contiguous row-major.
// Inputs are only read; the pointer is non-const so one type serves inputs and outputs.
struct TensorView {
  void* data = nullptr;
  DataFormat format = DataFormat::INVALID;
  std::vector<int64_t> size;
  std::vector<int64_t> stride;
  int64_t offset = 0;

  int rank() const { return int(size.size()); }
  int64_t numel() const;
  // Strides with the empty-means-contiguous rule applied.
  std::vector<int64_t> strides() const;
};

// A contiguous view.
TensorView view(void* data, DataFormat f, std::vector<int64_t> size);
TensorView view(const void* data, DataFormat f, std::vector<int64_t> size);

// ---------------------------------------------------------------------------------------------
// Operation parameters. `consts` holds the SDSC constants by their constantInfo_ names, already
// decoded to real values (clipMin, clipMax, eps, softplusBeta, softplusThresh, scaling_factor,
// exx2scale, nmap, mulConst, scaleact, shiftact, ...). Absent constants take the defaults the
// individual ops document.
// ---------------------------------------------------------------------------------------------
struct Attrs {
  std::map<std::string, double, std::less<>> consts;
  // Reduction / scan / gather / scatter dimension (negative counts from the end). When absent it
  // is inferred from the shapes (the dim whose size differs between input and output; for the
  // stick reductions with nothing to tell, the last dim).
  std::optional<int> dim;
  // gelufwd: false = erf form (torch's default), true = tanh approximation.
  bool gelu_tanh = false;
  // 2-D pooling and conv: window, stride (0 = window) and zero padding on the two spatial dims.
  // A zero window is inferred as in/out (pooling only).
  int64_t kernel_h = 0, kernel_w = 0, stride_h = 0, stride_w = 0, pad_h = 0, pad_w = 0;
  // Pooling: the two spatial dims of the input (default: the last two). Conv is NCHW x OIHW.
  int pool_dim_h = -2, pool_dim_w = -1;
  // Conv groups (depthwiseconv2dnative sets it to the channel count).
  int64_t groups = 1;
  // Rounding/saturation rules for every store into a device format.
  fmt::ConvertRules rules{};

  double get(std::string_view name, double fallback) const;
  Attrs& set(std::string_view name, double value);
};

// ---------------------------------------------------------------------------------------------
// Host buffers <-> fp32 (logical row-major order)
// ---------------------------------------------------------------------------------------------
std::vector<float> load_f32(const TensorView& t, const fmt::ConvertRules& r = fmt::k_default_rules);
// Rounds each value once into t.format.
void store_f32(const float* values, const TensorView& t,
               const fmt::ConvertRules& r = fmt::k_default_rules);
// Same, for exact integer handling (int ops, indices); load_i64 rounds non-integers to nearest
// even and saturates to int64.
std::vector<int64_t> load_i64(const TensorView& t);
void store_i64(const int64_t* values, const TensorView& t,
               const fmt::ConvertRules& r = fmt::k_default_rules);
// True for the integer formats (SENINT*, SENUINT*, IEEE_INT32/64, BOOL).
bool is_integer_format(DataFormat f);

// Broadcast shape of two shapes (numpy rules: right-aligned, 1 stretches); throws if they clash.
std::vector<int64_t> broadcast_shape(std::span<const int64_t> a, std::span<const int64_t> b);

// ---------------------------------------------------------------------------------------------
// Elementwise
// ---------------------------------------------------------------------------------------------
enum class Binary {
  add, sub, revsub, mul, div, maximum, minimum, pow,
  equal, notequal, greaterequal, lesserequal, greaterthan, lesserthan,
  biasadd,  // a + b, b broadcast (same as add)
};
enum class Unary {
  identity, abs, neg, exp, log, sqrt, rsqrt, reciprocal, tanh, sigmoid, gelu, silu, relu, relu6,
  leakyrelu, mish, softplus, clip, floor, layernormscale,
};

// out = a op b with broadcasting: out.size must equal broadcast_shape(a.size, b.size).
// Comparisons give 1/0 in out's format.
void binary(Binary op, const TensorView& a, const TensorView& b, const TensorView& out,
            const Attrs& attrs = {});
// out = op(in); in has out's shape or broadcasts to it (a size-1 dim repeats). Constants: leakyrelu alpha (default 0.01); clip clipMin/clipMax
// (default -inf/+inf); softplus softplusBeta (1) softplusThresh (20); layernormscale eps (1e-5)
// computes 1/sqrt(x + eps).
void unary(Unary op, const TensorView& in, const TensorView& out, const Attrs& attrs = {});
// out = cond != 0 ? a : b, all three broadcast to out.
void where3(const TensorView& cond, const TensorView& a, const TensorView& b,
            const TensorView& out);
// Fused negative multiply-subtract, out = c - a*b (POWER fnmsub; [inf]), broadcast.
void fnms(const TensorView& a, const TensorView& b, const TensorView& c, const TensorView& out);
// LayerNorm as torch-spyre lowers it: stats = exx2(x) (two lanes: E[x], E[x^2]), rstd =
// layernormscale(stats), out = layernormnorm(x, stats, rstd, weight, bias). [inf] The two lanes'
// order is not public (torch-spyre's ElementArrangement::EXX2: "two values per stick").
// layernormscale with the statistics' lanes on `lanes_dim` (size 2 there): every element of out
// (the statistics' shape, any size on lanes_dim) is 1/sqrt(max(E[x^2] - E[x]^2, 0) + eps) of its
// row (constant eps, default 1e-5). With one value per row use unary(Unary::layernormscale).
void layernorm_scale(const TensorView& stats, const TensorView& out, int lanes_dim, const Attrs& attrs = {});
// out = (x - mean) * rstd * weight + bias, all broadcast to out; mean is lane 0 of `stats` on
// `lanes_dim`, or `stats` itself without one; weight 1 and bias 0 when absent.
void layernormnorm(const TensorView& x, const TensorView& stats, const TensorView& rstd, const TensorView* weight,
                   const TensorView* bias, const TensorView& out, std::optional<int> lanes_dim,
                   const Attrs& attrs = {});

// ---------------------------------------------------------------------------------------------
// Reductions along one dim. out has the input's rank with size 1 at `dim` (keepdim) or the
// input's rank - 1. fp32 accumulation in index order.
// ---------------------------------------------------------------------------------------------
enum class Reduce { sum, max, min, mean, absmax, exx2, exx2_zeromean, prod };
// prod: the product, in fp32 in index order (torch-spyre's prodnonstick); mean: sum * scaling_factor (default 1/n);
// exx2, exx2_zeromean: exx2_stats.
void reduce(Reduce op, const TensorView& in, const TensorView& out, int dim,
            const Attrs& attrs = {});
// A LayerNorm's statistics in torch-spyre's EXX2 arrangement [inf]: out is the input with size 2
// on `dim`, lane 0 sum(x) * exx2scale (E[x]; exx2scale default 1/n) and lane 1 sum(x^2) *
// exx2scale (E[x^2]). zero_mean (exx2_zeromean, or the constant useZeroMean != 0) takes the mean
// as zero: lane 0 is 0, so layernormscale and layernormnorm give RMSNorm. [inf]
void exx2_stats(const TensorView& in, const TensorView& out, int dim, bool zero_mean, const Attrs& attrs = {});
// The dim reduce() would use when attrs.dim is absent.
int infer_reduce_dim(const TensorView& in, const TensorView& out, std::optional<int> dim);

// Softmax along `dim` as torch-spyre builds it from the blocks (max, sub, exp, sum, realdiv),
// each intermediate rounded to `intermediate` (DL16 on the card).
void softmax(const TensorView& in, const TensorView& out, int dim,
             DataFormat intermediate = DataFormat::SEN169_FP16);

// ---------------------------------------------------------------------------------------------
// Matmul: a [..., M, K] x b [..., K, N] -> out [..., M, N]; batch dims broadcast.
// Float formats (DL16, fp8, fp16, bf16, fp32): operands widened to fp32 exactly, cblas_sgemm
// (fp32 accumulation), result rounded once into out.format.
// Integer formats (int8, int4, int2, int16): exact integer accumulation. When K*max|a|*max|b|
// <= 2^24 every partial sum is an integer representable in fp32, so sgemm is exact and used;
// otherwise a blocked int64-accumulating loop (equal to int32 accumulation whenever that cannot
// overflow, i.e. K < 2^17 for int8).
// ---------------------------------------------------------------------------------------------
void matmul(const TensorView& a, const TensorView& b, const TensorView& out);

// OpenBLAS starts its worker threads when the library loads, and each spins (sched_yield) for a
// while before it sleeps: about 0.1 s of a CPU in every process, whether it multiplies or not.
// A process that will not multiply (timing only) calls this first to stop them. A later threaded
// BLAS call starts them again (OpenBLAS re-creates its pool on demand), so GEMM stays multithreaded.
// Does nothing with a BLAS that has no such pool.
void release_blas_threads();

// conv2d: x [N, C, H, W] * w [O, C/groups, kh, kw] -> out [N, O, OH, OW] (stride_h/w, pad_h/w,
// groups from attrs), via im2col + matmul(), with the same float/integer rules.
void conv2d(const TensorView& x, const TensorView& w, const TensorView& out,
            const Attrs& attrs = {});

// ---------------------------------------------------------------------------------------------
// Casts and quantisation
// ---------------------------------------------------------------------------------------------
// out = in converted into out.format, rounding once from the exact value (identity, dl16tofp32,
// fp8todl16, fp32todl16, ...). Same shape.
void cast(const TensorView& in, const TensorView& out, const Attrs& attrs = {});
// csqint*: q = round_half_even(x * scaleact + shiftact) saturated to out's integer range.
// qfp8*: q = e4m3(x * scaleact) (scaleact default 1). The wt/mb/ch stick packing is a layout
// matter (fmt::StickLayout), not computed here.
void quantize_scaled(const TensorView& in, const TensorView& out, double scale, double shift,
                     const Attrs& attrs = {});
// Generic affine quantisation, q = round(x / scale + zero_point), and its inverse.
void quantize(const TensorView& in, const TensorView& out, double scale, double zero_point,
              const Attrs& attrs = {});
void dequantize(const TensorView& in, const TensorView& out, double scale, double zero_point,
                const Attrs& attrs = {});
// quantscalepertoken(fp8): out = clamp(absmax over `dim`, clipMin, clipMax) * mulConst
// (defaults: clipMin 0, clipMax +inf, mulConst 1/127 for int8, 1/448 for the fp8 variant).
void quant_scale_per_token(const TensorView& in, const TensorView& out, int dim, bool fp8,
                           const Attrs& attrs = {});

// ---------------------------------------------------------------------------------------------
// Scan, pooling, indirect access
// ---------------------------------------------------------------------------------------------
// The k = out.size[dim] largest values (descending, ties to the lower index) or their indices.
void topk(const TensorView& in, const TensorView& out, int dim, bool indices);
enum class Pool { max, avg, avg_nmap };
// 2-D pooling over attrs.pool_dim_h/w. avg: window sum * nmap (default 1/(kh*kw), padding
// counts as zero); avg_nmap: divides by the number of in-bounds elements; max ignores padding.
void pool2d(Pool op, const TensorView& in, const TensorView& out, const Attrs& attrs = {});
// torch.gather: out[..i..] = src[..index[..i..] at dim..]; out.size == index.size.
void gather(const TensorView& src, const TensorView& index, const TensorView& out, int dim);
// torch.scatter(_add): out = self, then out[..index[..i..] at dim..] = (+=) src[..i..].
// index and src have the same shape; out may alias self.
void scatter(const TensorView& self, const TensorView& index, const TensorView& src,
             const TensorView& out, int dim, bool accumulate = false);

// ---------------------------------------------------------------------------------------------
// Name-based dispatch (the SDSC computeOp_ opFuncName)
// ---------------------------------------------------------------------------------------------
bool is_supported(std::string_view op_func_name);
// True for the ops whose output element at a coordinate depends only on the input elements at
// that coordinate (no other position, no scale computed over the tensor), when every input has
// the output's shape: the unary and binary math, where3, fnms, casts and the quantisations that
// take their scale from the SDSC's constants. Such an op may run on any subset of the elements
// in any order (the executor streams them: exec.cpp, Executor::stream).
bool is_elementwise(std::string_view op_func_name);
// Every name run() accepts.
std::vector<std::string_view> supported_ops();
// Runs an opFunc. `inputs` are the inputLabeledDs tensors in order (for reductions the output
// may also be listed last as an input; it is ignored), `outputs` the outputLabeledDs (one).
// Throws std::invalid_argument for an unknown name or a wrong arity/shape.
void run(std::string_view op_func_name, std::span<const TensorView> inputs,
         std::span<const TensorView> outputs, const Attrs& attrs = {});

}  // namespace vspyre::ops
