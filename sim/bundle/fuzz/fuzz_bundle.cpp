// libFuzzer entry: one input holds a bundle.mlir and its SDSC JSON files, split at the line
// "//--sdsc--\n". Part 0 is the MLIR; parts 1..n become sdsc_0.json .. sdsc_{n-1}.json.
// Any exception other than LoadError escapes and is reported as a crash.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sim/bundle/bundle.h"

using namespace vspyre::bundle;

namespace {

std::vector<std::string_view> split(std::string_view in) {
  static constexpr std::string_view k_sep = "//--sdsc--\n";
  std::vector<std::string_view> parts;
  while (true) {
    size_t p = in.find(k_sep);
    if (p == std::string_view::npos || parts.size() == 16) {
      parts.push_back(in);
      return parts;
    }
    parts.push_back(in.substr(0, p));
    in.remove_prefix(p + k_sep.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto parts = split(in);
  CardLimits limits;
  limits.max_executions = 4096;  // keep each run fast; the cap itself is under test
  limits.max_symbol_bindings = 1 << 16;

  std::map<std::string, std::string> sdscs;
  for (size_t i = 1; i < parts.size(); ++i) {
    std::string name = "sdsc_" + std::to_string(i - 1) + ".json";
    sdscs[name] = std::string(parts[i]);
    try {
      (void)parse_sdsc_json(parts[i], name, limits);
    } catch (const LoadError&) {
    }
  }
  try {
    Bundle b = parse_bundle_mlir(parts[0], "bundle.mlir");
    Bindings bind;
    for (size_t i = 0; i < b.args.size(); ++i)
      bind.args.push_back(b.args[i].is_dimension ? static_cast<uint64_t>(b.args[i].max_value)
                                                 : (i + 1) << 30);
    bind.pool_base = uint64_t{7} << 34;
    (void)count_executions(b);
    (void)unroll(b, bind, limits);
    LoadedBundle lb = load_bundle_from_memory(parts[0], "bundle.mlir", sdscs, limits);
    (void)resolve(lb, bind, limits);
  } catch (const LoadError&) {
  }
  return 0;
}
