// Runtime shim: memory freed while stream operations that use it are still queued (torch frees a
// temporary as soon as the call that launched a kernel on it returns) keeps its contents until
// those operations have run; an allocation that needs it waits for them instead of failing.
#include <chrono>
#include <condition_variable>
#include <thread>

#include "catch.h"
#include "shim_test_util.h"

using namespace shimtest;

namespace {

// Holds writes to one device address until released.
class GateBackend : public vspyre::shim::SparseBackend {
 public:
  void write(uint64_t dmva, const void* src, size_t n) override {
    {
      std::unique_lock<std::mutex> lk(m);
      if (dmva == gate_at) {
        held = true;
        cv.notify_all();
        cv.wait(lk, [&] { return open; });
      }
    }
    SparseBackend::write(dmva, src, n);
  }
  void wait_held() {
    std::unique_lock<std::mutex> lk(m);
    cv.wait(lk, [&] { return held; });
  }
  void release() {
    std::lock_guard<std::mutex> lk(m);
    open = true;
    cv.notify_all();
  }
  std::mutex m;
  std::condition_variable cv;
  uint64_t gate_at = ~uint64_t{0};
  bool held = false, open = false;
};

uint64_t dmva_of(const flex::CompositeAddress& a) {
  const auto& c = a.chunks().front();
  return (uint64_t{c.addr.region_id} << flex::SEGMENT_SIZE_BITS) + c.addr.offset;
}

std::shared_ptr<flex::RuntimeContext> gated_context(const std::shared_ptr<GateBackend>& be, uint64_t capacity) {
  vspyre::shim::ContextOptions o;
  o.capacity_bytes = capacity;
  o.backend = be;
  return vspyre::shim::createRuntimeContext(o);
}

}  // namespace

TEST_CASE("shim: a tensor freed behind queued work keeps its data until that work has run") {
  auto be = std::make_shared<GateBackend>();
  auto ctx = gated_context(be, uint64_t{1} << 30);
  auto* s = ctx->createStream(flex::RuntimeStreamPriority::NORMAL);
  auto alloc = ctx->getAllocator();
  auto c = alloc->allocate(128, tensor_directive());
  // 128-byte buffers: dma() moves the whole allocation.
  std::vector<uint64_t> tag(16, 0xA11CE), seen(16, 0), other(16, 7);
  auto a = std::make_unique<flex::CompositeAddress>(alloc->allocate(128, tensor_directive()));
  dma(s, tag.data(), *a, true, nullptr);
  s->synchronize();
  be->gate_at = dmva_of(c);
  dma(s, other.data(), c, true, nullptr);  // holds the stream
  be->wait_held();
  dma(s, seen.data(), *a, false, nullptr);  // queued behind it
  const size_t live_before = alloc->liveAllocations();
  a.reset();  // freed while the D2H that reads it is queued
  CHECK(alloc->liveAllocations() == live_before);  // still reserved
  be->release();
  s->synchronize();
  CHECK(seen == tag);
  // Once the work is done the next allocation finds the memory free again.
  auto b = alloc->allocate(128, tensor_directive());
  CHECK(alloc->liveAllocations() == live_before);  // a retired, b live
}

TEST_CASE("shim: an allocation that needs memory freed behind queued work waits for it") {
  auto be = std::make_shared<GateBackend>();
  const uint64_t cap = uint64_t{1} << 20;
  auto ctx = gated_context(be, cap);
  auto* s = ctx->createStream(flex::RuntimeStreamPriority::NORMAL);
  auto alloc = ctx->getAllocator();
  auto c = alloc->allocate(128, tensor_directive());
  auto big = std::make_unique<flex::CompositeAddress>(alloc->allocate(cap - 4096, tensor_directive()));
  std::vector<uint64_t> other(16, 1);
  std::vector<uint8_t> seen(cap - 4096);
  be->gate_at = dmva_of(c);
  dma(s, other.data(), c, true, nullptr);
  be->wait_held();
  dma(s, seen.data(), *big, false, nullptr);
  big.reset();
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    be->release();
  });
  // Fits only once the queued D2H has run and the big block is really free.
  flex::CompositeAddress again;
  CHECK_NOTHROW(again = alloc->allocate(cap - 4096, tensor_directive()));
  opener.join();
  s->synchronize();
  CHECK(again.total_size() == cap - 4096);
}

TEST_CASE("shim: with nothing queued a free is immediate and use after free is still caught") {
  auto ctx = make_context();
  auto* s = ctx->getDefaultStream();
  auto alloc = ctx->getAllocator();
  const size_t live0 = alloc->liveAllocations();
  flex::Chunk chunk;
  {
    auto a = alloc->allocate(128, tensor_directive());
    chunk = a.chunks()[0];
  }
  CHECK(alloc->liveAllocations() == live0);
  std::vector<uint8_t> out(128);
  flex::CompositeAddress stale(chunk);
  dma(s, out.data(), stale, false, nullptr);
  CHECK(has(error_of([&] { s->synchronize(); }), "use after free"));
}
