// The host link: PCIe of a given generation and width. Each direction (H2D, D2H) is one
// busy-until resource; a transfer pays a setup cost (descriptor fetch, doorbell, completion)
// and then moves its payload at the link rate less the packet-header overhead.
#pragma once
#include <tlm_utils/multi_passthrough_target_socket.h>

#include "sim/engine/component.h"

namespace vspyre {

class PcieLink : public Component {
 public:
  PcieLink(const sc_core::sc_module_name& name, BuildContext& ctx);

  // Target: a write transaction is host-to-device, a read is device-to-host.
  tlm_utils::multi_passthrough_target_socket<PcieLink> port;

  double transfer(bool to_device, uint64_t bytes, double t_ps);
  double payload_bandwidth() const { return m_payload_Bps; }  // B/s, per direction
  double raw_bandwidth() const { return m_raw_Bps; }

 private:
  void b_transport(int id, tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  double m_raw_Bps = 0, m_payload_Bps = 0, m_setup_ps = 0;
  double m_free[2] = {0, 0};
  Scalar& m_h2d_bytes;
  Scalar& m_d2h_bytes;
  Scalar& m_transfers;
  TraceWriter::TrackId m_tracks[2] = {0, 0};
};

}  // namespace vspyre
