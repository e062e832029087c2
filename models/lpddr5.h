// LPDDR5 device memory: channels, banks with an open row each, read/write turnaround, all-bank
// refresh, a controller that hides part of each row miss.
//
// Loosely timed, and robust to temporal decoupling: each channel's data bus is a calendar of
// fixed time bins, each holding the bus time still free in it. A request's piece fills the first
// free bus time at or after it is ready, so a model that runs behind in simulated time still finds
// the capacity that was free at its time. Within a bin the controller batches writes: mixing
// directions costs one write-to-read plus one read-to-write turnaround per `write_batch` bytes of
// the smaller direction. The achieved bandwidth (about 150 GB/s streaming, about 105 GB/s balanced
// on the default card) comes out of these mechanics; no bandwidth is written anywhere.
#pragma once
#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include <tlm_utils/multi_passthrough_target_socket.h>

#include "models/calendar.h"
#include "models/flat_map.h"
#include "models/floor_div.h"
#include "models/transfer.h"
#include "sim/engine/component.h"

namespace vspyre {

struct Lpddr5Timing {
  uint32_t channels = 16;
  uint32_t banks = 16;
  uint64_t row_bytes = 2048;    // page per bank per channel
  uint64_t interleave = 256;    // bytes to one channel before moving to the next
  bool bank_xor = true;
  // XOR the bits of the row a stripe falls in into its channel (one permutation of the channels
  // per row group of row_bytes x banks x channels): strides of a row group or more then spread
  // over the channels instead of all landing on one.
  bool channel_xor = false;
  double ps_per_byte = 0;       // data bus, per channel
  double t_rcd = 0, t_rp = 0, t_rl = 0, t_wl = 0, t_wtr = 0, t_rtw = 0, t_rfc = 0, t_refi = 0;
  double t_wr = 0;              // write recovery: last write data to precharge of that row
  double t_hide = 0;            // part of a row miss the controller overlaps with other transfers
  double t_frontend = 0;        // controller and on-chip network, each way
  uint64_t write_batch = 512;   // bytes per channel the controller drains per write burst
  double bin = 0;               // calendar bin length
  double history = 0;           // how long the calendar keeps past bins
  double coalesce_window = 0;   // identical reads within this window are served once
  uint32_t coalesce_fanout = 0; // most requesters one read is delivered to (0: any number)
  double mix_window = 0;        // flow model: averaging window of the read/write mix
  // Refresh: false (`windows`), each channel's all-bank refresh at fixed times (staggered by
  // channel): its bins lose those windows and every bank's rows close at them. true (`spread`):
  // the phase-averaged controller: every bin loses t_rfc / t_refi of its bus time, and each bank's
  // rows close once per t_refi, the banks of a channel staggered across the interval.
  bool refresh_spread = true;
  // The scheduler's reordering, seen from one bank: a request to any of the last `reorder_rows`
  // rows the bank opened within `reorder_window` is served with the requests that opened it, so
  // it pays no precharge + activate of its own. 1: only the open row hits (in arrival order).
  uint32_t reorder_rows = 1;
  double reorder_window = 0;
};

// Most rows per bank the scheduler model can batch among (`reorder_rows`).
inline constexpr uint32_t kMaxReorderRows = 8;

// Data-bus time lost to one write->read plus one read->write switch. After the last write data
// the read command waits t_wtr and its data appears t_rl later: the bus idles t_wtr + t_rl.
// The read->write switch idles the bus for t_rtw.
inline double turnaround_pair_ps(const Lpddr5Timing& t) { return t.t_wtr + t.t_rl + t.t_rtw; }

class Lpddr5 : public Component {
 public:
  Lpddr5(const sc_core::sc_module_name& name, BuildContext& ctx);

  tlm_utils::multi_passthrough_target_socket<Lpddr5> port;

  // The timing core, usable without SystemC: when the last byte of [addr, addr+bytes) has moved
  // for a request arriving at t_ps. Advances the channel and bank state.
  // `src`: who asks (its port, see set_requesters); null: no port is crossed.
  double access(uint64_t addr, uint64_t bytes, bool is_write, double t_ps, const TransferExt* src = nullptr);

  // Flow mode: a whole DMA operation (`x.stream`) arriving at t_ps, placed on the calendar of the
  // whole device as one stream at the rate its requester sustains; returns when its last byte has
  // moved. Far fewer events than one access() per request, at the price of the bank and
  // interleaving detail between streams (see the README of models/).
  double stream(const TransferExt& x, uint64_t addr, bool is_write, double t_ps);
  // Unloaded round trip of one request of `bytes` (front end both ways, command, data, and the
  // mean wait for refresh) when a fraction `miss` of requests opens a row.
  double request_latency_ps(uint64_t bytes, bool is_write, double miss) const;
  // The mean time a lone request spread over `spread` adjacent channels waits for refresh, as
  // access() gives it: a channel's bin holding a refresh window has that much less bus time,
  // and place() fills a bin from its start, so a request ready before the refresh time has
  // passed in its bin ends that much later; the request waits for its latest channel.
  double refresh_wait_ps(uint64_t spread) const;

  // The card's core count: cores reach memory through `ports` ports, contiguous groups of
  // requesters each (the memory sits at one stop of the ring, so the cores on either side of it
  // arrive over that side's link). Called by the card before simulation starts.
  void set_requesters(uint32_t n) { m_requesters = n; }
  uint32_t ports() const { return static_cast<uint32_t>(m_ports.size()); }
  double port_bandwidth() const { return m_port_ps_per_byte > 0 ? 1e12 / m_port_ps_per_byte : 0.0; }
  double port_request_ps() const { return m_port_request_ps; }
  // What one port carries of requests of `bytes` each, bytes per second (port_request_time included).
  double port_rate(uint64_t bytes) const {
    return m_port_ps_per_byte > 0 ? static_cast<double>(bytes) * 1e12 / port_ps(bytes, 1) : 0.0;
  }

  const Lpddr5Timing& timing() const { return m_t; }
  uint64_t capacity() const { return m_capacity; }
  double peak_bandwidth() const { return m_t.channels / m_t.ps_per_byte * 1e12; }
  // Sparse backing store: host memory only for pages written.
  void write_data(uint64_t addr, const uint8_t* src, uint64_t bytes);
  void read_data(uint64_t addr, uint8_t* dst, uint64_t bytes) const;
  uint64_t resident_bytes() const { return m_pages.size() * kPageBytes; }
  // The flow model walks channel 0 for all (every channel's banks in the same state): host speed
  // only, for tests.
  bool banks_uniform() const { return m_banks_uniform; }

 private:
  static constexpr uint64_t kPageBytes = 64 * 1024;
  struct Bank {
    int64_t open_row = -1;
    double last_refresh_epoch = -1;
    bool written = false;  // the open row was last written: closing it waits t_wr first
    // The rows this bank opened most recently (reorder_rows of them) and when each was last used.
    int64_t recent_row[kMaxReorderRows] = {-1, -1, -1, -1, -1, -1, -1, -1};
    double recent_t[kMaxReorderRows] = {};
  };
  // Whether a request to `row` at t finds it open, or batched with one of the bank's recent rows
  // (reorder_rows, reorder_window); records the row as used at t either way.
  bool row_hit(Bank& bank, int64_t row, double t);
  // Bus time a miss on `bank` cannot hide (precharge, write recovery, activate).
  double miss_exposed_ps(const Bank& bank) const;
  // The bank after an access to `row`: that row open, written if this or the hit row was.
  static void use_row(Bank& bank, int64_t row, bool hit, bool is_write);
  // While every channel's banks hold the same state, only channel 0's are kept (a stream whose
  // runs cover whole stripes of every channel walks channel 0 and counts it for all). The first
  // access that treats the channels unevenly gives each channel its own copy. (Config key
  // flow_shortcut: false starts with a copy each.) Once split, the channels converge again under
  // streams that cover whole stripes (each channel sees the same rows at the same times): every
  // kMergeEvery such streams the banks are compared, and when every channel's state is channel 0's
  // they are uniform again. Without it one odd stream (a matmul's stick column, a gather) made
  // every later stream of a long-running card walk all channels: 16x the row walk.
  bool m_banks_uniform = true;
  bool m_shortcut = true;     // flow_shortcut
  uint32_t m_merge_tick = 0;  // whole-stripe streams since the last comparison
  static constexpr uint32_t kMergeEvery = 16;
  void split_banks();
  // Whether bank a behaves as bank b in every later access: the same open row, write state and
  // refresh epoch, and the same recent rows at the same times in any slot order (row_hit does not
  // depend on the order).
  bool same_bank(const Bank& a, const Bank& b) const;
  // Every channel's banks the same as channel 0's.
  bool channels_converged() const;
  // stream(): one run's exposed miss times, per channel in address order, and their counts
  // (summed channel by channel so that the sum does not depend on the walk's order). Not needed
  // when every exposed time a miss can have is a whole number of ps (the default timings): sums
  // of such values are exact in any order, so the walk adds them as it goes.
  bool m_exposed_whole = false;
  std::vector<double> m_replay;
  std::vector<uint32_t> m_replay_n;
  // stream(): per channel, the sampled runs' bytes and exposed miss time (when the runs do not
  // cover whole stripes: the stream is no faster than its busiest channel).
  std::vector<double> m_chan_bytes, m_chan_exposed;
  struct Bin {
    double free = 0;   // bus time still free
    double rd = 0, wr = 0;  // bytes each way
    double pairs = 0;       // turnaround pairs charged (fractional: an average over the bin)
    int64_t next = -1;      // for a full bin: a later bin to look at first (path-compressed)
  };
  struct Channel {
    // A ring of bins covering [first_bin, end_bin), at most `kept` of them; older bins are
    // forgotten (history). Bin i sits at ring[i & mask] (the ring's size is a power of two, at
    // least `kept`).
    std::vector<Bin> ring;
    int64_t kept = 0, mask = 0;
    int64_t first_bin = 0, end_bin = 0;
    bool started = false;
    double refresh_offset = 0;
    FloorDiv refresh_epoch;  // floor((t - refresh_offset) / t_refi)
    std::vector<Bank> banks;
    Scalar* bytes_read = nullptr;
    Scalar* bytes_written = nullptr;
    TraceWriter::TrackId track = 0;
  };

  void b_transport(int id, tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  unsigned int transport_dbg(int id, tlm::tlm_generic_payload& trans);
  // The bank a channel-local address falls in, and its row.
  inline uint32_t bank_of(uint64_t local, int64_t& row) const;  // defined in lpddr5.cpp, its only user
  double channel_access(uint32_t ch, uint64_t local, uint64_t bytes, bool is_write, double t_ps);
  // The bin with this index, created if new; an index older than the history is moved up to the
  // oldest bin kept.
  Bin& bin_at(Channel& ch, int64_t& index) {
    if (index < ch.end_bin && index >= ch.first_bin) return ch.ring[static_cast<size_t>(index & ch.mask)];
    return new_bin_at(ch, index);
  }
  Bin& new_bin_at(Channel& ch, int64_t& index);
  double bin_capacity(const Channel& ch, int64_t index) const;
  // The bus time the channel's refresh windows leave in the bin (refresh: windows).
  double window_capacity(const Channel& ch, int64_t index) const;
  // Places `need` ps of bus work no earlier than `ready`; returns when it ends.
  // The first bin at or after `index` with bus time left.
  int64_t first_open(Channel& ch, int64_t index, Bin*& bin);
  double m_min_free = 0;  // a bin with less bus time left than one stick's counts as full
  double place(Channel& ch, double ready, double need, uint64_t bytes, bool is_write);

  // Flow mode: one calendar for the whole device (capacity: every channel's bus time in the bin,
  // `channels` wide), bins kept from the current simulated time on, since a stream can reach far
  // ahead of it.
  std::unique_ptr<BinCalendar> m_flow;
  // The ports through which the cores reach device memory (see set_requesters): per port, a
  // calendar for each direction.
  struct Port {
    std::unique_ptr<BinCalendar> dir[2];  // read (data to the cores), write
    Scalar* bytes[2] = {nullptr, nullptr};
  };
  std::vector<Port> m_ports;
  uint32_t m_requesters = 0;
  double m_port_ps_per_byte = 0;
  double m_port_request_ps = 0;
  // Port time of `requests` requests carrying `bytes` in all: their bytes plus each request's own
  // time (port_request_time).
  double port_ps(uint64_t bytes, uint64_t requests) const {
    return static_cast<double>(bytes) * m_port_ps_per_byte + static_cast<double>(requests) * m_port_request_ps;
  }
  // A flow stream's pace on its port, port-ps per ps, when it moves `rate_bytes` bytes per ps:
  // port_ps of its requests per byte moved.
  double port_pace(double rate_bytes, uint64_t bytes, uint64_t requests) const {
    return rate_bytes * port_ps(bytes, requests) / static_cast<double>(std::max<uint64_t>(bytes, 1));
  }
  // The port `src` reaches memory through, or null without ports.
  Port* port_of(const TransferExt* x);
  // Places `bytes` on the port's calendar for that direction from t_ps, at most `rate` port-ps
  // per ps; returns when they are through. The caller has pruned the calendars.
  double cross_port(Port& port, bool is_write, uint64_t bytes, uint64_t requests, double t_ps, double rate);
  // Forgets calendar bins that ended before the current simulated time.
  void prune_calendars();
  int64_t m_pruned_to = INT64_MIN;
  // The reads that can still be coalesced: what was read, by whom (-1: no requester known), when
  // it was issued and when its data was delivered.
  // `ports`: the ports its data has crossed (bit i: port i), each once; `copies`: the requesters
  // it has served, its own included (at most coalesce_fanout).
  struct FlowRecent { uint64_t addr = 0, bytes = 0, run = 0, stride = 0; double issued = 0, done = 0; int64_t src = -1; uint64_t ports = 0; uint32_t copies = 1; };
  // Kept (RecentTable) for m_flow_span after issue: history + coalesce_window, or the longest
  // stream's time so far + coalesce_window, so that a read in flight can be joined until it is
  // done (the span only grows: an entry is never dropped by a later insertion's shorter span).
  RecentTable<FlowRecent> m_flow_recent;
  double m_flow_span = 0;
  // A requester's pace over a round trip `lat`: `outstanding` requests of `req` bytes per round
  // trip (with dma.run_order serial and several runs, one run per round trip per window), and no
  // faster than one request per issue interval (stream() and coalesced_stream()).
  double requester_rate(const TransferExt& x, uint64_t req, uint64_t run, bool several_runs, double lat) const;
  // Its pace over a row hit's round trip on an idle device (a coalesced copy's).
  double unloaded_rate(const TransferExt& x, uint64_t req, uint64_t run, bool several_runs) const;
  // A read stream served with `leader`, an identical one in flight (stream()).
  double coalesced_stream(const TransferExt& x, FlowRecent& leader, uint64_t bytes, uint64_t req, uint64_t requests, double t);
  TraceWriter::TrackId m_flow_track = 0;
  double m_mix[2] = {0, 0};  // recent read and write traffic (EWMA), flow model
  double m_mix_t = 0;
  // Flow model: bytes the streams move per bin, each spread evenly over its own time (the load a
  // stream arriving in that bin finds), from bin m_load_first on.
  std::vector<double> m_load;
  int64_t m_load_first = 0;
  void add_load(double from, double to, double bytes);
  double load_bytes_at(double t) const;

  Lpddr5Timing m_t;
  bool m_pow2 = false;  // banks and row size are powers of two: bank_of uses shifts
  uint32_t m_row_shift = 0, m_bank_shift = 0;
  bool m_geom_pow2 = false;  // also interleave and channel count: stream() uses shifts
  uint32_t m_il_shift = 0, m_nch_shift = 0;
  uint32_t m_row_group_shift = 0;  // stripe >> this: its row (of every bank of every channel)
  mutable uint64_t m_fold_row = 0, m_fold = 0;  // channel_of's last row number and its fold
  uint64_t m_capacity;
  std::vector<Channel> m_channels;
  mutable std::vector<double> m_refresh_wait;  // refresh_wait_ps by spread, computed when first asked (-1: not yet)
  std::unordered_map<uint64_t, std::unique_ptr<uint8_t[]>> m_pages;
  struct Seg { uint64_t local = 0, bytes = 0; bool used = false; };
  std::vector<Seg> m_segs;  // per-channel scratch for access()
  // bank_of() of the last channel-local address channel_access() looked up.
  uint64_t m_bank_memo_local = UINT64_MAX;
  uint32_t m_bank_memo = 0;
  int64_t m_bank_memo_row = 0;
  Scalar& m_reads;
  Scalar& m_writes;
  Scalar& m_row_hits;
  Scalar& m_row_misses;
  Scalar& m_turnarounds;
  Scalar& m_bytes_read;
  Scalar& m_bytes_written;
  Scalar& m_coalesced;
  Scalar& m_bytes_coalesced;
  struct Recent { uint64_t addr = 0, bytes = 0; double issued = 0, done = 0; int64_t src = -1; uint64_t ports = 0; uint32_t copies = 1; };
  // Whether a read `copies` requesters already take can be delivered to one more.
  bool fanout_left(uint32_t copies) const { return m_t.coalesce_fanout == 0 || copies < m_t.coalesce_fanout; }
  // A port's bit in Recent::ports; none for no port, and none for ports past the 63rd, so that
  // their copies cross every time.
  uint64_t port_bit(const Port* p) const {
    if (!p) return 0;
    const auto i = static_cast<size_t>(p - m_ports.data());
    return i < 63 ? uint64_t{1} << i : 0;
  }
  // A coalesced copy for a requester behind `port`: across it unless the data already crossed it
  // (`crossed`, a Recent::ports set, gains it), at most `rate` port-ps per ps from t_ps; `finish`
  // is then no earlier than the crossing's end plus the front end.
  void copy_across(Port* port, uint64_t& crossed, uint64_t bytes, uint64_t requests, double t_ps, double rate,
                   double& finish);
  // The channel of interleave stripe `stripe` (address / interleave). With channel_xor the bits of
  // the row the stripe falls in are XORed into it: the same permutation for every aligned group of
  // `channels` stripes within a row, so locality within a row is kept.
  uint64_t channel_of(uint64_t stripe) const {
    const uint64_t nch = m_t.channels;
    if (nch == 1) return 0;
    if (m_geom_pow2) {
      uint64_t c = stripe & (nch - 1);
      if (m_t.channel_xor) {  // nch > 1 here, so the shift is at least 1 and the loop ends
        // The fold of the row number, kept for the next call: a run's stripes mostly share a row.
        const uint64_t row = stripe >> m_row_group_shift;
        if (row != m_fold_row) {
          uint64_t f = 0;
          for (uint64_t g = row; g; g >>= m_nch_shift) f ^= g & (nch - 1);
          m_fold_row = row;
          m_fold = f;
        }
        c ^= m_fold;
      }
      return c;
    }
    uint64_t c = stripe % nch;
    if (m_t.channel_xor)
      for (uint64_t g = stripe / nch / (m_t.row_bytes / m_t.interleave * m_t.banks); g; g /= nch) c += g % nch;
    return c % nch;
  }
  // Channels a request of `bytes` reaches (its interleave units, at most every channel).
  uint64_t channels_spanned(uint64_t bytes) const {
    const uint64_t units = std::max<uint64_t>(1, (bytes + m_t.interleave - 1) / m_t.interleave);
    return std::min<uint64_t>(units, m_t.channels);
  }
  // Whether a read by `src` can ride with an earlier one by `leader`: only another requester's (the
  // copy is delivered as the data passes the other cores; a core asking again for what it read
  // before gets no copy of its own). Either unknown (-1): yes.
  static bool other_requester(int64_t leader, int64_t src) { return leader < 0 || src < 0 || leader != src; }
  static int64_t requester(const TransferExt* x) { return x ? static_cast<int64_t>(idx(x->src)) : -1; }
  RecentTable<Recent> m_recent;  // as m_flow_recent
  // A request's slot in m_recent.
  static uint64_t recent_key(uint64_t addr, uint64_t bytes) { return addr * 1315423911ull ^ bytes; }
  Scalar& m_last_done;
};

}  // namespace vspyre
