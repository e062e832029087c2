// Runtime shim: process runtime, device enumeration, senlib/deeptools helpers, HCM, constants
// and torch-spyre's call shapes (flex-api.md 4.1, 4.3, 4.6, 5).
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include <type_traits>
#include <variant>

#include "catch.h"
#include "shim_test_util.h"
#include "spyrecode-host-functions/fast_process_hcm.h"
#include "spyrecode-host-functions/processSpyreCodeArtifacts.h"
#include "spyrecode-host-functions/sendataconvert/sen_data_convert.h"
#include "spyrecode-host-functions/spyrecode.h"
#include "util/sendefs/sendefs.h"

using namespace shimtest;

namespace {
// For a scope: the `cleared` variables unset (by default the device-enumeration ones), then
// `vars` set; every variable it touched is restored after, as it was.
struct EnvGuard {
  explicit EnvGuard(std::initializer_list<std::pair<const char*, const char*>> vars,
                    std::initializer_list<const char*> cleared = {"FLEX_DEVICE", "AIU_WORLD_SIZE", "SPYRE_DEVICES",
                                                                  "VSPYRE_NUM_DEVICES"}) {
    for (const char* k : cleared) save(k);
    for (auto [k, v] : vars) save(k);
    for (const char* k : cleared) unsetenv(k);
    for (auto [k, v] : vars) setenv(k, v, 1);
  }
  ~EnvGuard() {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
      if (it->second) setenv(it->first, it->second->c_str(), 1);
      else unsetenv(it->first);
    }
  }
  void save(const char* k) {
    const char* old = std::getenv(k);
    saved.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
  }
  std::vector<std::pair<const char*, std::optional<std::string>>> saved;
};
std::string dl16_name(DataFormats f) { return EnumsConversion::dataFormatsToString(f); }
// The message f throws ("" when it does not throw).
template <class F>
std::string thrown(F f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("shim: address constants match torch-spyre's pinned values") {
  STATIC_REQUIRE(flex::PROG_OFFSET_BASE == 120259084288ull);
  STATIC_REQUIRE(flex::SEGMENT_SIZE == 0x400000000ull);
  STATIC_REQUIRE(flex::SEGMENT_SIZE_BITS == 34);
  STATIC_REQUIRE(flex::PROG_SEGMENT == 7);
  STATIC_REQUIRE(flex::dmvaToSegmentId(34359738368ull) == 2);
  STATIC_REQUIRE(flex::dmvaToSegmentId(flex::PROG_OFFSET_BASE + 5) == flex::PROG_SEGMENT);
  STATIC_REQUIRE(sizeof(decltype(flex::dmvaToSegmentId(0))) == 8);
  STATIC_REQUIRE(sizeof(flex::aiupti::AIUpti_ActivityCB::name) - 1 == 127);
}

TEST_CASE("shim: the process runtime is created lazily and initializeRuntime returns it") {
  EnvGuard env({});
  auto first = flex::getFlexRuntimeContext();  // the allocator path arrives before init
  REQUIRE(first);
  auto alloc = first->getAllocator();
  REQUIRE(alloc);
  CHECK(alloc == flex::getFlexRuntimeContext()->getAllocator());
  auto a = alloc->allocate(100, tensor_directive());
  CHECK(a.total_size() == 128);
  std::shared_ptr<flex::RuntimeContext> rt;
  auto s = flex::initializeRuntime(&rt, 0);
  std::ostringstream os;
  os << s;
  CHECK(s.ok());
  CHECK(rt == first);
  CHECK(rt->getDeviceId() == 0);
  std::shared_ptr<flex::RuntimeContext> none;
  auto bad = flex::initializeRuntime(&none, 99);
  CHECK_FALSE(bad.ok());
  CHECK(none == nullptr);
}

TEST_CASE("shim: device enumeration follows FLEX_DEVICE AIU_WORLD_SIZE and SPYRE_DEVICES") {
  { EnvGuard e({}); CHECK(flex::getNumDevices() == 2); }
  { EnvGuard e({{"VSPYRE_NUM_DEVICES", "4"}}); CHECK(flex::getNumDevices() == 4); }
  { EnvGuard e({{"AIU_WORLD_SIZE", "1"}}); CHECK(flex::getNumDevices() == 1); }
  { EnvGuard e({{"AIU_WORLD_SIZE", "3"}}); CHECK(flex::getNumDevices() == 2); }  // capped at total
  { EnvGuard e({{"SPYRE_DEVICES", "0"}}); CHECK(flex::getNumDevices() == 1); }
  { EnvGuard e({{"SPYRE_DEVICES", "0,1"}}); CHECK(flex::getNumDevices() == 2); }
  { EnvGuard e({{"SPYRE_DEVICES", "0,1,1"}}); CHECK(flex::getNumDevices() == 2); }  // deduplicated
  { EnvGuard e({{"SPYRE_DEVICES", "1,0"}}); CHECK(flex::getNumDevices() == 2); }
  { EnvGuard e({{"SPYRE_DEVICES", "0, 3"}}); CHECK(flex::getNumDevices() == 1); }  // out of range
  { EnvGuard e({{"AIU_WORLD_SIZE", "2"}, {"SPYRE_DEVICES", "0"}}); CHECK(flex::getNumDevices() == 1); }
  { EnvGuard e({{"AIU_WORLD_SIZE", "2"}, {"SPYRE_DEVICES", "0,1"}}); CHECK(flex::getNumDevices() == 2); }
  { EnvGuard e({{"FLEX_DEVICE", "VF"}}); CHECK(flex::getNumDevices() == 2); }
  { EnvGuard e({{"FLEX_DEVICE", "MOCK"}, {"AIU_WORLD_SIZE", "5"}}); CHECK(flex::getNumDevices() == 5); }
  // A bad environment: no device is visible (torch-spyre counts devices in a noexcept function,
  // so getNumDevices must not throw), and initializeRuntime's status names the variable.
  auto refused = [](const std::string& var) {
    CHECK(flex::getNumDevices() == 0);
    std::shared_ptr<flex::RuntimeContext> rt;
    const auto st = flex::initializeRuntime(&rt, 0);
    CHECK_FALSE(st.ok());
    CHECK(rt == nullptr);
    CHECK(st.message.find(var) != std::string::npos);
  };
  { EnvGuard e({{"FLEX_DEVICE", "MOCK"}, {"AIU_WORLD_SIZE", "0"}}); refused("AIU_WORLD_SIZE"); }
  { EnvGuard e({{"FLEX_DEVICE", "GPU"}}); refused("FLEX_DEVICE 'GPU'"); }
  // A count that is not one ("abc" used the default, 0 gave 1 device).
  for (const char* bad : {"abc", "0", "-2", "3x", "99999999999999999999"}) {
    EnvGuard e({{"VSPYRE_NUM_DEVICES", bad}});
    refused("VSPYRE_NUM_DEVICES='" + std::string(bad) + "'");
  }
  // Not read where it is not used.
  { EnvGuard e({{"FLEX_DEVICE", "MOCK"}, {"AIU_WORLD_SIZE", "3"}, {"VSPYRE_NUM_DEVICES", "abc"}}); CHECK(flex::getNumDevices() == 3); }
}

TEST_CASE("shim: the device memory size and worker count from the environment are checked") {
  // The variable alone among the options' ones, and no card: the options alone.
  struct Env : EnvGuard {
    Env(const char* name, const char* v)
        : EnvGuard({{"VSPYRE_SHIM_CARD", "0"}, {name, v}},
                   {"FLEX_MOCK_DEVICE_MEMORY_SIZE", "VSPYRE_DEVICE_MEMORY_BYTES", "VSPYRE_SHIM_WORKERS"}) {}
  };
  auto cap = [](const char* name, const char* v) {
    Env e(name, v);
    return vspyre::shim::optionsFromEnvironment().capacity_bytes;
  };
  CHECK(cap("FLEX_MOCK_DEVICE_MEMORY_SIZE", "16G") == (uint64_t{16} << 30));
  CHECK(cap("VSPYRE_DEVICE_MEMORY_BYTES", "4096") == 4096);
  CHECK(cap("VSPYRE_DEVICE_MEMORY_BYTES", "64k") == 65536);
  // -5 wrapped to 18446744073709551611 bytes; "banana" was ignored.
  CHECK(cap("VSPYRE_DEVICE_MEMORY_BYTES", " 2M ") == (uint64_t{2} << 20));
  for (const char* bad : {"-5", "banana", "0", "16T", "16GB", "99999999999999999G"}) {
    Env e("FLEX_MOCK_DEVICE_MEMORY_SIZE", bad);
    CHECK(thrown([] { vspyre::shim::optionsFromEnvironment(); }).find("FLEX_MOCK_DEVICE_MEMORY_SIZE='" + std::string(bad) + "'") !=
          std::string::npos);
  }
  {
    Env e("VSPYRE_SHIM_WORKERS", "8");
    CHECK(vspyre::shim::optionsFromEnvironment().workers == 8);
  }
  for (const char* bad : {"0", "many", "65"}) {
    Env e("VSPYRE_SHIM_WORKERS", bad);
    CHECK(thrown([] { vspyre::shim::optionsFromEnvironment(); }).find("VSPYRE_SHIM_WORKERS") != std::string::npos);
  }
}

TEST_CASE("shim: DataFormats names and the stick-size table") {
  CHECK(dl16_name(DataFormats::SEN169_FP16) == "SEN169_FP16");
  CHECK(dl16_name(DataFormats::BFLOAT16) == "BFLOAT16");
  CHECK(dl16_name(DataFormats::SEN18F_FP24) == "SEN18F_FP24");
  CHECK(dataFormatToStickSize[DataFormats::SEN169_FP16] == 64);  // get_elem_in_stick(float16)
  CHECK(dataFormatToStickSize[DataFormats::IEEE_FP32] == 32);
  CHECK(dataFormatToStickSize[DataFormats::SENUINT32] == 32);
  CHECK(dataFormatToStickSize[DataFormats::SEN143_FP8] == 128);
  CHECK(dataFormatToStickSize[DataFormats::SENINT4] == 256);
  CHECK(dataFormatToStickSize[DataFormats::SENUINT2] == 512);
  CHECK(dataFormatToStickSize[DataFormats::INVALID] == 0);
  CHECK(dataFormatToStickSize[DataFormats::IEEE_INT64] == 0);  // missing key reads 0
  for (auto f : fmt::k_all_formats)
    CHECK(dl16_name(static_cast<DataFormats>(static_cast<int>(f))) == std::string(fmt::name(f)));
}

TEST_CASE("shim: FloatToFp16Bin matches the published encode_constant values") {
  CHECK(deeptools::FloatToFp16Bin(0.00390625f) == 11776);  // 2^-8
  CHECK(deeptools::FloatToFp16Bin(1e-5f) == 7327);
  CHECK(deeptools::FloatToFp16Bin(0.000347222f) == 9944);
  CHECK(deeptools::FloatToFp16Bin(0.0f) == 0);
  CHECK(deeptools::FloatToFp16Bin(1.0f) == 0x3E00);
  CHECK(deeptools::Fp16BinToFloat(0x3E00) == 1.0f);
  CHECK(deeptools::BinaryConvert<uint32_t>(1.0f) == 0x3F800000u);
}

namespace {
std::string dt_error_fn() { DT_ERROR("Invalid ElementArrangement"); }
}  // namespace

TEST_CASE("shim: DT_ERROR throws a runtime_error") {
  CHECK(has(error_of([] { dt_error_fn(); }), "Invalid ElementArrangement"));
  CHECK_THROWS_AS(dt_error_fn(), std::runtime_error);
}

TEST_CASE("shim: Hcm import and program correction follow the torch-spyre test contracts") {
  auto hcm = std::make_unique<Hcm>();
  CHECK_NOTHROW(hcm->importJsonStr(R"({"vdci": {}, "senConstants": []})"));
  CHECK(hcm->vdci.inputSym_.size() == 0);
  CHECK(has(error_of([&] { hcm->importJsonStr(R"({"vdci": "invalid", "senConstants": []})"); }), "vdci field"));
  CHECK_THROWS(hcm->importJsonStr("invalid_hcm_string"));
  CHECK_THROWS(hcm->importJsonStr(R"("invalid_hcm_string")"));
  hcm->importJsonStr(R"({"vdci": {}, "senConstants": []})");
  std::vector<uint8_t> out(64, 0xFF);
  CHECK(has(error_of([&] { deeptools::processComputeOnHostCommand(*hcm, out.data(), nullptr); }), "Expect one DCI"));

  hcm->importJsonStr(R"({"vdci": {"inputSym_": ["a", {"name": "b", "offset": 24}]}, "senConstants": [1]})");
  REQUIRE(hcm->vdci.inputSym_.size() == 2);
  const std::vector<int64_t> addrs{0x1000, int64_t(flex::PROG_OFFSET_BASE)};
  deeptools::processComputeOnHostCommand(*hcm, out.data(), &addrs);  // (c)
  int64_t v0, v1;
  std::memcpy(&v0, out.data(), 8);
  std::memcpy(&v1, out.data() + 24, 8);
  CHECK(v0 == 0x1000);
  CHECK(v1 == int64_t(flex::PROG_OFFSET_BASE));
  const void* input = addrs.data();
  deeptools::processComputeOnHostCommand(*hcm, out.data(), input);  // (a)
  deeptools::processComputeOnHostCommand(*hcm, out.data(), nullptr);  // (b)
  std::memcpy(&v0, out.data(), 8);
  CHECK(v0 == 0);
  deeptools::FastHcmPatchPlan plan;
  CHECK(deeptools::buildFastHcmPatchPlan(plan, *hcm));
  CHECK(plan.valid);
  CHECK(plan.output_size == 32);
  CHECK(plan.patches.size() == 2);
  CHECK(deeptools::processComputeOnHostCommandFast(plan, *hcm, out.data(), addrs.data(), addrs.size()));
  std::memcpy(&v1, out.data() + 24, 8);
  CHECK(v1 == int64_t(flex::PROG_OFFSET_BASE));
  deeptools::FastHcmPatchPlan off;
  off.output_size = UINT32_MAX;
  CHECK_FALSE(deeptools::processComputeOnHostCommandFast(off, *hcm, out.data(), addrs.data(), addrs.size()));
}

TEST_CASE("shim: torch-spyre call shapes compile against the headers") {
  auto ctx = make_context();
  auto alloc = ctx->getAllocator();
  flex::AllocationDirective directive(flex::PlacementPolicy::Bind, {0}, std::nullopt, flex::MemoryType::Tensor);
  flex::CompositeAddress owned = alloc->allocate(256, directive);
  struct Dmva { uint64_t value; };
  std::variant<flex::CompositeAddress, Dmva> v(Dmva{flex::PROG_OFFSET_BASE});
  CHECK(std::holds_alternative<Dmva>(v));
  std::vector<const flex::CompositeAddress*> tensors{&owned};
  auto* cp = flex::createComputeParams(&owned, std::move(tensors), std::string("k#0"),
                                       flex::PROG_OFFSET_BASE - flex::PROG_OFFSET_BASE);
  CHECK(cp->kernel_name == "k#0");
  flex::destroyComputeParams(cp);
  data_conversion_info dci{};
  auto dci_ptr = std::make_shared<data_conversion_info>(dci);
  auto* p5 = flex::createDmaParams(nullptr, owned.total_size(), true, &owned, std::move(dci_ptr));
  flex::destroyDmaParams(p5);
  std::shared_ptr<data_conversion_info> none = nullptr;
  auto* p5n = flex::createDmaParams(nullptr, owned.total_size(), false, &owned, std::move(none));
  flex::destroyDmaParams(p5n);
  auto launch = [&](auto&& cb) {
    auto* hp = flex::createHostCallbackParams(std::forward<decltype(cb)>(cb), nullptr, false);
    ctx->getDefaultStream()->launchOperationHostCallback(hp);
    flex::destroyHostCallbackParams(hp);
  };
  int n = 0;
  launch([&n](void*) { ++n; });
  CHECK(n == 1);
  std::ostringstream os;
  os << owned;
  CHECK(has(os.str(), "owning"));
  const int count = static_cast<int>(flex::getNumDevices());
  CHECK(count >= 1);
  static_assert(std::is_same_v<decltype(flex::getFlexRuntimeContext()->getAllocator()), std::shared_ptr<flex::FlexAllocator>>);
  flex::RuntimeStream* hi = ctx->createStream(flex::RuntimeStreamPriority::HIGH);
  CHECK(hi->priority() == flex::RuntimeStreamPriority::HIGH);
}
