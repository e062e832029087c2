// The functional executor ("data on", issue 4): runs a resolved SuperDSC bundle on device memory.
// Every execution, in program order, gathers its input tensors from where the card keeps them
// (HBM at the bound per-core addresses, or a per-core LX scratch the executor owns), computes each
// computeOp_ with vspyre::ops in the device formats, and writes the output slices back exactly
// where and how the card would: each core's slice, in the SDSC's stick layout and data format.
// No SystemC, so the runtime shim links it too.
//
//   bundle::LoadedBundle lb = bundle::load_bundle(dir);
//   auto plan = bundle::resolve(lb, bindings);
//   exec::SparseMemory mem;
//   for (auto& t : exec::kernel_tensors(lb, plan, bindings)) ...   // what each argument holds
//   exec::ExecStats st = exec::run(lb, plan, mem);
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/bundle/bundle.h"
#include "sim/formats/formats.h"

namespace vspyre::exec {

// A bundle the executor cannot run (unsupported op, a layout it cannot map, an address outside
// memory, ...). One line naming the SDSC file and the op or field.
struct ExecError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Device memory as the executor sees it: byte-addressed, absolute HBM addresses.
struct Memory {
  virtual ~Memory() = default;
  virtual void read(uint64_t addr, void* dst, size_t n) = 0;
  virtual void write(uint64_t addr, const void* src, size_t n) = 0;
};

// A page store (64 KiB pages, allocated on first write; unwritten bytes read as zero). For the
// CLI, the benches and the tests.
class SparseMemory : public Memory {
 public:
  static constexpr uint64_t k_page_bytes = 64 * 1024;
  void read(uint64_t addr, void* dst, size_t n) override;
  void write(uint64_t addr, const void* src, size_t n) override;
  size_t pages() const { return pages_.size(); }
  uint64_t bytes_allocated() const { return pages_.size() * k_page_bytes; }

 private:
  std::unordered_map<uint64_t, std::unique_ptr<uint8_t[]>> pages_;
};

// One labeled tensor of one SDSC as the executor maps it.
struct TensorInfo {
  std::string sdsc_file;
  uint32_t lds_idx = 0;
  std::string name;                      // labeledDs_ dsName_ ("Tensor0")
  fmt::DataFormat format = fmt::DataFormat::INVALID;
  // Logical (host-order) shape, outermost first. dims[k] names the SDSC dimension of axis k
  // ("mb", "out", ...). Elementwise/reduction SDSCs order the axes as N_ lists them; matmul
  // SDSCs as [batch..., M, K] / [batch..., K, N] / [batch..., M, N]. Reduced (scale_ -1/-2) or
  // absent dimensions have size 1.
  std::vector<std::string> dims;
  std::vector<int64_t> size;
  // Where it lives: the whole-tensor stick layout (device image of the full tensor, HBM).
  fmt::StickLayout layout;
  bundle::Placement placement = bundle::Placement::hbm;
  // HBM: the absolute address of the device image (element 0's stick). Consistent over cores,
  // otherwise ExecError. LX tensors: 0.
  uint64_t base = 0;
  uint64_t image_bytes = 0;  // fmt::device_image_bytes(layout)
  // The tensor is a tile of a larger one (backGapCore_): the image holds sticks of other data
  // past each dim's extent, and span_bytes (from base to the end of the last stick holding one
  // of this tensor's elements) is less than image_bytes. Otherwise span_bytes == image_bytes.
  bool gapped = false;
  uint64_t span_bytes = 0;

  int64_t numel() const;
};

// Logical description of labeled tensor `lds_idx` of execution `r`. Throws ExecError.
TensorInfo describe_tensor(const bundle::ResolvedExecution& r, uint32_t lds_idx);

// A kernel argument (bundle parameter that is an address) and the tensor the bundle binds to it:
// the first execution that touches it defines the shape/format. `read_first` when the first
// touch reads it (a kernel input), `written` when some execution writes it (a kernel output).
struct KernelTensor {
  size_t arg_index = 0;
  // Bytes past the argument's address: a view (a slice, one half of a cat) that the bundle
  // addresses as `%arg_N + offset`; 0 for the argument itself.
  uint64_t offset = 0;
  TensorInfo info;
  bool read_first = false;
  bool written = false;
  // An index tensor of a gather or scatter (bundle::IndirectAccess): its elements must be row
  // numbers below this bound, the value tensor's rows (from the tensor the bundle writes at the
  // value tensor's address before the gather, or the pool's end). 0: not an index tensor, or the
  // bound is unknown (index_unknown_bound).
  uint64_t index_bound = 0;
  bool index_unknown_bound = false;
};
// "arg<N>", or "arg<N>+<offset>" for a view.
std::string kernel_tensor_label(const KernelTensor& kt);
// One entry per (argument, offset) the bundle's HBM tensors start at, ordered by both; a tensor
// is attributed to the argument with the largest address at or below its base (outside the
// kernel's HBM pool). Address arguments that no execution touches are left out.
std::vector<KernelTensor> kernel_tensors(const bundle::LoadedBundle& lb,
                                         const std::vector<bundle::ResolvedExecution>& plan,
                                         const bundle::Bindings& bindings);

// Whole HBM tensor <-> logical host values (row-major over info.size), converting with the
// default rules. write_tensor writes the whole device image (padding lanes zero).
std::vector<float> read_tensor(Memory& mem, const TensorInfo& info);
void write_tensor(Memory& mem, const TensorInfo& info, std::span<const float> values);
// Same with raw device-format elements (contiguous host order, fmt::bytes_for(format, numel)).
std::vector<uint8_t> read_tensor_raw(Memory& mem, const TensorInfo& info);
void write_tensor_raw(Memory& mem, const TensorInfo& info, std::span<const uint8_t> elements);

// Deterministic kernel inputs, what `vspyre run --seed SEED` writes to argument `arg` when no
// --input names it: n values uniform in [-1, 1) from splitmix64 over (seed, arg, element). The
// same (seed, arg, n) gives the same values bit for bit in every build; users rely on that, so
// the algorithm must not change. The benches and the tests draw their inputs from it too.
std::vector<float> random_values(uint64_t seed, size_t arg, size_t n);
// Elements first .. first + out.size() - 1 of random_values(seed, arg, ...), into `out`.
void random_values_into(uint64_t seed, size_t arg, size_t first, std::span<float> out);
// random_values(seed, arg, n) converted to `format` (fmt::bytes_for(format, n) bytes, host
// order, the default rules), as write_tensor would store them, without the fp32 copy of all n:
// write_tensor_raw(mem, info, random_device_values(...)) writes what write_tensor(mem, info,
// random_values(...)) writes.
std::vector<uint8_t> random_device_values(uint64_t seed, size_t arg, size_t n, fmt::DataFormat format);
// write_tensor_raw(mem, info, random_device_values(seed, arg, numel, format)), the same bytes,
// written a chunk of the image at a time when the image has no padding (no host-order copy and
// no image of the whole tensor: 1 GB less for a 16384x16384 DL16 input), else so.
void write_random_tensor(Memory& mem, const TensorInfo& info, uint64_t seed, size_t arg);
// An index tensor's random elements: floor((u + 1) / 2 x bound) for u = random_values(seed, arg,
// numel), row numbers uniform in [0, bound), in its integer format.
void write_random_indices(Memory& mem, const TensorInfo& info, uint64_t seed, size_t arg, uint64_t bound);
// The kernel input `kt` as `vspyre run --seed SEED` draws it: write_random_indices for an index
// tensor (ExecError when its bound is unknown: its values must then be given), else
// write_random_tensor. Both with the seed moved by the view's offset.
void write_random_input(Memory& mem, const KernelTensor& kt, uint64_t seed);

// Each core's LX scratchpad (core id -> its memory, zero where nothing was written).
struct LxState {
  std::map<uint32_t, SparseMemory> cores;
};

struct ExecOptions {
  fmt::ConvertRules rules{};          // rounding/saturation for every store
  uint64_t lx_bytes = 2ull << 20;     // per-core LX scratch size
  // LX that outlives this run, as on the card, where torch-spyre passes an op's intermediates
  // from one kernel to the next through LX (its causal SDPA: three kernels). Null: each run
  // starts from a fresh, zeroed LX. The caller keeps it alive and unshared during run().
  LxState* lx = nullptr;
  // Run an execution whose ops are all elementwise over HBM tensors of one shape and one
  // unpadded stick layout (and operands broadcast over them) chunk by chunk over the device
  // images (Executor::stream), instead of
  // gathering each whole tensor into host order: the same bytes in memory, without a host copy
  // of every operand. false: always the whole-tensor path (the tests compare the two).
  bool stream_elementwise = true;
};

struct ExecStats {
  uint64_t executions = 0;     // sdsc_execute runs
  uint64_t ops = 0;            // computeOp_ entries computed
  uint64_t elements = 0;       // output elements computed
  uint64_t macs = 0;           // multiply-accumulates in matmul/conv ops
  uint64_t bytes_read = 0;     // from Memory (HBM)
  uint64_t bytes_written = 0;  // to Memory (HBM)
  uint64_t lx_bytes_read = 0, lx_bytes_written = 0;
  uint64_t streamed = 0;       // executions run chunk by chunk (ExecOptions::stream_elementwise)
  double seconds = 0;          // host wall time of run()
  double compute_seconds = 0;  // of which inside vspyre::ops
};

// Runs every execution of the resolved bundle in order on `mem`. LX-resident tensors live in a
// per-core LX scratch the executor owns for this call (zero at the start). Throws ExecError.
ExecStats run(const bundle::LoadedBundle& lb, const std::vector<bundle::ResolvedExecution>& plan,
              Memory& mem, const ExecOptions& opt = {});

// The bundle-loader format enum -> the formats library's (same senlib names).
fmt::DataFormat to_fmt(bundle::DataFormat f);

}  // namespace vspyre::exec
