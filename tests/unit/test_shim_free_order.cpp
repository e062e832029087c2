// Runtime shim: frees are stream-ordered. torch-spyre drops a device tensor as soon as the
// operation using it is launched: `a.to("spyre").add(2.0).to("cpu")` frees the temporary right
// after the add is queued (torch-spyre test_spyre.py::test_cross_device_copy). The free must not
// take the data away from operations launched before it, yet operations launched after it must
// still see "use after free".
#include <thread>

#include "catch.h"
#include "shim_test_util.h"

using namespace shimtest;

namespace {

std::shared_ptr<flex::RuntimeContext> gated_context(std::shared_ptr<GateBackend> be,
                                                    uint64_t capacity = uint64_t{1} << 30) {
  vspyre::shim::ContextOptions o;
  o.capacity_bytes = capacity;
  o.workers = 2;
  o.backend = std::move(be);
  return vspyre::shim::createRuntimeContext(o);
}

void raw(flex::RuntimeStream* s, void* host, size_t n, const flex::CompositeAddress& a, bool h2d) {
  auto* p = flex::createDmaParams(host, n, h2d, &a);
  if (h2d)
    s->launchOperationH2D(p);
  else
    s->launchOperationD2H(p);
  flex::destroyDmaParams(p);
}

uint64_t dmva_of(const flex::CompositeAddress& a) {
  const auto& c = a.chunks()[0];
  return (uint64_t{c.addr.region_id} << flex::SEGMENT_SIZE_BITS) + c.addr.offset;
}

}  // namespace

TEST_CASE("shim: a tensor freed while queued operations use it keeps its data for them") {
  auto be = std::make_shared<GateBackend>();
  auto ctx = gated_context(be);
  auto alloc = ctx->getAllocator();
  auto* s = ctx->getDefaultStream();
  auto* other = ctx->createStream(flex::RuntimeStreamPriority::NORMAL);
  auto keep = alloc->allocate(128, tensor_directive());

  uint64_t tag = 0x1234567890abcdefULL, out = 0, late = 0;
  flex::Chunk chunk;
  uint64_t freed_dmva = 0;
  {
    auto a = alloc->allocate(128, tensor_directive());
    chunk = a.chunks()[0];
    freed_dmva = dmva_of(a);
    raw(s, &tag, 8, a, true);  // held at the gate
    be->wait_first();
    flex::CompositeAddress view(chunk);
    raw(s, &out, 8, view, false);  // launched before the free
  }  // `a` is freed here, with both operations still queued

  // The range is not reused while the free is pending.
  auto c = alloc->allocate(128, tensor_directive());
  CHECK(dmva_of(c) != freed_dmva);
  // An operation launched after the free sees it.
  flex::CompositeAddress stale(chunk);
  raw(other, &late, 8, stale, false);
  CHECK(has(error_of([&] { other->synchronize(); }), "use after free"));

  be->release();
  CHECK(error_of([&] { s->synchronize(); }).empty());
  CHECK(out == tag);
  CHECK(alloc->liveAllocations() == 2);  // keep and c; the deferred free has completed
  CHECK(alloc->bytesInUse() == 256);
}

TEST_CASE("shim: an allocation that needs a pending free waits for it instead of failing") {
  auto be = std::make_shared<GateBackend>();
  auto ctx = gated_context(be, 256);
  auto alloc = ctx->getAllocator();
  auto* s = ctx->getDefaultStream();
  uint64_t tag = 7;
  {
    auto a = alloc->allocate(256, tensor_directive());
    raw(s, &tag, 8, a, true);  // held at the gate
    be->wait_first();
  }  // freed while the H2D is in flight: the free is pending
  CHECK(alloc->liveAllocations() == 1);
  std::string err;
  uint64_t got = 0;
  std::thread t([&] {
    err = error_of([&] {
      auto b = alloc->allocate(256, tensor_directive());
      got = b.total_size();
    });
  });
  be->release();
  t.join();
  CHECK(err.empty());
  CHECK(got == 256);
  s->synchronize();
  CHECK(alloc->liveAllocations() == 0);
}

TEST_CASE("shim: with idle streams a free is immediate") {
  auto ctx = make_context();
  auto alloc = ctx->getAllocator();
  uint64_t dmva = 0;
  {
    auto a = alloc->allocate(128, tensor_directive());
    dmva = dmva_of(a);
  }
  CHECK(alloc->liveAllocations() == 0);
  auto b = alloc->allocate(128, tensor_directive());
  CHECK(dmva_of(b) == dmva);  // first fit reuses the range at once
}
