#include "models/core.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "models/sc_ps.h"
#include "models/seeded.h"
#include "sim/engine/log.h"
#include "sim/engine/simulation.h"

namespace vspyre {
namespace {
DebugFlag g_dbg("core", "every operation a core starts and ends");

double now_ps() { return now_ps_fast(); }
}  // namespace

const char* engine_name(Engine e) {
  switch (e) {
    case Engine::Load: return "dma_load";
    case Engine::Store: return "dma_store";
    case Engine::Pt: return "pt";
    case Engine::Sfp: return "sfp";
    case Engine::Ring: return "ring";
  }
  return "?";
}

Core::Core(const sc_core::sc_module_name& name, BuildContext& ctx)
    : Component(name, ctx),
      mem("mem"),
      ring("ring"),
      m_bytes_in(stats().scalar("bytes_in", "B", "bytes loaded from device memory into LX")),
      m_bytes_out(stats().scalar("bytes_out", "B", "bytes stored from LX to device memory")),
      m_ring_bytes(stats().scalar("ring_bytes", "B", "bytes sent over the ring")),
      m_macs(stats().scalar("macs", "MAC", "multiply-accumulates on the PT arrays")) {
  ParamReader& p = params();
  m_clock_hz = p.get_frequency("clock", "1.5GHz",
                               {"core clock", Provenance::Derived,
                                "98.304 TFLOPS / (32 x 2 x 64 PEs x 8 SIMD x 2 FLOP); not confirmed by IBM"},
                               // Below 1 MHz a kernel's transfers span so many memory-calendar bins
                               // that a run takes hours: a unit typed wrong, not a what-if.
                               "1MHz");
  m_corelets = static_cast<uint32_t>(p.get_int("corelets", 2, {"corelets per core, sharing LX", Provenance::Datasheet}, 1, 16));
  ParamReader& lx = p.group("lx", "LX scratchpad");
  m_lx_size = lx.get_size("size", "2MiB", {"LX scratchpad SRAM per core", Provenance::Datasheet, "IBM"});
  m_lx_reserved = lx.get_size("reserved", "64KiB", {"LX held back for program and debug", Provenance::Measured,
                                                    "torch-spyre scratchpad planning"});
  m_lx_line = lx.get_size(
      "pt_line", "512B",
      {"bytes of one LX read for the PT array's operand feed (sticks of an operand that lie in one line come "
       "in one read)", Provenance::Estimate, "with pt_line_time: fit to the one-core bmm layout cube (validation section 8)"});
  m_lx_line_ps = lx.get_time("pt_line_time", "5ns",
                             {"time the LX takes per line read for the PT array's operand feed (both corelets; 0ns: "
                              "the feed never limits the array)",
                              Provenance::Estimate, "fit to the one-core bmm layout cube (validation section 8)"})
                     .to_ps(m_clock_hz);
  ParamReader& pt = p.group("pt", "PT matmul array, per corelet");
  m_pt_rows = static_cast<uint32_t>(pt.get_int("rows", 8, {"PE rows", Provenance::Datasheet}, 1, 256));
  m_pt_cols = static_cast<uint32_t>(pt.get_int("cols", 8, {"PE columns", Provenance::Datasheet}, 1, 256));
  m_pt_simd = static_cast<uint32_t>(pt.get_int("simd", 8, {"fp16 SIMD ways per PE (2x for 8-bit, 4x for int4)", Provenance::Derived}, 1, 64));
  m_pt_pass_k = static_cast<uint32_t>(pt.get_int(
      "pass_depth", 64, {"reduction depth one pass accumulates before the array drains", Provenance::Estimate}, 1, 1 << 20));
  m_pt_overhead = static_cast<uint32_t>(pt.get_int(
      "pass_overhead", 13,
      {"cycles per pass beyond the rows+cols systolic fill/drain (operand fetch, writeback)", Provenance::Estimate,
       "fit to 1040 MAC/ns/core on one core (measured.md 6d; configs/spyre.yaml)"}, 0, 1 << 20));
  ParamReader& sfp = p.group("sfp", "SFP vector unit, per corelet");
  m_sfp_lanes = static_cast<uint32_t>(sfp.get_int("lanes", 64, {"fp16 lanes", Provenance::Estimate, "hardware.md"}, 1, 4096));
  m_sfp_startup = static_cast<uint32_t>(sfp.get_int("startup", 16, {"pipeline startup cycles per operation", Provenance::Estimate}, 0, 1 << 20));
  ParamReader& dma = p.group("dma", "DMA engines between device memory and LX");
  m_dma_outstanding = static_cast<uint32_t>(dma.get_int(
      "outstanding", 3, {"requests of request_size each DMA engine keeps in flight (its buffer: outstanding x "
                         "request_size bytes; runs shorter than a request fill it with more requests)",
                         Provenance::Estimate,
                         "calibrated: one core's add moves 67-69 GB/s (validation section 7)"}, 1, 1024));
  m_dma_lone_outstanding = static_cast<uint32_t>(dma.get_int(
      "lone_outstanding", 1,
      {"requests each DMA engine keeps in flight for lone sticks (a core's slice whose sticks have no "
       "neighbour it moves: a batch split over the cores in a batch-inner layout), each fetched on its own",
       Provenance::Estimate,
       "the batched matmuls split over the batch (validation section 10): about 200 ns a stick a core, the same "
       "on 8 and 16 cores (configs/spyre.yaml)"},
      1, 1024));
  m_ring_outstanding = static_cast<uint32_t>(dma.get_int(
      "ring_outstanding", 2,
      {"LX-to-LX descriptors (a shuffle's runs over the ring) each engine keeps in flight, each retired "
       "by the receiver's acknowledgement", Provenance::Estimate,
       "with the ring's inject and hop latencies: the canonical shuffle at 7.7 us against 8.72 measured (measured.md 3)"},
      1, 1024));
  m_dma_request = dma.get_size("request_size", "4KiB", {"bytes per DMA request (whole sticks)", Provenance::Estimate});
  m_dma_issue_ps = dma.get_time("issue_interval", "16cycles", {"minimum time between request issues", Provenance::Estimate, "fit to measured.md 3 and the one-core bmm cube (configs/spyre.yaml)"}).to_ps(m_clock_hz);
  m_dma_op_latency_ps = dma.get_time("op_latency", "200ns",
                                     {"time a DMA engine spends on each operation before its first request "
                                      "(descriptor fetch and setup)", Provenance::Estimate, "fit to the validation table (configs/spyre.yaml)"})
                            .to_ps(m_clock_hz);
  m_dma_op_jitter_ps = static_cast<uint64_t>(
      dma.get_time("op_jitter", "5ns",
                   {"each DMA operation's setup takes a further seeded uniform time in [0, this) (from "
                    "card.launch_seed), so that the cores do not keep one order through a kernel",
                    Provenance::Estimate})
          .to_ps(m_clock_hz));
  m_dma_serial_runs = dma.get_choice("run_order", "pipelined", {"pipelined", "serial"},
                                     {"pipelined: a run's requests may leave while the previous run's are in "
                                      "flight; serial: an operation whose runs are longer than one stick starts "
                                      "each run only when the previous run's requests are all back (one-stick "
                                      "runs, a PT operand's or a gather's, stay pipelined)",
                                      Provenance::Estimate}) == "serial";
  m_dma_flow = dma.get_choice("model", "request", {"request", "flow"},
                             {"request: every request of request_size goes to device memory on its own "
                              "(the validated model); flow: a whole DMA operation goes as one stream at the rate "
                              "its outstanding requests sustain (fast, approximate: for sweeps; configs/spyre_flow.yaml "
                              "also sets the memory parameters fitted for it)",
                              Provenance::Estimate}) == "flow";
  if (m_dma_request == 0 || m_dma_request % kStickBytes)
    params().refuse("dma.request_size", "must be a positive multiple of 128B, got " + std::to_string(m_dma_request) + " B");
  if (m_lx_line == 0 || m_lx_line % kStickBytes)
    params().refuse("lx.pt_line", "must be a positive multiple of 128B, got " + std::to_string(m_lx_line) + " B");
  if (m_lx_size == 0 || m_lx_size % kStickBytes)
    params().refuse("lx.size", "must be a positive multiple of 128B, got " + std::to_string(m_lx_size) + " B");
  if (m_lx_reserved >= m_lx_size)
    params().refuse_pair("lx.reserved", "lx.size",
                         "the reserved part must be smaller than LX (" + format_size(m_lx_reserved) + " reserved of " +
                             format_size(m_lx_size) + ")");

  for (int e = 0; e < kEngineCount; ++e) {
    const std::string en = engine_name(static_cast<Engine>(e));
    m_busy[e] = &stats().scalar(en + "_busy_ps", "ps", "time the " + en + " engine was busy");
    m_ops[e] = &stats().scalar(en + "_ops", "ops", "operations run on the " + en + " engine");
    if (tracing()) m_tracks[e] = trace()->track(std::string(basename()), en);
  }
  expose_initiator("mem", mem);
  expose_initiator("ring", ring);
}

void Core::before_end_of_elaboration() {
  // The engines' SystemC threads, unless the card's event loop runs them (set_event_driven, from
  // the card's constructor). Not spawning them at all, rather than letting them end at once,
  // means an event-driven run never switches stacks: under AddressSanitizer an exception thrown
  // after a stack switch trips a known false positive (google/sanitizers#189).
  if (m_event_driven) return;
  for (int e = 0; e < kEngineCount; ++e)
    sc_core::sc_spawn([this, e] { engine_thread(static_cast<Engine>(e)); },
                      sc_core::sc_gen_unique_name(engine_name(static_cast<Engine>(e))));
}

void Core::load(std::vector<CoreOp> program, double start_ps, uint64_t launch_key) {
  for (uint32_t i = 0; i < program.size(); ++i)
    for (uint32_t d : program[i].deps)
      if (d >= i)
        throw std::invalid_argument(path() + ": operation " + std::to_string(i) +
                                    " depends on a later operation " + std::to_string(d));
  m_program = std::move(program);
  if (m_dma_op_latency_ps > 0 || m_dma_op_jitter_ps > 0)
    for (uint32_t i = 0; i < m_program.size(); ++i) {
      CoreOp& op = m_program[i];
      if ((op.engine == Engine::Load || op.engine == Engine::Store) && op.bytes > 0)
        op.extra_ps += m_dma_op_latency_ps +
                       static_cast<double>(seeded_below(m_dma_op_jitter_ps, launch_key, static_cast<uint64_t>(index()), i));
    }
  for (auto& v : m_by_engine) v.clear();
  for (uint32_t i = 0; i < m_program.size(); ++i) m_by_engine[static_cast<int>(m_program[i].engine)].push_back(i);
  ++m_generation;
  m_results.assign(m_program.size(), OpResult{});
  m_done.assign(m_program.size(), 0);
  m_remaining = m_program.size();
  m_start_ps = start_ps;
  m_finish_ps = start_ps;
  m_quantum_ps = tlm_utils::tlm_quantumkeeper::get_global_quantum().to_seconds() * 1e12;
}

void Core::check_lx(uint64_t bytes, const std::string& what) const {
  if (bytes > lx_usable())
    throw InputError(path() + ": LX overflow: " + what + " needs " + std::to_string(bytes) + " B but the core has " +
                     std::to_string(lx_usable()) + " B usable (" + std::to_string(m_lx_size) + " B less " +
                     std::to_string(m_lx_reserved) + " B reserved)");
}

namespace {
// Elements each SIMD lane takes per cycle for operands of `bits` bits (2x for 8-bit, 4x for int4).
uint64_t pt_ways(int bits) { return bits <= 4 ? 4 : bits <= 8 ? 2 : 1; }
// Stores of lone sticks are posted: only a load keeps dma.lone_outstanding requests in flight.
bool reads_lone_sticks(const CoreOp& op) { return op.lone_sticks && op.engine == Engine::Load; }
}  // namespace

uint64_t Core::pt_block_n(int bits) const { return static_cast<uint64_t>(m_pt_cols) * m_pt_simd * pt_ways(bits); }

double Core::peak_macs_per_ns(int bits) const {
  return m_corelets * m_pt_rows * m_pt_cols * m_pt_simd * static_cast<double>(pt_ways(bits)) * m_clock_hz / 1e9;
}

double Core::pt_time_ps(uint64_t m, uint64_t k, uint64_t n, int bits) const {
  if (m == 0 || k == 0 || n == 0) return 0;
  // Output-stationary: a block of rows x (cols x simd) outputs accumulates over k in passes of
  // pass_depth; each pass pays the systolic skew (rows + cols) and a fixed overhead. The corelets
  // share the output blocks.
  const uint64_t block_n = pt_block_n(bits);
  const uint64_t blocks = ((m + m_pt_rows - 1) / m_pt_rows) * ((n + block_n - 1) / block_n);
  const uint64_t full = k / m_pt_pass_k, rest = k % m_pt_pass_k;
  const uint64_t skew = m_pt_rows + m_pt_cols + m_pt_overhead;
  const uint64_t per_block = full * (m_pt_pass_k + skew) + (rest ? rest + skew : 0);
  const uint64_t per_corelet = (blocks + m_corelets - 1) / m_corelets;
  return static_cast<double>(per_corelet * per_block) * 1e12 / m_clock_hz;
}

double Core::pt_feed_ps(uint64_t m, uint64_t k, uint64_t n, int bits, uint32_t a_stride, uint32_t b_stride) const {
  if (m == 0 || k == 0 || n == 0 || m_lx_line_ps <= 0) return 0;
  // The array reads an input stick (one row, a stick of k) once per output block of
  // cols x simd columns and a weight stick (one k, a stick of n) once per block of as many
  // rows, and gets its sticks from LX a line at a time: the sticks of an operand that lie in one
  // line (those at most a line apart, a_stride / b_stride sticks from one to the next) come in
  // one read, so an operand laid out with its sticks apart (the batch-inner layout, where one
  // batch's next stick is a stick per batch further on) takes a line per stick.
  const uint64_t per_stick = (kStickBytes / 2) * pt_ways(bits);  // elements in a stick (64 fp16)
  const uint64_t block = pt_block_n(bits);
  const uint64_t line_sticks = m_lx_line / kStickBytes;
  auto per_line = [&](uint32_t stride) {
    return static_cast<double>(std::max<uint64_t>(1, line_sticks / std::max<uint32_t>(stride, 1)));
  };
  const double a_reads = static_cast<double>(m * ((k + per_stick - 1) / per_stick) * ((n + block - 1) / block));
  const double b_reads = static_cast<double>(k * ((n + per_stick - 1) / per_stick) * ((m + block - 1) / block));
  return (a_reads / per_line(a_stride) + b_reads / per_line(b_stride)) * m_lx_line_ps;
}

double Core::sfp_time_ps(uint64_t elements, double cycles_per_element) const {
  if (elements == 0) return 0;
  const double lanes = static_cast<double>(m_sfp_lanes) * m_corelets;
  const double cycles = std::ceil(static_cast<double>(elements) / lanes) * cycles_per_element + m_sfp_startup;
  return cycles * 1e12 / m_clock_hz;
}

void Core::finish_op(uint32_t i, double start, double end) {
  const CoreOp& op = m_program[i];
  const int e = static_cast<int>(op.engine);
  m_results[i] = {start, end};
  m_done[i] = 1;
  *m_busy[e] += end - start;
  ++*m_ops[e];
  m_finish_ps = std::max(m_finish_ps, end);
  --m_remaining;
  if (tracing()) trace()->complete(m_tracks[e], op.name.empty() ? engine_name(op.engine) : op.name, start, end - start);
  VSPYRE_DEBUG(g_dbg, start, "%s op %u %s ends %.1f ns", path().c_str(), i, engine_name(op.engine), end / 1e3);
  m_op_done.notify();
}

namespace {
// Temporal decoupling: a thread may run ahead of simulated time by up to the global quantum.
// `quantum_ps`: the global quantum in ps (Core::load reads it). Returns the simulated time after.
double sync_if_ahead(double t_ps, double quantum_ps) {
  const double now = now_ps();
  if (t_ps - now > quantum_ps) {
    sc_core::wait(ps_time(t_ps - now));
    return now_ps();
  }
  return now;
}
}  // namespace

namespace {
// `ext` attached to `trans` for a scope: an engine's payload outlives the operation's extension,
// and a payload destroyed with an extension still attached frees it.
struct ScopedExtension {
  ScopedExtension(tlm::tlm_generic_payload& t, TransferExt& e) : trans(t), ext(e) { trans.set_extension(&ext); }
  ~ScopedExtension() { trans.clear_extension(&ext); }
  ScopedExtension(const ScopedExtension&) = delete;
  ScopedExtension& operator=(const ScopedExtension&) = delete;
  tlm::tlm_generic_payload& trans;
  TransferExt& ext;
};
}  // namespace

// What an address error means here: the memory answers one for a range past its end.
static std::string where_failed(const tlm::tlm_generic_payload& trans) {
  return trans.get_response_status() == tlm::TLM_ADDRESS_ERROR_RESPONSE ? " (past the end of card.memory.capacity)" : "";
}

static std::string hex_addr(uint64_t a) {
  char b[32];
  std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(a));
  return b;
}

double Core::run_dma(const CoreOp& op, bool is_write, double t, tlm::tlm_generic_payload& trans) {
  if (m_dma_flow) {
    if (op.bytes) sync_if_ahead(t, m_quantum_ps);  // streams reach the memory about in time order
    return run_dma_stream(op, is_write, t, trans);
  }
  // The engine's transaction object for every request of the operation (each request sets every
  // field the memory reads).
  TransferExt ext;
  ext.src = id();
  const ScopedExtension attached(trans, ext);
  DmaProgress d;
  d.pieces = dma_repeats(op.outer);
  for (d.p = 0; d.p < d.pieces; ++d.p) {
    // Each piece is its own descriptor: its requests start when the previous piece is done.
    if (d.p > 0) sync_if_ahead(t, m_quantum_ps);
    dma_piece_begin(op, d, t);
    DmaRequest q;
    while (dma_next_request(op, d, q)) {
      const double base = sync_if_ahead(q.issue, m_quantum_ps);
      if (q.len) dma_send(d, q, is_write, base, trans);
    }
    t = d.last;
  }
  (is_write ? m_bytes_out : m_bytes_in) += static_cast<double>(op.bytes * d.pieces);
  return t;
}

void Core::dma_piece_begin(const CoreOp& op, DmaProgress& d, double t) const {
  const uint64_t req = m_dma_request;
  d.piece_addr = op.addr + dma_piece_offset(op.outer, d.p);
  // Requests never cross a run: split every run into requests of at most `req` bytes.
  d.run = op.run_bytes ? op.run_bytes : op.bytes;
  d.stride = op.run_bytes ? op.stride : op.bytes;
  d.per_run = d.run ? (d.run + req - 1) / req : 0;
  const uint64_t runs = d.run ? (op.bytes + d.run - 1) / d.run : 0;
  d.n = runs * d.per_run;
  d.i = d.r = d.k = 0;
  d.slot = 0;
  d.window.assign(dma_slots(d.run, reads_lone_sticks(op)), t);
  d.next_issue = d.last = t;
}

bool Core::dma_next_request(const CoreOp& op, DmaProgress& d, DmaRequest& q) const {
  if (d.i >= d.n) return false;
  const uint64_t req = m_dma_request;
  // Request i is request k of run r (i = r * per_run + k) and uses outstanding slot
  // i % outstanding: all three stepped along with i.
  q.slot = d.slot;
  const uint64_t rr = d.r, kk = d.k;
  if (++d.slot == d.window.size()) d.slot = 0;
  if (++d.k == d.per_run) {
    d.k = 0;
    ++d.r;
  }
  // A request leaves when an outstanding slot has come back and the issue port is free.
  q.issue = std::max(d.next_issue, d.window[q.slot]);
  // run_order serial: a run of more than one stick leaves when the one before it is all back.
  if (m_dma_serial_runs && kk == 0 && rr > 0 && d.run > kStickBytes)
    q.issue = std::max(q.issue, *std::max_element(d.window.begin(), d.window.end()));
  d.next_issue = q.issue + m_dma_issue_ps;
  const uint64_t run_len = std::min(d.run, op.bytes - rr * d.run);
  q.len = 0;
  q.next_bytes = 0;
  if (kk * req < run_len) {
    q.addr = d.piece_addr + rr * d.stride + kk * req;
    q.len = std::min(req, run_len - kk * req);
    // Where the next request of this operation goes, for the memory to prepare (host speed only).
    if (d.i + 1 < d.n) {
      const uint64_t next_run = std::min(d.run, op.bytes - d.r * d.run);
      if (d.k * req < next_run) {
        q.next_addr = d.piece_addr + d.r * d.stride + d.k * req;
        q.next_bytes = std::min(req, next_run - d.k * req);
      }
    } else if (d.p + 1 < d.pieces) {
      q.next_addr = op.addr + dma_piece_offset(op.outer, d.p + 1);
      q.next_bytes = std::min(req, std::min(d.run, op.bytes));
    }
  }
  ++d.i;
  return true;
}

void Core::dma_send(DmaProgress& d, const DmaRequest& q, bool is_write, double base, tlm::tlm_generic_payload& trans) {
  TransferExt& ext = *trans.get_extension<TransferExt>();
  trans.set_command(is_write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND);
  trans.set_address(q.addr);
  trans.set_data_ptr(nullptr);
  trans.set_data_length(static_cast<unsigned>(q.len));
  trans.set_streaming_width(static_cast<unsigned>(q.len));
  trans.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  ext.next_addr = q.next_addr;
  ext.next_bytes = q.next_bytes;
  sc_core::sc_time delay = ps_time(q.issue - base);
  mem->b_transport(trans, delay);
  if (trans.is_response_error())
    throw InputError(path() + ": device-memory " + (is_write ? "write" : "read") + " at 0x" + hex_addr(q.addr) +
                     " of " + std::to_string(q.len) + " B failed: " + trans.get_response_string() + where_failed(trans));
  const double done = base + time_ps(delay);
  d.window[q.slot] = done;
  d.last = std::max(d.last, done);
}

bool Core::dma_step(uint32_t i, double at, DmaProgress& d, double& next) {
  // The requests of run_dma at the same times, one per call: each call sends the request due at
  // `at` and finds when the next one leaves.
  const CoreOp& op = m_program[i];
  const bool is_write = op.engine == Engine::Store;
  tlm::tlm_generic_payload& trans = m_trans[static_cast<int>(op.engine)];
  TransferExt ext;
  ext.src = id();
  const ScopedExtension attached(trans, ext);
  if (!d.started) {
    d.started = true;
    d.start = at;
    d.pieces = dma_repeats(op.outer);
    d.p = 0;
    dma_piece_begin(op, d, at + op.extra_ps);
    if (d.pieces == 0) d.n = 0;  // an outer level of count 0: nothing to move (as in run_dma)
  } else {
    dma_send(d, d.pending, is_write, now_ps(), trans);
  }
  for (;;) {
    while (dma_next_request(op, d, d.pending))
      if (d.pending.len) {
        next = d.pending.issue;
        return false;
      }
    if (++d.p >= d.pieces) break;
    dma_piece_begin(op, d, d.last);  // the next piece starts when this one is done
  }
  (is_write ? m_bytes_out : m_bytes_in) += static_cast<double>(op.bytes * d.pieces);
  d.started = false;
  finish_op(i, d.start, d.last);
  return true;
}

double Core::run_dma_stream(const CoreOp& op, bool is_write, double t, tlm::tlm_generic_payload& trans) {
  // Flow mode: the whole operation is one transaction; the memory places it as a stream.
  if (op.bytes == 0) return t;  // nothing to move (as in request mode: no request is issued)
  TransferExt ext;
  ext.src = id();
  ext.stream = true;
  ext.stream_bytes = op.bytes;
  ext.run_bytes = op.run_bytes && op.run_bytes < op.bytes ? op.run_bytes : 0;
  ext.stride = ext.run_bytes ? op.stride : 0;
  ext.request_bytes = m_dma_request;
  ext.outstanding = dma_slots(ext.run_bytes, reads_lone_sticks(op));  // outstanding when the stream is one run
  ext.issue_ps = m_dma_issue_ps;
  ext.serial_runs = m_dma_serial_runs;
  ext.outer = op.outer.empty() ? nullptr : &op.outer;
  const ScopedExtension attached(trans, ext);
  trans.set_command(is_write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND);
  trans.set_address(op.addr);
  trans.set_data_ptr(nullptr);
  const auto len = static_cast<unsigned>(std::min<uint64_t>(op.bytes, UINT32_MAX));
  trans.set_data_length(len);
  trans.set_streaming_width(len);
  trans.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  const double base = now_ps();
  sc_core::sc_time delay(t - base, sc_core::SC_PS);
  mem->b_transport(trans, delay);
  if (trans.is_response_error()) {
    throw InputError(path() + ": device-memory " + (is_write ? "write" : "read") + " stream at 0x" + hex_addr(op.addr) + " of " +
                     std::to_string(op.bytes) + " B failed: " + trans.get_response_string() + where_failed(trans));
  }
  (is_write ? m_bytes_out : m_bytes_in) += static_cast<double>(op.bytes * dma_repeats(op.outer));
  return base + delay.to_seconds() * 1e12;
}

double Core::ring_send(tlm::tlm_generic_payload& trans, uint64_t bytes, double at) {
  trans.set_data_length(static_cast<unsigned>(std::min<uint64_t>(bytes, UINT32_MAX)));
  const double base = now_ps();
  sc_core::sc_time delay(at - base, sc_core::SC_PS);
  ring->b_transport(trans, delay);
  return base + delay.to_seconds() * 1e12;
}

double Core::run_ring(uint32_t i, double start) {
  // The ring's links keep only when each is next free, so a transfer must reach them in time
  // order: a sender running ahead within the quantum would book links into the future and make
  // the other senders wait behind transfers that have not happened yet (an LX shuffle's time
  // then depended on the quantum: 11.1 us at 200 ns against 7.7 us at 10 ns and below). Each
  // descriptor is therefore sent in lockstep with simulated time.
  RingProgress p;
  double at = start, next = 0;
  for (;;) {
    const double now = now_ps();
    if (at > now) sc_core::wait(sc_core::sc_time(at - now, sc_core::SC_PS));
    if (ring_step(i, at, p, next)) return p.last;
    at = next;
  }
}

bool Core::ring_step(uint32_t i, double at, RingProgress& p, double& next) {
  // One descriptor per call. An operation whose runs are scattered (an LX relayout) sends one
  // descriptor per run, issued like DMA requests, each holding one of ring_outstanding slots
  // until the receiver acknowledges it; any other sends all its bytes as one.
  const CoreOp& op = m_program[i];
  const bool scattered = op.run_bytes != 0 && op.run_bytes < op.bytes;
  if (!p.started) {
    p.started = true;
    p.sent = p.n = 0;
    p.start = at;
    const double t = at + op.extra_ps;
    p.next_issue = p.last = t;
    if (scattered) p.window.assign(m_ring_outstanding, t);
    if (t > at) {
      next = t;
      return false;
    }
  }
  tlm::tlm_generic_payload& trans = m_trans[static_cast<int>(Engine::Ring)];
  TransferExt ext;
  ext.src = id();
  ext.dst = op.dst;
  ext.acked = scattered;
  ext.reduce = op.reduce_ring;
  const ScopedExtension attached(trans, ext);
  trans.set_command(tlm::TLM_WRITE_COMMAND);
  if (!scattered) {
    p.last = ring_send(trans, op.bytes, at);
  } else {
    const size_t slot = p.n % m_ring_outstanding;
    const double end = ring_send(trans, std::min(op.run_bytes, op.bytes - p.sent), at);
    p.next_issue = at + m_dma_issue_ps;
    p.window[slot] = end;
    p.last = std::max(p.last, end);
    p.sent += op.run_bytes;
    ++p.n;
    if (p.sent < op.bytes) {
      next = std::max(p.next_issue, p.window[p.n % m_ring_outstanding]);
      return false;
    }
  }
  m_ring_bytes += static_cast<double>(op.bytes);
  p.started = false;
  finish_op(i, p.start, p.last);
  return true;
}

double Core::compute_end(const CoreOp& op, double t) {
  if (op.engine == Engine::Pt) {
    m_macs += static_cast<double>(op.m) * static_cast<double>(op.k) * static_cast<double>(op.n);
    return t + std::max(pt_time_ps(op.m, op.k, op.n, op.bits),
                        pt_feed_ps(op.m, op.k, op.n, op.bits, op.a_stride, op.b_stride));
  }
  return t + sfp_time_ps(op.elements, op.cycles_per_element);
}

bool Core::step(uint32_t i, double at, Progress& p, double& next) {
  const CoreOp& op = m_program[i];
  const bool dma = op.engine == Engine::Load || op.engine == Engine::Store;
  if (op.engine == Engine::Ring) return ring_step(i, at, p.ring, next);
  if (dma && !m_dma_flow) return dma_step(i, at, p.dma, next);
  // One step: PT, SFP, or a flow-model DMA operation (one stream).
  double end = at + op.extra_ps;
  if (dma) end = run_dma_stream(op, op.engine == Engine::Store, end, m_trans[static_cast<int>(op.engine)]);
  else end = compute_end(op, end);
  finish_op(i, at, end);
  return true;
}

Core::~Core() {
  for (auto& trans : m_trans) trans.clear_extension<TransferExt>();
}

void Core::engine_thread(Engine e) {
  tlm::tlm_generic_payload& trans = m_trans[static_cast<int>(e)];
  uint64_t seen = 0;
  for (;;) {
    while (seen == m_generation) sc_core::wait(m_go);
    seen = m_generation;
    double t = std::max(m_start_ps, now_ps());
    // By index, not iterator: a run abandoned by an error leaves this loop suspended, and the next
    // load() replaces the lists.
    const std::vector<uint32_t>& mine = m_by_engine[static_cast<int>(e)];
    try {
      for (size_t k = 0; k < mine.size(); ++k) {
        const uint32_t i = mine[k];
        const CoreOp& op = m_program[i];
        for (uint32_t d : op.deps) {
          while (!m_done[d]) sc_core::wait(m_op_done);
          t = std::max(t, m_results[d].end_ps);
        }
        const double start = t;
        double end = start + op.extra_ps;
        switch (e) {
          case Engine::Load: end = run_dma(op, false, end, trans); break;
          case Engine::Store: end = run_dma(op, true, end, trans); break;
          case Engine::Pt:
          case Engine::Sfp: end = compute_end(op, end); break;
          case Engine::Ring: end = run_ring(i, start); break;  // recorded by its last step
        }
        if (e != Engine::Ring) finish_op(i, start, end);
        t = end;
        sync_if_ahead(t, m_quantum_ps);
      }
    } catch (const sc_core::sc_unwind_exception&) {
      throw;  // SystemC's own: a thread being killed or reset
    } catch (...) {
      if (!m_error) m_error = std::current_exception();
      throw;  // SystemC ends the thread and sc_start reports it
    }
  }
}

VSPYRE_REGISTER_COMPONENT(Core, "Core", "Spyre core: 2 corelets (PT array + SFP), LX scratchpad, DMA engines")

}  // namespace vspyre
