// The bidirectional ring joining the cores: each direction is a chain of links, one per hop,
// `width` bytes per ring cycle each. A transfer takes the shorter direction (clockwise on a tie),
// flows cut-through over its hops, and shares each link with every other flow that uses it
// (busy-until per link). Partial sums travel the reduce-sum ring instead: links of their own, at
// `reduce_bandwidth` each, and the receiving station takes each in with `combine_latency`.
#pragma once
#include <vector>

#include <tlm_utils/multi_passthrough_target_socket.h>

#include "models/transfer.h"
#include "sim/engine/component.h"

namespace vspyre {

class Ring : public Component {
 public:
  Ring(const sc_core::sc_module_name& name, BuildContext& ctx);

  tlm_utils::multi_passthrough_target_socket<Ring> port;

  // Number of stations; the card sets it to its core count before simulation starts.
  void set_stations(uint32_t n);
  uint32_t stations() const { return m_stations; }
  // When the last byte of `bytes` sent from src at t_ps arrives at dst, over the data ring or
  // (`reduce`) the reduce-sum ring, whose receiving station adds combine_latency (counted in
  // the `combines` stat). Advances that ring's link state.
  double transfer(CoreId src, CoreId dst, uint64_t bytes, double t_ps, bool reduce = false);
  double link_bandwidth() const { return m_width / m_cycle_ps * 1e12; }
  double reduce_link_bandwidth() const { return 1e12 / m_reduce_ps_per_byte; }
  int hops(CoreId src, CoreId dst, bool* clockwise = nullptr) const;

 private:
  void b_transport(int id, tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);

  uint32_t m_stations = 0;
  double m_width;      // bytes per cycle per link
  double m_cycle_ps;
  double m_hop_ps;
  double m_inject_ps;  // per-transfer setup at the sending station
  double m_combine_ps;
  double m_reduce_ps_per_byte;  // a reduce-sum ring link
  uint64_t m_segment;  // flows share a link at this granularity
  // One ring's links (busy-until per link; link i joins station i and i+1) and trace tracks.
  struct Links {
    std::vector<double> cw_free, ccw_free;
    TraceWriter::TrackId track_cw = 0, track_ccw = 0;
  };
  Links m_data, m_reduce;  // the data ring, the reduce-sum ring
  Scalar& m_transfers;
  Scalar& m_bytes;
  Scalar& m_reduce_bytes;
  Scalar& m_hop_bytes;
  Scalar& m_wait_ps;
  Scalar& m_combines;
};

}  // namespace vspyre
