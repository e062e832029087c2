// Compute launches: the program image in device memory -> a bound bundle (kernel.cpp), and the
// process's virtual card (card.cpp). Internal to libflex.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "program_image.h"
#include "shim_internal.h"
#include "sim/bundle/bundle.h"

namespace vspyre::shim {

// A decoded program: its image header/arguments and the loaded bundle.
struct KernelProgram {
  uint64_t hash = 0;
  ProgramImage image;  // texts dropped after loading
  bundle::LoadedBundle lb;
};

struct KernelCache {
  std::shared_ptr<const KernelProgram> find(uint64_t hash);
  std::shared_ptr<const KernelProgram> insert(std::shared_ptr<const KernelProgram> p);
  std::mutex mutex;
  std::map<uint64_t, std::shared_ptr<const KernelProgram>> programs;
};

struct BoundKernel {
  std::shared_ptr<const KernelProgram> program;
  bundle::Bindings bindings;
  std::vector<bundle::ResolvedExecution> resolved;  // points into program->lb
};

// Reads the program image at l.program_dmva + l.bootstrap_offset (cached by payload hash),
// binds its arguments and checks them. Throws std::runtime_error("flex: Compute '<name>': ...").
BoundKernel bind_kernel(DeviceBackend& mem, KernelCache& cache, const ComputeLaunch& l,
                        const bundle::CardLimits& limits);
// Runs the kernel's data through sim/exec on `mem`.
void run_kernel_data(DeviceBackend& mem, const BoundKernel& k, const bundle::CardLimits& limits,
                     KernelReport& report, const std::string& name);

}  // namespace vspyre::shim
