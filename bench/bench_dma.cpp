// Host time of the runtime shim's DCI DMAs, through the public flex API exactly as torch-spyre's
// copyAsyncImpl calls it (createDmaParams, launchOperationH2D/D2H, synchronize), on a private
// context with the sparse backend (no simulated time). GB/s are of host time, host-format bytes.
//
//   BM_dci/h2d_contiguous   256 MiB fp16 -> DL16, one nest, stride 1 on both sides
//   BM_dci/h2d_transposed   the same bytes, host read transposed (a [8192][16384] view's .t())
//   BM_dci/d2h_*            the reverse
//   BM_dci_peak_rss         one 1 GiB fp16 -> DL16 H2D; run it alone (--benchmark_filter), as
//                           ru_maxrss is a process-wide high-water mark. rss_over_tensor: peak
//                           RSS above the baseline (host tensor + device pages already touched
//                           once) in units of the tensor size.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <cstring>

#include "shim_test_util.h"

namespace {

using namespace shimtest;

constexpr int64_t kRows = 8192, kCols = 16384;  // 128 Mi fp16 elements = 256 MiB

data_conversion_info dci_for(bool h2d, bool transposed, int64_t rows, int64_t cols) {
  data_conversion_stride_info n;
  if (!transposed) {
    n.size_ = {rows * cols};
    n.stride_src_ = {1};
    n.stride_dst_ = {1};
  } else {
    // Device [cols][rows] row-major holds host[r][c] at c*rows + r; innermost loop over r.
    const std::vector<int64_t> host_st = {cols, 1}, dev_st = {1, rows};
    n.size_ = {rows, cols};
    n.stride_src_ = h2d ? host_st : dev_st;
    n.stride_dst_ = h2d ? dev_st : host_st;
  }
  data_conversion_info dci{};
  dci.dci_dsName_ = "DCI-Tensor-0";
  dci.isHostToSen_ = h2d;
  dci.dataformat_src_ = h2d ? DataFormats::IEEE_FP16 : DataFormats::SEN169_FP16;
  dci.dataformat_dst_ = h2d ? DataFormats::SEN169_FP16 : DataFormats::IEEE_FP16;
  dci.dcsi_ = {n};
  return dci;
}

std::vector<uint16_t> host_data(size_t n) {
  std::vector<uint16_t> h(n);
  uint32_t x = 12345;
  for (auto& v : h) {
    x = x * 1664525u + 1013904223u;
    v = uint16_t((x >> 16) & 0x7BFF) | uint16_t(x & 0x8000);  // finite fp16, both signs
  }
  return h;
}

void BM_dci(benchmark::State& state, bool h2d, bool transposed) {
  auto ctx = make_context();
  auto* s = ctx->getDefaultStream();
  const size_t n = size_t(kRows * kCols);
  auto host = host_data(n);
  auto dev = ctx->getAllocator()->allocate(n * 2, tensor_directive());
  const auto up = dci_for(true, transposed, kRows, kCols);
  if (!h2d) {  // the device holds data for the D2H
    dma(s, host.data(), dev, true, &up);
    s->synchronize();
  }
  const auto dci = dci_for(h2d, transposed, kRows, kCols);
  for (auto _ : state) {
    dma(s, host.data(), dev, h2d, &dci);
    s->synchronize();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(n * 2));
  state.counters["GB/s"] = benchmark::Counter(double(n * 2) * 1e-9 * double(state.iterations()),
                                             benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_dci, h2d_contiguous, true, false)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_dci, h2d_transposed, true, true)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_dci, d2h_contiguous, false, false)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_dci, d2h_transposed, false, true)->Unit(benchmark::kMillisecond)->UseRealTime();

double max_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) * 1024.0;
}

void BM_dci_peak_rss(benchmark::State& state) {
  const int64_t rows = 16384, cols = 32768;  // 512 Mi fp16 = 1 GiB
  const size_t n = size_t(rows * cols);
  auto ctx = make_context();
  auto* s = ctx->getDefaultStream();
  auto host = host_data(n);
  auto dev = ctx->getAllocator()->allocate(n * 2, tensor_directive());
  const double base = max_rss_bytes();  // host tensor resident, device pages not yet
  const auto dci = dci_for(true, false, rows, cols);
  for (auto _ : state) {
    dma(s, host.data(), dev, true, &dci);
    s->synchronize();
  }
  const double peak = max_rss_bytes();
  state.counters["peak_rss_GiB"] = peak / double(1 << 30);
  state.counters["base_rss_GiB"] = base / double(1 << 30);
  // Copies of the tensor alive at the peak, counting the host tensor itself.
  state.counters["copies_at_peak"] = peak / double(n * 2);
}
BENCHMARK(BM_dci_peak_rss)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
