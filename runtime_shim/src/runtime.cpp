// Runtime context, stream engine, device enumeration, operation parameters.
#include <cerrno>
#include <climits>
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include <unistd.h>

#include "shim_internal.h"

namespace flex {

// ---------------------------------------------------------------------------------------------
// Parameter objects
// ---------------------------------------------------------------------------------------------

DmaParams* createDmaParams(void* host, size_t size, bool to_device, const CompositeAddress* dev,
                           std::shared_ptr<data_conversion_info> dci) {
  auto* p = new DmaParams;
  p->host = host;
  p->size = size;
  p->to_device = to_device;
  p->device = dev;
  p->dci = std::move(dci);
  return p;
}
void destroyDmaParams(DmaParams* p) { delete p; }

ComputeParams* createComputeParams(const CompositeAddress* program,
                                   std::vector<const CompositeAddress*> tensors,
                                   const std::string& name, uint64_t bootstrap_offset) {
  auto* p = new ComputeParams;
  p->program = program;
  p->tensors = std::move(tensors);
  p->kernel_name = name;
  p->bootstrap_offset = bootstrap_offset;
  return p;
}
void destroyComputeParams(ComputeParams* p) { delete p; }

HostCallbackParams* createHostCallbackParams(std::function<void(void*)> cb, void* user_data,
                                             bool pipeline_barrier) {
  auto* p = new HostCallbackParams;
  p->callback = std::move(cb);
  p->user_data = user_data;
  p->pipeline_barrier = pipeline_barrier;
  return p;
}
void destroyHostCallbackParams(HostCallbackParams* p) { delete p; }

std::ostream& operator<<(std::ostream& os, const RuntimeStatus& s) {
  return os << "RuntimeStatus{" << (s.ok() ? "OK" : "ERROR") << " (" << s.code << ")"
            << (s.message.empty() ? "" : ": ") << s.message << "}";
}

// ---------------------------------------------------------------------------------------------
// Stream engine
// ---------------------------------------------------------------------------------------------

namespace detail {

namespace {
std::atomic<uint64_t> g_context_serial{0};

// The live contexts, for the exit handler. Never destroyed (contexts may outlive static
// destruction).
std::mutex& contexts_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::set<ContextImpl*>& contexts() {
  static auto* s = new std::set<ContextImpl*>;
  return *s;
}

constexpr const char* kExitDropped =
    "flex: the process is exiting: this stream's queued operations were dropped without running";
}  // namespace

ContextImpl::ContextImpl(const vspyre::shim::ContextOptions& o)
    : opts(o), serial(++g_context_serial), device_id(o.device_id) {
  backend = opts.backend ? opts.backend : std::make_shared<vspyre::shim::SparseBackend>();
  core = std::make_shared<AllocatorCore>(opts.capacity_bytes, backend);
  allocator = std::make_shared<FlexAllocator>(core);
  // Stream-ordered frees (see AllocatorCore::fence). Lock order: allocator, then context.
  core->fence = [this] {
    std::lock_guard<std::mutex> lk(mutex);
    return issued_;
  };
  core->done = [this](uint64_t t) {
    std::lock_guard<std::mutex> lk(mutex);
    return doneThrough(t);
  };
  core->wait = [this](uint64_t t) {
    std::unique_lock<std::mutex> lk(mutex);
    done_cv.wait(lk, [&] { return doneThrough(t); });
  };
  default_stream = createStream(RuntimeStreamPriority::NORMAL);
  const int n = std::max(1, opts.workers);
  live_workers_ = n;
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { workerLoop(); });
  vspyre::shim::registerExitHandler();
  std::lock_guard<std::mutex> lk(contexts_mutex());
  contexts().insert(this);
}

ContextImpl::~ContextImpl() {
  {
    std::lock_guard<std::mutex> lk(contexts_mutex());
    contexts().erase(this);
  }
  {
    std::unique_lock<std::mutex> lk(mutex);
    done_cv.wait(lk, [&] {
      return std::all_of(streams.begin(), streams.end(),
                         [](const auto& s) { return s->queue.empty() && !s->busy; });
    });
    stop_ = true;
  }
  work_cv.notify_all();
  for (auto& t : workers_)
    if (t.joinable()) t.join();  // stopForExit may have joined or detached them
  // Addresses may outlive the context: unhook the allocator and finish the deferred frees.
  std::lock_guard<std::mutex> lk(core->mutex);
  core->fence = nullptr;
  core->done = nullptr;
  core->wait = nullptr;
  core->reap(true);
}

StreamImpl* ContextImpl::createStream(RuntimeStreamPriority prio) {
  std::lock_guard<std::mutex> lk(mutex);
  streams.push_back(std::make_unique<StreamImpl>(this, static_cast<int>(streams.size()), prio));
  return streams.back().get();
}

StreamImpl* ContextImpl::pick() {
  const size_t n = streams.size();
  for (auto prio : {RuntimeStreamPriority::HIGH, RuntimeStreamPriority::NORMAL}) {
    for (size_t k = 0; k < n; ++k) {
      StreamImpl* s = streams[(rr_ + k) % n].get();
      if (s->priority == prio && !s->busy && !s->queue.empty()) {
        rr_ = (rr_ + k + 1) % n;
        return s;
      }
    }
  }
  return nullptr;
}

void ContextImpl::workerLoop() {
  std::unique_lock<std::mutex> lk(mutex);
  for (;;) {
    StreamImpl* s = nullptr;
    work_cv.wait(lk, [&] { return stop_ || (s = pick()) != nullptr; });
    if (!s) {  // stop_ and nothing to run
      --live_workers_;
      done_cv.notify_all();
      return;
    }
    Op op = std::move(s->queue.front());
    s->queue.pop_front();
    s->busy = true;
    const uint64_t ticket = op.ticket;
    lk.unlock();
    std::exception_ptr err;
    tls_op_ticket = ticket;
    try {
      if (op.run) op.run();
    } catch (...) {
      err = std::current_exception();
    }
    tls_op_ticket = 0;
    try {
      if (op.finish) op.finish();
    } catch (...) {
      if (!err) err = std::current_exception();
    }
    op = Op{};  // drop captured state (callbacks, snapshots) outside the lock
    lk.lock();
    inflight_.erase(ticket);
    s->busy = false;
    ++s->completed;
    if (err && !s->error) s->error = err;
    done_cv.notify_all();
    work_cv.notify_all();
  }
}

uint64_t ContextImpl::enqueue(StreamImpl* s, Op op) {
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lk(mutex);
    if (exiting_) {  // launched during exit, after the workers stopped
      dropForExit(s, std::move(op));
      return ++s->launched;
    }
    op.ticket = ++issued_;
    inflight_.insert(op.ticket);
    s->queue.push_back(std::move(op));
    seq = ++s->launched;
  }
  work_cv.notify_one();
  return seq;
}

void ContextImpl::drain(StreamImpl* s, std::unique_lock<std::mutex>& lk) {
  done_cv.wait(lk, [&] { return s->queue.empty() && !s->busy; });
}

void ContextImpl::dropForExit(StreamImpl* s, Op op) {
  if (!s->error) s->error = std::make_exception_ptr(std::runtime_error(kExitDropped));
  dropped_.push_back(std::move(op));
}

bool ContextImpl::stopForExit(std::chrono::milliseconds limit) {
  const std::thread::id self = std::this_thread::get_id();
  // exit() called by an operation on one of our workers: that worker cannot be waited for.
  const bool on_worker = std::any_of(workers_.begin(), workers_.end(),
                                     [&](const std::thread& t) { return t.get_id() == self; });
  bool idle = true;
  {
    std::unique_lock<std::mutex> lk(mutex);
    if (exiting_) return true;
    exiting_ = true;
    stop_ = true;
    for (auto& s : streams) {
      for (Op& op : s->queue) {
        inflight_.erase(op.ticket);
        dropForExit(s.get(), std::move(op));
      }
      s->queue.clear();
    }
    work_cv.notify_all();
    done_cv.notify_all();  // synchronize() and deferred frees waiting on dropped operations
    idle = done_cv.wait_for(lk, limit, [&] { return live_workers_ == (on_worker ? 1 : 0); });
  }
  for (auto& t : workers_) {
    if (!t.joinable()) continue;
    if (idle && t.get_id() != self)
      t.join();  // already out of workerLoop
    else
      t.detach();
  }
  return idle;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// RuntimeStream
// ---------------------------------------------------------------------------------------------

uint64_t RuntimeStream::launchOperationHostCallback(HostCallbackParams* params) {
  if (!params) throw std::invalid_argument("flex: launchOperationHostCallback: null params");
  auto& ctx = *impl_->ctx;
  uint64_t seq;
  {
    std::unique_lock<std::mutex> lk(ctx.mutex);
    ctx.drain(impl_, lk);
    impl_->busy = true;  // later operations on this stream wait for the callback
    seq = ++impl_->launched;
  }
  auto done = [&] {
    {
      std::lock_guard<std::mutex> lk(ctx.mutex);
      impl_->busy = false;
      ++impl_->completed;
    }
    ctx.done_cv.notify_all();
    ctx.work_cv.notify_all();
  };
  try {
    if (params->callback) params->callback(params->user_data);
  } catch (...) {
    done();
    throw;
  }
  done();
  return seq;
}

bool RuntimeStream::query() {
  std::lock_guard<std::mutex> lk(impl_->ctx->mutex);
  return impl_->queue.empty() && !impl_->busy;
}

void RuntimeStream::synchronize() {
  std::exception_ptr err;
  {
    std::unique_lock<std::mutex> lk(impl_->ctx->mutex);
    impl_->ctx->drain(impl_, lk);
    std::swap(err, impl_->error);
  }
  if (err) std::rethrow_exception(err);
}

bool RuntimeStream::needsShutdown() const {
  std::lock_guard<std::mutex> lk(impl_->ctx->mutex);
  return impl_->shutdown;
}

int RuntimeStream::id() const { return impl_->id; }
RuntimeStreamPriority RuntimeStream::priority() const { return impl_->priority; }
uint64_t RuntimeStream::completedOperations() const {
  std::lock_guard<std::mutex> lk(impl_->ctx->mutex);
  return impl_->completed;
}

// ---------------------------------------------------------------------------------------------
// RuntimeContext
// ---------------------------------------------------------------------------------------------

RuntimeContext::RuntimeContext(std::unique_ptr<detail::ContextImpl> impl) : impl_(std::move(impl)) {}
RuntimeContext::~RuntimeContext() = default;

std::shared_ptr<FlexAllocator> RuntimeContext::getAllocator() { return impl_->allocator; }
RuntimeStream* RuntimeContext::getDefaultStream() { return &impl_->default_stream->handle; }
RuntimeStream* RuntimeContext::createStream(RuntimeStreamPriority priority) {
  return &impl_->createStream(priority)->handle;
}
bool RuntimeContext::hasStreamError() const {
  std::lock_guard<std::mutex> lk(impl_->mutex);
  return std::any_of(impl_->streams.begin(), impl_->streams.end(),
                     [](const auto& s) { return s->shutdown; });
}
int RuntimeContext::getDeviceId() const { return impl_->device_id; }

// ---------------------------------------------------------------------------------------------
// Devices and the process runtime
// ---------------------------------------------------------------------------------------------

namespace {

// An integer environment variable, unset or empty: nullopt. Set to anything but a whole number
// in [min, max]: an error naming it (VSPYRE_NUM_DEVICES=abc used the default, 0 gave 1 device).
std::optional<long long> env_int(const char* name, long long min = LLONG_MIN, long long max = LLONG_MAX) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v, &end, 10);
  while (end && std::isspace(static_cast<unsigned char>(*end))) ++end;
  if (end == v || (end && *end) || errno == ERANGE || x < min || x > max)
    throw std::runtime_error(std::string("flex: ") + name + "='" + v + "': expected a whole number in [" +
                             std::to_string(min) + ", " + std::to_string(max) + "]");
  return x;
}

std::string trim(std::string s) {
  auto b = s.find_first_not_of(" \t\r\n");
  auto e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::mutex g_runtime_mutex;
std::shared_ptr<RuntimeContext>& process_runtime() {
  // Never destroyed: tensors may outlive static destruction at interpreter exit.
  static auto* rt = new std::shared_ptr<RuntimeContext>();
  return *rt;
}

}  // namespace

namespace {

// getNumDevices' count; throws on a bad environment (initializeRuntime reports it in its status).
size_t count_devices() {
  std::string mode = "PF";
  if (const char* d = std::getenv("FLEX_DEVICE"); d && *d) mode = trim(d);
  std::transform(mode.begin(), mode.end(), mode.begin(), ::toupper);
  const auto aiu = env_int("AIU_WORLD_SIZE");
  if (mode == "MOCK") {
    const long long n = aiu.value_or(1);
    if (n < 1) throw std::runtime_error("flex: FLEX_DEVICE=MOCK requires AIU_WORLD_SIZE >= 1");
    return static_cast<size_t>(n);
  }
  if (mode != "PF" && mode != "VF")
    throw std::runtime_error("flex: unknown FLEX_DEVICE '" + mode + "' (expected PF, VF or MOCK)");
  const long long total = env_int("VSPYRE_NUM_DEVICES", 1, 1024).value_or(2);
  long long n = total;
  if (aiu && *aiu >= 1) n = std::min(n, *aiu);
  if (const char* list = std::getenv("SPYRE_DEVICES"); list && *trim(list).c_str()) {
    std::set<long long> ids;
    std::stringstream ss(list);
    std::string tok;
    while (std::getline(ss, tok, ',')) {
      tok = trim(tok);
      if (tok.empty()) continue;
      char* end = nullptr;
      long long id = std::strtoll(tok.c_str(), &end, 10);
      if (end == tok.c_str() || *end) continue;  // not a number
      if (id >= 0 && id < total) ids.insert(id);
    }
    n = std::min<long long>(n, static_cast<long long>(ids.size()));
  }
  return static_cast<size_t>(n);
}

}  // namespace

size_t getNumDevices() {
  // torch-spyre calls this from a noexcept function (its device count): an exception would end
  // the process. A bad environment is said once on stderr, and no device is visible.
  try {
    return count_devices();
  } catch (const std::exception& e) {
    static std::once_flag said;
    std::call_once(said, [&] { std::fprintf(stderr, "%s; no Spyre device is visible\n", e.what()); });
    return 0;
  }
}

std::shared_ptr<RuntimeContext> getFlexRuntimeContext() {
  std::lock_guard<std::mutex> lk(g_runtime_mutex);
  auto& rt = process_runtime();
  if (!rt) rt = vspyre::shim::createRuntimeContext(vspyre::shim::optionsFromEnvironment());
  return rt;
}

RuntimeStatus initializeRuntime(std::shared_ptr<RuntimeContext>* out, int logical_device_id) {
  if (!out) return {1, "initializeRuntime: null output pointer"};
  *out = nullptr;
  size_t n = 0;
  try {
    n = count_devices();
  } catch (const std::exception& e) {
    return {2, e.what()};
  }
  if (logical_device_id < 0 || static_cast<size_t>(logical_device_id) >= n)
    return {3, "initializeRuntime: logical device " + std::to_string(logical_device_id) +
                   " out of range (" + std::to_string(n) + " visible devices)"};
  auto rt = getFlexRuntimeContext();
  rt->impl().device_id = logical_device_id;
  *out = rt;
  return {0, "vspyre virtual Spyre device " + std::to_string(logical_device_id)};
}

}  // namespace flex

namespace vspyre::shim {

namespace {

// How long exit() waits for the stream operations running when it was called (a large matmul
// on this host takes seconds; an operation stuck for longer is a bug elsewhere, and exit goes on
// without it rather than hang).
constexpr std::chrono::seconds kExitWait{60};
pid_t g_exit_pid = 0;

void at_exit() {
  if (getpid() != g_exit_pid) return;  // a forked child: the workers and the card are the parent's
  {
    std::lock_guard<std::mutex> lk(flex::detail::contexts_mutex());
    for (auto* c : flex::detail::contexts())
      if (!c->stopForExit(kExitWait))
        std::fprintf(stderr,
                     "vspyre libflex: stream operations still running %lld s into process exit; "
                     "exiting without them\n",
                     static_cast<long long>(kExitWait.count()));
  }
  shutdownCard();
}

}  // namespace

void registerExitHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_exit_pid = getpid();
    std::atexit(at_exit);
  });
}

ContextOptions optionsFromEnvironment() {
  ContextOptions o;
  // Bytes, with an optional K, M or G (binary) suffix: anything else, zero, a negative number or
  // more than 2^50 is an error naming the variable (-5 wrapped to 18446744073709551611; "banana"
  // was ignored). Checked before the card is built.
  std::optional<uint64_t> capacity;
  for (const char* name : {"FLEX_MOCK_DEVICE_MEMORY_SIZE", "VSPYRE_DEVICE_MEMORY_BYTES"}) {
    if (const char* v = std::getenv(name); v && *v) {
      const std::string t = flex::trim(v);
      size_t digits = 0;
      while (digits < t.size() && std::isdigit(static_cast<unsigned char>(t[digits]))) ++digits;
      const std::string suffix = t.substr(digits);
      int shift = -1;
      if (suffix.empty()) shift = 0;
      else if (suffix.size() == 1) {
        const char c = static_cast<char>(std::toupper(static_cast<unsigned char>(suffix[0])));
        shift = c == 'K' ? 10 : c == 'M' ? 20 : c == 'G' ? 30 : -1;
      }
      unsigned long long x = 0;
      bool ok = digits > 0 && digits <= 16 && shift >= 0;
      if (ok) {
        const unsigned long long n = std::stoull(t.substr(0, digits));
        x = n << shift;
        ok = x > 0 && x <= (1ull << 50) && (x >> shift) == n;
      }
      if (!ok)
        throw std::runtime_error(std::string("flex: ") + name + "='" + v +
                                 "': expected a device memory size in bytes, with an optional K, M or G suffix, "
                                 "from 1 to 2^50 (e.g. 16G)");
      capacity = x;  // the later name wins, as before
    }
  }
  const auto workers = flex::env_int("VSPYRE_SHIM_WORKERS", 1, 64);
  const char* card = std::getenv("VSPYRE_SHIM_CARD");
  if (!card || std::string(card) != "0") {
    auto b = std::make_shared<CardBackend>();  // throws when the card config is bad
    o.capacity_bytes = b->memoryCapacity();
    o.backend = std::move(b);
  }
  if (capacity) o.capacity_bytes = *capacity;
  if (workers) o.workers = static_cast<int>(*workers);
  return o;
}

std::shared_ptr<flex::RuntimeContext> createRuntimeContext(const ContextOptions& opts) {
  return std::make_shared<flex::RuntimeContext>(std::make_unique<flex::detail::ContextImpl>(opts));
}

}  // namespace vspyre::shim
