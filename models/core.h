// One Spyre core: two corelets (each an 8x8 PT array with 8-way fp16 SIMD and an SFP vector
// unit), a 2 MiB LX scratchpad, DMA engines to device memory and a port onto the ring.
//
// A core runs a program: a list of operations, each on one engine (load DMA, store DMA, PT, SFP,
// ring), each waiting for the operations it depends on. Engines run concurrently, so double
// buffering is just a dependency pattern. Time per operation comes from the engine's mechanics:
// DMA keeps a bounded number of requests outstanding (which is what stops one core from
// saturating device memory), the PT array pays fill and drain per pass, the SFP streams lanes.
#pragma once
#include <algorithm>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <string>
#include <vector>

#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/tlm_quantumkeeper.h>

#include "models/transfer.h"
#include "sim/engine/component.h"

namespace vspyre {

enum class Engine : uint8_t { Load, Store, Pt, Sfp, Ring };
inline constexpr int kEngineCount = 5;
const char* engine_name(Engine e);

// The operations an operation waits for (indices of earlier operations in its program). Nearly
// every operation has at most kInline of them, kept in place: a large plan runs ~10^5 operations,
// and a heap vector each would cost an allocation and a free per operation. Past kInline they all
// move to the heap.
class DepList {
 public:
  DepList() = default;
  DepList(std::initializer_list<uint32_t> deps) {
    for (uint32_t d : deps) push_back(d);
  }
  void push_back(uint32_t d) {
    if (m_size < kInline) {
      m_inline[m_size++] = d;
      return;
    }
    if (m_size == kInline) m_spilled.assign(m_inline, m_inline + kInline);
    m_spilled.push_back(d);
    ++m_size;
  }
  const uint32_t* begin() const { return m_size <= kInline ? m_inline : m_spilled.data(); }
  const uint32_t* end() const { return begin() + m_size; }
  size_t size() const { return m_size; }
  bool empty() const { return m_size == 0; }

 private:
  static constexpr uint32_t kInline = 5;  // 5 x 4 B and the size fill 24 B, as much as a vector
  uint32_t m_inline[kInline] = {};
  uint32_t m_size = 0;
  std::vector<uint32_t> m_spilled;  // all of them once there are more than kInline
};

struct CoreOp {
  Engine engine = Engine::Load;
  std::string name;
  // Load / Store: device-memory address and bytes. Ring: destination core and bytes.
  uint64_t addr = 0;
  uint64_t bytes = 0;
  // Strided transfers: when run_bytes > 0, `bytes` are moved as runs of run_bytes contiguous
  // bytes, run i starting at addr + i * stride (a stick-tiled slice is a set of such runs).
  uint64_t run_bytes = 0;
  uint64_t stride = 0;
  // Multi-level transfers: the pattern above is one piece, repeated at the offsets these outer
  // levels enumerate (first level fastest); `bytes` counts one piece. The DMA engine runs the
  // pieces one after the other, each as its own descriptor.
  std::vector<DmaLevel> outer;
  // Lone sticks (plan::Op::lone_sticks): the engine keeps dma.lone_outstanding requests in flight.
  bool lone_sticks = false;
  CoreId dst{0};
  // Ring: partial sums over the reduce-sum ring (plan::Op::reduce_ring).
  bool reduce_ring = false;
  // Pt: an (m x k) @ (k x n) product with elements of `bits` bits.
  uint64_t m = 0, k = 0, n = 0;
  int bits = 16;
  // Pt: sticks between the consecutive sticks the array reads of the input (a) and the weight
  // (b) in LX (plan::Op::a_stride; 0 or 1: adjacent).
  uint32_t a_stride = 1, b_stride = 1;
  // Sfp: elements processed and cycles each costs per lane.
  uint64_t elements = 0;
  double cycles_per_element = 1.0;
  // Fixed extra time, for operations whose cost is known outright (barriers, launch).
  double extra_ps = 0;
  DepList deps;  // indices of earlier operations in the same program
};

struct OpResult {
  double start_ps = 0, end_ps = 0;
};

// One request of a request-model DMA operation: when it leaves, where to, and the outstanding
// slot it holds. len 0: a run shorter than the others has no request here, but the slot and the
// issue port still step (the operation's timing keeps the shape of its longest run).
struct DmaRequest {
  double issue = 0;
  uint64_t addr = 0, len = 0;
  size_t slot = 0;
  uint64_t next_addr = 0, next_bytes = 0;  // the request after it, for the memory to prepare
};

// Where a request-model DMA operation is: its piece and the next request of that piece. The
// SystemC engine thread walks it in one go (Core::run_dma); the event scheduler a request at a
// time (Core::dma_step).
struct DmaProgress {
  bool started = false;
  double start = 0;
  uint64_t pieces = 1, p = 0;  // the operation's pieces (outer levels), the current one
  uint64_t piece_addr = 0, run = 0, stride = 0, per_run = 0, n = 0;  // the current piece's runs, requests
  uint64_t i = 0, r = 0, k = 0;  // the next request: index, run, request within the run
  size_t slot = 0;
  double next_issue = 0, last = 0;
  std::vector<double> window;  // when each outstanding request slot comes back
  DmaRequest pending;          // the event scheduler's next request, due at its issue time
};

// Where a ring operation is, between the steps the event scheduler runs it in (Core::ring_step).
struct RingProgress {
  bool started = false;
  uint64_t sent = 0;  // bytes sent so far
  uint64_t n = 0;     // descriptors sent so far
  double start = 0, next_issue = 0, last = 0;
  std::vector<double> window;  // when each outstanding descriptor slot comes back
};

class Core : public Component {
 public:
  Core(const sc_core::sc_module_name& name, BuildContext& ctx);
  // Detaches any operation's extension from the engines' payloads: a run abandoned by an error
  // leaves other engines suspended inside a DMA operation with theirs (on their own stacks)
  // attached, and a payload frees what it holds when destroyed.
  ~Core() override;

  tlm_utils::simple_initiator_socket<Core> mem;   // to device memory
  tlm_utils::simple_initiator_socket<Core> ring;  // to the ring

  CoreId id() const { return CoreId{static_cast<uint32_t>(index() < 0 ? 0 : index())}; }
  // Loads a program to run from `start_ps`; Card::run starts core i at i x card.launch_skew plus
  // its own seeded time within card.launch_jitter. `launch_key` seeds the draws of
  // dma.op_jitter (Card::run derives it from card.launch_seed and the launch's number).
  void load(std::vector<CoreOp> program, double start_ps, uint64_t launch_key = 0);
  bool finished() const { return m_remaining == 0; }
  // The exception that ended one of this core's engine threads (SystemC reports it from
  // sc_start as its own error; Card::run rethrows this one, with its type and message).
  std::exception_ptr error() const { return m_error; }
  const std::vector<CoreOp>& program() const { return m_program; }  // the loaded program
  const std::vector<OpResult>& results() const { return m_results; }
  double start_ps() const { return m_start_ps; }
  double finish_ps() const { return m_finish_ps; }
  sc_core::sc_event& go() { return m_go; }

  // Cost models, exposed for tests and planners: time of one operation alone on an idle core.
  double pt_time_ps(uint64_t m, uint64_t k, uint64_t n, int bits) const;
  // Time the PT array's operand feed takes to read the op's sticks from LX (whole lines of
  // lx.pt_line each lx.pt_line_time); the op takes the longer of this and pt_time_ps.
  double pt_feed_ps(uint64_t m, uint64_t k, uint64_t n, int bits, uint32_t a_stride, uint32_t b_stride) const;
  // Output columns one PT block covers for `bits`-bit operands (cols x simd, x2 for 8-bit, x4 for
  // int4): both the array's blocks and how often the feed reads an input stick.
  uint64_t pt_block_n(int bits) const;
  double sfp_time_ps(uint64_t elements, double cycles_per_element) const;
  double peak_macs_per_ns(int bits = 16) const;
  double clock_hz() const { return m_clock_hz; }
  uint32_t pt_rows() const { return m_pt_rows; }
  uint32_t corelets() const { return m_corelets; }
  bool dma_flow() const { return m_dma_flow; }  // DMA operations go to memory as streams
  uint64_t dma_request_bytes() const { return m_dma_request; }
  uint32_t dma_outstanding() const { return m_dma_outstanding; }
  // Requests an engine keeps in flight for runs of `run` bytes: its read buffer holds
  // outstanding x request_size bytes, and a run shorter than a request (a request never crosses a
  // run) is a request of its own, so more of them fit (a 128 B run: request_size / 128 times as
  // many).
  uint32_t dma_slots(uint64_t run, bool lone_sticks = false) const {
    const uint32_t slots = run && run < m_dma_request ? m_dma_outstanding * static_cast<uint32_t>(m_dma_request / run)
                                                      : m_dma_outstanding;
    return lone_sticks ? std::min(slots, m_dma_lone_outstanding) : slots;
  }

  uint64_t lx_size() const { return m_lx_size; }
  uint64_t lx_usable() const { return m_lx_size - m_lx_reserved; }
  // Throws InputError naming the core and the sizes when `bytes` does not fit in LX.
  void check_lx(uint64_t bytes, const std::string& what) const;

  double busy_ps(Engine e) const { return m_busy[static_cast<int>(e)]->value(); }

  // For the card's event scheduler (`card.scheduler: events`), which runs every core's engines
  // from one loop instead of one SystemC thread each. None of these waits: each runs at the time
  // it is given, which the scheduler keeps in order across the card.
  // set_event_driven: called by the card's constructor; the engines then get no SystemC threads.
  void set_event_driven() { m_event_driven = true; }
  const std::vector<uint32_t>& engine_ops(Engine e) const { return m_by_engine[static_cast<int>(e)]; }
  bool op_done(uint32_t i) const { return m_done[i] != 0; }
  struct Progress {  // an operation the event scheduler runs in steps
    DmaProgress dma;
    RingProgress ring;
  };
  // One step of operation i at time `at`: the first call starts the operation. A PT, SFP or
  // flow-model DMA operation is done in one step; a request-model DMA operation sends one request
  // per step, a ring operation one descriptor. Returns true when the operation has finished (and
  // is recorded), else false with the time of its next step in `next`.
  bool step(uint32_t i, double at, Progress& p, double& next);

 private:
  void before_end_of_elaboration() override;
  void engine_thread(Engine e);
  // `trans`: the engine's transaction object, reused by each of its operations, which sets every
  // field it sends (constructing a payload allocates its extension array).
  double run_dma(const CoreOp& op, bool is_write, double t, tlm::tlm_generic_payload& trans);
  // Request model: piece d.p of `op` starts at t; the next request of the piece (false when the
  // piece has no more); sending a request at its issue time (`base`: simulated time now).
  void dma_piece_begin(const CoreOp& op, DmaProgress& d, double t) const;
  bool dma_next_request(const CoreOp& op, DmaProgress& d, DmaRequest& q) const;
  void dma_send(DmaProgress& d, const DmaRequest& q, bool is_write, double base, tlm::tlm_generic_payload& trans);
  bool dma_step(uint32_t i, double at, DmaProgress& d, double& next);
  bool ring_step(uint32_t i, double at, RingProgress& p, double& next);
  double run_dma_stream(const CoreOp& op, bool is_write, double t, tlm::tlm_generic_payload& trans);
  // Ring operation i from `start`, descriptor by descriptor in lockstep with simulated time (the
  // engine thread); records it and returns its end.
  double run_ring(uint32_t i, double start);
  // Sends `bytes` at `at` (the ring's links are booked in time order, so simulated time must not
  // be past `at`); returns when they arrive.
  double ring_send(tlm::tlm_generic_payload& trans, uint64_t bytes, double at);
  // PT and SFP: the end of an operation that starts computing at `t`.
  double compute_end(const CoreOp& op, double t);
  void finish_op(uint32_t i, double start, double end);

  double m_clock_hz;
  uint64_t m_lx_size, m_lx_reserved, m_lx_line;
  double m_lx_line_ps;
  uint32_t m_corelets, m_pt_rows, m_pt_cols, m_pt_simd, m_pt_pass_k, m_pt_overhead;
  uint32_t m_sfp_lanes, m_sfp_startup;
  uint32_t m_dma_outstanding;
  uint32_t m_dma_lone_outstanding;
  uint32_t m_ring_outstanding;
  uint64_t m_dma_request;
  double m_dma_issue_ps;
  bool m_dma_serial_runs = false;  // dma.run_order serial
  double m_dma_op_latency_ps = 0;  // dma.op_latency: per DMA operation, before its first request
  uint64_t m_dma_op_jitter_ps = 0;  // dma.op_jitter: a seeded extra in [0, this) per DMA operation
  bool m_dma_flow = false;
  bool m_event_driven = false;

  tlm::tlm_generic_payload m_trans[kEngineCount];  // each engine's transactions, one at a time
  std::vector<CoreOp> m_program;
  std::vector<uint32_t> m_by_engine[kEngineCount];  // each engine's operations, in program order
  std::vector<OpResult> m_results;
  std::vector<char> m_done;
  std::exception_ptr m_error;
  size_t m_remaining = 0;
  uint64_t m_generation = 0;  // bumped per load(), so an engine never misses a start
  double m_start_ps = 0, m_finish_ps = 0;
  double m_quantum_ps = 0;  // the global quantum when the program was loaded
  sc_core::sc_event m_go, m_op_done;
  Scalar* m_busy[kEngineCount];
  Scalar* m_ops[kEngineCount];
  Scalar& m_bytes_in;
  Scalar& m_bytes_out;
  Scalar& m_ring_bytes;
  Scalar& m_macs;
  TraceWriter::TrackId m_tracks[kEngineCount] = {};
};

}  // namespace vspyre
