// Bulk/strided conversion and the stick-tiled device layout (formats.md D.2, flex-api.md 5.2).
#include "catch.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "sim/formats/formats.h"

using namespace vspyre::fmt;
using D = DataFormat;

namespace {

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = uint8_t(rng());
  return b;
}

std::vector<D> convertible_formats() {
  std::vector<D> v;
  for (D f : k_all_formats)
    if (is_convertible(f)) v.push_back(f);
  return v;
}

// fp16 codes of small integers and halves: exactly representable in DL16, fp32 and fp16.
std::vector<uint16_t> fp16_ramp(size_t n) {
  std::vector<uint16_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = fp16_from_float(float(int(i % 997) - 498) * 0.5f);
  return v;
}

}  // namespace

TEST_CASE("formats: bulk convert equals element-wise conversion for every format pair", "[formats][bulk]") {
  const size_t n = 2053;  // crosses the 1024-element chunks, odd for the packed formats
  int bad = 0, pairs = 0;
  for (D from : convertible_formats()) {
    const auto src = random_bytes(bytes_for(from, n), 1000 + uint32_t(from));
    for (D to : convertible_formats()) {
      std::vector<uint8_t> got(bytes_for(to, n) + 1, 0x5A), want(bytes_for(to, n) + 1, 0x5A);
      convert(from, src.data(), to, got.data(), n);
      for (size_t i = 0; i < n; ++i) store_element(to, want.data(), i, load_element(from, src.data(), i));
      if (from == to)  // same format is a bit copy, NaN payloads included
        for (size_t i = 0; i < n; ++i) write_code(to, want.data(), i, read_code(from, src.data(), i));
      // NaN payloads may differ (bulk bf16->fp32 keeps them, the double path quiets them).
      bool same = got.back() == want.back();
      for (size_t i = 0; i < n && same; ++i) {
        const bool both_nan = std::isnan(load_element(to, got.data(), i)) &&
                              std::isnan(load_element(to, want.data(), i));
        same = both_nan || read_code(to, got.data(), i) == read_code(to, want.data(), i);
      }
      if (!same) {
        ++bad;
        WARN(std::string(name(from)) + " -> " + std::string(name(to)));
      }
      ++pairs;
    }
  }
  CHECK(pairs == 17 * 17);
  CHECK(bad == 0);
}

TEST_CASE("formats: strided conversion and DCI loop nests", "[formats][bulk]") {
  // Every other element of a fp32 array into the odd int4 lanes of a packed buffer.
  std::vector<float> src(40);
  for (size_t i = 0; i < src.size(); ++i) src[i] = float(int(i % 16) - 8);
  std::vector<uint8_t> dst(20, 0);
  convert_strided(D::IEEE_FP32, src.data(), 0, 2, D::SENINT4, dst.data(), 1, 2, 20);
  for (size_t i = 0; i < 20; ++i) {
    CHECK(int4_get(dst.data(), 2 * i + 1) == int(src[2 * i]));
    CHECK(int4_get(dst.data(), 2 * i) == 0);
  }
  // Negative stride reverses.
  std::vector<uint16_t> rev(40);
  convert_strided(D::IEEE_FP32, src.data(), 39, -1, D::SEN169_FP16, rev.data(), 0, 1, 40);
  for (size_t i = 0; i < 40; ++i) CHECK(dl16_to_float(rev[i]) == src[39 - i]);

  // flex-api.md 5.2 worked example: contiguous fp16 [3,100] -> device [2,3,64] via two dcsi
  // entries, which must equal the generic layout mapping.
  const auto host = fp16_ramp(300);
  std::vector<uint16_t> dev_nest(2 * 3 * 64, 0), dev_map(2 * 3 * 64, 0xEEEE);
  convert_nest(D::IEEE_FP16, host.data(), D::SEN169_FP16, dev_nest.data(),
               {{64, 3, 1}, {1, 100, 64}, {1, 64, 192}, 0, 0});
  convert_nest(D::IEEE_FP16, host.data(), D::SEN169_FP16, dev_nest.data(),
               {{36, 3, 1}, {1, 100, 64}, {1, 64, 192}, 64, 192});
  const int64_t size[] = {3, 100};
  const auto stride = contiguous_strides(size);
  const StickLayout l = default_stick_layout(size, D::SEN169_FP16);
  CHECK(l.device_size == std::vector<int64_t>{2, 3, 64});
  CHECK(stride_map(l, size, stride) == std::vector<int64_t>{64, 100, 1});
  host_to_device({host.data(), D::IEEE_FP16, size, stride}, l, dev_map.data());
  CHECK(dev_nest == dev_map);  // including the zeroed padding lanes [1, r, 36..63]

  // formats.md D.2: host (1024, 256) fp16 -> loops (4, 1024, 64), device strides (65536, 64, 1).
  const auto big = fp16_ramp(1024 * 256);
  std::vector<uint16_t> a(1024 * 256), b(1024 * 256);
  convert_nest(D::IEEE_FP16, big.data(), D::SEN169_FP16, a.data(),
               {{64, 1024, 4}, {1, 256, 64}, {1, 64, 65536}, 0, 0});
  const int64_t bsize[] = {1024, 256};
  const auto bstride = contiguous_strides(bsize);
  host_to_device({big.data(), D::IEEE_FP16, bsize, bstride},
                 default_stick_layout(bsize, D::SEN169_FP16), b.data());
  CHECK(a == b);
}

TEST_CASE("formats: default stick layouts from formats.md D.2 and flex-api.md 5.2", "[formats][layout]") {
  {
    const int64_t s[] = {64, 128};  // formats.md A.4
    const StickLayout l = default_stick_layout(s, D::SEN169_FP16);
    CHECK(l.device_size == std::vector<int64_t>{2, 64, 64});
    CHECK(l.dim_map == std::vector<int32_t>{1, 0, 1});
    CHECK(device_image_bytes(l) == 2 * 64 * 128);
    const int64_t core1[] = {32, 0};  // core 1's rows 32..63 start 4096 B in
    CHECK(device_byte_offset(l, core1) == 4096);
    const int64_t col64[] = {0, 64};
    CHECK(device_byte_offset(l, col64) == 64 * 128);
  }
  {
    const int64_t s[] = {5, 100, 150};
    const StickLayout l = default_stick_layout(s, D::SEN169_FP16);
    CHECK(l.device_size == std::vector<int64_t>{100, 3, 5, 64});
    const auto st = contiguous_strides(s);
    CHECK(stride_map(l, s, st) == std::vector<int64_t>{150, 64, 15000, 1});
    CHECK(device_image_bytes(l) == 100 * 3 * 5 * 128);
  }
  {
    const int64_t s[] = {2, 3, 4, 5};  // flex-api: dims 1..N-2, ceil(last/eps), dim 0, eps
    CHECK(default_stick_layout(s, D::IEEE_FP32).device_size == std::vector<int64_t>{3, 4, 1, 2, 32});
  }
  {
    const int64_t s[] = {130};
    const StickLayout l = default_stick_layout(s, D::SEN169_FP16);
    CHECK(l.device_size == std::vector<int64_t>{3, 64});
    CHECK(device_image_bytes(l) == 384);
  }
  {
    const StickLayout l = default_stick_layout(std::span<const int64_t>{}, D::IEEE_FP32);
    CHECK(l.device_size == std::vector<int64_t>{1, 32});
    CHECK(device_image_bytes(l) == 128);
  }
  {
    const int64_t s[] = {300};  // reduced output: sparse, one value per stick
    const int32_t order[] = {0, -1};
    const StickLayout l = stick_layout_with_dim_order(s, order, D::SEN169_FP16);
    CHECK(l.device_size == std::vector<int64_t>{1, 300, 64});
    CHECK(l.dim_map == std::vector<int32_t>{-1, 0, -1});
    const int64_t r7[] = {7};
    CHECK(device_byte_offset(l, r7) == 7 * 128);
  }
  {
    const int64_t s[] = {4, 512, 256};  // batch-outer
    const int32_t order[] = {1, 0, 2};
    const StickLayout l = stick_layout_with_dim_order(s, order, D::SEN169_FP16);
    CHECK(l.device_size == std::vector<int64_t>{4, 4, 512, 64});
    const int64_t c[] = {1, 0, 0};
    CHECK(device_byte_offset(l, c) == 4 * 512 * 128);
  }
  {
    const int64_t s[] = {256, 1000};  // int4: 256 per stick
    const StickLayout l = default_stick_layout(s, D::SENINT4);
    CHECK(l.device_size == std::vector<int64_t>{4, 256, 256});
    const int64_t c[] = {3, 257};
    CHECK(device_element_index(l, c) == (1 * 256 + 3) * 256 + 1);
  }
  // Malformed layouts are rejected.
  const int64_t s2[] = {4, 8};
  StickLayout bad = default_stick_layout(s2, D::SEN169_FP16);
  bad.device_size.back() = 32;
  CHECK_THROWS_AS(validate(bad, s2), std::invalid_argument);
  const int64_t s3[] = {4, 200};
  CHECK_THROWS_AS(validate(default_stick_layout(s2, D::SEN169_FP16), s3), std::invalid_argument);
  const int32_t dup[] = {0, 0};
  CHECK_THROWS_AS(stick_layout_with_dim_order(s2, dup, D::SEN169_FP16), std::invalid_argument);
  CHECK_THROWS_AS(default_stick_layout(s2, D::SEN18F_FP24), std::invalid_argument);
}

TEST_CASE("formats: 2-D byte offsets follow ((c/64)*R + r)*128 + (c%64)*2", "[formats][layout]") {
  const int64_t R = 37, C = 150;
  const int64_t s[] = {R, C};
  const StickLayout l = default_stick_layout(s, D::SEN169_FP16);
  std::vector<uint16_t> host(size_t(R * C));
  for (size_t i = 0; i < host.size(); ++i) host[i] = uint16_t(0x3E00 + (i % 400));  // distinct-ish DL16 codes
  std::vector<uint8_t> dev(device_image_bytes(l));
  const auto st = contiguous_strides(s);
  host_to_device({host.data(), D::SEN169_FP16, s, st}, l, dev.data());
  int bad = 0;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const uint64_t off = uint64_t(((c / 64) * R + r) * 128 + (c % 64) * 2);
      const int64_t rc[] = {r, c};
      if (device_byte_offset(l, rc) != off) ++bad;
      uint16_t v;
      std::memcpy(&v, dev.data() + off, 2);
      if (v != host[size_t(r * C + c)]) ++bad;
    }
  CHECK(bad == 0);
  // Padding lanes (c = 150..191 in stick column 2) are zero.
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = C; c < 192; ++c) {
      uint16_t v;
      std::memcpy(&v, dev.data() + ((2 * R + r) * 128 + (c % 64) * 2), 2);
      if (v != 0) ++bad;
    }
  CHECK(bad == 0);
}

TEST_CASE("formats: host -> device -> host is the identity for odd shapes and strides", "[formats][layout]") {
  struct Case {
    std::vector<int64_t> size;
    std::vector<int32_t> order;  // empty: default
    D host, dev;
  };
  const std::vector<Case> cases = {
      {{3, 100}, {}, D::IEEE_FP16, D::SEN169_FP16},
      {{5, 7, 130}, {}, D::IEEE_FP16, D::SEN169_FP16},
      {{5, 7, 130}, {1, 0, 2}, D::BFLOAT16, D::SEN169_FP16},
      {{2, 3, 4, 65}, {}, D::IEEE_FP32, D::IEEE_FP32},
      {{1}, {}, D::IEEE_FP32, D::SEN169_FP16},
      {{}, {}, D::IEEE_FP16, D::SEN169_FP16},
      {{77}, {0, -1}, D::IEEE_FP16, D::SEN169_FP16},
      {{9, 300}, {}, D::SENINT8, D::SENINT8},
      {{9, 301}, {}, D::IEEE_FP32, D::SENINT4},
      {{6, 1030}, {}, D::IEEE_FP32, D::SENUINT2},
      {{4, 33}, {}, D::IEEE_INT64, D::IEEE_INT32},
      {{3, 129}, {}, D::IEEE_FP32, D::SEN143_FP8},
      {{3, 0, 5}, {}, D::IEEE_FP16, D::SEN169_FP16},
  };
  std::mt19937 rng(3);
  for (const Case& c : cases) {
    const int64_t numel = std::accumulate(c.size.begin(), c.size.end(), int64_t(1), std::multiplies<>());
    // Values every format in the pair holds exactly: small integers (and 0..3 for uint2).
    std::vector<double> vals(static_cast<size_t>(numel));
    for (auto& v : vals) v = c.dev == D::SENUINT2 ? double(rng() % 4) : double(int(rng() % 15) - 7);
    // The host tensor is a transposed-storage view with a storage offset: logical dims reversed
    // in memory, so no host stride is 1 along the stick dimension unless rank <= 1.
    const size_t rank = c.size.size();
    std::vector<int64_t> stride(rank);
    int64_t st = 1;
    for (size_t d = 0; d < rank; ++d) {
      stride[d] = st;
      st *= std::max<int64_t>(c.size[d], 1);
    }
    const int64_t offset = 3;
    std::vector<uint8_t> hostbuf(bytes_for(c.host, size_t(numel + offset)), 0);
    std::vector<int64_t> idx(rank, 0);
    for (int64_t i = 0; i < numel; ++i) {
      int64_t off = offset, rem = i;
      for (size_t d = rank; d-- > 0;) {
        off += (rem % c.size[d]) * stride[d];
        rem /= c.size[d];
      }
      store_element(c.host, hostbuf.data(), size_t(off), vals[size_t(i)]);
    }
    const StickLayout l = c.order.empty() ? default_stick_layout(c.size, c.dev)
                                          : stick_layout_with_dim_order(c.size, c.order, c.dev);
    std::vector<uint8_t> dev(device_image_bytes(l) + 16, 0xCD);
    host_to_device({hostbuf.data(), c.host, c.size, stride, offset}, l, dev.data());
    CHECK(dev[dev.size() - 1] == 0xCD);  // nothing written past the image
    // Each element landed where device_element_index says.
    int bad = 0;
    for (int64_t i = 0; i < numel; ++i) {
      std::vector<int64_t> coord(rank);
      int64_t rem = i;
      for (size_t d = rank; d-- > 0;) {
        coord[d] = rem % c.size[d];
        rem /= c.size[d];
      }
      const int64_t e = device_element_index(l, coord);
      if (load_element(c.dev, dev.data(), size_t(e)) != vals[size_t(i)]) ++bad;
    }
    CHECK(bad == 0);
    // Back into a fresh buffer with the same strides.
    std::vector<uint8_t> back(hostbuf.size(), 0);
    device_to_host(dev.data(), l, {back.data(), c.host, c.size, stride, offset});
    CHECK(back == hostbuf);
  }
}

TEST_CASE("formats: padding is zeroed or left alone as asked", "[formats][layout]") {
  const int64_t s[] = {2, 70};
  const auto st = contiguous_strides(s);
  const StickLayout l = default_stick_layout(s, D::SEN169_FP16);
  std::vector<float> host(140, 1.0f);
  std::vector<uint16_t> dev(device_image_bytes(l) / 2, 0xBEEF);
  host_to_device({host.data(), D::IEEE_FP32, s, st}, l, dev.data(), Padding::leave);
  // Stick column 1 holds columns 64..69 in lanes 0..5; lanes 6..63 untouched.
  for (int r = 0; r < 2; ++r) {
    CHECK(dev[size_t((2 + r) * 64 + 5)] == k_dl16_one);
    CHECK(dev[size_t((2 + r) * 64 + 6)] == 0xBEEF);
  }
  host_to_device({host.data(), D::IEEE_FP32, s, st}, l, dev.data(), Padding::zero);
  for (int r = 0; r < 2; ++r) CHECK(dev[size_t((2 + r) * 64 + 6)] == 0);
  // Sparse layout: only lane 0 of each stick is data.
  const int64_t s1[] = {3};
  const int32_t order[] = {0, -1};
  const StickLayout sp = stick_layout_with_dim_order(s1, order, D::SEN169_FP16);
  const float v[] = {1.0f, 2.0f, 3.0f};
  const auto st1 = contiguous_strides(s1);
  std::vector<uint16_t> sdev(3 * 64, 0xBEEF);
  host_to_device({v, D::IEEE_FP32, s1, st1}, sp, sdev.data());
  for (int r = 0; r < 3; ++r) {
    CHECK(dl16_to_float(sdev[size_t(r * 64)]) == v[r]);
    CHECK(sdev[size_t(r * 64 + 1)] == 0);
  }
}
