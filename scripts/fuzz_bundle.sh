#!/usr/bin/env bash
# Builds the bundle loader's libFuzzer target with clang and runs it for SECONDS (default 30),
# seeded with the fixture bundles (MLIR and SDSC files joined at "//--sdsc--" lines).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
cmake -S . -B build/fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DVSPYRE_FUZZ=ON -DVSPYRE_BUILD_TESTS=OFF -DVSPYRE_BUILD_BENCH=OFF >/dev/null
cmake --build build/fuzz --target vspyre_fuzz_bundle >/dev/null
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
# The generator's fixtures and the compiler's captures (among them the gathers and scatters,
# whose indirect-access fields only the captures carry).
for d in tests/fixtures/bundles/*/ tests/fixtures/captured/*/; do
  mlir="$d/bundle.mlir"
  # A bundle.mlir.ref names, relative to its directory, the launch text kept elsewhere.
  if [ -f "$d/bundle.mlir.ref" ]; then mlir="$d/$(grep -v -E '^[[:space:]]*(#|$)' "$d/bundle.mlir.ref")"; fi
  [ -f "$mlir" ] || continue
  seed="$corpus/$(basename "$(dirname "$d")")_$(basename "$d")"
  { cat "$mlir"; for f in $(ls "$d" | grep -E '^sdsc_[0-9]+\.json$' | sort -V); do
      printf '//--sdsc--\n'; cat "$d/$f"; done; } > "$seed"
  # Only the small fixtures: the fuzzer's per-input length limit is 64 KiB.
  [ "$(stat -c %s "$seed")" -le 65536 ] || rm -f "$seed"
done
build/fuzz/sim/bundle/vspyre_fuzz_bundle "$corpus" -max_total_time="$seconds" -max_len=65536 \
  -print_final_stats=1 2>&1 | tail -15
