// Stats as one JSON tree keyed by object path, the Perfetto trace writer, debug flags.
#include "catch.h"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/engine/error.h"
#include "sim/engine/log.h"
#include "sim/engine/stats.h"
#include "sim/engine/trace.h"

namespace fs = std::filesystem;
using namespace vspyre;
using nlohmann::json;

namespace {

fs::path temp_path(const std::string& stem) {
  static std::atomic<int> n{0};
  return fs::temp_directory_path() /
         ("vspyre_engine_" + stem + "_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
}

json read_json(const fs::path& p) {
  std::ifstream in(p);
  REQUIRE(in);
  return json::parse(in);  // throws (and so fails the test) on invalid JSON
}

// Flags live for the whole process: DebugFlag keeps pointers to them.
DebugFlag g_test_alpha("test_alpha", "a test flag");
DebugFlag g_test_beta("test_beta", "another test flag");

}  // namespace

TEST_CASE("engine: stats form one JSON tree keyed by object path", "[engine][stats]") {
  StatGroup card("card");
  StatGroup core7("card.core_7");
  StatGroup core0("card.core_0");
  Scalar& runs = card.scalar("runs", "runs", "programs run");
  ++runs;
  ++runs;
  Scalar& bytes = core7.scalar("bytes_in", "B", "bytes loaded");
  bytes += 4096;
  bytes += 1024;
  Scalar& peak = core7.scalar("peak", "B", "largest");
  peak.max_with(10);
  peak.max_with(3);
  core0.scalar("bytes_in", "B", "bytes loaded").set(7);
  Vector& v = core7.vector("per_engine", 3, "ops", "ops per engine");
  v[0] = 1;
  v[2] = 5;
  CHECK_THROWS(v[3]);
  core7.formula("ratio", [&] { return bytes.value() / 1024.0; }, "x", "bytes over 1 KiB");
  core7.formula("bad", [] { return std::numeric_limits<double>::quiet_NaN(); }, "x", "0/0");
  StatGroup& lx = core7.group("lx");
  CHECK(&core7.group("lx") == &lx);
  lx.scalar("reads", "B", "LX reads").set(3);

  StatsRegistry reg;
  reg.add(&card);
  reg.add(&core7);
  reg.add(&core0);
  bytes += 1024;  // formulas are evaluated when the tree is written
  const json j = reg.to_json();
  REQUIRE(j.contains("stats"));
  REQUIRE(j.contains("units"));
  const json& s = j["stats"];
  CHECK(s["card"]["runs"].get<double>() == Approx(2));
  CHECK(s["card"]["core_7"]["bytes_in"].get<double>() == Approx(6144));
  CHECK(s["card"]["core_7"]["peak"].get<double>() == Approx(10));
  CHECK(s["card"]["core_0"]["bytes_in"].get<double>() == Approx(7));
  CHECK(s["card"]["core_7"]["per_engine"] == json::array({1.0, 0.0, 5.0}));
  CHECK(s["card"]["core_7"]["ratio"].get<double>() == Approx(6.0));
  CHECK(s["card"]["core_7"]["bad"].is_null());  // not a NaN that would break the JSON
  CHECK(s["card"]["core_7"]["lx"]["reads"].get<double>() == Approx(3));
  CHECK(j["units"]["card.core_7.bytes_in"]["unit"] == "B");
  CHECK(j["units"]["card.core_7.bytes_in"]["desc"] == "bytes loaded");
  CHECK(j["units"]["card.core_7.lx.reads"]["unit"] == "B");
  CHECK(j["units"]["card.runs"]["desc"] == "programs run");
  // The dump is valid JSON that parses back to the same tree.
  CHECK(json::parse(j.dump()) == j);

  CHECK(core7.get("bytes_in") == Approx(6144));
  CHECK(core7.get("ratio") == Approx(6.0));
  CHECK_THROWS_AS(core7.get("missing"), std::out_of_range);
  CHECK_THROWS_AS(core7.scalar("bytes_in", "B", "again"), std::logic_error);
}

TEST_CASE("engine: histogram buckets, underflow, overflow, mean", "[engine][stats]") {
  StatGroup g("card.memory");
  Histogram& h = g.histogram("latency", 10, 5, 4, "ns", "request latency");
  h.sample(9);       // underflow
  h.sample(10);      // bucket 0
  h.sample(14.9);    // bucket 0
  h.sample(15, 2);   // bucket 1, twice
  h.sample(29.9);    // bucket 3
  h.sample(30);      // overflow
  CHECK(h.count() == 7u);
  CHECK(h.mean() == Approx((9 + 10 + 14.9 + 30 + 29.9 + 30) / 7.0));
  const json j = h.to_json();
  CHECK(j["counts"] == json::array({2, 2, 0, 1}));
  CHECK(j["underflow"] == 1);
  CHECK(j["overflow"] == 1);
  CHECK(j["samples"] == 7);
  CHECK(j["lo"].get<double>() == Approx(9));
  CHECK(j["hi"].get<double>() == Approx(30));
  CHECK(j["min"].get<double>() == Approx(10));
  CHECK(j["bucket"].get<double>() == Approx(5));
  StatsRegistry reg;
  reg.add(&g);
  const json t = reg.to_json();
  CHECK(t["stats"]["card"]["memory"]["latency"]["counts"] == json::array({2, 2, 0, 1}));
  Histogram empty;
  CHECK(empty.mean() == Approx(0));
  CHECK(empty.count() == 0u);
}

TEST_CASE("engine: Perfetto trace is valid JSON with X events and name metadata", "[engine][trace]") {
  TraceWriter w;
  const auto dma = w.track("core_3", "dma_in");
  const auto pt = w.track("core_3", "pt");
  const auto ch = w.track("memory", "channel_0");
  CHECK(dma != pt);
  w.complete(dma, "load \"a\"", 1500000, 250000);  // 1.5 us for 0.25 us; the name needs escaping
  w.complete(pt, "matmul", 2e6, 1, "{\"m\":64}");
  w.complete(ch, "read", 7, 13);  // sub-ns times keep their picoseconds
  w.counter(ch, "queue", 3e6, 4);
  CHECK(w.event_count() == 4u);
  const fs::path p = temp_path("trace") += ".json";
  w.write(p.string());
  const json j = read_json(p);
  fs::remove(p);
  CHECK(j["displayTimeUnit"] == "ns");
  REQUIRE(j["traceEvents"].is_array());
  std::map<int, std::string> processes;
  std::map<std::pair<int, int>, std::string> threads;
  std::vector<json> x, c;
  for (const auto& e : j["traceEvents"]) {
    REQUIRE(e.contains("ph"));
    if (e["ph"] == "M" && e["name"] == "process_name") processes[e["pid"]] = e["args"]["name"];
    else if (e["ph"] == "M" && e["name"] == "thread_name") threads[{e["pid"], e["tid"]}] = e["args"]["name"];
    else if (e["ph"] == "X") x.push_back(e);
    else if (e["ph"] == "C") c.push_back(e);
    else FAIL("unexpected event " << e.dump());
  }
  REQUIRE(processes.size() == 2);
  REQUIRE(threads.size() == 3);
  REQUIRE(x.size() == 3);
  REQUIRE(c.size() == 1);
  // Tracks of one group share a process and have distinct threads.
  const int core_pid = x[0]["pid"];
  CHECK(processes[core_pid] == "core_3");
  CHECK(x[1]["pid"] == core_pid);
  CHECK(x[0]["tid"] != x[1]["tid"]);
  CHECK(threads[{core_pid, x[0]["tid"]}] == "dma_in");
  CHECK(threads[{core_pid, x[1]["tid"]}] == "pt");
  CHECK(processes[x[2]["pid"]] == "memory");
  CHECK(threads[{x[2]["pid"], x[2]["tid"]}] == "channel_0");
  // Timestamps and durations are microseconds.
  CHECK(x[0]["name"] == "load \"a\"");
  CHECK(x[0]["ts"].get<double>() == Approx(1.5));
  CHECK(x[0]["dur"].get<double>() == Approx(0.25));
  CHECK(x[1]["ts"].get<double>() == Approx(2.0));
  CHECK(x[1]["args"]["m"] == 64);
  CHECK(x[2]["ts"].get<double>() == Approx(7e-6).epsilon(1e-9));
  CHECK(x[2]["dur"].get<double>() == Approx(13e-6).epsilon(1e-9));
  CHECK(c[0]["name"] == "queue");
  CHECK(c[0]["ts"].get<double>() == Approx(3.0));
  CHECK(c[0]["args"]["value"].get<double>() == Approx(4));
  CHECK_FALSE(c[0].contains("dur"));
}

TEST_CASE("engine: an empty trace is still valid JSON and an unwritable path is an input error", "[engine][trace]") {
  TraceWriter w;
  const fs::path p = temp_path("empty_trace") += ".json";
  w.write(p.string());
  const json j = read_json(p);
  fs::remove(p);
  CHECK(j["traceEvents"].is_array());
  CHECK(j["traceEvents"].empty());
  CHECK_THROWS_AS(w.write("/nonexistent_dir_vspyre/x/trace.json"), InputError);
}

TEST_CASE("engine: debug flags switch on by name, list or all, and report unknown names", "[engine][log]") {
  bool alpha = false, beta = false;
  for (auto* f : DebugFlag::all()) {
    if (f == &g_test_alpha) alpha = true;
    if (f == &g_test_beta) beta = true;
  }
  CHECK(alpha);
  CHECK(beta);
  CHECK(std::string(g_test_alpha.name()) == "test_alpha");
  CHECK(std::string(g_test_alpha.description()) == "a test flag");
  CHECK_FALSE(g_test_alpha.on());
  CHECK_FALSE(g_test_beta.on());
  CHECK(DebugFlag::enable("").empty());
  CHECK_FALSE(g_test_alpha.on());
  const auto unknown = DebugFlag::enable("test_alpha,nope,,also_nope");
  CHECK(unknown == std::vector<std::string>{"nope", "also_nope"});
  CHECK(g_test_alpha.on());
  CHECK_FALSE(g_test_beta.on());
  // A flag that is off does not evaluate its arguments.
  int evaluated = 0;
  VSPYRE_DEBUG(g_test_beta, 0.0, "%d", ++evaluated);
  CHECK(evaluated == 0);
  CHECK(DebugFlag::enable("all").empty());
  CHECK(g_test_beta.on());
  for (auto* f : DebugFlag::all()) CHECK(f->on());
}
