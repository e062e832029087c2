// batchmatmul* and conv2d*: operands widened to fp32 (float formats) and multiplied with
// OpenBLAS cblas_sgemm, or accumulated exactly (integer formats).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "sim/ops/detail.h"
#include "sim/ops/ops.h"

// OpenBLAS (pthreads build): stops the thread pool; exec_blas() creates it again when needed.
// Weak, so that another BLAS without it still links.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

namespace vspyre::ops {

using namespace detail;

void release_blas_threads() {
  if (blas_thread_shutdown_) blas_thread_shutdown_();
}

namespace detail {

void sgemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::fill(c, c + m * n, 0.0f);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.0f, a, int(k),
              b, int(n), 0.0f, c, int(n));
}

}  // namespace detail

namespace {

// Exact integer product of integer-valued fp32 operands. Every partial sum of a dot product is
// bounded by k * max|a| * max|b|; when that is <= 2^24 every partial sum is an integer fp32 holds
// exactly, whatever order or FMA use sgemm picks, so sgemm is exact. Otherwise an int64 loop.
void gemm_int(const float* a, const float* b, float* cf, std::vector<int64_t>* ci, int64_t m,
              int64_t n, int64_t k, bool small) {
  if (small) return sgemm(a, b, cf, m, n, k);
  std::vector<int32_t> bi(size_t(k * n));
  for (size_t i = 0; i < bi.size(); ++i) bi[i] = int32_t(b[i]);
  std::vector<int64_t> acc(static_cast<size_t>(n));
  constexpr int64_t kb = 256;  // keep a block of B rows in cache
  for (int64_t i = 0; i < m; ++i) {
    std::fill(acc.begin(), acc.end(), 0);
    for (int64_t k0 = 0; k0 < k; k0 += kb)
      for (int64_t p = k0; p < std::min(k, k0 + kb); ++p) {
        const int64_t av = int64_t(a[i * k + p]);
        if (av == 0) continue;
        const int32_t* brow = bi.data() + p * n;
        for (int64_t j = 0; j < n; ++j) acc[size_t(j)] += av * brow[j];
      }
    std::copy(acc.begin(), acc.end(), ci->begin() + i * n);
  }
}

float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

}  // namespace

void matmul(const TensorView& a, const TensorView& b, const TensorView& out) {
  if (a.rank() < 2 || b.rank() < 2) fail("matmul: operands need rank >= 2");
  const int64_t M = a.size[size_t(a.rank() - 2)], K = a.size[size_t(a.rank() - 1)];
  const int64_t K2 = b.size[size_t(b.rank() - 2)], N = b.size[size_t(b.rank() - 1)];
  if (K != K2) fail("matmul: K of " + shape_str(a.size) + " and " + shape_str(b.size) + " differ");
  const std::span<const int64_t> ab(a.size.data(), a.size.size() - 2),
      bb(b.size.data(), b.size.size() - 2);
  std::vector<int64_t> batch = broadcast_shape(ab, bb);
  std::vector<int64_t> want = batch;
  want.push_back(M);
  want.push_back(N);
  if (out.size != want)
    fail("matmul: output " + shape_str(out.size) + ", expected " + shape_str(want));

  const bool integer = is_integer_format(a.format) && is_integer_format(b.format);
  const auto A = load_f32(a), B = load_f32(b);
  // Integer operands beyond 2^24 are not exact in fp32: take them through int64 instead.
  if (integer && (fmt::bits_per_element(a.format) > 16 || fmt::bits_per_element(b.format) > 16))
    fail("matmul: integer operands wider than 16 bits are not supported");

  // Per-batch matrix offsets, broadcast.
  std::array<std::vector<int64_t>, 2> st{bcast_strides(ab, batch, "matmul"),
                                         bcast_strides(bb, batch, "matmul")};
  for (auto& v : st[0]) v *= M * K;
  for (auto& v : st[1]) v *= K * N;
  const int64_t nb = product(batch);
  const bool small = integer && double(K) * max_abs(A) * max_abs(B) <= 16777216.0;

  // Write straight into an fp32 contiguous output; otherwise through a buffer and one rounding.
  const bool direct = out.format == DataFormat::IEEE_FP32 && (out.stride.empty() ||
                      out.stride == dense_strides(out.size)) && (!integer || small);
  std::vector<float> Cbuf;
  float* C = direct ? static_cast<float*>(out.data) + out.offset : nullptr;
  if (!direct) {
    Cbuf.resize(size_t(nb * M * N));
    C = Cbuf.data();
  }
  std::vector<int64_t> Ci;
  if (integer && !small) Ci.resize(size_t(nb * M * N));
  iterate<2>(batch, st, [&](int64_t bi, const std::array<int64_t, 2>& o) {
    const float* pa = A.data() + o[0];
    const float* pb = B.data() + o[1];
    if (integer) {
      std::vector<int64_t> tmp;
      if (!small) tmp.resize(size_t(M * N));
      gemm_int(pa, pb, C + bi * M * N, &tmp, M, N, K, small);
      if (!small) std::copy(tmp.begin(), tmp.end(), Ci.begin() + bi * M * N);
    } else {
      sgemm(pa, pb, C + bi * M * N, M, N, K);
    }
  });
  if (integer && !small)
    store_i64(Ci.data(), out);
  else if (!direct)
    store_f32(C, out);
}

void conv2d(const TensorView& x, const TensorView& w, const TensorView& out, const Attrs& attrs) {
  if (x.rank() != 4 || w.rank() != 4 || out.rank() != 4)
    fail("conv2d: x, w and out must be 4-D (NCHW, OIHW, NOHW)");
  const int64_t Nn = x.size[0], C = x.size[1], H = x.size[2], W = x.size[3];
  const int64_t O = w.size[0], Cg = w.size[1], kh = w.size[2], kw = w.size[3];
  const int64_t G = attrs.groups;
  if (G <= 0 || C % G || O % G || Cg != C / G) fail("conv2d: channels/groups mismatch");
  const int64_t sh = attrs.stride_h ? attrs.stride_h : 1, sw = attrs.stride_w ? attrs.stride_w : 1;
  const int64_t OH = (H + 2 * attrs.pad_h - kh) / sh + 1, OW = (W + 2 * attrs.pad_w - kw) / sw + 1;
  const std::vector<int64_t> want{Nn, O, OH, OW};
  if (out.size != want) fail("conv2d: output " + shape_str(out.size) + ", expected " + shape_str(want));
  const auto X = load_f32(x);
  const auto Wt = load_f32(w);  // [O, Cg*kh*kw] row-major already
  const int64_t Og = O / G, KK = Cg * kh * kw, P = OH * OW;
  // im2col for every (image, group): [KK, P] in fp32 (exact for every input format), then one
  // matmul per (image, group) through matmul() so the float/integer rules are the same.
  std::vector<float> cols(size_t(KK * P));
  std::vector<float> res(size_t(Og * P));
  std::vector<float> R(size_t(out.numel()));
  const bool integer = is_integer_format(x.format) && is_integer_format(w.format);
  std::vector<int64_t> Ri;
  if (integer) Ri.resize(R.size());
  std::vector<int64_t> resi(res.size());
  for (int64_t n = 0; n < Nn; ++n)
    for (int64_t g = 0; g < G; ++g) {
      for (int64_t c = 0; c < Cg; ++c)
        for (int64_t y = 0; y < kh; ++y)
          for (int64_t xx = 0; xx < kw; ++xx) {
            float* row = cols.data() + ((c * kh + y) * kw + xx) * P;
            for (int64_t oh = 0; oh < OH; ++oh)
              for (int64_t ow = 0; ow < OW; ++ow) {
                const int64_t ih = oh * sh - attrs.pad_h + y, iw = ow * sw - attrs.pad_w + xx;
                row[oh * OW + ow] = (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                        ? 0.0f
                                        : X[size_t(((n * C + g * Cg + c) * H + ih) * W + iw)];
              }
          }
      const float* wg = Wt.data() + g * Og * KK;
      if (integer) {
        // Products of values that came from <= 16-bit integer formats, accumulated exactly.
        float ma = 0, mb = 0;
        for (int64_t i = 0; i < Og * KK; ++i) ma = std::max(ma, std::fabs(wg[i]));
        for (float v : cols) mb = std::max(mb, std::fabs(v));
        const bool small = double(KK) * ma * mb <= 16777216.0;
        gemm_int(wg, cols.data(), res.data(), &resi, Og, P, KK, small);
        for (int64_t i = 0; i < Og * P; ++i)
          Ri[size_t((n * O + g * Og) * P + i)] = small ? int64_t(res[size_t(i)]) : resi[size_t(i)];
      } else {
        sgemm(wg, cols.data(), res.data(), Og, P, KK);
        std::copy(res.begin(), res.end(), R.begin() + (n * O + g * Og) * P);
      }
    }
  if (integer)
    store_i64(Ri.data(), out, attrs.rules);
  else
    store_f32(R.data(), out, attrs.rules);
}

}  // namespace vspyre::ops
