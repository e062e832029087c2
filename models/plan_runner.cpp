#include "models/plan_runner.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "models/seeded.h"
#include "sim/engine/error.h"
#include "sim/engine/units.h"

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
  p.tile_max_bytes = card.tile_max_bytes();
  p.sfp_operand_order = card.sfp_operand_order();
  {
    const Lpddr5Timing& t = card.memory().timing();
    p.dma_run_bytes = std::max<uint64_t>(p.dma_request_bytes, std::min<uint64_t>(t.channels * t.row_bytes, p.tile_target_bytes));
  }
  p.sfp.simple = card.sfp_cycles_simple();
  p.sfp.divide = card.sfp_cycles_divide();
  p.sfp.transcendental = card.sfp_cycles_transcendental();
  p.sfp.reduce_across_stick = card.sfp_cycles_reduce_across_stick();
  if (!card.cores().empty()) {
    const Core& c = card.core(0);
    constexpr uint64_t m = 512, k = 2048, n = 512, elements = 1u << 20;
    if (const double t = c.pt_time_ps(m, k, n, 16); t > 0) p.pt_macs_per_ps = static_cast<double>(m * k * n) / t;
    if (const double t = c.sfp_time_ps(elements, 1.0); t > 0) p.sfp_elements_per_ps = static_cast<double>(elements) / t;
    const uint64_t req = c.dma_request_bytes();
    if (const double lat = card.memory().request_latency_ps(req, false, 0.0); lat > 0)
      p.core_dma_bytes_per_ps = static_cast<double>(c.dma_outstanding()) * static_cast<double>(req) / lat;
  }
  p.memory_bytes_per_ps = card.memory().peak_bandwidth() / 1e12;
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
  c.lone_sticks = op.lone_sticks();
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
          c.a_stride = op.a_stride();
          c.b_stride = op.b_stride();
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
          c.reduce_ring = op.reduce_ring();
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

namespace {

// Launch and barrier ops are fixed costs on the SFP's timeline, not an engine's work.
bool is_engine_work(const CoreOp& op) { return !(op.extra_ps > 0 && op.engine == Engine::Sfp && op.elements == 0); }

// How one stage is sampled (card.sample). A stage's tiles fall into stretches that repeat with
// some period (a matmul's K loop and its store; the remainder columns after the full ones); in
// each stretch long enough, the tiles [skip, skip + skipped) are not simulated and take each
// core's time per tile over the tiles [measure, skip) just before them, which follow `warmup`
// tiles of the stretch.
struct SampleRegion {
  uint32_t period = 0, measure = 0, skip = 0, skipped = 0;  // in tiles
  // Per core (index = core): the ops of the measured tiles in the cut program, [from, to).
  std::vector<std::pair<uint32_t, uint32_t>> ops;
};
struct StageSample {
  bool active() const { return !regions.empty(); }
  uint32_t tiles = 0;
  std::vector<SampleRegion> regions;
  uint64_t dma_bytes_all = 0, dma_bytes_kept = 0;
};

// The longest period (in tiles) a sampled stretch may have: a matmul's K loop of 32 tiles and
// its store is one period.
constexpr uint32_t kMaxPeriod = 64;

uint64_t hash_in(uint64_t h, uint64_t v) { return mix64(h ^ v) + 0x9e3779b97f4a7c15ull; }
uint64_t hash_in(uint64_t h, double v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return hash_in(h, b);
}

// Everything about a tile's ops that its timing depends on, short of where its DMA goes: kinds,
// sizes, patterns, compute shapes, fixed costs, ring destinations relative to the core,
// dependencies relative to the tile's first op, and each op's address less the same op's in the
// previous tile [prev, begin) when that has as many ops.
uint64_t tile_signature(const plan::CoreProgram& cp, uint32_t prev, uint32_t begin, uint32_t end) {
  uint64_t h = hash_in(0, static_cast<uint64_t>(end - begin));
  const bool like_prev = prev < begin && begin - prev == end - begin;
  for (uint32_t j = begin; j < end; ++j) {
    const plan::Op& op = cp.ops(static_cast<int>(j));
    h = hash_in(h, static_cast<uint64_t>(op.kind()));
    // How far its data lies from the previous tile's (the same op there): a tile stepping
    // through one tensor and a tile jumping to another part of it are not alike.
    if (like_prev) h = hash_in(h, op.addr() - cp.ops(static_cast<int>(j - (begin - prev))).addr());
    h = hash_in(h, op.bytes());
    h = hash_in(h, op.run_bytes());
    for (const auto& lv : op.levels()) h = hash_in(hash_in(h, lv.count()), lv.stride());
    h = hash_in(h, static_cast<uint64_t>(op.lone_sticks()));
    h = hash_in(h, op.m());
    h = hash_in(h, op.k());
    h = hash_in(h, op.n());
    h = hash_in(h, static_cast<uint64_t>(op.bits()));
    h = hash_in(hash_in(h, static_cast<uint64_t>(op.a_stride())), static_cast<uint64_t>(op.b_stride()));
    h = hash_in(h, op.elements());
    h = hash_in(h, op.cycles_per_element());
    h = hash_in(h, op.fixed_ps());
    h = hash_in(h, op.lx_bytes());
    h = hash_in(h, static_cast<uint64_t>(op.runs()));
    h = hash_in(h, static_cast<uint64_t>(static_cast<int64_t>(op.dst_core()) - static_cast<int64_t>(cp.core())));
    h = hash_in(h, static_cast<uint64_t>(op.deps_size()));
    for (uint32_t d : op.deps()) h = hash_in(h, static_cast<uint64_t>(static_cast<int64_t>(d) - static_cast<int64_t>(begin)));
  }
  return h;
}

// Decides whether `stage` is sampled and, if so, cuts `progs` (stage_programs(stage)) down to the
// simulated tiles. A stage is sampled when every core with ops lists them once, tile by tile in
// ascending order, and every such core runs the same number of tiles, at least min_tiles. Its
// stretches (each repeating with a period of 1-kMaxPeriod tiles on every core) are the ones that
// together skip the most tiles; a gap is dropped when a kept op's counterpart would fall outside
// the kept tiles of its stretch.
StageSample sample_stage(const plan::Stage& stage, const SampleParams& sp, std::vector<std::vector<CoreOp>>& progs) {
  StageSample s;
  if (!sp.enabled) return s;
  std::vector<char> seen(progs.size(), 0);
  std::vector<const plan::CoreProgram*> cps;
  std::vector<std::vector<uint32_t>> starts;  // per listed core: each tile's first op, then the op count
  uint32_t tiles = 0;
  for (const auto& cp : stage.cores()) {
    if (cp.ops_size() == 0) continue;
    if (seen[cp.core()]) return s;
    seen[cp.core()] = 1;
    std::vector<uint32_t> st;
    for (int i = 0; i < cp.ops_size(); ++i) {
      const uint32_t t = cp.ops(i).tile();
      if (i > 0 && t < cp.ops(i - 1).tile()) return s;  // not tile by tile
      if (i == 0 || t != cp.ops(i - 1).tile()) st.push_back(static_cast<uint32_t>(i));
    }
    st.push_back(static_cast<uint32_t>(cp.ops_size()));
    const uint32_t n = static_cast<uint32_t>(st.size() - 1);
    if (!cps.empty() && n != tiles) return s;
    tiles = n;
    cps.push_back(&cp);
    starts.push_back(std::move(st));
  }
  if (cps.empty() || tiles < sp.min_tiles) return s;
  std::vector<std::vector<uint64_t>> sig(cps.size());
  for (size_t c = 0; c < cps.size(); ++c) {
    sig[c].resize(tiles);
    for (uint32_t t = 0; t < tiles; ++t) sig[c][t] = tile_signature(*cps[c], starts[c][t > 0 ? t - 1 : 0], starts[c][t], starts[c][t + 1]);
  }
  // same[Q][t]: tile t and tile t + Q look the same on every core.
  const uint32_t maxq = std::min(kMaxPeriod, tiles / 2);
  std::vector<std::vector<char>> same(maxq + 1);
  for (uint32_t Q = 1; Q <= maxq; ++Q) {
    same[Q].assign(tiles, 0);
    for (uint32_t t = 0; t + Q < tiles; ++t) {
      bool eq = true;
      for (size_t c = 0; c < cps.size() && eq; ++c) eq = sig[c][t] == sig[c][t + Q];
      same[Q][t] = eq;
    }
  }
  // A kept op after the gap [a, a + S) that depends on a skipped op depends instead on its
  // counterpart S tiles earlier, which must lie in the stretch (from p).
  auto deps_ok = [&](uint32_t p, uint32_t a, uint32_t S) {
    for (size_t c = 0; c < cps.size(); ++c) {
      const auto& st = starts[c];
      const int64_t R = static_cast<int64_t>(st[a + S]) - st[a];
      for (uint32_t j = st[a + S]; j < st[tiles]; ++j)
        for (uint32_t d : cps[c]->ops(static_cast<int>(j)).deps())
          if (d >= st[a] && d < st[a + S] && static_cast<int64_t>(d) - R < static_cast<int64_t>(st[p])) return false;
    }
    return true;
  };
  // The stretches that skip the most tiles in all (dynamic programming from the last tile):
  // most[t] is the most tiles skippable in [t, tiles); a stretch taken at t repeats with period
  // Q from t to run_end, measures M tiles after `warmup` and keeps `tail` tiles before run_end.
  std::vector<std::vector<uint32_t>> run_end(maxq + 1);
  for (uint32_t Q = 1; Q <= maxq; ++Q) {
    run_end[Q].assign(tiles + 1, 0);
    uint32_t e = tiles;
    for (uint32_t t = tiles; t-- > 0;) {
      if (!same[Q][t]) e = t;
      run_end[Q][t] = e;  // tiles [t, e + Q) repeat with period Q (when same[Q][t])
    }
  }
  // The gaps of a stretch taken at t with period Q (tiles [t, e) repeating): warmup tiles, then
  // measure tiles and a gap of up to `skip_ratio` times as many, again and again, keeping at
  // least `tail` tiles before e. Measuring along the whole stretch averages over where its tiles'
  // data lie (the channels and rows their addresses reach), which one window would not.
  auto stretch = [&](uint32_t t, uint32_t Q, uint32_t e, std::vector<SampleRegion>* out) {
    const uint32_t M = (sp.measure + Q - 1) / Q * Q;
    const uint32_t G = std::max<uint32_t>(Q, M * sp.skip_ratio / Q * Q);
    uint32_t x = t + sp.warmup, skipped = 0;
    while (x + M + Q + sp.tail <= e) {
      const uint32_t a = x + M;
      const uint32_t S = std::min(G, (e - sp.tail - a) / Q * Q);
      if (out) out->push_back(SampleRegion{Q, x, a, S, {}});
      skipped += S;
      x = a + S;
    }
    return std::make_pair(skipped, x);  // tiles skipped, and the first tile after the last gap
  };
  std::vector<uint32_t> most(tiles + 1, 0);
  std::vector<uint32_t> take(tiles + 1, 0);  // the period of the stretch taken at t (0: none)
  for (uint32_t t = tiles; t-- > 0;) {
    most[t] = most[t + 1];
    for (uint32_t Q = 1; Q <= maxq; ++Q) {
      if (!same[Q][t]) continue;
      // A stretch that repeats with a divisor of Q as far: Q is not its period.
      bool multiple = false;
      for (uint32_t d = 1; d < Q && !multiple; ++d)
        multiple = Q % d == 0 && same[d][t] && run_end[d][t] + d >= run_end[Q][t] + Q;
      if (multiple) continue;
      const auto [S, next] = stretch(t, Q, std::min(tiles, run_end[Q][t] + Q), nullptr);
      if (S > 0 && S + most[next] > most[t]) {
        most[t] = S + most[next];
        take[t] = Q;
      }
    }
  }
  std::vector<SampleRegion> found;
  for (uint32_t t = 0; t < tiles;) {
    const uint32_t Q = take[t];
    if (Q == 0) {
      ++t;
      continue;
    }
    std::vector<SampleRegion> regs;
    const uint32_t next = stretch(t, Q, std::min(tiles, run_end[Q][t] + Q), &regs).second;
    uint32_t lo = t;  // kept tiles since the stretch's start or its previous gap
    for (auto& rg : regs) {
      if (deps_ok(lo, rg.skip, rg.skipped)) found.push_back(std::move(rg));
      lo = rg.skip + rg.skipped;
    }
    t = next;
  }
  if (found.empty()) return s;
  s.tiles = tiles;
  for (auto& reg : found) {
    reg.ops.assign(progs.size(), {0, 0});
    s.regions.push_back(std::move(reg));
  }
  const size_t G = s.regions.size();
  for (size_t c = 0; c < cps.size(); ++c) {
    const uint32_t core = cps[c]->core();
    const auto& st = starts[c];
    std::vector<CoreOp>& prog = progs[core];
    const uint32_t n = static_cast<uint32_t>(prog.size());
    // Gap g holds ops [lo[g], hi[g]); an op in it stands for its counterpart R[g] ops earlier.
    std::vector<uint32_t> lo(G), hi(G), R(G);
    for (size_t g = 0; g < G; ++g) {
      lo[g] = st[s.regions[g].skip];
      hi[g] = st[s.regions[g].skip + s.regions[g].skipped];
      R[g] = hi[g] - lo[g];
    }
    auto gap_of = [&](uint32_t d) -> size_t {  // G when d is in no gap
      const size_t g = static_cast<size_t>(std::upper_bound(lo.begin(), lo.end(), d) - lo.begin());
      return g > 0 && d < hi[g - 1] ? g - 1 : G;
    };
    // A kept op after a gap that depended on an op in it depends on its counterpart instead (the
    // tiles repeat, so the counterpart is the same op R ops earlier).
    constexpr uint32_t kNone = UINT32_MAX;
    std::vector<uint32_t> nidx(n, kNone);
    std::vector<CoreOp> kept;
    kept.reserve(n);
    size_t g = 0;
    for (uint32_t j = 0; j < n;) {
      if (g < G && j == lo[g]) {
        s.regions[g].ops[core] = {nidx[st[s.regions[g].measure]], static_cast<uint32_t>(kept.size())};
        j = hi[g];
        ++g;
        continue;
      }
      CoreOp& op = prog[j];
      DepList deps;
      for (uint32_t d : op.deps) {
        const size_t dg = gap_of(d);
        deps.push_back(nidx[dg == G ? d : d - R[dg]]);
      }
      op.deps = std::move(deps);
      nidx[j] = static_cast<uint32_t>(kept.size());
      kept.push_back(std::move(op));
      ++j;
    }
    for (uint32_t j = 0; j < n; ++j) {
      const plan::Op& pop = cps[c]->ops(static_cast<int>(j));
      if (pop.kind() == plan::Op::DMA_IN || pop.kind() == plan::Op::DMA_OUT) {
        s.dma_bytes_all += pop.bytes();
        if (nidx[j] != kNone) s.dma_bytes_kept += pop.bytes();
      }
    }
    prog = std::move(kept);
  }
  return s;
}

std::string hex(uint64_t a) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(a));
  return b;
}

// Every DMA operation of the stage lies within device memory; one that does not is the plan's
// (or the config's capacity's) error, named before the card runs rather than when a core gets
// there.
void check_addresses(const plan::Stage& stage, const std::vector<std::vector<CoreOp>>& progs, uint64_t capacity) {
  for (size_t c = 0; c < progs.size(); ++c)
    for (const CoreOp& op : progs[c]) {
      if ((op.engine != Engine::Load && op.engine != Engine::Store) || op.bytes == 0) continue;
      const uint64_t end = op.addr + dma_extent(op.bytes, op.run_bytes, op.stride, &op.outer);
      if (end <= capacity && end >= op.addr) continue;
      throw InputError("plan stage '" + stage.name() + "' core " + std::to_string(c) + " op '" + op.name +
                       "': its device-memory bytes [" + hex(op.addr) + ", " + hex(end) +
                       ") reach past card.memory.capacity (" + format_size(capacity) + ", " + hex(capacity) + ")");
    }
}

}  // namespace

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
  double moved_extra = 0;  // the memory's bytes in tiles card.sample skipped (estimated)
  // Every stage's programs first, checked, before the card runs any: a plan's error is named
  // before the card has simulated anything (and before any engine thread has run, whose stacks
  // AddressSanitizer loses track of).
  std::vector<std::vector<std::vector<CoreOp>>> programs;
  programs.reserve(static_cast<size_t>(plan.stages_size()));
  for (const auto& stage : plan.stages()) {
    programs.push_back(stage_programs(stage));
    const auto& progs = programs.back();
    if (progs.size() > n)
      throw InputError("plan stage '" + stage.name() + "' uses core " + std::to_string(progs.size() - 1) +
                       " but the card has " + std::to_string(n) + " cores");
    check_addresses(stage, progs, card.memory().capacity());
  }
  const double dispatch = card.sdsc_dispatch_ps();
  double exec_ps = 0;  // the current SDSC execution's stages so far
  for (int si = 0; si < plan.stages_size(); ++si) {
    const plan::Stage& stage = plan.stages(si);
    auto progs = std::move(programs[static_cast<size_t>(si)]);
    const size_t cores = progs.size();
    const StageSample smp = sample_stage(stage, card.sample(), progs);
    const double start = card.now_ps();
    const double moved_before = ms.get("bytes_read") + ms.get("bytes_written");
    double ps = card.run(std::move(progs));
    if (smp.active()) {
      // Each core's skipped tiles take its time per tile over the tiles measured just before each
      // gap; the stage ends when the last core does. Busy times grow by the measured tiles' busy
      // times in proportion to the tiles skipped, the memory's bytes by the skipped DMA bytes'.
      std::vector<double> per_tile_sum(smp.regions.size(), 0.0);
      uint32_t n_cores = 0;
      double end = start;
      for (size_t c = 0; c < cores; ++c) {
        const Core& core = card.core(static_cast<uint32_t>(c));
        const auto& prog = core.program();
        const auto& res = core.results();
        bool sampled_core = false;
        double extra = 0;
        // latest[j]: the latest end among the core's ops [0, j) (its start when none).
        std::vector<double> latest(prog.size() + 1, core.start_ps());
        for (size_t j = 0; j < prog.size(); ++j) latest[j + 1] = std::max(latest[j], res[j].end_ps);
        for (size_t g = 0; g < smp.regions.size(); ++g) {
          const SampleRegion& rg = smp.regions[g];
          const auto [from, to] = rg.ops[c];
          if (to == 0) continue;  // a core with no ops here
          sampled_core = true;
          const double measured = static_cast<double>(rg.skip - rg.measure);
          const double per_tile = (latest[to] - latest[from]) / measured;
          per_tile_sum[g] += per_tile;
          extra += per_tile * rg.skipped;
          const double k = rg.skipped / measured;
          for (uint32_t j = from; j < to; ++j) {
            const CoreOp& op = prog[j];
            if (is_engine_work(op)) busy[static_cast<int>(op.engine)][c] += k * (res[j].end_ps - res[j].start_ps);
          }
        }
        n_cores += sampled_core;
        if (!prog.empty()) end = std::max(end, core.finish_ps() + extra);
      }
      ps = end - start;
      const double moved_stage = ms.get("bytes_read") + ms.get("bytes_written") - moved_before;
      if (smp.dma_bytes_kept > 0)
        moved_extra +=
            moved_stage * (static_cast<double>(smp.dma_bytes_all) / static_cast<double>(smp.dma_bytes_kept) - 1.0);
      for (size_t g = 0; g < smp.regions.size(); ++g) {
        const SampleRegion& rg = smp.regions[g];
        r.sampled.push_back({stage.name(), smp.tiles, rg.period, rg.measure, rg.skip, rg.skipped,
                             n_cores ? per_tile_sum[g] / n_cores : 0.0});
      }
    }
    // An SDSC execution (its stages: the op and any ring combines) lasts at least
    // card.sdsc_dispatch from its start to the next one's; a shorter one waits at its end.
    if (!stage.sdsc().empty()) {
      if (si == 0 || plan.stages(si - 1).sdsc().empty() || plan.stages(si - 1).execution() != stage.execution())
        exec_ps = 0;
      exec_ps += ps;
      const bool last = si + 1 >= plan.stages_size() || plan.stages(si + 1).sdsc().empty() ||
                        plan.stages(si + 1).execution() != stage.execution();
      if (last && exec_ps < dispatch) {
        card.idle(dispatch - exec_ps);
        r.dispatch_ps += dispatch - exec_ps;
        ps += dispatch - exec_ps;
      }
    }
    r.kernel_ps += ps;
    r.stage_ps.emplace_back(stage.name(), ps);
    for (size_t c = 0; c < cores; ++c) {
      const Core& core = card.core(static_cast<uint32_t>(c));
      const auto& prog = core.program();
      const auto& res = core.results();
      for (size_t i = 0; i < prog.size() && i < res.size(); ++i) {
        const CoreOp& op = prog[i];
        if (!is_engine_work(op)) continue;
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
  const double moved = ms.get("bytes_read") + ms.get("bytes_written") - moved0 + moved_extra;
  const double mem_frac = peak > 0 ? moved / (peak * T * 1e-12) : 0;
  r.resources = {{"lpddr5", mem_frac},
                 {"dma_load", max_of[static_cast<int>(Engine::Load)]},
                 {"dma_store", max_of[static_cast<int>(Engine::Store)]},
                 {"pt", max_of[static_cast<int>(Engine::Pt)]},
                 {"sfp", max_of[static_cast<int>(Engine::Sfp)]},
                 {"ring", max_of[static_cast<int>(Engine::Ring)]},
                 {"launch", r.launch_ps / T},
                 {"dispatch", r.dispatch_ps / T}};
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
  nlohmann::json sampling = nlohmann::json::array();
  for (const auto& x : sampled)
    sampling.push_back({{"stage", x.stage},
                        {"tiles", x.tiles},
                        {"period_tiles", x.period},
                        {"measured_from", x.measure},
                        {"skipped_from", x.first},
                        {"skipped_tiles", x.skipped},
                        {"time_per_tile_us", x.per_tile_ps / 1e6}});
  return {{"kernel_time_us", kernel_ps / 1e6},
          {"launch_us", launch_ps / 1e6},
          {"dispatch_us", dispatch_ps / 1e6},
          {"cores_used", cores_used},
          {"per_core", pc},
          {"utilisation", {{"pt_mean", pt_sum / k}, {"pt_max", pt_max}, {"sfp_mean", sfp_sum / k}, {"sfp_max", sfp_max}}},
          {"bytes", {{"lpddr5_read", lpddr5_read}, {"lpddr5_write", lpddr5_write}, {"lx", lx}, {"ring", ring}}},
          {"bottleneck", bottleneck},
          {"bottleneck_fraction", bottleneck_fraction},
          {"resources", resources},
          {"stages", stages},
          {"sampled_stages", sampling}};
}

std::string format_result(const PlanResult& r) {
  const nlohmann::json j = r.to_json();
  std::string s;
  char buf[256];
  if (r.dispatch_ps > 0)
    std::snprintf(buf, sizeof buf, "kernel time      %.3f us (launch %.3f us, SDSCs waiting for dispatch %.3f us), %u cores\n",
                  r.kernel_ps / 1e6, r.launch_ps / 1e6, r.dispatch_ps / 1e6, r.cores_used);
  else
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
  if (!r.sampled.empty()) {
    // card.sample: say plainly that these times are partly extrapolated.
    std::map<std::string, std::pair<uint32_t, uint32_t>> by_stage;  // skipped, tiles
    std::vector<std::string> order;
    for (const auto& x : r.sampled) {
      auto [it, fresh] = by_stage.try_emplace(x.stage, 0u, x.tiles);
      if (fresh) order.push_back(x.stage);
      it->second.first += x.skipped;
    }
    for (const auto& name : order) {
      std::snprintf(buf, sizeof buf, "sampled          %s: %u of %u tiles not simulated (card.sample)\n", name.c_str(),
                    by_stage[name].first, by_stage[name].second);
      s += buf;
    }
  }
  return s;
}

}  // namespace vspyre
