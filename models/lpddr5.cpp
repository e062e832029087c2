#include "models/lpddr5.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "models/sc_ps.h"
#include "sim/engine/log.h"

namespace vspyre {
namespace {
DebugFlag g_dbg("lpddr5", "every LPDDR5 request with its channel timing");
}

// The source a device timing's default cites (the controller's and model's settings cite theirs).
constexpr const char* kJedecTiming = "LPDDR5 JEDEC-class timing (preset)";

Lpddr5::Lpddr5(const sc_core::sc_module_name& name, BuildContext& ctx)
    : Component(name, ctx),
      port("port"),
      m_capacity(params().get_size("capacity", "128GB",
                                   {"device memory size (16 GB of it holds ECC on the real card)",
                                    Provenance::Datasheet, "IBM Spyre announcement"})),
      m_reads(stats().scalar("reads", "requests", "read requests served")),
      m_writes(stats().scalar("writes", "requests", "write requests served")),
      m_row_hits(stats().scalar("row_hits", "rows", "row-piece accesses that found their row open")),
      m_row_misses(stats().scalar("row_misses", "rows", "row-piece accesses that had to precharge/activate")),
      m_turnarounds(stats().scalar("turnarounds", "events", "write-to-read plus read-to-write turnaround pairs")),
      m_bytes_read(stats().scalar("bytes_read", "B", "bytes read")),
      m_bytes_written(stats().scalar("bytes_written", "B", "bytes written")),
      m_coalesced(stats().scalar("coalesced_reads", "requests", "reads served by an identical read in flight")),
      m_bytes_coalesced(stats().scalar("bytes_coalesced", "B", "bytes delivered without a device-memory read")),
      m_last_done(stats().scalar("last_done_ps", "ps", "completion time of the last request")) {
  ParamReader& p = params();
  const double data_rate = p.get_real("data_rate_mtps", 6400,
                                      {"transfers per second per pin, in MT/s (preset)", Provenance::Estimate,
                                       "LPDDR5-6400 matches the 204.8 GB/s nominal"},
                                      1, 1e6);
  const auto width_bits = p.get_int("channel_width_bits", 16, {"data pins per channel (LPDDR5 x16)", Provenance::Estimate}, 8, 64);
  m_t.channels = static_cast<uint32_t>(p.get_int(
      "channels", 16, {"independent channels: 16 x 16 bit = the 256-bit bus", Provenance::Estimate, "hardware.md"}, 1, 256));
  m_t.banks = static_cast<uint32_t>(p.get_int("banks", 16, {"banks per channel", Provenance::Estimate, "LPDDR5 standard"}, 1, 64));
  m_t.row_bytes = p.get_size("row_size", "2KiB", {"page size per bank", Provenance::Estimate, "LPDDR5 x16 page"});
  m_t.interleave = p.get_size("interleave", "256B",
                              {"bytes mapped to one channel before the next channel takes over", Provenance::Estimate});
  // `source`: the device's timings are JEDEC-class; the controller's and the model's own settings
  // name theirs.
  auto ns = [&](const char* key, const char* def, const char* desc, const char* source = kJedecTiming) {
    return p.get_time(key, def, {desc, Provenance::Estimate, source}).to_ps(data_rate * 1e6 / 8);
  };
  // A device timing (tens of ns on LPDDR5) past 10 us is a unit typed wrong: every request would
  // take that long, and a kernel's transfers would reach past what the calendars hold.
  auto dram_ns = [&](const char* key, const char* def, const char* desc, const char* source = kJedecTiming) {
    const double v = ns(key, def, desc, source);
    if (v > 1e7)
      params().refuse(key, format_time_ps(v) + " is past 10us, the longest device timing this model takes");
    return v;
  };
  m_t.t_rcd = dram_ns("t_rcd", "18ns", "activate to column command");
  m_t.t_rp = dram_ns("t_rp", "18ns", "precharge");
  m_t.t_rl = dram_ns("t_rl", "18ns", "read latency, command to first data");
  m_t.t_wl = dram_ns("t_wl", "9ns", "write latency, command to first data");
  m_t.t_wtr = dram_ns("t_wtr", "12ns", "end of write data to read command");
  m_t.t_rtw = dram_ns("t_rtw", "10ns", "read to write bus turnaround");
  m_t.t_wr = dram_ns("t_wr", "34ns", "write recovery: end of write data to precharge of that row");
  m_t.t_rfc = dram_ns("t_rfc", "280ns", "all-bank refresh cycle time");
  m_t.t_refi = ns("t_refi", "3906ns", "average refresh interval");
  // A controller may postpone and pull in refreshes (LPDDR5 allows up to 8 each way) and a card's
  // kernel starts at no particular phase of them, so a card's measured time is an average over
  // refresh phases. With refresh at fixed times 32 cores in step met it at a phase that changed
  // with where the kernel started: shifting every kernel of the validation table by 1 us changed
  // 50 of 712 predictions by over 5 % (copy 8192x4096 on 32 cores: 1402 us starting after a 1 us
  // launch, 1217 after 2 us; 1221-1238 spread). See bench/validation/README.md (2026-12-03).
  m_t.refresh_spread =
      p.get_choice("refresh", "spread", {"spread", "windows"},
                   {"spread: every bin of the bus calendar loses t_rfc / t_refi, each bank's rows close once per "
                    "t_refi at a time staggered across the banks (the average over refresh phases); windows: each "
                    "channel's all-bank refresh at fixed times, staggered by channel",
                    Provenance::Estimate}) == "spread";
  m_t.t_hide = dram_ns("t_hide", "25ns", "part of a row miss (precharge + activate) the controller overlaps with other transfers",
                       "controller estimate: fit to 150 GB/s one-direction streaming (configs/spyre.yaml)");
  m_t.t_frontend = dram_ns("t_frontend", "65ns", "memory controller plus on-chip network latency, each way",
                           "controller estimate: fit to the validation table (configs/spyre.yaml)");
  // A bin is also the window over which reads and writes sharing a channel are counted as mixed
  // (turnarounds): 1 us is about the depth of the controller's queues when 32 cores stream (each
  // keeps `outstanding` requests in flight), so traffic that alternates direction every few
  // hundred ns is charged its turnarounds, as a real controller serving both queues would be.
  m_t.bin = ns("bin", "1us", "length of one bin of the bus calendar (model resolution, mixing window)",
                 "model setting");
  m_t.history = ns("history", "50us", "how long the bus calendar keeps past bins (>> sim.quantum)", "model setting");
  m_t.coalesce_window = ns("coalesce_window", "5us",
                           "identical reads arriving within this window are served once (0 = never)",
                           "controller estimate (configs/spyre.yaml)");
  m_t.coalesce_fanout = static_cast<uint32_t>(
      p.get_int("coalesce_fanout", 8,
                {"most requesters one coalesced device-memory read is delivered to; the next one reads again (0 = any number)",
                 Provenance::Measured, "torch-spyre work_division.py _COHORT_LIMIT (configs/spyre.yaml)"},
                0, 1 << 20));
  m_t.mix_window = ns("mix_window", "10us",
                      "flow DMA model: the window over which the read/write mix that sets the turnarounds is averaged",
                      "model setting");
  m_t.write_batch = p.get_size("write_batch", "896B", {"bytes per channel the controller drains per write burst", Provenance::Estimate, "fit to the validation table (configs/spyre.yaml)"});
  m_t.reorder_rows = static_cast<uint32_t>(
      p.get_int("reorder_rows", 1,
                {"rows per bank the scheduler batches requests among (1 = serve in arrival order)", Provenance::Estimate},
                1, kMaxReorderRows));
  m_t.reorder_window = ns("reorder_window", "1us",
                          "how long a bank's recent row stays in the scheduler's reach (see reorder_rows)",
                          "controller estimate (configs/spyre_flow.yaml fits it)");
  // Host speed only: the results are the same either way (a test checks it), false walks every
  // channel of every stream.
  m_banks_uniform = m_shortcut = p.get_bool("flow_shortcut", true,
                               {"flow DMA model: while every channel's banks hold the same state, a stream that "
                                "covers whole interleave stripes walks channel 0 for all (host speed only; "
                                "results identical)",
                                Provenance::Derived});
  m_t.bank_xor = p.get_bool("bank_xor", true, {"XOR row bits into the bank index (permutation interleaving)", Provenance::Estimate});
  m_t.channel_xor =
      p.get_bool("channel_xor", true,
                 {"XOR the row bits into the channel index (one permutation of the channels per "
                  "row group of row_size x banks x channels)",
                  Provenance::Estimate});
  if (m_t.interleave % kStickBytes || m_t.interleave == 0)
    params().refuse("interleave", "must be a positive multiple of 128B, got " + std::to_string(m_t.interleave) + " B");
  if (m_t.row_bytes == 0 || m_t.row_bytes % m_t.interleave)
    params().refuse_pair("row_size", "interleave",
                         "a row (" + std::to_string(m_t.row_bytes) + " B) must be a positive multiple of the interleave (" +
                             std::to_string(m_t.interleave) + " B): it holds whole interleave stripes");
  if (m_t.t_refi <= m_t.t_rfc)
    params().refuse_pair("t_refi", "t_rfc",
                         "the refresh interval (" + format_time_ps(m_t.t_refi) + ") must exceed the refresh time (" +
                             format_time_ps(m_t.t_rfc) + ")");
  if (m_t.bin <= 0 || m_t.history < 2 * m_t.bin)
    params().refuse_pair("bin", "history",
                         "the bin (" + format_time_ps(m_t.bin) + ") must be positive and the history (" +
                             format_time_ps(m_t.history) + ") at least two bins");
  if (m_t.write_batch == 0) params().refuse("write_batch", "must be positive");
  auto pow2 = [](uint64_t v) { return v && !(v & (v - 1)); };
  m_pow2 = pow2(m_t.banks) && pow2(m_t.row_bytes) && m_t.banks > 1;
  m_geom_pow2 = m_pow2 && pow2(m_t.interleave) && pow2(m_t.channels);
  if (m_geom_pow2) {
    m_il_shift = static_cast<uint32_t>(__builtin_ctzll(m_t.interleave));
    m_nch_shift = static_cast<uint32_t>(__builtin_ctzll(m_t.channels));
    m_row_group_shift = m_nch_shift +
                        static_cast<uint32_t>(__builtin_ctzll(m_t.row_bytes / m_t.interleave)) +
                        static_cast<uint32_t>(__builtin_ctzll(m_t.banks));
  }
  if (m_pow2) {
    m_row_shift = static_cast<uint32_t>(__builtin_ctzll(m_t.row_bytes));
    m_bank_shift = static_cast<uint32_t>(__builtin_ctzll(m_t.banks));
  }
  m_t.ps_per_byte = 1e12 / (data_rate * 1e6 * static_cast<double>(width_bits) / 8.0);
  {
    // A miss's exposed time depends only on whether the bank had a row open and whether it was
    // written (miss_exposed_ps): three values.
    Bank b;
    auto whole = [](double v) { return v >= 0 && v < 0x1p40 && std::floor(v) == v; };
    const double none = miss_exposed_ps(b);
    b.open_row = 0;
    const double clean = miss_exposed_ps(b);
    b.written = true;
    m_exposed_whole = whole(none) && whole(clean) && whole(miss_exposed_ps(b));
  }

  // The calendars take work in bins and count a bin full when less than a stick's bus time is
  // left: a bin that cannot hold one stick (after refresh's share) is full from the start, and a
  // transfer would look for room forever.
  m_min_free = static_cast<double>(kStickBytes) * m_t.ps_per_byte;  // a stick's bus time on a channel
  if (m_min_free > m_t.bin * (1.0 - m_t.t_rfc / m_t.t_refi)) {
    char rate[32];
    std::snprintf(rate, sizeof rate, "%g", data_rate);
    params().refuse("bin", format_time_ps(m_t.bin) + " holds less than one 128 B stick's bus time on a channel (" +
                                             format_time_ps(m_min_free) + " at data_rate_mtps " + rate +
                                             ", less refresh's share): raise the bin or the data rate");
  }
  // Each channel keeps history / bin bins.
  if (m_t.history / m_t.bin > 1048576.0)
    params().refuse("bin", format_time_ps(m_t.bin) + " against a history of " +
                                             format_time_ps(m_t.history) +
                                             " keeps more than 1048576 bins a channel: raise the bin or shorten the history");

  m_channels.resize(m_t.channels);
  m_segs.resize(m_t.channels);
  m_replay_n.resize(m_t.channels);
  m_chan_bytes.resize(m_t.channels);
  m_chan_exposed.resize(m_t.channels);
  for (uint32_t c = 0; c < m_t.channels; ++c) {
    Channel& ch = m_channels[c];
    ch.banks.resize(m_t.banks);
    ch.kept = static_cast<int64_t>(std::ceil(m_t.history / m_t.bin)) + 2;
    int64_t slots = 1;
    while (slots < ch.kept) slots *= 2;
    ch.ring.resize(static_cast<size_t>(slots));
    ch.mask = slots - 1;
    // Channels refresh staggered across the interval so they never all stop at once.
    ch.refresh_offset = m_t.t_refi * (c + 1) / m_t.channels;
    ch.refresh_epoch = FloorDiv(m_t.t_refi);
    StatGroup& g = stats().group("channel_" + std::to_string(c));
    ch.bytes_read = &g.scalar("bytes_read", "B", "bytes read on this channel");
    ch.bytes_written = &g.scalar("bytes_written", "B", "bytes written on this channel");
    if (tracing()) ch.track = trace()->track("memory", "channel_" + std::to_string(c));
  }
  if (tracing()) m_flow_track = trace()->track("memory", "streams");
  // With refresh spread every bin holds the same bus time: summed once (in the same order, so the
  // same double), not for every new bin.
  double spread_cap = 0;
  if (m_t.refresh_spread)
    for (const Channel& ch : m_channels) spread_cap += bin_capacity(ch, 0);
  m_flow = std::make_unique<BinCalendar>(m_t.bin, static_cast<double>(m_t.channels), m_min_free,
                                         [this, spread_cap](int64_t k) {
                                           if (m_t.refresh_spread) return spread_cap;
                                           double cap = 0;
                                           for (const Channel& ch : m_channels) cap += bin_capacity(ch, k);
                                           return cap;
                                         });
  const auto ports = p.get_int(
      "ports", 2,
      {"ports through which the cores reach device memory, each serving a contiguous group of cores (0: none). "
       "The memory sits at one stop of the ring: the cores on either side of it arrive over that side's link",
       Provenance::Estimate,
       "sweep_records.csv (torch-spyre cost model database): memory-bound kernels on 8 and 16 cores run at the same "
       "bandwidth, on 32 about twice it"},
      0, 64);
  const double port_bw = p.get_bandwidth(
      "port_bandwidth", "95GB/s",
      {"bytes per second one port carries each way (reads to its cores, writes from them)", Provenance::Estimate,
       "fitted: amax on 8 and 16 cores (sweep_records.csv) read at the same rate"});
  if (ports > 0 && !(port_bw > 0))
    params().refuse("port_bandwidth", "must be positive when ports > 0");
  if (ports > 0) m_port_ps_per_byte = 1e12 / port_bw;
  const double port_stick_ps = static_cast<double>(kStickBytes) * m_port_ps_per_byte;  // a port's min_free
  if (ports > 0 && port_stick_ps > m_t.bin)
    params().refuse("port_bandwidth", "a 128 B stick takes " + format_time_ps(port_stick_ps) +
                                             " at the port, longer than a calendar bin (bin " + format_time_ps(m_t.bin) +
                                             "): raise port_bandwidth or the bin");
  // Each request also holds its port a fixed time (0: bytes only).
  m_port_request_ps = p.get_time("port_request_time", "5ns",
                                 {"time each request takes its port on top of its bytes (header, command slot)",
                                  Provenance::Estimate, "fitted with port_bandwidth: validation table, stop 33"})
                          .to_ps(data_rate * 1e6 / 8);
  if (m_port_request_ps < 0)
    params().refuse("port_request_time", "must not be negative");
  m_ports.resize(static_cast<size_t>(ports));
  for (size_t i = 0; i < m_ports.size(); ++i) {
    StatGroup& g = stats().group("port_" + std::to_string(i));
    for (int d = 0; d < 2; ++d) {
      m_ports[i].dir[d] = std::make_unique<BinCalendar>(m_t.bin, 1.0, port_stick_ps,
                                                        [this](int64_t) { return m_t.bin; });
      m_ports[i].bytes[d] = &g.scalar(d ? "bytes_written" : "bytes_read", "B",
                                      d ? "bytes the cores of this port wrote" : "bytes this port delivered to its cores");
    }
  }
  stats().formula("peak_GBps", [this] { return peak_bandwidth() / 1e9; }, "GB/s", "nominal peak bandwidth");
  stats().formula("resident_bytes", [this] { return static_cast<double>(resident_bytes()); }, "B",
                  "host memory holding written device memory");

  port.register_b_transport(this, &Lpddr5::b_transport);
  port.register_transport_dbg(this, &Lpddr5::transport_dbg);
  expose_target("port", port);
}

double Lpddr5::bin_capacity(const Channel& ch, int64_t index) const {
  // Bus time in the bin less the refresh's average share (spread), or less any overlap with this
  // channel's refresh windows.
  if (m_t.refresh_spread) return m_t.bin * std::max(0.0, 1.0 - m_t.t_rfc / m_t.t_refi);
  return window_capacity(ch, index);
}

double Lpddr5::window_capacity(const Channel& ch, int64_t index) const {
  const double lo = static_cast<double>(index) * m_t.bin, hi = lo + m_t.bin;
  double cap = m_t.bin;
  double k = std::floor((lo - ch.refresh_offset - m_t.t_rfc) / m_t.t_refi);
  for (double w = ch.refresh_offset + k * m_t.t_refi; w < hi; w += m_t.t_refi) {
    const double a = std::max(lo, w), b = std::min(hi, w + m_t.t_rfc);
    if (b > a) cap -= b - a;
  }
  return std::max(0.0, cap);
}

Lpddr5::Bin& Lpddr5::new_bin_at(Channel& ch, int64_t& index) {
  if (!ch.started) {
    ch.started = true;
    ch.first_bin = ch.end_bin = index;
  }
  if (index < ch.first_bin) index = ch.first_bin;
  // Far past the last bin (a card idle for a while, or a slow transfer): the bins between would
  // each be made and dropped again; start from the last `kept` of them, as the loop would leave.
  if (index - ch.end_bin > ch.kept) ch.first_bin = ch.end_bin = index - ch.kept;
  while (index >= ch.end_bin) {
    if (ch.end_bin - ch.first_bin == ch.kept) ++ch.first_bin;
    ch.ring[static_cast<size_t>(ch.end_bin & ch.mask)] = Bin{bin_capacity(ch, ch.end_bin)};
    ++ch.end_bin;
  }
  return ch.ring[static_cast<size_t>(index & ch.mask)];
}

int64_t Lpddr5::first_open(Channel& ch, int64_t index, Bin*& bin) {
  const double min_free = m_min_free;
  int64_t j = index;
  for (;;) {
    Bin& b = bin_at(ch, j);
    if (b.free >= min_free) {
      bin = &b;
      break;
    }
    j = b.next > j ? b.next : j + 1;
  }
  // Path compression: every full bin visited now points straight at the answer. (Usually the bin
  // asked for was open and there is none. When `index` was older than the history, bin_at moves k
  // up to the open bin, whose `next` then points at itself, which means the same as none.)
  for (int64_t k = index; k < j;) {
    Bin& b = bin_at(ch, k);
    const int64_t nk = b.next > k ? b.next : k + 1;
    b.next = j;
    k = nk;
  }
  return j;
}

double Lpddr5::place(Channel& ch, double ready, double need, uint64_t bytes, bool is_write) {
  // floor(ready / bin): truncation is the floor for a time that is not negative.
  const double q = ready / m_t.bin;
  auto idx = static_cast<int64_t>(q >= 0 ? q : std::floor(q));
  double left = need;
  const double per_byte = bytes ? need / static_cast<double>(bytes) : 0.0;
  for (;; ++idx) {
    // Skip bins with less than one stick's bus time left: full for every practical purpose. The
    // usual case, a kept bin with room, needs no search.
    Bin* bp = nullptr;
    if (idx >= ch.first_bin && idx < ch.end_bin && ch.ring[static_cast<size_t>(idx & ch.mask)].free >= m_min_free)
      bp = &ch.ring[static_cast<size_t>(idx & ch.mask)];
    else
      idx = first_open(ch, idx, bp);
    Bin& b = *bp;
    const double lo = static_cast<double>(idx) * m_t.bin;
    // A request ready in the middle of a bin can use only the part of it after `ready`.
    const double usable = std::min(b.free, lo + m_t.bin - std::max(lo, ready));
    if (usable <= 0) continue;
    // Bytes this bin carries, and the turnarounds that mixing them with the other direction costs.
    double take = std::min(usable, left);
    double& mine = is_write ? b.wr : b.rd;
    const double other = is_write ? b.rd : b.wr;
    const double moved = per_byte > 0 ? take / per_byte : 0.0;
    // Turnaround pairs grow with the smaller direction's bytes; counted as an average, so the
    // result does not depend on the bin length. (None while the bin carries only this direction.)
    const double wb = static_cast<double>(m_t.write_batch), pair_ps = turnaround_pair_ps(m_t);
    // The pairs after moving x ps of this transfer here, and the time they add to the bin.
    auto pairs_after = [&](double x) {
      return other > 0 ? std::min(mine + (per_byte > 0 ? x / per_byte : 0.0), other) / wb : 0.0;
    };
    auto extra_for = [&](double x) { return std::max(0.0, pairs_after(x) - b.pairs) * pair_ps; };
    double pairs = pairs_after(take);
    double extra = extra_for(take);
    if (take + extra > usable) {
      // Not all of it fits: move what fits with the pairs of what it moves (x + extra_for(x) =
      // usable, a continuous piecewise-linear rise with breaks where the pairs start to grow and
      // where this direction stops being the smaller), pay those here, continue in the next bin.
      const double top = take;
      std::array<double, 4> at = {0.0, top, 0.0, 0.0};
      size_t n = 2;
      if (per_byte > 0) {
        for (const double x : {(b.pairs * wb - mine) * per_byte, (other - mine) * per_byte})
          if (x > 0 && x < top) at[n++] = x;
      }
      std::sort(at.begin(), at.begin() + static_cast<std::ptrdiff_t>(n));
      double x = 0;
      for (size_t i = 0; i + 1 < n; ++i) {
        const double g0 = at[i] + extra_for(at[i]), g1 = at[i + 1] + extra_for(at[i + 1]);
        if (g1 <= usable) {
          x = at[i + 1];
          continue;
        }
        x = g1 > g0 ? at[i] + (usable - g0) * (at[i + 1] - at[i]) / (g1 - g0) : at[i];
        break;
      }
      take = std::max(0.0, std::min(x, top));
      if (take <= 0) continue;
      pairs = pairs_after(take);
      extra = extra_for(take);
      mine += per_byte > 0 ? take / per_byte : 0.0;
    } else {
      mine += moved;
    }
    if (pairs > b.pairs) {
      m_turnarounds += pairs - b.pairs;
      b.pairs = pairs;
    }
    b.free -= take + extra;
    left -= take;
    if (left <= 1e-9) {
      // Ends where the bin's used time reaches, but never before it could have started.
      const double end = lo + (m_t.bin - b.free);
      return std::max(end, ready + need);
    }
  }
}

inline uint32_t Lpddr5::bank_of(uint64_t local, int64_t& row) const {
  // Permutation-based bank interleaving: row bits XOR into the bank index, so streams whose
  // addresses differ by a multiple of the row span do not all land on one bank.
  if (m_pow2) {  // the usual geometry: shifts and masks, same result as below
    const uint64_t page = local >> m_row_shift, mask = m_t.banks - 1;
    const uint64_t r = page >> m_bank_shift;
    row = static_cast<int64_t>(r);
    uint64_t b = page & mask;
    if (m_t.bank_xor)  // m_pow2 needs two banks or more: the shift is at least 1
      for (uint64_t q = r; q; q >>= m_bank_shift) b ^= q & mask;
    return static_cast<uint32_t>(b);
  }
  row = static_cast<int64_t>(local / (m_t.row_bytes * m_t.banks));
  auto b = static_cast<uint32_t>((local / m_t.row_bytes) % m_t.banks);
  if (m_t.bank_xor && m_t.banks > 1) {  // one bank: the fold below would never end, and b is 0
    uint64_t fold = 0;
    for (auto r = static_cast<uint64_t>(row); r; r /= m_t.banks) fold ^= r % m_t.banks;
    b = static_cast<uint32_t>((b ^ fold) % m_t.banks);
  }
  return b;
}

inline bool Lpddr5::row_hit(Bank& bank, int64_t row, double t) {
  bool hit = bank.open_row == row;
  const uint32_t k = m_t.reorder_rows;
  if (k <= 1) return hit;
  // The slot holding this row; else the first empty one (a refresh empties them all); else the
  // least recently used (the row the scheduler no longer holds requests for), of two used at the
  // same time the lower row: which slot holds which row never matters (same_bank relies on it).
  for (uint32_t i = 0; i < k; ++i)
    if (bank.recent_row[i] == row) {
      hit = hit || t - bank.recent_t[i] <= m_t.reorder_window;
      bank.recent_t[i] = std::max(bank.recent_t[i], t);
      return hit;
    }
  uint32_t slot = 0, empty = k;
  for (uint32_t i = 0; i < k; ++i) {
    if (bank.recent_row[i] < 0) {
      if (empty == k) empty = i;
    } else if (bank.recent_t[i] < bank.recent_t[slot] ||
               (bank.recent_t[i] == bank.recent_t[slot] && bank.recent_row[i] < bank.recent_row[slot])) {
      slot = i;
    }
  }
  if (empty < k) slot = empty;
  bank.recent_t[slot] = t;
  bank.recent_row[slot] = row;
  return hit;
}

// A miss occupies the bus for the part of precharge + activate the controller cannot hide;
// closing a row that was last written first waits out the write recovery time.
inline double Lpddr5::miss_exposed_ps(const Bank& bank) const {
  const double close = bank.open_row >= 0 ? m_t.t_rp + (bank.written ? m_t.t_wr : 0.0) : 0.0;
  return std::max(0.0, close + m_t.t_rcd - m_t.t_hide);
}

inline void Lpddr5::use_row(Bank& bank, int64_t row, bool hit, bool is_write) {
  bank.written = is_write || (hit && bank.written);
  bank.open_row = row;
}

void Lpddr5::split_banks() {
  for (size_t c = 1; c < m_channels.size(); ++c) m_channels[c].banks = m_channels[0].banks;
  m_banks_uniform = false;
  m_merge_tick = 0;
}

bool Lpddr5::same_bank(const Bank& a, const Bank& b) const {
  if (a.open_row != b.open_row || a.written != b.written || a.last_refresh_epoch != b.last_refresh_epoch) return false;
  // Each used slot of a has its row in b at the same time, and both use as many slots.
  const uint32_t k = m_t.reorder_rows;
  uint32_t used_a = 0, used_b = 0;
  for (uint32_t i = 0; i < k; ++i) used_b += b.recent_row[i] >= 0;
  for (uint32_t i = 0; i < k; ++i) {
    if (a.recent_row[i] < 0) continue;
    ++used_a;
    uint32_t j = 0;
    while (j < k && b.recent_row[j] != a.recent_row[i]) ++j;
    if (j == k || b.recent_t[j] != a.recent_t[i]) return false;
  }
  return used_a == used_b;
}

bool Lpddr5::channels_converged() const {
  const std::vector<Bank>& ref = m_channels[0].banks;
  for (size_t c = 1; c < m_channels.size(); ++c)
    for (size_t b = 0; b < ref.size(); ++b)
      if (!same_bank(m_channels[c].banks[b], ref[b])) return false;
  return true;
}

double Lpddr5::channel_access(uint32_t c, uint64_t local, uint64_t bytes, bool is_write, double t) {
  if (m_banks_uniform) split_banks();
  Channel& ch = m_channels[c];
  const double cas = is_write ? m_t.t_wl : m_t.t_rl;
  double done = t;
  while (bytes > 0) {
    const uint64_t in_row =
        std::min<uint64_t>(bytes, m_t.row_bytes - (m_pow2 ? local & (m_t.row_bytes - 1) : local % m_t.row_bytes));
    // A request spreads over the channels at one channel-local address: the bank and row are
    // those of the previous channel's piece more often than not.
    if (local != m_bank_memo_local) {
      m_bank_memo_local = local;
      m_bank_memo = bank_of(local, m_bank_memo_row);
    }
    const int64_t row = m_bank_memo_row;
    Bank& bank = ch.banks[m_bank_memo];
    // A refresh since the bank's last use closed its row.
    // spread: bank b's rows close b / banks of an interval after the channel's.
    const double epoch = ch.refresh_epoch(
        t - ch.refresh_offset -
        (m_t.refresh_spread ? m_t.t_refi * static_cast<double>(m_bank_memo) / static_cast<double>(m_t.banks) : 0.0));
    // A refresh closes every row, the recent ones too.
    if (bank.last_refresh_epoch != epoch)
      for (auto& r : bank.recent_row) r = -1;
    const bool hit = row_hit(bank, row, t) && bank.last_refresh_epoch == epoch;
    const double data = static_cast<double>(in_row) * m_t.ps_per_byte;
    const double exposed = hit ? 0.0 : miss_exposed_ps(bank);
    const double ready = t + cas + (hit ? 0.0 : m_t.t_rcd);
    const double end = place(ch, ready, data + exposed, in_row, is_write);
    if (hit) ++m_row_hits;
    else ++m_row_misses;
    use_row(bank, row, hit, is_write);
    bank.last_refresh_epoch = epoch;
    *(is_write ? ch.bytes_written : ch.bytes_read) += static_cast<double>(in_row);
    if (tracing()) trace()->complete(ch.track, is_write ? "wr" : "rd", end - data - exposed, data + exposed);
    done = std::max(done, end);
    local += in_row;
    bytes -= in_row;
  }
  return done;
}

double Lpddr5::access(uint64_t addr, uint64_t bytes, bool is_write, double t_ps, const TransferExt* src) {
  const double t = t_ps + m_t.t_frontend;
  // Several cores reading the same operand (a matmul's shared weight slice) within a short
  // window: the controller serves the read once and the data is delivered to every requester
  // (read coalescing). A write to the range ends the sharing.
  if (m_t.coalesce_window > 0) {
    const uint64_t key = recent_key(addr, bytes);
    if (is_write) {
      m_recent.erase(key);
    } else if (Recent* it = m_recent.find(key); it && it->addr == addr && it->bytes == bytes &&
                                                 std::abs(t - it->issued) <= m_t.coalesce_window &&
                                                 other_requester(it->src, requester(src)) && fanout_left(it->copies)) {
      ++it->copies;
      ++m_coalesced;
      m_bytes_coalesced += static_cast<double>(bytes);
      // The copy rides with the first delivery past every core on the ring's side it went to:
      // it does not cross that port again. A requester behind another port gets it across its
      // own, once per port.
      double finish = std::max(it->done, t + m_t.t_frontend);
      copy_across(port_of(src), it->ports, bytes, 1, t, 1.0, finish);
      m_last_done.max_with(finish);
      return finish;
    }
  }
  const uint64_t il = m_t.interleave, nch = m_t.channels;
  double done = t;
  // A contiguous request maps to one contiguous channel-local range per channel.
  uint64_t a = addr;
  const uint64_t end = addr + bytes;
  std::vector<Seg>& segs = m_segs;
  // Shifts and masks on power-of-two geometry (every preset), divisions otherwise.
  const bool p2 = m_geom_pow2;
  uint64_t spanned = 0;  // channels the request reaches
  while (a < end) {
    const uint64_t off = p2 ? a & (il - 1) : a % il;
    const uint64_t chunk = std::min<uint64_t>(end - a, il - off);
    const uint64_t stripe = p2 ? a >> m_il_shift : a / il;
    Seg& s = segs[channel_of(stripe)];
    if (!s.used) {
      s.used = true;
      ++spanned;
      s.local = (p2 ? stripe >> m_nch_shift : stripe / nch) * il + off;
    }
    s.bytes += chunk;
    a += chunk;
  }
  // Refresh spread: its share of bus time comes off every bin, and a request meets it at no
  // particular phase: it waits the mean a lone request spread over its channels waits for a
  // refresh window (refresh_wait_ps; about 40 ns for 4 KiB over 16 channels).
  const double t_req = m_t.refresh_spread ? t + refresh_wait_ps(spanned) : t;
  for (uint32_t c = 0; c < nch; ++c)
    if (segs[c].used) {
      done = std::max(done, channel_access(c, segs[c].local, segs[c].bytes, is_write, t_req));
      segs[c] = Seg{};
    }
  // The data also crosses the requester's port, which every core on its side shares.
  Port* const port = port_of(src);
  if (port) {
    prune_calendars();
    done = std::max(done, cross_port(*port, is_write, bytes, 1, t, 1.0));
  }
  if (is_write) {
    ++m_writes;
    m_bytes_written += static_cast<double>(bytes);
  } else {
    ++m_reads;
    m_bytes_read += static_cast<double>(bytes);
  }
  const double finish = done + m_t.t_frontend;
  m_last_done.max_with(finish);
  // The sender's next request (as it announces it, or else where this one ends) comes after the
  // other cores' requests, by when its table slot (often a cache miss) has arrived.
  if (m_t.coalesce_window > 0) {
    if (src && src->next_bytes) m_recent.prefetch(recent_key(src->next_addr, src->next_bytes));
    else m_recent.prefetch(recent_key(addr + bytes, bytes));
  }
  if (!is_write && m_t.coalesce_window > 0) {
    m_recent.insert_or_assign(recent_key(addr, bytes), Recent{addr, bytes, t, finish, requester(src), port_bit(port)}, t,
                              m_t.history + m_t.coalesce_window, 65536);
  }
  VSPYRE_DEBUG(g_dbg, t_ps, "%s 0x%llx %llu B -> done %.1f ns", is_write ? "wr" : "rd",
               static_cast<unsigned long long>(addr), static_cast<unsigned long long>(bytes), finish / 1e3);
  return finish;
}

double Lpddr5::request_latency_ps(uint64_t bytes, bool is_write, double miss) const {
  // As access() finds it on an idle device: the request is spread over the channels its
  // interleave units reach; a row miss adds the activate and the part of the precharge the
  // controller cannot hide.
  const uint64_t spread = channels_spanned(bytes);
  const double per_channel = static_cast<double>(bytes) / static_cast<double>(spread);
  const double close = m_t.t_rp + (is_write ? m_t.t_wr : 0.0);
  const double miss_cost = m_t.t_rcd + std::max(0.0, close + m_t.t_rcd - m_t.t_hide);
  return 2 * m_t.t_frontend + (is_write ? m_t.t_wl : m_t.t_rl) + miss * miss_cost + per_channel * m_t.ps_per_byte +
         refresh_wait_ps(spread);
}

void Lpddr5::add_load(double from, double to, double bytes) {
  const double bin = m_t.bin;
  auto i0 = static_cast<int64_t>(std::floor(from / bin)), i1 = static_cast<int64_t>(std::floor(to / bin));
  if (i1 < i0) i1 = i0;
  // Forget bins more than the history behind simulated time.
  const auto keep_from = static_cast<int64_t>(std::floor((now_ps_fast() - m_t.history) / bin));
  if (m_load.empty()) m_load_first = std::min(i0, keep_from);
  if (keep_from > m_load_first) {
    const int64_t drop = std::min<int64_t>(keep_from - m_load_first, static_cast<int64_t>(m_load.size()));
    m_load.erase(m_load.begin(), m_load.begin() + drop);
    m_load_first += drop;
  }
  if (i0 < m_load_first) i0 = m_load_first;
  if (i1 < i0) return;
  if (i1 - m_load_first + 1 > static_cast<int64_t>(m_load.size())) m_load.resize(static_cast<size_t>(i1 - m_load_first + 1), 0.0);
  const double span = std::max(to - from, 1.0);
  for (int64_t i = i0; i <= i1; ++i) {
    const double lo = std::max(from, static_cast<double>(i) * bin), hi = std::min(to, static_cast<double>(i + 1) * bin);
    const double share = i0 == i1 ? 1.0 : std::max(0.0, hi - lo) / span;
    m_load[static_cast<size_t>(i - m_load_first)] += bytes * share;
  }
}

double Lpddr5::load_bytes_at(double t) const {
  const auto i = static_cast<int64_t>(std::floor(t / m_t.bin));
  if (i < m_load_first || i - m_load_first >= static_cast<int64_t>(m_load.size())) return 0;
  return m_load[static_cast<size_t>(i - m_load_first)];
}

double Lpddr5::refresh_wait_ps(uint64_t spread) const {
  const uint64_t nch = m_channels.size();
  // The same with refresh spread: it is the windows' average over phases either way.
  if (m_t.t_rfc <= 0 || m_t.t_refi <= 0 || spread == 0 || nch == 0) return 0;
  spread = std::min<uint64_t>(spread, nch);
  if (m_refresh_wait.size() != nch + 1) m_refresh_wait.assign(nch + 1, -1.0);
  if (m_refresh_wait[spread] >= 0) return m_refresh_wait[spread];
  // Averaged over ready times across 32 refresh intervals (128 per interval, at their middles)
  // and over which channel the request starts on. A request over k channels waits for the
  // latest of them, the running maximum over k: one pass gives every spread.
  constexpr int kIntervals = 32, kPerInterval = 128;
  constexpr int kSteps = kIntervals * kPerInterval;
  // A request starting on channel c0 and ready at t waits max(0, max over its k channels of
  // lo + before - t). Subtracting t is monotonic, so that is max(0, reach - t) with reach the
  // running maximum of lo + before over the channels: computed once per bin, not per time.
  std::vector<double> before(2 * nch);  // each channel's refresh time in the bin, twice over
  std::vector<double> reach(nch * nch);  // [c0 * nch + k]: max of lo + before[c0 .. c0 + k]
  std::vector<double> sum(nch + 1, 0.0);
  int64_t reach_index = 0;
  bool have_reach = false;
  for (int i = 0; i < kSteps; ++i) {
    const double t = (i + 0.5) * m_t.t_refi / kPerInterval;
    const auto index = static_cast<int64_t>(std::floor(t / m_t.bin));
    if (!have_reach || index != reach_index) {
      const double lo = static_cast<double>(index) * m_t.bin;
      for (uint64_t c = 0; c < nch; ++c) before[c] = before[c + nch] = m_t.bin - window_capacity(m_channels[c], index);
      for (uint64_t c0 = 0; c0 < nch; ++c0) {
        double r = lo + before[c0];
        for (uint64_t k = 0; k < nch; ++k) {
          r = std::max(r, lo + before[c0 + k]);
          reach[c0 * nch + k] = r;
        }
      }
      reach_index = index;
      have_reach = true;
    }
    for (uint64_t c0 = 0; c0 < nch; ++c0) {
      const double* rc = &reach[c0 * nch];
      for (uint64_t k = 0; k < nch; ++k) sum[k + 1] += std::max(0.0, rc[k] - t);
    }
  }
  for (uint64_t k = 1; k <= nch; ++k) m_refresh_wait[k] = sum[k] / (static_cast<double>(kSteps) * static_cast<double>(nch));
  return m_refresh_wait[spread];
}

void Lpddr5::prune_calendars() {
  // Bins that ended before the current simulated time can take no more work: forget them. A
  // card whose first transfer comes late (the shim's card runs for hours) does not build its
  // calendars from time zero.
  const auto now_bin =
      static_cast<int64_t>(std::floor(now_ps_fast() / m_t.bin)) - 1;
  if (now_bin == m_pruned_to) return;  // nothing new to forget
  m_pruned_to = now_bin;
  m_flow->prune_before(now_bin);
  for (Port& p : m_ports)
    for (auto& d : p.dir) d->prune_before(now_bin);
}

void Lpddr5::copy_across(Port* port, uint64_t& crossed, uint64_t bytes, uint64_t requests, double t_ps, double rate,
                         double& finish) {
  if (!port || (crossed & port_bit(port))) return;
  prune_calendars();
  crossed |= port_bit(port);
  finish = std::max(finish, cross_port(*port, false, bytes, requests, t_ps, rate) + m_t.t_frontend);
}

double Lpddr5::cross_port(Port& port, bool is_write, uint64_t bytes, uint64_t requests, double t_ps, double rate) {
  *port.bytes[is_write ? 1 : 0] += static_cast<double>(bytes);
  return port.dir[is_write ? 1 : 0]->place(t_ps, port_ps(bytes, requests), rate);
}

Lpddr5::Port* Lpddr5::port_of(const TransferExt* x) {
  if (!x || m_ports.empty()) return nullptr;
  const uint32_t n = std::max<uint32_t>(m_requesters, 1);
  const uint32_t c = std::min(idx(x->src), n - 1);
  return &m_ports[static_cast<size_t>(static_cast<uint64_t>(c) * m_ports.size() / n)];
}

double Lpddr5::stream(const TransferExt& x, uint64_t addr, bool is_write, double t_ps) {
  const uint64_t piece = x.stream_bytes;
  const uint64_t repeats = x.outer ? dma_repeats(*x.outer) : 1;
  const uint64_t bytes = piece * repeats;
  const uint64_t run = x.run_bytes ? x.run_bytes : piece;
  const uint64_t stride = x.run_bytes ? x.stride : piece;
  const uint64_t runs_per_piece = run ? (piece + run - 1) / run : 0;
  const uint64_t runs = runs_per_piece * repeats;
  const uint64_t req = std::max<uint64_t>(kStickBytes, std::min(run, x.request_bytes));
  const uint64_t requests = runs * ((run + req - 1) / req);
  auto run_at = [&](uint64_t r, uint64_t& len) {
    const uint64_t p = r / runs_per_piece, k = r % runs_per_piece;
    len = std::min(run, piece - k * run);
    return addr + (x.outer ? dma_piece_offset(*x.outer, p) : 0) + k * stride;
  };
  // Row misses. Within one contiguous run, each channel's share is one contiguous channel-local
  // range; every row-sized chunk of it is one (bank, row). Each chunk is checked against its
  // bank's open row, as access() would find it, so a stream that continues where it (or another
  // stream) left a row open hits, and another core's stream to the same bank closes it. Up to 16
  // runs are walked and the count and the exposed precharge + activate time scaled to the whole
  // stream (a stream repeats its pattern); its last run then leaves its rows open for whatever
  // comes next. Not modelled: streams that thrash one bank request by request while they overlap
  // (the request model's conflicts), so all-core one-direction streaming reaches ~175 GB/s here
  // against the request model's 149 and the measured ~150.
  const uint64_t il = m_t.interleave, nch = m_t.channels, rb = m_t.row_bytes;
  uint64_t chunks = 0, misses = 0, sampled_bytes = 0;
  double exposed_sum = 0;
  // Read/write turnarounds: the controller drains writes in batches of write_batch bytes per
  // channel, so the bus turns twice per batch of the smaller direction. Whole streams land on the
  // calendar one after the other, so which bins they share says little about how the controller
  // interleaved them: the mix is taken from the device's recent traffic instead (each direction's
  // bytes over the last `mix_window`), and each byte of either direction pays its share
  // min(R, W) / (R + W) of a turnaround pair per write batch.
  const double t_arrive = t_ps + m_t.t_frontend;
  if (t_arrive > m_mix_t) {
    const double decay = std::exp(-(t_arrive - m_mix_t) / m_t.mix_window);
    m_mix[0] *= decay;
    m_mix[1] *= decay;
    m_mix_t = t_arrive;
  }
  // A read with an identical stream of another core issued within coalesce_window, or still
  // being read, is delivered with it: it reaches no bank, so it neither opens nor closes a row and
  // adds nothing to the device's read/write mix (as access() serves a coalesced request). Joining
  // a stream in flight stands for what the request model does request by request: the cores that
  // share an operand stay in step there, because every core's requests get their share of the
  // bus, so each one's request k meets the others' request k. Here whole streams take the bus in
  // the order they arrive (at up to their requester's pace), so identical streams of cores in
  // different groups ended up to 2x apart (the stick-by-stick operand of bmm_b1_1024x2048x1024 on
  // 32 cores: 58-112 us for the same 256 KiB) and the followers 8-43 us behind their leader read
  // the operand again: 16.7 MB where the request model reads 8.4 (bench/validation/README.md,
  // stop 44; until then such a follower read the requests before it caught up itself).
  // A read arriving after the stream it matches is done reads it all itself.
  uint64_t key = (addr * 1315423911ull) ^ (bytes * 2654435761ull) ^ (run << 7) ^ stride;
  if (x.outer)
    for (const DmaLevel& l : *x.outer) key = key * 31 + l.count * 7919 + l.stride;
  if (m_t.coalesce_window > 0) {
    if (is_write) {
      m_flow_recent.erase(key);
    } else if (FlowRecent* it = m_flow_recent.find(key);
               it && it->addr == addr && it->bytes == bytes && it->run == run && it->stride == stride &&
               other_requester(it->src, requester(&x)) && fanout_left(it->copies)) {
      const double gap = t_arrive - it->issued;
      if (std::abs(gap) <= m_t.coalesce_window || (gap > 0 && t_arrive < it->done))
        return coalesced_stream(x, *it, bytes, req, requests, t_arrive);
    }
  }
  m_mix[is_write ? 1 : 0] += static_cast<double>(bytes);  // about the bytes of the last mix_window
  const uint32_t il_sh = m_il_shift, nch_sh = m_nch_shift, rb_sh = m_row_shift;
  // Every run of the stream covers whole stripes of every channel (starts and ends on a multiple
  // of interleave x channels): each channel then sees the same rows in the same order, and while
  // the channels' banks are uniform, channel 0's walk stands for all of them.
  constexpr uint64_t kSampleRuns = 16;
  const uint64_t walked = std::min(runs, kSampleRuns);
  auto covers_whole_stripes = [&](uint64_t r) {
    uint64_t len = 0;
    const uint64_t a0 = run_at(r, len);
    return a0 % (il * nch) == 0 && len % (il * nch) == 0;
  };
  // The runs walked: the sampled ones, and the last one (walked to leave its rows open).
  bool stripes = m_shortcut;
  for (uint64_t r = 0; stripes && r < walked; ++r) stripes = covers_whole_stripes(r);
  if (stripes && runs > walked) stripes = covers_whole_stripes(runs - 1);
  if (stripes && !m_banks_uniform && ++m_merge_tick >= kMergeEvery) {
    m_merge_tick = 0;
    m_banks_uniform = channels_converged();
  }
  const bool whole_stripes = stripes && m_banks_uniform;
  if (!stripes && m_banks_uniform) split_banks();
  // One row-sized chunk of a run on `bank`: its hit or miss, counted when sampled; a miss's
  // exposed precharge + activate time is appended to channel c's list for this run.
  const uint64_t lanes = whole_stripes ? 1 : nch;  // channels walked (whole_stripes: channel 0 only)
  uint64_t max_chunks = 0;                          // a run's chunks per channel, at most
  const bool exposed_whole = m_exposed_whole;
  double run_exposed = 0;  // exposed_whole: the run's exposed miss time so far
  auto visit = [&](Bank& bank, int64_t row, bool count, uint64_t c) {
    const bool hit = row_hit(bank, row, t_arrive);
    if (count) {
      ++chunks;
      if (!hit) {
        ++misses;
        const double e = miss_exposed_ps(bank);
        if (exposed_whole) run_exposed += e;
        else m_replay[c * max_chunks + m_replay_n[c]++] = e;
        if (!whole_stripes) m_chan_exposed[c] += e;
      }
    }
    use_row(bank, row, hit, is_write);
  };
  // One run's row-sized chunks. The address space falls into blocks of `channels` rows: block j
  // holds row chunk j of every channel (a row is a whole number of interleave stripes), so a
  // block's bank and row are looked up once and each channel with a stripe of the run in it is
  // visited. A channel's chunks come in address order, as its banks' state needs. The exposed
  // times are then summed channel by channel, from the run's first channel on, as a
  // channel-major walk would add them, so that the sum does not depend on the walk's order.
  // (With channel_xor the sum starts at the channel the first stripe has without it: still one
  // fixed order.)
  // `pow2`: std::true_type when the geometry is a power of two (it is on every preset):
  // divisions are then shifts and masks, compiled as such.
  auto walk_geometry = [&](auto pow2, uint64_t a0, uint64_t len, bool count) {
    constexpr bool p2 = decltype(pow2)::value;
    auto div = [](uint64_t x, uint64_t d, uint32_t sh) { return p2 ? x >> sh : x / d; };
    auto mod = [](uint64_t x, uint64_t d) { return p2 ? x & (d - 1) : x % d; };
    const uint64_t a1 = a0 + len - 1, block = nch * rb;
    const uint64_t j0 = div(a0, block, nch_sh + rb_sh), j1 = div(a1, block, nch_sh + rb_sh);
    run_exposed = 0;
    if (count && !exposed_whole) {
      max_chunks = j1 - j0 + 1;
      if (m_replay.size() < lanes * max_chunks) m_replay.resize(lanes * max_chunks);
      std::fill(m_replay_n.begin(), m_replay_n.begin() + static_cast<std::ptrdiff_t>(lanes), 0);
    }
    for (uint64_t j = j0; j <= j1; ++j) {
      int64_t row = 0;
      const uint32_t b = bank_of(j * rb, row);
      const uint64_t s_lo = div(std::max(a0, j * block), il, il_sh);
      const uint64_t s_hi = div(std::min(a1, j * block + block - 1), il, il_sh);
      const uint64_t n = std::min<uint64_t>(lanes, s_hi - s_lo + 1);
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t c = whole_stripes ? 0 : channel_of(s_lo + i);
        visit(m_channels[c].banks[b], row, count, c);
      }
    }
    if (!count) return;
    if (exposed_whole) {  // exact: the order of the sum does not matter
      exposed_sum += whole_stripes ? run_exposed * static_cast<double>(nch) : run_exposed;
      return;
    }
    const uint64_t s0 = div(a0, il, il_sh), s1 = div(a1, il, il_sh);
    const uint64_t c_begin = s1 - s0 + 1 < nch ? mod(s0, nch) : 0;
    for (uint64_t ci = 0; ci < nch; ++ci) {
      const uint64_t c = whole_stripes ? 0 : mod(c_begin + ci, nch);
      for (uint32_t i = 0; i < m_replay_n[c]; ++i) exposed_sum += m_replay[c * max_chunks + i];
    }
  };
  auto walk = [&](uint64_t a0, uint64_t len, bool count) {
    const uint64_t chunks0 = chunks, misses0 = misses;
    if (m_geom_pow2) walk_geometry(std::true_type{}, a0, len, count);
    else walk_geometry(std::false_type{}, a0, len, count);
    if (!whole_stripes) return;
    // Channels 1.. as channel 0 (their exposed times are already summed).
    chunks += (chunks - chunks0) * (nch - 1);
    misses += (misses - misses0) * (nch - 1);
  };
  // A sampled run's bytes per channel (runs that do not cover whole stripes): the head and tail
  // stripes in part, the whole cycles of `channels` stripes evenly, the stripes left over one each.
  auto channel_bytes = [&](uint64_t a0, uint64_t len) {
    const uint64_t a1 = a0 + len;
    uint64_t s = a0 / il;
    const uint64_t head = std::min(a1, (s + 1) * il) - a0;
    m_chan_bytes[channel_of(s)] += static_cast<double>(head);
    if (a0 + head == a1) return;
    ++s;
    const uint64_t full = (a1 - s * il) / il, tail = (a1 - s * il) % il;
    // Whole stripes one by one up to the first aligned group, then the whole groups (each covers
    // every channel once), then the rest one by one.
    uint64_t i = 0;
    for (; i < full && (s + i) % nch; ++i)
      m_chan_bytes[channel_of(s + i)] += static_cast<double>(il);
    const uint64_t groups = (full - i) / nch;
    for (uint64_t c = 0; c < nch; ++c) m_chan_bytes[c] += static_cast<double>(groups * il);
    for (i += groups * nch; i < full; ++i)
      m_chan_bytes[channel_of(s + i)] += static_cast<double>(il);
    if (tail) m_chan_bytes[channel_of(s + full)] += static_cast<double>(tail);
  };
  if (!whole_stripes) {
    std::fill(m_chan_bytes.begin(), m_chan_bytes.end(), 0.0);
    std::fill(m_chan_exposed.begin(), m_chan_exposed.end(), 0.0);
  }
  for (uint64_t r = 0; r < walked; ++r) {
    uint64_t len = 0;
    const uint64_t a0 = run_at(r, len);
    if (len) walk(a0, len, true);
    if (len && !whole_stripes) channel_bytes(a0, len);
    sampled_bytes += len;
  }
  if (runs > walked) {
    uint64_t len = 0;
    const uint64_t a0 = run_at(runs - 1, len);
    if (len) walk(a0, len, false);
  }
  const double scale = sampled_bytes ? static_cast<double>(bytes) / static_cast<double>(sampled_bytes) : 0.0;
  const double n_miss = static_cast<double>(misses) * scale, n_pieces = static_cast<double>(chunks) * scale;
  const double miss_frac = requests ? std::min(1.0, n_miss / static_cast<double>(requests)) : 0.0;
  // The requester's rate: `outstanding` requests in flight over one round trip, and one issue
  // per issue interval.
  // The refresh wait in it is a lone request's; under load the backlog a refresh leaves takes
  // longer to clear and the requests queued behind it wait too: as in a queue whose server takes
  // vacations, the mean wait grows by 1 / (1 - rho), rho the bus load: the other streams' bytes
  // in this bin (each spread over its own time) and this stream's own at its unloaded rate, at
  // most 0.9 (past it the bus calendar's bandwidth bound governs).
  const double lat0 = request_latency_ps(req, is_write, miss_frac);
  const double bus = static_cast<double>(nch) / m_t.ps_per_byte;  // bytes per ps
  const double own = static_cast<double>(x.outstanding) * static_cast<double>(req) / lat0;
  const double rho = std::min(0.9, load_bytes_at(t_arrive) / (m_t.bin * bus) + own / bus);
  const double lat = lat0 + refresh_wait_ps(channels_spanned(req)) * rho / (1.0 - rho);
  double rate_bytes = requester_rate(x, req, run, runs > 1, lat);
  // And no faster than its busiest channel carries its share (data plus exposed misses): a stick
  // column at a multiple of the channel stripe (interleave x channels) is all on one channel, as
  // the request model finds it request by request.
  if (!whole_stripes && sampled_bytes) {
    double busiest = 0;
    for (uint64_t c = 0; c < nch; ++c) busiest = std::max(busiest, m_chan_bytes[c] * m_t.ps_per_byte + m_chan_exposed[c]);
    if (busiest > 0) rate_bytes = std::min(rate_bytes, static_cast<double>(sampled_bytes) / busiest);
  }
  const double r_rd = m_mix[0], r_wr = m_mix[1];
  const double mix = r_rd + r_wr > 0 ? std::min(r_rd, r_wr) / (r_rd + r_wr) : 0.0;
  const double pairs = static_cast<double>(bytes) * mix / static_cast<double>(m_t.write_batch);
  m_turnarounds += pairs;
  const double need = static_cast<double>(bytes) * m_t.ps_per_byte + exposed_sum * scale + pairs * turnaround_pair_ps(m_t);
  const double t = t_arrive;
  // The first data needs the command and, for a new row, the activate.
  const double ready = t + (is_write ? m_t.t_wl : m_t.t_rl) + (misses ? m_t.t_rcd : 0.0);
  const double rate_bus = rate_bytes * need / static_cast<double>(std::max<uint64_t>(bytes, 1));
  // The stream also crosses its port; it is done when both have carried it. (Slowing its bus
  // share to the port's pace instead spreads every stream thin over the bus calendar and
  // serialises them: all 32 cores' amax took 182 us behind one 170 GB/s port, against 128 us
  // without a port and 131 us as here.)
  prune_calendars();
  double port_end = 0;
  Port* const port = port_of(&x);
  if (port) port_end = cross_port(*port, is_write, bytes, requests, t, port_pace(rate_bytes, bytes, requests));
  const double end = std::max(m_flow->place(ready, need, rate_bus), port_end);
  add_load(ready, end, static_cast<double>(bytes));
  double finish = end + m_t.t_frontend;
  m_row_misses += n_miss;
  m_row_hits += std::max(0.0, n_pieces - n_miss);
  for (Channel& ch : m_channels) *(is_write ? ch.bytes_written : ch.bytes_read) += static_cast<double>(bytes) / static_cast<double>(nch);
  (is_write ? m_bytes_written : m_bytes_read) += static_cast<double>(bytes);
  if (tracing()) trace()->complete(m_flow_track, is_write ? "wr" : "rd", ready, end - ready);
  (is_write ? m_writes : m_reads) += static_cast<double>(requests);
  m_last_done.max_with(finish);
  if (!is_write && m_t.coalesce_window > 0) {
    // Kept while a read can still join it (m_flow_span).
    m_flow_span = std::max(m_flow_span, std::max(m_t.history, finish - t) + m_t.coalesce_window);
    m_flow_recent.insert_or_assign(key, FlowRecent{addr, bytes, run, stride, t, finish, requester(&x), port_bit(port)}, t,
                                   m_flow_span, 65536);
  }
  VSPYRE_DEBUG(g_dbg, t_ps, "stream %s 0x%llx %llu B (run %llu) -> done %.1f ns", is_write ? "wr" : "rd",
               static_cast<unsigned long long>(addr), static_cast<unsigned long long>(bytes),
               static_cast<unsigned long long>(run), finish / 1e3);
  return finish;
}

double Lpddr5::requester_rate(const TransferExt& x, uint64_t req, uint64_t run, bool several_runs, double lat) const {
  double rate = static_cast<double>(x.outstanding) * static_cast<double>(req) / lat;
  if (x.serial_runs && run > kStickBytes && several_runs) {
    // dma.run_order serial: one run in flight, each taking a round trip per window of requests.
    const double window = static_cast<double>(x.outstanding) * static_cast<double>(req);
    rate = static_cast<double>(run) / (lat * std::ceil(static_cast<double>(run) / window));
  }
  if (x.issue_ps > 0) rate = std::min(rate, static_cast<double>(req) / x.issue_ps);
  return rate;
}

double Lpddr5::unloaded_rate(const TransferExt& x, uint64_t req, uint64_t run, bool several_runs) const {
  return requester_rate(x, req, run, several_runs, request_latency_ps(req, false, 0.0));
}

double Lpddr5::coalesced_stream(const TransferExt& x, FlowRecent& leader, uint64_t bytes, uint64_t req, uint64_t requests,
                                 double t) {
  // The requester still takes its data at its own pace: `outstanding` requests per round trip,
  // here a row hit's on an idle device (its requests wait on the leader's reads, which paid the
  // misses and the load), no faster than its issue interval, one run at a time when serial. It
  // is done no earlier than the leader, and its copy crosses this requester's port unless the
  // data already crossed it (as access() does request by request).
  const uint64_t run = x.run_bytes ? x.run_bytes : x.stream_bytes;
  const double rate_bytes = unloaded_rate(x, req, run, bytes > run);
  const double ready = t + m_t.t_rl;
  double finish = std::max(leader.done, ready + static_cast<double>(bytes) / rate_bytes + m_t.t_frontend);
  copy_across(port_of(&x), leader.ports, bytes, requests, t, port_pace(rate_bytes, bytes, requests), finish);
  ++leader.copies;
  ++m_coalesced;
  m_bytes_coalesced += static_cast<double>(bytes);
  m_reads += static_cast<double>(requests);
  m_last_done.max_with(finish);
  VSPYRE_DEBUG(g_dbg, t - m_t.t_frontend, "stream rd 0x%llx %llu B coalesced -> done %.1f ns",
               static_cast<unsigned long long>(leader.addr), static_cast<unsigned long long>(bytes), finish / 1e3);
  return finish;
}

void Lpddr5::b_transport(int, tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  const uint64_t addr = trans.get_address();
  const uint64_t len = trans.get_data_length();
  if (len == 0 || addr + len > m_capacity || addr + len < addr) {
    trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return;
  }
  const bool wr = trans.is_write();
  const double now = time_ps(sc_core::sc_time_stamp() + delay);
  if (const auto* x = trans.get_extension<TransferExt>(); x && x->stream) {
    const uint64_t extent = dma_extent(x->stream_bytes, x->run_bytes, x->stride, x->outer);
    if (x->stream_bytes == 0 || addr + extent > m_capacity || addr + extent < addr) {
      trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
      return;
    }
    const double done = stream(*x, addr, wr, now);
    delay += ps_time(done - now);
    trans.set_response_status(tlm::TLM_OK_RESPONSE);
    return;
  }
  const double done = access(addr, len, wr, now, trans.get_extension<TransferExt>());
  if (uint8_t* p = trans.get_data_ptr()) {
    if (wr) write_data(addr, p, len);
    else read_data(addr, p, len);
  }
  delay += ps_time(done - now);
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
}

unsigned int Lpddr5::transport_dbg(int, tlm::tlm_generic_payload& trans) {
  const uint64_t addr = trans.get_address(), len = trans.get_data_length();
  if (addr + len > m_capacity || !trans.get_data_ptr()) return 0;
  if (trans.is_write()) write_data(addr, trans.get_data_ptr(), len);
  else read_data(addr, trans.get_data_ptr(), len);
  return static_cast<unsigned int>(len);
}

void Lpddr5::write_data(uint64_t addr, const uint8_t* src, uint64_t bytes) {
  while (bytes > 0) {
    const uint64_t page = addr / kPageBytes, off = addr % kPageBytes;
    const uint64_t n = std::min(bytes, kPageBytes - off);
    auto& p = m_pages[page];
    if (!p) {
      p = std::make_unique<uint8_t[]>(kPageBytes);
      std::memset(p.get(), 0, kPageBytes);
    }
    std::memcpy(p.get() + off, src, n);
    addr += n;
    src += n;
    bytes -= n;
  }
}

void Lpddr5::read_data(uint64_t addr, uint8_t* dst, uint64_t bytes) const {
  while (bytes > 0) {
    const uint64_t page = addr / kPageBytes, off = addr % kPageBytes;
    const uint64_t n = std::min(bytes, kPageBytes - off);
    auto it = m_pages.find(page);
    // Never-written memory reads as zeros and costs no host memory.
    if (it == m_pages.end()) std::memset(dst, 0, n);
    else std::memcpy(dst, it->second.get() + off, n);
    addr += n;
    dst += n;
    bytes -= n;
  }
}

VSPYRE_REGISTER_COMPONENT(Lpddr5, "Lpddr5", "LPDDR5 device memory: channels, banks, row buffers, turnaround, refresh")

}  // namespace vspyre
