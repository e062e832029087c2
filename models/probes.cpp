#include "models/probes.h"

#include <cstdio>
#include <string>

#include "sim/engine/error.h"
#include "sim/engine/units.h"

namespace vspyre {
namespace {

constexpr uint64_t kRegion = 256ull << 20;  // each core works in its own 256 MB span

// Streams `bytes` per core on the first `cores` cores; read and/or write.
double stream(Card& card, uint32_t cores, uint64_t bytes, bool read, bool write) {
  std::vector<std::vector<CoreOp>> progs(cores);
  for (uint32_t c = 0; c < cores; ++c) {
    if (read) {
      CoreOp op;
      op.engine = Engine::Load;
      op.addr = c * kRegion;
      op.bytes = bytes;
      op.name = "read";
      progs[c].push_back(op);
    }
    if (write) {
      CoreOp op;
      op.engine = Engine::Store;
      op.addr = c * kRegion + kRegion / 2;
      op.bytes = bytes;
      op.name = "write";
      progs[c].push_back(op);
    }
  }
  return card.run(std::move(progs));
}

double gbps(double bytes, double ps) { return ps > 0 ? bytes / ps * 1e3 : 0.0; }

}  // namespace

nlohmann::json probe_memory(Card& card) {
  const auto n = static_cast<uint32_t>(card.cores().size());
  // Each core streams in a region of its own (stream()): the card needs them all.
  if (static_cast<uint64_t>(n) * kRegion > card.memory().capacity())
    throw InputError("probe memory: " + std::to_string(n) + " cores x " + format_size(kRegion) +
                     " regions need more than card.memory.capacity (" + format_size(card.memory().capacity()) + ")");
  // Enough traffic that refresh and row effects average out: 2 MiB per core, at least 64 MiB.
  const uint64_t per_core = std::max<uint64_t>(2ull << 20, (64ull << 20) / n);
  nlohmann::json out;
  out["peak_GBps"] = card.memory().peak_bandwidth() / 1e9;
  out["bytes_per_core"] = per_core;
  auto measure = [&](uint32_t cores) {
    const double r = stream(card, cores, per_core, true, false);
    const double w = stream(card, cores, per_core, false, true);
    const double c = stream(card, cores, per_core, true, true);
    const double total = static_cast<double>(per_core) * cores;
    return nlohmann::json{{"cores", cores},
                          {"read_GBps", gbps(total, r)},
                          {"write_GBps", gbps(total, w)},
                          {"copy_GBps", gbps(2 * total, c)}};
  };
  nlohmann::json per = nlohmann::json::array();
  for (uint32_t c = 1; c < n; c *= 2) per.push_back(measure(c));
  per.push_back(measure(n));
  const auto& all = per.back();
  out["read_GBps"] = all["read_GBps"];
  out["write_GBps"] = all["write_GBps"];
  out["copy_GBps"] = all["copy_GBps"];
  out["per_cores"] = per;
  return out;
}

nlohmann::json probe_ring(Card& card) {
  const auto n = static_cast<uint32_t>(card.cores().size());
  // One core has no ring to measure (it printed 0.0 GB/s, and 1.6 PB/s for a core sending to itself).
  if (n < 2)
    throw InputError("probe ring: the card has " + std::to_string(n) + " core; the ring probe needs 2 or more (card.core.count)");
  const uint64_t bytes = 16ull << 20;
  auto flow = [&](uint32_t src, uint32_t dst) {
    std::vector<std::vector<CoreOp>> progs(n);
    CoreOp op;
    op.engine = Engine::Ring;
    op.dst = CoreId{dst};
    op.bytes = bytes;
    progs[src].push_back(op);
    return gbps(static_cast<double>(bytes), card.run(std::move(progs)));
  };
  nlohmann::json out;
  out["link_GBps"] = card.ring().link_bandwidth() / 1e9;
  out["neighbour_GBps"] = n > 1 ? flow(0, 1) : 0.0;
  out["farthest_GBps"] = n > 1 ? flow(0, n / 2) : 0.0;
  out["farthest_hops"] = n > 1 ? card.ring().hops(CoreId{0}, CoreId{n / 2}) : 0;
  {
    // Every core sends to its clockwise neighbour at once: no link is shared.
    std::vector<std::vector<CoreOp>> progs(n);
    for (uint32_t c = 0; c < n; ++c) {
      CoreOp op;
      op.engine = Engine::Ring;
      op.dst = CoreId{(c + 1) % n};
      op.bytes = bytes / 4;
      progs[c].push_back(op);
    }
    out["all_neighbour_GBps"] = gbps(static_cast<double>(bytes / 4) * n, card.run(std::move(progs)));
  }
  {
    // All-to-all: every core sends an equal share to every other core.
    const uint64_t share = std::max<uint64_t>(kStickBytes, (bytes / 4) / n / kStickBytes * kStickBytes);
    std::vector<std::vector<CoreOp>> progs(n);
    for (uint32_t c = 0; c < n; ++c)
      for (uint32_t k = 1; k < n; ++k) {
        CoreOp op;
        op.engine = Engine::Ring;
        op.dst = CoreId{(c + k) % n};
        op.bytes = share;
        progs[c].push_back(op);
      }
    out["all_to_all_GBps"] = gbps(static_cast<double>(share) * n * (n - 1), card.run(std::move(progs)));
  }
  return out;
}

nlohmann::json probe_pcie(Card& card) {
  nlohmann::json sizes = nlohmann::json::array();
  PcieLink& link = card.host_link();
  double t = card.now_ps();
  double h2d = 0, d2h = 0;
  for (uint64_t s = 4096; s <= (1ull << 30); s *= 4) {
    const double a = card.host_transfer(true, s, t);
    const double h = gbps(static_cast<double>(s), a - t);
    t = a;
    const double b = card.host_transfer(false, s, t);
    const double d = gbps(static_cast<double>(s), b - t);
    t = b;
    sizes.push_back({{"bytes", s}, {"h2d_GBps", h}, {"d2h_GBps", d}});
    if (s == (1ull << 30)) {
      h2d = h;
      d2h = d;
    }
  }
  return {{"raw_GBps", link.raw_bandwidth() / 1e9}, {"h2d_GBps", h2d}, {"d2h_GBps", d2h}, {"sizes", sizes}};
}

nlohmann::json probe_pt(Card& card) {
  // A large fp16 tile that fits LX on one core: 256x1024 @ 1024x256 (operands 512 KiB each).
  const uint64_t m = 256, k = 1024, n = 256;
  std::vector<std::vector<CoreOp>> progs(1);
  CoreOp op;
  op.engine = Engine::Pt;
  op.m = m;
  op.k = k;
  op.n = n;
  op.bits = 16;
  op.name = "matmul";
  progs[0].push_back(op);
  const double ps = card.run(std::move(progs));
  const double macs = static_cast<double>(m * k * n);
  return {{"m", m}, {"k", k}, {"n", n}, {"time_us", ps / 1e6},
          {"mac_per_ns_per_core", macs / (ps / 1e3)},
          {"peak_mac_per_ns_per_core", card.core(0).peak_macs_per_ns(16)}};
}

void print_probe(const std::string& name, const nlohmann::json& r) {
  if (name == "memory") {
    std::printf("device memory peak %.1f GB/s, %llu bytes per core\n", r["peak_GBps"].get<double>(),
                static_cast<unsigned long long>(r["bytes_per_core"].get<uint64_t>()));
    std::printf("%6s %12s %12s %12s\n", "cores", "read GB/s", "write GB/s", "copy GB/s");
    for (const auto& row : r["per_cores"])
      std::printf("%6d %12.1f %12.1f %12.1f\n", row["cores"].get<int>(), row["read_GBps"].get<double>(),
                  row["write_GBps"].get<double>(), row["copy_GBps"].get<double>());
  } else if (name == "ring") {
    std::printf("link %.1f GB/s per direction\n", r["link_GBps"].get<double>());
    std::printf("neighbour, one flow        %8.1f GB/s\n", r["neighbour_GBps"].get<double>());
    std::printf("farthest (%2d hops), one flow %6.1f GB/s\n", r["farthest_hops"].get<int>(), r["farthest_GBps"].get<double>());
    std::printf("all cores to neighbour     %8.1f GB/s\n", r["all_neighbour_GBps"].get<double>());
    std::printf("all-to-all                 %8.1f GB/s\n", r["all_to_all_GBps"].get<double>());
  } else if (name == "pcie") {
    std::printf("raw %.1f GB/s per direction\n%12s %10s %10s\n", r["raw_GBps"].get<double>(), "bytes", "H2D GB/s", "D2H GB/s");
    for (const auto& row : r["sizes"])
      std::printf("%12llu %10.2f %10.2f\n", static_cast<unsigned long long>(row["bytes"].get<uint64_t>()),
                  row["h2d_GBps"].get<double>(), row["d2h_GBps"].get<double>());
  } else if (name == "pt") {
    std::printf("fp16 %llux%llux%llu on one core: %.2f us, %.0f MAC/ns/core (peak %.0f)\n",
                static_cast<unsigned long long>(r["m"].get<uint64_t>()),
                static_cast<unsigned long long>(r["k"].get<uint64_t>()),
                static_cast<unsigned long long>(r["n"].get<uint64_t>()), r["time_us"].get<double>(),
                r["mac_per_ns_per_core"].get<double>(), r["peak_mac_per_ns_per_core"].get<double>());
  }
}

}  // namespace vspyre
