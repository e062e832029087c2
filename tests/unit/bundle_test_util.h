// Helpers for the bundle tests: where the shared spyre data lives, and a guard that skips a test
// when that folder is absent.
#pragma once

#include <filesystem>

#include "catch.h"

namespace bundle_test {

inline const std::filesystem::path k_data = std::filesystem::path(VSPYRE_SHARED_DIR) / "spyre" / "data";

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
