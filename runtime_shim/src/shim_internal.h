// vspyre runtime shim internals: the device backend interface, the allocator core, the stream
// engine. Not installed; the shim's own tests include it to build private runtime contexts.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "flex/flex.hpp"

namespace vspyre::exec {
struct LxState;
}

namespace vspyre::shim {

// A live device allocation: [base, base + size).
struct LiveAllocation {
  uint64_t base = 0;
  uint64_t size = 0;
};

// One Compute launch as the device sees it (addresses are DMVAs).
struct ComputeLaunch {
  uint64_t program_dmva = 0;  // the whole program allocation (job_allocation[0])
  uint64_t program_size = 0;
  uint64_t bootstrap_offset = 0;  // where the job binary starts in it
  std::string name;
  std::vector<std::pair<uint64_t, uint64_t>> tensors;  // (dmva, bytes), argument order; empty
                                                       // in symbolic mode (the blob has them)
  uint64_t stream_key = 0;  // identifies the stream (timelines in simulated time)
  // The live allocation containing a DMVA (argument checks); unset: no checks.
  std::function<std::optional<LiveAllocation>(uint64_t)> find_live;
};

// What a kernel launch did, for tests and the trace.
struct KernelReport {
  std::string kernel;     // program image's kernel name
  double start_ps = 0, end_ps = 0;  // simulated time (0, 0 without a card)
  double kernel_ps = 0;   // the plan runner's kernel time
  uint64_t executions = 0, ops = 0;  // functional execution (sim/exec)
};

struct KernelCache;

// Device-format bytes staged in host memory for one H2D: byte `dmva` of [lo, hi) lives at
// at(dmva), and the block starts on a kPageBytes boundary of the device address space so that a
// backend can take whole pages over instead of copying them (SparseBackend does).
struct StagedBytes {
  static constexpr uint64_t kPageBytes = 64 * 1024;
  uint64_t base = 0;  // lo rounded down to a page: the dmva of mem[0]
  uint64_t lo = 0, hi = 0;
  std::shared_ptr<uint8_t[]> mem;  // uninitialised outside what the producer wrote
  // Uninitialised (untouched memory costs nothing); blocks of 32 MiB and more are mapped with
  // transparent huge pages where the kernel allows it (far fewer page faults).
  static StagedBytes make(uint64_t lo, uint64_t hi);
  uint8_t* at(uint64_t dmva) const { return mem.get() + (dmva - base); }
  uint64_t size() const { return hi - lo; }
};

// Where device memory and kernels live. The shim only talks to the card through this: today a
// sparse host-side store, later the SystemC card model (PCIe timing, kernel execution).
// Implementations must be thread-safe; calls for one stream arrive in that stream's order.
class FLEX_API DeviceBackend {
 public:
  DeviceBackend();
  virtual ~DeviceBackend();
  virtual void write(uint64_t dmva, const void* src, size_t n) = 0;
  virtual void read(uint64_t dmva, void* dst, size_t n) = 0;
  // write(s.lo, s.at(s.lo), s.size()), where the backend may keep s's memory instead of copying.
  virtual void writeStaged(StagedBytes&& s);
  // Fills [dmva, dmva+n) with `pattern` repeated (byte i gets pattern[i % pattern_bytes]).
  virtual void fill(uint64_t dmva, size_t n, const void* pattern, size_t pattern_bytes);
  // The range's contents become zero (allocation and free).
  virtual void discard(uint64_t dmva, size_t n) = 0;
  // Simulated time of one host<->device transfer of `bytes` (device-format bytes) on a stream.
  // Called after the data moved. Default: no time model.
  virtual void transferTime(uint64_t stream_key, bool to_device, uint64_t bytes);
  // Runs a kernel; throws on failure (the error is deferred to the stream's synchronize()).
  // Default: the functional part only -- the program is identified from device memory, its
  // arguments bound from the tensor list or the correction blob, and sim/exec computes the
  // results in this backend's memory. No simulated time.
  virtual KernelReport launch(const ComputeLaunch& launch);

  // Each core's LX, kept from one kernel to the next as on the card: torch-spyre passes an op's
  // intermediates between its kernels through LX (its causal SDPA compiles to three kernels,
  // the second reading what the first left there). Held locked while a kernel computes.
  struct LxAccess {
    std::unique_lock<std::mutex> lock;
    exec::LxState* lx = nullptr;
  };
  LxAccess lx();

 protected:
  std::shared_ptr<KernelCache> kernels_;  // decoded programs, by image hash

 private:
  std::mutex lx_mutex_;
  std::unique_ptr<exec::LxState> lx_;
};

// Device memory as 64 KiB pages created on first write; absent pages read as zero.
class FLEX_API SparseBackend : public DeviceBackend {
 public:
  static constexpr uint64_t kPageBytes = 64 * 1024;
  void write(uint64_t dmva, const void* src, size_t n) override;
  void read(uint64_t dmva, void* dst, size_t n) override;
  // Pages the staged block covers completely become views of its memory (no copy); the partly
  // covered first/last pages are copied into. Subclasses other than CardBackend get write().
  void writeStaged(StagedBytes&& s) override;
  void fill(uint64_t dmva, size_t n, const void* pattern, size_t pattern_bytes) override;
  void discard(uint64_t dmva, size_t n) override;
  size_t residentPages() const;

 private:
  mutable std::mutex mutex_;
  std::map<uint64_t, std::shared_ptr<uint8_t[]>> pages_;  // own memory, or a StagedBytes view
};

// The virtual card (SystemC) behind a backend: one per process, on a thread of its own.
// Sparse memory for the data, the card for simulated time (PCIe transfers, kernels).
class FLEX_API CardBackend : public SparseBackend {
 public:
  CardBackend();  // starts (or joins) the process's card; throws when the config is bad
  void transferTime(uint64_t stream_key, bool to_device, uint64_t bytes) override;
  KernelReport launch(const ComputeLaunch& launch) override;
  uint64_t memoryCapacity() const;  // the card config's device memory, bytes
};

// The process's card, for tests and tools.
struct CardStats {
  std::string config;                 // the YAML the card was built from
  double clock_ps = 0;                // latest end of anything the card did
  uint64_t h2d_transfers = 0, d2h_transfers = 0, h2d_bytes = 0, d2h_bytes = 0;
  double h2d_busy_ps = 0, d2h_busy_ps = 0;  // sum of transfer durations
  uint64_t kernels = 0;
  double kernel_ps = 0;               // sum of kernel times
  KernelReport last_kernel;
};
// Null when no card has been started in this process.
FLEX_API std::optional<CardStats> cardStats();
// Writes the VSPYRE_TRACE file now (it is also written at process exit). False when off.
FLEX_API bool flushTrace();
// Stops the card thread (queued card work fails with a "shut down" error). Runs at exit.
FLEX_API void shutdownCard();
// Registers (once per process) the shim's exit handler: at exit() -- before any library's
// destructors run, libopenblas's included -- every runtime context of this process stops its
// stream workers (ContextImpl::stopForExit), then the card thread stops (shutdownCard). In a
// forked child it does nothing (the threads are the parent's). Contexts and the card call it.
void registerExitHandler();

struct ContextOptions {
  uint64_t capacity_bytes = uint64_t{128} << 30;  // device memory
  int workers = 4;                                // threads executing stream operations
  int device_id = 0;
  std::shared_ptr<DeviceBackend> backend;         // null: a SparseBackend
};

// Options from the environment: FLEX_MOCK_DEVICE_MEMORY_SIZE / VSPYRE_DEVICE_MEMORY_BYTES
// (bytes; default: the card's memory), VSPYRE_SHIM_WORKERS, VSPYRE_SHIM_CARD (0: no card,
// a SparseBackend without time; default: the card).
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
  // Lock held by the caller. Counts allocations whose free is still pending.
  size_t liveCount() const { return live_.size(); }

  // Stream-ordered frees. torch-spyre drops a tensor as soon as the op using it is launched
  // (`a.to("spyre").add(2.0)` frees the temporary right after the add is queued), so a free
  // only takes effect once every stream operation launched before it has completed; until then
  // the range keeps its data and is not reused, operations launched before the free may still
  // use it, and anything launched after it sees "use after free". Hooks set by the owning
  // context (null: frees are immediate): fence() = tickets issued so far; done(t) = every
  // operation with ticket <= t has completed; wait(t) blocks until done(t) (allocator lock not
  // held). Lock held by the caller for reap() and hasPending().
  std::function<uint64_t()> fence;
  std::function<bool(uint64_t)> done;
  std::function<void(uint64_t)> wait;
  void reap(bool all = false);
  bool hasPending() const { return !pending_.empty(); }
  uint64_t lastPendingFence() const;

  mutable std::mutex mutex;
  MemoryPressureCallback pressure_cb;
  const uint64_t capacity;
  uint64_t used = 0;
  std::shared_ptr<vspyre::shim::DeviceBackend> backend;

 private:
  void releaseNow(uint64_t dmva, uint64_t size);  // lock held
  std::map<uint64_t, uint64_t> free_[NUM_SEGMENTS];  // per segment: offset -> size
  std::map<uint64_t, uint64_t> live_;                 // dmva -> size (pending frees included)
  std::map<uint64_t, uint64_t> freed_;                // released ranges not yet reused
  std::map<uint64_t, uint64_t> pending_;              // dmva -> fence of its deferred free
};

// The ticket of the stream operation the calling thread is executing (0: not in an operation,
// i.e. a launch on the host). Set by the context's workers around Op::run.
extern thread_local uint64_t tls_op_ticket;

struct Op {
  std::function<void()> run;     // may throw: the error is deferred to synchronize()
  std::function<void()> finish;  // always runs after `run` (DmaParams::callback)
  uint64_t ticket = 0;           // context-wide launch order (stream-ordered frees)
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

  // Process exit (the shim's exit handler). No stream operation may still run once exit()
  // reaches the libraries' destructors: a kernel's matmul inside OpenBLAS while libopenblas's
  // destructor shuts its thread pool down hangs the process (or crashes it). So: operations
  // still queued are dropped without running (kept, not destroyed: nothing of the caller's runs
  // during exit; their streams' synchronize() reports it), the ones running finish, and the
  // workers stop and are joined. Waits at most `limit` for the running ones (false: some were
  // still running; their workers are detached). Later launches are dropped the same way.
  bool stopForExit(std::chrono::milliseconds limit);

  vspyre::shim::ContextOptions opts;
  const uint64_t serial;  // distinct per context: stream keys are (serial << 32) | stream id
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
  void dropForExit(StreamImpl* s, Op op);  // lock held
  bool stop_ = false;
  bool exiting_ = false;         // stopForExit ran (guarded by mutex)
  int live_workers_ = 0;         // workers still in workerLoop (guarded by mutex)
  std::vector<Op> dropped_;      // operations dropped at exit (guarded by mutex)
  size_t rr_ = 0;
  uint64_t issued_ = 0;          // tickets handed out (guarded by mutex)
  std::set<uint64_t> inflight_;  // tickets queued or running (guarded by mutex)
  bool doneThrough(uint64_t t) const { return inflight_.empty() || *inflight_.begin() > t; }
  std::vector<std::thread> workers_;
};

}  // namespace flex::detail
