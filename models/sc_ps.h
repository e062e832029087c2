// Picoseconds to and from sc_time, as sc_time(ps, SC_PS) and t.to_seconds() * 1e12 compute them,
// without their per-call cost (the simulation context's time parameters, looked up on each call,
// were a sixth of the request DMA model's host time: one of each per request). Exact for the 1 ps
// time resolution the card runs at (SystemC's default; time_resolution_is_ps() checks it); any
// other resolution falls back to SystemC's own conversions. A test compares both on a million
// values.
#pragma once
#include <cstdint>

#include <systemc>

namespace vspyre {

inline bool time_resolution_is_ps() {
  static const bool ps = sc_core::sc_get_time_resolution() == sc_core::sc_time(1.0, sc_core::SC_PS);
  return ps;
}

// sc_time(ps, SC_PS): at 1 ps resolution SystemC scales by 1 and rounds half up, as here.
inline sc_core::sc_time ps_time(double ps) {
  if (ps == 0) return sc_core::SC_ZERO_TIME;
  if (!time_resolution_is_ps()) return sc_core::sc_time(ps, sc_core::SC_PS);
  volatile double tmp = ps + 0.5;  // volatile as in SystemC: no excess precision in the sum
  return sc_core::sc_time::from_value(static_cast<sc_dt::uint64>(static_cast<sc_dt::int64>(tmp)));
}

// t.to_seconds() * 1e12: the value in resolution units times the resolution in fs (1000) times
// 1e-15, in that order, then 1e12.
inline double time_ps(const sc_core::sc_time& t) {
  if (!time_resolution_is_ps()) return t.to_seconds() * 1e12;
  return static_cast<double>(t.value()) * 1000.0 * 1e-15 * 1e12;
}

inline double now_ps_fast() { return time_ps(sc_core::sc_time_stamp()); }

}  // namespace vspyre
