// vspyre runtime shim: the public interface of IBM's "flex" runtime as torch-spyre uses it
// (flex-api.md section 4), backed by the virtual Spyre card. Self-contained; no SystemC.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "flex/flex_api.h"
#include "util/sendefs/sendefs.h"

struct data_conversion_info;  // spyrecode-host-functions/sendataconvert/sen_host_ops.h

namespace flex {

// ---------------------------------------------------------------------------------------------
// Address model: DMVA = (segment << 34) + byte offset inside the segment.
// ---------------------------------------------------------------------------------------------
inline constexpr uint64_t SEGMENT_SIZE_BITS = 34;
inline constexpr uint64_t SEGMENT_SIZE = uint64_t{1} << SEGMENT_SIZE_BITS;  // 16 GiB
inline constexpr uint64_t PROG_SEGMENT = 7;
inline constexpr uint64_t PROG_OFFSET_BASE = PROG_SEGMENT << SEGMENT_SIZE_BITS;  // 0x1C00000000
inline constexpr uint64_t NUM_SEGMENTS = 8;
inline constexpr uint64_t DEVICE_ALIGNMENT = 128;

inline constexpr uint64_t dmvaToSegmentId(uint64_t dmva) { return dmva >> SEGMENT_SIZE_BITS; }

// A region is one segment of the device address space: region_id == segment index.
struct LogicalAddress {
  uint32_t region_id = 0;
  uint64_t offset = 0;  // byte offset inside the segment that owns the region

  LogicalAddress() = default;
  LogicalAddress(uint32_t region, uint64_t off) : region_id(region), offset(off) {}
};

struct Chunk {
  LogicalAddress addr;
  size_t size = 0;
  int32_t domain_id = 0;

  Chunk() = default;
  Chunk(LogicalAddress a, size_t sz, int32_t domain) : addr(a), size(sz), domain_id(domain) {}
};

namespace detail {
class AllocatorCore;
}

// A device address made of chunks (always one here). Values returned by
// FlexAllocator::allocate own their memory and free it on destruction; values built from a Chunk
// are non-owning views. Move-only; a moved-from value owns nothing and has total_size() == 0.
class FLEX_API CompositeAddress {
 public:
  CompositeAddress() noexcept;
  explicit CompositeAddress(const Chunk& chunk);
  CompositeAddress(CompositeAddress&& other) noexcept;
  CompositeAddress& operator=(CompositeAddress&& other) noexcept;
  CompositeAddress(const CompositeAddress&) = delete;
  CompositeAddress& operator=(const CompositeAddress&) = delete;
  ~CompositeAddress();

  const std::vector<Chunk>& chunks() const noexcept { return chunks_; }
  size_t total_size() const noexcept { return total_size_; }
  bool owns_memory() const noexcept { return owner_ != nullptr; }

 private:
  friend class FlexAllocator;
  std::vector<Chunk> chunks_;
  size_t total_size_ = 0;
  std::shared_ptr<detail::AllocatorCore> owner_;  // non-null for owning addresses
};

FLEX_API std::ostream& operator<<(std::ostream& os, const CompositeAddress& a);

enum class PlacementPolicy { Bind, Interleave };
enum class MemoryType { Tensor, Program };

struct AllocationDirective {
  PlacementPolicy policy = PlacementPolicy::Bind;
  std::vector<int> domains{0};
  std::optional<uint64_t> alignment;  // bytes; default DEVICE_ALIGNMENT
  MemoryType memory_type = MemoryType::Tensor;

  AllocationDirective() = default;
  AllocationDirective(PlacementPolicy p, std::vector<int> d, std::optional<uint64_t> align,
                      MemoryType t)
      : policy(p), domains(std::move(d)), alignment(align), memory_type(t) {}
};

// Called when the device memory is exhausted, with the allocator's mutex held through `lock`.
// It may unlock, free memory (which takes the same mutex), and must relock before returning.
using MemoryPressureCallback = std::function<void(std::unique_lock<std::mutex>&)>;

class FLEX_API FlexAllocator {
 public:
  explicit FlexAllocator(std::shared_ptr<detail::AllocatorCore> core);
  ~FlexAllocator();

  // Rounds up to 128 bytes. Throws std::runtime_error("... out of memory ...") when the device
  // is full even after the memory-pressure callback ran.
  CompositeAddress allocate(size_t nbytes, const AllocationDirective& directive);
  void registerMemoryPressureCallback(MemoryPressureCallback cb);
  // (segment << 34) + offset of the address's first chunk.
  uint64_t compositeAddressToDmva(const CompositeAddress& addr) const;

  // vspyre extras.
  uint64_t capacity() const;
  uint64_t bytesInUse() const;
  size_t liveAllocations() const;

 private:
  std::shared_ptr<detail::AllocatorCore> core_;
};

// ---------------------------------------------------------------------------------------------
// Streams
// ---------------------------------------------------------------------------------------------

enum class RuntimeStreamPriority { NORMAL, HIGH };

struct DmaParams {
  void* host = nullptr;
  size_t size = 0;
  bool to_device = true;
  const CompositeAddress* device = nullptr;
  std::shared_ptr<data_conversion_info> dci;
  bool pipeline_barrier = false;
  // Kept until the operation completes, then called with user_data and dropped.
  std::function<void(void*)> callback;
  void* user_data = nullptr;
};

struct ComputeParams {
  const CompositeAddress* program = nullptr;
  std::vector<const CompositeAddress*> tensors;
  std::string kernel_name;
  uint64_t bootstrap_offset = 0;
  bool pipeline_barrier = false;
};

struct HostCallbackParams {
  std::function<void(void*)> callback;
  void* user_data = nullptr;
  bool pipeline_barrier = false;
};

FLEX_API DmaParams* createDmaParams(void* host, size_t size, bool to_device,
                                    const CompositeAddress* dev,
                                    std::shared_ptr<data_conversion_info> dci = nullptr);
FLEX_API void destroyDmaParams(DmaParams* p);
FLEX_API ComputeParams* createComputeParams(const CompositeAddress* program,
                                            std::vector<const CompositeAddress*> tensors,
                                            const std::string& name, uint64_t bootstrap_offset);
FLEX_API void destroyComputeParams(ComputeParams* p);
FLEX_API HostCallbackParams* createHostCallbackParams(std::function<void(void*)> cb,
                                                      void* user_data, bool pipeline_barrier);
FLEX_API void destroyHostCallbackParams(HostCallbackParams* p);

namespace detail {
class StreamImpl;
class ContextImpl;
}  // namespace detail

// An in-order queue of device operations. Launches copy everything they need (the H2D source
// bytes are snapshotted at launch); errors found while executing are deferred and thrown by
// synchronize(). Thread-safe.
class FLEX_API RuntimeStream {
 public:
  explicit RuntimeStream(detail::StreamImpl* impl) : impl_(impl) {}
  RuntimeStream(const RuntimeStream&) = delete;
  RuntimeStream& operator=(const RuntimeStream&) = delete;

  // Each launch returns the operation's sequence number on this stream (1, 2, ...).
  uint64_t launchOperationH2D(DmaParams* params);
  uint64_t launchOperationD2H(DmaParams* params);
  uint64_t launchOperationCompute(ComputeParams* params);
  // Waits for the stream's earlier operations, then runs the callback on the calling thread;
  // its exceptions propagate out of this call.
  uint64_t launchOperationHostCallback(HostCallbackParams* params);
  // Fills the whole allocation (dst->total_size() bytes) with `value` encoded in `dtype`.
  uint64_t fillAsync(const CompositeAddress* dst, double value, DataFormats dtype,
                     bool use_dmai = true);

  bool query();
  void synchronize();
  bool needsShutdown() const;

  int id() const;
  RuntimeStreamPriority priority() const;
  uint64_t completedOperations() const;

 private:
  detail::StreamImpl* impl_;
};

class FLEX_API RuntimeContext {
 public:
  explicit RuntimeContext(std::unique_ptr<detail::ContextImpl> impl);
  ~RuntimeContext();
  RuntimeContext(const RuntimeContext&) = delete;
  RuntimeContext& operator=(const RuntimeContext&) = delete;

  std::shared_ptr<FlexAllocator> getAllocator();
  RuntimeStream* getDefaultStream();
  RuntimeStream* createStream(RuntimeStreamPriority priority = RuntimeStreamPriority::NORMAL);
  bool hasStreamError() const;
  int getDeviceId() const;

  detail::ContextImpl& impl() { return *impl_; }

 private:
  std::unique_ptr<detail::ContextImpl> impl_;
};

struct RuntimeStatus {
  int code = 0;  // 0 = success
  std::string message;
  bool ok() const { return code == 0; }
};
FLEX_API std::ostream& operator<<(std::ostream& os, const RuntimeStatus& s);

// Visible devices: FLEX_DEVICE (PF, VF or MOCK), AIU_WORLD_SIZE, SPYRE_DEVICES; the number of
// virtual cards "in the system" is VSPYRE_NUM_DEVICES (default 2).
FLEX_API size_t getNumDevices();
// The process-wide runtime, created on first use (also before initializeRuntime).
FLEX_API std::shared_ptr<RuntimeContext> getFlexRuntimeContext();
// Binds the process runtime to `logical_device_id` and stores it in *out (null on failure).
FLEX_API RuntimeStatus initializeRuntime(std::shared_ptr<RuntimeContext>* out,
                                         int logical_device_id);

namespace aiupti {
// Mirror of libaiupti's compute activity record; only sizeof(name) is used (127 chars + NUL).
struct AIUpti_ActivityCB {
  uint64_t correlation_id = 0;
  uint64_t start = 0;
  uint64_t end = 0;
  uint32_t device_id = 0;
  uint32_t stream_id = 0;
  char name[128] = {};
};
}  // namespace aiupti

}  // namespace flex
