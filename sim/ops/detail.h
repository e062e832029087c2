// Internals shared by the ops sources.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/ops/ops.h"

namespace vspyre::ops::detail {

[[noreturn]] inline void fail(const std::string& what) {
  throw std::invalid_argument("vspyre::ops: " + what);
}

std::string shape_str(std::span<const int64_t> s);
int norm_dim(int dim, int rank);
int64_t product(std::span<const int64_t> s, size_t from = 0, size_t to = size_t(-1));
std::vector<int64_t> dense_strides(std::span<const int64_t> s);
// Element strides of a dense tensor of shape `in` read as if broadcast to `out` (0 on stretched
// dims). Throws when `in` does not broadcast to `out`.
std::vector<int64_t> bcast_strides(std::span<const int64_t> in, std::span<const int64_t> out,
                                   const char* what);

// Calls f(out_index, offsets) for every element of `shape` in row-major order, where offsets[i]
// is the element offset into operand i given its strides.
template <size_t N, class F>
void iterate(std::span<const int64_t> shape, const std::array<std::vector<int64_t>, N>& st, F&& f) {
  const size_t rank = shape.size();
  for (int64_t s : shape)
    if (s <= 0) return;
  if (rank == 0) {
    std::array<int64_t, N> o{};
    f(int64_t(0), o);
    return;
  }
  const int64_t inner = shape[rank - 1];
  std::array<int64_t, N> inner_st;
  for (size_t i = 0; i < N; ++i) inner_st[i] = st[i][rank - 1];
  std::vector<int64_t> idx(rank, 0);
  std::array<int64_t, N> base{};
  int64_t out = 0;
  while (true) {
    std::array<int64_t, N> o = base;
    for (int64_t j = 0; j < inner; ++j) {
      f(out++, o);
      for (size_t i = 0; i < N; ++i) o[i] += inner_st[i];
    }
    size_t k = rank - 1;
    while (k > 0) {
      --k;
      ++idx[k];
      for (size_t i = 0; i < N; ++i) base[i] += st[i][k];
      if (idx[k] < shape[k]) break;
      for (size_t i = 0; i < N; ++i) base[i] -= st[i][k] * shape[k];
      idx[k] = 0;
      if (k == 0) return;
    }
    if (rank == 1) return;
  }
}

// C[M,N] = A[M,K] * B[K,N], dense row-major, through cblas_sgemm.
void sgemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k);

}  // namespace vspyre::ops::detail
