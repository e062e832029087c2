#include "catch.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "bundle_test_util.h"
#include "sim/bundle/bundle.h"

namespace fs = std::filesystem;
using namespace vspyre::bundle;

namespace {

using bundle_test::k_data;

// A bundle directory assembled in a temp dir from the shared spyrecli_<kernel>_* files; removed
// on destruction. The shared data is never copied into the repository.
class TempBundle {
 public:
  TempBundle(const std::string& kernel, int num_sdscs) {
    static std::atomic<int> counter{0};
    m_dir = fs::temp_directory_path() /
            ("vspyre_bundle_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(m_dir);
    fs::copy_file(k_data / ("spyrecli_" + kernel + "_bundle.mlir"), m_dir / "bundle.mlir");
    for (int i = 0; i < num_sdscs; ++i)
      fs::copy_file(k_data / ("spyrecli_" + kernel + "_sdsc_" + std::to_string(i) + ".json"),
                    m_dir / ("sdsc_" + std::to_string(i) + ".json"));
  }
  ~TempBundle() {
    std::error_code ec;
    fs::remove_all(m_dir, ec);
  }
  const fs::path& dir() const { return m_dir; }
  std::string read(const std::string& f) const { return read_text_file(m_dir / f, f); }
  void write(const std::string& f, const std::string& text) const {
    std::ofstream(m_dir / f, std::ios::binary | std::ios::trunc) << text;
  }

 private:
  fs::path m_dir;
};

std::string load_error(const fs::path& dir, const Bindings* bindings = nullptr) {
  try {
    LoadedBundle lb = load_bundle(dir);
    if (bindings) resolve(lb, *bindings);
  } catch (const LoadError& e) {
    return e.what();
  }
  return "";
}

constexpr uint64_t k_gib = 1ull << 30;

}  // namespace

TEST_CASE("bundle: every real bundle directory loads and resolves", "[bundle]") {
  BUNDLE_REQUIRE_DATA();
  struct Case {
    const char* kernel;
    int sdscs;
    size_t args, executions;
  } cases[] = {
      {"add_3d", 1, 3, 1}, {"bmm", 1, 3, 1}, {"mean_keepdim", 1, 2, 1}, {"mm", 1, 3, 1}, {"softmax", 6, 2, 6},
  };
  for (const auto& c : cases) {
    INFO(c.kernel);
    TempBundle tb(c.kernel, c.sdscs);
    LoadedBundle lb = load_bundle(tb.dir());
    CHECK(lb.sdscs.size() == static_cast<size_t>(c.sdscs));
    REQUIRE(lb.bundle.args.size() == c.args);
    Bindings b;
    for (size_t i = 0; i < c.args; ++i) b.args.push_back((i + 1) * k_gib);
    auto plan = resolve(lb, b);
    REQUIRE(plan.size() == c.executions);
    for (const auto& r : plan) {
      REQUIRE(r.sdsc);
      CHECK(r.addresses.size() == r.sdsc->allocations.size());
    }
  }
}

TEST_CASE("bundle: add_3d core addresses follow the stick-tiled layout", "[bundle]") {
  BUNDLE_REQUIRE_DATA();
  TempBundle tb("add_3d", 1);
  LoadedBundle lb = load_bundle(tb.dir() / "bundle.mlir");
  auto plan = resolve(lb, Bindings{{1 * k_gib, 2 * k_gib, 3 * k_gib}, 0});
  REQUIRE(plan.size() == 1);
  const auto& r = plan[0];
  for (uint64_t c = 0; c < 32; ++c) {
    uint64_t off = (c % 4) * 64 * 4096 + (c / 4) * 512;  // formats.md B.5 worked example
    CHECK(r.addresses[0][c] == 1 * k_gib + off);
    CHECK(r.addresses[1][c] == 2 * k_gib + off);
    CHECK(r.addresses[2][c] == 3 * k_gib + off);
  }
}

TEST_CASE("bundle: softmax resolves HBM ends and LX intermediates", "[bundle]") {
  BUNDLE_REQUIRE_DATA();
  TempBundle tb("softmax", 6);
  LoadedBundle lb = load_bundle(tb.dir());
  auto plan = resolve(lb, Bindings{{4 * k_gib, 5 * k_gib}, 0});
  REQUIRE(plan.size() == 6);
  CHECK(plan[0].exec.sdsc_file == "sdsc_0.json");
  CHECK(plan[0].sdsc->allocations[0].placement == Placement::hbm);
  CHECK(plan[0].addresses[0][7] == 4 * k_gib + 7 * 2048);
  CHECK(plan[0].addresses[1][7] == 2048);  // LX offset
  CHECK(plan[2].addresses[2][31] == 34816);
  CHECK(plan[5].exec.symbols.size() == 32);
  CHECK(plan[5].addresses[2][31] == 5 * k_gib + 31 * 2048);
}

TEST_CASE("bundle: bundle-level errors name bundle.mlir:line or the SDSC", "[bundle]") {
  BUNDLE_REQUIRE_DATA();
  SECTION("missing sdsc file") {
    TempBundle tb("softmax", 6);
    fs::remove(tb.dir() / "sdsc_3.json");
    std::string msg = load_error(tb.dir());
    CHECK(msg.find("bundle.mlir:") == 0);
    CHECK(msg.find("sdsc file 'sdsc_3.json' not found") != std::string::npos);
  }
  SECTION("missing bundle.mlir") {
    TempBundle tb("mm", 1);
    fs::remove(tb.dir() / "bundle.mlir");
    CHECK(load_error(tb.dir()) == "'" + tb.dir().string() +
                                      "': not a bundle directory (it holds no bundle.mlir and no bundle.mlir.ref)");
  }
  SECTION("symbol bound but unused") {
    TempBundle tb("softmax", 6);
    std::string t = tb.read("bundle.mlir");
    const std::string needle = "sdsc_execute () {sdsc_filename=\"sdsc_1.json\", \"symbol_ids\"=[]}";
    auto p = t.find(needle);
    REQUIRE(p != std::string::npos);
    t.replace(p, needle.size(), "sdsc_execute (%arg_0) {sdsc_filename=\"sdsc_1.json\", \"symbol_ids\"=[-99]}");
    tb.write("bundle.mlir", t);
    std::string msg = load_error(tb.dir());
    CHECK(msg.find("bundle.mlir:") == 0);
    CHECK(msg.find("symbol mismatch: symbol -99 is bound but 'sdsc_1.json' never uses it") != std::string::npos);
  }
  SECTION("symbol used but not bound") {
    TempBundle tb("mm", 1);
    std::string t = tb.read("bundle.mlir");
    auto p = t.find(", -44]");
    REQUIRE(p != std::string::npos);
    t.replace(p, 6, "]");
    auto q = t.rfind(", %arg_2_core_", t.find("{sdsc_filename"));
    t.erase(q, t.find(')', q) - q);
    tb.write("bundle.mlir", t);
    std::string msg = load_error(tb.dir());
    CHECK(msg.find("bundle.mlir:") == 0);
    CHECK(msg.find("symbol mismatch: 'sdsc_0.json' uses symbol -44") != std::string::npos);
  }
  SECTION("misaligned bound address") {
    TempBundle tb("bmm", 1);
    Bindings b{{k_gib + 64, 2 * k_gib, 3 * k_gib}, 0};
    std::string msg = load_error(tb.dir(), &b);
    CHECK(msg.find("sdsc_0.json: /0_batchmatmul/dscs_/0/batchmatmul/scheduleTree_/0") == 0);
    CHECK(msg.find("not aligned to the 128-byte stick") != std::string::npos);
  }
  SECTION("argument count") {
    TempBundle tb("bmm", 1);
    Bindings b{{k_gib}, 0};
    CHECK(load_error(tb.dir(), &b).find("3 arguments but 1 values") != std::string::npos);
  }
  SECTION("invalid SDSC inside a bundle") {
    TempBundle tb("softmax", 6);
    std::string t = tb.read("sdsc_4.json");
    tb.write("sdsc_4.json", t.substr(0, t.size() / 2));
    CHECK(load_error(tb.dir()).find("sdsc_4.json: /: invalid JSON") == 0);
  }
}

TEST_CASE("bundle: in-memory loading matches the directory loader", "[bundle]") {
  BUNDLE_REQUIRE_DATA();
  std::map<std::string, std::string> sdscs;
  for (int i = 0; i < 6; ++i)
    sdscs["sdsc_" + std::to_string(i) + ".json"] =
        read_text_file(k_data / ("spyrecli_softmax_sdsc_" + std::to_string(i) + ".json"), "x");
  std::string mlir = read_text_file(k_data / "spyrecli_softmax_bundle.mlir", "x");
  LoadedBundle lb = load_bundle_from_memory(mlir, "bundle.mlir", sdscs);
  CHECK(lb.sdscs.size() == 6);
  CHECK(resolve(lb, Bindings{{k_gib, 2 * k_gib}, 0}).size() == 6);
  sdscs.erase("sdsc_2.json");
  try {
    load_bundle_from_memory(mlir, "bundle.mlir", sdscs);
    FAIL("expected LoadError");
  } catch (const LoadError& e) {
    CHECK(std::string(e.what()).find("sdsc file 'sdsc_2.json' not found") != std::string::npos);
  }
}

TEST_CASE("bundle: many SDSCs load on several threads as one at a time, and the first bad file in execution order names the error", "[bundle]") {
  // The captured attention kernel: 52 SDSC files, 1.7 MB of JSON, over the size at which the
  // loader parses on several threads.
  const fs::path src = fs::path(VSPYRE_SOURCE_DIR) / "tests/fixtures/captured/flash_attention_8x256x64_c32";
  const std::string mlir = read_text_file(src / "bundle.mlir", "bundle.mlir");
  std::vector<std::string> order;  // the SDSC files in the order sdsc_execute first names them
  for (size_t at = 0; (at = mlir.find("sdsc_filename=\"", at)) != std::string::npos;) {
    at += 15;
    const std::string f = mlir.substr(at, mlir.find('"', at) - at);
    if (std::find(order.begin(), order.end(), f) == order.end()) order.push_back(f);
  }
  REQUIRE(order.size() == 52);
  uint64_t bytes = 0;
  for (const auto& f : order) bytes += fs::file_size(src / f);
  REQUIRE(bytes > (256u << 10));
  const LoadedBundle lb = load_bundle(src);
  REQUIRE(lb.sdscs.size() == order.size());
  for (const auto& f : order) {
    const Sdsc one = parse_sdsc_json(read_text_file(src / f, f), f, CardLimits{});
    const Sdsc& got = lb.sdsc(f);
    CHECK(got.raw == one.raw);
    CHECK(got.key == one.key);
    CHECK(got.index == one.index);
    CHECK(got.allocations.size() == one.allocations.size());
  }
  // Two bad files: the one named first wins, whichever thread reaches it first.
  const fs::path dir = fs::temp_directory_path() / ("vspyre_many_sdscs_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::copy(src, dir);
  auto truncate = [&](const std::string& f) {
    const std::string text = read_text_file(dir / f, f);
    std::ofstream(dir / f, std::ios::binary | std::ios::trunc) << text.substr(0, text.size() / 2);
  };
  truncate(order[40]);
  truncate(order[3]);
  for (int rep = 0; rep < 10; ++rep) {
    const std::string err = load_error(dir);
    CHECK(err.rfind(order[3] + ": /: invalid JSON", 0) == 0);
  }
  fs::remove(dir / order[3]);  // now missing: still the first failure in order
  const std::string missing = load_error(dir);
  CHECK(missing.find("sdsc file '" + order[3] + "' not found") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("bundle: a bundle.mlir.ref reads the launch text it names, and the SDSCs beside itself", "[bundle]") {
  BUNDLE_REQUIRE_DATA();
  // mean_keepdim split over two temp dirs: `launch` keeps only bundle.mlir, `kernel` only the
  // SDSC. A ref in `kernel` naming launch's bundle.mlir must read the SDSC from `kernel`.
  TempBundle launch("mean_keepdim", 1);
  TempBundle kernel("mean_keepdim", 1);
  fs::remove(launch.dir() / "sdsc_0.json");
  fs::remove(kernel.dir() / "bundle.mlir");
  CHECK_FALSE(is_bundle_dir(kernel.dir()));
  CHECK(load_error(kernel.dir()).find("not a bundle directory") != std::string::npos);

  const std::string rel = fs::relative(launch.dir() / "bundle.mlir", kernel.dir()).string();
  kernel.write("bundle.mlir.ref", "# the launch is kept elsewhere\n\n  " + rel + "  \n# end\n");
  CHECK(is_bundle_dir(kernel.dir()));
  CHECK(bundle_mlir_path(kernel.dir()) == kernel.dir() / rel);
  const LoadedBundle lb = load_bundle(kernel.dir());
  CHECK(lb.dir == kernel.dir());
  CHECK(lb.sdscs.count("sdsc_0.json") == 1);
  // The same through the ref file's own path, and the same launch as a plain bundle.mlir gives.
  const LoadedBundle via_file = load_bundle(kernel.dir() / "bundle.mlir.ref");
  CHECK(via_file.dir == kernel.dir());
  const Bundle plain = parse_bundle_mlir(launch.read("bundle.mlir"), "bundle.mlir");
  CHECK(via_file.bundle.args.size() == plain.args.size());
  CHECK(lb.bundle.steps.size() == plain.steps.size());
  CHECK(lb.bundle.args.size() == 2);

  // Errors name the ref file and, where there is one, the line.
  const std::string ref = (kernel.dir() / "bundle.mlir.ref").string();
  kernel.write("bundle.mlir.ref", "# nothing but comments\n\n");
  std::string e = load_error(kernel.dir());
  CHECK(e.find(ref + ": no path") != std::string::npos);
  kernel.write("bundle.mlir.ref", rel + "\n" + rel + "\n");
  e = load_error(kernel.dir());
  CHECK(e.find(ref + ":2: a second path") != std::string::npos);
  kernel.write("bundle.mlir.ref", "# x\nno_such_dir/bundle.mlir\n");
  e = load_error(kernel.dir());
  CHECK(e.find(ref + ":2: names 'no_such_dir/bundle.mlir'") != std::string::npos);
  CHECK(e.find("which is not a file") != std::string::npos);
  kernel.write("bundle.mlir.ref", rel + "\n");
  fs::copy_file(launch.dir() / "bundle.mlir", kernel.dir() / "bundle.mlir");
  e = load_error(kernel.dir());
  CHECK(e.find(ref + ": stands beside") != std::string::npos);
}

TEST_CASE("bundle: a tensor past the end of the pool device_mem_allocate asks for is refused", "[bundle]") {
  // softmax_512x1024_baseline_4core keeps its intermediates in a 2101248-byte pool, exactly what
  // they reach: the last is sum's output on core 3, 512 bytes at 2100736.
  const fs::path src = fs::path(VSPYRE_SOURCE_DIR) / "tests" / "fixtures" / "bundles" / "softmax_512x1024_baseline_4core";
  const fs::path dir = fs::temp_directory_path() / ("vspyre_pool_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::copy(src, dir);
  const std::string text = read_text_file(dir / "bundle.mlir", "bundle.mlir");
  const std::string decl = "device_mem_allocate 2101248 bytes";
  REQUIRE(text.find(decl) != std::string::npos);
  auto with_pool = [&](uint64_t bytes) {
    std::string t = text;
    t.replace(t.find(decl), decl.size(), "device_mem_allocate " + std::to_string(bytes) + " bytes");
    std::ofstream(dir / "bundle.mlir", std::ios::binary | std::ios::trunc) << t;
    LoadedBundle lb = load_bundle(dir);
    Bindings b;
    for (size_t i = 0; i < lb.bundle.args.size(); ++i) b.args.push_back((i + 1) * k_gib);
    b.pool_base = 8 * k_gib;
    try {
      resolve(lb, b);
    } catch (const LoadError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(with_pool(2101248).empty());
  CHECK(with_pool(4 * k_gib).empty());
  const std::string one = with_pool(1);
  CHECK(one.find("sdsc_0.json: /0_maxnonstick/") == 0);
  CHECK(one.find("the tensor lies in the kernel's pool at offset 0 and spans 512 bytes: past the end of the 1-byte pool") !=
        std::string::npos);
  const std::string short_by_a_stick = with_pool(2101248 - 128);
  CHECK(short_by_a_stick.find("sdsc_3.json: /3_sumnonstick/") == 0);
  CHECK(short_by_a_stick.find("core 3 symbol") != std::string::npos);
  CHECK(short_by_a_stick.find("at offset 2100736 and spans 512 bytes: past the end of the 2101120-byte pool") != std::string::npos);
  fs::remove_all(dir);
}
