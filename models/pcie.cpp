#include "models/pcie.h"

#include <algorithm>

namespace vspyre {

PcieLink::PcieLink(const sc_core::sc_module_name& name, BuildContext& ctx)
    : Component(name, ctx),
      port("port"),
      m_h2d_bytes(stats().scalar("h2d_bytes", "B", "bytes host to device")),
      m_d2h_bytes(stats().scalar("d2h_bytes", "B", "bytes device to host")),
      m_transfers(stats().scalar("transfers", "transfers", "DMA transfers over the link")) {
  ParamReader& p = params();
  const auto gen = p.get_int("gen", 5, {"PCIe generation", Provenance::Datasheet, "IBM: PCIe Gen5 x16"}, 3, 6);
  const auto lanes = p.get_int("lanes", 16, {"lanes (a PCIe link width: 1, 2, 4, 8, 12, 16 or 32)", Provenance::Datasheet, "IBM: PCIe Gen5 x16"}, 1, 32);
  if (lanes != 1 && lanes != 2 && lanes != 4 && lanes != 8 && lanes != 12 && lanes != 16 && lanes != 32)
    params().refuse("lanes", std::to_string(lanes) + " is not a PCIe link width (1, 2, 4, 8, 12, 16 or 32)");
  const auto mps = p.get_size("max_payload", "256B", {"maximum TLP payload", Provenance::Estimate});
  const auto tlp = p.get_size("tlp_overhead", "26B",
                              {"per-TLP header, sequence, CRC and framing bytes", Provenance::Derived, "PCIe base spec"});
  m_setup_ps = p.get_time("setup", "2us", {"per-transfer DMA setup: descriptors, doorbell, completion", Provenance::Estimate})
                   .to_ps(1e9);
  // GT/s per lane and line-code efficiency: 128b/130b for Gen3-5, FLIT mode (242 of 256 bytes) for Gen6.
  const double gts[] = {0, 0, 0, 8, 16, 32, 64};
  const double code = gen >= 6 ? 242.0 / 256.0 : 128.0 / 130.0;
  m_raw_Bps = gts[gen] * 1e9 * static_cast<double>(lanes) / 8.0 * code;
  if (gen >= 6) m_payload_Bps = m_raw_Bps * static_cast<double>(mps) / static_cast<double>(mps + 8);
  else m_payload_Bps = m_raw_Bps * static_cast<double>(mps) / static_cast<double>(mps + tlp);
  stats().formula("payload_GBps", [this] { return m_payload_Bps / 1e9; }, "GB/s", "payload bandwidth per direction");
  port.register_b_transport(this, &PcieLink::b_transport);
  expose_target("port", port);
  if (tracing()) {
    m_tracks[0] = trace()->track("pcie", "d2h");
    m_tracks[1] = trace()->track("pcie", "h2d");
  }
}

double PcieLink::transfer(bool to_device, uint64_t bytes, double t) {
  const double start = std::max(t, m_free[to_device]);
  const double end = start + m_setup_ps + static_cast<double>(bytes) / m_payload_Bps * 1e12;
  m_free[to_device] = end;
  ++m_transfers;
  (to_device ? m_h2d_bytes : m_d2h_bytes) += static_cast<double>(bytes);
  if (tracing()) trace()->complete(m_tracks[to_device], to_device ? "h2d" : "d2h", start, end - start);
  return end;
}

void PcieLink::b_transport(int, tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  const double now = (sc_core::sc_time_stamp() + delay).to_seconds() * 1e12;
  const double done = transfer(trans.is_write(), trans.get_data_length(), now);
  // Payload lengths above 4 GiB do not fit a TLM length; callers use transfer() for those.
  delay += sc_core::sc_time(done - now, sc_core::SC_PS);
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
}

VSPYRE_REGISTER_COMPONENT(PcieLink, "PcieLink", "PCIe host link: per-direction bandwidth and per-transfer setup")

}  // namespace vspyre
