// Stick-tiled device layout (formats.md D.2): host tensor <-> device byte image.
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "sim/formats/formats.h"

namespace vspyre::fmt {
namespace {

[[noreturn]] void bad_layout(const std::string& why) {
  throw std::invalid_argument("vspyre::fmt stick layout: " + why);
}

// For each device dimension, the weight of one step in its host dimension's index: the product
// of the sizes of the finer (later) device dimensions that split the same host dimension.
std::vector<int64_t> radices(const StickLayout& l, size_t host_rank) {
  std::vector<int64_t> rad(l.device_size.size(), 0);
  std::vector<int64_t> running(host_rank, 1);
  for (size_t k = l.device_size.size(); k-- > 0;) {
    const int32_t h = l.dim_map[k];
    if (h < 0) continue;
    rad[k] = running[size_t(h)];
    running[size_t(h)] *= l.device_size[k];
  }
  return rad;
}

// Iterates the rows of the device image (a row: one step of every device dim but the last, the
// last dim's elements; a stick, or part of one in a 2-D stick). For each row calls
// fn(row_index, valid, host_elem_offset, lane_count, lane_host_stride).
template <class Fn>
void for_each_row(const StickLayout& l, std::span<const int64_t> host_size,
                  std::span<const int64_t> host_stride, int64_t host_offset, Fn&& fn) {
  validate(l, host_size);
  const size_t nd = l.device_size.size(), last = nd - 1;
  const size_t hr = host_size.size();
  for (int64_t s : host_size)
    if (s == 0) return;  // an empty host tensor has no data; its image is all padding
  const std::vector<int64_t> rad = radices(l, hr);
  int64_t n_rows = 1;
  for (size_t k = 0; k < last; ++k) n_rows *= l.device_size[k];
  const int32_t hs = l.dim_map[last];
  const int64_t row = l.device_size[last];
  std::vector<int64_t> coord(last, 0), x(hr, 0);
  for (int64_t s = 0; s < n_rows; ++s) {
    std::fill(x.begin(), x.end(), 0);
    bool valid = true;
    for (size_t k = 0; k < last && valid; ++k) {
      const int32_t h = l.dim_map[k];
      if (h < 0)
        valid = coord[k] == 0;
      else
        x[size_t(h)] += coord[k] * rad[k];
    }
    int64_t off = host_offset;
    for (size_t h = 0; h < hr && valid; ++h) {
      valid = x[h] < host_size[h];
      off += x[h] * host_stride[h];
    }
    int64_t lanes = 1, lane_stride = 1;
    if (valid && hs >= 0) {
      lanes = std::min(row, host_size[size_t(hs)] - x[size_t(hs)]);
      lane_stride = host_stride[size_t(hs)];
    }
    fn(s, valid, off, lanes, lane_stride);
    for (size_t k = last; k-- > 0;) {  // odometer, innermost outer dimension fastest
      if (++coord[k] < l.device_size[k]) break;
      coord[k] = 0;
    }
  }
}

// Bytes of one row of the device image (the last device dim).
uint64_t row_bytes(const StickLayout& l) {
  return uint64_t(l.device_size.back()) * uint64_t(bits_per_element(l.format)) / 8;
}

void check_host(std::span<const int64_t> size, std::span<const int64_t> stride, const void* data,
                DataFormat f) {
  if (size.size() != stride.size()) bad_layout("host size and stride ranks differ");
  if (!data) bad_layout("null host pointer");
  if (!is_convertible(f)) bad_layout("host format " + std::string(name(f)) + " not convertible");
}

}  // namespace

std::vector<int64_t> contiguous_strides(std::span<const int64_t> size) {
  std::vector<int64_t> st(size.size());
  int64_t s = 1;
  for (size_t i = size.size(); i-- > 0;) {
    st[i] = s;
    s *= size[i];
  }
  return st;
}

StickLayout stick_layout_with_dim_order(std::span<const int64_t> host_size,
                                        std::span<const int32_t> dim_order,
                                        DataFormat device_format) {
  const int64_t eps = elements_per_stick(device_format);
  if (eps <= 0) bad_layout("format " + std::string(name(device_format)) + " has no stick size");
  const size_t n = host_size.size();
  for (int64_t s : host_size)
    if (s < 0) bad_layout("negative host size");
  StickLayout l;
  l.format = device_format;
  if (n == 0) {  // a scalar: one stick, value in lane 0
    l.device_size = {1, eps};
    l.dim_map = {-1, -1};
    return l;
  }
  const bool sparse = dim_order.size() == n + 1 && dim_order.back() == -1;
  if (dim_order.size() != n && !sparse) bad_layout("dim_order rank does not match host rank");
  std::vector<bool> seen(n, false);
  for (size_t i = 0; i < n; ++i) {
    const int32_t h = dim_order[i];
    if (h < 0 || size_t(h) >= n || seen[size_t(h)]) bad_layout("dim_order is not a permutation");
    seen[size_t(h)] = true;
  }
  const size_t hr = dim_order.size();
  const int32_t stick = dim_order[hr - 1];
  auto extent = [&](int32_t h) -> int64_t {
    if (h < 0) return 1;
    if (h == stick) return (host_size[size_t(h)] + eps - 1) / eps;
    return host_size[size_t(h)];
  };
  // [dim_order[1..], dim_order[0], stick lanes]
  for (size_t i = 1; i < hr; ++i) {
    l.device_size.push_back(extent(dim_order[i]));
    l.dim_map.push_back(dim_order[i]);
  }
  l.device_size.push_back(extent(dim_order[0]));
  l.dim_map.push_back(dim_order[0]);
  l.device_size.push_back(eps);
  l.dim_map.push_back(stick);
  return l;
}

StickLayout default_stick_layout(std::span<const int64_t> host_size, DataFormat device_format) {
  std::vector<int32_t> order(host_size.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
  return stick_layout_with_dim_order(host_size, order, device_format);
}

void validate(const StickLayout& l, std::span<const int64_t> host_size) {
  const size_t nd = l.device_size.size();
  if (nd == 0 || l.dim_map.size() != nd) bad_layout("device_size and dim_map must be non-empty and equal length");
  const int64_t eps = elements_per_stick(l.format);
  if (eps <= 0 || !is_convertible(l.format))
    bad_layout("device format " + std::string(name(l.format)) + " not usable");
  // One stick: the last device dim, or the last two (a 2-D stick: rows of a whole number of
  // bytes, torch-spyre's [2, 64] fp8 weight sticks).
  const int64_t last = l.device_size.back();
  const bool two_d = nd >= 2 && last > 0 && last < eps && l.device_size[nd - 2] * last == eps &&
                     last * bits_per_element(l.format) % 8 == 0;
  if (last != eps && !two_d)
    bad_layout("last device dim must be one stick (" + std::to_string(eps) +
               " elements), or the last two one 2-D stick");
  for (int64_t s : l.device_size)
    if (s < 0) bad_layout("negative device size");
  std::vector<int64_t> capacity(host_size.size(), 1);
  for (size_t k = 0; k < nd; ++k) {
    const int32_t h = l.dim_map[k];
    if (h < -1 || h >= int32_t(host_size.size())) bad_layout("dim_map entry out of range");
    if (h >= 0) capacity[size_t(h)] *= l.device_size[k];
  }
  for (size_t h = 0; h < host_size.size(); ++h)
    if (capacity[h] < host_size[h])
      bad_layout("host dim " + std::to_string(h) + " (size " + std::to_string(host_size[h]) +
                 ") does not fit the device dims mapped to it");
}

uint64_t device_image_bytes(const StickLayout& l) {
  if (l.device_size.empty()) return 0;
  uint64_t rows = 1;
  for (size_t k = 0; k + 1 < l.device_size.size(); ++k) rows *= uint64_t(l.device_size[k]);
  return rows * row_bytes(l);
}

int64_t device_element_index(const StickLayout& l, std::span<const int64_t> host_coord) {
  const size_t nd = l.device_size.size();
  if (nd == 0 || l.dim_map.size() != nd) bad_layout("malformed layout");
  std::vector<int64_t> rest(host_coord.begin(), host_coord.end());
  int64_t index = 0, weight = 1;
  for (size_t k = nd; k-- > 0;) {
    const int32_t h = l.dim_map[k];
    if (h >= int32_t(rest.size())) bad_layout("host coordinate rank too small");
    if (h >= 0) {
      const int64_t sz = l.device_size[k];
      index += (rest[size_t(h)] % sz) * weight;
      rest[size_t(h)] /= sz;
    }
    weight *= l.device_size[k];
  }
  for (int64_t r : rest)
    if (r != 0) bad_layout("host coordinate outside the layout");
  return index;
}

uint64_t device_byte_offset(const StickLayout& l, std::span<const int64_t> host_coord) {
  return uint64_t(device_element_index(l, host_coord)) * uint64_t(bits_per_element(l.format)) / 8;
}

std::vector<int64_t> stride_map(const StickLayout& l, std::span<const int64_t> host_size,
                                std::span<const int64_t> host_strides) {
  validate(l, host_size);
  if (host_strides.size() != host_size.size()) bad_layout("host size and stride ranks differ");
  const std::vector<int64_t> rad = radices(l, host_size.size());
  std::vector<int64_t> sm(l.device_size.size(), -1);
  for (size_t k = 0; k < sm.size(); ++k) {
    const int32_t h = l.dim_map[k];
    if (h >= 0 && host_size[size_t(h)] != 1) sm[k] = rad[k] * host_strides[size_t(h)];
  }
  return sm;
}

void host_to_device(const HostTensor& host, const StickLayout& l, void* device, Padding padding,
                    const ConvertRules& r) {
  check_host(host.size, host.stride, host.data, host.format);
  if (!device) bad_layout("null device pointer");
  const int64_t row = l.device_size.empty() ? 0 : l.device_size.back();
  if (padding == Padding::zero && std::any_of(host.size.begin(), host.size.end(),
                                              [](int64_t s) { return s == 0; }))
    std::memset(device, 0, device_image_bytes(l));
  const uint64_t rb = l.device_size.empty() ? 0 : row_bytes(l);
  for_each_row(l, host.size, host.stride, host.offset,
                 [&](int64_t s, bool valid, int64_t off, int64_t lanes, int64_t lane_stride) {
                   uint8_t* stick = static_cast<uint8_t*>(device) + uint64_t(s) * rb;
                   if (padding == Padding::zero && (!valid || lanes < row))
                     std::memset(stick, 0, rb);
                   if (!valid) return;
                   convert_strided(host.format, host.data, off, lane_stride, l.format, stick, 0, 1,
                                   size_t(lanes), r);
                 });
}

void device_to_host(const void* device, const StickLayout& l, const MutableHostTensor& host,
                    const ConvertRules& r) {
  check_host(host.size, host.stride, host.data, host.format);
  if (!device) bad_layout("null device pointer");
  const uint64_t rb = l.device_size.empty() ? 0 : row_bytes(l);
  for_each_row(l, host.size, host.stride, host.offset,
                 [&](int64_t s, bool valid, int64_t off, int64_t lanes, int64_t lane_stride) {
                   if (!valid) return;
                   const uint8_t* stick = static_cast<const uint8_t*>(device) + uint64_t(s) * rb;
                   convert_strided(l.format, stick, 0, 1, host.format, host.data, off, lane_stride,
                                   size_t(lanes), r);
                 });
}

}  // namespace vspyre::fmt
