// The card: cores on a ring, LPDDR5 device memory, a PCIe host link. Composed from the config;
// the default composition is the Spyre card of hardware.md.
#pragma once
#include <vector>

#include <tlm_utils/simple_initiator_socket.h>

#include "models/core.h"
#include "models/lpddr5.h"
#include "models/pcie.h"
#include "models/ring.h"
#include "sim/engine/component.h"
#include "sim/plan/operand_order.h"

namespace vspyre {

// Sampled simulation of long stages (card.sample; a speed choice, not the card's): in a stage
// whose cores all run the same number of tiles (at least min_tiles), each stretch of repeating
// tiles is simulated for `warmup` tiles, then `measure` tiles, then skip_ratio x measure tiles
// are left out and take each core's measured time per tile, and so on, keeping the stretch's
// last `tail` tiles (models/plan_runner.cpp, sample_stage; models/README.md).
struct SampleParams {
  bool enabled = false;
  uint32_t min_tiles = 0;  // a stage with fewer tiles per core is simulated whole
  uint32_t warmup = 0, measure = 0, tail = 0;
  uint32_t skip_ratio = 0;  // tiles skipped per tile measured
};

class Card : public Component {
 public:
  Card(const sc_core::sc_module_name& name, BuildContext& ctx);

  const std::vector<Core*>& cores() const { return m_cores; }
  Core& core(uint32_t i) { return *m_cores.at(i); }
  Ring& ring() { return *m_ring; }
  Lpddr5& memory() { return *m_memory; }
  PcieLink& host_link() { return *m_host; }

  // Runs one program per core (an empty program leaves a core idle), all starting now, and
  // returns the time from start to the last operation's end, in ps. May be called repeatedly:
  // simulated time and the state of every resource carry over between calls.
  double run(std::vector<std::vector<CoreOp>> programs);
  double now_ps() const;
  // Lets simulated time run on by `ps` with nothing issued (an SDSC waiting for its dispatch).
  void idle(double ps);
  // Host side of the PCIe link: a write is host-to-device, a read device-to-host. Returns the
  // completion time of a transfer issued at t_ps.
  double host_transfer(bool to_device, uint64_t bytes, double t_ps);

  // Per-bundle fixed launch cost, paid once before a bundle's first SDSC.
  double launch_overhead_ps() const { return m_launch_overhead_ps; }
  // The shortest time an SDSC execution takes from its start to the next one's (card.sdsc_dispatch).
  double sdsc_dispatch_ps() const { return m_sdsc_dispatch_ps; }
  // Plan lowering knobs (sim/plan/lower.h): SFP cycles per element per lane by cost class, and
  // the streamed bytes per tile above which a core's work is cut into pipelined tiles.
  double sfp_cycles_simple() const { return m_sfp_simple; }
  double sfp_cycles_divide() const { return m_sfp_divide; }
  double sfp_cycles_transcendental() const { return m_sfp_transcendental; }
  double sfp_cycles_reduce_across_stick() const { return m_sfp_reduce_across_stick; }
  uint64_t tile_target_bytes() const { return m_tile_target; }
  uint64_t tile_max_bytes() const { return m_tile_max; }
  plan::OperandOrder sfp_operand_order() const { return m_sfp_operand_order; }
  const SampleParams& sample() const { return m_sample; }

  tlm_utils::simple_initiator_socket<Card> host_port;

  // How run() drives the cores: one SystemC thread per engine (temporal decoupling within the
  // quantum), or one event loop for the whole card (the flow DMA model only).
  bool event_scheduler() const { return m_events; }

 private:
  void run_events();  // each core from its start_ps()
  // Core `core`'s start after the launch in the `launch`-th run(), in ps: seeded, uniform in
  // [0, card.launch_jitter).
  uint64_t launch_jitter_ps(uint64_t launch, uint32_t core) const;

  std::vector<Core*> m_cores;
  Ring* m_ring;
  Lpddr5* m_memory;
  PcieLink* m_host;
  double m_launch_overhead_ps = 0;
  double m_sdsc_dispatch_ps = 0;  // card.sdsc_dispatch
  double m_launch_skew_ps = 0;  // card.launch_skew: core i starts i x this after core 0
  uint64_t m_launch_jitter_ps = 0;  // card.launch_jitter: each core starts within this of the launch
  uint64_t m_launch_seed = 1;       // card.launch_seed
  uint64_t m_launches = 0;          // run() calls so far: each launch draws its own start times
  double m_sfp_simple = 1, m_sfp_divide = 1, m_sfp_transcendental = 1, m_sfp_reduce_across_stick = 0;
  uint64_t m_tile_target = 0;
  uint64_t m_tile_max = 0;
  plan::OperandOrder m_sfp_operand_order = plan::OperandOrder::layout_inner;
  SampleParams m_sample;
  bool m_events = false;
  bool m_ties_high = false;  // card.tie_order: higher_core
  Scalar& m_runs;
  Scalar& m_run_ps;
};

}  // namespace vspyre
