// Runtime shim: allocator, address ownership, memory pressure (flex-api.md 4.2, 4.4).
#include <atomic>
#include <thread>
#include <type_traits>
#include <variant>

#include "catch.h"
#include "shim_test_util.h"

using namespace shimtest;

static_assert(!std::is_copy_constructible_v<flex::CompositeAddress>);
static_assert(std::is_nothrow_move_constructible_v<flex::CompositeAddress>);
static_assert(std::is_nothrow_move_assignable_v<flex::CompositeAddress>);
static_assert(std::is_same_v<decltype(flex::dmvaToSegmentId(0)), const uint64_t> ||
              std::is_same_v<decltype(flex::dmvaToSegmentId(0)), uint64_t>);

TEST_CASE("shim: allocator rounds to 128 bytes and gives distinct DMVAs") {
  auto ctx = make_context();
  auto alloc = ctx->getAllocator();
  auto a = alloc->allocate(1, tensor_directive());
  auto b = alloc->allocate(1024, tensor_directive());
  auto c = alloc->allocate(130, tensor_directive());
  CHECK(a.total_size() == 128);
  CHECK(b.total_size() == 1024);
  CHECK(c.total_size() == 256);
  CHECK(a.owns_memory());
  const uint64_t da = alloc->compositeAddressToDmva(a), db = alloc->compositeAddressToDmva(b),
                 dc = alloc->compositeAddressToDmva(c);
  CHECK(da != db);
  CHECK(db != dc);
  CHECK(da % 128 == 0);
  CHECK(flex::dmvaToSegmentId(da) < flex::PROG_SEGMENT);
  REQUIRE(a.chunks().size() == 1);
  CHECK(da == (uint64_t{a.chunks()[0].addr.region_id} << flex::SEGMENT_SIZE_BITS) +
                  a.chunks()[0].addr.offset);
  CHECK(alloc->bytesInUse() == 128 + 1024 + 256);

  auto prog = alloc->allocate(1024, flex::AllocationDirective(flex::PlacementPolicy::Bind, {0},
                                                              std::nullopt, flex::MemoryType::Program));
  CHECK(prog.total_size() == 1024);  // test_prepare_kernel: job_allocation_size() == 1024
  const uint64_t dp = alloc->compositeAddressToDmva(prog);
  CHECK(flex::dmvaToSegmentId(dp) == flex::PROG_SEGMENT);
  CHECK(dp >= flex::PROG_OFFSET_BASE);
  CHECK(dp < flex::PROG_OFFSET_BASE + flex::SEGMENT_SIZE);
}

TEST_CASE("shim: owning addresses free on destruction and views never free") {
  auto ctx = make_context();
  auto alloc = ctx->getAllocator();
  {
    auto a = alloc->allocate(4096, tensor_directive());
    CHECK(alloc->bytesInUse() == 4096);
    {
      flex::CompositeAddress view(a.chunks()[0]);
      CHECK_FALSE(view.owns_memory());
      CHECK(view.total_size() == 4096);
      auto shared = std::make_shared<flex::CompositeAddress>(
          flex::Chunk(flex::LogicalAddress(a.chunks()[0].addr.region_id, a.chunks()[0].addr.offset + 128),
                      256, a.chunks()[0].domain_id));
      CHECK(shared->total_size() == 256);
    }
    CHECK(alloc->bytesInUse() == 4096);
    // prepare_kernel: the owner is moved out of a SharedOwnerCtx; the moved-from value owns
    // nothing and still answers total_size().
    flex::CompositeAddress moved(std::move(a));
    CHECK(a.total_size() == 0);  // NOLINT(bugprone-use-after-move)
    CHECK_FALSE(a.owns_memory());
    CHECK(moved.owns_memory());
    std::vector<flex::CompositeAddress> v;
    v.reserve(1);
    v.emplace_back(std::move(moved));
    v.reserve(16);  // reallocation moves, never copies
    CHECK(alloc->bytesInUse() == 4096);
    std::variant<flex::CompositeAddress, uint64_t> var(std::move(v[0]));
    CHECK(std::get<flex::CompositeAddress>(var).total_size() == 4096);
    // Move assignment releases what the target owned.
    auto b = alloc->allocate(128, tensor_directive());
    CHECK(alloc->bytesInUse() == 4096 + 128);
    b = std::move(std::get<flex::CompositeAddress>(var));
    CHECK(alloc->bytesInUse() == 4096);
  }
  CHECK(alloc->bytesInUse() == 0);
  CHECK(alloc->liveAllocations() == 0);
}

TEST_CASE("shim: freed memory is reused and reads as zero when reallocated") {
  auto ctx = make_context();
  auto alloc = ctx->getAllocator();
  auto* s = ctx->getDefaultStream();
  uint64_t first;
  {
    auto a = alloc->allocate(512, tensor_directive());
    first = alloc->compositeAddressToDmva(a);
    std::vector<uint8_t> ones(512, 0xAB);
    dma(s, ones.data(), a, true, nullptr);
    s->synchronize();
  }
  auto b = alloc->allocate(512, tensor_directive());
  CHECK(alloc->compositeAddressToDmva(b) == first);
  auto bytes = device_bytes(s, b);
  CHECK(std::all_of(bytes.begin(), bytes.end(), [](uint8_t x) { return x == 0; }));
}

TEST_CASE("shim: out of memory calls the pressure callback once then throws") {
  auto ctx = make_context(uint64_t{8} << 30);
  auto alloc = ctx->getAllocator();
  int calls = 0;
  alloc->registerMemoryPressureCallback([&](std::unique_lock<std::mutex>& lk) {
    CHECK(lk.owns_lock());
    ++calls;
  });
  std::vector<flex::CompositeAddress> held;
  bool oom = false;
  for (int i = 0; i < 100 && !oom; ++i) {  // torch.empty of 2 GiB until OOM
    try {
      held.push_back(alloc->allocate(size_t{2} << 30, tensor_directive()));
    } catch (const std::exception& e) {
      oom = true;
      CHECK(has(e.what(), "out of memory"));
    }
  }
  CHECK(oom);
  CHECK(held.size() == 4);
  CHECK(calls == 1);
  CHECK(alloc->bytesInUse() == uint64_t{8} << 30);
  held.clear();
  CHECK(alloc->bytesInUse() == 0);
}

TEST_CASE("shim: a pressure callback that frees memory lets the allocation succeed") {
  auto ctx = make_context(uint64_t{4} << 30);
  auto alloc = ctx->getAllocator();
  std::vector<flex::CompositeAddress> garbage;
  garbage.push_back(alloc->allocate(size_t{2} << 30, tensor_directive()));
  garbage.push_back(alloc->allocate(size_t{2} << 30, tensor_directive()));
  int calls = 0;
  // Like torch-spyre's callback: unlock, collect garbage (frees re-enter the allocator), relock.
  alloc->registerMemoryPressureCallback([&](std::unique_lock<std::mutex>& lk) {
    ++calls;
    lk.unlock();
    garbage.clear();
    lk.lock();
  });
  auto a = alloc->allocate(size_t{3} << 30, tensor_directive());
  CHECK(calls == 1);
  CHECK(a.total_size() == size_t{3} << 30);
}

TEST_CASE("shim: allocations beyond a segment or the capacity report OOM") {
  auto ctx = make_context(uint64_t{64} << 30);
  auto alloc = ctx->getAllocator();
  CHECK(has(error_of([&] { alloc->allocate(size_t{17} << 30, tensor_directive()); }), "OOM"));
  CHECK(alloc->bytesInUse() == 0);
}

TEST_CASE("shim: threads hitting memory pressure together neither deadlock nor leak") {
  auto ctx = make_context(uint64_t{4} << 30);
  auto alloc = ctx->getAllocator();
  std::atomic<int> calls{0};
  alloc->registerMemoryPressureCallback([&](std::unique_lock<std::mutex>& lk) {
    ++calls;
    lk.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    lk.lock();
  });
  std::atomic<int> ok{0}, oom{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 6; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        try {
          auto a = alloc->allocate(size_t{1} << 30, tensor_directive());
          auto b = alloc->allocate(size_t{512} << 20, tensor_directive());
          ++ok;
        } catch (const std::runtime_error& e) {
          CHECK(has(e.what(), "out of memory"));
          ++oom;
        }
      }
    });
  for (auto& t : ts) t.join();
  CHECK(ok + oom == 300);
  CHECK(ok > 0);
  CHECK(alloc->bytesInUse() == 0);
  CHECK(alloc->liveAllocations() == 0);
}
