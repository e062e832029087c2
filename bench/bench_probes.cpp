// Simulator speed per probe: simulated time divided by host time (">= 1" means the simulator keeps
// up with the card). One card is built per process (SystemC elaborates once) and every iteration
// runs the workload again on it, so the card's state carries over, as it does on hardware.
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>

#include "bench_main.h"
#include "models/card.h"
#include "sim/engine/simulation.h"

namespace {

vspyre::Card& card() {
  static std::unique_ptr<vspyre::Simulation> sim = [] {
    vspyre::SimOptions o;
    o.config_file = vspyre::default_config_path();
    return std::make_unique<vspyre::Simulation>(vspyre::resolve_config(o));
  }();
  return sim->top_as<vspyre::Card>();
}

std::vector<std::vector<vspyre::CoreOp>> streams(uint32_t cores, uint64_t bytes, bool read, bool write) {
  std::vector<std::vector<vspyre::CoreOp>> p(cores);
  for (uint32_t c = 0; c < cores; ++c) {
    if (read) {
      vspyre::CoreOp op;
      op.engine = vspyre::Engine::Load;
      op.addr = c * (256ull << 20);
      op.bytes = bytes;
      p[c].push_back(op);
    }
    if (write) {
      vspyre::CoreOp op;
      op.engine = vspyre::Engine::Store;
      op.addr = c * (256ull << 20) + (128ull << 20);
      op.bytes = bytes;
      p[c].push_back(op);
    }
  }
  return p;
}

template <class F>
void measure(benchmark::State& state, F make_programs) {
  double sim_ps = 0, host_s = 0;
  for (auto _ : state) {
    auto progs = make_programs();
    const auto t0 = std::chrono::steady_clock::now();
    sim_ps += card().run(std::move(progs));
    host_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  state.counters["sim_over_host"] = host_s > 0 ? sim_ps / 1e12 / host_s : 0;
  state.counters["sim_us_per_iter"] = sim_ps / 1e6 / static_cast<double>(state.iterations());
}

void BM_memory_read_all_cores(benchmark::State& s) {
  measure(s, [] { return streams(static_cast<uint32_t>(card().cores().size()), 2ull << 20, true, false); });
}
void BM_memory_copy_all_cores(benchmark::State& s) {
  measure(s, [] { return streams(static_cast<uint32_t>(card().cores().size()), 2ull << 20, true, true); });
}
void BM_memory_read_one_core(benchmark::State& s) {
  measure(s, [] { return streams(1, 8ull << 20, true, false); });
}
void BM_ring_all_to_all(benchmark::State& s) {
  measure(s, [] {
    const auto n = static_cast<uint32_t>(card().cores().size());
    std::vector<std::vector<vspyre::CoreOp>> p(n);
    for (uint32_t c = 0; c < n; ++c)
      for (uint32_t k = 1; k < n; ++k) {
        vspyre::CoreOp op;
        op.engine = vspyre::Engine::Ring;
        op.dst = vspyre::CoreId{(c + k) % n};
        op.bytes = 128ull << 10;
        p[c].push_back(op);
      }
    return p;
  });
}
void BM_ring_neighbour(benchmark::State& s) {
  measure(s, [] {
    std::vector<std::vector<vspyre::CoreOp>> p(1);
    vspyre::CoreOp op;
    op.engine = vspyre::Engine::Ring;
    op.dst = vspyre::CoreId{1};
    op.bytes = 16ull << 20;
    p[0].push_back(op);
    return p;
  });
}
void BM_pt_tile(benchmark::State& s) {
  measure(s, [] {
    std::vector<std::vector<vspyre::CoreOp>> p(1);
    vspyre::CoreOp op;
    op.engine = vspyre::Engine::Pt;
    op.m = 256;
    op.k = 1024;
    op.n = 256;
    p[0].push_back(op);
    return p;
  });
}

BENCHMARK(BM_memory_read_all_cores)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_memory_copy_all_cores)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_memory_read_one_core)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ring_neighbour)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ring_all_to_all)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_pt_tile)->Unit(benchmark::kMicrosecond);

}  // namespace

int sc_main(int argc, char** argv) { return vspyre::bench::run_benchmarks(argc, argv); }

int main(int argc, char** argv) { return vspyre::bench::systemc_main(argc, argv); }
