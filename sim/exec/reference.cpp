// Double-precision logical reference (see reference.h). Deliberately independent of vspyre::ops'
// arithmetic and of the stick layout: tensors are named-dim host arrays keyed by where the bundle
// keeps them. (check_streamed asks ops::is_elementwise which ops it may stream, walks images it
// has checked to share one layout, and reads only the small broadcast operands whole.)
#include "sim/exec/reference.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <numeric>
#include <optional>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>

#include "sim/exec/layout.h"
#include "sim/ops/ops.h"

namespace vspyre::exec {

namespace {

// Where a tensor lives, as a key: HBM base address, or an LX offset on a set of cores.
struct Key {
  bool lx = false;
  uint64_t addr = 0;
  uint32_t core = 0;
  bool operator<(const Key& o) const {
    return std::tie(lx, addr, core) < std::tie(o.lx, o.addr, o.core);
  }
};

Key key_of(const detail::MappedTensor& t) {
  if (t.info.placement == bundle::Placement::hbm) return {false, t.info.base, 0};
  // An LX tensor: the start offset of its first core's slice minus that slice's own offset.
  return {true, t.cores.front().start, t.cores.front().core};
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (auto x : s) n *= x;
  return n;
}

std::vector<int64_t> strides(const std::vector<int64_t>& s) {
  std::vector<int64_t> st(s.size());
  int64_t k = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = k;
    k *= s[i];
  }
  return st;
}

struct Unavailable {
  std::string why;
};

// `src` rearranged to the dims/size of `want` (matched by name; size-1 dims may come and go).
// Returns `src` itself when it already has that shape, else fills and returns `out`.
const RefTensor& conform(const RefTensor& src, const std::vector<std::string>& dims,
                         const std::vector<int64_t>& size, RefTensor& out) {
  if (!src.have.empty()) throw Unavailable{"its input was only sampled"};
  if (src.dims == dims && src.size == size) return src;
  std::vector<int64_t> src_st = strides(src.size);
  std::vector<int64_t> map_st(dims.size(), 0);
  std::set<size_t> used;
  for (size_t i = 0; i < dims.size(); ++i) {
    auto it = std::find(src.dims.begin(), src.dims.end(), dims[i]);
    if (it == src.dims.end()) {
      if (size[i] != 1) throw Unavailable{"dim '" + dims[i] + "' unknown to the producer"};
      continue;
    }
    const size_t j = size_t(it - src.dims.begin());
    if (src.size[j] != size[i]) {
      if (src.size[j] != 1)
        throw Unavailable{"dim '" + dims[i] + "' has size " + std::to_string(src.size[j]) +
                          " at the producer and " + std::to_string(size[i]) + " here"};
      map_st[i] = 0;  // broadcast
    } else {
      map_st[i] = src_st[j];
    }
    used.insert(j);
  }
  for (size_t j = 0; j < src.dims.size(); ++j)
    if (!used.count(j) && src.size[j] != 1)
      throw Unavailable{"dim '" + src.dims[j] + "' of the producer is missing here"};
  out = RefTensor{};
  out.dims = dims;
  out.size = size;
  out.depth = src.depth;
  out.format = src.format;
  out.v.resize(size_t(numel(size)));
  if (!src.m.empty()) out.m.resize(out.v.size());
  std::vector<int64_t> k(size.size(), 0);
  for (size_t e = 0; e < out.v.size(); ++e) {
    int64_t off = 0;
    for (size_t i = 0; i < size.size(); ++i) off += k[i] * map_st[i];
    out.v[e] = src.v[size_t(off)];
    if (!src.m.empty()) out.m[e] = src.m[size_t(off)];
    for (size_t i = size.size(); i-- > 0;) {
      if (++k[i] < size[i]) break;
      k[i] = 0;
    }
  }
  return out;
}

// An elementwise operand in the output's dims: its own size along each dim it has, 1 (to
// broadcast) along the others (conform; `tmp` holds it when a copy is needed).
const RefTensor& in_output_dims(const RefTensor& t, const RefTensor& out, RefTensor& tmp) {
  std::vector<int64_t> sz(out.size.size(), 1);
  for (size_t i = 0; i < out.dims.size(); ++i) {
    auto it = std::find(t.dims.begin(), t.dims.end(), out.dims[i]);
    if (it != t.dims.end()) sz[i] = t.size[size_t(it - t.dims.begin())];
  }
  return conform(t, out.dims, sz, tmp);
}

// Element offset in `t` (shape `ts`, strides `tst`) of output coordinate k (shape os),
// broadcasting size-1 dims (right-aligned, same rank here).
int64_t bcast_off(const std::vector<int64_t>& k, const std::vector<int64_t>& ts,
                  const std::vector<int64_t>& tst) {
  int64_t off = 0;
  for (size_t i = 0; i < k.size(); ++i)
    if (ts[i] != 1) off += k[i] * tst[i];
  return off;
}

std::optional<std::function<double(double)>> unary_fn(const std::string& op) {
  if (op == "identity" || op == "shuffle" || op == "ReStickifyOpHBM")
    return [](double x) { return x; };
  if (op == "neg") return [](double x) { return -x; };
  if (op == "abs") return [](double x) { return std::fabs(x); };
  if (op == "floor") return [](double x) { return std::floor(x); };
  if (op == "exp" || op == "fastexp") return [](double x) { return std::exp(x); };
  if (op == "log") return [](double x) { return std::log(x); };
  if (op == "sqrt") return [](double x) { return std::sqrt(x); };
  if (op == "rsqrt") return [](double x) { return 1.0 / std::sqrt(x); };
  if (op == "reciprocal") return [](double x) { return 1.0 / x; };
  if (op == "tanh") return [](double x) { return std::tanh(x); };
  if (op == "sigmoid" || op == "fastsigmoid") return [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  // (A NaN passes through, as vspyre::ops gives it: relu(sqrt(-1)) is not 0.)
  if (op == "relufwd" || op == "relu") return [](double x) { return x > 0 || std::isnan(x) ? x : 0.0; };
  if (op == "silu") return [](double x) { return x / (1.0 + std::exp(-x)); };
  if (op == "gelufwd" || op == "gelu")
    return [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); };
  return std::nullopt;
}

// f' for the error bound (RefTensor::m) of a unary op; nullopt: not known in closed form, then
// unary_slope takes a central difference.
std::optional<std::function<double(double)>> unary_deriv(const std::string& op) {
  if (op == "identity" || op == "shuffle" || op == "ReStickifyOpHBM" || op == "neg" || op == "abs")
    return [](double) { return 1.0; };  // |f'| = 1 (abs: except at 0, where 1 still bounds)
  // floor: flat between integers (an input error that crosses one moves the result by 1, which
  // no first-order bound covers; torch-spyre's floor and ceil read kernel inputs or their negation)
  if (op == "floor") return [](double) { return 0.0; };
  if (op == "exp" || op == "fastexp") return [](double x) { return std::exp(x); };
  if (op == "log") return [](double x) { return 1.0 / x; };
  if (op == "sqrt") return [](double x) { return 0.5 / std::sqrt(x); };
  if (op == "rsqrt") return [](double x) { return -0.5 / (x * std::sqrt(x)); };
  if (op == "reciprocal") return [](double x) { return -1.0 / (x * x); };
  if (op == "tanh") return [](double x) { const double t = std::tanh(x); return 1.0 - t * t; };
  if (op == "sigmoid" || op == "fastsigmoid")
    return [](double x) { const double s = 1.0 / (1.0 + std::exp(-x)); return s * (1.0 - s); };
  if (op == "relufwd" || op == "relu") return [](double x) { return x > 0 ? 1.0 : 0.0; };
  if (op == "silu")
    return [](double x) { const double s = 1.0 / (1.0 + std::exp(-x)); return s + x * s * (1.0 - s); };
  if (op == "gelufwd" || op == "gelu")
    return [](double x) {
      return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
    };
  return std::nullopt;
}

// |f'(x)|: closed form when unary_deriv has one, else a central difference with step
// h = 2^-20 max(1, |x|) (error O(h^2 f'''), far below what a bound with a factor 2 to spare needs).
double unary_slope(const std::optional<std::function<double(double)>>& df,
                   const std::function<double(double)>& f, double x) {
  if (df) return std::fabs((*df)(x));
  const double h = std::ldexp(std::max(1.0, std::fabs(x)), -20);
  return std::fabs((f(x + h) - f(x - h)) / (2 * h));
}

// x * y where x = 0 gives 0 even for an infinite y (an error budget of 0 stays 0).
double mulz(double x, double y) { return x == 0 ? 0.0 : x * y; }

// First-order propagation of the operands' error budgets (E = depth x m, RefTensor::m) through a
// binary op: |df/da| Ea + |df/db| Eb. The op's own rounding (|result|) is added by the caller.
std::optional<std::function<double(double, double, double, double)>> binary_prop(const std::string& op) {
  if (op == "add" || op == "biasadd" || op == "sub" || op == "revsub")
    return [](double, double, double ea, double eb) { return ea + eb; };
  if (op == "mul")
    return [](double a, double b, double ea, double eb) { return mulz(ea, std::fabs(b)) + mulz(eb, std::fabs(a)); };
  if (op == "realdiv" || op == "div")
    // a/b: Ea/|b| + |a| Eb / b^2. At b = 0 the result is inf or nan, which compare() checks for
    // equality, so the bound does not matter there: keep just the op's own rounding.
    return [](double a, double b, double ea, double eb) {
      return b == 0 ? 0.0 : mulz(ea, 1.0 / std::fabs(b)) + mulz(eb, std::fabs(a) / (b * b));
    };
  // max/min: the device may pick the other operand, so the larger of the two budgets.
  if (op == "maximum" || op == "minimum")
    return [](double, double, double ea, double eb) { return std::max(ea, eb); };
  // Comparisons are flat but where they flip, which no first-order bound covers (as floor): an
  // operand's rounding that crosses the other gives another 0/1, and the check says so.
  if (op == "equal" || op == "notequal" || op == "greaterequal" || op == "lesserequal" || op == "greaterthan" ||
      op == "lesserthan")
    return [](double, double, double, double) { return 0.0; };
  return std::nullopt;
}

std::optional<std::function<double(double, double)>> binary_fn(const std::string& op) {
  if (op == "add" || op == "biasadd") return [](double a, double b) { return a + b; };
  if (op == "sub") return [](double a, double b) { return a - b; };
  if (op == "revsub") return [](double a, double b) { return b - a; };
  if (op == "mul") return [](double a, double b) { return a * b; };
  if (op == "realdiv" || op == "div") return [](double a, double b) { return a / b; };
  if (op == "maximum") return [](double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); };
  if (op == "minimum") return [](double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); };
  // Comparisons: 1 or 0 (where, masked_fill), as vspyre::ops gives them.
  if (op == "equal") return [](double a, double b) { return double(a == b); };
  if (op == "notequal") return [](double a, double b) { return double(a != b); };
  if (op == "greaterequal") return [](double a, double b) { return double(a >= b); };
  if (op == "lesserequal") return [](double a, double b) { return double(a <= b); };
  if (op == "greaterthan") return [](double a, double b) { return double(a > b); };
  if (op == "lesserthan") return [](double a, double b) { return double(a < b); };
  return std::nullopt;
}

std::string red_kind(const std::string& op) {
  for (const char* k : {"sum", "max", "min", "mean"})
    if (op == k || op == std::string(k) + "nonstick") return k;
  if (op == "prodnonstick") return "prod";
  return {};
}

double constant_value(const bundle::Sdsc& s, const std::string& name, double fallback) {
  for (const auto& c : s.constants)
    if (c.name == name && !c.raw.empty()) {
      const fmt::DataFormat f = to_fmt(c.format);
      if (!fmt::is_convertible(f)) return fallback;
      uint8_t buf[16] = {};
      fmt::write_code(f, buf, 0, c.raw.front());
      return fmt::load_element(f, buf, 0);
    }
  return fallback;
}

RefTensor shaped(const TensorInfo& info) {
  RefTensor t;
  t.dims = info.dims;
  t.size = info.size;
  t.format = info.format;
  t.v.assign(size_t(info.numel()), 0.0);
  return t;
}

// What a format's roundings are measured in, in one table: `eps`, the relative spacing of one
// rounding (format_epsilon; 0 for a format the reference has no budget for); `tiny`, the
// magnitude below which a rounding's error is absolute, and `floor`, that error over eps: a
// rounding of a value under `tiny` counts as one of magnitude `floor` (E4M3's subnormal step is
// 2^-9 = eps x its smallest normal 2^-6: both 2^-6; DL16 has no subnormals and flushes what is
// under 2^-31 to zero, an error of up to 2^-31 = eps x 2^-22, while from 2^-31 up its roundings
// are relative). `max`: the largest finite magnitude (0: none the reference knows, no range
// check).
struct Precision {
  double eps, tiny, floor, max;
};
Precision precision_of(fmt::DataFormat f) {
  switch (f) {
    // (gelu(-6.4) = -4.5e-10 comes out 0.)
    case fmt::DataFormat::SEN169_FP16:
      return {std::ldexp(1.0, -9), std::ldexp(1.0, -31), std::ldexp(1.0, -22), fmt::k_dl16_max_value};
    case fmt::DataFormat::IEEE_FP16: return {std::ldexp(1.0, -10), std::ldexp(1.0, -14), std::ldexp(1.0, -14), 65504.0};
    case fmt::DataFormat::BFLOAT16:
      return {std::ldexp(1.0, -7), std::ldexp(1.0, -126), std::ldexp(1.0, -126), std::ldexp(255.0, 120)};
    case fmt::DataFormat::IEEE_FP32:
      return {std::ldexp(1.0, -20), std::ldexp(1.0, -126), std::ldexp(1.0, -126), double(std::numeric_limits<float>::max())};
    case fmt::DataFormat::SEN143_FP8: return {std::ldexp(1.0, -3), std::ldexp(1.0, -6), std::ldexp(1.0, -6), 448.0};
    case fmt::DataFormat::SEN152_FP8: return {std::ldexp(1.0, -2), std::ldexp(1.0, -14), std::ldexp(1.0, -14), 57344.0};
    case fmt::DataFormat::SEN153_FP9: return {std::ldexp(1.0, -3), std::ldexp(1.0, -14), std::ldexp(1.0, -14), 61440.0};
    default: return {0.0, std::ldexp(1.0, -126), std::ldexp(1.0, -126), 0.0};
  }
}

// The magnitude a rounding of a value of magnitude a (>= 0) into f is measured against: a, or
// the format's floor below its `tiny`.
double rounded_mag(double a, const Precision& p) { return a < p.tiny ? std::max(a, p.floor) : a; }
double rounded(double v, fmt::DataFormat f) { return rounded_mag(std::fabs(v), precision_of(f)); }

// Error budget of element i (RefTensor::m): depth x m in units of eps(t.format), 0 for a kernel
// input, expressed in units of eps(to), the format the op rounds into: an fp8 intermediate read
// by a DL16 op carries 2^-3 / 2^-9 = 64 DL16 epsilons per fp8 epsilon of budget.
double budget(const RefTensor& t, size_t i, fmt::DataFormat to) {
  if (t.depth == 0) return 0.0;
  // (An empty m is one rounding of |v|, at least the format's smallest normal: below it the
  // rounding's error is absolute, and an fp8 value of 2^-10 became 0.)
  const double b = double(t.depth) * (t.m.empty() ? rounded(t.v[i], t.format) : t.m[i]);
  const double from_eps = format_epsilon(t.format), to_eps = format_epsilon(to);
  return from_eps > 0 && to_eps > 0 && from_eps != to_eps ? b * (from_eps / to_eps) : b;
}

// The card accumulates a sum (reductions, matmul, convolution, pooling, statistics) in fp32, and
// each addition rounds the partial sum by at most 2^-24 of it: in index order (the executor's for
// reductions; sgemm's blocked order errs less in practice) the result is within 2^-24 x the sum of
// the partial sums' magnitudes |s_2| + ... + |s_n| (first order). `path` is that sum. As a budget
// in eps(out) (RefTensor::m times depth), to add to the op's own: a row of 2^25, 2046 ones, -2^25
// (exact 2046, fp32 in index order 0) is allowed about 4096; a random row of n is allowed about
// 2^-24 n^1.5 / 2, a few hundredths of the sum of 65536, where the worst case over every order,
// (n - 1) 2^-24 sum |t|, allowed 5 times the sum itself.
double accumulation_budget(double path, fmt::DataFormat out) {
  const double eps = precision_of(out).eps;
  return eps > 0 ? std::ldexp(path, -24) / eps : 0.0;
}

// Format conversions (value-preserving but for the rounding into the output format).
bool is_cast(const std::string& op) {
  return op == "fp8todl16" || op == "fp32todl16" || op == "dl16tofp32" || op == "cast";
}

// Unary ops whose function depends on the SDSC's constants (as vspyre::ops reads them):
// clip (clipMin, clipMax) and the fp8 quantisers (x * scaleact, 1 without the constant).
std::optional<std::function<double(double)>> unary_fn_with_constants(const bundle::Sdsc& s,
                                                                       const std::string& op) {
  if (op == "clip") {
    const double lo = constant_value(s, "clipMin", -INFINITY), hi = constant_value(s, "clipMax", INFINITY);
    return [lo, hi](double x) { return std::isnan(x) ? x : std::min(std::max(x, lo), hi); };
  }
  if (op == "layernormscale") {  // one value per row (a variance); EXX2 statistics: layernorm_op
    const double eps = constant_value(s, "eps", 1e-5);
    return [eps](double x) { return 1.0 / std::sqrt(x + eps); };
  }
  if (op == "softplus") {  // log(1 + e^(beta x)) / beta, x itself above the threshold (torch's)
    const double beta = constant_value(s, "softplusBeta", 1.0), thr = constant_value(s, "softplusThresh", 20.0);
    return [beta, thr](double x) { return beta * x > thr ? x : std::log1p(std::exp(beta * x)) / beta; };
  }
  if (op == "qfp8ch" || op == "qfp8mb" || op == "qfp8wt") {
    const double scale = constant_value(s, "scaleact", 1.0);
    return [scale](double x) { return x * scale; };
  }
  return std::nullopt;
}

// Steps the row-major coordinate `k` over a tensor of shape `size` (the last dim fastest).
void odometer_next(std::vector<int64_t>& k, const std::vector<int64_t>& size) {
  for (size_t i = size.size(); i-- > 0;) {
    if (++k[i] < size[i]) return;
    k[i] = 0;
  }
}

// The axis of `dims` holding the two lanes of an EXX2 statistics stick (detail::exx2_lanes)
// of labeled tensor `lds`, -1 when it is not one.
int lanes_axis(const bundle::Sdsc& s, uint32_t lds, const std::vector<std::string>& dims) {
  if (!detail::exx2_lanes(s, lds)) return -1;
  const auto* li = s.layout_for(s.labeled_ds[lds]);
  auto it = std::find(dims.begin(), dims.end(), li->stick_dim_order[0]);
  return it == dims.end() ? -1 : int(it - dims.begin());
}

// LayerNorm's three ops (vspyre::ops::exx2_stats, layernorm_scale, layernormnorm), with error
// bounds to first order as everywhere here. nullopt: not one of them.
std::optional<RefTensor> layernorm_op(const bundle::Sdsc& s, const bundle::ComputeOp& op,
                                      const std::vector<const RefTensor*>& in, RefTensor out) {
  const std::string& name = op.op_func_name;
  const int64_t n = numel(out.size);
  std::vector<int64_t> k(out.size.size(), 0);
  auto next = [&]() { odometer_next(k, out.size); };
  // `t` conformed to out's dims with size `lanes` on axis `ax` (a copy in `tmp` if needed).
  auto in_out_dims = [&](const RefTensor& t, int ax, int64_t lanes, RefTensor& tmp) -> const RefTensor& {
    std::vector<int64_t> sz(out.size.size(), 1);
    for (size_t i = 0; i < out.dims.size(); ++i) {
      auto it = std::find(t.dims.begin(), t.dims.end(), out.dims[i]);
      if (it != t.dims.end()) sz[i] = t.size[size_t(it - t.dims.begin())];
    }
    if (ax >= 0) sz[size_t(ax)] = lanes;
    return conform(t, out.dims, sz, tmp);
  };
  auto at = [&](const RefTensor& t, const std::vector<int64_t>& kk) {  // broadcast read
    int64_t off = 0, st = 1;
    for (size_t i = t.size.size(); i-- > 0;) {
      if (t.size[i] != 1) off += kk[i] * st;
      st *= t.size[i];
    }
    return size_t(off);
  };
  if (name == "exx2" || name == "exx2_zeromean") {
    const int ax = lanes_axis(s, op.outputs[0], out.dims);
    if (ax < 0 || in.empty()) throw Unavailable{"exx2 without an EXX2 statistics output"};
    RefTensor tmp;
    const RefTensor& a = in_out_dims(*in[0], -1, 0, tmp);
    if (a.size.size() != out.size.size()) throw Unavailable{"exx2: input and output differ in rank"};
    const int64_t len = a.size[size_t(ax)];
    const double scale = constant_value(s, "exx2scale", 1.0 / double(len));
    const bool zero_mean = name == "exx2_zeromean" || constant_value(s, "useZeroMean", 0.0) != 0.0;
    const auto ast = strides(a.size);
    const bool exact = a.depth == 0;
    out.m.resize(size_t(n));  // (whatever the inputs: the fp32 accumulation's own budget)
    for (int64_t e = 0; e < n; ++e, next()) {
      const bool sq = k[size_t(ax)] == 1;
      int64_t base = 0;
      for (size_t i = 0; i < k.size(); ++i)
        if (int(i) != ax) base += k[i] * ast[i];
      double acc = 0, acc_e = 0, path = 0;
      for (int64_t j = 0; j < len; ++j) {
        const size_t p = size_t(base + j * ast[size_t(ax)]);
        const double x = a.v[p];
        acc += sq ? x * x : x;
        if (j > 0) path += std::fabs(acc);
        if (!exact) acc_e += mulz(budget(a, p, out.format), sq ? 2 * std::fabs(x) : 1.0);
      }
      out.v[size_t(e)] = !sq && zero_mean ? 0.0 : acc * scale;
      acc_e += accumulation_budget(path, out.format);
      out.m[size_t(e)] = (mulz(acc_e, std::fabs(scale)) + rounded(out.v[size_t(e)], out.format)) / out.depth;
    }
    return out;
  }
  const int si = detail::exx2_stats_input(name);  // the input holding the statistics
  // The output axis that the statistics' two lanes fall on; -1 when they hold one value per row.
  auto stats_axis = [&]() {
    const RefTensor& st = *in[size_t(si)];
    const int ax = lanes_axis(s, op.inputs[size_t(si)], st.dims);
    if (ax < 0) return -1;
    const int oax = int(std::find(out.dims.begin(), out.dims.end(), st.dims[size_t(ax)]) - out.dims.begin());
    if (oax == int(out.dims.size())) throw Unavailable{name + ": the statistics' lanes dim is not in the output"};
    return oax;
  };
  if (name == "layernormscale" && in.size() == 1) {
    const int oax = stats_axis();
    if (oax < 0) return std::nullopt;  // one value per row: the unary form
    RefTensor tmp;
    const RefTensor& st = in_out_dims(*in[size_t(si)], oax, 2, tmp);
    const double eps = constant_value(s, "eps", 1e-5);
    const bool exact = st.depth == 0;
    if (!exact) out.m.resize(size_t(n));
    std::vector<int64_t> kk;
    for (int64_t e = 0; e < n; ++e, next()) {
      kk = k;
      kk[size_t(oax)] = 0;
      const size_t pm = at(st, kk);
      kk[size_t(oax)] = 1;
      const size_t pq = at(st, kk);
      const double mu = st.v[pm], var = std::max(st.v[pq] - mu * mu, 0.0);
      const double v = 1.0 / std::sqrt(var + eps);
      out.v[size_t(e)] = v;
      if (!exact) {
        // d/dvar (var + eps)^-1/2 = -1/2 (var + eps)^-3/2; E_var = E_q + 2|mu| E_mu.
        const double e_var = budget(st, pq, out.format) + mulz(budget(st, pm, out.format), 2 * std::fabs(mu));
        out.m[size_t(e)] = (mulz(e_var, 0.5 * v * v * v) + rounded(v, out.format)) / out.depth;
      }
    }
    return out;
  }
  if (name == "layernormnorm" && in.size() >= 3 && in.size() <= 5) {
    const int oax = stats_axis();
    RefTensor tmp[5];
    std::vector<const RefTensor*> c;
    for (size_t i = 0; i < in.size(); ++i) c.push_back(&in_out_dims(*in[i], int(i) == si ? oax : -1, 2, tmp[i]));
    const bool exact = std::all_of(c.begin(), c.end(), [](const RefTensor* t) { return t->depth == 0; });
    if (!exact) out.m.resize(size_t(n));
    std::vector<int64_t> km;
    for (int64_t e = 0; e < n; ++e, next()) {
      km = k;
      if (oax >= 0) km[size_t(oax)] = 0;  // the mean: lane 0
      const size_t px = at(*c[0], k), pm = at(*c[1], km), pr = at(*c[2], k);
      const size_t pw = c.size() > 3 ? at(*c[3], k) : 0, pb = c.size() > 4 ? at(*c[4], k) : 0;
      const double d = c[0]->v[px] - c[1]->v[pm], r = c[2]->v[pr];
      const double w = c.size() > 3 ? c[3]->v[pw] : 1.0, b = c.size() > 4 ? c[4]->v[pb] : 0.0;
      const double v = d * r * w + b;
      out.v[size_t(e)] = v;
      if (!exact) {
        double ee = mulz(budget(*c[0], px, out.format) + budget(*c[1], pm, out.format), std::fabs(r * w)) +
                    mulz(budget(*c[2], pr, out.format), std::fabs(d * w));
        if (c.size() > 3) ee += mulz(budget(*c[3], pw, out.format), std::fabs(d * r));
        if (c.size() > 4) ee += budget(*c[4], pb, out.format);
        out.m[size_t(e)] = (ee + rounded(v, out.format)) / out.depth;
      }
    }
    return out;
  }
  return std::nullopt;
}

// Computes out.v and, unless every operand is a kernel input (then the bound is one rounding of
// the result, m = |v|, left empty), out.m: the operands' budgets propagated to first order plus
// the op's own rounding, divided by out.depth (RefTensor::m).
RefTensor compute_op(const bundle::Sdsc& s, const bundle::ComputeOp& op,
                     const std::vector<const RefTensor*>& inp, const TensorInfo& out_info,
                     const RefOptions& opt) {
  RefTensor out = shaped(out_info);
  static const RefTensor none;
  const std::vector<const RefTensor*>& in = inp;
  const RefTensor& in0 = inp.size() > 0 ? *inp[0] : none;
  const RefTensor& in1 = inp.size() > 1 ? *inp[1] : none;
  int depth = 0;
  for (const RefTensor* t : in) depth = std::max(depth, t->depth);
  out.depth = depth + 1;
  const auto ost = strides(out.size);
  const int64_t n = numel(out.size);
  std::vector<int64_t> k(out.size.size(), 0);
  auto next = [&]() { odometer_next(k, out.size); };
  const std::string& name = op.op_func_name;
  if (auto ln = layernorm_op(s, op, in, out)) return std::move(*ln);
  auto f = is_cast(name) ? unary_fn("identity") : unary_fn(name);
  if (!f) f = unary_fn_with_constants(s, name);
  if (f && in.size() == 1) {
    RefTensor tmp;
    const RefTensor& a = conform(in0, out.dims, out.size, tmp);
    for (int64_t e = 0; e < n; ++e) out.v[size_t(e)] = (*f)(a.v[size_t(e)]);
    const bool copy = name == "identity" || name == "shuffle" || name == "ReStickifyOpHBM" || is_cast(name);
    if (copy) out.depth = in0.format == out.format ? depth : depth + 1;
    if (copy && out.depth == a.depth) {
      out.m = a.m;  // no rounding: the same values with the same bound
      return out;
    }
    if (a.depth > 0) {
      // m = (|f'(x)| E_x + |f(x)|) / depth.
      const auto df = unary_deriv(is_cast(name) ? "identity" : name);
      out.m.resize(size_t(n));
      for (size_t e = 0; e < size_t(n); ++e)
        out.m[e] = (mulz(budget(a, e, out.format), unary_slope(df, *f, a.v[e])) + rounded(out.v[e], out.format)) / out.depth;
    }
    return out;
  }
  if (auto f = binary_fn(name); f && in.size() == 2) {
    RefTensor tmp[2];
    const RefTensor& c0 = in_output_dims(*in[0], out, tmp[0]);
    const RefTensor& c1 = in_output_dims(*in[1], out, tmp[1]);
    const auto s0 = strides(c0.size), s1 = strides(c1.size);
    const auto prop = binary_prop(name);
    const bool exact = c0.depth == 0 && c1.depth == 0;
    if (!prop) throw Unavailable{"no error bound for '" + name + "'"};
    if (!exact) out.m.resize(size_t(n));
    // One element: value, and (operands not both inputs) m = (prop(E_a, E_b) + |r|) / depth.
    auto one = [&](size_t e, size_t i0, size_t i1) {
      const double x = c0.v[i0], y = c1.v[i1];
      out.v[e] = (*f)(x, y);
      if (!exact)
        out.m[e] = ((*prop)(x, y, budget(c0, i0, out.format), budget(c1, i1, out.format)) + rounded(out.v[e], out.format)) / out.depth;
    };
    if (c0.size == out.size && c1.size == out.size) {
      for (size_t e = 0; e < size_t(n); ++e) one(e, e, e);
      return out;
    }
    // One operand a single element (the compiler's copy is x + a broadcast 0).
    if (c0.size == out.size && c1.v.size() == 1) {
      for (size_t e = 0; e < size_t(n); ++e) one(e, e, 0);
      return out;
    }
    if (c1.size == out.size && c0.v.size() == 1) {
      for (size_t e = 0; e < size_t(n); ++e) one(e, 0, e);
      return out;
    }
    for (int64_t e = 0; e < n; ++e, next())
      one(size_t(e), size_t(bcast_off(k, c0.size, s0)), size_t(bcast_off(k, c1.size, s1)));
    return out;
  }
  if (name == "where3" && in.size() == 3) {
    // cond != 0 ? a : b, each broadcast to the output (torch.where, masked_fill). The value is
    // one operand's element, rounded into the output's format: its budget, plus that rounding
    // where the formats differ (where the condition itself moved, no bound holds, as for floor).
    RefTensor tmp[3];
    std::vector<const RefTensor*> c;
    for (size_t i = 0; i < 3; ++i) c.push_back(&in_output_dims(*in[i], out, tmp[i]));
    std::vector<std::vector<int64_t>> st;
    for (const RefTensor* t : c) st.push_back(strides(t->size));
    const bool exact = c[1]->depth == 0 && c[2]->depth == 0;
    if (!exact) out.m.resize(size_t(n));
    for (int64_t e = 0; e < n; ++e, next()) {
      const bool pick_a = c[0]->v[size_t(bcast_off(k, c[0]->size, st[0]))] != 0;
      const RefTensor& src = pick_a ? *c[1] : *c[2];
      const size_t at = size_t(bcast_off(k, src.size, pick_a ? st[1] : st[2]));
      out.v[size_t(e)] = src.v[at];
      if (!exact) out.m[size_t(e)] = (budget(src, at, out.format) + rounded(out.v[size_t(e)], out.format)) / out.depth;
    }
    return out;
  }
  if (const std::string r = red_kind(name); !r.empty() && !in.empty()) {
    // The input in the output's dims, at full size.
    std::vector<int64_t> sz = out.size;
    std::vector<size_t> rd;  // the reduced dims (one, or several reduced into one accumulator)
    for (size_t i = 0; i < out.dims.size(); ++i) {
      auto it = std::find(in0.dims.begin(), in0.dims.end(), out.dims[i]);
      if (it != in0.dims.end()) sz[i] = in0.size[size_t(it - in0.dims.begin())];
      if (sz[i] != out.size[i]) {
        if (out.size[i] != 1) throw Unavailable{"input and output differ in more than the reduced dims"};
        rd.push_back(i);
      }
    }
    if (rd.empty()) throw Unavailable{"cannot tell the reduced dim"};
    RefTensor tmp;
    const RefTensor& a = conform(in0, out.dims, sz, tmp);
    const auto ast = strides(sz);
    // Offsets of the reduced elements from an output element's base, in index order.
    std::vector<int64_t> offsets{0};
    for (size_t d : rd) {
      std::vector<int64_t> next_offsets;
      for (int64_t o : offsets)
        for (int64_t j = 0; j < sz[d]; ++j) next_offsets.push_back(o + j * ast[d]);
      offsets.swap(next_offsets);
    }
    const int64_t len = int64_t(offsets.size());
    const double scale = r == "mean" ? constant_value(s, "scaling_factor", 1.0 / double(len)) : 1.0;
    // Error bound (input not a kernel input): sum/mean: the sum of the budgets (times |scale|);
    // max/min: the largest budget of the row (the device may pick another element); prod: each
    // budget times the other factors' magnitudes, summed. Plus |r|.
    const bool exact = a.depth == 0;
    const bool extreme = r == "max" || r == "min";
    const bool summed = r == "sum" || r == "mean";  // accumulated in fp32: a budget of its own
    if (!exact || summed) out.m.resize(size_t(n));
    for (int64_t e = 0; e < n; ++e, next()) {
      int64_t base = 0;
      for (size_t i = 0; i < k.size(); ++i) base += k[i] * ast[i];
      const bool prod = r == "prod";
      double acc = r == "max" ? -INFINITY : r == "min" ? INFINITY : prod ? 1.0 : 0.0;
      double acc_e = 0, mag = 1;  // prod: the budget so far and the factors' magnitudes so far
      double path = 0;
      for (int64_t j = 0; j < len; ++j) {
        const size_t at = size_t(base + offsets[size_t(j)]);
        const double x = a.v[at];
        if (r == "max") acc = std::max(acc, x);
        else if (r == "min") acc = std::min(acc, x);
        else if (prod) acc *= x;
        else acc += x, path += j > 0 ? std::fabs(acc) : 0.0;
        if (exact) continue;
        if (prod) {
          acc_e = acc_e * std::fabs(x) + budget(a, at, out.format) * mag;
          mag *= std::fabs(x);
        } else {
          acc_e = extreme ? std::max(acc_e, budget(a, at, out.format)) : acc_e + budget(a, at, out.format);
        }
      }
      out.v[size_t(e)] = r == "mean" ? acc * scale : acc;
      if (summed) acc_e += accumulation_budget(path, out.format);
      if (!exact || summed)
        out.m[size_t(e)] = ((r == "mean" ? mulz(acc_e, std::fabs(scale)) : acc_e) + rounded(out.v[size_t(e)], out.format)) /
                           out.depth;
    }
    return out;
  }
  if ((name == "topkvalue" || name == "topkindex") && in.size() == 1) {
    // The input scans one axis (size > 1 there, 1 in the output), the output holds k along
    // another (1 in the input), as the compiler names them; or the same axis in both. Larger
    // first, NaN largest, ties to the lower index (torch.topk). Values are copies of inputs;
    // indices exact integers.
    const size_t r = out.size.size();
    int sa = -1, ka = -1;
    if (!detail::topk_axes(in0.size, out.size, sa, ka)) throw Unavailable{"cannot tell the top-k axes from the shapes"};
    const auto ist = strides(in0.size);
    const int64_t len = in0.size[size_t(sa)], kk = out.size[size_t(ka)];
    if (kk > len) throw Unavailable{"top-k k exceeds the scanned axis"};
    const bool idx = name == "topkindex";
    std::vector<int64_t> order(static_cast<size_t>(len));
    // Walk the output's slices: every output coordinate with the k axis at 0.
    for (int64_t e = 0; e < n; ++e, next()) {
      if (k[size_t(ka)] != 0) continue;
      int64_t base = 0;
      for (size_t i = 0; i < r; ++i)
        if (int(i) != sa && int(i) != ka) base += k[i] * ist[i];
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
        const double a = in0.v[size_t(base + x * ist[size_t(sa)])], b = in0.v[size_t(base + y * ist[size_t(sa)])];
        const bool na = std::isnan(a), nb = std::isnan(b);
        if (na != nb) return na;
        return !na && a > b;
      });
      for (int64_t j = 0; j < kk; ++j) {
        const size_t at = size_t(e + j * ost[size_t(ka)]);
        out.v[at] = idx ? double(order[size_t(j)]) : in0.v[size_t(base + order[size_t(j)] * ist[size_t(sa)])];
      }
    }
    return out;
  }
  if ((name == "depthwiseconv2dnative" || name == "conv2d") && in.size() == 2) {
    // Convolution over the SDSC's one or two windows, by dim name: depthwise out[.., oh, ow, c] = sum
    // over the window of x[.., oh x stride - pad + ki, ow x stride - pad + kj, c] x w[ki, kj, c];
    // full (conv2d) also sums over the input channels, the dim of x and w the output lacks.
    // Error bound as for a matmul: sum of E_x |w| + |x| E_w, plus |r|.
    if (s.windows.empty() || s.windows.size() > 2) throw Unavailable{"a convolution needs one or two windows"};
    // One window: the other spatial dim has a kernel one wide and no window; it indexes x like
    // a batch dim, by name (the H window below is then one in no tensor).
    bundle::Window none;
    none.total = 1;
    const bundle::Window& wh = s.windows.size() == 2 ? s.windows[0] : none;
    const bundle::Window& ww = s.windows.back();
    auto at_of = [](const RefTensor& t, const std::string& d) {
      const auto it = std::find(t.dims.begin(), t.dims.end(), d);
      return it == t.dims.end() ? -1 : int(it - t.dims.begin());
    };
    const int oh_o = at_of(out, wh.dim), ow_o = at_of(out, ww.dim);
    const int oh_x = at_of(in0, wh.dim), ow_x = at_of(in0, ww.dim);
    const int kh_w = at_of(in1, wh.window_dim), kw_w = at_of(in1, ww.window_dim);
    // A window over a dim of one element that N_ leaves out (Sdsc::windows) is in no tensor.
    auto absent = [&](const bundle::Window& w, int o, int x) { return o < 0 && x < 0 && w.total == 1; };
    if (((oh_o < 0 || oh_x < 0) && !absent(wh, oh_o, oh_x)) || ((ow_o < 0 || ow_x < 0) && !absent(ww, ow_o, ow_x)) ||
        (kh_w < 0 && !wh.window_dim.empty()) || kw_w < 0)
      throw Unavailable{"the window dims are not where a convolution has them"};
    const int64_t KH = kh_w < 0 ? 1 : in1.size[size_t(kh_w)], KW = in1.size[size_t(kw_w)];
    const int64_t H = oh_x < 0 ? 1 : in0.size[size_t(oh_x)], W = ow_x < 0 ? 1 : in0.size[size_t(ow_x)];
    const auto xst = strides(in0.size), wst = strides(in1.size);
    auto coord = [&](int a) { return a < 0 ? int64_t{0} : k[size_t(a)]; };        // output coordinate
    auto xstep = [&](int a) { return a < 0 ? int64_t{0} : xst[size_t(a)]; };      // input stride
    auto size_of = [&](const RefTensor& t, const std::string& d) -> int64_t {
      const int a = at_of(t, d);
      return a < 0 ? 0 : t.size[size_t(a)];
    };
    int cin_x = -1, cin_w = -1;  // conv2d: the input-channel dim in x and w
    if (name == "conv2d")
      for (size_t i = 0; i < in0.dims.size() && cin_x < 0; ++i)
        if (int(i) != oh_x && int(i) != ow_x && in0.size[i] > 1 && size_of(out, in0.dims[i]) <= 1 &&
            size_of(in1, in0.dims[i]) > 1) {
          cin_x = int(i);
          cin_w = at_of(in1, in0.dims[i]);
        }
    const int64_t CIN = cin_x >= 0 ? in0.size[size_t(cin_x)] : 1;
    if (cin_x >= 0 && in1.size[size_t(cin_w)] != CIN) throw Unavailable{"the input channels of x and w differ"};
    const bool exact = in0.depth == 0 && in1.depth == 0;
    out.m.resize(size_t(n));  // (whatever the inputs: the fp32 accumulation's own budget)
    for (int64_t e = 0; e < n; ++e, next()) {
      // The output coordinate's other dims (channel, batch) index x and w by name.
      int64_t xb = 0, wb = 0;
      for (size_t i = 0; i < k.size(); ++i) {
        if (int(i) == oh_o || int(i) == ow_o) continue;
        if (const int xi = at_of(in0, out.dims[i]); xi >= 0 && in0.size[size_t(xi)] > 1) xb += k[i] * xst[size_t(xi)];
        if (const int wi = at_of(in1, out.dims[i]); wi >= 0 && in1.size[size_t(wi)] > 1) wb += k[i] * wst[size_t(wi)];
      }
      double acc = 0, acc_e = 0, path = 0;
      int64_t terms = 0;
      for (int64_t y = 0; y < KH; ++y) {
        const int64_t ih = coord(oh_o) * wh.stride - wh.pad_front + y * wh.dilation;
        if (ih < 0 || ih >= H) continue;
        for (int64_t x = 0; x < KW; ++x) {
          const int64_t iw = coord(ow_o) * ww.stride - ww.pad_front + x * ww.dilation;
          if (iw < 0 || iw >= W) continue;
          for (int64_t c = 0; c < CIN; ++c) {
            const size_t xa = size_t(xb + ih * xstep(oh_x) + iw * xstep(ow_x) +
                                     (cin_x >= 0 ? c * xst[size_t(cin_x)] : 0));
            const size_t wa = size_t(wb + (kh_w < 0 ? 0 : y * wst[size_t(kh_w)]) + x * wst[size_t(kw_w)] +
                                     (cin_w >= 0 ? c * wst[size_t(cin_w)] : 0));
            acc += in0.v[xa] * in1.v[wa];
            if (terms++ > 0) path += std::fabs(acc);
            if (!exact)
              acc_e += budget(in0, xa, out.format) * std::fabs(in1.v[wa]) + std::fabs(in0.v[xa]) * budget(in1, wa, out.format);
          }
        }
      }
      out.v[size_t(e)] = acc;
      out.m[size_t(e)] = (acc_e + accumulation_budget(path, out.format) + rounded(acc, out.format)) / out.depth;
    }
    return out;
  }
  if (detail::is_pool(name) && in.size() == 1) {
    // 2-D pooling over the SDSC's two windows (Sdsc::windows): each output position reads the
    // input at position x stride - pad + k for k over the window; avgpoolfwd scales the window's
    // sum by nmap (1 / window size by default), avgpoolnmapfwd divides it by the positions inside
    // the input, maxpoolfwd takes the largest. Error bound as for sum / max reductions.
    if (s.windows.size() != 2) throw Unavailable{"a 2-D pooling needs two windows"};
    if (in0.dims.size() != out.dims.size()) throw Unavailable{"pooling input and output ranks differ"};
    const bundle::Window& wh = s.windows[0];
    const bundle::Window& ww = s.windows[1];
    auto axis = [&](const std::string& d) {
      const auto it = std::find(out.dims.begin(), out.dims.end(), d);
      if (it == out.dims.end() || in0.dims[size_t(it - out.dims.begin())] != d)
        throw Unavailable{"pooling dim '" + d + "' not in the same place in input and output"};
      return size_t(it - out.dims.begin());
    };
    const size_t dh = axis(wh.dim), dw = axis(ww.dim);
    const int64_t kh = s.n_of(wh.window_dim), kw = s.n_of(ww.window_dim);
    const int64_t H = in0.size[dh], W = in0.size[dw];
    const auto ist = strides(in0.size);
    const bool avg = name == "avgpoolfwd", nmap_div = name == "avgpoolnmapfwd";
    const double nmap = constant_value(s, "nmap", 1.0 / double(kh * kw));
    const bool exact = in0.depth == 0;
    if (!exact || avg || nmap_div) out.m.resize(size_t(n));
    for (int64_t e = 0; e < n; ++e, next()) {
      int64_t base = 0;
      for (size_t i = 0; i < k.size(); ++i)
        if (i != dh && i != dw) base += k[i] * ist[i];
      double acc = avg || nmap_div ? 0.0 : -INFINITY, acc_e = 0, path = 0;
      int64_t count = 0;
      for (int64_t y = 0; y < kh; ++y) {
        const int64_t ih = k[dh] * wh.stride - wh.pad_front + y * wh.dilation;
        if (ih < 0 || ih >= H) continue;
        for (int64_t x = 0; x < kw; ++x) {
          const int64_t iw = k[dw] * ww.stride - ww.pad_front + x * ww.dilation;
          if (iw < 0 || iw >= W) continue;
          const size_t at = size_t(base + ih * ist[dh] + iw * ist[dw]);
          const double v = in0.v[at];
          if (avg || nmap_div) acc += v, path += count > 0 ? std::fabs(acc) : 0.0;
          else acc = std::max(acc, v);
          ++count;
          if (!exact) acc_e = avg || nmap_div ? acc_e + budget(in0, at, out.format) : std::max(acc_e, budget(in0, at, out.format));
        }
      }
      const double scale = avg ? nmap : nmap_div ? (count ? 1.0 / double(count) : 0.0) : 1.0;
      out.v[size_t(e)] = acc * scale;
      if (avg || nmap_div) acc_e += accumulation_budget(path, out.format);
      if (!exact || avg || nmap_div)
        out.m[size_t(e)] = (mulz(acc_e, std::fabs(scale)) + rounded(out.v[size_t(e)], out.format)) / out.depth;
    }
    return out;
  }
  if (detail::is_matmul(name) && in.size() == 2) {
    // out [batch..., M, N]; a [batch..., M, K]; b [batch..., K, N] (dims by name).
    const size_t r = out.dims.size();
    if (r < 2) throw Unavailable{"matmul output of rank < 2"};
    const std::string& mdim = out.dims[r - 2];
    const std::string& ndim = out.dims[r - 1];
    const std::string kdim = in0.dims.back();
    auto idx = [](const RefTensor& t, const std::string& d) -> int {
      auto it = std::find(t.dims.begin(), t.dims.end(), d);
      return it == t.dims.end() ? -1 : int(it - t.dims.begin());
    };
    const int ak = idx(in0, kdim), bk = idx(in1, kdim);
    if (ak < 0 || bk < 0 || idx(in0, ndim) >= 0 || idx(in1, mdim) >= 0)
      throw Unavailable{"matmul operands do not have the [M,K] x [K,N] dims"};
    if (!in0.have.empty() || !in1.have.empty()) throw Unavailable{"its input was only sampled"};
    const int64_t K = in0.size[size_t(ak)];
    if (in1.size[size_t(bk)] != K) throw Unavailable{"matmul operands differ in K"};
    for (size_t i = 0; i < r; ++i) {
      const int ia = idx(in0, out.dims[i]), ib = idx(in1, out.dims[i]);
      if ((ia >= 0 && in0.size[size_t(ia)] != 1 && in0.size[size_t(ia)] != out.size[i]) ||
          (ib >= 0 && in1.size[size_t(ib)] != 1 && in1.size[size_t(ib)] != out.size[i]))
        throw Unavailable{"matmul operand and output sizes differ in dim '" + out.dims[i] + "'"};
    }
    for (const auto& d : in0.dims)
      if (d != kdim && idx(out, d) < 0) throw Unavailable{"matmul input dim '" + d + "' not in the output"};
    for (const auto& d : in1.dims)
      if (d != kdim && idx(out, d) < 0) throw Unavailable{"matmul kernel dim '" + d + "' not in the output"};
    const auto ast = strides(in0.size), bst = strides(in1.size);
    // Per output dim, the stride in a and b (0 when absent or broadcast).
    std::vector<int64_t> sa(r, 0), sb(r, 0);
    for (size_t i = 0; i < r; ++i) {
      const int ia = idx(in0, out.dims[i]), ib = idx(in1, out.dims[i]);
      if (ia >= 0 && in0.size[size_t(ia)] != 1) sa[i] = ast[size_t(ia)];
      if (ib >= 0 && in1.size[size_t(ib)] != 1) sb[i] = bst[size_t(ib)];
    }
    const int64_t ka = ast[size_t(ak)], kb = bst[size_t(bk)];
    int64_t every = 1;
    if (uint64_t(n) * uint64_t(K) > opt.full_macs_limit) {
      every = std::max<int64_t>(1, n / int64_t(std::max<uint64_t>(1, opt.sample_elements)));
      out.have.assign(size_t(n), 0);
    }
    // Error bound: m = (sum_k E_a|b| + |a|E_b + the fp32 accumulation's + |r|) / depth, with the
    // operands' budgets E laid out like their values (0 for a kernel input).
    const bool exact = in0.depth == 0 && in1.depth == 0;
    std::vector<double> ea, eb;
    if (!exact) {
      ea.resize(in0.v.size());
      eb.resize(in1.v.size());
      for (size_t i = 0; i < ea.size(); ++i) ea[i] = budget(in0, i, out.format);
      for (size_t i = 0; i < eb.size(); ++i) eb[i] = budget(in1, i, out.format);
    }
    out.m.assign(size_t(n), 0.0);  // (whatever the inputs: the fp32 accumulation's own budget)
    const double* ebv = eb.data();
    std::vector<double> ebt;
    // B with K innermost (a transposed copy), so that the dot products run over contiguous memory.
    const double* bv = in1.v.data();
    int64_t kbb = kb;
    std::vector<double> bt;
    if (every == 1 && kb != 1) {
      const size_t rb = in1.dims.size();
      std::vector<int64_t> nst(rb, 0);
      int64_t stv = K;
      for (size_t d = rb; d-- > 0;)
        if (int(d) != bk) {
          nst[d] = stv;
          stv *= in1.size[d];
        }
      nst[size_t(bk)] = 1;
      bt.resize(in1.v.size());
      if (!exact) ebt.resize(eb.size());
      std::vector<int64_t> c(rb, 0);
      for (size_t e = 0; e < in1.v.size(); ++e) {
        int64_t o = 0;
        for (size_t d = 0; d < rb; ++d) o += c[d] * nst[d];
        bt[size_t(o)] = in1.v[e];
        if (!exact) ebt[size_t(o)] = eb[e];
        for (size_t d = rb; d-- > 0;) {
          if (++c[d] < in1.size[d]) break;
          c[d] = 0;
        }
      }
      for (size_t i = 0; i < r; ++i) {
        const int ib = idx(in1, out.dims[i]);
        sb[i] = ib >= 0 && in1.size[size_t(ib)] != 1 ? nst[size_t(ib)] : 0;
      }
      bv = bt.data();
      if (!exact) ebv = ebt.data();
      kbb = 1;
    }
    for (int64_t e = 0; e < n; ++e, next()) {
      if (every > 1 && (e % every) != (e / every) % every) continue;
      int64_t oa = 0, ob = 0;
      for (size_t i = 0; i < r; ++i) {
        oa += k[i] * sa[i];
        ob += k[i] * sb[i];
      }
      double acc = 0, path = 0, acc_e = 0;
      const double* pa = in0.v.data() + oa;
      const double* pb = bv + ob;
      if (exact) {
        for (int64_t j = 0; j < K; ++j) {
          acc += pa[j * ka] * pb[j * kbb];
          path += std::fabs(acc);
        }
      } else {
        const double* qa = ea.data() + oa;
        const double* qb = ebv + ob;
        for (int64_t j = 0; j < K; ++j) {
          const double x = pa[j * ka], y = pb[j * kbb];
          acc += x * y;
          path += std::fabs(acc);
          acc_e += qa[j * ka] * std::fabs(y) + std::fabs(x) * qb[j * kbb];
        }
      }
      if (K > 0) path -= std::fabs(pa[0] * pb[0]);  // (the first term is not a rounded sum)
      out.m[size_t(e)] = (acc_e + accumulation_budget(path, out.format) + rounded(acc, out.format)) / out.depth;
      out.v[size_t(e)] = acc;
      if (every > 1) out.have[size_t(e)] = 1;
    }
    (void)ost;
    return out;
  }
  throw Unavailable{"no double reference for '" + name + "'"};
}

// compute_op, with the result as the card holds it: a NaN stored in DL16 is the merged NaN/inf
// code, which the next op reads as +inf (fmt::Dl16Rules: every NaN gets the positive code), so
// sqrt -> neg -> relu of -1 is relu(-inf) = 0 on the card, not NaN. (Where the rules decode that
// code to NaN, and in fp32, a NaN stays one.)
RefTensor run_op(const bundle::Sdsc& s, const bundle::ComputeOp& op, const std::vector<const RefTensor*>& inp,
                 const TensorInfo& out_info, const RefOptions& opt) {
  RefTensor out = compute_op(s, op, inp, out_info, opt);
  if (out.format == fmt::DataFormat::SEN169_FP16 && !fmt::k_default_rules.dl16.ninf_decodes_to_nan)
    for (double& v : out.v)
      if (std::isnan(v)) v = std::numeric_limits<double>::infinity();
  return out;
}

}  // namespace

double format_epsilon(fmt::DataFormat f) { return precision_of(f).eps; }

namespace {

// Contribution of each coordinate value of each host dim to the element index in the tensor's
// device image (row-major over layout.device_size): device index = sum over h of T[h][x_h].
std::vector<std::vector<int64_t>> device_tables(const TensorInfo& info) {
  const auto& L = info.layout;
  const size_t nd = L.device_size.size(), hr = info.size.size();
  std::vector<int64_t> w(nd);
  int64_t acc = 1;
  for (size_t k = nd; k-- > 0;) {
    w[k] = acc;
    acc *= L.device_size[k];
  }
  std::vector<std::vector<int64_t>> T(hr);
  for (size_t h = 0; h < hr; ++h) T[h].assign(size_t(info.size[h]), 0);
  std::vector<int64_t> running(hr, 1);
  for (size_t k = nd; k-- > 0;) {
    const int32_t h = L.dim_map[k];
    if (h < 0) continue;
    auto& t = T[size_t(h)];
    for (size_t x = 0; x < t.size(); ++x)
      t[x] += (int64_t(x) / running[size_t(h)] % L.device_size[k]) * w[k];
    running[size_t(h)] *= L.device_size[k];
  }
  return T;
}

// Calls fn(e, d) for every logical element e (row-major over info.size) with d its element index
// in the tensor's device image.
template <class Fn>
void for_each_device_index(const TensorInfo& info, Fn&& fn) {
  const size_t hr = info.size.size();
  if (hr == 0) {
    fn(int64_t(0), int64_t(0));
    return;
  }
  const auto T = device_tables(info);
  const int64_t n = info.numel();
  if (n == 0) return;
  std::vector<int64_t> c(hr, 0);
  const size_t last = hr - 1;
  const auto& tl = T[last];
  int64_t e = 0;
  for (;;) {
    int64_t base = 0;
    for (size_t h = 0; h < last; ++h) base += T[h][size_t(c[h])];
    for (int64_t x = 0; x < info.size[last]; ++x) fn(e++, base + tl[size_t(x)]);
    size_t h = last;
    for (;;) {
      if (h == 0) return;
      --h;
      if (++c[h] < info.size[h]) break;
      c[h] = 0;
    }
  }
}

int64_t device_elements(const TensorInfo& info) {
  return int64_t(info.image_bytes * 8 / uint64_t(fmt::bits_per_element(info.format)));
}

// A tensor as the reference keeps it between ops: as its producer wrote it (logical order of
// the producer's view), with that view's shape and stick layout. A reader whose view has the
// same shape and layout takes the values as they are (only the dims' names may differ: the real
// compiler renames dims from one SDSC to the next); a reader with another view meets it in
// device-image element order, built once on demand (a 256M-element tensor is 2 GB a copy, so
// the common case makes none).
struct Stored {
  RefTensor t;
  std::vector<int64_t> size;
  fmt::StickLayout layout;
  fmt::DataFormat format = fmt::DataFormat::INVALID;  // the writer's view's device format
  int64_t image_elements = 0;
  // The device-image form (device_form): values, `have` and `m` in device element order.
  struct Device {
    std::vector<double> v, m;
    std::vector<uint8_t> have;
  };
  std::optional<Device> device;
};

Stored store_of(RefTensor&& t, const TensorInfo& info) {
  Stored s;
  s.t = std::move(t);
  s.size = info.size;
  s.layout = info.layout;
  s.format = info.format;
  s.image_elements = device_elements(info);
  return s;
}

// The written view as a TensorInfo for for_each_device_index.
TensorInfo written_info(const Stored& s) {
  TensorInfo w;
  w.size = s.size;
  w.layout = s.layout;
  w.format = s.format;
  return w;
}

const Stored::Device& device_form(Stored& s) {
  if (s.device) return *s.device;
  const RefTensor& t = s.t;
  Stored::Device dv;
  dv.v.assign(size_t(s.image_elements), NAN);
  if (!t.have.empty()) dv.have.assign(dv.v.size(), 0);
  if (!t.m.empty()) dv.m.assign(dv.v.size(), NAN);
  // An image of as many elements as the tensor has is all written (the map is one to one);
  // otherwise the elements written are tracked for the padding below.
  const bool padded = s.image_elements != numel(s.size);
  std::vector<uint8_t> written(padded ? dv.v.size() : 0, 0);
  const TensorInfo w = written_info(s);
  for_each_device_index(w, [&](int64_t e, int64_t d) {
    dv.v[size_t(d)] = t.v[size_t(e)];
    if (padded) written[size_t(d)] = 1;
    if (!t.have.empty()) dv.have[size_t(d)] = t.have[size_t(e)];
    if (!t.m.empty()) dv.m[size_t(d)] = t.m[size_t(e)];
  });
  if (padded) {
    // The executor writes whole sticks, their padding lanes (past the stick dim's extent) as
    // zero (fmt::Padding::zero): a later op that reads them (a matmul over a restickify's padded
    // output) sees zeros, not an unwritten NaN.
    const size_t eps = size_t(fmt::k_stick_bytes * 8 / fmt::bits_per_element(s.format));
    for (size_t k = 0; eps && k + eps <= dv.v.size(); k += eps) {
      if (std::find(written.begin() + ptrdiff_t(k), written.begin() + ptrdiff_t(k + eps), 1) ==
          written.begin() + ptrdiff_t(k + eps))
        continue;
      for (size_t l = k; l < k + eps; ++l)
        if (!written[l]) {
          dv.v[l] = 0.0;
          if (!dv.have.empty()) dv.have[l] = 1;
          if (!dv.m.empty()) dv.m[l] = 0.0;
        }
    }
  }
  s.device = std::move(dv);
  return *s.device;
}

// A write at an address something is stored at replaces the stored tensor. When it writes fewer
// elements into an image of the same size (torch-spyre copies an im2col operand into the first
// rows of a zero-filled, padded buffer), the sticks it does not touch keep the stored tensor's
// values in its device form, as memory keeps them; a reader with the writer's own view still
// reads the written tensor as it is. Sampled tensors (`have`) are replaced outright.
void put_at(std::map<Key, Stored>& store, const Key& k, Stored s);

// Error budgets in one form where two device forms meet: an empty m is one rounding of |v|
// (RefTensor::m), made explicit in `nd` when `od` has an m.
void widen_m(Stored::Device& nd, const Stored::Device& od) {
  if (!nd.m.empty() || od.m.empty()) return;
  nd.m.resize(nd.v.size());
  for (size_t d = 0; d < nd.v.size(); ++d) nd.m[d] = std::fabs(nd.v[d]);
}

// Before `s` is stored at HBM key k: tensors stored earlier at higher addresses inside its image,
// in its format, fill the elements its write leaves unwritten, as memory keeps them (torch-spyre
// pads a matmul's K by writing the padding rows, a broadcast constant, at base + 200 rows, then
// the 200 rows at base, and the matmul reads all 256 from base). They stay stored where they are
// (a later read of one that this write overwrote in part would see its old values; no bundle
// seen does that), and a tensor that starts below k reaching into the image is not looked at.
void overlay_inner(std::map<Key, Stored>& store, const Key& k, Stored& s) {
  if (k.lx || s.image_elements == numel(s.size) || !s.t.have.empty()) return;
  const int bits = fmt::bits_per_element(s.format);
  if (bits <= 0 || bits % 8) return;
  const uint64_t end = k.addr + uint64_t(s.image_elements) * uint64_t(bits / 8);
  std::vector<std::pair<uint64_t, Stored*>> inner;
  for (auto it = store.upper_bound(Key{false, k.addr, ~0u}); it != store.end() && !it->first.lx && it->first.addr < end;
       ++it)
    if (it->second.format == s.format && it->second.t.have.empty() && (it->first.addr - k.addr) % uint64_t(bits / 8) == 0)
      inner.emplace_back((it->first.addr - k.addr) / uint64_t(bits / 8), &it->second);
  if (inner.empty()) return;
  device_form(s);
  Stored::Device& nd = *s.device;
  // The executor writes whole sticks (padding lanes zero): a stick the write reaches is all its.
  const size_t eps = size_t(fmt::k_stick_bytes * 8 / bits);
  std::vector<uint8_t> touched(nd.v.size() / eps + 1, 0);
  for_each_device_index(written_info(s), [&](int64_t, int64_t d) { touched[size_t(d) / eps] = 1; });
  for (auto& [off, o] : inner) {
    const Stored::Device& od = device_form(*o);
    widen_m(nd, od);
    bool copied = false;
    for (size_t d = 0; d < od.v.size() && off + d < nd.v.size(); ++d) {
      if (touched[(off + d) / eps] || std::isnan(od.v[d])) continue;
      nd.v[off + d] = od.v[d];
      if (!nd.m.empty()) nd.m[off + d] = od.m.empty() ? std::fabs(od.v[d]) : od.m[d];
      copied = true;
    }
    if (copied) s.t.depth = std::max(s.t.depth, o->t.depth);
  }
}

void put(std::map<Key, Stored>& store, const Key& k, Stored s) {
  overlay_inner(store, k, s);
  put_at(store, k, std::move(s));
}

void put_at(std::map<Key, Stored>& store, const Key& k, Stored s) {
  auto it = store.find(k);
  if (it == store.end() || it->second.format != s.format || it->second.image_elements != s.image_elements ||
      numel(s.size) >= numel(it->second.size) || !it->second.t.have.empty() || !s.t.have.empty()) {
    store.insert_or_assign(k, std::move(s));
    return;
  }
  const Stored::Device& od = device_form(it->second);
  device_form(s);
  Stored::Device& nd = *s.device;
  const size_t eps = size_t(fmt::k_stick_bytes * 8 / fmt::bits_per_element(s.format));
  std::vector<uint8_t> touched(eps ? nd.v.size() / eps + 1 : 0, 0);  // sticks the write reaches
  for_each_device_index(written_info(s), [&](int64_t, int64_t d) { touched[size_t(d) / eps] = 1; });
  // Error budgets: an empty m is one rounding of |v| (RefTensor::m); keep one form.
  widen_m(nd, od);
  for (size_t d = 0; d < nd.v.size() && d < od.v.size(); ++d) {
    if (touched[d / eps]) continue;
    nd.v[d] = od.v[d];
    if (!nd.m.empty()) nd.m[d] = od.m.empty() ? std::fabs(od.v[d]) : od.m[d];
  }
  s.t.depth = std::max(s.t.depth, it->second.t.depth);
  it->second = std::move(s);
}

// coordinateMasking_ on an op's input: the masked coordinates read as the mask constant (as
// the executor does, exec.cpp mask_input); their error budget is 0 (a constant).
void mask_ref(const bundle::Sdsc& s, RefTensor& t) {
  if (!t.have.empty()) throw Unavailable{"its input was only sampled"};
  const double value = constant_value(s, s.constants.at(size_t(s.masking_constant)).name, NAN);
  if (t.depth > 0 && t.m.empty() && detail::for_each_masked(s, t.dims, t.size, [](int64_t) {}) > 0) {
    t.m.resize(t.v.size());  // m = |v| implicitly: make it explicit to zero the masked ones
    for (size_t i = 0; i < t.v.size(); ++i) t.m[i] = std::fabs(t.v[i]);
  }
  detail::for_each_masked(s, t.dims, t.size, [&](int64_t i) {
    t.v[size_t(i)] = value;
    if (!t.m.empty()) t.m[size_t(i)] = 0.0;
  });
}

// A tensor of `info`'s shape that takes its values from `s`'s device form `dv`: the stored
// tensor's depth and format, and `have` / `m` where the stored one has them (zeroed).
RefTensor shaped_like(const Stored& s, const Stored::Device& dv, const TensorInfo& info) {
  RefTensor t = shaped(info);
  t.depth = s.t.depth;
  t.format = s.t.format;
  if (!dv.have.empty()) t.have.assign(t.v.size(), 0);
  if (!dv.m.empty()) t.m.assign(t.v.size(), 0.0);
  return t;
}

// The tensor in `info`'s view from its stored form. In the writer's shape and layout it is the
// stored tensor under the reader's dim names (moved out when `take`: the store will not be read
// again); otherwise each element is read from the device-image form.
RefTensor logical_of(Stored& s, const TensorInfo& info, bool take = false) {
  if (s.image_elements != device_elements(info))
    throw Unavailable{info.name + " is read with another image size than it was written"};
  if (info.size == s.size && info.layout == s.layout) {
    RefTensor t = take ? std::move(s.t) : s.t;
    t.dims = info.dims;
    t.size = info.size;
    return t;
  }
  const Stored::Device& dv = device_form(s);
  RefTensor t = shaped_like(s, dv, info);
  for_each_device_index(info, [&](int64_t e, int64_t d) {
    t.v[size_t(e)] = dv.v[size_t(d)];
    if (!dv.have.empty()) t.have[size_t(e)] = dv.have[size_t(d)];
    if (!dv.m.empty()) t.m[size_t(e)] = dv.m[size_t(d)];
  });
  return t;
}

// read_tensor's values widened to double, converted a piece at a time from the device-format
// elements (no fp32 copy of the whole tensor: 1 GB for a 16384x16384 input).
std::vector<double> read_tensor_f64(Memory& mem, const TensorInfo& info) {
  const std::vector<uint8_t> raw = read_tensor_raw(mem, info);
  const size_t n = size_t(info.numel());
  std::vector<double> v(n);
  constexpr size_t k_piece = 1u << 16;  // a whole number of bytes of every format
  std::vector<float> piece(std::min(n, k_piece));
  const size_t bits = size_t(fmt::bits_per_element(info.format));
  for (size_t i = 0; i < n; i += k_piece) {
    const size_t m = std::min(k_piece, n - i);
    fmt::convert(info.format, raw.data() + i * bits / 8, fmt::DataFormat::IEEE_FP32, piece.data(), m);
    std::copy(piece.begin(), piece.begin() + ptrdiff_t(m), v.begin() + ptrdiff_t(i));
  }
  return v;
}

// A gather's or scatter's rows (bundle::IndirectAccess) in the reference: for each row of the
// value view, the value tensor's row its index picks (the index tensor as the store holds it, or
// a kernel input as memory holds it), and the view's row length in elements.
struct RefRows {
  std::vector<uint64_t> index;
  int64_t row_elems = 0;
};
RefRows ref_rows(const bundle::ResolvedExecution& r, const bundle::IndirectAccess& ia, std::map<Key, Stored>& store,
                 const std::set<uint64_t>& input_at, Memory& mem) {
  const detail::MappedTensor value = detail::map_tensor(r, ia.value_lds);
  const detail::MappedTensor index = detail::map_tensor(r, ia.index_lds);
  std::vector<double> iv;
  if (auto it = store.find(key_of(index)); it != store.end()) {
    iv = logical_of(it->second, index.info).v;
  } else if (index.info.placement == bundle::Placement::hbm && input_at.count(index.info.base)) {
    iv = read_tensor_f64(mem, index.info);
  } else {
    throw Unavailable{r.sdsc->file + ": index tensor " + index.info.name + " is read before anything wrote it"};
  }
  RefRows out;
  out.row_elems = int64_t(detail::indirect_row_bytes(ia, value) * 8 / uint64_t(fmt::bits_per_element(value.info.format)));
  for (int64_t e : detail::indirect_index_positions(ia, value, index.info)) {
    const double v = iv.at(size_t(e));
    if (!(v >= 0)) throw Unavailable{"index " + std::to_string(v) + " of " + index.info.name + " is negative"};
    out.index.push_back(uint64_t(v));
  }
  return out;
}

// The gathered operand: element e of the view (device index d in the view's image, row d / row,
// lane d % row) is the stored value tensor's device element index[d / row] x row + d % row.
RefTensor gathered(Stored& st, const TensorInfo& info, const RefRows& rows) {
  if (st.format != info.format) throw Unavailable{info.name + " is gathered in another format than it was written"};
  const Stored::Device& dv = device_form(st);
  RefTensor t = shaped_like(st, dv, info);
  const int64_t row = rows.row_elems;
  for_each_device_index(info, [&](int64_t e, int64_t d) {
    const size_t src = size_t(int64_t(rows.index.at(size_t(d / row))) * row + d % row);
    if (src >= dv.v.size()) throw Unavailable{info.name + ": an index points past the gathered tensor"};
    t.v[size_t(e)] = dv.v[src];
    if (!dv.have.empty()) t.have[size_t(e)] = dv.have[src];
    if (!dv.m.empty()) t.m[size_t(e)] = dv.m[src];
  });
  return t;
}

// A scatter: the op's result `res` (in the value view `info`) written over the stored value
// tensor's rows that the index picks, later rows over earlier ones; the stored tensor keeps its
// writer's view. Error budgets are merged as depth x m (RefTensor::m) under the larger depth.
void scatter_into(Stored& st, const RefTensor& res, const TensorInfo& info, const RefRows& rows) {
  if (st.format != info.format) throw Unavailable{info.name + " is scattered in another format than it was written"};
  if (!st.t.have.empty() || !res.have.empty()) throw Unavailable{"a scatter of a sampled tensor"};
  Stored::Device dv = device_form(st);
  const int depth = std::max(st.t.depth, res.depth);
  if (dv.m.empty()) {
    dv.m.resize(dv.v.size());
    for (size_t i = 0; i < dv.v.size(); ++i) dv.m[i] = std::fabs(dv.v[i]);
  }
  if (depth > 0)
    for (double& x : dv.m) x = x * st.t.depth / depth;
  const int64_t row = rows.row_elems;
  for_each_device_index(info, [&](int64_t e, int64_t d) {
    const size_t dst = size_t(int64_t(rows.index.at(size_t(d / row))) * row + d % row);
    if (dst >= dv.v.size()) throw Unavailable{info.name + ": an index points past the scattered tensor"};
    dv.v[dst] = res.v[size_t(e)];
    const double m = res.m.empty() ? std::fabs(res.v[size_t(e)]) : res.m[size_t(e)];
    dv.m[dst] = depth > 0 ? m * res.depth / depth : 0.0;
  });
  RefTensor& t = st.t;
  t.depth = depth;
  t.m.assign(t.v.size(), 0.0);
  for_each_device_index(written_info(st), [&](int64_t e, int64_t d) {
    t.v[size_t(e)] = dv.v[size_t(d)];
    t.m[size_t(e)] = dv.m[size_t(d)];
  });
  st.device.reset();
}

}  // namespace

RefResult reference(const std::vector<bundle::ResolvedExecution>& plan,
                    const std::vector<KernelTensor>& kernel, Memory& mem, const RefOptions& opt) {
  RefResult res;
  std::map<Key, Stored> store;
  std::map<Key, std::string> broken;  // tensors whose reference could not be computed, and why
  std::set<uint64_t> input_at;
  for (const auto& kt : kernel)
    if (kt.read_first) input_at.insert(kt.info.base);
  for (const auto& r : plan) {
    const bundle::Sdsc& s = *r.sdsc;
    for (const auto& op : s.compute_ops) {
      if (op.outputs.size() != 1) continue;
      const auto ot = detail::map_tensor(r, op.outputs[0]);
      const Key okey = key_of(ot);
      try {
        const bool red = detail::is_reduction(op.op_func_name);
        // Operands in this SDSC's views: a stored tensor read in the view it was written in is
        // used where it is (renamed to this reader's dims); any other is a converted copy, as is
        // every operand of an op with coordinate masking (mask_ref changes them).
        const bool masked = !s.coordinate_masking.empty();
        std::vector<RefTensor> owned;
        owned.reserve(op.inputs.size());
        std::vector<const RefTensor*> in;
        auto operand = [&](Stored& st, const TensorInfo& info) {
          const bool same_view = info.size == st.size && info.layout == st.layout &&
                                 st.image_elements == device_elements(info);
          const bool shared = std::find(in.begin(), in.end(), &st.t) != in.end();
          if (same_view && !masked && (!shared || st.t.dims == info.dims)) {
            st.t.dims = info.dims;
            in.push_back(&st.t);
          } else {
            owned.push_back(logical_of(st, info));
            in.push_back(&owned.back());
          }
        };
        for (uint32_t i : op.inputs) {
          if (red && i == op.outputs[0]) continue;
          const auto t = detail::map_tensor(r, i);
          const Key key = key_of(t);
          if (const bundle::IndirectAccess* ia = s.indirect_of(i)) {
            auto it = store.find(key);
            if (it == store.end()) {
              if (auto b = broken.find(key); b != broken.end()) throw Unavailable{b->second};
              throw Unavailable{s.file + ": " + t.info.name + " is gathered before anything wrote it"};
            }
            owned.push_back(gathered(it->second, t.info, ref_rows(r, *ia, store, input_at, mem)));
            in.push_back(&owned.back());
            continue;
          }
          auto it = store.find(key);
          if (it != store.end()) {
            if (!it->second.t.have.empty()) throw Unavailable{"its input was only sampled"};
            operand(it->second, t.info);
            continue;
          }
          if (auto b = broken.find(key); b != broken.end()) throw Unavailable{b->second};
          if (t.info.placement != bundle::Placement::hbm || !input_at.count(t.info.base))
            throw Unavailable{s.file + ": " + t.info.name + " is read before anything wrote it"};
          // A kernel input, as the device holds it, in this SDSC's view.
          RefTensor x;
          x.dims = t.info.dims;
          x.size = t.info.size;
          x.format = t.info.format;
          x.v = read_tensor_f64(mem, t.info);
          operand(store.emplace(key, store_of(std::move(x), t.info)).first->second, t.info);
        }
        if (masked)
          for (auto& x : owned) mask_ref(s, x);
        if (const bundle::IndirectAccess* ia = s.indirect_of(op.outputs[0])) {
          auto it = store.find(okey);
          if (it == store.end()) throw Unavailable{s.file + ": " + ot.info.name + " is scattered into before anything wrote it"};
          const RefRows rows = ref_rows(r, *ia, store, input_at, mem);
          scatter_into(it->second, run_op(s, op, in, ot.info, opt), ot.info, rows);
          continue;
        }
        RefTensor res = run_op(s, op, in, ot.info, opt);
        if (in.size() == 1)  // fp32todl16 / dl16tofp32: in the conversion's staggered order, as the executor
          if (const int ax = detail::stagger_axis(s, op.op_func_name, detail::map_tensor(r, op.inputs[0]).info, ot.info);
              ax >= 0)
            for (std::vector<double>* x : {&res.v, &res.m})
              if (!x->empty()) detail::stagger(op.op_func_name, reinterpret_cast<uint8_t*>(x->data()), sizeof(double), res.size, ax);
        put(store, okey, store_of(std::move(res), ot.info));
        broken.erase(okey);
      } catch (const Unavailable& u) {
        store.erase(okey);
        broken[okey] = u.why.find(": ") != std::string::npos
                           ? u.why
                           : s.file + ": '" + op.op_func_name + "': " + u.why;
      }
    }
  }
  for (size_t k = 0; k < kernel.size(); ++k) {
    const KernelTensor& kt = kernel[k];
    if (!kt.written) continue;
    const Key key{false, kt.info.base, 0};
    auto it = store.find(key);
    if (it != store.end()) {
      try {
        // The store is not read again: the vectors of the last output at this address move out.
        bool last = true;
        for (size_t j = k + 1; j < kernel.size(); ++j)
          last = last && !(kernel[j].written && kernel[j].info.base == kt.info.base);
        res.outputs[k] = logical_of(it->second, kt.info, last);
      } catch (const Unavailable& u) {
        res.unavailable[k] = u.why;
      }
    } else {
      auto b = broken.find(key);
      res.unavailable[k] = b != broken.end() ? b->second : "not computed";
    }
  }
  return res;
}

namespace {

// compare() over a tensor given in pieces (add, in any order; merge: another piece's, compared
// apart). One piece, the whole tensor, is compare() itself. The tolerance comes from the depth and
// format of the reference, which every piece has the same.
struct CompareAcc {
  bool ok = true;
  Comparison c;
  fmt::DataFormat format = fmt::DataFormat::INVALID;
  int depth = 0;

  void add(std::span<const float> device, const RefTensor& ref) {
    format = ref.format;
    depth = ref.depth;
    if (device.size() != ref.v.size()) ok = false;
    const size_t n = std::min(device.size(), ref.v.size());
    const Precision pr = precision_of(format);
    const double top = pr.max > 0 ? pr.max : INFINITY;
    const double tol = std::max(1, depth) * pr.eps;
    // DL16 has one code for NaN and infinity, which reads back as an infinity (or as NaN, by
    // fmt::Dl16Rules): either stands for a NaN, and for an infinity.
    const bool merged = format == fmt::DataFormat::SEN169_FP16;
    auto fail = [&] { ok = false, c.norm_err = INFINITY; };
    for (size_t i = 0; i < n; ++i) {
      if (!ref.have.empty() && !ref.have[i]) continue;
      ++c.compared;
      const double r = ref.v[i], d = double(device[i]);
      if (std::isnan(r)) {  // sqrt(-1), 0/0, inf - inf
        if (!std::isnan(d) && !(merged && std::isinf(d))) fail();
        continue;
      }
      // The largest finite value (saturation) or an infinity (an fp32 step overflowed first, or
      // the format does not saturate), of the reference's sign: what the card gives beyond the
      // format's range, and may give where the reference is within its error budget of it.
      const bool at_top = !std::isnan(d) && std::signbit(d) == std::signbit(r) && std::fabs(d) >= top;
      if (std::isinf(r)) {
        if (!at_top && !(merged && std::isnan(d))) fail();
        continue;
      }
      // The magnitude that got rounded on the way: the error bound m, at least |r| (a NaN bound
      // falls back to |r|, the single-rounding check), at least the format's floor below its tiny.
      const double mi = ref.m.empty() ? 0.0 : ref.m[i];
      const double den = rounded_mag(mi > std::fabs(r) ? mi : std::fabs(r), pr);
      const double allowed = tol * den;  // the error the tolerance allows here
      if (std::fabs(r) + allowed > top && at_top) continue;
      if (std::fabs(r) - allowed > top || std::isnan(d) || std::isinf(d)) {
        fail();
        continue;
      }
      const double e = std::fabs(d - r);
      c.max_abs = std::max(c.max_abs, e);
      if (r != 0) c.max_rel = std::max(c.max_rel, e / std::fabs(r));
      c.norm_err = std::max(c.norm_err, den > 0 ? e / den : (e > 0 ? INFINITY : 0.0));
    }
  }
  void merge(const CompareAcc& o) {
    if (o.c.compared) format = o.format, depth = o.depth;
    ok = ok && o.ok;
    c.compared += o.c.compared;
    c.max_abs = std::max(c.max_abs, o.c.max_abs);
    c.max_rel = std::max(c.max_rel, o.c.max_rel);
    c.norm_err = std::max(c.norm_err, o.c.norm_err);
  }
  Comparison finish() {
    c.tolerance = std::max(1, depth) * format_epsilon(format);
    c.pass = ok && c.compared > 0 && c.norm_err <= c.tolerance;
    return c;
  }
};

// check_streamed's view of the plan: every op's operands and result by Key.
struct StreamOp {
  const bundle::Sdsc* sdsc = nullptr;
  const bundle::ComputeOp* op = nullptr;
  std::vector<Key> in;
  Key out;
  TensorInfo out_info;
};
struct StreamPlan {
  std::vector<StreamOp> ops;
  TensorInfo common;                          // the shape, layout and format of the images
  std::map<Key, TensorInfo> streamed_inputs;  // kernel inputs in that view
  std::map<Key, TensorInfo> bcast_inputs;     // kernel inputs broadcast over it
  std::map<size_t, Key> outputs;              // kernel outputs: where the reference holds each
};

// The plan as check_streamed runs it, or nullopt when it does not qualify (reference.h).
std::optional<StreamPlan> stream_plan(const std::vector<bundle::ResolvedExecution>& plan,
                                      const std::vector<KernelTensor>& kernel) {
  StreamPlan sp;
  std::set<uint64_t> input_at;
  for (const auto& kt : kernel)
    if (kt.read_first) input_at.insert(kt.info.base);
  bool have_common = false;
  auto same_view = [&](const TensorInfo& i) { return i.size == sp.common.size && i.layout == sp.common.layout; };
  std::set<Key> produced;
  std::vector<std::pair<uint64_t, uint64_t>> written, read;  // HBM (base, image bytes)
  for (const auto& r : plan) {
    const bundle::Sdsc& s = *r.sdsc;
    if (!s.coordinate_masking.empty()) return std::nullopt;
    for (const auto& op : s.compute_ops) {
      if (!ops::is_elementwise(op.op_func_name) || op.outputs.size() != 1 || op.inputs.empty())
        return std::nullopt;
      const auto ot = detail::map_tensor(r, op.outputs[0]);
      if (!have_common) {
        sp.common = ot.info;
        have_common = true;
        const int bits = fmt::bits_per_element(sp.common.format);
        if (bits <= 0 || sp.common.numel() == 0 || !detail::one_dim_stick(sp.common.layout) ||
            sp.common.image_bytes != fmt::bytes_for(sp.common.format, size_t(sp.common.numel())))
          return std::nullopt;
      }
      if (ot.info.gapped || !same_view(ot.info)) return std::nullopt;
      StreamOp so;
      so.sdsc = &s;
      so.op = &op;
      so.out = key_of(ot);
      so.out_info = ot.info;
      for (uint32_t i : op.inputs) {
        const auto t = detail::map_tensor(r, i);
        const Key k = key_of(t);
        if (t.info.gapped) return std::nullopt;
        if (produced.count(k)) {
          if (!same_view(t.info)) return std::nullopt;
        } else {
          if (t.info.placement != bundle::Placement::hbm || !input_at.count(t.info.base)) return std::nullopt;
          if (same_view(t.info)) {
            if (sp.bcast_inputs.count(k)) return std::nullopt;
            sp.streamed_inputs.emplace(k, t.info);
          } else {
            // A broadcast operand: smaller than the images (a tensor of their shape in another
            // layout is a relayout, which the whole reference takes), read in one view only.
            if (sp.streamed_inputs.count(k) || t.info.size == sp.common.size ||
                t.info.size.size() != sp.common.size.size())
              return std::nullopt;
            for (size_t d = 0; d < t.info.size.size(); ++d)
              if (t.info.size[d] != 1 && t.info.size[d] != sp.common.size[d]) return std::nullopt;
            if (auto [it, fresh] = sp.bcast_inputs.emplace(k, t.info);
                !fresh && !(it->second.size == t.info.size && it->second.layout == t.info.layout))
              return std::nullopt;
          }
          read.emplace_back(t.info.base, t.info.image_bytes);
        }
        so.in.push_back(k);
      }
      produced.insert(so.out);
      if (ot.info.placement == bundle::Placement::hbm) written.emplace_back(ot.info.base, ot.info.image_bytes);
      sp.ops.push_back(std::move(so));
    }
  }
  if (sp.ops.empty()) return std::nullopt;
  for (const auto& [w, nw] : written)
    for (const auto& [x, nx] : read)
      if (w < x + nx && x < w + nw) return std::nullopt;
  for (size_t k = 0; k < kernel.size(); ++k) {
    const KernelTensor& kt = kernel[k];
    if (!kt.written) continue;
    const Key key{false, kt.info.base, 0};
    if (!produced.count(key) || !same_view(kt.info) || kt.info.placement != bundle::Placement::hbm)
      return std::nullopt;
    sp.outputs[k] = key;
  }
  return sp;
}


}  // namespace

Comparison compare(std::span<const float> device, const RefTensor& ref) {
  CompareAcc a;
  a.add(device, ref);
  a.format = ref.format;  // (an empty tensor's tolerance too)
  a.depth = ref.depth;
  return a.finish();
}

bool can_check_streamed(const std::vector<bundle::ResolvedExecution>& plan,
                        const std::vector<KernelTensor>& kernel) {
  try {
    return stream_plan(plan, kernel).has_value();
  } catch (const ExecError&) {
    return false;  // a tensor it cannot map: reference() says which
  }
}

std::optional<StreamedCheck> check_streamed(const std::vector<bundle::ResolvedExecution>& plan,
                                            const std::vector<KernelTensor>& kernel, Memory& mem,
                                            const RefOptions& opt) {
  std::optional<StreamPlan> spo;
  try {
    spo = stream_plan(plan, kernel);
  } catch (const ExecError&) {
    return std::nullopt;
  }
  if (!spo) return std::nullopt;
  const StreamPlan& sp = *spo;
  const TensorInfo& c = sp.common;
  const int64_t eps = int64_t(fmt::k_stick_bytes) * 8 / fmt::bits_per_element(c.format);
  const int64_t total = c.numel();
  // Whole sticks, 2^14 elements (128 KiB of doubles a tensor: the chunk stays in cache).
  const int64_t chunk = std::max<int64_t>(eps, (int64_t(1) << 14) / eps * eps);
  auto flat = [](fmt::DataFormat f, int64_t n) {
    RefTensor t;
    t.dims = {"e"};
    t.size = {n};
    t.format = f;
    return t;
  };
  // Broadcast operands whole (logical order), with the host element step of a step along each
  // device dim of the images (0 along a broadcast dim); a one-element operand is used as it is.
  struct Bcast {
    RefTensor t;
    std::vector<int64_t> step;
  };
  std::map<Key, Bcast> bc;
  for (const auto& [k, info] : sp.bcast_inputs) {
    Bcast b;
    b.t = flat(info.format, info.numel());
    b.t.v = read_tensor_f64(mem, info);
    if (info.numel() != 1) b.step = detail::broadcast_steps(c.layout, c.size, info.size);
    bc.emplace(k, std::move(b));
  }
  // Each half of the images (split at a chunk boundary, whatever the machine) runs on a thread
  // of its own; the halves' counts are added and their maxima taken, so the result does
  // not depend on the threads' timing. Memory::read is called under a lock.
  std::mutex mem_lock;
  struct Part {
    int64_t lo = 0, hi = 0;
    std::map<size_t, CompareAcc> acc;
    std::map<Key, std::string> broken;
    std::vector<uint8_t> raw;
    std::vector<float> f32;
    std::exception_ptr error;
  };
  auto read = [&](Part& p, const TensorInfo& info, int64_t e0, int64_t n, std::vector<double>* out) {
    const uint64_t bits = uint64_t(fmt::bits_per_element(info.format));
    p.raw.resize(size_t(uint64_t(n) * bits / 8));
    {
      std::lock_guard<std::mutex> hold(mem_lock);
      mem.read(info.base + uint64_t(e0) * bits / 8, p.raw.data(), p.raw.size());
    }
    p.f32.resize(size_t(n));  // through fp32, as read_tensor gives the values
    fmt::convert(info.format, p.raw.data(), fmt::DataFormat::IEEE_FP32, p.f32.data(), size_t(n));
    if (out) out->assign(p.f32.begin(), p.f32.end());
  };
  // One pass: each chunk's reference, then its comparison (the tolerance needs only the depth
  // and format, CompareAcc::finish).
  auto run = [&](Part& p) {
    for (int64_t e0 = p.lo; e0 < p.hi; e0 += chunk) {
      const int64_t n = std::min(chunk, p.hi - e0);
      std::map<Key, RefTensor> val;  // this chunk of every tensor, in image order
      for (const auto& [k, info] : sp.streamed_inputs) {
        RefTensor t = flat(info.format, n);
        read(p, info, e0, n, &t.v);
        val.emplace(k, std::move(t));
      }
      std::map<Key, RefTensor> expanded;
      for (const StreamOp& so : sp.ops) {
        try {
          std::vector<const RefTensor*> in;
          for (const Key& k : so.in) {
            if (auto b = p.broken.find(k); b != p.broken.end()) throw Unavailable{b->second};
            if (auto it = val.find(k); it != val.end()) {
              in.push_back(&it->second);
              continue;
            }
            const Bcast& b = bc.at(k);
            if (b.step.empty()) {
              in.push_back(&b.t);
              continue;
            }
            auto [it, fresh] = expanded.try_emplace(k);
            if (fresh) {
              RefTensor& x = it->second;
              x = flat(b.t.format, n);
              x.v.resize(size_t(n));
              const int64_t lane = b.step.back();
              detail::for_each_stick_base(c.layout.device_size, b.step, eps, e0, n, [&](int64_t e, int64_t base) {
                for (int64_t l = 0; l < eps; ++l) x.v[size_t(e + l)] = b.t.v[size_t(base + l * lane)];
              });
            }
            in.push_back(&it->second);
          }
          TensorInfo oi = so.out_info;
          oi.dims = {"e"};
          oi.size = {n};
          val.insert_or_assign(so.out, run_op(*so.sdsc, *so.op, in, oi, opt));
          p.broken.erase(so.out);
        } catch (const Unavailable& u) {
          val.erase(so.out);
          p.broken[so.out] = u.why.find(": ") != std::string::npos
                                 ? u.why
                                 : so.sdsc->file + ": '" + so.op->op_func_name + "': " + u.why;
        }
      }
      for (const auto& [k, key] : sp.outputs) {
        auto it = val.find(key);
        if (it == val.end()) continue;
        read(p, kernel[k].info, e0, n, nullptr);
        p.acc[k].add(p.f32, it->second);
      }
    }
  };
  const int64_t chunks = (total + chunk - 1) / chunk;
  Part parts[2];
  parts[0].hi = parts[1].lo = std::min(total, chunks / 2 * chunk);
  parts[1].hi = total;
  auto both = [&] {
    auto guarded = [&](Part& p) {
      try {
        run(p);
      } catch (...) {
        p.error = std::current_exception();
      }
    };
    std::thread second;
    try {
      second = std::thread(guarded, std::ref(parts[1]));
    } catch (const std::system_error&) {
      guarded(parts[1]);  // no thread to be had: both halves here, the same figures
    }
    guarded(parts[0]);
    if (second.joinable()) second.join();
    for (const Part& p : parts)
      if (p.error) std::rethrow_exception(p.error);
  };
  both();
  StreamedCheck res;
  for (const auto& [k, key] : sp.outputs) {
    if (parts[0].acc.count(k) || parts[1].acc.count(k)) {
      CompareAcc all;
      for (const Part& p : parts)
        if (auto it = p.acc.find(k); it != p.acc.end()) all.merge(it->second);
      res.outputs[k] = all.finish();
      res.depth[k] = all.depth;
    } else {
      std::string why = "not computed";
      for (const Part& p : parts)
        if (auto b = p.broken.find(key); b != p.broken.end()) why = b->second;
      res.unavailable[k] = why;
    }
  }
  return res;
}

}  // namespace vspyre::exec
