// Helpers for the runtime-shim conformance tests: torch-spyre-style DCIs for the default stick
// layout (flex-api.md 5.2, written from the description there), private runtime contexts.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <memory>
#include <vector>

#include "flex/flex.hpp"
#include "shim_internal.h"
#include "sim/formats/formats.h"
#include "spyrecode-host-functions/sendataconvert/sen_host_ops.h"

namespace shimtest {

namespace fmt = vspyre::fmt;

inline fmt::DataFormat F(DataFormats f) { return static_cast<fmt::DataFormat>(static_cast<int>(f)); }

inline std::shared_ptr<flex::RuntimeContext> make_context(uint64_t capacity = uint64_t{64} << 30,
                                                          int workers = 4) {
  vspyre::shim::ContextOptions o;
  o.capacity_bytes = capacity;
  o.workers = workers;
  return vspyre::shim::createRuntimeContext(o);
}

inline flex::AllocationDirective tensor_directive() {
  return flex::AllocationDirective(flex::PlacementPolicy::Bind, {0}, std::nullopt,
                                   flex::MemoryType::Tensor);
}

// Stream priorities alternating NORMAL, HIGH, NORMAL, ... by index.
inline flex::RuntimeStreamPriority alternating_priority(int k) {
  return k % 2 ? flex::RuntimeStreamPriority::HIGH : flex::RuntimeStreamPriority::NORMAL;
}

// `n` new streams of alternating priority, each with its own tensor allocation of `bytes`.
struct StreamsWithBuffers {
  std::vector<flex::RuntimeStream*> streams;
  std::vector<flex::CompositeAddress> bufs;
};
inline StreamsWithBuffers streams_with_buffers(flex::RuntimeContext& ctx, int n, uint64_t bytes) {
  StreamsWithBuffers r;
  for (int k = 0; k < n; ++k) {
    r.streams.push_back(ctx.createStream(alternating_priority(k)));
    r.bufs.push_back(ctx.getAllocator()->allocate(bytes, tensor_directive()));
  }
  return r;
}

// A SparseBackend whose first write (while hold_first) waits at a gate until release();
// wait_first() returns once that write has arrived. on_write() sees every write, under the lock.
class GateBackend : public vspyre::shim::SparseBackend {
 public:
  void write(uint64_t dmva, const void* src, size_t n) override {
    {
      std::unique_lock<std::mutex> lk(m);
      if (hold_first && !first_seen) {
        first_seen = true;
        cv.notify_all();
        cv.wait(lk, [&] { return released; });
      }
      on_write(src, n);
    }
    SparseBackend::write(dmva, src, n);
  }
  void wait_first() {
    std::unique_lock<std::mutex> lk(m);
    cv.wait(lk, [&] { return first_seen; });
  }
  void release() {
    std::lock_guard<std::mutex> lk(m);
    released = true;
    cv.notify_all();
  }
  std::mutex m;
  std::condition_variable cv;
  bool hold_first = true, first_seen = false, released = false;

 protected:
  virtual void on_write(const void* /*src*/, size_t /*n*/) {}
};

// A host tensor view and the device layout it maps to.
struct Transfer {
  std::vector<int64_t> host_size;
  std::vector<int64_t> host_stride;  // elements
  int64_t storage_offset = 0;
  fmt::StickLayout layout;
  uint64_t device_bytes = 0;  // allocation size torch-spyre would request
};

inline Transfer plan_transfer(std::vector<int64_t> size, DataFormats dev_f,
                              std::vector<int64_t> stride = {}, int64_t offset = 0) {
  Transfer t;
  t.host_size = size;
  t.host_stride = stride.empty() ? fmt::contiguous_strides(size) : stride;
  t.storage_offset = offset;
  t.layout = fmt::default_stick_layout(size, F(dev_f));
  t.device_bytes = fmt::device_image_bytes(t.layout);
  return t;
}

// The DCI torch-spyre's generate_dci produces for the default layout: one nest for the full
// sticks, one per stick remainder. Device dims reversed (innermost first).
inline data_conversion_info make_dci(const Transfer& t, DataFormats host_f, DataFormats dev_f,
                                     bool h2d) {
  const auto& D = t.layout.device_size;
  const size_t R = D.size();
  const auto smap = fmt::stride_map(t.layout, t.host_size, t.host_stride);
  std::vector<int64_t> dstride(R, 1);
  for (size_t k = R - 1; k-- > 0;) dstride[k] = dstride[k + 1] * D[k + 1];
  const int64_t eps = D[R - 1];
  const int32_t stick_host_dim = t.layout.dim_map[R - 1];
  // The stick-count dimension: the other device dim walking the stick's host dim.
  int64_t stick_dim = -1;
  for (size_t k = 0; k + 1 < R; ++k)
    if (t.layout.dim_map[k] == stick_host_dim) stick_dim = static_cast<int64_t>(k);
  const int64_t last = t.host_size.empty() ? 1 : t.host_size[stick_host_dim];
  const int64_t full = last / eps, rem = last % eps;
  const int64_t last_hstride = t.host_size.empty() ? 1 : t.host_stride[stick_host_dim];

  data_conversion_stride_info base;
  for (size_t k = 0; k < R; ++k) {
    int64_t sz = D[k];
    if (static_cast<int64_t>(k) == stick_dim) sz = full;
    base.size_.push_back(sz);
    const int64_t hs = smap[k] < 0 ? 0 : smap[k];
    base.stride_src_.push_back(h2d ? hs : dstride[k]);
    base.stride_dst_.push_back(h2d ? dstride[k] : hs);
  }
  base.offset_src_ = h2d ? t.storage_offset : 0;
  base.offset_dst_ = h2d ? 0 : t.storage_offset;
  std::vector<data_conversion_stride_info> nests;
  if (full > 0) nests.push_back(base);
  if (rem > 0) {
    auto r = base;
    r.size_[R - 1] = rem;
    if (stick_dim >= 0) r.size_[stick_dim] = 1;
    const int64_t hoff = full * eps * last_hstride;
    const int64_t doff = stick_dim >= 0 ? full * dstride[stick_dim] : 0;
    r.offset_src_ += h2d ? hoff : doff;
    r.offset_dst_ += h2d ? doff : hoff;
    nests.push_back(r);
  }
  for (auto& n : nests) {
    std::reverse(n.size_.begin(), n.size_.end());
    std::reverse(n.stride_src_.begin(), n.stride_src_.end());
    std::reverse(n.stride_dst_.begin(), n.stride_dst_.end());
  }
  data_conversion_info dci{};
  dci.dci_dsName_ = "DCI-Tensor-0";
  dci.isHostToSen_ = h2d;
  dci.dataformat_src_ = h2d ? host_f : dev_f;
  dci.dataformat_dst_ = h2d ? dev_f : host_f;
  dci.dcsi_ = nests;
  std::vector<int64_t> hs(t.host_size.rbegin(), t.host_size.rend()), ds(D.rbegin(), D.rend());
  dci.input_shape_ = h2d ? hs : ds;
  dci.output_shape_ = h2d ? ds : hs;
  return dci;
}

// Launches one DMA the way torch-spyre's copyAsyncImpl does (params destroyed right away).
inline void dma(flex::RuntimeStream* s, void* host, const flex::CompositeAddress& dev, bool h2d,
                const data_conversion_info* dci) {
  auto dci_ptr = dci ? std::make_shared<data_conversion_info>(*dci) : nullptr;
  auto* p = flex::createDmaParams(host, dev.total_size(), h2d, &dev, std::move(dci_ptr));
  if (h2d)
    s->launchOperationH2D(p);
  else
    s->launchOperationD2H(p);
  flex::destroyDmaParams(p);
}

// Raw device bytes of an allocation (D2H without a DCI).
inline std::vector<uint8_t> device_bytes(flex::RuntimeStream* s, const flex::CompositeAddress& a) {
  std::vector<uint8_t> out(a.total_size());
  dma(s, out.data(), a, false, nullptr);
  s->synchronize();
  return out;
}

}  // namespace shimtest

namespace shimtest {
// The message of the std::exception `f` throws ("" when it does not throw).
template <typename Fn>
std::string error_of(Fn&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
inline bool has(const std::string& s, const char* sub) { return s.find(sub) != std::string::npos; }
}  // namespace shimtest
