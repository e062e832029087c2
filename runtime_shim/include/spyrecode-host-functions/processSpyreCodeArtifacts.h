// vspyre runtime shim: deeptools `processSpyreCodeArtifacts.h` (flex-api.md section 5.4).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "flex/flex_api.h"
#include "spyrecode-host-functions/spyrecode.h"

namespace deeptools {

// Writes the program-correction blob into `out`.
// (a) `input` is a host buffer holding one int64 per input symbol;
// (b) nullptr: fake symbols (every address 0);
// (c) the resolved DMVAs, one per input symbol.
// Throws std::runtime_error("... Expect one DCI ...") when the HCM carries no DCI.
FLEX_API void processComputeOnHostCommand(Hcm& hcm, void* out, const void* input);
FLEX_API void processComputeOnHostCommand(Hcm& hcm, void* out, std::nullptr_t);
FLEX_API void processComputeOnHostCommand(Hcm& hcm, void* out,
                                          const std::vector<int64_t>* addresses);

}  // namespace deeptools
