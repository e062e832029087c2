// Sparse host-side device memory (the data store of every backend).
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <typeinfo>

#include "kernel.h"
#include "sim/exec/exec.h"
#include "shim_internal.h"

namespace vspyre::shim {

DeviceBackend::DeviceBackend() : kernels_(std::make_shared<KernelCache>()), lx_(std::make_unique<exec::LxState>()) {}
DeviceBackend::~DeviceBackend() = default;

DeviceBackend::LxAccess DeviceBackend::lx() { return {std::unique_lock<std::mutex>(lx_mutex_), lx_.get()}; }

void DeviceBackend::fill(uint64_t dmva, size_t n, const void* pattern, size_t pattern_bytes) {
  constexpr size_t kChunk = 64 * 1024;
  std::vector<uint8_t> buf(std::min(n, kChunk));
  const auto* p = static_cast<const uint8_t*>(pattern);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = p[i % pattern_bytes];
  size_t done = 0;
  while (done < n) {
    // Keep the pattern phase: restart the chunk at the right pattern offset.
    const size_t phase = done % pattern_bytes;
    const size_t len = std::min(buf.size() - phase, n - done);
    write(dmva + done, buf.data() + phase, len);
    done += len;
  }
}

StagedBytes StagedBytes::make(uint64_t lo, uint64_t hi) {
  StagedBytes s;
  s.base = lo / kPageBytes * kPageBytes;
  s.lo = lo;
  s.hi = hi;
  const uint64_t n = hi - s.base;
  constexpr uint64_t kHuge = uint64_t{2} << 20;
  if (n >= 16 * kHuge) {
    const size_t len = n + kHuge;
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
      auto* start = reinterpret_cast<uint8_t*>(
          (reinterpret_cast<uintptr_t>(p) + kHuge - 1) / kHuge * kHuge);
      madvise(start, n, MADV_HUGEPAGE);  // advice only: failure is harmless
      s.mem = std::shared_ptr<uint8_t[]>(start, [p, len](uint8_t*) { munmap(p, len); });
      return s;
    }
  }
  s.mem = std::shared_ptr<uint8_t[]>(new uint8_t[n]);
  return s;
}

void DeviceBackend::writeStaged(StagedBytes&& s) { write(s.lo, s.at(s.lo), s.size()); }

static_assert(StagedBytes::kPageBytes == SparseBackend::kPageBytes);

void SparseBackend::writeStaged(StagedBytes&& s) {
  // A subclass that overrides write() (tests hook it to gate or record writes) must see this
  // write too: only the shim's own backends take pages over.
  if (typeid(*this) != typeid(SparseBackend) && typeid(*this) != typeid(CardBackend))
    return DeviceBackend::writeStaged(std::move(s));
  std::lock_guard<std::mutex> lk(mutex_);
  uint64_t dmva = s.lo;
  while (dmva < s.hi) {
    const uint64_t page = dmva / kPageBytes;
    const uint64_t off = dmva % kPageBytes;
    const uint64_t len = std::min<uint64_t>(s.hi - dmva, kPageBytes - off);
    auto& p = pages_[page];
    if (len == kPageBytes) {
      p = std::shared_ptr<uint8_t[]>(s.mem, s.at(dmva));  // aliases s.mem: keeps the block alive
    } else {
      if (!p) p.reset(new uint8_t[kPageBytes]());
      std::memcpy(p.get() + off, s.at(dmva), len);
    }
    dmva += len;
  }
}

void SparseBackend::write(uint64_t dmva, const void* src, size_t n) {
  std::lock_guard<std::mutex> lk(mutex_);
  const auto* s = static_cast<const uint8_t*>(src);
  while (n > 0) {
    const uint64_t page = dmva / kPageBytes;
    const uint64_t off = dmva % kPageBytes;
    const size_t len = std::min<uint64_t>(n, kPageBytes - off);
    auto& p = pages_[page];
    if (!p) p.reset(new uint8_t[kPageBytes]());
    std::memcpy(p.get() + off, s, len);
    s += len;
    dmva += len;
    n -= len;
  }
}

void SparseBackend::read(uint64_t dmva, void* dst, size_t n) {
  std::lock_guard<std::mutex> lk(mutex_);
  auto* d = static_cast<uint8_t*>(dst);
  while (n > 0) {
    const uint64_t page = dmva / kPageBytes;
    const uint64_t off = dmva % kPageBytes;
    const size_t len = std::min<uint64_t>(n, kPageBytes - off);
    auto it = pages_.find(page);
    if (it == pages_.end())
      std::memset(d, 0, len);
    else
      std::memcpy(d, it->second.get() + off, len);
    d += len;
    dmva += len;
    n -= len;
  }
}

void SparseBackend::fill(uint64_t dmva, size_t n, const void* pattern, size_t pattern_bytes) {
  const auto* p = static_cast<const uint8_t*>(pattern);
  if (std::all_of(p, p + pattern_bytes, [](uint8_t b) { return b == 0; })) {
    discard(dmva, n);  // absent pages read as zero
    return;
  }
  DeviceBackend::fill(dmva, n, pattern, pattern_bytes);
}

void SparseBackend::discard(uint64_t dmva, size_t n) {
  if (n == 0) return;
  std::lock_guard<std::mutex> lk(mutex_);
  const uint64_t end = dmva + n;
  const uint64_t first = dmva / kPageBytes;
  const uint64_t last = (end - 1) / kPageBytes;
  for (auto it = pages_.lower_bound(first); it != pages_.end() && it->first <= last;) {
    const uint64_t pbase = it->first * kPageBytes;
    const uint64_t lo = std::max(pbase, dmva);
    const uint64_t hi = std::min(pbase + kPageBytes, end);
    if (lo == pbase && hi == pbase + kPageBytes) {
      it = pages_.erase(it);
    } else {
      std::memset(it->second.get() + (lo - pbase), 0, hi - lo);
      ++it;
    }
  }
}

size_t SparseBackend::residentPages() const {
  std::lock_guard<std::mutex> lk(mutex_);
  return pages_.size();
}

}  // namespace vspyre::shim
