// 2-D average pooling as the real torch-spyre compiler writes it (avgpoolfwd with its windows in
// N_.paddingSizes_; tests/fixtures/captured/README.md, "2-D average pooling"): the loader's
// windows and checks, the executor's outputs against an average computed here from the inputs
// as memory holds them (one core, and the output rows split over four), and the plan's reads.
#include "catch.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bundle_test_util.h"
#include "models/card.h"
#include "models/plan_runner.h"
#include "sim/bundle/bundle.h"
#include "sim/engine/simulation.h"
#include "sim/exec/exec.h"
#include "sim/exec/reference.h"
#include "sim/plan/lower.h"
#include "test_files.h"

namespace fs = std::filesystem;
using namespace vspyre;
using Json = nlohmann::ordered_json;

namespace {

using bundle_test::k_captured;
using bundle_test::slurp;

// Runs `dir` on random inputs and returns the largest error of its output against the average
// of each k x k window of its input (host order [.., H, W, C, 1, 1]), relative to one DL16 unit
// of the result's magnitude (2^-9: within 1 means within one rounding).
double pool_error_in_ulps(const fs::path& dir, int64_t k) {
  const auto lb = bundle::load_bundle(dir);
  const auto b = plan::default_bindings(lb);
  const auto plan = bundle::resolve(lb, b);
  const auto kts = exec::kernel_tensors(lb, plan, b);
  REQUIRE(kts.size() == 2);
  const auto& in = kts[0].read_first ? kts[0] : kts[1];
  const auto& out = kts[0].read_first ? kts[1] : kts[0];
  exec::SparseMemory mem;
  exec::write_random_input(mem, in, 9);
  const std::vector<float> x = exec::read_tensor(mem, in.info);
  exec::run(lb, plan, mem);
  const std::vector<float> y = exec::read_tensor(mem, out.info);
  // The three innermost real dims: H, W, C (the window dims ki, kj are size 1 at the end).
  const auto& is = in.info.size;
  const auto& os = out.info.size;
  const size_t r = is.size();
  REQUIRE(r >= 5);
  const int64_t H = is[r - 5], W = is[r - 4], C = is[r - 3];
  const int64_t OH = os[r - 5], OW = os[r - 4];
  REQUIRE(OH * k == H);
  REQUIRE(OW * k == W);
  int64_t batch = 1;
  for (size_t i = 0; i + 5 < r; ++i) batch *= is[i];
  double worst = 0;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t c = 0; c < C; ++c) {
          double acc = 0;
          for (int64_t dy = 0; dy < k; ++dy)
            for (int64_t dx = 0; dx < k; ++dx) acc += x[size_t(((n * H + oh * k + dy) * W + ow * k + dx) * C + c)];
          const double want = acc / double(k * k);
          const double got = y[size_t(((n * OH + oh) * OW + ow) * C + c)];
          worst = std::max(worst, std::fabs(got - want) / (std::max(std::fabs(want), 1.0 / 64) * std::ldexp(1.0, -9)));
        }
  return worst;
}

}  // namespace

TEST_CASE("pool: the loader reads avgpoolfwd's windows and the input's windowed dims", "[pool]") {
  const auto lb = bundle::load_bundle(k_captured / "avgpool_k2s2_2x3x8x8_c4");
  const bundle::Sdsc& s = lb.sdsc("sdsc_0.json");
  REQUIRE(s.windows.size() == 2);
  const bundle::Window* i = s.window_of("i");
  REQUIRE(i);
  CHECK(i->window_dim == "ki");
  CHECK(i->total == 8);
  CHECK(i->stride == 2);
  CHECK(i->span(1, 2) == 2);  // one output row reads two input rows
  CHECK(s.allocations.at(0).windowed == std::set<std::string>{"i", "j"});
  CHECK(s.allocations.at(1).windowed.empty());
  CHECK(s.slices_of("i") == 4);  // the compiler splits the output rows over the four cores
  // The input's footprint is the window's, not N_'s: 2 x 8 x 8 sticks.
  CHECK(s.allocations.at(0).tensor_bytes == 2 * 8 * 8 * 128);
}

TEST_CASE("pool: a malformed window is refused naming the file, the JSON path and the rule", "[pool]") {
  const std::string text = slurp(k_captured / "avgpool_k2s2_2x3x8x8_c1" / "sdsc_0.json");
  auto inner = [](Json& j) -> Json& { return j.begin().value()["dscs_"][0].begin().value(); };
  const std::vector<bundle_test::Refusal> cases = {
      {"window dim not in N_", [&](Json& j) { inner(j)["N_"]["paddingSizes_"]["i"]["windowDim_"] = "kz"; },
       "N_/paddingSizes_/i/windowDim_", "window dim 'kz' is not in N_"},
      {"stride 0", [&](Json& j) { inner(j)["N_"]["paddingSizes_"]["j"]["stride_"] = 0; },
       "N_/paddingSizes_/j/stride_", "outside [1,"},
      {"input too short", [&](Json& j) { inner(j)["N_"]["paddingSizes_"]["i"]["totalSize_"] = 6; },
       "N_/paddingSizes_/i", "reach 8 positions, past totalSize_ 6"},
      {"padding_ on a dim with no window",
       [&](Json& j) { inner(j)["scheduleTree_"][0]["padding_"]["out"] = "padded_fullspan_wunneeded"; },
       "scheduleTree_/0/padding_/out", "which no N_.paddingSizes_ window covers"},
  };
  bundle_test::check_refusals(text, "sdsc_0.json", cases);
}

TEST_CASE("pool: avgpoolfwd averages each window, on one core and with the rows split over four", "[pool]") {
  CHECK(pool_error_in_ulps(k_captured / "avgpool_k2s2_2x3x8x8_c1", 2) <= 1.0);
  CHECK(pool_error_in_ulps(k_captured / "avgpool_k2s2_2x3x8x8_c4", 2) <= 1.0);
  CHECK(pool_error_in_ulps(k_captured / "avgpool_k4s4_1x3x24x24_c1", 4) <= 1.0);
}

TEST_CASE("pool: the plan reads the whole input the windows cover, once", "[pool]") {
  SimOptions o;
  o.config_file = std::string(VSPYRE_SOURCE_DIR) + "/configs/spyre.yaml";
  Simulation sim(resolve_config(o));
  Card& card = sim.top_as<Card>();
  const auto lb = bundle::load_bundle(k_captured / "avgpool_k2s2_2x3x8x8_c4");
  const auto res = bundle::resolve(lb, plan::default_bindings(lb));
  const plan::Plan p = plan::lower(lb, res, plan_card_params(card));
  uint64_t in = 0, out = 0;
  for (const auto& st : p.stages())
    for (const auto& c : st.cores())
      for (const auto& op : c.ops()) {
        if (op.kind() == plan::Op::DMA_IN) in += op.bytes();
        if (op.kind() == plan::Op::DMA_OUT) out += op.bytes();
      }
  CHECK(in == 2 * 8 * 8 * 128);   // each core its two input rows: the 8 x 8 input of both images
  CHECK(out == 2 * 4 * 4 * 128);  // the 4 x 4 output
  const PlanResult r = run_plan(card, p);
  CHECK(r.kernel_ps > 0);
}

TEST_CASE("topk: values and indices over a dim the compiler renames, against a stable sort", "[pool]") {
  // torch.topk(x [64,256], 4, dim=0): the input scans `out` (64), the output holds k along `mb`.
  for (const char* name : {"topk_64x256_k4_dim0_c1", "topkindex_64x256_k4_dim0_c1"}) {
    INFO(name);
    const bool indices = std::string(name).rfind("topkindex", 0) == 0;
    const auto lb = bundle::load_bundle(k_captured / name);
    const auto b = plan::default_bindings(lb);
    const auto plan = bundle::resolve(lb, b);
    const auto kts = exec::kernel_tensors(lb, plan, b);
    REQUIRE(kts.size() == 2);
    exec::SparseMemory mem;
    // Values with ties (multiples of 1/8 in [-4, 4)): a tie goes to the lower index.
    std::vector<float> v(size_t(kts[0].info.numel()));
    const auto r = exec::random_values(11, 0, v.size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::floor(r[i] * 32.0f) / 8.0f;
    exec::write_tensor(mem, kts[0].info, v);
    const std::vector<float> x = exec::read_tensor(mem, kts[0].info);  // host [1, x=256, out=64]
    exec::run(lb, plan, mem);
    const std::vector<float> y = exec::read_tensor(mem, kts[1].info);  // host [mb=4, x=256, 1]
    REQUIRE(x.size() == 256 * 64);
    REQUIRE(y.size() == 4 * 256);
    size_t wrong = 0;
    for (size_t c = 0; c < 256; ++c) {
      std::vector<int> order(64);
      for (int i = 0; i < 64; ++i) order[size_t(i)] = i;
      std::stable_sort(order.begin(), order.end(), [&](int a, int b2) { return x[c * 64 + size_t(a)] > x[c * 64 + size_t(b2)]; });
      for (size_t j = 0; j < 4; ++j) {
        const float want = indices ? float(order[j]) : x[c * 64 + size_t(order[j])];
        wrong += y[j * 256 + c] != want;
      }
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("dwconv: a depthwise convolution sums each channel's window times its weights", "[pool]") {
  const auto lb = bundle::load_bundle(k_captured / "dwconv_1x64x32x32_k3_c1");
  const auto b = plan::default_bindings(lb);
  const auto plan = bundle::resolve(lb, b);
  const auto kts = exec::kernel_tensors(lb, plan, b);
  REQUIRE(kts.size() == 3);
  exec::SparseMemory mem;
  for (const auto& kt : kts)
    if (kt.read_first) exec::write_random_input(mem, kt, 5);
  const std::vector<float> x = exec::read_tensor(mem, kts[0].info);  // host [C=64, H=32, W=32, 1, 1]
  const std::vector<float> w = exec::read_tensor(mem, kts[1].info);  // host [C=64, 1, 1, KH=3, KW=3]
  exec::run(lb, plan, mem);
  const std::vector<float> y = exec::read_tensor(mem, kts[2].info);  // host [C=64, 30, 30, 1, 1]
  REQUIRE(x.size() == 64 * 32 * 32);
  REQUIRE(w.size() == 64 * 9);
  REQUIRE(y.size() == 64 * 30 * 30);
  double worst = 0;
  for (size_t c = 0; c < 64; ++c)
    for (size_t oh = 0; oh < 30; ++oh)
      for (size_t ow = 0; ow < 30; ++ow) {
        double acc = 0, mag = 0;
        for (size_t ki = 0; ki < 3; ++ki)
          for (size_t kj = 0; kj < 3; ++kj) {
            const double p = double(x[(c * 32 + oh + ki) * 32 + ow + kj]) * double(w[c * 9 + ki * 3 + kj]);
            acc += p;
            mag += std::fabs(p);
          }
        // Within one DL16 rounding of the result, relative to the products' magnitude (the fp32
        // sum cancels).
        worst = std::max(worst, std::fabs(double(y[(c * 30 + oh) * 30 + ow]) - acc) / (std::max(mag, 1e-3) * std::ldexp(1.0, -9)));
      }
  CHECK(worst <= 1.0);
}

TEST_CASE("pool: maxpoolfwd takes each window's largest (the avgpool capture with its op renamed)", "[pool]") {
  // torch-spyre at its pin does not emit maxpoolfwd; the same SDSC with the op renamed exercises
  // the executor's and the reference's max path on a real layout.
  vspyre::testing::TempDir tmp;
  const fs::path src = k_captured / "avgpool_k2s2_2x3x8x8_c4";
  fs::copy_file(src / "bundle.mlir", tmp.dir / "bundle.mlir");
  Json j = Json::parse(slurp(src / "sdsc_0.json"));
  Json& inner = j.begin().value()["dscs_"][0].begin().value();
  inner["computeOp_"][0]["opFuncName"] = "maxpoolfwd";
  std::ofstream(tmp.dir / "sdsc_0.json") << j.dump();
  const auto lb = bundle::load_bundle(tmp.dir);
  const auto b = plan::default_bindings(lb);
  const auto plan = bundle::resolve(lb, b);
  const auto kts = exec::kernel_tensors(lb, plan, b);
  REQUIRE(kts.size() == 2);
  exec::SparseMemory mem;
  exec::write_random_input(mem, kts[0], 4);
  const std::vector<float> x = exec::read_tensor(mem, kts[0].info);  // host [2, 8, 8, 64, 1, 1]
  exec::run(lb, plan, mem);
  const std::vector<float> y = exec::read_tensor(mem, kts[1].info);  // host [2, 4, 4, 64, 1, 1]
  REQUIRE(x.size() == 2 * 8 * 8 * 64);
  REQUIRE(y.size() == 2 * 4 * 4 * 64);
  size_t wrong = 0;
  for (size_t n = 0; n < 2; ++n)
    for (size_t oh = 0; oh < 4; ++oh)
      for (size_t ow = 0; ow < 4; ++ow)
        for (size_t c = 0; c < 64; ++c) {
          float m = -INFINITY;
          for (size_t dy = 0; dy < 2; ++dy)
            for (size_t dx = 0; dx < 2; ++dx) m = std::max(m, x[((n * 8 + oh * 2 + dy) * 8 + ow * 2 + dx) * 64 + c]);
          wrong += y[((n * 4 + oh) * 4 + ow) * 64 + c] != m;  // a copy of an input: exact
        }
  CHECK(wrong == 0);
  const exec::RefResult ref = exec::reference(plan, kts, mem);
  REQUIRE(ref.outputs.count(1));
  CHECK(exec::compare(y, ref.outputs.at(1)).pass);
}
