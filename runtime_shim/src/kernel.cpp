// The functional half of a Compute launch: identify the program from device memory (the
// program image dxp_standalone wrote), bind the kernel arguments (tensor list in bound mode,
// correction blob in symbolic mode), check them against live allocations, and compute the
// results with sim/exec in the backend's memory.
#include "kernel.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "program_image.h"
#include "sim/exec/exec.h"

namespace vspyre::shim {
namespace {

std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

// sim/exec's view of the backend's memory.
struct BackendMemory : exec::Memory {
  explicit BackendMemory(DeviceBackend& b) : b(b) {}
  void read(uint64_t addr, void* dst, size_t n) override { b.read(addr, dst, n); }
  void write(uint64_t addr, const void* src, size_t n) override { b.write(addr, src, n); }
  DeviceBackend& b;
};

bool strict_bounds() {
  const char* v = std::getenv("VSPYRE_STRICT_BOUNDS");
  return v && *v && std::string(v) != "0";
}

// Prints `text` to stderr the first time `key` is seen in this process.
void note_once(uint64_t key, const std::string& text) {
  static std::mutex m;
  static std::set<uint64_t> seen;
  std::lock_guard<std::mutex> lk(m);
  if (seen.insert(key).second) std::fprintf(stderr, "%s\n", text.c_str());
}

}  // namespace

std::shared_ptr<const KernelProgram> KernelCache::find(uint64_t hash) {
  std::lock_guard<std::mutex> lk(mutex);
  auto it = programs.find(hash);
  return it == programs.end() ? nullptr : it->second;
}

std::shared_ptr<const KernelProgram> KernelCache::insert(std::shared_ptr<const KernelProgram> p) {
  std::lock_guard<std::mutex> lk(mutex);
  auto [it, inserted] = programs.emplace(p->hash, p);
  return it->second;
}

BoundKernel bind_kernel(DeviceBackend& mem, KernelCache& cache, const ComputeLaunch& l,
                        const bundle::CardLimits& limits) {
  const std::string who = "Compute '" + l.name + "'";
  auto fail = [&](const std::string& what) -> void { throw std::runtime_error("flex: " + who + ": " + what); };

  // The job binary starts at the bootstrap offset of the program allocation.
  const uint64_t bin = l.program_dmva + l.bootstrap_offset;
  const uint64_t room = l.program_size - l.bootstrap_offset;
  uint8_t head[kImageHeaderBytes] = {};
  if (room < kImageHeaderBytes)
    fail("the program at " + hex(bin) + " (" + std::to_string(room) +
         " bytes) is not a vspyre program image (shorter than its 64-byte header)");
  mem.read(bin, head, sizeof head);
  const std::string where = "program at " + hex(bin);
  ImageHeader h;
  try {
    h = decode_image_header(head, sizeof head, where);
  } catch (const std::exception& e) {
    fail(std::string(e.what()) + " (was it written by vspyre's dxp_standalone and uploaded by the JobPreparationPlan?)");
  }
  if (h.total_bytes > room)
    fail(where + ": the image says " + std::to_string(h.total_bytes) + " bytes but the program allocation has " +
         std::to_string(room) + " from the bootstrap offset");

  constexpr uint64_t kMaxImageBytes = 256ull << 20;  // a bundle's files are far smaller
  if (h.total_bytes > kMaxImageBytes)
    fail(where + ": the image says " + std::to_string(h.total_bytes) + " bytes, more than the " +
         std::to_string(kMaxImageBytes) + " a program image may have");
  std::shared_ptr<const KernelProgram> prog = cache.find(h.payload_hash);
  if (!prog) {
    std::vector<uint8_t> bytes(h.total_bytes);
    mem.read(bin, bytes.data(), bytes.size());
    auto p = std::make_shared<KernelProgram>();
    try {
      p->image = decode_image(bytes.data(), bytes.size(), where);
      p->lb = bundle::load_bundle_from_memory(p->image.bundle_text, p->image.bundle_name,
                                              p->image.sdsc_texts, limits);
    } catch (const std::exception& e) {
      fail(e.what());
    }
    if (p->image.args.size() != p->lb.bundle.args.size())
      fail(where + ": the image lists " + std::to_string(p->image.args.size()) + " arguments, the bundle has " +
           std::to_string(p->lb.bundle.args.size()));
    p->hash = h.payload_hash;
    p->image.bundle_text.clear();  // parsed; the LoadedBundle keeps what it needs
    p->image.sdsc_texts.clear();
    prog = cache.insert(std::move(p));
  }
  const ProgramImage& img = prog->image;

  // Bind: bound mode takes the launch's tensor list (argument i = tensor i); symbolic mode reads
  // the int64 DMVAs the correction H2D put in the program's correction area.
  BoundKernel bk;
  bk.program = prog;
  uint32_t slots = 0;
  for (const auto& a : img.args)
    if (!a.dimension) slots = std::max(slots, a.slot + 1);
  std::vector<int64_t> slot_values(slots, 0);
  if (!l.tensors.empty()) {
    if (l.tensors.size() < slots)
      fail("the kernel takes " + std::to_string(slots) + " tensor arguments but " + std::to_string(l.tensors.size()) +
           " were bound");
    for (uint32_t k = 0; k < slots; ++k) slot_values[k] = static_cast<int64_t>(l.tensors[k].first);
  } else if (slots) {
    if (h.correction_offset + h.correction_bytes > l.program_size || 8ull * slots > h.correction_bytes)
      fail(where + ": correction area [" + std::to_string(h.correction_offset) + ", +" +
           std::to_string(h.correction_bytes) + ") does not fit the program allocation or its " +
           std::to_string(slots) + " addresses");
    mem.read(l.program_dmva + h.correction_offset, slot_values.data(), 8ull * slots);
  }
  for (size_t i = 0; i < img.args.size(); ++i) {
    const auto& a = img.args[i];
    if (a.dimension) {
      bk.bindings.args.push_back(static_cast<uint64_t>(a.value));
      continue;
    }
    const int64_t v = slot_values[a.slot];
    if (v < 0 || flex::dmvaToSegmentId(static_cast<uint64_t>(v)) >= flex::PROG_SEGMENT)
      fail("argument " + std::to_string(i) + " (" + prog->lb.bundle.args[i].name + ") = " +
           hex(static_cast<uint64_t>(v)) + " is not a tensor address (segments 0..6)" +
           (l.tensors.empty() ? "; did the ComputeOnHost correction and its H2D run before the Compute?" : ""));
    bk.bindings.args.push_back(static_cast<uint64_t>(v));
  }
  if (prog->lb.bundle.pool_bytes) {
    if (h.pool_offset + h.pool_bytes > l.program_size || h.pool_bytes < *prog->lb.bundle.pool_bytes)
      fail(where + ": the HBM pool [" + std::to_string(h.pool_offset) + ", +" + std::to_string(h.pool_bytes) +
           ") does not fit the program allocation (" + std::to_string(l.program_size) + " bytes)");
    bk.bindings.pool_base = l.program_dmva + h.pool_offset;
  }
  try {
    bk.resolved = bundle::resolve(prog->lb, bk.bindings, limits);
  } catch (const std::exception& e) {
    fail(e.what());
  }

  // Every tensor the kernel touches through an argument must lie inside one live allocation.
  if (l.find_live) {
    std::vector<exec::KernelTensor> kts;
    try {
      kts = exec::kernel_tensors(prog->lb, bk.resolved, bk.bindings);
    } catch (const std::exception& e) {
      fail(e.what());
    }
    for (const auto& kt : kts) {
      // A tile of a larger tensor touches only its own sticks (span_bytes), not the gapped image.
      const uint64_t base = kt.info.base, n = kt.info.span_bytes;
      const std::string arg = "argument " + std::to_string(kt.arg_index) +
                              (kt.offset ? " at +" + std::to_string(kt.offset) : std::string()) + " (" +
                              prog->lb.bundle.args[kt.arg_index].name + ", " + kt.info.sdsc_file + " " +
                              kt.info.name + ")";
      const auto live = l.find_live(base);
      if (!live) fail(arg + ": device address " + hex(base) + " is not allocated (use after free?)");
      if (base + n > live->base + live->size) {
        const std::string what = arg + ": device access out of bounds: the kernel's tensor covers [" + hex(base) +
                                 ", +" + std::to_string(n) + ") but the allocation is [" + hex(live->base) + ", +" +
                                 std::to_string(live->size) + ")";
        // A tensor the kernel only reads: the card reads whatever lies past the allocation (the
        // compiler's fp8 kernels iterate whole 128-element sticks over 8-wide rows and use only
        // the real lanes), so this is a note, once per program, unless VSPYRE_STRICT_BOUNDS=1.
        // A write past the allocation would corrupt its neighbour: always an error.
        if (kt.written || strict_bounds()) fail(what);
        note_once(prog->hash, "vspyre libflex: note: Compute '" + l.name + "': " + what +
                                  "; the kernel only reads it, so it reads past the allocation as the card "
                                  "would (VSPYRE_STRICT_BOUNDS=1 makes this an error)");
      }
    }
  }
  return bk;
}

void run_kernel_data(DeviceBackend& mem, const BoundKernel& k, const bundle::CardLimits& limits,
                     KernelReport& report, const std::string& name) {
  BackendMemory m(mem);
  exec::ExecOptions opt;
  opt.lx_bytes = limits.lx_bytes;
  auto lx = mem.lx();  // the card's LX, from the previous kernel on, locked while this one computes
  opt.lx = lx.lx;
  try {
    const exec::ExecStats st = exec::run(k.program->lb, k.resolved, m, opt);
    report.executions = st.executions;
    report.ops = st.ops;
  } catch (const std::exception& e) {
    throw std::runtime_error("flex: Compute '" + name + "': " + e.what());
  }
}

KernelReport DeviceBackend::launch(const ComputeLaunch& l) {
  if (!kernels_) throw std::logic_error("DeviceBackend: no kernel cache");
  const bundle::CardLimits limits;
  BoundKernel k = bind_kernel(*this, *kernels_, l, limits);
  KernelReport r;
  r.kernel = k.program->image.kernel;
  run_kernel_data(*this, k, limits, r, l.name);
  return r;
}

void DeviceBackend::transferTime(uint64_t, bool, uint64_t) {}

}  // namespace vspyre::shim
