// Elementwise, reduction, cast/quantisation, scan, pooling and indirect-access opFuncs.
#include "sim/ops/ops.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <sstream>
#include <utility>

#include "sim/ops/detail.h"

namespace vspyre::ops {

using namespace detail;

namespace detail {

std::string shape_str(std::span<const int64_t> s) {
  std::ostringstream o;
  o << '(';
  for (size_t i = 0; i < s.size(); ++i) o << (i ? "," : "") << s[i];
  o << ')';
  return o.str();
}

int norm_dim(int dim, int rank) {
  const int d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank)
    fail("dim " + std::to_string(dim) + " out of range for rank " + std::to_string(rank));
  return d;
}

int64_t product(std::span<const int64_t> s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < std::min(to, s.size()); ++i) p *= s[i];
  return p;
}

std::vector<int64_t> dense_strides(std::span<const int64_t> s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

std::vector<int64_t> bcast_strides(std::span<const int64_t> in, std::span<const int64_t> out,
                                   const char* what) {
  if (in.size() > out.size())
    fail(std::string(what) + ": operand " + shape_str(in) + " has more dims than output " +
         shape_str(out));
  const auto cs = dense_strides(in);
  const size_t shift = out.size() - in.size();
  std::vector<int64_t> st(out.size(), 0);
  for (size_t j = shift; j < out.size(); ++j) {
    const size_t i = j - shift;
    if (in[i] == out[j])
      st[j] = in[i] == 1 ? 0 : cs[i];
    else if (in[i] == 1)
      st[j] = 0;
    else
      fail(std::string(what) + ": operand " + shape_str(in) + " does not broadcast to output " +
           shape_str(out));
  }
  return st;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Views, attrs, load/store
// ---------------------------------------------------------------------------------------------

int64_t TensorView::numel() const { return product(size); }

std::vector<int64_t> TensorView::strides() const {
  if (stride.empty()) return dense_strides(size);
  if (stride.size() != size.size()) fail("stride rank differs from size rank");
  return stride;
}

TensorView view(void* data, DataFormat f, std::vector<int64_t> size) {
  return TensorView{data, f, std::move(size), {}, 0};
}
TensorView view(const void* data, DataFormat f, std::vector<int64_t> size) {
  return view(const_cast<void*>(data), f, std::move(size));
}

double Attrs::get(std::string_view name, double fallback) const {
  auto it = consts.find(name);
  return it == consts.end() ? fallback : it->second;
}
Attrs& Attrs::set(std::string_view name, double value) {
  consts[std::string(name)] = value;
  return *this;
}

bool is_integer_format(DataFormat f) { return fmt::is_integer(f); }

namespace {

bool is_dense(const TensorView& t) {
  return t.stride.empty() || t.stride == dense_strides(t.size);
}

void check_view(const TensorView& t, const char* what) {
  if (!t.data && t.numel() > 0) fail(std::string(what) + ": null data");
  if (!fmt::is_convertible(t.format))
    fail(std::string(what) + ": format " + std::string(fmt::name(t.format)) + " not supported");
  for (int64_t s : t.size)
    if (s < 0) fail(std::string(what) + ": negative size");
}

// Device tensor -> dense buffer of `to` (a byte-aligned format), or the reverse.
void move_dense(const TensorView& t, DataFormat dense_fmt, void* dense, bool to_dense,
                const fmt::ConvertRules& r) {
  check_view(t, "tensor");
  const int64_t n = t.numel();
  if (n == 0) return;
  const int bits = fmt::bits_per_element(t.format);
  if (is_dense(t) && (t.offset * bits) % 8 == 0) {
    char* base = static_cast<char*>(t.data) + t.offset * bits / 8;
    if (to_dense)
      fmt::convert(t.format, base, dense_fmt, dense, size_t(n), r);
    else
      fmt::convert(dense_fmt, dense, t.format, base, size_t(n), r);
    return;
  }
  fmt::StridedNest nest;
  const auto st = t.strides();
  const auto ds = dense_strides(t.size);
  for (size_t i = t.size.size(); i-- > 0;) {
    nest.size.push_back(t.size[i]);
    (to_dense ? nest.stride_src : nest.stride_dst).push_back(st[i]);
    (to_dense ? nest.stride_dst : nest.stride_src).push_back(ds[i]);
  }
  (to_dense ? nest.offset_src : nest.offset_dst) = t.offset;
  if (to_dense)
    fmt::convert_nest(t.format, t.data, dense_fmt, dense, nest, r);
  else
    fmt::convert_nest(dense_fmt, dense, t.format, t.data, nest, r);
}

}  // namespace

std::vector<float> load_f32(const TensorView& t, const fmt::ConvertRules& r) {
  std::vector<float> v(size_t(t.numel()));
  move_dense(t, DataFormat::IEEE_FP32, v.data(), true, r);
  return v;
}
void store_f32(const float* values, const TensorView& t, const fmt::ConvertRules& r) {
  move_dense(t, DataFormat::IEEE_FP32, const_cast<float*>(values), false, r);
}
std::vector<int64_t> load_i64(const TensorView& t) {
  std::vector<int64_t> v(size_t(t.numel()));
  move_dense(t, DataFormat::IEEE_INT64, v.data(), true, fmt::k_default_rules);
  return v;
}
void store_i64(const int64_t* values, const TensorView& t, const fmt::ConvertRules& r) {
  move_dense(t, DataFormat::IEEE_INT64, const_cast<int64_t*>(values), false, r);
}

std::vector<int64_t> broadcast_shape(std::span<const int64_t> a, std::span<const int64_t> b) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t j = 0; j < r; ++j) {
    const int64_t x = j + a.size() >= r ? a[j + a.size() - r] : 1;
    const int64_t y = j + b.size() >= r ? b[j + b.size() - r] : 1;
    if (x != y && x != 1 && y != 1)
      fail("shapes " + shape_str(a) + " and " + shape_str(b) + " do not broadcast");
    out[j] = x == 1 ? y : x;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Elementwise
// ---------------------------------------------------------------------------------------------

namespace {

// Elementwise ops go through fp32 in chunks of k_chunk output elements when they can: whole-
// tensor fp32 copies of a 256M-element operand cost 1 GB each, and their fresh pages (the
// kernel zeroing them) cost more than the arithmetic. Each element is converted and rounded
// exactly as in one pass over the whole tensor (the conversions are element by element).
constexpr int64_t k_chunk = 16384;

// `t` read in chunks of the output's flat index: dense, byte-addressable at any chunk start, and
// of the output's shape (a broadcast operand is read whole instead).
bool chunkable(const TensorView& t, const TensorView& out) {
  const int bits = fmt::bits_per_element(t.format);
  return t.size == out.size && is_dense(t) && bits % 8 == 0 && (t.offset * bits) % 8 == 0;
}

// Elements [i0, i0 + n) of a chunkable view, as a dense view of their own: move_dense converts
// them in one call, as it does a whole dense tensor.
TensorView chunk_of(const TensorView& t, int64_t i0, int64_t n) {
  return TensorView{t.data, t.format, {n}, {}, t.offset + i0};
}
void load_chunk(const TensorView& t, int64_t i0, int64_t n, float* dst, const fmt::ConvertRules& r) {
  move_dense(chunk_of(t, i0, n), DataFormat::IEEE_FP32, dst, true, r);
}
void store_chunk(const float* src, const TensorView& t, int64_t i0, int64_t n, const fmt::ConvertRules& r) {
  move_dense(chunk_of(t, i0, n), DataFormat::IEEE_FP32, const_cast<float*>(src), false, r);
}

// Element offsets into a broadcast operand (strides `st`, in elements) of the output elements
// [i0, i0 + n) of `shape`, row-major, into `off`.
void bcast_offsets(std::span<const int64_t> shape, const std::vector<int64_t>& st, int64_t i0, int64_t n,
                   int64_t* off) {
  const size_t rank = shape.size();
  std::vector<int64_t> idx(rank, 0);
  int64_t o = 0, rem = i0;
  for (size_t d = rank; d-- > 0;) {
    idx[d] = rem % shape[d];
    rem /= shape[d];
    o += idx[d] * st[d];
  }
  for (int64_t k = 0; k < n; ++k) {
    off[k] = o;
    for (size_t d = rank; d-- > 0;) {
      o += st[d];
      if (++idx[d] < shape[d]) break;
      o -= st[d] * shape[d];
      idx[d] = 0;
    }
  }
}

// One operand of an elementwise op run in chunks of the output: read chunk by chunk where it is
// chunkable, otherwise (it broadcasts) converted whole once and gathered by offsets; a scalar
// fills the chunk once.
class ChunkOperand {
 public:
  ChunkOperand(const TensorView& t, const TensorView& out, const fmt::ConvertRules& r, const char* what,
               size_t chunk)
      : m_t(t), m_out(out), m_rules(r), m_chunked(chunkable(t, out)), m_buf(chunk) {
    if (m_chunked) return;
    m_whole = load_f32(t, r);
    m_strides = bcast_strides(t.size, out.size, what);
    if (m_whole.size() == 1) std::fill(m_buf.begin(), m_buf.end(), m_whole[0]);
    else m_off.resize(chunk);
  }
  // Output elements [i0, i0 + n) of this operand, in fp32.
  const float* get(int64_t i0, int64_t n) {
    if (m_chunked) {
      load_chunk(m_t, i0, n, m_buf.data(), m_rules);
    } else if (m_whole.size() != 1) {
      bcast_offsets(m_out.size, m_strides, i0, n, m_off.data());
      for (int64_t k = 0; k < n; ++k) m_buf[size_t(k)] = m_whole[size_t(m_off[size_t(k)])];
    }
    return m_buf.data();
  }

 private:
  const TensorView& m_t;
  const TensorView& m_out;
  const fmt::ConvertRules& m_rules;
  bool m_chunked;
  std::vector<float> m_buf, m_whole;
  std::vector<int64_t> m_strides, m_off;
};

// out = f(in...) elementwise, in chunks of k_chunk output elements, when the output and at least
// one operand are chunkable (an op whose every operand broadcasts gains nothing from chunks).
// Returns false, having done nothing, otherwise.
template <size_t N, class F, size_t... I>
bool elementwise_chunked(const std::array<const TensorView*, N>& in, const TensorView& out,
                         const fmt::ConvertRules& rules, const char* what, F f, std::index_sequence<I...>) {
  if (!chunkable(out, out) || !(chunkable(*in[I], out) || ...)) return false;
  const int64_t total = out.numel();
  const size_t chunk = static_cast<size_t>(std::min(k_chunk, total));
  std::array<std::optional<ChunkOperand>, N> ops;
  (ops[I].emplace(*in[I], out, rules, what, chunk), ...);
  std::vector<float> r(chunk);
  for (int64_t i0 = 0; i0 < total; i0 += k_chunk) {
    const int64_t n = std::min(k_chunk, total - i0);
    const std::array<const float*, N> v{ops[I]->get(i0, n)...};
    for (int64_t k = 0; k < n; ++k) r[size_t(k)] = f(v[I][k]...);
    store_chunk(r.data(), out, i0, n, rules);
  }
  return true;
}

template <class F>
void elementwise2(const TensorView& a, const TensorView& b, const TensorView& out,
                  const Attrs& attrs, const char* what, F f) {
  if (elementwise_chunked<2>({&a, &b}, out, attrs.rules, what, f, std::make_index_sequence<2>{})) return;
  const auto A = load_f32(a, attrs.rules), B = load_f32(b, attrs.rules);
  std::array<std::vector<int64_t>, 2> st{bcast_strides(a.size, out.size, what),
                                         bcast_strides(b.size, out.size, what)};
  std::vector<float> R(size_t(out.numel()));
  iterate<2>(out.size, st, [&](int64_t i, const std::array<int64_t, 2>& o) {
    R[size_t(i)] = f(A[size_t(o[0])], B[size_t(o[1])]);
  });
  store_f32(R.data(), out, attrs.rules);
}

template <class F>
void elementwise3(const TensorView& a, const TensorView& b, const TensorView& c,
                  const TensorView& out, const char* what, F f) {
  if (elementwise_chunked<3>({&a, &b, &c}, out, fmt::k_default_rules, what, f, std::make_index_sequence<3>{}))
    return;
  const auto A = load_f32(a), B = load_f32(b), C = load_f32(c);
  std::array<std::vector<int64_t>, 3> st{bcast_strides(a.size, out.size, what),
                                         bcast_strides(b.size, out.size, what),
                                         bcast_strides(c.size, out.size, what)};
  std::vector<float> R(size_t(out.numel()));
  iterate<3>(out.size, st, [&](int64_t i, const std::array<int64_t, 3>& o) {
    R[size_t(i)] = f(A[size_t(o[0])], B[size_t(o[1])], C[size_t(o[2])]);
  });
  store_f32(R.data(), out);
}

float sigmoidf(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float softplusf(float x, float beta, float thresh) {
  return beta * x > thresh ? x : std::log1p(std::exp(beta * x)) / beta;
}

}  // namespace

void binary(Binary op, const TensorView& a, const TensorView& b, const TensorView& out,
            const Attrs& attrs) {
  auto run2 = [&](auto f) { elementwise2(a, b, out, attrs, "binary", f); };
  switch (op) {
    case Binary::add: case Binary::biasadd: return run2([](float x, float y) { return x + y; });
    case Binary::sub: return run2([](float x, float y) { return x - y; });
    case Binary::revsub: return run2([](float x, float y) { return y - x; });
    case Binary::mul: return run2([](float x, float y) { return x * y; });
    case Binary::div: return run2([](float x, float y) { return x / y; });
    case Binary::maximum:
      return run2([](float x, float y) { return std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y); });
    case Binary::minimum:
      return run2([](float x, float y) { return std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y); });
    case Binary::pow: return run2([](float x, float y) { return std::pow(x, y); });
    case Binary::equal: return run2([](float x, float y) { return float(x == y); });
    case Binary::notequal: return run2([](float x, float y) { return float(x != y); });
    case Binary::greaterequal: return run2([](float x, float y) { return float(x >= y); });
    case Binary::lesserequal: return run2([](float x, float y) { return float(x <= y); });
    case Binary::greaterthan: return run2([](float x, float y) { return float(x > y); });
    case Binary::lesserthan: return run2([](float x, float y) { return float(x < y); });
  }
  fail("unknown binary op");
}

namespace {

// `t` read as a tensor of `shape`, numpy broadcasting: a dim of size 1 (or a missing leading
// dim) repeats along the output by a stride of 0. Fails naming `what` when it does not broadcast.
TensorView broadcast_to(const TensorView& t, const std::vector<int64_t>& shape, const char* what) {
  if (t.size == shape) return t;
  if (t.size.size() > shape.size())
    fail(std::string(what) + ": input " + shape_str(t.size) + " has more dims than output " + shape_str(shape));
  const auto st = t.strides();
  const size_t shift = shape.size() - t.size.size();
  TensorView v = t;
  v.size = shape;
  v.stride.assign(shape.size(), 0);
  for (size_t j = shift; j < shape.size(); ++j) {
    const int64_t n = t.size[j - shift];
    if (n == shape[j])
      v.stride[j] = n == 1 ? 0 : st[j - shift];
    else if (n != 1)
      fail(std::string(what) + ": input " + shape_str(t.size) + " and output " + shape_str(shape) +
           " differ and do not broadcast");
  }
  return v;
}

}  // namespace

void unary(Unary op, const TensorView& in_view, const TensorView& out, const Attrs& attrs) {
  // An input that broadcasts to the output is read repeated: torch-spyre writes cat([x, x]) as an
  // identity whose input has size 1 along the concatenated copies.
  const TensorView in = broadcast_to(in_view, out.size, "unary");
  if (op == Unary::identity) return cast(in, out, attrs);
  // In chunks of the flat index where the input and the output allow it (see elementwise2),
  // else the whole tensor at once.
  const bool chunked = chunkable(in, out) && chunkable(out, out);
  const int64_t total = out.numel();
  std::vector<float> v = chunked ? std::vector<float>(size_t(std::min(k_chunk, total))) : load_f32(in, attrs.rules);
  auto apply = [&](auto f) {
    if (!chunked) {
      for (float& x : v) x = f(x);
      return;
    }
    for (int64_t i0 = 0; i0 < total; i0 += k_chunk) {
      const int64_t n = std::min(k_chunk, total - i0);
      load_chunk(in, i0, n, v.data(), attrs.rules);
      for (int64_t k = 0; k < n; ++k) v[size_t(k)] = f(v[size_t(k)]);
      store_chunk(v.data(), out, i0, n, attrs.rules);
    }
  };
  const float alpha = float(attrs.get("alpha", 0.01));
  const float cmin = float(attrs.get("clipMin", -INFINITY)), cmax = float(attrs.get("clipMax", INFINITY));
  const float beta = float(attrs.get("softplusBeta", 1.0)), thr = float(attrs.get("softplusThresh", 20.0));
  const float eps = float(attrs.get("eps", 1e-5));
  switch (op) {
    case Unary::identity: break;
    case Unary::abs: apply([](float x) { return std::fabs(x); }); break;
    case Unary::neg: apply([](float x) { return -x; }); break;
    case Unary::exp: apply([](float x) { return std::exp(x); }); break;
    case Unary::log: apply([](float x) { return std::log(x); }); break;
    case Unary::sqrt: apply([](float x) { return std::sqrt(x); }); break;
    case Unary::rsqrt: apply([](float x) { return 1.0f / std::sqrt(x); }); break;
    case Unary::reciprocal: apply([](float x) { return 1.0f / x; }); break;
    case Unary::tanh: apply([](float x) { return std::tanh(x); }); break;
    case Unary::sigmoid: apply(sigmoidf); break;
    case Unary::gelu:
      if (attrs.gelu_tanh)
        // 0.5 x (1 + tanh(z)) = x sigmoid(2z): no 1 + tanh(z) to cancel to nothing for x << 0.
        apply([](float x) {
          const float k = 0.7978845608028654f;  // sqrt(2/pi)
          return x * sigmoidf(2.0f * k * (x + 0.044715f * x * x * x));
        });
      else
        // 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2): 1 + erf cancels in fp32 below
        // x = -4 (gelu(-5.65) = -4.6e-8 came out as 0), erfc does not.
        apply([](float x) { return 0.5f * x * std::erfc(x * -0.7071067811865476f); });
      break;
    case Unary::silu: apply([](float x) { return x * sigmoidf(x); }); break;
    case Unary::relu: apply([](float x) { return x > 0 ? x : (std::isnan(x) ? x : 0.0f); }); break;
    case Unary::relu6: apply([](float x) { return std::isnan(x) ? x : std::min(std::max(x, 0.0f), 6.0f); }); break;
    case Unary::leakyrelu: apply([&](float x) { return x >= 0 ? x : alpha * x; }); break;
    case Unary::mish: apply([](float x) { return x * std::tanh(softplusf(x, 1.0f, 20.0f)); }); break;
    case Unary::softplus: apply([&](float x) { return softplusf(x, beta, thr); }); break;
    case Unary::clip: apply([&](float x) { return std::isnan(x) ? x : std::min(std::max(x, cmin), cmax); }); break;
    case Unary::floor: apply([](float x) { return std::floor(x); }); break;
    case Unary::layernormscale: apply([&](float x) { return 1.0f / std::sqrt(x + eps); }); break;
  }
  if (!chunked) store_f32(v.data(), out, attrs.rules);
}

void where3(const TensorView& cond, const TensorView& a, const TensorView& b,
            const TensorView& out) {
  elementwise3(cond, a, b, out, "where3", [](float c, float x, float y) { return c != 0 ? x : y; });
}

void fnms(const TensorView& a, const TensorView& b, const TensorView& c, const TensorView& out) {
  elementwise3(a, b, c, out, "fnms", [](float x, float y, float z) { return std::fma(-x, y, z); });
}

namespace {

// A view of `t` with `dim` cut to its first element (lane 0 of an EXX2 stick).
TensorView first_along(const TensorView& t, int dim) {
  TensorView v = t;
  v.stride = t.strides();
  v.size[size_t(dim)] = 1;
  return v;
}

void check_lanes(const TensorView& stats, int dim, const char* what) {
  if (stats.size[size_t(dim)] != 2)
    fail(std::string(what) + ": the statistics " + shape_str(stats.size) + " do not hold two lanes (E[x], E[x^2]) on dim " +
         std::to_string(dim));
}

}  // namespace

void layernorm_scale(const TensorView& stats, const TensorView& out, int lanes_dim, const Attrs& attrs) {
  const int d = norm_dim(lanes_dim, stats.rank());
  check_lanes(stats, d, "layernormscale");
  if (out.rank() != stats.rank())
    fail("layernormscale: output " + shape_str(out.size) + " and statistics " + shape_str(stats.size) + " differ in rank");
  const TensorView mean = first_along(stats, d);
  TensorView sq = mean;
  sq.offset += stats.strides()[size_t(d)];
  const auto M = load_f32(mean, attrs.rules), Q = load_f32(sq, attrs.rules);
  const float eps = float(attrs.get("eps", 1e-5));
  std::vector<int64_t> rows = out.size;
  rows[size_t(d)] = 1;
  const std::array<std::vector<int64_t>, 1> st{bcast_strides(mean.size, rows, "layernormscale")};
  std::vector<float> r(size_t(product(rows)));
  iterate<1>(rows, st, [&](int64_t i, const std::array<int64_t, 1>& o) {
    const float m = M[size_t(o[0])];
    r[size_t(i)] = 1.0f / std::sqrt(std::max(Q[size_t(o[0])] - m * m, 0.0f) + eps);
  });
  // Every lane of the output stick holds its row's value.
  std::vector<float> R(size_t(out.numel()));
  const auto rst = dense_strides(rows);
  std::array<std::vector<int64_t>, 1> rs{rst};
  rs[0][size_t(d)] = 0;
  iterate<1>(out.size, rs, [&](int64_t i, const std::array<int64_t, 1>& o) { R[size_t(i)] = r[size_t(o[0])]; });
  store_f32(R.data(), out, attrs.rules);
}

void layernormnorm(const TensorView& x, const TensorView& stats, const TensorView& rstd, const TensorView* weight,
                   const TensorView* bias, const TensorView& out, std::optional<int> lanes_dim, const Attrs& attrs) {
  TensorView mean = stats;
  if (lanes_dim) {
    const int d = norm_dim(*lanes_dim, stats.rank());
    check_lanes(stats, d, "layernormnorm");
    mean = first_along(stats, d);
  }
  const char* what = "layernormnorm";
  const auto X = load_f32(x, attrs.rules), M = load_f32(mean, attrs.rules), S = load_f32(rstd, attrs.rules);
  const std::vector<float> W = weight ? load_f32(*weight, attrs.rules) : std::vector<float>{1.0f};
  const std::vector<float> B = bias ? load_f32(*bias, attrs.rules) : std::vector<float>{0.0f};
  const std::vector<int64_t> one(size_t(out.rank()), 1);
  std::array<std::vector<int64_t>, 5> st{bcast_strides(x.size, out.size, what), bcast_strides(mean.size, out.size, what),
                                         bcast_strides(rstd.size, out.size, what),
                                         bcast_strides(weight ? weight->size : one, out.size, what),
                                         bcast_strides(bias ? bias->size : one, out.size, what)};
  std::vector<float> R(size_t(out.numel()));
  iterate<5>(out.size, st, [&](int64_t i, const std::array<int64_t, 5>& o) {
    R[size_t(i)] = (X[size_t(o[0])] - M[size_t(o[1])]) * S[size_t(o[2])] * W[size_t(o[3])] + B[size_t(o[4])];
  });
  store_f32(R.data(), out, attrs.rules);
}

// ---------------------------------------------------------------------------------------------
// Reductions
// ---------------------------------------------------------------------------------------------

int infer_reduce_dim(const TensorView& in, const TensorView& out, std::optional<int> dim) {
  const int r = in.rank();
  if (dim) return norm_dim(*dim, r);
  if (r == 0) fail("reduce: rank-0 input");
  if (out.rank() == r) {
    int found = -1;
    for (int i = 0; i < r; ++i)
      if (in.size[size_t(i)] != out.size[size_t(i)]) {
        if (found >= 0 || out.size[size_t(i)] != 1)
          fail("reduce: cannot infer one reduced dim from " + shape_str(in.size) + " -> " +
               shape_str(out.size));
        found = i;
      }
    return found >= 0 ? found : r - 1;
  }
  if (out.rank() == r - 1) {
    for (int i = 0; i < r - 1; ++i)
      if (in.size[size_t(i)] != out.size[size_t(i)]) return i;
    return r - 1;
  }
  fail("reduce: output rank " + std::to_string(out.rank()) + " does not fit input rank " +
       std::to_string(r));
}

namespace {

// Shapes for reducing `dim`: outer x n x inner; checks out's element count.
struct Split {
  int64_t outer, n, inner;
};
Split split_for(const TensorView& in, const TensorView& out, int dim, const char* what) {
  const int d = norm_dim(dim, in.rank());
  Split s{product(in.size, 0, size_t(d)), in.size[size_t(d)], product(in.size, size_t(d) + 1)};
  std::vector<int64_t> keep = in.size, drop = in.size;
  keep[size_t(d)] = 1;
  drop.erase(drop.begin() + d);
  if (out.size != keep && out.size != drop)
    fail(std::string(what) + ": output " + shape_str(out.size) + " is not input " +
         shape_str(in.size) + " reduced on dim " + std::to_string(d));
  return s;
}

std::vector<float> reduce_values(Reduce op, const std::vector<float>& X, Split s,
                                 const Attrs& attrs) {
  std::vector<float> R(size_t(s.outer * s.inner));
  const float inv_n = s.n ? float(1.0 / double(s.n)) : NAN;
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      const float* p = X.data() + o * s.n * s.inner + i;
      auto at = [&](int64_t j) { return p[j * s.inner]; };
      float acc;
      switch (op) {
        case Reduce::sum: case Reduce::mean:
          acc = 0;
          for (int64_t j = 0; j < s.n; ++j) acc += at(j);
          if (op == Reduce::mean) acc *= float(attrs.get("scaling_factor", inv_n));
          break;
        case Reduce::max: case Reduce::min: {
          const bool mx = op == Reduce::max;
          acc = mx ? -INFINITY : INFINITY;
          for (int64_t j = 0; j < s.n; ++j) {
            const float v = at(j);
            if (std::isnan(v)) { acc = v; break; }
            acc = mx ? std::max(acc, v) : std::min(acc, v);
          }
          break;
        }
        case Reduce::prod:
          acc = 1;
          for (int64_t j = 0; j < s.n; ++j) acc *= at(j);
          break;
        case Reduce::absmax:
          acc = 0;
          for (int64_t j = 0; j < s.n; ++j) {
            const float v = std::fabs(at(j));
            if (std::isnan(v)) { acc = v; break; }
            acc = std::max(acc, v);
          }
          break;
        default: acc = NAN;
      }
      R[size_t(o * s.inner + i)] = acc;
    }
  return R;
}

}  // namespace

void reduce(Reduce op, const TensorView& in, const TensorView& out, int dim, const Attrs& attrs) {
  if (op == Reduce::exx2 || op == Reduce::exx2_zeromean) return exx2_stats(in, out, dim, op == Reduce::exx2_zeromean, attrs);
  const Split s = split_for(in, out, dim, "reduce");
  const auto R = reduce_values(op, load_f32(in, attrs.rules), s, attrs);
  store_f32(R.data(), out, attrs.rules);
}

void exx2_stats(const TensorView& in, const TensorView& out, int dim, bool zero_mean, const Attrs& attrs) {
  const int d = norm_dim(dim, in.rank());
  std::vector<int64_t> two = in.size;
  two[size_t(d)] = 2;
  if (out.size != two)
    fail("exx2: output " + shape_str(out.size) + " is not input " + shape_str(in.size) + " with the two statistics (E[x], "
         "E[x^2]) on dim " + std::to_string(d));
  const Split s{product(in.size, 0, size_t(d)), in.size[size_t(d)], product(in.size, size_t(d) + 1)};
  const auto X = load_f32(in, attrs.rules);
  const float scale = float(attrs.get("exx2scale", s.n ? 1.0 / double(s.n) : NAN));
  zero_mean = zero_mean || attrs.get("useZeroMean", 0.0) != 0.0;
  std::vector<float> R(size_t(s.outer * 2 * s.inner));
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      const float* p = X.data() + o * s.n * s.inner + i;
      float sum = 0, sq = 0;
      for (int64_t j = 0; j < s.n; ++j) {
        const float v = p[j * s.inner];
        sum += v;
        sq += v * v;
      }
      R[size_t((o * 2 + 0) * s.inner + i)] = zero_mean ? 0.0f : sum * scale;
      R[size_t((o * 2 + 1) * s.inner + i)] = sq * scale;
    }
  store_f32(R.data(), out, attrs.rules);
}

void softmax(const TensorView& in, const TensorView& out, int dim, DataFormat inter) {
  const int d = norm_dim(dim, in.rank());
  std::vector<int64_t> red = in.size;
  red[size_t(d)] = 1;
  const int64_t n = in.numel(), nr = product(red);
  std::vector<char> mx(fmt::bytes_for(inter, size_t(nr))), sm(mx.size()),
      t1(fmt::bytes_for(inter, size_t(n))), t2(t1.size());
  const TensorView vmx = view(mx.data(), inter, red), vsm = view(sm.data(), inter, red),
                   v1 = view(t1.data(), inter, in.size), v2 = view(t2.data(), inter, in.size);
  reduce(Reduce::max, in, vmx, d);
  binary(Binary::sub, in, vmx, v1);
  unary(Unary::exp, v1, v2);
  reduce(Reduce::sum, v2, vsm, d);
  binary(Binary::div, v2, vsm, out);
}

// ---------------------------------------------------------------------------------------------
// Casts and quantisation
// ---------------------------------------------------------------------------------------------

void cast(const TensorView& in, const TensorView& out, const Attrs& attrs) {
  if (in.size != out.size)
    fail("cast: input " + shape_str(in.size) + " and output " + shape_str(out.size) + " differ");
  check_view(in, "cast input");
  check_view(out, "cast output");
  if (in.numel() == 0) return;
  fmt::StridedNest nest;
  const auto si = in.strides(), so = out.strides();
  for (size_t i = in.size.size(); i-- > 0;) {
    nest.size.push_back(in.size[i]);
    nest.stride_src.push_back(si[i]);
    nest.stride_dst.push_back(so[i]);
  }
  nest.offset_src = in.offset;
  nest.offset_dst = out.offset;
  fmt::convert_nest(in.format, in.data, out.format, out.data, nest, attrs.rules);
}

void quantize_scaled(const TensorView& in, const TensorView& out, double scale, double shift,
                     const Attrs& attrs) {
  if (in.size != out.size) fail("quantize: shapes differ");
  auto v = load_f32(in, attrs.rules);
  const float sc = float(scale), sh = float(shift);
  for (float& x : v) x = x * sc + sh;
  store_f32(v.data(), out, attrs.rules);
}

void quantize(const TensorView& in, const TensorView& out, double scale, double zero_point,
              const Attrs& attrs) {
  if (in.size != out.size) fail("quantize: shapes differ");
  auto v = load_f32(in, attrs.rules);
  const float sc = float(scale), zp = float(zero_point);
  for (float& x : v) x = x / sc + zp;
  store_f32(v.data(), out, attrs.rules);
}

void dequantize(const TensorView& in, const TensorView& out, double scale, double zero_point,
                const Attrs& attrs) {
  if (in.size != out.size) fail("dequantize: shapes differ");
  auto v = load_f32(in, attrs.rules);
  const float sc = float(scale), zp = float(zero_point);
  for (float& x : v) x = (x - zp) * sc;
  store_f32(v.data(), out, attrs.rules);
}

void quant_scale_per_token(const TensorView& in, const TensorView& out, int dim, bool fp8,
                           const Attrs& attrs) {
  const Split s = split_for(in, out, dim, "quantscalepertoken");
  auto R = reduce_values(Reduce::absmax, load_f32(in, attrs.rules), s, attrs);
  const float lo = float(attrs.get("clipMin", 0.0)), hi = float(attrs.get("clipMax", INFINITY));
  const float mc = float(attrs.get("mulConst", fp8 ? 1.0 / 448.0 : 1.0 / 127.0));
  for (float& x : R) x = std::min(std::max(x, lo), hi) * mc;
  store_f32(R.data(), out, attrs.rules);
}

// ---------------------------------------------------------------------------------------------
// Top-k, pooling
// ---------------------------------------------------------------------------------------------

void topk(const TensorView& in, const TensorView& out, int dim, bool indices) {
  const int d = norm_dim(dim, in.rank());
  if (out.rank() != in.rank()) fail("topk: output rank differs from input rank");
  for (int i = 0; i < in.rank(); ++i)
    if (i != d && in.size[size_t(i)] != out.size[size_t(i)]) fail("topk: shapes differ off dim");
  const int64_t n = in.size[size_t(d)], k = out.size[size_t(d)];
  if (k > n) fail("topk: k > dimension size");
  const int64_t outer = product(in.size, 0, size_t(d)), inner = product(in.size, size_t(d) + 1);
  const auto X = load_f32(in);
  std::vector<float> V(size_t(outer * k * inner));
  std::vector<int64_t> I(V.size());
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const float* p = X.data() + o * n * inner + i;
      std::iota(order.begin(), order.end(), 0);
      // Larger first, NaN largest (torch), ties to the lower index.
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t x, int64_t y) {
        const float a = p[x * inner], b = p[y * inner];
        const bool na = std::isnan(a), nb = std::isnan(b);
        if (na != nb) return na;
        if (!na && a != b) return a > b;
        return x < y;
      });
      for (int64_t j = 0; j < k; ++j) {
        const size_t at = size_t((o * k + j) * inner + i);
        I[at] = order[size_t(j)];
        V[at] = p[order[size_t(j)] * inner];
      }
    }
  if (indices)
    store_i64(I.data(), out);
  else
    store_f32(V.data(), out);
}

void pool2d(Pool op, const TensorView& in, const TensorView& out, const Attrs& attrs) {
  const int r = in.rank();
  const int dh = norm_dim(attrs.pool_dim_h, r), dw = norm_dim(attrs.pool_dim_w, r);
  if (dh == dw) fail("pool2d: the two spatial dims are the same");
  if (out.rank() != r) fail("pool2d: output rank differs");
  for (int i = 0; i < r; ++i)
    if (i != dh && i != dw && in.size[size_t(i)] != out.size[size_t(i)])
      fail("pool2d: non-spatial dims differ");
  const int64_t H = in.size[size_t(dh)], W = in.size[size_t(dw)];
  const int64_t OH = out.size[size_t(dh)], OW = out.size[size_t(dw)];
  int64_t kh = attrs.kernel_h, kw = attrs.kernel_w;
  if (kh == 0) kh = OH ? (H + 2 * attrs.pad_h) / OH : 1;
  if (kw == 0) kw = OW ? (W + 2 * attrs.pad_w) / OW : 1;
  const int64_t sh = attrs.stride_h ? attrs.stride_h : kh, sw = attrs.stride_w ? attrs.stride_w : kw;
  if (OH != (H + 2 * attrs.pad_h - kh) / sh + 1 || OW != (W + 2 * attrs.pad_w - kw) / sw + 1)
    fail("pool2d: output spatial size does not match window/stride/padding");
  const auto X = load_f32(in);
  const auto ist = dense_strides(in.size);
  const float nmap = float(attrs.get("nmap", 1.0 / double(kh * kw)));
  std::vector<float> R(size_t(out.numel()));
  std::vector<int64_t> zero_h(size_t(r), 0);
  // Walk the output; each element's input base is its coordinate with the spatial dims zeroed.
  std::array<std::vector<int64_t>, 1> st{ist};
  st[0][size_t(dh)] = 0;
  st[0][size_t(dw)] = 0;
  const auto ost = dense_strides(out.size);
  iterate<1>(out.size, st, [&](int64_t oi, const std::array<int64_t, 1>& base) {
    const int64_t oh = (oi / ost[size_t(dh)]) % OH, ow = (oi / ost[size_t(dw)]) % OW;
    float acc = op == Pool::max ? -INFINITY : 0.0f;
    int64_t count = 0;
    for (int64_t y = 0; y < kh; ++y) {
      const int64_t ih = oh * sh - attrs.pad_h + y;
      if (ih < 0 || ih >= H) continue;
      for (int64_t x = 0; x < kw; ++x) {
        const int64_t iw = ow * sw - attrs.pad_w + x;
        if (iw < 0 || iw >= W) continue;
        const float v = X[size_t(base[0] + ih * ist[size_t(dh)] + iw * ist[size_t(dw)])];
        ++count;
        if (op == Pool::max)
          acc = (std::isnan(v) || std::isnan(acc)) ? NAN : std::max(acc, v);
        else
          acc += v;
      }
    }
    if (op == Pool::avg) acc *= nmap;
    if (op == Pool::avg_nmap) acc = count ? acc / float(count) : 0.0f;
    R[size_t(oi)] = acc;
  });
  store_f32(R.data(), out, attrs.rules);
}

// ---------------------------------------------------------------------------------------------
// Gather / scatter. Values move exactly: integer data through int64, the rest through fp32
// (exact for every float format up to fp32).
// ---------------------------------------------------------------------------------------------

namespace {

template <class T>
std::vector<T> load_as(const TensorView& t) {
  if constexpr (std::is_same_v<T, int64_t>)
    return load_i64(t);
  else
    return load_f32(t);
}
template <class T>
void store_as(const std::vector<T>& v, const TensorView& t) {
  if constexpr (std::is_same_v<T, int64_t>)
    store_i64(v.data(), t);
  else
    store_f32(v.data(), t);
}

int64_t checked_index(int64_t ix, int64_t n, const char* what) {
  if (ix < 0 || ix >= n)
    throw std::out_of_range(std::string("vspyre::ops: ") + what + ": index " +
                            std::to_string(ix) + " outside [0, " + std::to_string(n) + ")");
  return ix;
}

template <class T>
void gather_t(const TensorView& src, const TensorView& index, const TensorView& out, int d) {
  const auto S = load_as<T>(src);
  const auto IX = load_i64(index);
  const auto sst = dense_strides(src.size);
  std::array<std::vector<int64_t>, 1> st{sst};
  st[0][size_t(d)] = 0;
  std::vector<T> R(size_t(out.numel()));
  iterate<1>(index.size, st, [&](int64_t i, const std::array<int64_t, 1>& o) {
    const int64_t ix = checked_index(IX[size_t(i)], src.size[size_t(d)], "gather");
    R[size_t(i)] = S[size_t(o[0] + ix * sst[size_t(d)])];
  });
  store_as(R, out);
}

template <class T>
void scatter_t(const TensorView& self, const TensorView& index, const TensorView& src,
               const TensorView& out, int d, bool acc) {
  auto R = load_as<T>(self);
  const auto IX = load_i64(index);
  const auto S = load_as<T>(src);
  const auto ost = dense_strides(self.size);
  std::array<std::vector<int64_t>, 2> st{ost, dense_strides(src.size)};
  st[0][size_t(d)] = 0;
  iterate<2>(index.size, st, [&](int64_t i, const std::array<int64_t, 2>& o) {
    const int64_t ix = checked_index(IX[size_t(i)], self.size[size_t(d)], "scatter");
    T& dst = R[size_t(o[0] + ix * ost[size_t(d)])];
    dst = acc ? T(dst + S[size_t(o[1])]) : S[size_t(o[1])];
  });
  store_as(R, out);
}

void check_index_shape(const TensorView& index, const TensorView& ref, int d, const char* what) {
  if (index.rank() != ref.rank()) fail(std::string(what) + ": index rank differs");
  for (int i = 0; i < ref.rank(); ++i)
    if (i != d && index.size[size_t(i)] > ref.size[size_t(i)])
      fail(std::string(what) + ": index " + shape_str(index.size) + " larger than " +
           shape_str(ref.size) + " off dim " + std::to_string(d));
}

}  // namespace

void gather(const TensorView& src, const TensorView& index, const TensorView& out, int dim) {
  const int d = norm_dim(dim, src.rank());
  check_index_shape(index, src, d, "gather");
  if (out.size != index.size) fail("gather: output shape must equal index shape");
  if (is_integer_format(src.format) && is_integer_format(out.format))
    gather_t<int64_t>(src, index, out, d);
  else
    gather_t<float>(src, index, out, d);
}

void scatter(const TensorView& self, const TensorView& index, const TensorView& src,
             const TensorView& out, int dim, bool accumulate) {
  const int d = norm_dim(dim, self.rank());
  check_index_shape(index, self, d, "scatter");
  if (src.rank() != index.rank()) fail("scatter: src rank differs from index rank");
  for (int i = 0; i < src.rank(); ++i)
    if (index.size[size_t(i)] > src.size[size_t(i)]) fail("scatter: index larger than src");
  if (out.size != self.size) fail("scatter: output shape must equal self shape");
  if (is_integer_format(self.format) && is_integer_format(src.format) &&
      is_integer_format(out.format))
    scatter_t<int64_t>(self, index, src, out, d, accumulate);
  else
    scatter_t<float>(self, index, src, out, d, accumulate);
}

}  // namespace vspyre::ops
