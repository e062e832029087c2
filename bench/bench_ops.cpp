// DL16 (SEN169_FP16) matmul through vspyre::ops against a plain fp32 cblas_sgemm of the same
// size, plus the two conversion legs on their own (widening the operands, rounding the result).
// Run a Release build: vspyre_bench_ops --benchmark_filter=2048
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <random>
#include <vector>

#include "sim/formats/formats.h"
#include "sim/ops/ops.h"

using namespace vspyre;

namespace {

std::vector<float> random_f32(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}
std::vector<uint16_t> to_dl16(const std::vector<float>& v) {
  std::vector<uint16_t> c(v.size());
  fmt::convert(fmt::DataFormat::IEEE_FP32, v.data(), fmt::DataFormat::SEN169_FP16, c.data(), v.size());
  return c;
}

void set_flops(benchmark::State& s, int64_t n) {
  s.counters["GFLOPS"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n) * double(s.iterations()),
                                            benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void BM_sgemm_fp32(benchmark::State& s) {
  const int64_t n = s.range(0);
  const auto a = random_f32(size_t(n * n), 1), b = random_f32(size_t(n * n), 2);
  std::vector<float> c(size_t(n * n));
  for (auto _ : s) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(n), int(n), int(n), 1.0f, a.data(),
                int(n), b.data(), int(n), 0.0f, c.data(), int(n));
    benchmark::DoNotOptimize(c.data());
  }
  set_flops(s, n);
}

void BM_matmul_dl16(benchmark::State& s) {
  const int64_t n = s.range(0);
  const auto a = to_dl16(random_f32(size_t(n * n), 1)), b = to_dl16(random_f32(size_t(n * n), 2));
  std::vector<uint16_t> c(size_t(n * n));
  const auto va = ops::view(a.data(), fmt::DataFormat::SEN169_FP16, {n, n});
  const auto vb = ops::view(b.data(), fmt::DataFormat::SEN169_FP16, {n, n});
  const auto vc = ops::view(c.data(), fmt::DataFormat::SEN169_FP16, {n, n});
  for (auto _ : s) {
    ops::matmul(va, vb, vc);
    benchmark::DoNotOptimize(c.data());
  }
  set_flops(s, n);
}

// The conversion legs of the DL16 path: both operands DL16 -> fp32, then the result fp32 -> DL16.
void BM_dl16_widen_operands(benchmark::State& s) {
  const int64_t n = s.range(0);
  const auto a = to_dl16(random_f32(size_t(n * n), 1));
  const auto va = ops::view(a.data(), fmt::DataFormat::SEN169_FP16, {n, n});
  for (auto _ : s) {
    auto x = ops::load_f32(va);
    auto y = ops::load_f32(va);
    benchmark::DoNotOptimize(x.data());
    benchmark::DoNotOptimize(y.data());
  }
}
void BM_dl16_round_result(benchmark::State& s) {
  const int64_t n = s.range(0);
  const auto r = random_f32(size_t(n * n), 3);
  std::vector<uint16_t> c(size_t(n * n));
  const auto vc = ops::view(c.data(), fmt::DataFormat::SEN169_FP16, {n, n});
  for (auto _ : s) {
    ops::store_f32(r.data(), vc);
    benchmark::DoNotOptimize(c.data());
  }
}

}  // namespace

BENCHMARK(BM_sgemm_fp32)->Arg(256)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_matmul_dl16)->Arg(256)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_dl16_widen_operands)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_dl16_round_result)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
