// Helpers for the ops tests: device-format buffers built from doubles and read back as doubles.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "sim/formats/formats.h"
#include "sim/ops/ops.h"

namespace ops_test {

using vspyre::fmt::DataFormat;
namespace fmt = vspyre::fmt;
namespace ops = vspyre::ops;

inline int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (auto x : s) n *= x;
  return n;
}

// A contiguous device-format tensor.
struct Buf {
  DataFormat f;
  std::vector<int64_t> size;
  std::vector<uint8_t> bytes;
  Buf(DataFormat fmt_, std::vector<int64_t> s) : f(fmt_), size(std::move(s)) {
    bytes.assign(fmt::bytes_for(f, size_t(numel(size))) + 8, 0);
  }
  Buf(DataFormat fmt_, std::vector<int64_t> s, const std::vector<double>& v) : Buf(fmt_, std::move(s)) {
    for (size_t i = 0; i < v.size(); ++i) fmt::store_element(f, bytes.data(), i, v[i]);
  }
  ops::TensorView v() { return ops::view(bytes.data(), f, size); }
  double at(size_t i) const { return fmt::load_element(f, bytes.data(), i); }
  std::vector<double> values() const {
    std::vector<double> r(size_t(numel(size)));
    for (size_t i = 0; i < r.size(); ++i) r[i] = at(i);
    return r;
  }
};

// n values uniform in [lo, hi], rounded to the format (so the reference sees what the op sees).
inline std::vector<double> randv(size_t n, double lo, double hi, DataFormat f, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  std::vector<uint8_t> tmp(16);
  for (auto& x : v) {
    fmt::store_element(f, tmp.data(), 0, d(g));
    x = fmt::load_element(f, tmp.data(), 0);
  }
  return v;
}

inline std::vector<double> randi(size_t n, int lo, int hi, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// |got - ref| <= rel*|ref| + abs, NaN only where ref is NaN, infinities equal.
inline bool close(double got, double ref, double rel, double abs = 0) {
  if (std::isnan(ref)) return std::isnan(got);
  if (std::isinf(ref)) return got == ref;
  return std::fabs(got - ref) <= rel * std::fabs(ref) + abs;
}

// DL16's rounding bound (relative 2^-9 per rounding, formats.md D.1) plus fp32 slack.
inline constexpr double k_dl16_rel = 1.0 / 512 + 1e-6;
// Smallest DL16 magnitude; results below round to zero or to it.
inline constexpr double k_dl16_tiny = 4.7e-10;

}  // namespace ops_test
