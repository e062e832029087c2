// vspyre runtime shim: deeptools `fast_process_hcm.h` (flex-api.md section 5.4).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "flex/flex_api.h"
#include "spyrecode-host-functions/spyrecode.h"

namespace deeptools {

struct FastHcmPatch {
  uint64_t output_offset = 0;  // byte offset in the correction blob
  uint32_t input_index = 0;    // which launch address goes there
};

struct FastHcmPatchPlan {
  bool valid = false;
  uint32_t output_size = 0;
  std::vector<FastHcmPatch> patches;
  size_t num_input_symbols = 0;
};

// Precomputes the patch list for `hcm`; false when the fast path cannot be used.
FLEX_API bool buildFastHcmPatchPlan(FastHcmPatchPlan& plan, const Hcm& hcm);
// Writes the correction blob for `addrs` (one DMVA per launch argument, argument order) into
// `out`. Falls back to the slow path when the plan is invalid; returns true if the fast path ran.
FLEX_API bool processComputeOnHostCommandFast(FastHcmPatchPlan& plan, Hcm& hcm, void* out,
                                              const int64_t* addrs, size_t n);

}  // namespace deeptools
