// Runtime shim: H2D / D2H through a DCI for the torch-spyre format pairs, raw program DMAs,
// fillAsync (flex-api.md 4.3, 5.2).
#include <atomic>
#include <cmath>
#include <optional>
#include <sstream>
#include <random>

#include "catch.h"
#include "shim_test_util.h"

using namespace shimtest;

namespace {

struct Pair {
  DataFormats host, dev;  // H2D host->dev, D2H dev->host
};

// Values exactly representable in every format of the pair.
double sample(DataFormats host, DataFormats dev, size_t i) {
  const int64_t k = static_cast<int64_t>((i * 7 + 3) % 16) - 8;  // -8..7
  if (host == DataFormats::BOOL) return static_cast<double>(i % 3 == 0);
  auto is_int = [](DataFormats f) {
    return f == DataFormats::SENINT4 || f == DataFormats::SENINT8 || f == DataFormats::SENINT16 ||
           f == DataFormats::IEEE_INT32 || f == DataFormats::IEEE_INT64 || f == DataFormats::SENUINT32;
  };
  if (is_int(host) || is_int(dev))
    return host == DataFormats::SENUINT32 ? static_cast<double>(k + 8) : static_cast<double>(k);
  return static_cast<double>(k) * 0.25;
}

void round_trip(const Pair& p, std::vector<int64_t> shape) {
  INFO("pair " << EnumsConversion::dataFormatsToString(p.host) << " <-> "
               << EnumsConversion::dataFormatsToString(p.dev) << " rank " << shape.size());
  auto ctx = make_context();
  auto* s = ctx->getDefaultStream();
  const auto t = plan_transfer(shape, p.dev);
  size_t n = 1;
  for (auto d : shape) n *= static_cast<size_t>(d);
  std::vector<uint8_t> host(fmt::bytes_for(F(p.host), n) + 8);
  for (size_t i = 0; i < n; ++i) fmt::store_element(F(p.host), host.data(), i, sample(p.host, p.dev, i));
  auto dev = ctx->getAllocator()->allocate(std::max<uint64_t>(t.device_bytes, host.size()),
                                           tensor_directive());
  const auto h2d = make_dci(t, p.host, p.dev, true);
  REQUIRE(fmt::dci_pair_supported(F(h2d.dataformat_src_), F(h2d.dataformat_dst_)));
  dma(s, host.data(), dev, true, &h2d);
  s->synchronize();

  // The device image equals the formats library's own stick layout of the tensor.
  std::vector<uint8_t> expect(dev.total_size(), 0);
  fmt::HostTensor ht{host.data(), F(p.host), t.host_size, t.host_stride, 0};
  fmt::host_to_device(ht, t.layout, expect.data());
  CHECK(device_bytes(s, dev) == expect);

  std::vector<uint8_t> back(host.size(), 0);
  const auto d2h = make_dci(t, p.host, p.dev, false);
  REQUIRE(fmt::dci_pair_supported(F(d2h.dataformat_src_), F(d2h.dataformat_dst_)));
  dma(s, back.data(), dev, false, &d2h);
  s->synchronize();
  for (size_t i = 0; i < n; ++i)
    REQUIRE(fmt::load_element(F(p.host), back.data(), i) == fmt::load_element(F(p.host), host.data(), i));
}

}  // namespace

TEST_CASE("shim: the test DCI builder reproduces the flex-api worked example") {
  const auto t = plan_transfer({3, 100}, DataFormats::SEN169_FP16);
  CHECK(t.layout.device_size == std::vector<int64_t>{2, 3, 64});
  const auto dci = make_dci(t, DataFormats::IEEE_FP16, DataFormats::SEN169_FP16, true);
  REQUIRE(dci.dcsi_.size() == 2);
  CHECK(dci.dcsi_[0].size_ == std::vector<int64_t>{64, 3, 1});
  CHECK(dci.dcsi_[0].stride_src_ == std::vector<int64_t>{1, 100, 64});
  CHECK(dci.dcsi_[0].stride_dst_ == std::vector<int64_t>{1, 64, 192});
  CHECK(dci.dcsi_[1].size_ == std::vector<int64_t>{36, 3, 1});
  CHECK(dci.dcsi_[1].offset_src_ == 64);
  CHECK(dci.dcsi_[1].offset_dst_ == 192);
  CHECK(dci.input_shape_ == std::vector<int64_t>{100, 3});
  CHECK(dci.output_shape_ == std::vector<int64_t>{64, 3, 2});
  std::ostringstream js;
  dci.exportJson(js);
  CHECK(has(js.str(), "DCI-Tensor-0"));
}

TEST_CASE("shim: H2D and D2H through a DCI round-trip every torch-spyre format pair") {
  const std::vector<Pair> pairs = {
      {DataFormats::IEEE_FP32, DataFormats::IEEE_FP32},   // float32
      {DataFormats::IEEE_FP16, DataFormats::SEN169_FP16}, // float16 -> DL16
      {DataFormats::BFLOAT16, DataFormats::SEN169_FP16},  // bfloat16 -> DL16
      {DataFormats::IEEE_FP32, DataFormats::SEN169_FP16}, // fp32 host into a DL16 tensor
      {DataFormats::BOOL, DataFormats::SEN169_FP16},      // bool -> DL16
      {DataFormats::SENINT8, DataFormats::SENINT8},       // int8
      {DataFormats::IEEE_INT32, DataFormats::IEEE_INT32}, // int32
      {DataFormats::IEEE_INT64, DataFormats::IEEE_INT32}, // int64 (downcast)
      {DataFormats::SENUINT32, DataFormats::SENUINT32},   // uint8
      {DataFormats::SEN143_FP8, DataFormats::SEN143_FP8}, // float8_e4m3fn
      {DataFormats::IEEE_FP32, DataFormats::SEN143_FP8},  // fp32 -> fp8
      {DataFormats::IEEE_FP32, DataFormats::SENINT8},     // fp32 -> int8
      {DataFormats::IEEE_FP32, DataFormats::SENINT4},     // fp32 -> int4 (packed)
  };
  const std::vector<std::vector<int64_t>> shapes = {{1}, {100}, {3, 100}, {4, 64}, {2, 5, 70}, {2, 3, 2, 33}};
  for (const auto& p : pairs)
    for (const auto& sh : shapes) round_trip(p, sh);
}

TEST_CASE("shim: fp32 to DL16 and back stays within DL16 precision") {
  auto ctx = make_context();
  auto* s = ctx->getDefaultStream();
  const auto t = plan_transfer({7, 130}, DataFormats::SEN169_FP16);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-100.f, 100.f);
  std::vector<float> host(7 * 130), back(host.size());
  for (auto& v : host) v = u(rng);
  auto dev = ctx->getAllocator()->allocate(t.device_bytes, tensor_directive());
  const auto h2d = make_dci(t, DataFormats::IEEE_FP32, DataFormats::SEN169_FP16, true);
  const auto d2h = make_dci(t, DataFormats::IEEE_FP32, DataFormats::SEN169_FP16, false);
  dma(s, host.data(), dev, true, &h2d);
  dma(s, back.data(), dev, false, &d2h);
  s->synchronize();
  for (size_t i = 0; i < host.size(); ++i)
    REQUIRE(std::abs(back[i] - host[i]) <= 1e-3 * std::abs(host[i]) + 1e-6);
}

TEST_CASE("shim: H2D from a strided host view with a storage offset") {
  auto ctx = make_context();
  auto* s = ctx->getDefaultStream();
  // A transposed [70, 5] view of a [5, 70] fp16 storage that starts 3 elements in.
  std::vector<uint16_t> storage(3 + 5 * 70);
  for (size_t i = 0; i < storage.size(); ++i) storage[i] = fmt::fp16_from_float(float(i % 50) - 20.f);
  const auto t = plan_transfer({70, 5}, DataFormats::SEN169_FP16, {1, 70}, 3);
  auto dev = ctx->getAllocator()->allocate(t.device_bytes, tensor_directive());
  const auto dci = make_dci(t, DataFormats::IEEE_FP16, DataFormats::SEN169_FP16, true);
  dma(s, storage.data(), dev, true, &dci);
  std::vector<uint8_t> expect(dev.total_size(), 0);
  fmt::HostTensor ht{storage.data(), fmt::DataFormat::IEEE_FP16, t.host_size, t.host_stride, 3};
  fmt::host_to_device(ht, t.layout, expect.data());
  CHECK(device_bytes(s, dev) == expect);
  // D2H into a fresh contiguous buffer.
  const auto tc = plan_transfer({70, 5}, DataFormats::SEN169_FP16);
  std::vector<uint16_t> out(70 * 5);
  const auto d2h = make_dci(tc, DataFormats::IEEE_FP16, DataFormats::SEN169_FP16, false);
  dma(s, out.data(), dev, false, &d2h);
  s->synchronize();
  for (int r = 0; r < 70; ++r)
    for (int c = 0; c < 5; ++c) REQUIRE(out[r * 5 + c] == storage[3 + c * 70 + r]);
}

TEST_CASE("shim: raw program DMAs use Chunk views and keep the D2H callback alive") {
  auto ctx = make_context();
  auto alloc = ctx->getAllocator();
  auto* s = ctx->getDefaultStream();
  // JobPreparationPlan: Allocate(4096, Program) then InitTransfer at dev_ptr base+1024.
  auto prog = alloc->allocate(4096, flex::AllocationDirective(flex::PlacementPolicy::Bind, {0},
                                                              std::nullopt, flex::MemoryType::Program));
  const auto& c0 = prog.chunks()[0];
  const uint64_t dev_ptr = flex::PROG_OFFSET_BASE + 1024;
  flex::CompositeAddress init_view(
      flex::Chunk(flex::LogicalAddress(c0.addr.region_id, c0.addr.offset + (dev_ptr - flex::PROG_OFFSET_BASE)),
                  512, c0.domain_id));
  std::string bin(512, '\0');
  for (size_t i = 0; i < bin.size(); ++i) bin[i] = static_cast<char>(i * 13);
  auto* p = flex::createDmaParams(bin.data(), init_view.total_size(), true, &init_view);
  p->pipeline_barrier = true;
  s->launchOperationH2D(p);
  flex::destroyDmaParams(p);
  bin.assign(512, 'x');  // snapshot taken at launch: later host writes do not leak in

  // D2H by DMVA through a shared view kept alive only by the callback.
  std::vector<char> out(256);
  std::weak_ptr<flex::CompositeAddress> weak;
  int called = 0;
  {
    auto view = std::make_shared<flex::CompositeAddress>(flex::Chunk(
        flex::LogicalAddress(c0.addr.region_id, c0.addr.offset + 1024 + 256), 256, c0.domain_id));
    weak = view;
    auto* q = flex::createDmaParams(out.data(), view->total_size(), false, view.get());
    q->callback = [view, &called](void*) { ++called; };
    s->launchOperationD2H(q);
    flex::destroyDmaParams(q);
  }
  s->synchronize();
  CHECK(called == 1);
  CHECK(weak.expired());
  for (size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == static_cast<char>((i + 256) * 13));
}

TEST_CASE("shim: fillAsync writes the value in the device format over the whole allocation") {
  auto ctx = make_context();
  auto alloc = ctx->getAllocator();
  auto* s = ctx->getDefaultStream();
  auto check_fill = [&](DataFormats f, double v, size_t nbytes) {
    INFO(EnumsConversion::dataFormatsToString(f) << " " << v);
    auto a = alloc->allocate(nbytes, tensor_directive());
    s->fillAsync(&a, v, f, true);
    auto bytes = device_bytes(s, a);
    const size_t n = bytes.size() * 8 / fmt::bits_per_element(F(f));
    for (size_t i = 0; i < n; ++i) REQUIRE(fmt::load_element(F(f), bytes.data(), i) == fmt::load_element(F(f), bytes.data(), 0));
    std::vector<uint8_t> one(8, 0);
    fmt::store_element(F(f), one.data(), 0, v);
    CHECK(fmt::read_code(F(f), bytes.data(), n - 1) == fmt::read_code(F(f), one.data(), 0));
    return bytes;
  };
  auto dl16 = check_fill(DataFormats::SEN169_FP16, 1.0, 1000);  // torch.ones (fp16, bf16, bool)
  CHECK(dl16.size() == 1024);                                    // padding included
  CHECK(fmt::read_code(fmt::DataFormat::SEN169_FP16, dl16.data(), 511) == fmt::k_dl16_one);
  check_fill(DataFormats::SEN169_FP16, 0.0, 4096);  // torch.zeros
  check_fill(DataFormats::IEEE_FP32, -2.5, 512);
  check_fill(DataFormats::SENINT8, -3, 256);
  check_fill(DataFormats::SEN143_FP8, 0.5, 128);
  check_fill(DataFormats::IEEE_INT32, 7, 128);
  auto i4 = check_fill(DataFormats::SENINT4, -2, 128);
  CHECK(i4[0] == 0xEE);
  // A fill after an H2D on the same stream lands after it.
  auto a = alloc->allocate(256, tensor_directive());
  std::vector<uint8_t> junk(256, 0x55);
  dma(s, junk.data(), a, true, nullptr);
  s->fillAsync(&a, 0.0, DataFormats::SEN169_FP16);
  auto z = device_bytes(s, a);
  CHECK(std::all_of(z.begin(), z.end(), [](uint8_t b) { return b == 0; }));
}

namespace {

// A sparse backend that counts device read-backs.
struct CountingBackend : vspyre::shim::SparseBackend {
  std::atomic<int> reads{0};
  void read(uint64_t dmva, void* dst, size_t n) override {
    ++reads;
    SparseBackend::read(dmva, dst, n);
  }
};

std::shared_ptr<flex::RuntimeContext> counting_context(std::shared_ptr<CountingBackend> b) {
  vspyre::shim::ContextOptions o;
  o.capacity_bytes = uint64_t{64} << 30;
  o.backend = b;
  return vspyre::shim::createRuntimeContext(o);
}

data_conversion_info one_nest_dci(DataFormats from, DataFormats to, bool h2d,
                                  std::vector<data_conversion_stride_info> nests) {
  data_conversion_info dci{};
  dci.dci_dsName_ = "DCI-Tensor-0";
  dci.isHostToSen_ = h2d;
  dci.dataformat_src_ = from;
  dci.dataformat_dst_ = to;
  dci.dcsi_ = std::move(nests);
  return dci;
}

data_conversion_stride_info nest(std::vector<int64_t> size, std::vector<int64_t> ss,
                                 std::vector<int64_t> ds, int64_t so = 0, int64_t d_o = 0) {
  data_conversion_stride_info n;
  n.size_ = std::move(size);
  n.stride_src_ = std::move(ss);
  n.stride_dst_ = std::move(ds);
  n.offset_src_ = so;
  n.offset_dst_ = d_o;
  return n;
}

uint16_t dl16_of_fp16(uint16_t h) { return fmt::dl16_from_float(fmt::fp16_to_float(h)); }

}  // namespace

TEST_CASE("shim: a dense DCI H2D skips the device read-back, a partial one keeps untouched bytes") {
  auto backend = std::make_shared<CountingBackend>();
  auto ctx = counting_context(backend);
  auto* s = ctx->getDefaultStream();
  const size_t n = 40000;  // 80000 device bytes: crosses a 64 KiB page
  auto dev = ctx->getAllocator()->allocate(2 * n, tensor_directive());
  std::vector<uint8_t> junk(dev.total_size(), 0xAB);
  dma(s, junk.data(), dev, true, nullptr);
  s->synchronize();
  std::vector<uint16_t> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = fmt::fp16_from_float(float(int(i % 97) - 48) * 0.5f);

  SECTION("dense: two nests, a transposed one and a contiguous one, cover every byte") {
    // Elements [0, 20000) as a transposed 100x200 block, [20000, 40000) contiguous.
    const auto dci = one_nest_dci(DataFormats::IEEE_FP16, DataFormats::SEN169_FP16, true,
                                  {nest({100, 200}, {200, 1}, {1, 100}), nest({20000}, {1}, {1}, 20000, 20000)});
    backend->reads = 0;
    dma(s, host.data(), dev, true, &dci);
    std::fill(host.begin(), host.end(), uint16_t(0x3C00));  // later host writes do not leak in
    s->synchronize();
    CHECK(backend->reads == 0);
    const auto bytes = device_bytes(s, dev);
    std::vector<uint16_t> d(n);
    std::memcpy(d.data(), bytes.data(), 2 * n);
    for (int64_t r = 0; r < 100; ++r)
      for (int64_t c = 0; c < 200; ++c)
        REQUIRE(d[size_t(c * 100 + r)] ==
                dl16_of_fp16(fmt::fp16_from_float(float(int((r * 200 + c) % 97) - 48) * 0.5f)));
    for (size_t i = 20000; i < n; ++i)
      REQUIRE(d[i] == dl16_of_fp16(fmt::fp16_from_float(float(int(i % 97) - 48) * 0.5f)));
  }
  SECTION("partial: every other element, and a gap between two nests") {
    const auto dci = one_nest_dci(DataFormats::IEEE_FP16, DataFormats::SEN169_FP16, true,
                                  {nest({10000}, {1}, {2}), nest({5000}, {1}, {1}, 10000, 25000)});
    backend->reads = 0;
    dma(s, host.data(), dev, true, &dci);
    const auto expect_host = host;
    std::fill(host.begin(), host.end(), uint16_t(0x3C00));
    s->synchronize();
    CHECK(backend->reads == 1);
    const auto bytes = device_bytes(s, dev);
    std::vector<uint16_t> d(n);
    std::memcpy(d.data(), bytes.data(), 2 * n);
    for (size_t i = 0; i < n; ++i) {
      INFO("element " << i);
      if (i < 20000 && i % 2 == 0) REQUIRE(d[i] == dl16_of_fp16(expect_host[i / 2]));
      else if (i >= 25000 && i < 30000) REQUIRE(d[i] == dl16_of_fp16(expect_host[i - 15000]));
      else REQUIRE(d[i] == 0xABAB);
    }
  }
  SECTION("partial: a packed SENINT4 nest starting and ending mid-byte keeps the other nibbles") {
    std::vector<float> f(9);
    for (size_t i = 0; i < f.size(); ++i) f[i] = float(int(i) - 4);
    const auto dci = one_nest_dci(DataFormats::IEEE_FP32, DataFormats::SENINT4, true,
                                  {nest({9}, {1}, {1}, 0, 1)});
    backend->reads = 0;
    dma(s, f.data(), dev, true, &dci);
    s->synchronize();
    CHECK(backend->reads == 1);
    const auto bytes = device_bytes(s, dev);
    CHECK((bytes[0] & 0x0F) == 0x0B);  // element 0 untouched
    for (size_t i = 0; i < 9; ++i) REQUIRE(fmt::int4_get(bytes.data(), i + 1) == int(i) - 4);
    CHECK((bytes[5] & 0xF0) == 0xA0);  // element 10 untouched
    CHECK(bytes[6] == 0xAB);
  }
}

TEST_CASE("shim: H2D pages taken over from the staging buffer stay correct under later writes and frees") {
  auto ctx = make_context();
  auto* s = ctx->getDefaultStream();
  auto alloc = ctx->getAllocator();
  const size_t bytes = 5 * 65536 + 1000;
  std::optional<flex::CompositeAddress> held(alloc->allocate(bytes, tensor_directive()));
  const auto& a = *held;
  std::vector<uint8_t> h(a.total_size());  // the raw H2D moves the whole allocation
  for (size_t i = 0; i < h.size(); ++i) h[i] = uint8_t(i * 7 + 1);
  dma(s, h.data(), a, true, nullptr);  // raw H2D: whole pages adopted
  // A second raw H2D over the middle, through a sub-view at an unaligned offset.
  const auto& c0 = a.chunks()[0];
  flex::CompositeAddress mid(flex::Chunk(flex::LogicalAddress(c0.addr.region_id, c0.addr.offset + 70000),
                                         140000, c0.domain_id));
  std::vector<uint8_t> m(140000, 0x5A);
  auto* p = flex::createDmaParams(m.data(), mid.total_size(), true, &mid);
  s->launchOperationH2D(p);
  flex::destroyDmaParams(p);
  s->synchronize();
  auto got = device_bytes(s, a);
  for (size_t i = 0; i < bytes; ++i) {
    const uint8_t want = (i >= 70000 && i < 210000) ? 0x5A : uint8_t(i * 7 + 1);
    REQUIRE(got[i] == want);
  }
  // Freed and reallocated memory reads as zero.
  held.reset();
  s->synchronize();
  auto b = alloc->allocate(bytes, tensor_directive());
  got = device_bytes(s, b);
  CHECK(std::all_of(got.begin(), got.end(), [](uint8_t v) { return v == 0; }));
}

TEST_CASE("shim: D2H of more than one 4 MiB piece, contiguous and transposed, matches the conversion") {
  auto ctx = make_context();
  auto* s = ctx->getDefaultStream();
  const int64_t R = 1500, C = 2100;  // 3.15 M elements: 6.3 MB of DL16
  const size_t n = size_t(R * C);
  std::vector<uint16_t> host(n);
  std::mt19937 rng(9);
  for (auto& v : host) v = uint16_t(rng()) & 0xFBFF;  // no fp16 inf/NaN: a lossless round trip is not expected anyway
  auto dev = ctx->getAllocator()->allocate(2 * n, tensor_directive());
  // Device [C][R] holds host[r][c] at c*R + r.
  const auto up = one_nest_dci(DataFormats::IEEE_FP16, DataFormats::SEN169_FP16, true,
                               {nest({R, C}, {C, 1}, {1, R})});
  dma(s, host.data(), dev, true, &up);
  s->synchronize();
  const auto bytes = device_bytes(s, dev);
  std::vector<uint16_t> d(n), expect_back(n), back(n, 0);
  std::memcpy(d.data(), bytes.data(), 2 * n);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) REQUIRE(d[size_t(c * R + r)] == dl16_of_fp16(host[size_t(r * C + c)]));
  // Transposed back.
  const auto down_t = one_nest_dci(DataFormats::SEN169_FP16, DataFormats::IEEE_FP16, false,
                                   {nest({R, C}, {1, R}, {C, 1})});
  dma(s, back.data(), dev, false, &down_t);
  s->synchronize();
  for (size_t i = 0; i < n; ++i)
    REQUIRE(back[i] == fmt::fp16_from_float(fmt::dl16_to_float(d[(i % size_t(C)) * size_t(R) + i / size_t(C)])));
  // Contiguous, with an element offset on both sides.
  std::fill(back.begin(), back.end(), uint16_t(0x1234));
  const auto down_c = one_nest_dci(DataFormats::SEN169_FP16, DataFormats::IEEE_FP16, false,
                                   {nest({int64_t(n) - 5}, {1}, {1}, 3, 2)});
  dma(s, back.data(), dev, false, &down_c);
  s->synchronize();
  CHECK(back[0] == 0x1234);
  CHECK(back[1] == 0x1234);
  CHECK(back[n - 3] == 0x1234);
  for (size_t i = 2; i < n - 3; ++i) REQUIRE(back[i] == fmt::fp16_from_float(fmt::dl16_to_float(d[i + 1])));
}
