#include "models/lpddr5.h"

#include <algorithm>
#include <cstring>

#include "sim/engine/log.h"

namespace vspyre {
namespace {
DebugFlag g_dbg("lpddr5", "every LPDDR5 request with its channel timing");
}

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
      m_refreshes(stats().scalar("refreshes", "events", "all-bank refreshes that delayed a request")),
      m_turnarounds(stats().scalar("turnarounds", "events", "read<->write bus turnarounds")),
      m_bytes_read(stats().scalar("bytes_read", "B", "bytes read")),
      m_bytes_written(stats().scalar("bytes_written", "B", "bytes written")),
      m_last_done(stats().scalar("last_done_ps", "ps", "completion time of the last request")) {
  ParamReader& p = params();
  const double data_rate = p.get_real("data_rate_mtps", 6400,
                                      {"transfers per second per pin, in MT/s (preset)", Provenance::Estimate,
                                       "LPDDR5-6400 matches the 204.8 GB/s nominal"});
  const auto width_bits = p.get_int("channel_width_bits", 16, {"data pins per channel (LPDDR5 x16)", Provenance::Estimate}, 8, 64);
  m_t.channels = static_cast<uint32_t>(p.get_int(
      "channels", 16, {"independent channels: 16 x 16 bit = the 256-bit bus", Provenance::Estimate, "hardware.md"}, 1, 256));
  m_t.banks = static_cast<uint32_t>(p.get_int("banks", 16, {"banks per channel", Provenance::Estimate, "LPDDR5 standard"}, 1, 64));
  m_t.row_bytes = p.get_size("row_size", "2KiB", {"page size per bank", Provenance::Estimate, "LPDDR5 x16 page"});
  m_t.interleave = p.get_size("interleave", "256B",
                              {"bytes mapped to one channel before the next channel takes over", Provenance::Estimate});
  auto ns = [&](const char* key, const char* def, const char* desc) {
    return p.get_time(key, def, {desc, Provenance::Estimate, "LPDDR5 JEDEC-class timing (preset)"}).to_ps(data_rate * 1e6 / 8);
  };
  m_t.t_rcd = ns("t_rcd", "18ns", "activate to column command");
  m_t.t_rp = ns("t_rp", "18ns", "precharge");
  m_t.t_ras = ns("t_ras", "42ns", "activate to precharge, same bank");
  m_t.t_rrd = ns("t_rrd", "5ns", "activate to activate, different banks");
  m_t.t_rl = ns("t_rl", "18ns", "read latency, command to first data");
  m_t.t_wl = ns("t_wl", "9ns", "write latency, command to first data");
  m_t.t_wtr = ns("t_wtr", "12ns", "end of write data to read command");
  m_t.t_rtw = ns("t_rtw", "10ns", "read to write bus turnaround");
  m_t.t_rfc = ns("t_rfc", "280ns", "all-bank refresh cycle time");
  m_t.t_refi = ns("t_refi", "3906ns", "average refresh interval");
  m_t.t_lookahead = ns("t_lookahead", "25ns", "how far ahead of the data bus the controller opens rows");
  m_t.t_frontend = ns("t_frontend", "60ns", "memory controller plus on-chip network latency, each way");
  m_t.bank_xor = p.get_bool("bank_xor", true, {"XOR row bits into the bank index (permutation interleaving)", Provenance::Estimate});
  if (m_t.interleave % kStickBytes || m_t.interleave == 0)
    throw ConfigError(SourceLoc{path()}, path() + ".interleave: must be a multiple of 128B");
  if (m_t.row_bytes % m_t.interleave)
    throw ConfigError(SourceLoc{path()}, path() + ".row_size: must be a multiple of interleave");
  if (m_t.t_refi <= m_t.t_rfc)
    throw ConfigError(SourceLoc{path()}, path() + ".t_refi: must exceed t_rfc");
  m_t.ps_per_byte = 1e12 / (data_rate * 1e6 * static_cast<double>(width_bits) / 8.0);

  m_channels.resize(m_t.channels);
  for (uint32_t c = 0; c < m_t.channels; ++c) {
    Channel& ch = m_channels[c];
    ch.banks.resize(m_t.banks);
    // Channels refresh staggered across the interval so they never all stop at once.
    ch.next_refresh = m_t.t_refi * (c + 1) / m_t.channels;
    StatGroup& g = stats().group("channel_" + std::to_string(c));
    ch.bytes_read = &g.scalar("bytes_read", "B", "bytes read on this channel");
    ch.bytes_written = &g.scalar("bytes_written", "B", "bytes written on this channel");
    ch.busy_ps = &g.scalar("busy_ps", "ps", "time the data bus moved data");
    if (tracing()) ch.track = trace()->track("memory", "channel_" + std::to_string(c));
  }
  stats().formula("peak_GBps", [this] { return peak_bandwidth() / 1e9; }, "GB/s", "nominal peak bandwidth");
  stats().formula("resident_bytes", [this] { return static_cast<double>(resident_bytes()); }, "B",
                  "host memory holding written device memory");

  port.register_b_transport(this, &Lpddr5::b_transport);
  port.register_transport_dbg(this, &Lpddr5::transport_dbg);
  expose_target("port", port);
}

double Lpddr5::channel_access(uint32_t c, uint64_t local, uint64_t bytes, bool is_write, double t) {
  Channel& ch = m_channels[c];
  const uint64_t row_span = m_t.row_bytes * m_t.banks;
  double done = t;
  while (bytes > 0) {
    const uint64_t in_row = std::min<uint64_t>(bytes, m_t.row_bytes - local % m_t.row_bytes);
    const auto row = static_cast<int64_t>(local / row_span);
    // Permutation-based bank interleaving: row bits XOR into the bank index, so streams whose
    // addresses differ by a multiple of the row span do not all land on one bank.
    uint32_t b = static_cast<uint32_t>((local / m_t.row_bytes) % m_t.banks);
    if (m_t.bank_xor) b = static_cast<uint32_t>((b ^ static_cast<uint64_t>(row) ^ (static_cast<uint64_t>(row) >> 4) ^
                                                 (static_cast<uint64_t>(row) >> 8)) % m_t.banks);
    Bank& bank = ch.banks[b];
    const double dur = static_cast<double>(in_row) * m_t.ps_per_byte;
    double start = std::max(ch.bus_free, t + (is_write ? m_t.t_wl : m_t.t_rl));
    // Direction change: the bus idles for the turnaround.
    if (ch.last_write != is_write && ch.bus_free > 0) {
      start = std::max(start, ch.bus_free + (ch.last_write ? m_t.t_wtr : m_t.t_rtw));
      ++m_turnarounds;
    }
    ch.last_write = is_write;
    for (;;) {
      double ready = bank.ready;
      if (bank.open_row != row) {
        // Precharge (if a row is open), then activate, no sooner than tRRD after the last activate.
        // The controller opens a row for a queued request only a bounded time before the bus
        // is free for it (its scheduling window): a row miss is hidden only that far.
        const double window = ch.bus_free - m_t.t_lookahead;
        const double pre_ok = std::max(bank.ready, bank.activated + m_t.t_ras);
        double act = std::max({pre_ok + (bank.open_row >= 0 ? m_t.t_rp : 0.0), t, window,
                               ch.last_act + m_t.t_rrd});
        ready = act + m_t.t_rcd + (is_write ? m_t.t_wl : m_t.t_rl);
        if (start < ready) start = ready;
      }
      // All-bank refresh: a transfer may not overlap one; afterwards every row is closed.
      if (start + dur > ch.next_refresh) {
        const double ref_end = std::max(ch.next_refresh, ch.bus_free) + m_t.t_rfc;
        ch.next_refresh += m_t.t_refi;
        ++m_refreshes;
        for (Bank& bk : ch.banks) {
          bk.open_row = -1;
          bk.ready = std::max(bk.ready, ref_end);
        }
        start = std::max(start, ref_end);
        continue;
      }
      if (bank.open_row != row) {
        ch.last_act = start - m_t.t_rcd - (is_write ? m_t.t_wl : m_t.t_rl);
        bank.activated = ch.last_act;
        bank.open_row = row;
        ++m_row_misses;
      } else {
        ++m_row_hits;
      }
      break;
    }
    const double end = start + dur;
    ch.bus_free = end;
    bank.ready = end;
    *ch.busy_ps += dur;
    *(is_write ? ch.bytes_written : ch.bytes_read) += static_cast<double>(in_row);
    if (tracing()) trace()->complete(ch.track, is_write ? "wr" : "rd", start, dur);
    done = std::max(done, end);
    local += in_row;
    bytes -= in_row;
  }
  return done;
}

double Lpddr5::access(uint64_t addr, uint64_t bytes, bool is_write, double t_ps) {
  const double t = t_ps + m_t.t_frontend;
  const uint64_t il = m_t.interleave, nch = m_t.channels;
  double done = t;
  // A contiguous request maps to one contiguous channel-local range per channel.
  uint64_t a = addr;
  const uint64_t end = addr + bytes;
  struct Seg { uint64_t local = 0, bytes = 0; bool used = false; };
  Seg segs[256];
  while (a < end) {
    const uint64_t chunk = std::min<uint64_t>(end - a, il - a % il);
    const uint64_t stripe = a / il;
    const auto c = static_cast<uint32_t>(stripe % nch);
    const uint64_t local = (stripe / nch) * il + a % il;
    Seg& s = segs[c];
    if (!s.used) {
      s.used = true;
      s.local = local;
    }
    s.bytes += chunk;
    a += chunk;
  }
  for (uint32_t c = 0; c < nch; ++c)
    if (segs[c].used) done = std::max(done, channel_access(c, segs[c].local, segs[c].bytes, is_write, t));
  if (is_write) {
    ++m_writes;
    m_bytes_written += static_cast<double>(bytes);
  } else {
    ++m_reads;
    m_bytes_read += static_cast<double>(bytes);
  }
  const double finish = done + m_t.t_frontend;
  m_last_done.max_with(finish);
  VSPYRE_DEBUG(g_dbg, t_ps, "%s 0x%llx %llu B -> done %.1f ns", is_write ? "wr" : "rd",
               static_cast<unsigned long long>(addr), static_cast<unsigned long long>(bytes), finish / 1e3);
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
  const double now = (sc_core::sc_time_stamp() + delay).to_seconds() * 1e12;
  const double done = access(addr, len, wr, now);
  if (uint8_t* p = trans.get_data_ptr()) {
    if (wr) write_data(addr, p, len);
    else read_data(addr, p, len);
  }
  delay += sc_core::sc_time(done - now, sc_core::SC_PS);
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
