#include "models/card.h"

#include <algorithm>
#include <queue>

#include "models/sc_ps.h"
#include "models/seeded.h"
#include "sim/engine/simulation.h"

namespace vspyre {

Card::Card(const sc_core::sc_module_name& name, BuildContext& ctx)
    : Component(name, ctx),
      host_port("host_port"),
      m_runs(stats().scalar("runs", "runs", "programs run on the card")),
      m_run_ps(stats().scalar("run_ps", "ps", "simulated time spent running programs")) {
  ParamReader& p = params();
  const TimeValue launch = p.get_time("launch_overhead", "1us",
                                    {"fixed cost per kernel bundle launch", Provenance::Derived,
                                     "measured.md 6a: intercept of time against bytes (configs/spyre.yaml)"});
  // Every SDSC execution takes the card at least this long from its start to the next one's: the
  // next SDSC's programs reach the cores, and all cores report the current one done, only so
  // fast. Seen where SDSCs are tiny: the cost model's coarse-tiled softmaxes (7 SDSCs a tile, five
  // of them on a few rows in LX) cost the card 2.5-3 us a tile at 2-32 cores, where vspyre's
  // SDSCs alone took 0.7-1.2 us (bench/validation/README.md, stop 53).
  const TimeValue dispatch = p.get_time(
      "sdsc_dispatch", "450ns",
      {"the shortest time from one SDSC execution's start to the next one's (dispatch and completion round trip)",
       Provenance::Estimate, "fit to validation section 7o's coarse-tiled softmaxes (bench/validation/README.md, stop 53)"});
  // A launch that reaches the cores one after another (a doorbell passed around the ring,
  // arbitration) starts core i at i x launch_skew, on top of its jitter below: a what-if for how
  // far a prediction hangs on the cores starting in ring order (bench/validation/README.md,
  // stops 30 and 31).
  const TimeValue skew = p.get_time("launch_skew", "0ns",
                                    {"core i starts i x this after core 0, on top of card.launch_jitter (0: no order)",
                                     Provenance::Estimate, "not public; see bench/validation/README.md (stops 30, 31)"});
  // No card starts its cores in the same picosecond. Each core starts at its own time within
  // launch_jitter of the launch, drawn from card.launch_seed (again at every launch). It is the
  // cores' order more than the size that matters: with the request model, any jitter from 1 to
  // 50 ns gives the validation table within 0.1 point; starting all cores in the same picosecond
  // (0) is a singular case that moved 190 of the 712 rows by more than 5 % against any jittered
  // start. With core.dma.op_jitter as well, three seeds move 25 rows by more than 5 % and the
  // table's MAPE by 0.04 point (bench/validation/README.md, 2026-12-04, stop 31).
  const TimeValue jitter = p.get_time("launch_jitter", "5ns",
                                      {"each core starts at a seeded uniform time in [0, this) after the launch "
                                       "(0: every core starts in the same picosecond)",
                                       Provenance::Estimate, "not public; bench/validation/README.md (stop 31)"});
  m_launch_seed = static_cast<uint64_t>(
      p.get_int("launch_seed", 1, {"seed of the cores' start times (card.launch_jitter) and of each DMA operation's "
                                   "setup jitter (core.dma.op_jitter)", Provenance::Override},
                0));
  ParamReader& plan = p.group("plan", "how bundles are lowered to per-core schedules");
  m_tile_target = plan.get_size("tile_target", "64KiB",
                                {"streamed HBM bytes per core per tile above which work is tiled for DMA/compute overlap",
                                 Provenance::Estimate});
  m_tile_max = plan.get_size(
      "tile_max", "992KiB",
      {"streamed bytes per core per tile a plan buffers at most: a larger LX keeps more data resident, not "
       "larger tiles (whose longer pipeline fill and drain made kernels slower)",
       Provenance::Estimate, "half the default card's usable LX (2 MiB less 64 KiB reserved): its plans are unchanged"});
  if (m_tile_max < kStickBytes) plan.refuse("tile_max", "must be at least one 128 B stick");
  {
    const std::string order = plan.get_choice(
        "sfp_operand_order", "layout_inner", {"primary", "layout", "layout_sticks", "layout_inner"},
        {"the order a DMA walks an SFP operand whose device-memory layout orders its dims unlike the op's "
         "primaryDsInfo_ layout: primary (the SFP's streaming order, which its LX image follows; runs only as long "
         "as both orders keep contiguous), layout (its own layout, whole runs), layout_sticks (its own layout, a "
         "stick at a time: no two sticks in a row are neighbours in LX too) or layout_inner (its own layout, one "
         "run per stretch of its innermost dim: the DMA gathers those sticks from LX at one stride)",
         Provenance::Estimate});
    using O = plan::OperandOrder;
    m_sfp_operand_order = order == "primary"         ? O::primary
                          : order == "layout_sticks" ? O::layout_sticks
                          : order == "layout_inner"  ? O::layout_inner
                                                     : O::layout;
  }
  ParamReader& sfp = plan.group("sfp_cycles", "SFP cycles per element per lane, by op class (lower.cpp sfp_cost_class)");
  // Cycles are not negative (0: the op class costs nothing, a what-if).
  m_sfp_simple = sfp.get_real("simple", 1.0, {"add, sub, mul, neg, max, sum, identity, relu, ...", Provenance::Estimate}, 0);
  m_sfp_divide = sfp.get_real("divide", 4.0, {"realdiv, reciprocal, ...", Provenance::Estimate}, 0);
  m_sfp_transcendental = sfp.get_real(
      "transcendental", 4.0,
      {"exp, log, gelu, tanh, sigmoid, sqrt, ...", Provenance::Estimate,
       "measured.md 6a: exp/gelu take the same time as neg when HBM-bound, so only an upper bound is known"},
      0);
  m_sfp_reduce_across_stick = sfp.get_real(
      "reduce_across_stick", 22.0,
      {"cycles per element of a reduction over the stick dim (a row max/sum across the lanes); 0: its op class",
       Provenance::Estimate, "fit to amax 4096x2048 on 1 core (validation section 7; configs/spyre.yaml)"},
      0);
  {
    // Not the card's: how much of a long stage is simulated. Off: every tile of every stage.
    ParamReader& smp = p.group("sample", "sampled simulation of long periodic stages (a speed choice, not the card's)");
    m_sample.enabled = smp.get_bool(
        "enabled", false,
        {"sampled simulation: in a stage whose cores all run at least min_tiles tiles, each stretch of tiles "
         "that repeats (with a period of 1-64 tiles) is simulated for warmup tiles, then measure tiles, then "
         "skip_ratio x measure tiles are skipped and take each core's measured time per tile, and so on, "
         "keeping its last tail tiles; results are estimates (bench/validation/README.md, 2026-12-04)",
         Provenance::Override});
    m_sample.min_tiles = static_cast<uint32_t>(smp.get_int(
        "min_tiles", 64, {"a stage with fewer tiles per core is simulated whole", Provenance::Override}, 4, 1 << 30));
    m_sample.warmup = static_cast<uint32_t>(smp.get_int(
        "warmup", 4, {"tiles simulated before the measurement (not measured)", Provenance::Override}, 1, 1 << 20));
    m_sample.measure = static_cast<uint32_t>(
        smp.get_int("measure", 32,
                    {"tiles whose time per tile stands for the skipped ones (rounded up to whole periods)",
                     Provenance::Override},
                    1, 1 << 20));
    m_sample.skip_ratio = static_cast<uint32_t>(smp.get_int(
        "skip_ratio", 2, {"tiles skipped after each measured window, per tile measured", Provenance::Override}, 1,
        1 << 20));
    m_sample.tail = static_cast<uint32_t>(smp.get_int(
        "tail", 4, {"last tiles simulated (the stage's drain)", Provenance::Override}, 1, 1 << 20));
  }
  const std::string scheduler = p.get_choice(
      "scheduler", "auto", {"auto", "threads", "events"},
      {"how the cores' engines are run: threads (one SystemC thread per engine, each running ahead by "
       "at most sim.quantum), events (one event loop for the card: every operation, DMA request and ring "
       "descriptor in time order), auto (events with the flow DMA model, threads with the request model)",
       Provenance::Override});
  m_ties_high = p.get_choice(
                    "tie_order", "lower_core", {"lower_core", "higher_core"},
                    {"events scheduler: which engine runs first when several are due at the same picosecond "
                     "(the lower core's, then its load before its store; or the reverse). Not the card's: a "
                     "check that a result does not hang on the order of simultaneous requests",
                     Provenance::Override}) == "higher_core";
  m_cores = build_children<Core>("core", "Core", 32);
  bool all_flow = !m_cores.empty();
  for (const Core* c : m_cores) all_flow = all_flow && c->dma_flow();
  m_events = scheduler == "events" || (scheduler == "auto" && all_flow);
  if (m_ties_high && !m_events)
    params().refuse("tie_order", "higher_core orders the events scheduler's ties, but " + params().config_path() +
                                     ".scheduler is '" + scheduler + "' and runs threads here (set it to events)");
  if (m_events)
    for (Core* c : m_cores) c->set_event_driven();
  const double hz = m_cores.empty() ? 1.5e9 : m_cores.front()->clock_hz();  // for times given in cycles
  m_launch_overhead_ps = launch.to_ps(hz);
  m_sdsc_dispatch_ps = dispatch.to_ps(hz);
  m_launch_skew_ps = skew.to_ps(hz);
  m_launch_jitter_ps = static_cast<uint64_t>(jitter.to_ps(hz));
  m_ring = build_child<Ring>("ring", "Ring");
  m_memory = build_child<Lpddr5>("memory", "Lpddr5");
  m_host = build_child<PcieLink>("host_link", "PcieLink");
  connect({"core_*.mem -> memory.port", "core_*.ring -> ring.port"});
  host_port.bind(m_host->port);
  // run() advances time to the last operation's end even when nothing is scheduled; that is intended.
  sc_core::sc_report_handler::set_actions(sc_core::SC_ID_NO_SC_START_ACTIVITY_, sc_core::SC_DO_NOTHING);
  m_ring->set_stations(static_cast<uint32_t>(m_cores.size()));
  m_memory->set_requesters(static_cast<uint32_t>(m_cores.size()));
  stats().formula("cores", [this] { return static_cast<double>(m_cores.size()); }, "cores", "cores on the card");
  tlm_utils::tlm_quantumkeeper::set_global_quantum(sc_core::sc_time(ctx.sim.quantum_ps(), sc_core::SC_PS));
}

double Card::now_ps() const { return now_ps_fast(); }

void Card::idle(double ps) {
  if (!(ps > 0)) return;
  if (sc_core::sc_get_status() == sc_core::SC_ELABORATION) sc_core::sc_start(sc_core::SC_ZERO_TIME);
  sc_core::sc_start(sc_core::sc_time(ps, sc_core::SC_PS));
}

uint64_t Card::launch_jitter_ps(uint64_t launch, uint32_t core) const {
  return seeded_below(m_launch_jitter_ps, m_launch_seed, launch, core);
}

double Card::host_transfer(bool to_device, uint64_t bytes, double t_ps) {
  // Multi-sockets complete their bindings at the end of elaboration: make sure it has happened.
  if (sc_core::sc_get_status() == sc_core::SC_ELABORATION) sc_core::sc_start(sc_core::SC_ZERO_TIME);
  tlm::tlm_generic_payload trans;
  trans.set_command(to_device ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND);
  trans.set_data_length(static_cast<unsigned>(std::min<uint64_t>(bytes, UINT32_MAX)));
  trans.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  const double base = now_ps();
  sc_core::sc_time delay(std::max(0.0, t_ps - base), sc_core::SC_PS);
  host_port->b_transport(trans, delay);
  return base + delay.to_seconds() * 1e12;
}

double Card::run(std::vector<std::vector<CoreOp>> programs) {
  if (programs.size() > m_cores.size())
    throw InputError(path() + ": a plan for " + std::to_string(programs.size()) + " cores does not fit a card of " +
                     std::to_string(m_cores.size()) + " cores");
  const double start = now_ps();
  const uint64_t launch = m_launches++;
  // The key of this launch's draws in the cores (each DMA operation's setup jitter).
  const uint64_t key = mix64(mix64(m_launch_seed) ^ launch);
  for (size_t i = 0; i < m_cores.size(); ++i)
    m_cores[i]->load(i < programs.size() ? std::move(programs[i]) : std::vector<CoreOp>{},
                     start + static_cast<double>(i) * m_launch_skew_ps +
                         static_cast<double>(launch_jitter_ps(launch, static_cast<uint32_t>(i))),
                     key);
  if (m_events) {
    // Multi-sockets complete their bindings at the end of elaboration.
    if (sc_core::sc_get_status() == sc_core::SC_ELABORATION) sc_core::sc_start(sc_core::SC_ZERO_TIME);
    run_events();
  } else {
    for (Core* c : m_cores) c->go().notify(sc_core::SC_ZERO_TIME);
    try {
      sc_core::sc_start();
    } catch (const sc_core::sc_report&) {
      // An engine thread threw: SystemC reports it as an uncaught exception of its own; rethrow
      // the thread's (an InputError stays one, with its message).
      for (Core* c : m_cores)
        if (c->error()) std::rethrow_exception(c->error());
      throw;
    }
  }
  double end = start;
  for (Core* c : m_cores) {
    if (!c->finished())
      throw std::logic_error(c->path() + ": program did not finish (simulation starved)");
    end = std::max(end, c->finish_ps());
  }
  // Let simulated time catch up with the last operation, so the next run starts after it.
  if (end > now_ps()) {
    sc_core::sc_start(sc_core::sc_time(end - now_ps(), sc_core::SC_PS));
  }
  ++m_runs;
  m_run_ps += end - start;
  return end - start;
}

namespace {
constexpr double kEventAdvancePs = 1e6;
}  // namespace

void Card::run_events() {
  // Every engine of every core is one entry; an engine is queued with the time its next operation
  // can start (its previous operation ended and the operation's dependencies are done) and the
  // loop always runs the earliest. An operation's end follows from its start without waiting (a
  // flow-model DMA operation is one call to the memory, PT and SFP are arithmetic), so the whole
  // card runs on one host thread, with no thread switch per operation. A request-model DMA
  // operation runs one step per request and a ring operation one per descriptor, each at its
  // issue time. Ties go to the lower core, then engine (a core's load before its store), or with
  // card.tie_order higher_core to the higher.
  struct Entry {
    uint32_t core = 0;
    Engine engine = Engine::Load;
    size_t next = 0;  // index into the core's engine_ops(engine)
    double t = 0;     // when the engine's previous operation ended
    bool queued = false;
    Core::Progress progress;
  };
  std::vector<Entry> entries;
  entries.reserve(m_cores.size() * kEngineCount);
  for (uint32_t c = 0; c < m_cores.size(); ++c)
    for (int e = 0; e < kEngineCount; ++e)
      entries.push_back({c, static_cast<Engine>(e), 0, m_cores[c]->start_ps(), false, {}});
  // (time, rank): the earliest first, then the lowest rank, which is the entry's index or, with
  // tie_order higher_core, its index from the end.
  using Item = std::pair<double, uint32_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> queue;
  const uint32_t last = static_cast<uint32_t>(entries.size()) - 1;
  auto rank = [&](uint32_t x) { return m_ties_high ? last - x : x; };  // its own inverse
  auto try_queue = [&](uint32_t x) {
    Entry& en = entries[x];
    const Core& core = *m_cores[en.core];
    const std::vector<uint32_t>& ops = core.engine_ops(en.engine);
    if (en.queued || en.next >= ops.size()) return;
    double t = en.t;
    for (uint32_t d : core.program()[ops[en.next]].deps) {
      if (!core.op_done(d)) return;  // queued again when that dependency ends
      t = std::max(t, core.results()[d].end_ps);
    }
    en.queued = true;
    queue.emplace(t, rank(x));
  };
  for (uint32_t x = 0; x < entries.size(); ++x) try_queue(x);
  while (!queue.empty()) {
    const auto [at, r] = queue.top();
    queue.pop();
    const uint32_t x = rank(r);
    // Simulated time follows the loop from behind: it catches up with an operation's time when it
    // is more than kEventAdvancePs behind (the memory forgets its calendar's past by it). Models
    // are called with their delay from now, rounded to SystemC's resolution, so when time catches
    // up must not depend on the quantum: it does not.
    if (at - now_ps() > kEventAdvancePs) sc_core::sc_start(sc_core::sc_time(at - now_ps(), sc_core::SC_PS));
    Entry& en = entries[x];
    Core& core = *m_cores[en.core];
    const uint32_t i = core.engine_ops(en.engine)[en.next];
    double next = 0;
    if (!core.step(i, at, en.progress, next)) {
      queue.emplace(next, rank(x));  // still queued: the operation's next request or descriptor
      continue;
    }
    en.t = core.results()[i].end_ps;
    en.queued = false;
    ++en.next;
    {
      // The engine's operation after next is touched when this one ends, long after now: fetch it
      // into the cache meanwhile (a program's operations are 200-odd bytes each, and 160 engines
      // walking their own are too many streams for the hardware to prefetch).
      const std::vector<uint32_t>& ops = core.engine_ops(en.engine);
      if (en.next + 1 < ops.size()) {
        const char* p = reinterpret_cast<const char*>(&core.program()[ops[en.next + 1]]);
        for (size_t b = 0; b < sizeof(CoreOp); b += 64) __builtin_prefetch(p + b);
      }
    }
    // The operation's end may let any engine of its core start its next operation.
    const uint32_t first = en.core * kEngineCount;
    for (uint32_t e = 0; e < kEngineCount; ++e) try_queue(first + e);
  }
}

VSPYRE_REGISTER_COMPONENT(Card, "Card", "the Spyre card: cores on a ring, LPDDR5, PCIe host link")

}  // namespace vspyre
