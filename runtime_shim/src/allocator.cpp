// Device memory allocator: segments 0..6 hold tensors, segment 7 programs; 128-byte granules;
// first fit; finite capacity; memory-pressure callback, then "out of memory".
#include <sstream>
#include <stdexcept>

#include "shim_internal.h"

namespace flex {
namespace detail {

namespace {
constexpr uint64_t kTensorSegments = PROG_SEGMENT;  // 0..6
uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
void forget_freed(std::map<uint64_t, uint64_t>& freed, uint64_t dmva, uint64_t size) {
  auto it = freed.upper_bound(dmva);
  if (it != freed.begin()) --it;
  while (it != freed.end() && it->first < dmva + size) {
    if (it->first + it->second > dmva)
      it = freed.erase(it);
    else
      ++it;
  }
}
}  // namespace

AllocatorCore::AllocatorCore(uint64_t cap, std::shared_ptr<vspyre::shim::DeviceBackend> be)
    : capacity(cap), backend(std::move(be)) {
  for (uint64_t s = 0; s < NUM_SEGMENTS; ++s) free_[s].emplace(0, SEGMENT_SIZE);
}

thread_local uint64_t tls_op_ticket = 0;

std::optional<uint64_t> AllocatorCore::tryAllocate(uint64_t size, uint64_t alignment,
                                                   MemoryType type) {
  reap();
  if (size > capacity - std::min(capacity, used)) return std::nullopt;
  const uint64_t seg_lo = type == MemoryType::Program ? PROG_SEGMENT : 0;
  const uint64_t seg_hi = type == MemoryType::Program ? PROG_SEGMENT + 1 : kTensorSegments;
  for (uint64_t s = seg_lo; s < seg_hi; ++s) {
    auto& fl = free_[s];
    for (auto it = fl.begin(); it != fl.end(); ++it) {
      const uint64_t start = round_up(it->first, alignment);
      const uint64_t end = it->first + it->second;
      if (start >= end || end - start < size) continue;
      const uint64_t blk_off = it->first, blk_size = it->second;
      fl.erase(it);
      if (start > blk_off) fl.emplace(blk_off, start - blk_off);
      if (start + size < blk_off + blk_size) fl.emplace(start + size, blk_off + blk_size - start - size);
      const uint64_t dmva = (s << SEGMENT_SIZE_BITS) + start;
      live_.emplace(dmva, size);
      used += size;
      forget_freed(freed_, dmva, size);
      backend->discard(dmva, size);  // new allocations read as zero
      return dmva;
    }
  }
  return std::nullopt;
}

void AllocatorCore::release(uint64_t dmva) {
  std::lock_guard<std::mutex> lk(mutex);
  auto it = live_.find(dmva);
  if (it == live_.end() || pending_.count(dmva)) return;  // not ours / already released
  if (fence) {
    const uint64_t f = fence();
    if (!done(f)) {  // operations launched before this free may still use the range
      pending_.emplace(dmva, f);
      return;
    }
  }
  releaseNow(dmva, it->second);
  reap();
}

void AllocatorCore::reap(bool all) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (all || !done || done(it->second)) {
      const uint64_t dmva = it->first;
      it = pending_.erase(it);
      releaseNow(dmva, live_.at(dmva));
    } else {
      ++it;
    }
  }
}

uint64_t AllocatorCore::lastPendingFence() const {
  uint64_t f = 0;
  for (const auto& [dmva, fence_of] : pending_) f = std::max(f, fence_of);
  return f;
}

void AllocatorCore::releaseNow(uint64_t dmva, uint64_t size) {
  live_.erase(dmva);
  used -= size;
  if (freed_.size() > 100000) freed_.clear();  // diagnostics only; bound the memory
  freed_[dmva] = size;
  backend->discard(dmva, size);
  auto& fl = free_[dmvaToSegmentId(dmva)];
  uint64_t off = dmva & (SEGMENT_SIZE - 1), len = size;
  auto next = fl.lower_bound(off);
  if (next != fl.end() && off + len == next->first) {
    len += next->second;
    next = fl.erase(next);
  }
  if (next != fl.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      off = prev->first;
      len += prev->second;
      fl.erase(prev);
    }
  }
  fl.emplace(off, len);
}

std::optional<LiveRange> AllocatorCore::findLive(uint64_t dmva) const {
  std::lock_guard<std::mutex> lk(mutex);
  auto it = live_.upper_bound(dmva);
  if (it == live_.begin()) return std::nullopt;
  --it;
  if (dmva >= it->first + it->second) return std::nullopt;
  // A range whose free is pending is live only for the operations launched before the free.
  if (auto p = pending_.find(it->first);
      p != pending_.end() && (tls_op_ticket == 0 || tls_op_ticket > p->second))
    return std::nullopt;
  return LiveRange{it->first, it->second};
}

bool AllocatorCore::wasFreed(uint64_t dmva) const {
  std::lock_guard<std::mutex> lk(mutex);
  if (auto it = live_.upper_bound(dmva); it != live_.begin()) {
    --it;
    if (dmva < it->first + it->second && pending_.count(it->first)) return true;
  }
  auto it = freed_.upper_bound(dmva);
  if (it == freed_.begin()) return false;
  --it;
  return dmva < it->first + it->second;
}

std::optional<LiveRange> AllocatorCore::liveBelow(uint64_t dmva) const {
  std::lock_guard<std::mutex> lk(mutex);
  auto it = live_.upper_bound(dmva);
  if (it == live_.begin()) return std::nullopt;
  --it;
  if (dmvaToSegmentId(it->first) != dmvaToSegmentId(dmva)) return std::nullopt;
  return LiveRange{it->first, it->second};
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// CompositeAddress
// ---------------------------------------------------------------------------------------------

CompositeAddress::CompositeAddress() noexcept = default;

CompositeAddress::CompositeAddress(const Chunk& chunk) : chunks_{chunk}, total_size_(chunk.size) {}

CompositeAddress::CompositeAddress(CompositeAddress&& o) noexcept
    : chunks_(std::move(o.chunks_)), total_size_(o.total_size_), owner_(std::move(o.owner_)) {
  o.chunks_.clear();
  o.total_size_ = 0;
  o.owner_.reset();
}

CompositeAddress& CompositeAddress::operator=(CompositeAddress&& o) noexcept {
  if (this != &o) {
    CompositeAddress old(std::move(*this));  // frees what this owned
    chunks_ = std::move(o.chunks_);
    total_size_ = o.total_size_;
    owner_ = std::move(o.owner_);
    o.chunks_.clear();
    o.total_size_ = 0;
    o.owner_.reset();
  }
  return *this;
}

CompositeAddress::~CompositeAddress() {
  if (owner_ && !chunks_.empty()) {
    const auto& c = chunks_.front();
    owner_->release((uint64_t{c.addr.region_id} << SEGMENT_SIZE_BITS) + c.addr.offset);
  }
}

std::ostream& operator<<(std::ostream& os, const CompositeAddress& a) {
  os << "CompositeAddress{" << (a.owns_memory() ? "owning" : "view") << ", " << a.total_size()
     << " B";
  for (const auto& c : a.chunks()) {
    const uint64_t dmva = (uint64_t{c.addr.region_id} << SEGMENT_SIZE_BITS) + c.addr.offset;
    os << ", [region " << c.addr.region_id << " offset 0x" << std::hex << c.addr.offset
       << " dmva 0x" << dmva << std::dec << " size " << c.size << " domain " << c.domain_id
       << "]";
  }
  return os << "}";
}

// ---------------------------------------------------------------------------------------------
// FlexAllocator
// ---------------------------------------------------------------------------------------------

FlexAllocator::FlexAllocator(std::shared_ptr<detail::AllocatorCore> core) : core_(std::move(core)) {}
FlexAllocator::~FlexAllocator() = default;

CompositeAddress FlexAllocator::allocate(size_t nbytes, const AllocationDirective& directive) {
  const uint64_t size = detail::round_up(std::max<uint64_t>(nbytes, 1), DEVICE_ALIGNMENT);
  uint64_t align = DEVICE_ALIGNMENT;
  if (directive.alignment && *directive.alignment > DEVICE_ALIGNMENT) {
    align = *directive.alignment;
    if ((align & (align - 1)) != 0)
      throw std::invalid_argument("flex: allocation alignment must be a power of two");
  }
  std::unique_lock<std::mutex> lk(core_->mutex);
  auto dmva = core_->tryAllocate(size, align, directive.memory_type);
  // Frees still waiting for earlier stream operations: let those finish, then retry.
  auto after_pending_frees = [&] {
    if (dmva || !core_->hasPending() || !core_->wait) return;
    const uint64_t f = core_->lastPendingFence();
    auto wait = core_->wait;
    lk.unlock();
    wait(f);
    lk.lock();
    dmva = core_->tryAllocate(size, align, directive.memory_type);
  };
  after_pending_frees();
  if (!dmva && core_->pressure_cb) {
    auto cb = core_->pressure_cb;  // the callback may unlock; keep our own copy
    cb(lk);
    if (!lk.owns_lock()) lk.lock();
    dmva = core_->tryAllocate(size, align, directive.memory_type);
    after_pending_frees();
  }
  if (!dmva) {
    std::ostringstream msg;
    msg << "flex: Spyre device out of memory (OOM): cannot allocate " << size << " bytes ("
        << nbytes << " requested); " << core_->used << " of " << core_->capacity
        << " bytes in use";
    throw std::runtime_error(msg.str());
  }
  lk.unlock();
  CompositeAddress a(Chunk(LogicalAddress(static_cast<uint32_t>(dmvaToSegmentId(*dmva)),
                                          *dmva & (SEGMENT_SIZE - 1)),
                           size, directive.domains.empty() ? 0 : directive.domains.front()));
  a.owner_ = core_;
  return a;
}

void FlexAllocator::registerMemoryPressureCallback(MemoryPressureCallback cb) {
  std::lock_guard<std::mutex> lk(core_->mutex);
  core_->pressure_cb = std::move(cb);
}

uint64_t FlexAllocator::compositeAddressToDmva(const CompositeAddress& addr) const {
  if (addr.chunks().empty())
    throw std::invalid_argument("flex: compositeAddressToDmva on an empty (moved-from) address");
  const auto& c = addr.chunks().front();
  return (uint64_t{c.addr.region_id} << SEGMENT_SIZE_BITS) + c.addr.offset;
}

uint64_t FlexAllocator::capacity() const { return core_->capacity; }

uint64_t FlexAllocator::bytesInUse() const {
  std::lock_guard<std::mutex> lk(core_->mutex);
  core_->reap();
  return core_->used;
}

size_t FlexAllocator::liveAllocations() const {
  std::lock_guard<std::mutex> lk(core_->mutex);
  core_->reap();
  return core_->liveCount();
}

}  // namespace flex
