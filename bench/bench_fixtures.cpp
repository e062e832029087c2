// Host cost of every fixture bundle (tests/fixtures/bundles, and tests/fixtures/captured,
// tests/fixtures/sweep and tests/fixtures/sweep/captured as captured_<name>, sweep_<name> and
// sweep_captured_<name>), with and without data:
//   fixture/<name>/timing  lower + run the timing plan on the card (as `vspyre run --no-data`)
//                          (named timing_flow on a card with the flow DMA model: run with
//                          VSPYRE_CONFIG=configs/spyre_flow.yaml; timing_sampled with
//                          VSPYRE_CONFIG=configs/spyre_sampled.yaml; one card per process)
//   fixture/<name>/data    the functional executor alone (sim/exec: ops in the device formats,
//                          stick layouts, per-core slices), inputs already in device memory
// Counters: sim_us (simulated kernel time), sim_over_host (simulated / host time of that
// benchmark; >= 1 keeps up with the card), GMAC_per_s for matmuls; for timing, load_frac,
// lower_frac and run_frac (the host time's shares: loading and resolving the bundle, lowering
// it to the plan, running the plan). One card serves every benchmark of the process (SystemC
// allows one simulation per process), and a card keeps its state from kernel to kernel as a real
// one does (open rows, the launch count its jitter draws from): a fixture's sim_us can differ
// from `vspyre run`'s by a few percent when others ran before it (matmul_b8_default on the flow
// model: 23565 us alone, 23302 after matmul_b8_batch_outer). For matmul fixtures also
//   sgemm/<name>           plain OpenBLAS cblas_sgemm of the same shape on fp32 host arrays
//   ops_matmul/<name>      vspyre::ops::matmul on DL16 host arrays (widen + sgemm + round once)
// so that data / sgemm is the executor's arithmetic throughput relative to BLAS, and
// ops_matmul - sgemm what the card's rounding costs on top.
//
// Large fixtures (matmul_b8_*: 215-430 GMAC) take seconds each, so every benchmark over 2^33 MAC
// runs once. Filter: vspyre_bench_fixtures --benchmark_filter='fixture/mm_.*' (not run by CI).
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <google/protobuf/arena.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench_main.h"
#include "models/card.h"
#include "models/plan_runner.h"
#include "sim/bundle/bundle.h"
#include "sim/engine/simulation.h"
#include "sim/exec/exec.h"
#include "sim/ops/ops.h"
#include "sim/plan/lower.h"

namespace fs = std::filesystem;
using namespace vspyre;

namespace {

const fs::path k_fixtures = fs::path(VSPYRE_SOURCE_DIR) / "tests" / "fixtures" / "bundles";
const fs::path k_captured = fs::path(VSPYRE_SOURCE_DIR) / "tests" / "fixtures" / "captured";
const fs::path k_sweep = fs::path(VSPYRE_SOURCE_DIR) / "tests" / "fixtures" / "sweep";
const fs::path k_sweep_captured = k_sweep / "captured";
constexpr uint64_t k_large_macs = 1ull << 33;

Card& card() {
  static std::unique_ptr<Simulation> sim = [] {
    SimOptions o;
    o.config_file = default_config_path();
    return std::make_unique<Simulation>(resolve_config(o));
  }();
  return sim->top_as<Card>();
}

bundle::CardLimits limits_of(Card& c, const plan::CardParams& p) {
  bundle::CardLimits l;
  l.cores = p.cores;
  if (!c.cores().empty()) {
    l.lx_bytes = c.core(0).lx_size();
    l.lx_reserved = c.core(0).lx_size() - c.core(0).lx_usable();
  }
  return l;
}

struct Fixture {
  std::string name;
  fs::path dir;
  uint64_t macs = 0;
  // matmul shape (batch, M, K, N) when the fixture is one batchmatmul
  int64_t batch = 0, m = 0, k = 0, n = 0;
  double sim_ps = 0;  // from the first timing run, for the data benchmark's ratio
};

std::vector<Fixture>& fixtures() {
  static std::vector<Fixture> v;
  return v;
}

void scan() {
  std::vector<fs::directory_entry> dirs;
  for (const auto& e : fs::directory_iterator(k_fixtures)) dirs.push_back(e);
  for (const fs::path& root : {k_captured, k_sweep, k_sweep_captured})
    if (fs::is_directory(root))
      for (const auto& e : fs::directory_iterator(root)) dirs.push_back(e);
  for (const auto& e : dirs) {
    if (!bundle::is_bundle_dir(e.path())) continue;
    Fixture f;
    // captured_<name>, sweep_<name> and sweep_captured_<name>: the other roots' names may repeat
    // those of bundles/
    const fs::path root = e.path().parent_path();
    const std::string prefix = root == k_fixtures ? ""
                               : root == k_sweep_captured ? "sweep_captured_"
                                                          : root.filename().string() + "_";
    f.name = prefix + e.path().filename().string();
    f.dir = e.path();
    const auto lb = bundle::load_bundle(f.dir);
    for (const auto& [_, s] : lb.sdscs)
      for (const auto& op : s.compute_ops)
        if (op.op_func_name.rfind("batchmatmul", 0) == 0) {
          uint64_t macs = 1;
          for (const auto& [d, n] : s.n) macs *= uint64_t(n);
          f.macs += macs;
          f.m = s.n_of("mb");
          f.k = s.n_of("in");
          f.n = s.n_of("out");
          f.batch = std::max<int64_t>(1, int64_t(macs / uint64_t(f.m * f.k * f.n)));
        }
    fixtures().push_back(f);
  }
  std::sort(fixtures().begin(), fixtures().end(),
            [](const Fixture& a, const Fixture& b) { return a.name < b.name; });
}

// What `vspyre run --no-data` does: load, resolve, lower (the plan on an arena) and run the plan.
// `phases`, when given, gains the host seconds of each: load + resolve, lower, run.
struct Phases {
  double load = 0, lower = 0, run = 0;
};
PlanResult run_timing(Card& c, const Fixture& f, const plan::CardParams& params, const bundle::CardLimits& limits,
                      Phases* phases = nullptr) {
  using clock = std::chrono::steady_clock;
  auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  auto t = clock::now();
  const auto lb = bundle::load_bundle(f.dir, limits);
  const auto resolved = bundle::resolve(lb, plan::default_bindings(lb), limits);
  if (phases) phases->load += since(t);
  t = clock::now();
  google::protobuf::Arena arena;
  plan::Plan& p = *google::protobuf::Arena::CreateMessage<plan::Plan>(&arena);
  plan::lower(lb, resolved, params, p);
  if (phases) phases->lower += since(t);
  t = clock::now();
  PlanResult r = run_plan(c, p);
  if (phases) phases->run += since(t);
  return r;
}

double simulated_ps(Fixture& f) {
  if (f.sim_ps > 0) return f.sim_ps;
  Card& c = card();
  const auto params = plan_card_params(c);
  f.sim_ps = run_timing(c, f, params, limits_of(c, params)).kernel_ps;
  return f.sim_ps;
}

void BM_timing(benchmark::State& s, Fixture* f) {
  // As `vspyre run --no-data`: no GEMM runs, so OpenBLAS's worker threads (started when the
  // library loads, spinning for a while) are stopped rather than left to compete for the CPUs.
  // A data benchmark after this one starts them again.
  ops::release_blas_threads();
  Card& c = card();
  const auto params = plan_card_params(c);
  const auto limits = limits_of(c, params);
  double sim_ps = 0, host = 0;
  Phases phases;
  for (auto _ : s) {
    const auto t0 = std::chrono::steady_clock::now();
    const PlanResult r = run_timing(c, *f, params, limits, &phases);
    host += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sim_ps = r.kernel_ps;
  }
  f->sim_ps = sim_ps;
  s.counters["sim_us"] = sim_ps / 1e6;
  s.counters["sim_over_host"] = host > 0 ? sim_ps / 1e12 * double(s.iterations()) / host : 0;
  // Where the host time goes: the bundle's loading and resolving, lowering, and the simulation.
  if (host > 0) {
    s.counters["load_frac"] = phases.load / host;
    s.counters["lower_frac"] = phases.lower / host;
    s.counters["run_frac"] = phases.run / host;
  }
}

void BM_data(benchmark::State& s, Fixture* f) {
  const auto lb = bundle::load_bundle(f->dir);
  const auto b = plan::default_bindings(lb);
  const auto resolved = bundle::resolve(lb, b);
  exec::SparseMemory mem;
  for (const auto& kt : exec::kernel_tensors(lb, resolved, b))
    if (kt.read_first)
      exec::write_tensor(mem, kt.info, exec::random_values(1, kt.arg_index, size_t(kt.info.numel())));
  double host = 0, ops_s = 0;
  for (auto _ : s) {
    const exec::ExecStats st = exec::run(lb, resolved, mem);
    host += st.seconds;
    ops_s += st.compute_seconds;
  }
  const double it = double(s.iterations());
  const double sim_ps = simulated_ps(*f);
  s.counters["sim_us"] = sim_ps / 1e6;
  s.counters["sim_over_host"] = host > 0 ? sim_ps / 1e12 * it / host : 0;
  s.counters["ops_fraction"] = host > 0 ? ops_s / host : 0;
  if (f->macs) s.counters["GMAC_per_s"] = double(f->macs) * it / host / 1e9;
}

void BM_sgemm(benchmark::State& s, Fixture* f) {
  const int M = int(f->m), K = int(f->k), N = int(f->n);
  const auto a = exec::random_values(1, 0, size_t(f->batch * M * K));
  const auto bm = exec::random_values(1, 1, size_t(K) * size_t(N));
  std::vector<float> c(size_t(f->batch) * size_t(M) * size_t(N));
  double host = 0;
  for (auto _ : s) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < f->batch; ++i)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a.data() + i * M * K, K,
                  bm.data(), N, 0.0f, c.data() + size_t(i) * size_t(M) * size_t(N), N);
    benchmark::DoNotOptimize(c.data());
    host += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  s.counters["GMAC_per_s"] = double(f->macs) * double(s.iterations()) / host / 1e9;
}

void BM_ops_matmul(benchmark::State& s, Fixture* f) {
  const int64_t B = f->batch, M = f->m, K = f->k, N = f->n;
  auto dl16 = [](const std::vector<float>& v) {
    std::vector<uint16_t> c(v.size());
    fmt::convert(fmt::DataFormat::IEEE_FP32, v.data(), fmt::DataFormat::SEN169_FP16, c.data(), v.size());
    return c;
  };
  const auto a = dl16(exec::random_values(1, 0, size_t(B * M * K)));
  const auto bm = dl16(exec::random_values(1, 1, size_t(K * N)));
  std::vector<uint16_t> c(size_t(B * M * N));
  const auto va = ops::view(a.data(), fmt::DataFormat::SEN169_FP16, {B, M, K});
  const auto vb = ops::view(bm.data(), fmt::DataFormat::SEN169_FP16, {1, K, N});
  const auto vc = ops::view(c.data(), fmt::DataFormat::SEN169_FP16, {B, M, N});
  double host = 0;
  for (auto _ : s) {
    const auto t0 = std::chrono::steady_clock::now();
    ops::matmul(va, vb, vc);
    benchmark::DoNotOptimize(c.data());
    host += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  s.counters["GMAC_per_s"] = double(f->macs) * double(s.iterations()) / host / 1e9;
}

void register_all() {
  for (auto& f : fixtures()) {
    Fixture* p = &f;
    const bool large = f.macs > k_large_macs;
    // Named after the DMA model of the card (VSPYRE_CONFIG=configs/spyre_flow.yaml: flow) and
    // whether it samples long stages (VSPYRE_CONFIG=configs/spyre_sampled.yaml: card.sample).
    const std::string timing = std::string(card().cores().empty() || !card().core(0).dma_flow() ? "/timing" : "/timing_flow") +
                               (card().sample().enabled ? "_sampled" : "");
    auto t = benchmark::RegisterBenchmark(("fixture/" + f.name + timing).c_str(), BM_timing, p);
    auto d = benchmark::RegisterBenchmark(("fixture/" + f.name + "/data").c_str(), BM_data, p);
    for (auto* bm : {t, d}) {
      bm->Unit(benchmark::kMillisecond)->UseRealTime();
      if (large) bm->Iterations(1);
    }
    if (f.macs && f.batch * f.m * f.k * f.n == int64_t(f.macs)) {
      auto g = benchmark::RegisterBenchmark(("sgemm/" + f.name).c_str(), BM_sgemm, p);
      auto o = benchmark::RegisterBenchmark(("ops_matmul/" + f.name).c_str(), BM_ops_matmul, p);
      for (auto* bm : {g, o}) {
        bm->Unit(benchmark::kMillisecond)->UseRealTime();
        if (large) bm->Iterations(1);
      }
    }
  }
}

}  // namespace

int sc_main(int argc, char** argv) {
  return bench::run_benchmarks(argc, argv, [] {
    scan();
    register_all();
  });
}

int main(int argc, char** argv) { return bench::systemc_main(argc, argv); }
