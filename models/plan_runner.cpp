#include "models/plan_runner.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "sim/engine/error.h"

namespace vspyre {

plan::CardParams plan_card_params(Card& card) {
  plan::CardParams p;
  p.cores = static_cast<uint32_t>(card.cores().size());
  if (!card.cores().empty()) {
    p.lx_usable = card.core(0).lx_usable();
    p.pt_rows = card.core(0).pt_rows();
    p.corelets = card.core(0).corelets();
    p.dma_request_bytes = card.core(0).dma_request_bytes();
  }
  p.stick_bytes = static_cast<uint32_t>(kStickBytes);
  p.launch_overhead_ps = card.launch_overhead_ps();
  p.tile_target_bytes = card.tile_target_bytes();
  p.sfp_primary_order = card.sfp_primary_order();
  {
    const Lpddr5Timing& t = card.memory().timing();
    p.dma_run_bytes = std::max<uint64_t>(p.dma_request_bytes, std::min<uint64_t>(t.channels * t.row_bytes, p.tile_target_bytes));
  }
  p.sfp.simple = card.sfp_cycles_simple();
  p.sfp.divide = card.sfp_cycles_divide();
  p.sfp.transcendental = card.sfp_cycles_transcendental();
  p.sfp.reduce_across_stick = card.sfp_cycles_reduce_across_stick();
  return p;
}

namespace {

// Outer levels of a multi-level strided DMA become pieces of one CoreOp up to this many pieces;
// beyond it the CoreOp approximates the addresses with the innermost stride.
constexpr uint64_t kMaxDmaPieces = 4096;

// The DMA fields of `c` for a DMA_IN / DMA_OUT plan op.
void set_dma(CoreOp& c, const plan::Op& op) {
  c.engine = op.kind() == plan::Op::DMA_IN ? Engine::Load : Engine::Store;
  c.addr = op.addr();
  c.bytes = op.bytes();
  const auto& lv = op.levels();
  if (lv.empty()) return;
  uint64_t pieces = 1;
  for (int i = 1; i < lv.size(); ++i) pieces *= lv[i].count();
  c.run_bytes = op.run_bytes();
  c.stride = lv[0].stride();
  if (pieces > kMaxDmaPieces || pieces == 1) return;
  // One CoreOp: the piece (the innermost level), repeated over the outer levels.
  c.bytes = op.run_bytes() * lv[0].count();
  c.outer.reserve(static_cast<size_t>(lv.size() - 1));
  for (int i = 1; i < lv.size(); ++i) c.outer.push_back(DmaLevel{lv[i].count(), lv[i].stride()});
}

}  // namespace

std::vector<std::vector<CoreOp>> stage_programs(const plan::Stage& stage) {
  uint32_t top = 0;
  for (const auto& cp : stage.cores()) top = std::max(top, cp.core() + 1);
  std::vector<std::vector<CoreOp>> progs(top);
  for (const auto& cp : stage.cores()) {
    auto& out = progs[cp.core()];
    // One CoreOp per plan op, built in place. A core listed twice in the stage gets both lists.
    const uint32_t first = static_cast<uint32_t>(out.size());
    out.reserve(out.size() + static_cast<size_t>(cp.ops_size()));
    for (int i = 0; i < cp.ops_size(); ++i) {
      const plan::Op& op = cp.ops(i);
      CoreOp& c = out.emplace_back();
      c.name = op.name();
      c.extra_ps = op.fixed_ps();
      for (uint32_t d : op.deps()) {
        if (d >= static_cast<uint32_t>(i))
          throw InputError("plan stage '" + stage.name() + "' core " + std::to_string(cp.core()) + " op " +
                           std::to_string(i) + ": depends on a later op " + std::to_string(d));
        c.deps.push_back(first + d);
      }
      switch (op.kind()) {
        case plan::Op::DMA_IN:
        case plan::Op::DMA_OUT:
          set_dma(c, op);
          break;
        case plan::Op::PT:
          c.engine = Engine::Pt;
          c.m = op.m();
          c.k = op.k();
          c.n = op.n();
          c.bits = op.bits() ? static_cast<int>(op.bits()) : 16;
          break;
        case plan::Op::SFP:
        case plan::Op::COMBINE:
          c.engine = Engine::Sfp;
          c.elements = op.elements();
          c.cycles_per_element = op.cycles_per_element();
          break;
        case plan::Op::RING_SEND:
          c.engine = Engine::Ring;
          c.dst = CoreId{op.dst_core()};
          c.bytes = op.bytes();
          if (op.runs() > 1) c.run_bytes = (op.bytes() + op.runs() - 1) / op.runs();
          break;
        default:  // BARRIER, LAUNCH: a fixed cost on the SFP's timeline
          c.engine = Engine::Sfp;
          c.elements = 0;
          break;
      }
    }
  }
  return progs;
}

PlanResult run_plan(Card& card, const plan::Plan& plan) {
  PlanResult r;
  const uint32_t n = static_cast<uint32_t>(card.cores().size());
  std::vector<double> busy[kEngineCount];
  for (auto& b : busy) b.assign(n, 0.0);
  std::vector<char> used(n, 0);
  // Bytes the memory actually moved, for its busy fraction: its bytes_read leaves out reads served
  // by a coalesced read in flight, which cost no bus time.
  StatGroup& ms = card.memory().stats();
  const double moved0 = ms.get("bytes_read") + ms.get("bytes_written");
  for (const auto& stage : plan.stages()) {
    auto progs = stage_programs(stage);
    if (progs.size() > n)
      throw InputError("plan stage '" + stage.name() + "' uses core " + std::to_string(progs.size() - 1) +
                       " but the card has " + std::to_string(n) + " cores");
    const size_t cores = progs.size();
    const double ps = card.run(std::move(progs));
    r.kernel_ps += ps;
    r.stage_ps.emplace_back(stage.name(), ps);
    for (size_t c = 0; c < cores; ++c) {
      const Core& core = card.core(static_cast<uint32_t>(c));
      const auto& prog = core.program();
      const auto& res = core.results();
      for (size_t i = 0; i < prog.size() && i < res.size(); ++i) {
        const CoreOp& op = prog[i];
        if (op.extra_ps > 0 && op.engine == Engine::Sfp && op.elements == 0) continue;  // launch / barrier: not engine work
        used[c] = 1;
        busy[static_cast<int>(op.engine)][c] += res[i].end_ps - res[i].start_ps;
      }
    }
    for (const auto& cp : stage.cores())
      for (const auto& op : cp.ops()) {
        switch (op.kind()) {
          case plan::Op::DMA_IN: r.lpddr5_read += op.bytes(); r.lx += op.bytes(); break;
          case plan::Op::DMA_OUT: r.lpddr5_write += op.bytes(); r.lx += op.bytes(); break;
          case plan::Op::RING_SEND: r.ring += op.bytes(); r.lx += 2 * op.bytes(); break;
          case plan::Op::LAUNCH: r.launch_ps += op.fixed_ps(); break;
          default: r.lx += op.lx_bytes(); break;
        }
      }
  }
  const double T = r.kernel_ps > 0 ? r.kernel_ps : 1.0;
  double max_of[kEngineCount] = {};
  for (uint32_t c = 0; c < n; ++c) {
    if (!used[c]) continue;
    ++r.cores_used;
    CoreBusy b;
    b.core = c;
    b.load = busy[static_cast<int>(Engine::Load)][c] / T;
    b.store = busy[static_cast<int>(Engine::Store)][c] / T;
    b.pt = busy[static_cast<int>(Engine::Pt)][c] / T;
    b.sfp = busy[static_cast<int>(Engine::Sfp)][c] / T;
    b.ring = busy[static_cast<int>(Engine::Ring)][c] / T;
    r.per_core.push_back(b);
    for (int e = 0; e < kEngineCount; ++e) max_of[e] = std::max(max_of[e], busy[e][c] / T);
  }
  const double peak = card.memory().peak_bandwidth();  // bytes/s
  const double moved = ms.get("bytes_read") + ms.get("bytes_written") - moved0;
  const double mem_frac = peak > 0 ? moved / (peak * T * 1e-12) : 0;
  r.resources = {{"lpddr5", mem_frac},
                 {"dma_load", max_of[static_cast<int>(Engine::Load)]},
                 {"dma_store", max_of[static_cast<int>(Engine::Store)]},
                 {"pt", max_of[static_cast<int>(Engine::Pt)]},
                 {"sfp", max_of[static_cast<int>(Engine::Sfp)]},
                 {"ring", max_of[static_cast<int>(Engine::Ring)]},
                 {"launch", r.launch_ps / T}};
  for (const auto& [k, v] : r.resources.items())
    if (v.get<double>() > r.bottleneck_fraction) {
      r.bottleneck_fraction = v.get<double>();
      r.bottleneck = k;
    }
  return r;
}

nlohmann::json PlanResult::to_json() const {
  nlohmann::json pc = nlohmann::json::array();
  double pt_sum = 0, sfp_sum = 0, pt_max = 0, sfp_max = 0;
  for (const auto& b : per_core) {
    pc.push_back({{"core", b.core}, {"pt", b.pt}, {"sfp", b.sfp}, {"dma_load", b.load}, {"dma_store", b.store},
                  {"ring", b.ring}});
    pt_sum += b.pt;
    sfp_sum += b.sfp;
    pt_max = std::max(pt_max, b.pt);
    sfp_max = std::max(sfp_max, b.sfp);
  }
  const double k = per_core.empty() ? 1.0 : static_cast<double>(per_core.size());
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& [name, ps] : stage_ps) stages.push_back({{"name", name}, {"time_us", ps / 1e6}});
  return {{"kernel_time_us", kernel_ps / 1e6},
          {"launch_us", launch_ps / 1e6},
          {"cores_used", cores_used},
          {"per_core", pc},
          {"utilisation", {{"pt_mean", pt_sum / k}, {"pt_max", pt_max}, {"sfp_mean", sfp_sum / k}, {"sfp_max", sfp_max}}},
          {"bytes", {{"lpddr5_read", lpddr5_read}, {"lpddr5_write", lpddr5_write}, {"lx", lx}, {"ring", ring}}},
          {"bottleneck", bottleneck},
          {"bottleneck_fraction", bottleneck_fraction},
          {"resources", resources},
          {"stages", stages}};
}

std::string format_result(const PlanResult& r) {
  const nlohmann::json j = r.to_json();
  std::string s;
  char buf[256];
  std::snprintf(buf, sizeof buf, "kernel time      %.3f us (launch %.3f us), %u cores\n", r.kernel_ps / 1e6,
                r.launch_ps / 1e6, r.cores_used);
  s += buf;
  const auto& u = j["utilisation"];
  std::snprintf(buf, sizeof buf, "PT  utilisation  mean %5.1f %%  max %5.1f %%\nSFP utilisation  mean %5.1f %%  max %5.1f %%\n",
                100 * u["pt_mean"].get<double>(), 100 * u["pt_max"].get<double>(), 100 * u["sfp_mean"].get<double>(),
                100 * u["sfp_max"].get<double>());
  s += buf;
  std::snprintf(buf, sizeof buf, "bytes            LPDDR5 read %llu, LPDDR5 write %llu, LX %llu, ring %llu\n",
                static_cast<unsigned long long>(r.lpddr5_read), static_cast<unsigned long long>(r.lpddr5_write),
                static_cast<unsigned long long>(r.lx), static_cast<unsigned long long>(r.ring));
  s += buf;
  std::snprintf(buf, sizeof buf, "bottleneck       %s (%.1f %% of kernel time)\n", r.bottleneck.c_str(),
                100 * r.bottleneck_fraction);
  s += buf;
  for (const auto& [name, ps] : r.stage_ps) {
    std::snprintf(buf, sizeof buf, "  %-40s %10.3f us\n", name.c_str(), ps / 1e6);
    s += buf;
  }
  return s;
}

}  // namespace vspyre
