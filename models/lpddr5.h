// LPDDR5 device memory: channels with a data bus each, banks with an open row each, read/write
// turnaround, all-bank refresh. Loosely timed: b_transport computes when a request's data has
// moved, from "busy-until" state per channel and bank, and adds that to the delay. The achieved
// bandwidth (about 150 GB/s streaming, 105 GB/s balanced on the default card) is what these
// mechanics give, not a number written anywhere.
#pragma once
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include <tlm_utils/multi_passthrough_target_socket.h>

#include "models/transfer.h"
#include "models/transfer.h"
#include "sim/engine/component.h"

namespace vspyre {

struct Lpddr5Timing {
  uint32_t channels = 16;
  uint32_t banks = 16;
  uint64_t row_bytes = 2048;    // page per bank per channel
  uint64_t interleave = 256;    // bytes to one channel before moving to the next
  bool bank_xor = true;
  double ps_per_byte = 0;       // data bus, per channel
  double t_ras = 0, t_lookahead = 0, t_rcd = 0, t_rp = 0, t_rrd = 0, t_wtr = 0, t_rtw = 0, t_rfc = 0, t_refi = 0;
  double t_rl = 0, t_wl = 0;    // read/write latency, command to data
  double t_frontend = 0;        // controller and on-chip network, each way
};

class Lpddr5 : public Component {
 public:
  Lpddr5(const sc_core::sc_module_name& name, BuildContext& ctx);

  tlm_utils::multi_passthrough_target_socket<Lpddr5> port;

  // The timing core, usable without SystemC: when the last byte of [addr, addr+bytes) has moved
  // for a request arriving at t_ps. Advances the channel and bank state.
  double access(uint64_t addr, uint64_t bytes, bool is_write, double t_ps);

  const Lpddr5Timing& timing() const { return m_t; }
  uint64_t capacity() const { return m_capacity; }
  double peak_bandwidth() const { return m_t.channels / m_t.ps_per_byte * 1e12; }
  // Sparse backing store: host memory only for pages written.
  void write_data(uint64_t addr, const uint8_t* src, uint64_t bytes);
  void read_data(uint64_t addr, uint8_t* dst, uint64_t bytes) const;
  uint64_t resident_bytes() const { return m_pages.size() * kPageBytes; }

 private:
  void b_transport(int id, tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  unsigned int transport_dbg(int id, tlm::tlm_generic_payload& trans);
  double channel_access(uint32_t ch, uint64_t local, uint64_t bytes, bool is_write, double t_ps);

  static constexpr uint64_t kPageBytes = 64 * 1024;
  struct Bank { int64_t open_row = -1; double ready = 0; double activated = -1e18; };
  struct Channel {
    double bus_free = 0, last_act = -1e18, next_refresh = 0;
    bool last_write = false;
    std::vector<Bank> banks;
    Scalar* bytes_read = nullptr;
    Scalar* bytes_written = nullptr;
    Scalar* busy_ps = nullptr;
    TraceWriter::TrackId track = 0;
  };
  Lpddr5Timing m_t;
  uint64_t m_capacity;
  std::vector<Channel> m_channels;
  std::unordered_map<uint64_t, std::unique_ptr<uint8_t[]>> m_pages;
  Scalar& m_reads;
  Scalar& m_writes;
  Scalar& m_row_hits;
  Scalar& m_row_misses;
  Scalar& m_refreshes;
  Scalar& m_turnarounds;
  Scalar& m_bytes_read;
  Scalar& m_bytes_written;
  Scalar& m_last_done;
};

}  // namespace vspyre
