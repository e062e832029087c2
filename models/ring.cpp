#include "models/ring.h"

#include <algorithm>

namespace vspyre {

Ring::Ring(const sc_core::sc_module_name& name, BuildContext& ctx)
    : Component(name, ctx),
      port("port"),
      m_transfers(stats().scalar("transfers", "transfers", "core-to-core transfers")),
      m_bytes(stats().scalar("bytes", "B", "bytes delivered")),
      m_reduce_bytes(stats().scalar("reduce_bytes", "B", "partial-sum bytes delivered over the reduce-sum ring")),
      m_hop_bytes(stats().scalar("hop_bytes", "B", "bytes times hops: link occupancy")),
      m_wait_ps(stats().scalar("wait_ps", "ps", "time transfers waited for busy links")),
      m_combines(stats().scalar("combines", "combines",
                                "partial-sum transfers the reduce-sum ring delivered, each paying combine_latency")) {
  ParamReader& p = params();
  const double clock =
      p.get_frequency("clock", "1.5GHz", {"ring clock (the core clock)", Provenance::Derived, "hardware.md"}, "1MHz");
  m_cycle_ps = 1e12 / clock;
  m_width = static_cast<double>(
      p.get_size("width", "128B", {"bytes per cycle per direction per link", Provenance::Datasheet, "IBM: 128 B/cycle"}));
  m_hop_ps = p.get_time("hop_latency", "2cycles", {"latency of one hop", Provenance::Estimate}).to_ps(clock);
  m_inject_ps = p.get_time("inject_latency", "20cycles", {"per-transfer setup at the sender", Provenance::Estimate}).to_ps(clock);
  m_combine_ps = p.get_time("combine_latency", "5ns",
                            {"cost of one cross-core partial-sum combine: added to each partial-sum transfer's arrival "
                             "over the reduce-sum ring (the receiving core's SFP then adds the sums)",
                             Provenance::Measured, "torch-spyre cost model: <= ~5 ns"})
                     .to_ps(clock);
  const double reduce_bw = p.get_bandwidth(
      "reduce_bandwidth", "2.3GB/s",
      {"bytes per second one link of the reduce-sum ring carries each way: the partial sums of a reduction split "
       "over the cores (a matmul's K) travel it, not the data ring",
       Provenance::Measured,
       "fit: validation section 10's four 2048^3 K splits take 0.40-0.44 ns per byte of one core's partial sums "
       "more than vspyre's data ring gave them (bench/validation/README.md, stop 60)"});
  if (!(reduce_bw > 0)) params().refuse("reduce_bandwidth", "must be positive");
  m_reduce_ps_per_byte = 1e12 / reduce_bw;
  m_segment = p.get_size("segment", "4KiB", {"granularity at which flows interleave on a link", Provenance::Estimate});
  if (m_width <= 0) params().refuse("width", "must be positive");
  if (m_segment == 0) params().refuse("segment", "must be positive");
  stats().formula("link_GBps", [this] { return link_bandwidth() / 1e9; }, "GB/s", "bandwidth of one link, one direction");
  stats().formula("reduce_link_GBps", [this] { return reduce_link_bandwidth() / 1e9; }, "GB/s",
                  "bandwidth of one reduce-sum ring link, one direction");
  port.register_b_transport(this, &Ring::b_transport);
  expose_target("port", port);
  if (tracing()) {
    m_data.track_cw = trace()->track("ring", "clockwise");
    m_data.track_ccw = trace()->track("ring", "counter-clockwise");
    m_reduce.track_cw = trace()->track("ring", "reduce-sum clockwise");
    m_reduce.track_ccw = trace()->track("ring", "reduce-sum counter-clockwise");
  }
}

void Ring::set_stations(uint32_t n) {
  m_stations = n;
  for (Links* l : {&m_data, &m_reduce}) {
    l->cw_free.assign(n, 0.0);
    l->ccw_free.assign(n, 0.0);
  }
}

int Ring::hops(CoreId src, CoreId dst, bool* clockwise) const {
  const int n = static_cast<int>(m_stations);
  const int cw = (static_cast<int>(idx(dst)) - static_cast<int>(idx(src)) + n) % n;
  const int ccw = (n - cw) % n;
  const bool use_cw = cw <= ccw;
  if (clockwise) *clockwise = use_cw;
  return use_cw ? cw : ccw;
}

double Ring::transfer(CoreId src, CoreId dst, uint64_t bytes, double t, bool reduce) {
  if (idx(src) >= m_stations || idx(dst) >= m_stations)
    throw std::out_of_range("ring transfer between stations " + std::to_string(idx(src)) + " and " +
                            std::to_string(idx(dst)) + " on a ring of " + std::to_string(m_stations));
  ++m_transfers;
  m_bytes += static_cast<double>(bytes);
  if (reduce) m_reduce_bytes += static_cast<double>(bytes);
  bool cw = true;
  const int h = hops(src, dst, &cw);
  if (h == 0) return t;
  Links& ring = reduce ? m_reduce : m_data;
  auto& links = cw ? ring.cw_free : ring.ccw_free;
  const TraceWriter::TrackId track = cw ? ring.track_cw : ring.track_ccw;
  const int n = static_cast<int>(m_stations);
  double next = t + m_inject_ps;
  double arrive = next;
  // Cut-through: a segment's head enters link k one hop after link k-1; a link carries one
  // segment at a time, so flows sharing it interleave segment by segment.
  const int station = static_cast<int>(idx(src));
  for (uint64_t done = 0; done < bytes; done += m_segment) {
    const double seg = static_cast<double>(std::min(m_segment, bytes - done));
    const double dur = reduce ? seg * m_reduce_ps_per_byte : seg / m_width * m_cycle_ps;
    double head = next, first = next, last = next;
    for (int k = 0; k < h; ++k) {
      const int link = cw ? (station + k) % n : ((station - k - 1) % n + n) % n;
      const double s = std::max(head, links[link]);
      m_wait_ps += s - head;
      links[link] = s + dur;
      if (k == 0) first = s;
      last = s;
      head = s + m_hop_ps;
    }
    arrive = last + m_hop_ps + dur;
    next = first + dur;  // the next segment leaves the source when this one has
    if (tracing()) trace()->complete(track, reduce ? "partial" : "xfer", first, arrive - first);
  }
  m_hop_bytes += static_cast<double>(bytes) * h;
  if (reduce) {  // the receiving station takes the partial sums in
    arrive += m_combine_ps;
    ++m_combines;
  }
  return arrive;
}

void Ring::b_transport(int, tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  auto* ext = trans.get_extension<TransferExt>();
  if (!ext) {
    trans.set_response_status(tlm::TLM_GENERIC_ERROR_RESPONSE);
    return;
  }
  const double now = (sc_core::sc_time_stamp() + delay).to_seconds() * 1e12;
  double done = transfer(ext->src, ext->dst, trans.get_data_length(), now, ext->reduce);
  if (ext->acked) done += hops(ext->src, ext->dst) * m_hop_ps;  // the acknowledgement's way back
  delay += sc_core::sc_time(done - now, sc_core::SC_PS);
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
}

VSPYRE_REGISTER_COMPONENT(Ring, "Ring", "bidirectional core ring with per-link contention and a reduce-sum ring")

}  // namespace vspyre
