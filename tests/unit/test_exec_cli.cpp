// `vspyre run` with data on: JSON data section, --out .npy files, --seed determinism, --input,
// --no-data and bad input. Runs the real binary ($VSPYRE_BIN).
#include "catch.h"
#include "test_files.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/exec/npy.h"

namespace fs = std::filesystem;
using nlohmann::json;
using vspyre::testing::slurp;
using vspyre::testing::TempDir;

namespace {

struct Result {
  int code = -1;
  std::string out, err;
};

std::string q(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

Result vspyre_run(const std::vector<std::string>& args) {
  const char* b = std::getenv("VSPYRE_BIN");
  REQUIRE(b != nullptr);
  TempDir t;
  std::string cmd = q(b) + " run";
  for (const auto& a : args) cmd += " " + q(a);
  cmd += " >" + q((t.dir / "o").string()) + " 2>" + q((t.dir / "e").string()) + " </dev/null";
  const int st = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(st));
  Result r{WEXITSTATUS(st), slurp(t.dir / "o"), slurp(t.dir / "e")};
  UNSCOPED_INFO("command: " << cmd << "\nexit " << r.code << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
  return r;
}

std::string fixture(const char* name) {
  return (fs::path(VSPYRE_SOURCE_DIR) / "tests" / "fixtures" / "bundles" / name).string();
}

}  // namespace

TEST_CASE("exec cli: run computes data by default and reports the check", "[exec][cli]") {
  const Result r = vspyre_run({fixture("softmax_512x1024_lx_input_4core"), "--json"});
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  REQUIRE(j.contains("data"));
  const json& d = j["data"];
  CHECK(d["all_pass"] == true);
  CHECK(d["ops"] == 6);
  CHECK(d["seed"] == 1);
  REQUIRE(d["tensors"].size() == 2);
  CHECK(d["tensors"][0]["role"] == "input");
  CHECK(d["tensors"][1]["role"] == "output");
  CHECK(d["tensors"][1]["check"]["result"] == "PASS");
  CHECK(d["tensors"][1]["check"]["max_rel_err"].get<double>() > 0);  // DL16 rounds
  CHECK(j["kernel_time_us"].get<double>() > 0);

  const Result t = vspyre_run({fixture("add_2048x1024_c32")});
  REQUIRE(t.code == 0);
  CHECK(t.out.find("data check: PASS") != std::string::npos);
}

TEST_CASE("exec cli: the flow DMA model gives the same stats bit for bit run to run", "[exec][cli]") {
  const std::string cfg = (fs::path(VSPYRE_SOURCE_DIR) / "configs" / "spyre_flow.yaml").string();
  std::string first;
  for (const char* f : {"matmul_b2_n12800_default", "matmul_b2_n12800_default"}) {
    const Result r = vspyre_run({fixture(f), "--json", "--no-data", "--config", cfg});
    REQUIRE(r.code == 0);
    const json j = json::parse(r.out);
    CHECK(j["kernel_time_us"].get<double>() > 0);
    if (first.empty()) first = r.out;
    else CHECK(r.out == first);
  }
}

TEST_CASE("exec cli: an LX shuffle's time does not depend on the quantum", "[exec][cli]") {
  // Ring transfers are issued in lockstep with simulated time; a sender running ahead within the
  // quantum used to book links into the future (11.1 us at 200 ns against 7.7 us at 10 ns).
  auto shuffle_us = [](const char* quantum) {
    const Result r = vspyre_run({fixture("relu_neg_shuffle"), "--json", "--no-data", "-p",
                                 std::string("sim.quantum=") + quantum});
    REQUIRE(r.code == 0);
    const json j = json::parse(r.out);
    for (const auto& st : j["stages"])
      if (st["name"].get<std::string>().find("shuffle") != std::string::npos) return st["time_us"].get<double>();
    FAIL("no shuffle stage");
    return 0.0;
  };
  const double coarse = shuffle_us("1us"), fine = shuffle_us("5ns");
  CHECK(coarse == Approx(fine).epsilon(0.02));
}

TEST_CASE("exec cli: --no-data is timing only", "[exec][cli]") {
  const Result r = vspyre_run({fixture("neg_2048x1024_c32"), "--json", "--no-data"});
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK_FALSE(j.contains("data"));
  CHECK(r.err.empty());
}

TEST_CASE("exec cli: a plan beyond card.memory.capacity is refused before the card runs, in both DMA models", "[exec][cli]") {
  // The fixture's tensors start at 1 GiB. Before: the request model aborted ("double free or
  // corruption") after the core's address error; the flow model named the core's stream only.
  for (const char* config : {"configs/spyre.yaml", "configs/spyre_flow.yaml"}) {
    const Result r = vspyre_run({fixture("neg_2048x1024_c32"), "--no-data", "--config",
                                 (fs::path(VSPYRE_SOURCE_DIR) / config).string(), "-p", "card.memory.capacity=1GiB"});
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err.find("vspyre: error: plan stage 'sdsc_0.json 0_neg' core 0 op 'Tensor0 in': its device-memory bytes "
                     "[0x40000000, 0x400c2000) reach past card.memory.capacity (1GiB, 0x40000000)") != std::string::npos);
  }
}

TEST_CASE("exec cli: --out writes npy files and the same seed gives identical bytes", "[exec][cli]") {
  TempDir a, b, c;
  const std::string f = fixture("relu_neg_shuffle");
  REQUIRE(vspyre_run({f, "--out", a.dir.string(), "--seed", "5"}).code == 0);
  REQUIRE(vspyre_run({f, "--out", b.dir.string(), "--seed", "5"}).code == 0);
  REQUIRE(vspyre_run({f, "--out", c.dir.string(), "--seed", "6"}).code == 0);
  for (const char* n : {"arg0_input.npy", "arg1_output.npy"}) {
    INFO(n);
    REQUIRE(fs::exists(a.dir / n));
    CHECK(slurp(a.dir / n) == slurp(b.dir / n));
    CHECK(slurp(a.dir / n) != slurp(c.dir / n));
  }
  // relu(neg(x)) = max(-x, 0), exact in DL16.
  const auto x = vspyre::exec::read_npy(a.dir / "arg0_input.npy");
  const auto y = vspyre::exec::read_npy(a.dir / "arg1_output.npy");
  REQUIRE(x.values.size() == y.values.size());
  CHECK(x.shape == y.shape);
  size_t bad = 0;
  for (size_t i = 0; i < x.values.size(); ++i) bad += y.values[i] != std::max(-x.values[i], 0.0f);
  CHECK(bad == 0);
}

TEST_CASE("exec cli: --input feeds a kernel input from a .npy file", "[exec][cli]") {
  TempDir t;
  const std::string f = fixture("neg_2048x1024_c32");
  std::vector<float> v(size_t(2048) * 1024);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i % 1000) - 500) / 8.0f;  // exact in DL16
  vspyre::exec::write_npy(t.dir / "x.npy", v, std::vector<int64_t>{2048, 1024});
  const fs::path out = t.dir / "out";
  const Result r = vspyre_run({f, "--input", "arg0=" + (t.dir / "x.npy").string(), "--out", out.string()});
  REQUIRE(r.code == 0);
  const auto y = vspyre::exec::read_npy(out / "arg1_output.npy");
  REQUIRE(y.values.size() == v.size());
  size_t bad = 0;
  for (size_t i = 0; i < v.size(); ++i) bad += y.values[i] != -v[i];
  CHECK(bad == 0);

  vspyre::exec::write_npy(t.dir / "small.npy", std::vector<float>{1, 2, 3}, std::vector<int64_t>{3});
  const Result e = vspyre_run({f, "--input", "arg0=" + (t.dir / "small.npy").string()});
  CHECK(e.code == 1);
  CHECK(e.err.find("does not match arg0") != std::string::npos);
  const Result n = vspyre_run({f, "--input", "arg7=" + (t.dir / "x.npy").string()});
  CHECK(n.code == 1);
  CHECK(n.err.find("not a kernel input (inputs: arg0)") != std::string::npos);
  const Result s = vspyre_run({f, "--seed", "-3"});
  CHECK(s.code == 1);
  CHECK(s.err.find("--seed") != std::string::npos);

  // The same number of elements in another shape is another tensor (a transposed array was
  // taken as the input, PASS reported); dims of size 1 are the same elements in the same order.
  vspyre::exec::write_npy(t.dir / "xt.npy", v, std::vector<int64_t>{1024, 2048});
  const Result tt = vspyre_run({f, "--input", "arg0=" + (t.dir / "xt.npy").string()});
  CHECK(tt.code == 1);
  CHECK(tt.err.find("shape [1024,2048] does not match arg0's [2048,1024]") != std::string::npos);
  vspyre::exec::write_npy(t.dir / "flat.npy", v, std::vector<int64_t>{2048 * 1024});
  CHECK(vspyre_run({f, "--input", "arg0=" + (t.dir / "flat.npy").string()}).code == 1);
  vspyre::exec::write_npy(t.dir / "x1.npy", v, std::vector<int64_t>{1, 2048, 1, 1024});
  CHECK(vspyre_run({f, "--input", "arg0=" + (t.dir / "x1.npy").string()}).code == 0);
}

TEST_CASE("exec cli: an index input must hold row numbers, not values to round, clamp or wrap", "[exec][cli]") {
  // embedding: arg1 [2,4,1] SENUINT32 indexes the 10 rows of arg0. -3 became 0, 2.5 became 2 and
  // 1e12 became 4294967295 ("element 0 is 4294967295" from the executor).
  TempDir t;
  const std::string f =
      (fs::path(VSPYRE_SOURCE_DIR) / "tests" / "fixtures" / "captured" / "embedding_10x3_ids2x4_c1").string();
  auto ids = [&](float bad, const char* name) {
    std::vector<float> v{0, 1, 2, 3, 4, 5, 6, 9};
    v[3] = bad;
    vspyre::exec::write_npy(t.dir / name, v, std::vector<int64_t>{2, 4, 1});
    return "arg1=" + (t.dir / name).string();
  };
  const Result ok = vspyre_run({f, "--json", "--input", ids(7, "ok.npy")});
  REQUIRE(ok.code == 0);
  CHECK(json::parse(ok.out)["data"]["all_pass"] == true);
  for (const auto& [bad, name] : std::vector<std::pair<float, const char*>>{
           {-3.0f, "neg.npy"}, {2.5f, "half.npy"}, {1e12f, "big.npy"}, {10.0f, "ten.npy"}}) {
    const Result r = vspyre_run({f, "--input", ids(bad, name)});
    CHECK(r.code == 1);
    CHECK(r.err.find("element 3 is") != std::string::npos);
    CHECK(r.err.find("an index tensor: its elements are row numbers, whole numbers in [0, 9]") != std::string::npos);
  }
}

TEST_CASE("exec cli: with data on, the output is the same byte for byte run to run, and --host-times adds the host seconds", "[exec][cli]") {
  const std::string f = fixture("neg_2048x1024_c32");
  TempDir a, b;
  const Result r1 = vspyre_run({f, "--json", "--out", a.dir.string()});
  const Result r2 = vspyre_run({f, "--json", "--out", b.dir.string()});
  REQUIRE(r1.code == 0);
  REQUIRE(r2.code == 0);
  CHECK(r1.out == r2.out);
  CHECK(slurp(a.dir / "stats.json") == slurp(b.dir / "stats.json"));
  CHECK(json::parse(r1.out)["data"]["host"].is_null());
  const Result t1 = vspyre_run({f});
  const Result t2 = vspyre_run({f});
  CHECK(t1.out == t2.out);
  CHECK(t1.out.find("host ") == std::string::npos);

  const Result h = vspyre_run({f, "--json", "--host-times"});
  REQUIRE(h.code == 0);
  const json host = json::parse(h.out)["data"]["host"];
  REQUIRE(host.is_object());
  CHECK(host["total_seconds"].get<double>() >= host["exec_seconds"].get<double>());
  CHECK(host["exec_seconds"].get<double>() >= host["compute_seconds"].get<double>());
  const Result ht = vspyre_run({f, "--host-times"});
  CHECK(ht.out.find("; host ") != std::string::npos);
}

TEST_CASE("exec cli: a failed check says its error is over the tolerance", "[exec][cli]") {
  // (a + b) + c with a = b = 1e30 (DL16's largest value once on the card) and c = -1e30: a + b
  // saturates, so the device gives 0 where the exact result is the largest value. It printed
  // "err ... <= tol ...: FAIL".
  TempDir t;
  auto captured = [](const char* name) {
    return (fs::path(VSPYRE_SOURCE_DIR) / "tests" / "fixtures" / "captured" / name).string();
  };
  std::vector<float> v(size_t(2048) * 1024, 1e30f), w(v.size(), -1e30f);
  vspyre::exec::write_npy(t.dir / "big.npy", v, std::vector<int64_t>{2048, 1024});
  vspyre::exec::write_npy(t.dir / "neg.npy", w, std::vector<int64_t>{2048, 1024});
  const std::string big = "=" + (t.dir / "big.npy").string();
  const Result r = vspyre_run({captured("add3_2048x1024_c32"), "--input", "arg0" + big, "--input", "arg1" + big,
                               "--input", "arg2=" + (t.dir / "neg.npy").string()});
  REQUIRE(r.code == 0);  // a FAIL is reported, not an error
  CHECK(r.out.find(": FAIL") != std::string::npos);
  CHECK(r.out.find("> tol") != std::string::npos);
  CHECK(r.out.find("<= tol") == std::string::npos);
  // The result beyond the format's range alone (a + b: the largest value, as the card saturates)
  // is what the format can give: PASS.
  const Result s = vspyre_run({captured("add_2048x1024_c32"), "--input", "arg0" + big, "--input", "arg1" + big});
  REQUIRE(s.code == 0);
  CHECK(s.out.find("data check: PASS") != std::string::npos);
}

TEST_CASE("exec cli: start addresses that fit no one tensor are refused with data and without", "[exec][cli]") {
  // Core 1's start moved by one stick: the data run refused it, --no-data timed it.
  TempDir t;
  const fs::path src = fs::path(VSPYRE_SOURCE_DIR) / "tests" / "fixtures" / "bundles" / "neg_2048x1024_c32";
  const fs::path d = t.dir / "neg";
  fs::create_directory(d);
  for (const auto& e : fs::directory_iterator(src)) fs::copy_file(e.path(), d / e.path().filename());
  std::string mlir = slurp(d / "bundle.mlir");
  const std::string from = "%arg_0_core_offset_8192 = arith.constant 8192 ";
  REQUIRE(mlir.find(from) != std::string::npos);
  mlir.replace(mlir.find(from), from.size(), "%arg_0_core_offset_8192 = arith.constant 8320 ");
  std::ofstream(d / "bundle.mlir") << mlir;
  for (const bool data : {true, false}) {
    INFO((data ? "with data" : "--no-data"));
    std::vector<std::string> args{d.string()};
    if (!data) args.push_back("--no-data");
    const Result r = vspyre_run(args);
    CHECK(r.code == 1);
    CHECK(r.err.find(d.string()) != std::string::npos);
    CHECK(r.err.find("sdsc_0.json") != std::string::npos);
    CHECK(r.err.find("do not fit one tensor") != std::string::npos);
  }
}

TEST_CASE("exec cli: views of an argument (%arg_N + offset) are kernel tensors of their own", "[exec][cli]") {
  auto captured = [](const char* name) {
    return (fs::path(VSPYRE_SOURCE_DIR) / "tests" / "fixtures" / "captured" / name).string();
  };
  // torch.cat of two slices: the compiler writes the halves of arg2 at offsets 0 and 65536.
  const Result r = vspyre_run({captured("ov_cat_kv_c32"), "--json"});
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  const json& d = j["data"];
  CHECK(d["all_pass"] == true);
  CHECK(d["checked"] == 2);
  std::vector<std::string> outs;
  for (const auto& t : d["tensors"])
    if (t["role"] == "output") {
      outs.push_back(t["label"].get<std::string>());
      CHECK(t["arg"] == 2);
      CHECK(t["check"]["result"] == "PASS");
    }
  CHECK(outs == std::vector<std::string>{"arg2", "arg2+65536"});

  // An input view: --input names it argN+OFFSET, its values reach the output unchanged (a copy).
  TempDir t;
  const std::string f = captured("ov_copy_d2d_kslice_c32");
  std::vector<float> v(size_t(32) * 1024);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i % 1000) - 500) / 8.0f;  // exact in DL16
  vspyre::exec::write_npy(t.dir / "k.npy", v, std::vector<int64_t>{32, 1024});
  const fs::path out = t.dir / "out";
  const Result c = vspyre_run({f, "--input", "arg0+327680=" + (t.dir / "k.npy").string(), "--out", out.string()});
  REQUIRE(c.code == 0);
  CHECK(fs::exists(out / "arg0+327680_input.npy"));
  const auto y = vspyre::exec::read_npy(out / "arg1_output.npy");
  REQUIRE(y.values.size() == v.size());
  size_t bad = 0;
  for (size_t i = 0; i < v.size(); ++i) bad += y.values[i] != v[i];
  CHECK(bad == 0);
  const Result n = vspyre_run({f, "--input", "arg0=" + (t.dir / "k.npy").string()});
  CHECK(n.code == 1);
  CHECK(n.err.find("not a kernel input (inputs: arg0+327680)") != std::string::npos);
}

TEST_CASE("exec cli: --repeat runs the kernel back to back on one card and reports the median run", "[exec][cli]") {
  const std::string f = fixture("neg_2048x1024_c32");
  const Result once = vspyre_run({f, "--json", "--no-data"});
  REQUIRE(once.code == 0);
  const json j1 = json::parse(once.out);
  CHECK_FALSE(j1.contains("repeat"));

  const Result r = vspyre_run({f, "--json", "--no-data", "--repeat", "3"});
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  REQUIRE(j.contains("repeat"));
  const json& rep = j["repeat"];
  CHECK(rep["runs"] == 3);
  std::vector<double> t = rep["kernel_times_us"].get<std::vector<double>>();
  REQUIRE(t.size() == 3);
  // The first run is the fresh card's, bit for bit; the later ones find the state it left.
  CHECK(t[0] == j1["kernel_time_us"].get<double>());
  const size_t m = rep["median_run"].get<size_t>();
  REQUIRE(m >= 1);
  REQUIRE(m <= 3);
  CHECK(j["kernel_time_us"].get<double>() == t[m - 1]);
  std::vector<double> sorted = t;
  std::sort(sorted.begin(), sorted.end());
  CHECK(t[m - 1] == sorted[1]);
  CHECK(rep["min_us"].get<double>() == sorted[0]);
  CHECK(rep["max_us"].get<double>() == sorted[2]);
  CHECK(sorted[0] > 0);
  // Deterministic: the same command gives the same runs.
  const Result again = vspyre_run({f, "--json", "--no-data", "--repeat", "3"});
  REQUIRE(again.code == 0);
  CHECK(again.out == r.out);
  // The text report names the runs.
  const Result text = vspyre_run({f, "--no-data", "--repeat", "3"});
  REQUIRE(text.code == 0);
  CHECK(text.out.find("repeat           3 runs back to back") != std::string::npos);
  // ... and lists every run's time, as --json does.
  char line[128];
  std::snprintf(line, sizeof line, "runs us          %.3f %.3f %.3f\n", t[0], t[1], t[2]);
  CHECK(text.out.find(line) != std::string::npos);

  for (const char* bad : {"0", "1001", "x", "-2", "2.5", ""}) {
    const Result b = vspyre_run({f, "--no-data", "--repeat", bad});
    CHECK(b.code == 1);
    CHECK(b.err.find("--repeat: expected a whole number from 1 to 1000, got '" + std::string(bad) + "'") != std::string::npos);
  }
}
