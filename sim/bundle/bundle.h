// The SuperDSC bundle loader: bundle.mlir plus the sdsc_*.json files it names, validated
// together, and resolved for concrete argument addresses into a per-execution address plan.
//
//   auto lb = vspyre::bundle::load_bundle("kernel_dir");           // parse + static checks
//   auto plan = vspyre::bundle::resolve(lb, {{a0, a1}, pool_base});  // unroll + bind + checks
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sim/bundle/common.h"
#include "sim/bundle/mlir.h"
#include "sim/bundle/sdsc.h"

namespace vspyre::bundle {

struct LoadedBundle {
  std::filesystem::path dir;        // where the SDSC files were read from
  Bundle bundle;
  std::map<std::string, Sdsc> sdscs;  // keyed by sdsc_filename exactly as the bundle writes it

  const Sdsc& sdsc(const std::string& file) const;  // throws LoadError if absent
};

// A bundle directory holds its launch text as `bundle.mlir`, or as a `bundle.mlir.ref`: a text
// file whose one line that is neither blank nor a `#` comment is the path, relative to the
// directory, of a bundle.mlir kept elsewhere (the launch text alone; the SDSC files stay in the
// directory). It serves kernels whose launch text is byte-identical to a file of the shared data.
inline constexpr const char* k_bundle_mlir = "bundle.mlir";
inline constexpr const char* k_bundle_ref = "bundle.mlir.ref";

// The bundle.mlir of directory `dir`: `dir`/bundle.mlir, or the file `dir`/bundle.mlir.ref names.
// Throws LoadError naming the directory when it holds neither, and naming the ref file when it
// stands beside a bundle.mlir, has no path line or more than one, or names no regular file.
std::filesystem::path bundle_mlir_path(const std::filesystem::path& dir);

// True when `dir` is a directory holding a bundle.mlir or a bundle.mlir.ref (which may still fail
// to load).
bool is_bundle_dir(const std::filesystem::path& dir);

// Loads `path`/bundle.mlir (or what `path`/bundle.mlir.ref names, or `path` itself if it is a
// file: a bundle.mlir or a bundle.mlir.ref) and every SDSC it names, read from the bundle's
// directory. Checks each SDSC, and that each sdsc_execute binds exactly the symbols its SDSC uses.
LoadedBundle load_bundle(const std::filesystem::path& path, const CardLimits& limits = {});

// Same, from memory: `sdsc_texts` maps sdsc_filename -> JSON text. Used by tests and the fuzzer.
LoadedBundle load_bundle_from_memory(std::string_view mlir_text, std::string_view mlir_name,
                                     const std::map<std::string, std::string>& sdsc_texts,
                                     const CardLimits& limits = {});

// One execution with every allocation's start address made concrete.
struct ResolvedExecution {
  const Sdsc* sdsc = nullptr;  // points into the LoadedBundle
  Execution exec;
  // addresses[i][core] for sdsc->allocations[i]: absolute HBM byte address, or byte offset in
  // that core's LX. Indexed by core id; entries of unused core ids are 0.
  std::vector<std::vector<uint64_t>> addresses;
};

// Unrolls the bundle, binds symbols and checks every bound start address: stick alignment,
// LX capacity for LX allocations, no wrap-around for HBM spans.
std::vector<ResolvedExecution> resolve(const LoadedBundle& lb, const Bindings& bindings,
                                       const CardLimits& limits = {});

// Reads a whole file (bounded size), throwing LoadError naming `what` on failure.
std::string read_text_file(const std::filesystem::path& p, const std::string& what);

}  // namespace vspyre::bundle
