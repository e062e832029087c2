// The entry of the SystemC benches (vspyre_bench, vspyre_bench_fixtures): each defines
//   int sc_main(int argc, char** argv) { return vspyre::bench::run_benchmarks(argc, argv); }
//   int main(int argc, char** argv) { return vspyre::bench::systemc_main(argc, argv); }
#pragma once

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <systemc>

namespace vspyre::bench {

// Google Benchmark over the process's arguments; `setup` (when given) runs after they are parsed
// and before the run, for benchmarks registered at run time.
inline int run_benchmarks(int argc, char** argv, void (*setup)() = nullptr) {
  benchmark::Initialize(&argc, argv);
  if (setup) setup();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// SystemC prints a banner on stdout when its kernel starts, which would corrupt --json output;
// main() switches it off before handing over to SystemC, which then calls sc_main.
inline int systemc_main(int argc, char** argv) {
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
  return sc_core::sc_elab_and_sim(argc, argv);
}

}  // namespace vspyre::bench
