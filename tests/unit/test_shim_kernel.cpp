// The SpyreCode job on the virtual card (issue 5), replaying torch-spyre's call sequence
// (prepare_kernel.cpp, job_plan.cpp) against libflex with the card backend: dxp_standalone,
// JobPreparationPlan (Allocate, InitTransfer), then per launch the JobExecPlan (host-callback
// program correction, H2D of the blob, Compute with no tensor list), D2H of the result checked
// against a host reference; the card's clock against `vspyre run --no-data`; PCIe time of H2D
// and D2H; VSPYRE_CONFIG and VSPYRE_TRACE; process exit with matmuls still running.
#include "catch.h"
#include "shim_test_util.h"
#include "test_files.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>
#include <chrono>
#include <future>
#include <atomic>
#include <map>
#include <optional>

#include "sim/bundle/bundle.h"
#include "sim/exec/exec.h"
#include "sim/exec/reference.h"
#include "sim/ops/ops.h"
#include "sim/plan/lower.h"
#include "spyrecode-host-functions/fast_process_hcm.h"
#include "spyrecode-host-functions/processSpyreCodeArtifacts.h"
#include "spyrecode-host-functions/spyrecode.h"

namespace fs = std::filesystem;
using namespace shimtest;
using vspyre::testing::slurp;
using vspyre::testing::TempDir;
namespace exec = vspyre::exec;

namespace {

const fs::path k_fixtures = fs::path(VSPYRE_SOURCE_DIR) / "tests" / "fixtures" / "bundles";

flex::AllocationDirective program_directive() {
  return flex::AllocationDirective(flex::PlacementPolicy::Bind, {0}, std::nullopt, flex::MemoryType::Program);
}

uint64_t u(const nlohmann::json& v) { return std::stoull(v.get<std::string>()); }

// A fixture compiled by dxp_standalone into a temp dir.
struct Compiled {
  TempDir t;
  fs::path dir;
  explicit Compiled(const std::string& name) {
    dir = t.dir / name;
    fs::create_directories(dir);
    for (const auto& e : fs::directory_iterator(k_fixtures / name)) fs::copy_file(e.path(), dir / e.path().filename());
    const std::string cmd = std::string(VSPYRE_DXP_STANDALONE) + " -d " + dir.string();
    REQUIRE(std::system(cmd.c_str()) == 0);
  }
};

// torch-spyre's JobPlan, reduced to what the shim sees: prepare once, launch per call.
struct JobPlan {
  std::shared_ptr<flex::FlexAllocator> alloc;
  flex::CompositeAddress job_allocation;           // owning, program segment
  std::vector<std::string> inits;                  // InitTransfer file contents (kept alive)
  nlohmann::json exec_plan;
  std::vector<std::vector<uint8_t>> pinned;        // ComputeOnHost output buffers
  std::vector<std::unique_ptr<Hcm>> hcms;
  std::vector<deeptools::FastHcmPatchPlan> fast;

  JobPlan(flex::RuntimeContext& ctx, flex::RuntimeStream* s, const fs::path& spyrecode_dir) {
    const auto j = nlohmann::json::parse(slurp(spyrecode_dir / "spyrecode.json"));
    const auto& prep = j.at("JobPreparationPlan");
    alloc = ctx.getAllocator();
    job_allocation = ctx.getAllocator()->allocate(u(prep[0]["properties"]["size"]), program_directive());
    for (size_t i = 1; i < prep.size(); ++i) {
      const auto& p = prep[i]["properties"];
      inits.push_back(slurp(spyrecode_dir / p["init_bin_file"].get<std::string>()));
      const uint64_t off = u(p["dev_ptr"]) - flex::PROG_OFFSET_BASE, size = u(p["size"]);
      REQUIRE(inits.back().size() >= size);
      flex::CompositeAddress view(sub(off, size));
      auto* dp = flex::createDmaParams(inits.back().data(), size, true, &view);
      s->launchOperationH2D(dp);
      flex::destroyDmaParams(dp);
      s->synchronize();
    }
    exec_plan = j.at("JobExecPlan");
    for (const auto& step : exec_plan) {
      if (step["command"] != "ComputeOnHost") continue;
      pinned.emplace_back(u(step["properties"]["size"]));
      hcms.push_back(std::make_unique<Hcm>());
      hcms.back()->importJsonStr(step["properties"]["hcm"].dump());
      fast.emplace_back();
      deeptools::buildFastHcmPatchPlan(fast.back(), *hcms.back());
    }
  }

  flex::Chunk sub(uint64_t off, uint64_t size) const {
    const flex::Chunk& c = job_allocation.chunks()[0];
    return flex::Chunk(flex::LogicalAddress(c.addr.region_id, c.addr.offset + off), size, c.domain_id);
  }

  // launch_jobplan(plan, args): `bound` = BUNDLE_SYMBOLIC_ARGS=0 (tensor list on the Compute).
  void launch(flex::RuntimeStream* s, const std::vector<const flex::CompositeAddress*>& args, bool bound = false,
              bool skip_correction = false) {
    size_t host_step = 0;
    for (const auto& step : exec_plan) {
      const auto& p = step["properties"];
      if (step["command"] == "ComputeOnHost") {
        if (skip_correction) continue;
        std::vector<int64_t> addrs;
        for (const auto* a : args) addrs.push_back(static_cast<int64_t>(alloc->compositeAddressToDmva(*a)));
        const size_t k = host_step++;
        auto* hp = flex::createHostCallbackParams(
            [&, k, addrs](void*) {
              deeptools::processComputeOnHostCommandFast(fast[k], *hcms[k], pinned[k].data(), addrs.data(),
                                                         addrs.size());
            },
            nullptr, false);
        s->launchOperationHostCallback(hp);
        flex::destroyHostCallbackParams(hp);
      } else if (step["command"] == "DataTransfer") {
        if (skip_correction) continue;
        REQUIRE(p["dirn"] == "false");
        auto view = std::make_shared<flex::CompositeAddress>(sub(u(p["dev_ptr"]) - flex::PROG_OFFSET_BASE, u(p["size"])));
        auto* dp = flex::createDmaParams(pinned[host_step - 1].data(), u(p["size"]), true, view.get());
        dp->pipeline_barrier = true;
        dp->callback = [view](void*) {};
        s->launchOperationH2D(dp);
        flex::destroyDmaParams(dp);
      } else if (step["command"] == "ComputeOnDevice") {
        flex::CompositeAddress program(job_allocation.chunks()[0]);
        std::vector<const flex::CompositeAddress*> tensors;
        if (bound) tensors = args;
        auto* cp = flex::createComputeParams(&program, std::move(tensors), "test#0",
                                             u(p["job_bin_ptr"]) - flex::PROG_OFFSET_BASE);
        cp->pipeline_barrier = true;
        s->launchOperationCompute(cp);
        flex::destroyComputeParams(cp);
      }
    }
  }

};

std::shared_ptr<flex::RuntimeContext> card_context() {
  vspyre::shim::ContextOptions o;
  auto b = std::make_shared<vspyre::shim::CardBackend>();
  o.capacity_bytes = b->memoryCapacity();
  o.backend = b;
  return vspyre::shim::createRuntimeContext(o);
}

// The kernel's arguments as the executor maps them (shape, format, layout), argument order.
std::vector<exec::KernelTensor> describe_args(const fs::path& dir) {
  const auto lb = vspyre::bundle::load_bundle(dir);
  const auto b = vspyre::plan::default_bindings(lb);
  const auto resolved = vspyre::bundle::resolve(lb, b);
  auto kts = exec::kernel_tensors(lb, resolved, b);
  std::sort(kts.begin(), kts.end(), [](const auto& x, const auto& y) { return x.arg_index < y.arg_index; });
  return kts;
}

// One kernel argument on the device, with its host values (fp32, logical order).
struct Arg {
  exec::TensorInfo info;
  flex::CompositeAddress dev;
  std::vector<float> host;
};

// Uploads `values` as torch-spyre would: H2D with a DCI when the SDSC layout is the default
// stick layout, else the device image built on the host and copied raw.
void upload(flex::RuntimeStream* s, Arg& a) {
  const auto st = fmt::contiguous_strides(a.info.size);
  if (a.info.layout == fmt::default_stick_layout(a.info.size, a.info.format)) {
    auto t = plan_transfer(a.info.size, static_cast<DataFormats>(a.info.format));
    auto dci = make_dci(t, DataFormats::IEEE_FP32, static_cast<DataFormats>(a.info.format), true);
    dma(s, a.host.data(), a.dev, true, &dci);
  } else {
    std::vector<uint8_t> image(a.info.image_bytes);
    fmt::host_to_device({a.host.data(), fmt::DataFormat::IEEE_FP32, a.info.size, st, 0}, a.info.layout, image.data());
    dma(s, image.data(), a.dev, true, nullptr);
  }
}

// The device tensor back in fp32 (raw D2H of the image, converted on the host).
std::vector<float> download(flex::RuntimeStream* s, const Arg& a) {
  const auto image = device_bytes(s, a.dev);
  std::vector<float> out(static_cast<size_t>(a.info.numel()));
  const auto st = fmt::contiguous_strides(a.info.size);
  fmt::device_to_host(image.data(), a.info.layout, {out.data(), fmt::DataFormat::IEEE_FP32, a.info.size, st, 0});
  return out;
}

std::vector<Arg> make_args(flex::RuntimeContext& ctx, const fs::path& dir, uint32_t seed) {
  std::vector<Arg> args;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (const auto& kt : describe_args(dir)) {
    REQUIRE(kt.arg_index == args.size());
    Arg a{kt.info, ctx.getAllocator()->allocate(kt.info.image_bytes, tensor_directive()), {}};
    a.host.resize(static_cast<size_t>(kt.info.numel()));
    for (auto& v : a.host) v = dist(rng);
    args.push_back(std::move(a));
  }
  return args;
}

// |got - want| within DL16 rounding of the result (9 fraction bits) plus a small absolute slack.
size_t mismatches(const std::vector<float>& got, const std::vector<double>& want, std::string* first) {
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = std::abs(want[i]) * (2.0 / 512) + 1e-3;
    if (!(std::abs(got[i] - want[i]) <= tol)) {
      if (!bad && first) *first = "element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", want " + std::to_string(want[i]);
      ++bad;
    }
  }
  return bad;
}

// `vspyre run --no-data --json DIR` kernel time, or nullopt when the CLI is not available.
std::optional<double> cli_kernel_ps(const fs::path& dir, const TempDir& t) {
  const char* bin = std::getenv("VSPYRE_BIN");
  if (!bin || !*bin) return std::nullopt;
  const fs::path out = t.dir / "cli.json";
  const std::string cmd = std::string(bin) + " run " + dir.string() + " --no-data --json > " + out.string() + " 2>/dev/null";
  if (std::system(cmd.c_str()) != 0) return std::nullopt;
  return nlohmann::json::parse(slurp(out)).at("kernel_time_us").get<double>() * 1e6;
}

double clock_ps() {
  auto s = vspyre::shim::cardStats();
  REQUIRE(s.has_value());
  return s->clock_ps;
}

}  // namespace

TEST_CASE("shim: the JobPlan path runs a kernel on the card and its results match a host reference",
          "[shim][kernel]") {
  auto ctx = card_context();
  auto* s = ctx->getDefaultStream();
  for (const char* name : {"add_2048x1024_c32", "mul_2048x1024_c32", "neg_2048x1024_c32"}) {
    INFO(name);
    Compiled c(name);
    std::vector<Arg> args = make_args(*ctx, c.dir, 7);
    const bool unary = std::string(name).rfind("neg", 0) == 0;
    REQUIRE(args.size() == (unary ? 2u : 3u));
    for (size_t i = 0; i + 1 < args.size(); ++i) upload(s, args[i]);
    // The output starts as garbage, so an unwritten result cannot pass.
    std::vector<float> junk(args.back().host.size(), 12345.0f);
    args.back().host = junk;
    upload(s, args.back());
    s->synchronize();
    // The reference works on the inputs as the device holds them (after DL16 rounding).
    std::vector<std::vector<float>> in;
    for (size_t i = 0; i + 1 < args.size(); ++i) in.push_back(download(s, args[i]));

    JobPlan plan(*ctx, s, c.dir / "spyreCodeDir");
    std::vector<const flex::CompositeAddress*> ptrs;
    for (auto& a : args) ptrs.push_back(&a.dev);
    plan.launch(s, ptrs);
    s->synchronize();

    std::vector<double> want(in[0].size());
    for (size_t i = 0; i < want.size(); ++i) {
      if (unary) want[i] = -double(in[0][i]);
      else if (name[0] == 'a') want[i] = double(in[0][i]) + double(in[1][i]);
      else want[i] = double(in[0][i]) * double(in[1][i]);
    }
    std::string first;
    CHECK(mismatches(download(s, args.back()), want, &first) == 0);
    INFO(first);

    // Bound mode (BUNDLE_SYMBOLIC_ARGS=0): the tensor list binds the arguments; same result.
    upload(s, args.back());
    plan.launch(s, ptrs, /*bound=*/true);
    s->synchronize();
    CHECK(mismatches(download(s, args.back()), want, &first) == 0);

    const auto st = vspyre::shim::cardStats();
    REQUIRE(st.has_value());
    CHECK(st->last_kernel.kernel == name);
    CHECK(st->last_kernel.executions >= 1);
    CHECK(st->last_kernel.kernel_ps > 0);
  }
}

TEST_CASE("shim: a kernel binds the addresses of its launch, here neg with its arguments swapped", "[shim][kernel]") {
  // The correction blob carries the launch's addresses: neg(in, out) launched as neg(y, x)
  // writes -y over x and leaves y alone.
  auto ctx = card_context();
  auto* s = ctx->getDefaultStream();
  Compiled c("neg_2048x1024_c32");
  std::vector<Arg> args = make_args(*ctx, c.dir, 3);
  upload(s, args[0]);
  upload(s, args[1]);
  s->synchronize();
  const auto x = download(s, args[0]), y = download(s, args[1]);
  JobPlan plan(*ctx, s, c.dir / "spyreCodeDir");
  plan.launch(s, {&args[1].dev, &args[0].dev});  // out <- -y written over x
  s->synchronize();
  const auto x2 = download(s, args[0]);
  std::vector<double> want(y.size());
  for (size_t i = 0; i < y.size(); ++i) want[i] = -double(y[i]);
  CHECK(mismatches(x2, want, nullptr) == 0);
  CHECK(download(s, args[1]) == y);
}

TEST_CASE("shim: the card clock advances by about the CLI kernel time", "[shim][kernel]") {
  auto ctx = card_context();
  auto* s = ctx->getDefaultStream();
  for (const char* name : {"add_2048x1024_c32", "softmax_512x1024_lx_input", "mm_2048x512x2048_c32"}) {
    INFO(name);
    Compiled c(name);
    std::vector<Arg> args = make_args(*ctx, c.dir, 11);
    JobPlan plan(*ctx, s, c.dir / "spyreCodeDir");
    std::vector<const flex::CompositeAddress*> ptrs;
    for (auto& a : args) ptrs.push_back(&a.dev);
    // Correction and its H2D first, then the Compute alone.
    plan.launch(s, ptrs);
    s->synchronize();
    const double first = vspyre::shim::cardStats()->last_kernel.kernel_ps;
    const double before = clock_ps();
    const auto st0 = vspyre::shim::cardStats();
    plan.launch(s, ptrs, /*bound=*/true);
    s->synchronize();
    const auto st1 = vspyre::shim::cardStats();
    const double after = clock_ps();
    const double kernel = st1->last_kernel.kernel_ps;
    // The bound launch also ran a correction H2D (tiny) before the kernel.
    CHECK(after - before >= kernel);
    CHECK(after - before <= kernel + 10e6);
    CHECK(st1->kernels == st0->kernels + 1);
    if (auto cli = cli_kernel_ps(c.dir, c.t)) {
      WARN(name << ": shim kernel " << kernel / 1e6 << " us (first launch " << first / 1e6 << " us), CLI `vspyre run --no-data` " << *cli / 1e6 << " us");
      // Not equal: the CLI binds the arguments 1 GiB + n MiB apart, the shim at the addresses
      // the allocator gave (4 MiB apart for add), and the LPDDR5 model's bank/row mapping sees
      // the difference (add: 116-119 us here against 106 us; 108 us with the CLI's spacing).
      CHECK(kernel == Approx(*cli).epsilon(0.15));
    } else {
      WARN("CLI comparison skipped: VSPYRE_BIN is not set (ctest sets it)");
    }
  }
}

TEST_CASE("shim: H2D and D2H take PCIe time on the card clock", "[shim][kernel]") {
  auto ctx = card_context();
  auto* s = ctx->getDefaultStream();
  constexpr uint64_t kBytes = 64ull << 20;
  auto dev = ctx->getAllocator()->allocate(kBytes, tensor_directive());
  std::vector<uint8_t> host(kBytes, 0x5a);
  s->synchronize();
  const double t0 = clock_ps();
  dma(s, host.data(), dev, true, nullptr);
  s->synchronize();
  const double t1 = clock_ps();
  std::vector<uint8_t> back(kBytes);
  dma(s, back.data(), dev, false, nullptr);
  s->synchronize();
  const double t2 = clock_ps();
  CHECK(back == host);
  const double h2d_gbps = kBytes / ((t1 - t0) / 1e12) / 1e9, d2h_gbps = kBytes / ((t2 - t1) / 1e12) / 1e9;
  WARN("64 MiB H2D " << (t1 - t0) / 1e6 << " us = " << h2d_gbps << " GB/s; D2H " << (t2 - t1) / 1e6 << " us = " << d2h_gbps
                     << " GB/s (simulated)");
  // PCIe Gen5 x16: 63 GB/s raw, ~57 GB/s of payload after TLP overhead, minus the setup cost.
  CHECK(h2d_gbps > 40);
  CHECK(h2d_gbps < 63);
  CHECK(d2h_gbps == Approx(h2d_gbps).epsilon(0.01));

  // Two streams: transfers in opposite directions overlap; the same direction queues.
  auto* a = ctx->createStream(flex::RuntimeStreamPriority::NORMAL);
  auto* b = ctx->createStream(flex::RuntimeStreamPriority::NORMAL);
  auto dev2 = ctx->getAllocator()->allocate(kBytes, tensor_directive());
  const double u0 = clock_ps();
  dma(a, host.data(), dev, true, nullptr);
  dma(b, back.data(), dev2, false, nullptr);
  a->synchronize();
  b->synchronize();
  const double u1 = clock_ps();
  CHECK(u1 - u0 < 1.5 * (t1 - t0));
  const auto st = vspyre::shim::cardStats();
  CHECK(st->h2d_bytes >= 2 * kBytes);
  CHECK(st->d2h_bytes >= 2 * kBytes);
}

TEST_CASE("shim: kernel launches with bad arguments fail at synchronize, and reading past an input runs", "[shim][kernel]") {
  auto ctx = card_context();
  auto* s = ctx->getDefaultStream();
  Compiled c("add_2048x1024_c32");
  std::vector<Arg> args = make_args(*ctx, c.dir, 5);
  JobPlan plan(*ctx, s, c.dir / "spyreCodeDir");

  // An output allocation smaller than the kernel's tensor.
  auto small = ctx->getAllocator()->allocate(4096, tensor_directive());
  plan.launch(s, {&args[0].dev, &args[1].dev, &small});
  std::string e = error_of([&] { s->synchronize(); });
  CHECK(has(e, "Compute 'test#0'"));
  CHECK(has(e, "argument 2"));
  CHECK(has(e, "out of bounds"));

  // An argument freed before the launch (a stale view of it is passed).
  std::optional<flex::CompositeAddress> gone(ctx->getAllocator()->allocate(args[1].info.image_bytes, tensor_directive()));
  flex::CompositeAddress stale(gone->chunks()[0]);
  gone.reset();
  plan.launch(s, {&args[0].dev, &stale, &args[2].dev});
  e = error_of([&] { s->synchronize(); });
  CHECK(has(e, "argument 1"));
  CHECK(has(e, "not allocated"));

  // The stream still works afterwards.
  plan.launch(s, {&args[0].dev, &args[1].dev, &args[2].dev});
  s->synchronize();

  // An input allocation smaller than the kernel's tensor runs, unless VSPYRE_STRICT_BOUNDS=1:
  // torch-spyre's fp8 kernels at [1,2,8] read whole 128-element sticks of 8-wide fp16 rows, and
  // the card reads past the allocation and uses only the real lanes.
  unsetenv("VSPYRE_STRICT_BOUNDS");
  plan.launch(s, {&small, &args[1].dev, &args[2].dev});
  CHECK(error_of([&] { s->synchronize(); }).empty());
  setenv("VSPYRE_STRICT_BOUNDS", "1", 1);
  plan.launch(s, {&small, &args[1].dev, &args[2].dev});
  e = error_of([&] { s->synchronize(); });
  unsetenv("VSPYRE_STRICT_BOUNDS");
  CHECK(has(e, "argument 0"));
  CHECK(has(e, "out of bounds"));
}

// Whether this process has no card yet. A test of a variable the card reads when it is built
// (VSPYRE_CONFIG, VSPYRE_TRACE, VSPYRE_KERNEL_LOG) must build it itself: run alone, as ctest does.
bool fresh_card() {
  if (!vspyre::shim::cardStats()) return true;
  WARN("skipped: a card already runs in this process (run the test alone, as ctest does)");
  return false;
}

TEST_CASE("shim: the process runtime uses the card config from VSPYRE_CONFIG", "[shim][kernel]") {
  if (!fresh_card()) return;
  TempDir t;
  // A card with a x8 PCIe link: transfers take about twice as long.
  const std::string cfg = t.write("x8.yaml", "include: [" + (fs::path(VSPYRE_SOURCE_DIR) / "configs" / "spyre.yaml").string() +
                                                 "]\ncard:\n  host_link:\n    lanes: 8\n");
  setenv("VSPYRE_CONFIG", cfg.c_str(), 1);
  auto ctx = vspyre::shim::createRuntimeContext(vspyre::shim::optionsFromEnvironment());
  unsetenv("VSPYRE_CONFIG");
  auto* s = ctx->getDefaultStream();
  auto st = vspyre::shim::cardStats();
  REQUIRE(st.has_value());
  CHECK(st->config == cfg);
  constexpr uint64_t kBytes = 16ull << 20;
  auto dev = ctx->getAllocator()->allocate(kBytes, tensor_directive());
  std::vector<uint8_t> host(kBytes, 1);
  const double t0 = clock_ps();
  dma(s, host.data(), dev, true, nullptr);
  s->synchronize();
  const double gbps = kBytes / ((clock_ps() - t0) / 1e12) / 1e9;
  CHECK(gbps > 20);
  CHECK(gbps < 31.6);  // x8 Gen5 raw
}

TEST_CASE("shim: a bad VSPYRE_CONFIG gives one error naming the file", "[shim][kernel]") {
  if (!fresh_card()) return;
  setenv("VSPYRE_CONFIG", "/nonexistent/card.yaml", 1);
  const std::string e = error_of([] { vspyre::shim::createRuntimeContext(vspyre::shim::optionsFromEnvironment()); });
  unsetenv("VSPYRE_CONFIG");
  CHECK(has(e, "/nonexistent/card.yaml"));
  CHECK(has(e, "VSPYRE_CONFIG"));
  // It stays failed (one card per process), with the same message.
  CHECK(error_of([] { vspyre::shim::CardBackend b; }) == e);
}

// The process's card, built with the environment variable `env` set to `path` (read once, when the
// card is built), and the add fixture launched `launches` times on its default stream.
struct AddOnNewCard {
  AddOnNewCard(const char* env, const std::string& path, int launches) {
    setenv(env, path.c_str(), 1);
    ctx = card_context();
    unsetenv(env);
    s = ctx->getDefaultStream();
    args = make_args(*ctx, c.dir, 1);
    for (auto& a : args) upload(s, a);
    JobPlan plan(*ctx, s, c.dir / "spyreCodeDir");
    for (int i = 0; i < launches; ++i) plan.launch(s, {&args[0].dev, &args[1].dev, &args[2].dev});
    s->synchronize();
  }
  std::shared_ptr<flex::RuntimeContext> ctx;
  flex::RuntimeStream* s = nullptr;
  Compiled c{"add_2048x1024_c32"};
  std::vector<Arg> args;
};

TEST_CASE("shim: VSPYRE_TRACE writes a Perfetto trace with every transfer and kernel per core", "[shim][kernel]") {
  if (!fresh_card()) return;
  TempDir t;
  const std::string path = (t.dir / "trace.json").string();
  AddOnNewCard run("VSPYRE_TRACE", path, 1);
  (void)download(run.s, run.args[2]);
  REQUIRE(vspyre::shim::flushTrace());
  const auto j = nlohmann::json::parse(slurp(path));
  std::map<int, std::string> procs;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") procs[e["pid"].get<int>()] = e["args"]["name"];
  int h2d = 0, d2h = 0, kernels = 0;
  std::set<std::string> core_groups;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const std::string n = e["name"], g = procs[e["pid"].get<int>()];
    if (g == "host streams") {
      h2d += n.rfind("H2D", 0) == 0;
      d2h += n.rfind("D2H", 0) == 0;
      kernels += n == "kernel test#0";
    } else if (g.rfind("core_", 0) == 0) {
      core_groups.insert(g);
    }
  }
  // 3 tensor uploads + the program + the correction blob; one D2H; one kernel on 32 cores.
  CHECK(h2d == 5);
  CHECK(d2h == 1);
  CHECK(kernels == 1);
  CHECK(core_groups.size() == 32);
  CHECK(procs.size() > 33);  // and the PCIe link
}

TEST_CASE("shim: VSPYRE_KERNEL_LOG writes a line per kernel and the card's summary at exit", "[shim][kernel]") {
  if (!fresh_card()) return;
  TempDir t;
  const std::string path = (t.dir / "kernels.log").string();
  AddOnNewCard run("VSPYRE_KERNEL_LOG", path, 2);
  const auto st = vspyre::shim::cardStats();
  REQUIRE(st);
  REQUIRE(st->kernels == 2);
  // Each line as the kernel ends; the summary when the card stops (at exit, here by hand).
  const std::string during = slurp(path);
  char first[64];
  std::snprintf(first, sizeof first, ": %.3f us on 32 cores, bottleneck ", st->last_kernel.kernel_ps / 1e6);
  CHECK(has(during, "vspyre kernel 1 (stream "));
  CHECK(has(during, "vspyre kernel 2 (stream "));
  CHECK(has(during, (std::string(" test#0") + first).c_str()));
  CHECK(has(during, "device memory read "));
  CHECK(!has(during, "vspyre card:"));
  vspyre::shim::shutdownCard();
  const std::string all = slurp(path);
  char sum[96];
  std::snprintf(sum, sizeof sum, "vspyre card: 2 kernels, %.3f us of kernel time; ", st->kernel_ps / 1e6);
  CHECK(has(all, sum));
  CHECK(has(all, "H2D ("));
  CHECK(has(all, ("config " + st->config).c_str()));
}

TEST_CASE("shim: VSPYRE_KERNEL_LOG=1 writes the kernel lines and the summary to stderr", "[shim][kernel]") {
  if (!fresh_card()) return;
  TempDir t;
  const std::string err = (t.dir / "stderr.txt").string();
  // Catch this process's stderr in a file while the card runs and stops.
  std::fflush(stderr);
  const int saved = dup(2);
  const int fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(saved >= 0);
  REQUIRE(fd >= 0);
  dup2(fd, 2);
  close(fd);
  {
    AddOnNewCard run("VSPYRE_KERNEL_LOG", "1", 1);
    vspyre::shim::shutdownCard();
  }
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  const std::string got = slurp(err);
  CHECK(has(got, "vspyre kernel 1 (stream "));
  CHECK(has(got, " test#0: "));
  CHECK(has(got, "vspyre card: 1 kernel, "));
}

TEST_CASE("shim: a VSPYRE_KERNEL_LOG that cannot be written fails the card with its path", "[shim][kernel]") {
  if (!fresh_card()) return;
  setenv("VSPYRE_KERNEL_LOG", "/nonexistent/dir/kernels.log", 1);
  const std::string e = error_of([] { vspyre::shim::CardBackend b; });
  unsetenv("VSPYRE_KERNEL_LOG");
  CHECK(has(e, "VSPYRE_KERNEL_LOG: cannot write '/nonexistent/dir/kernels.log': No such file or directory"));
}

TEST_CASE("shim: host threads share the card: 8 threads x 4 streams x 200 transfers", "[shim][kernel]") {
  auto ctx = card_context();
  static constexpr int kThreads = 8, kStreams = 4, kOps = 200;
  constexpr uint64_t kBytes = 4096;
  const auto st0 = vspyre::shim::cardStats();
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      auto [mine, bufs] = streams_with_buffers(*ctx, kStreams, kBytes);
      std::vector<std::vector<uint8_t>> in(kStreams, std::vector<uint8_t>(kBytes)), out = in;
      for (int i = 0; i < kOps; ++i) {
        const int k = i % kStreams;
        std::fill(in[k].begin(), in[k].end(), static_cast<uint8_t>(t * 31 + i));
        dma(mine[k], in[k].data(), bufs[k], true, nullptr);   // snapshotted at launch
        dma(mine[k], out[k].data(), bufs[k], false, nullptr);
        if (i % kStreams == kStreams - 1)
          for (int j = 0; j < kStreams; ++j) {
            mine[j]->synchronize();
            if (out[j][0] != static_cast<uint8_t>(t * 31 + i - (kStreams - 1 - j)) || out[j] != std::vector<uint8_t>(kBytes, out[j][0]))
              ++failures;
          }
      }
    });
  for (auto& th : ts) th.join();
  CHECK(failures == 0);
  const auto st1 = vspyre::shim::cardStats();
  const uint64_t n = uint64_t{kThreads} * kStreams * (kOps / kStreams);
  CHECK(st1->h2d_transfers - st0->h2d_transfers == n);
  CHECK(st1->d2h_transfers - st0->d2h_transfers == n);
  CHECK(st1->h2d_bytes - st0->h2d_bytes == n * kBytes);
  // Every transfer pays at least the PCIe setup; 32 streams overlap, one link per direction.
  CHECK(st1->clock_ps - st0->clock_ps >= double(n) / (kThreads * kStreams) * 2 * 2e6);
}

TEST_CASE("shim: shutting the card down with work queued fails that work cleanly", "[shim][kernel]") {
  auto ctx = card_context();
  std::vector<flex::RuntimeStream*> streams;
  std::vector<flex::CompositeAddress> bufs;
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::vector<uint8_t> host(1 << 16, 7), first(1 << 16);
  for (int k = 0; k < 8; ++k) {
    streams.push_back(ctx->createStream(flex::RuntimeStreamPriority::NORMAL));
    bufs.push_back(ctx->getAllocator()->allocate(1 << 16, tensor_directive()));
    // Each stream starts with a D2H whose completion callback holds the stream until released,
    // so everything launched after it is still queued when the card shuts down.
    auto* p = flex::createDmaParams(first.data(), 128, false, &bufs[k]);
    p->callback = [gate](void*) { gate.wait(); };
    streams[k]->launchOperationD2H(p);
    flex::destroyDmaParams(p);
  }
  for (int i = 0; i < 50; ++i)
    for (int k = 0; k < 8; ++k) dma(streams[k], host.data(), bufs[k], true, nullptr);
  vspyre::shim::shutdownCard();
  release.set_value();
  for (auto* s : streams) CHECK(has(error_of([&] { s->synchronize(); }), "shut down"));
  // Data still moves (the sparse memory is the card's data store), time no longer does.
  std::vector<uint8_t> back(1 << 16);
  dma(streams[0], back.data(), bufs[0], false, nullptr);
  CHECK(has(error_of([&] { streams[0]->synchronize(); }), "shut down"));
  CHECK(back == host);
  vspyre::shim::shutdownCard();  // idempotent
}

TEST_CASE("shim: without the card (VSPYRE_SHIM_CARD=0) kernels compute their data and take no time", "[shim][kernel]") {
  auto ctx = make_context();  // SparseBackend
  auto* s = ctx->getDefaultStream();
  const bool had_card = vspyre::shim::cardStats().has_value();
  Compiled c("add_2048x1024_c32");
  std::vector<Arg> args = make_args(*ctx, c.dir, 9);
  for (auto& a : args) upload(s, a);
  s->synchronize();
  const auto x = download(s, args[0]), y = download(s, args[1]);
  JobPlan plan(*ctx, s, c.dir / "spyreCodeDir");
  plan.launch(s, {&args[0].dev, &args[1].dev, &args[2].dev});
  s->synchronize();
  std::vector<double> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = double(x[i]) + double(y[i]);
  CHECK(mismatches(download(s, args[2]), want, nullptr) == 0);
  CHECK(vspyre::shim::cardStats().has_value() == had_card);  // no card was started
}

TEST_CASE("shim: a kernel with an HBM pool runs with the pool in its program allocation", "[shim][kernel]") {
  // relu(neg(x)) with the intermediate demoted through a 2 MiB sdscbundle.device_mem_allocate pool.
  auto ctx = card_context();
  auto* s = ctx->getDefaultStream();
  Compiled c("relu_neg_demote");
  const auto j = nlohmann::json::parse(slurp(c.dir / "spyreCodeDir" / "spyrecode.json"));
  CHECK(u(j["JobPreparationPlan"][0]["properties"]["size"]) >= (2u << 20));  // the pool is in it
  std::vector<Arg> args = make_args(*ctx, c.dir, 13);
  REQUIRE(args.size() == 2);
  upload(s, args[0]);
  s->synchronize();
  const auto x = download(s, args[0]);
  JobPlan plan(*ctx, s, c.dir / "spyreCodeDir");
  plan.launch(s, {&args[0].dev, &args[1].dev});
  s->synchronize();
  std::vector<double> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = std::max(-double(x[i]), 0.0);
  std::string first;
  CHECK(mismatches(download(s, args[1]), want, &first) == 0);
  INFO(first);
}

TEST_CASE("shim: the real compiler's spyrecli kernels run through dxp_standalone and the shim", "[shim][kernel]") {
  // Real torch-spyre + DeepTools frontend output (bundle.mlir + SDSCs from the shared data),
  // compiled by our dxp_standalone, launched with torch-spyre's JobPlan sequence; each output
  // is compared with sim/exec's double-precision logical reference evaluated on the same inputs.
  const fs::path data = fs::path(VSPYRE_SHARED_DIR) / "spyre" / "data";
  if (!fs::is_directory(data)) {
    WARN("skipped: spyre data folder absent: " << data.string());
    return;
  }
  auto ctx = card_context();
  auto* s = ctx->getDefaultStream();
  const std::pair<const char*, int> kernels[] = {{"add_3d", 1}, {"mm", 1}, {"bmm", 1}, {"mean_keepdim", 1}, {"softmax", 6}};
  for (const auto& [k, n] : kernels) {
    INFO(k);
    TempDir t;
    const fs::path dir = t.dir / k;
    fs::create_directories(dir);
    fs::copy_file(data / (std::string("spyrecli_") + k + "_bundle.mlir"), dir / "bundle.mlir");
    for (int i = 0; i < n; ++i)
      fs::copy_file(data / ("spyrecli_" + std::string(k) + "_sdsc_" + std::to_string(i) + ".json"),
                    dir / ("sdsc_" + std::to_string(i) + ".json"));
    REQUIRE(std::system((std::string(VSPYRE_DXP_STANDALONE) + " -d " + dir.string()).c_str()) == 0);

    // Inputs on the device, and the same device images in a local memory for the reference.
    std::vector<Arg> args = make_args(*ctx, dir, 17);
    const auto lb = vspyre::bundle::load_bundle(dir);
    const auto b = vspyre::plan::default_bindings(lb);
    const auto resolved = vspyre::bundle::resolve(lb, b);
    auto kts = exec::kernel_tensors(lb, resolved, b);
    std::sort(kts.begin(), kts.end(), [](const auto& x, const auto& y) { return x.arg_index < y.arg_index; });
    exec::SparseMemory mem;
    for (size_t i = 0; i < args.size(); ++i) {
      if (!kts[i].read_first) continue;
      upload(s, args[i]);
      exec::write_tensor(mem, kts[i].info, args[i].host);
    }
    s->synchronize();
    const exec::RefResult ref = exec::reference(resolved, kts, mem);

    JobPlan plan(*ctx, s, dir / "spyreCodeDir");
    std::vector<const flex::CompositeAddress*> ptrs;
    for (auto& a : args) ptrs.push_back(&a.dev);
    plan.launch(s, ptrs);
    s->synchronize();
    int checked = 0;
    for (const auto& [idx, rt] : ref.outputs) {
      const auto got = download(s, args[idx]);
      const exec::Comparison cmp = exec::compare(got, rt);
      INFO("argument " << idx << ": max_rel " << cmp.max_rel << ", tolerance " << cmp.tolerance);
      CHECK(cmp.compared > 0);
      CHECK(cmp.pass);
      ++checked;
    }
    CHECK(checked >= 1);
  }
}

// Process exit with a matmul still running. torch-spyre queues a kernel and Python exits without
// reading the result back (cap.py's `y = f(a, b)`); the kernel's numerics run OpenBLAS sgemm on
// a stream worker. If that worker is still in the GEMM when exit() reaches libopenblas's
// destructor, the destructor's pool shutdown races it (OpenBLAS 0.3.21: the busy pool thread
// clears the exit request when its share of the GEMM ends, and the destructor joins it forever;
// or it frees buffers still in use and the process crashes). The shim's exit handler stops the
// stream workers first. The helpers below are the child processes of the test after them: each
// calls exit(42) with matmuls running on a stream worker.
namespace {

// Writes of kMarkBytes run fp32 matmuls through vspyre::ops (OpenBLAS) for about a second,
// on the stream worker executing the H2D; started() returns once the first one has begun.
class MatmulOnWriteBackend : public vspyre::shim::SparseBackend {
 public:
  static constexpr size_t kMarkBytes = 4096 + 128;
  void write(uint64_t dmva, const void* src, size_t n) override {
    if (n == kMarkBytes) {
      constexpr int64_t kN = 2048;  // one 2048^3 sgemm: ~0.09 s on this 2-core host
      std::vector<float> a(kN * kN, 1.0f), b(kN * kN, 0.5f), c(kN * kN);
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 20 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1); ++i) {
        if (i == 0) {
          std::lock_guard<std::mutex> lk(m_);
          started_ = true;
          cv_.notify_all();
        }
        vspyre::ops::matmul(vspyre::ops::view(a.data(), fmt::DataFormat::IEEE_FP32, {kN, kN}),
                            vspyre::ops::view(b.data(), fmt::DataFormat::IEEE_FP32, {kN, kN}),
                            vspyre::ops::view(c.data(), fmt::DataFormat::IEEE_FP32, {kN, kN}));
      }
    }
    SparseBackend::write(dmva, src, n);
  }
  void started() {
    std::unique_lock<std::mutex> lk(m_);
    cv_.wait(lk, [&] { return started_; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool started_ = false;
};

// Runs this binary's test `name` in a child process; its wait status, or nullopt when it was
// still running after `limit` (then it is killed).
std::optional<int> child_status(const std::string& name, std::chrono::seconds limit, double* secs) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  REQUIRE(n > 0);
  self[n] = 0;
  std::string arg = name;
  char* argv[] = {self, arg.data(), nullptr};
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, self, nullptr, nullptr, argv, environ) == 0);
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  pid_t r = 0;
  while ((r = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() - start < limit)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  *secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (r != 0) return status;
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return std::nullopt;
}

}  // namespace

TEST_CASE("shim: exit helper 1 (run by the exit test): exit() during a matmul on a stream worker", "[.][shim][exit]") {
  auto backend = std::make_shared<MatmulOnWriteBackend>();
  vspyre::shim::ContextOptions o;
  o.backend = backend;
  auto ctx = vspyre::shim::createRuntimeContext(o);
  auto* s = ctx->getDefaultStream();
  auto buf = ctx->getAllocator()->allocate(MatmulOnWriteBackend::kMarkBytes, tensor_directive());
  std::vector<uint8_t> host(MatmulOnWriteBackend::kMarkBytes, 1);
  dma(s, host.data(), buf, true, nullptr);  // the matmuls
  dma(s, host.data(), buf, true, nullptr);  // and more work queued behind them
  backend->started();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::fflush(nullptr);
  std::exit(42);  // the parent checks this status: the helper ran and every exit handler returned
}

TEST_CASE("shim: exit helper 2 (run by the exit test): exit() with mm kernels queued and running", "[.][shim][exit]") {
  // torch-spyre's sequence on the process runtime (the card backend), no synchronize at the end.
  auto ctx = flex::getFlexRuntimeContext();
  auto* s = ctx->getDefaultStream();
  std::optional<Compiled> c;
  c.emplace("mm_4096x2048x1024_c32");
  std::vector<Arg> args = make_args(*ctx, c->dir, 21);
  for (size_t i = 0; i + 1 < args.size(); ++i) upload(s, args[i]);
  JobPlan plan(*ctx, s, c->dir / "spyreCodeDir");
  c.reset();  // exit() below unwinds nothing: remove the temp dir now (the plan has read it)
  std::vector<const flex::CompositeAddress*> ptrs;
  for (auto& a : args) ptrs.push_back(&a.dev);
  for (int i = 0; i < 3; ++i) plan.launch(s, ptrs);
  // Once the first kernel's card time is done its numerics are under way.
  while (vspyre::shim::cardStats()->kernels < 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  std::fflush(nullptr);
  std::exit(42);
}

TEST_CASE("shim: a process that exits while matmuls run on its streams exits promptly", "[shim][kernel]") {
  for (const char* helper : {"shim: exit helper 1 (run by the exit test): exit() during a matmul on a stream worker",
                             "shim: exit helper 2 (run by the exit test): exit() with mm kernels queued and running"}) {
    INFO(helper);
    double secs = 0;
    // The hang this guards against lasts forever (a pool thread joined at exit); the limit only
    // has to outlast a slow child. Under TSan, beside the 8-thread stream stress test on a
    // 2-CPU machine, helper 2 took over 15 s (CI run of 2026-12-04; alone: about 4 s).
    const std::optional<int> status = child_status(helper, std::chrono::seconds(60), &secs);
    INFO("child: " << secs << " s");
    REQUIRE(status.has_value());  // else it hung at exit
    INFO("wait status " << *status);
    CHECK(WIFEXITED(*status));
    CHECK(WEXITSTATUS(*status) == 42);
  }
}

TEST_CASE("shim: a forked child of a process with a card and streams exits promptly", "[shim][kernel]") {
  // The child has none of the parent's threads: the shim's exit handler must leave the
  // parent's stream workers and card thread alone there (waiting for those workers to stop
  // would last until its time limit, 60 s).
  auto ctx = card_context();
  auto* s = ctx->getDefaultStream();
  auto buf = ctx->getAllocator()->allocate(1 << 16, tensor_directive());
  std::vector<uint8_t> host(1 << 16, 3);
  dma(s, host.data(), buf, true, nullptr);
  s->synchronize();
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) std::exit(43);
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  pid_t r = 0;
  while ((r = waitpid(pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (r == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  REQUIRE(r == pid);  // else it hung at exit
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 43);
  // The parent's runtime still works.
  std::vector<uint8_t> back(1 << 16);
  dma(s, back.data(), buf, false, nullptr);
  s->synchronize();
  CHECK(back == host);
}
