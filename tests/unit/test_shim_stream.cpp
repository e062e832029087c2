// Runtime shim: streams -- FIFO order, priorities, host callbacks, deferred errors, misuse,
// many threads (flex-api.md 4.3, 12 item 5).
#include <atomic>
#include <condition_variable>
#include <thread>

#include "catch.h"
#include "shim_test_util.h"

using namespace shimtest;

namespace {

// Records the order in which 8-byte tags are written; the first write can be held at a gate.
class RecordingBackend : public GateBackend {
 public:
  std::vector<uint64_t> order;  // guarded by m

 protected:
  void on_write(const void* src, size_t n) override {
    uint64_t tag = 0;
    std::memcpy(&tag, src, std::min<size_t>(8, n));
    order.push_back(tag);
  }
};

void h2d_tag(flex::RuntimeStream* s, const flex::CompositeAddress& a, uint64_t tag) {
  auto* p = flex::createDmaParams(&tag, 8, true, &a);
  s->launchOperationH2D(p);
  flex::destroyDmaParams(p);
}

}  // namespace

TEST_CASE("shim: operations on one stream run in FIFO order") {
  auto ctx = make_context();
  auto* s = ctx->createStream(flex::RuntimeStreamPriority::NORMAL);
  auto a = ctx->getAllocator()->allocate(128, tensor_directive());
  std::vector<uint64_t> seen(200, 0);
  for (uint64_t i = 0; i < 200; ++i) {
    h2d_tag(s, a, i + 1);
    auto* p = flex::createDmaParams(&seen[i], 8, false, &a);
    s->launchOperationD2H(p);
    flex::destroyDmaParams(p);
  }
  s->synchronize();
  CHECK(s->query());
  for (uint64_t i = 0; i < 200; ++i) REQUIRE(seen[i] == i + 1);
  CHECK(s->completedOperations() == 400);
}

TEST_CASE("shim: the default stream and created streams are distinct handles") {
  auto ctx = make_context();
  auto* d = ctx->getDefaultStream();
  CHECK(d == ctx->getDefaultStream());
  CHECK(d->id() == 0);
  std::vector<flex::RuntimeStream*> all{d};
  for (int i = 0; i < 1 + 32 + 32 + 8; ++i)  // torch-spyre's pools at most
    all.push_back(ctx->createStream(alternating_priority(i)));
  std::sort(all.begin(), all.end());
  CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());
  CHECK(all.back()->query());
  CHECK_FALSE(ctx->hasStreamError());
  CHECK_FALSE(d->needsShutdown());
}

TEST_CASE("shim: high priority streams are served before normal ones") {
  auto be = std::make_shared<RecordingBackend>();
  vspyre::shim::ContextOptions o;
  o.workers = 1;
  o.backend = be;
  auto ctx = vspyre::shim::createRuntimeContext(o);
  auto a = ctx->getAllocator()->allocate(128, tensor_directive());
  auto* blocker = ctx->createStream(flex::RuntimeStreamPriority::NORMAL);
  auto* normal = ctx->createStream(flex::RuntimeStreamPriority::NORMAL);
  auto* high = ctx->createStream(flex::RuntimeStreamPriority::HIGH);
  h2d_tag(blocker, a, 1);
  be->wait_first();  // the only worker is now busy
  h2d_tag(normal, a, 2);
  h2d_tag(normal, a, 3);
  h2d_tag(high, a, 4);
  h2d_tag(high, a, 5);
  be->release();
  for (auto* s : {blocker, normal, high}) s->synchronize();
  CHECK(be->order == std::vector<uint64_t>{1, 4, 5, 2, 3});
}

TEST_CASE("shim: host callbacks run on the caller after earlier operations and propagate exceptions") {
  auto ctx = make_context();
  auto* s = ctx->createStream();
  auto a = ctx->getAllocator()->allocate(128, tensor_directive());
  uint64_t landed = 0;
  h2d_tag(s, a, 42);
  auto* p = flex::createDmaParams(&landed, 8, false, &a);
  s->launchOperationD2H(p);
  flex::destroyDmaParams(p);
  const auto caller = std::this_thread::get_id();
  uint64_t seen = 0;
  std::thread::id ran_on;
  auto* hp = flex::createHostCallbackParams([&](void*) { seen = landed; ran_on = std::this_thread::get_id(); },
                                            nullptr, false);
  s->launchOperationHostCallback(hp);
  flex::destroyHostCallbackParams(hp);
  CHECK(seen == 42);  // the D2H had completed
  CHECK(ran_on == caller);

  auto* bad = flex::createHostCallbackParams([](void*) { throw std::runtime_error("Expect one DCI"); },
                                             nullptr, false);
  CHECK(has(error_of([&] { s->launchOperationHostCallback(bad); }), "Expect one DCI"));
  flex::destroyHostCallbackParams(bad);
  // The stream is still usable and has no deferred error.
  h2d_tag(s, a, 7);
  CHECK_NOTHROW(s->synchronize());
}

TEST_CASE("shim: D2H past the end of an allocation fails at synchronize with out of bounds") {
  auto ctx = make_context();
  auto* s = ctx->getDefaultStream();
  auto a = ctx->getAllocator()->allocate(256, tensor_directive());  // 128 fp16 elements
  const auto& c = a.chunks()[0];
  // dev_ptr 256 + 128 bytes: past the end.
  flex::CompositeAddress view(flex::Chunk(flex::LogicalAddress(c.addr.region_id, c.addr.offset + 256), 128, c.domain_id));
  std::vector<uint8_t> out(128);
  auto* p = flex::createDmaParams(out.data(), view.total_size(), false, &view);
  CHECK_NOTHROW(s->launchOperationD2H(p));  // deferred
  flex::destroyDmaParams(p);
  CHECK(has(error_of([&] { s->synchronize(); }), "out of bounds"));
  CHECK_NOTHROW(s->synchronize());  // reported once
  // A raw transfer larger than the address.
  std::vector<uint8_t> big(512);
  auto* q = flex::createDmaParams(big.data(), big.size(), true, &a);
  s->launchOperationH2D(q);
  flex::destroyDmaParams(q);
  CHECK(has(error_of([&] { s->synchronize(); }), "out of bounds"));
  // A DCI reaching past the allocation.
  auto t = plan_transfer({4, 64}, DataFormats::SEN169_FP16);  // needs 512 bytes
  auto dci = make_dci(t, DataFormats::IEEE_FP16, DataFormats::SEN169_FP16, true);
  std::vector<uint16_t> host(256);
  dma(s, host.data(), a, true, &dci);
  CHECK(has(error_of([&] { s->synchronize(); }), "out of bounds"));
}

TEST_CASE("shim: a wrong segment or region is rejected") {
  auto ctx = make_context();
  auto* s = ctx->getDefaultStream();
  std::vector<uint8_t> out(128);
  flex::CompositeAddress bad_region(flex::Chunk(flex::LogicalAddress(9, 0), 128, 0));
  dma(s, out.data(), bad_region, false, nullptr);
  CHECK(has(error_of([&] { s->synchronize(); }), "wrong segment"));
  // Segment 2 has no allocation here.
  flex::CompositeAddress empty_seg(flex::Chunk(flex::LogicalAddress(2, 0), 128, 0));
  dma(s, out.data(), empty_seg, false, nullptr);
  CHECK(has(error_of([&] { s->synchronize(); }), "not allocated"));
}

TEST_CASE("shim: use after free is reported") {
  auto ctx = make_context();
  auto* s = ctx->getDefaultStream();
  auto alloc = ctx->getAllocator();
  std::vector<uint8_t> out(128);
  flex::Chunk chunk;
  {
    auto a = alloc->allocate(128, tensor_directive());
    chunk = a.chunks()[0];
  }
  flex::CompositeAddress stale(chunk);
  dma(s, out.data(), stale, false, nullptr);
  CHECK(has(error_of([&] { s->synchronize(); }), "use after free"));
  auto b = alloc->allocate(128, tensor_directive());
  flex::CompositeAddress moved(std::move(b));
  s->fillAsync(&b, 1.0, DataFormats::SEN169_FP16);  // NOLINT(bugprone-use-after-move)
  CHECK(has(error_of([&] { s->synchronize(); }), "use after free"));
}

TEST_CASE("shim: misaligned DCI addresses and fills are rejected") {
  auto ctx = make_context();
  auto* s = ctx->getDefaultStream();
  auto a = ctx->getAllocator()->allocate(1024, tensor_directive());
  const auto& c = a.chunks()[0];
  flex::CompositeAddress odd(flex::Chunk(flex::LogicalAddress(c.addr.region_id, c.addr.offset + 1), 256, c.domain_id));
  auto t = plan_transfer({64}, DataFormats::SEN169_FP16);
  auto dci = make_dci(t, DataFormats::IEEE_FP16, DataFormats::SEN169_FP16, true);
  std::vector<uint16_t> host(64);
  dma(s, host.data(), odd, true, &dci);
  CHECK(has(error_of([&] { s->synchronize(); }), "misaligned"));
  flex::CompositeAddress ragged(flex::Chunk(c.addr, 130, c.domain_id));
  s->fillAsync(&ragged, 1.0, DataFormats::IEEE_FP32);
  CHECK(has(error_of([&] { s->synchronize(); }), "misaligned"));
}

TEST_CASE("shim: unsupported DCI conversions and null params are rejected") {
  auto ctx = make_context();
  auto* s = ctx->getDefaultStream();
  auto a = ctx->getAllocator()->allocate(512, tensor_directive());
  auto t = plan_transfer({64}, DataFormats::IEEE_FP32);
  auto dci = make_dci(t, DataFormats::IEEE_FP32, DataFormats::IEEE_FP32, true);
  dci.dataformat_dst_ = DataFormats::IEEE_INT64;  // not one of the 35 pairs
  std::vector<float> host(64);
  dma(s, host.data(), a, true, &dci);
  CHECK(has(error_of([&] { s->synchronize(); }), "unsupported DCI conversion"));
  CHECK_THROWS_AS(s->launchOperationH2D(nullptr), std::invalid_argument);
}

TEST_CASE("shim: errors are deferred to synchronize and later work still runs in order") {
  auto ctx = make_context();
  auto* s = ctx->getDefaultStream();
  auto a = ctx->getAllocator()->allocate(128, tensor_directive());
  flex::CompositeAddress bad(flex::Chunk(flex::LogicalAddress(3, 0), 128, 0));
  std::vector<uint8_t> out(128);
  dma(s, out.data(), bad, false, nullptr);
  h2d_tag(s, a, 99);
  uint64_t back = 0;
  auto* p = flex::createDmaParams(&back, 8, false, &a);
  s->launchOperationD2H(p);
  flex::destroyDmaParams(p);
  CHECK_THROWS(s->synchronize());
  CHECK(back == 99);
  CHECK(s->query());
}

TEST_CASE("shim: Compute of a program that is not a vspyre program image fails at synchronize") {
  auto ctx = make_context();
  auto* s = ctx->getDefaultStream();
  auto prog = ctx->getAllocator()->allocate(4096, flex::AllocationDirective(flex::PlacementPolicy::Bind, {0},
                                                                            std::nullopt, flex::MemoryType::Program));
  flex::CompositeAddress view(prog.chunks()[0]);
  auto* cp = flex::createComputeParams(&view, {}, "bundle.mlir#0", 0);
  cp->pipeline_barrier = true;
  s->launchOperationCompute(cp);
  flex::destroyComputeParams(cp);
  const std::string e = error_of([&] { s->synchronize(); });
  CHECK(has(e, "Compute 'bundle.mlir#0'"));
  CHECK(has(e, "not a vspyre program image"));
  CHECK(has(e, "magic"));
  // The stream stays usable.
  s->synchronize();
}

TEST_CASE("shim: stress 8 threads by 16 streams by 2000 ops completes every op once and in order") {
  auto ctx = make_context();
  static constexpr int kThreads = 8, kStreams = 16, kOps = 2000;
  // Per-thread private streams plus sixteen streams shared by all threads.
  std::vector<flex::RuntimeStream*> shared;
  for (int i = 0; i < kStreams; ++i)
    shared.push_back(ctx->createStream(alternating_priority(i)));
  std::mutex rec_m;
  std::vector<std::vector<int>> shared_log(kThreads * kStreams);  // (thread, shared stream) -> seqs
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      auto [mine, bufs] = streams_with_buffers(*ctx, kStreams, 128);
      std::vector<std::vector<int>> log(kStreams);
      for (int i = 0; i < kOps; ++i)
        for (int k = 0; k < kStreams; ++k) {
          uint64_t v = (uint64_t(t) << 32) | uint64_t(i);
          auto* p = flex::createDmaParams(&v, 8, true, &bufs[k]);
          p->callback = [&log, k, i](void*) { log[k].push_back(i); };
          mine[k]->launchOperationH2D(p);
          flex::destroyDmaParams(p);
          auto* q = flex::createDmaParams(&v, 8, true, &bufs[k]);  // same buffer, shared stream
          q->callback = [&shared_log, &rec_m, t, k, i](void*) {
            std::lock_guard<std::mutex> lk(rec_m);
            shared_log[t * kStreams + k].push_back(i);
          };
          shared[(k + t) % kStreams]->launchOperationH2D(q);
          flex::destroyDmaParams(q);
        }
      for (int k = 0; k < kStreams; ++k) {
        mine[k]->synchronize();
        if (mine[k]->completedOperations() != kOps) ++failures;
        if (log[k].size() != kOps) ++failures;
        for (int i = 0; i < static_cast<int>(log[k].size()); ++i)
          if (log[k][i] != i) ++failures;
      }
      for (auto* s : shared) s->synchronize();
      for (int k = 0; k < kStreams; ++k) {
        uint64_t back = 0;
        auto* r = flex::createDmaParams(&back, 8, false, &bufs[k]);
        mine[k]->launchOperationD2H(r);
        flex::destroyDmaParams(r);
        mine[k]->synchronize();
        if ((back >> 32) != uint64_t(t)) ++failures;
      }
    });
  for (auto& th : ts) th.join();
  CHECK(failures == 0);
  uint64_t total = 0;
  for (auto* s : shared) total += s->completedOperations();
  CHECK(total == uint64_t(kThreads) * kStreams * kOps);
  for (const auto& l : shared_log) {
    REQUIRE(l.size() == kOps);
    for (int i = 0; i < kOps; ++i) REQUIRE(l[i] == i);
  }
  CHECK_FALSE(ctx->hasStreamError());
}
