// Helpers for the bundle tests: where the shared spyre data lives, and a guard that skips a test
// when that folder is absent.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "sim/bundle/bundle.h"
#include "sim/exec/exec.h"
#include "sim/exec/reference.h"
#include "sim/plan/lower.h"

namespace bundle_test {

inline const std::filesystem::path k_data = std::filesystem::path(VSPYRE_SHARED_DIR) / "spyre" / "data";
inline const std::filesystem::path k_captured =
    std::filesystem::path(VSPYRE_SOURCE_DIR) / "tests" / "fixtures" / "captured";

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// A bundle loaded and resolved with its default bindings, and its kernel tensors.
struct Kernel {
  vspyre::bundle::LoadedBundle lb;
  std::vector<vspyre::bundle::ResolvedExecution> plan;
  std::vector<vspyre::exec::KernelTensor> kts;
  explicit Kernel(const std::filesystem::path& dir) : lb(vspyre::bundle::load_bundle(dir)) {
    const auto b = vspyre::plan::default_bindings(lb);
    plan = vspyre::bundle::resolve(lb, b);
    kts = vspyre::exec::kernel_tensors(lb, plan, b);
  }
};

// Runs the captured one-input, one-output kernel `name` on seeded random inputs and checks its
// output against the double reference: the input and the output as memory holds them.
inline std::pair<std::vector<float>, std::vector<float>> run_captured(const std::string& name, uint64_t seed) {
  namespace exec = vspyre::exec;
  const Kernel k(k_captured / name);
  REQUIRE(k.kts.size() == 2);
  exec::SparseMemory mem;
  exec::write_random_input(mem, k.kts[0], seed);
  exec::run(k.lb, k.plan, mem);
  const exec::RefResult ref = exec::reference(k.plan, k.kts, mem);
  const std::vector<float> y = exec::read_tensor(mem, k.kts[1].info);
  REQUIRE(ref.outputs.count(1));
  CHECK(exec::compare(y, ref.outputs.at(1)).pass);
  return {exec::read_tensor(mem, k.kts[0].info), y};
}

// One malformed variant of an SDSC: how to break it, and the JSON path and rule its one-line
// LoadError must name.
struct Refusal {
  const char* name;
  std::function<void(nlohmann::ordered_json&)> mutate;
  const char* path;
  const char* rule;
};

// Loads each variant of the SDSC `text` as `file` and checks that it is refused so.
inline void check_refusals(const std::string& text, const std::string& file, const std::vector<Refusal>& cases) {
  for (const auto& c : cases) {
    INFO(c.name);
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(text);
    c.mutate(j);
    std::string msg;
    try {
      vspyre::bundle::parse_sdsc_json(j.dump(), file, {});
    } catch (const vspyre::bundle::LoadError& e) {
      msg = e.what();
    }
    INFO(msg);
    CHECK(msg.rfind(file + ": ", 0) == 0);
    CHECK(msg.find(c.path) != std::string::npos);
    CHECK(msg.find(c.rule) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
}

}  // namespace bundle_test

// Works on Catch2 2.x (no SKIP) and 3.x.
#if defined(SKIP)
#define BUNDLE_REQUIRE_DATA()                              \
  if (!std::filesystem::is_directory(bundle_test::k_data)) \
  SKIP("spyre data folder absent: " << bundle_test::k_data.string())
#else
#define BUNDLE_REQUIRE_DATA()                                                    \
  if (!std::filesystem::is_directory(bundle_test::k_data)) {                     \
    WARN("skipped: spyre data folder absent: " << bundle_test::k_data.string()); \
    return;                                                                      \
  }
#endif
