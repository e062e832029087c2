// vspyre runtime shim internals: the device backend interface, the allocator core, the stream
// engine. Not installed; the shim's own tests include it to build private runtime contexts.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "flex/flex.hpp"

namespace vspyre::shim {

// One Compute launch as the device sees it (addresses are DMVAs).
struct ComputeLaunch {
  uint64_t program_dmva = 0;
  uint64_t program_size = 0;
  uint64_t bootstrap_offset = 0;
  std::string name;
  std::vector<std::pair<uint64_t, uint64_t>> tensors;  // (dmva, bytes), argument order
};

// Where device memory and kernels live. The shim only talks to the card through this: today a
// sparse host-side store, later the SystemC card model (PCIe timing, kernel execution).
// Implementations must be thread-safe; calls for one stream arrive in that stream's order.
class FLEX_API DeviceBackend {
 public:
  virtual ~DeviceBackend();
  virtual void write(uint64_t dmva, const void* src, size_t n) = 0;
  virtual void read(uint64_t dmva, void* dst, size_t n) = 0;
  // Fills [dmva, dmva+n) with `pattern` repeated (byte i gets pattern[i % pattern_bytes]).
  virtual void fill(uint64_t dmva, size_t n, const void* pattern, size_t pattern_bytes);
  // The range's contents become zero (allocation and free).
  virtual void discard(uint64_t dmva, size_t n) = 0;
  // Runs a kernel; throws on failure (the error is deferred to the stream's synchronize()).
  virtual void launch(const ComputeLaunch& launch) = 0;
};

// Device memory as 64 KiB pages created on first write; absent pages read as zero.
class FLEX_API SparseBackend : public DeviceBackend {
 public:
  static constexpr uint64_t kPageBytes = 64 * 1024;
  void write(uint64_t dmva, const void* src, size_t n) override;
  void read(uint64_t dmva, void* dst, size_t n) override;
  void fill(uint64_t dmva, size_t n, const void* pattern, size_t pattern_bytes) override;
  void discard(uint64_t dmva, size_t n) override;
  void launch(const ComputeLaunch& launch) override;
  size_t residentPages() const;

 private:
  mutable std::mutex mutex_;
  std::map<uint64_t, std::unique_ptr<uint8_t[]>> pages_;
};

struct ContextOptions {
  uint64_t capacity_bytes = uint64_t{128} << 30;  // device memory
  int workers = 4;                                // threads executing stream operations
  int device_id = 0;
  std::shared_ptr<DeviceBackend> backend;         // null: a SparseBackend
};

// Options from the environment: FLEX_MOCK_DEVICE_MEMORY_SIZE / VSPYRE_DEVICE_MEMORY_BYTES
// (bytes), VSPYRE_SHIM_WORKERS.
FLEX_API ContextOptions optionsFromEnvironment();
// A private runtime context (tests); getFlexRuntimeContext() returns the process one.
FLEX_API std::shared_ptr<flex::RuntimeContext> createRuntimeContext(const ContextOptions& opts);

}  // namespace vspyre::shim

namespace flex::detail {

struct LiveRange {
  uint64_t base = 0;
  uint64_t size = 0;
};

class AllocatorCore {
 public:
  AllocatorCore(uint64_t capacity, std::shared_ptr<vspyre::shim::DeviceBackend> backend);

  // Lock held by the caller. Returns the DMVA.
  std::optional<uint64_t> tryAllocate(uint64_t size, uint64_t alignment, MemoryType type);
  // Takes the lock.
  void release(uint64_t dmva);
  // The live allocation containing dmva (takes the lock).
  std::optional<LiveRange> findLive(uint64_t dmva) const;
  // For diagnostics: was dmva inside a since-freed allocation; the live allocation below it in
  // the same segment (takes the lock).
  bool wasFreed(uint64_t dmva) const;
  std::optional<LiveRange> liveBelow(uint64_t dmva) const;
  // Lock held by the caller.
  size_t liveCount() const { return live_.size(); }

  mutable std::mutex mutex;
  MemoryPressureCallback pressure_cb;
  const uint64_t capacity;
  uint64_t used = 0;
  std::shared_ptr<vspyre::shim::DeviceBackend> backend;

 private:
  std::map<uint64_t, uint64_t> free_[NUM_SEGMENTS];  // per segment: offset -> size
  std::map<uint64_t, uint64_t> live_;                 // dmva -> size
  std::map<uint64_t, uint64_t> freed_;                // released ranges not yet reused
};

struct Op {
  std::function<void()> run;     // may throw: the error is deferred to synchronize()
  std::function<void()> finish;  // always runs after `run` (DmaParams::callback)
};

class ContextImpl;

class StreamImpl {
 public:
  StreamImpl(ContextImpl* ctx, int id, RuntimeStreamPriority prio)
      : ctx(ctx), id(id), priority(prio), handle(this) {}
  ContextImpl* ctx;
  const int id;
  const RuntimeStreamPriority priority;
  RuntimeStream handle;
  // Guarded by ContextImpl::mutex.
  std::deque<Op> queue;
  bool busy = false;
  uint64_t launched = 0;
  uint64_t completed = 0;
  std::exception_ptr error;
  bool shutdown = false;
};

class ContextImpl {
 public:
  explicit ContextImpl(const vspyre::shim::ContextOptions& opts);
  ~ContextImpl();

  StreamImpl* createStream(RuntimeStreamPriority prio);
  uint64_t enqueue(StreamImpl* s, Op op);
  void drain(StreamImpl* s, std::unique_lock<std::mutex>& lk);

  vspyre::shim::ContextOptions opts;
  std::shared_ptr<vspyre::shim::DeviceBackend> backend;
  std::shared_ptr<AllocatorCore> core;
  std::shared_ptr<FlexAllocator> allocator;
  int device_id = 0;

  std::mutex mutex;
  std::condition_variable work_cv;
  std::condition_variable done_cv;
  std::vector<std::unique_ptr<StreamImpl>> streams;
  StreamImpl* default_stream = nullptr;

 private:
  StreamImpl* pick();  // lock held
  void workerLoop();
  bool stop_ = false;
  size_t rr_ = 0;
  std::vector<std::thread> workers_;
};

}  // namespace flex::detail
