// Runs a timing plan (sim/plan/plan.proto) on a Card: each stage becomes one CoreOp program per
// core, run with Card::run (a stage finishes on every core before the next starts). Reports the
// kernel time, per-core engine busy fractions, bytes per memory level and the bottleneck.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/card.h"
#include "sim/plan/lower.h"

namespace vspyre {

// The card's parameters the lowering needs, read from a built card.
plan::CardParams plan_card_params(Card& card);

struct CoreBusy {
  uint32_t core = 0;
  double pt = 0, sfp = 0, load = 0, store = 0, ring = 0;  // fractions of the kernel time
};

struct PlanResult {
  double kernel_ps = 0;
  double launch_ps = 0;
  double dispatch_ps = 0;  // SDSC executions waiting out card.sdsc_dispatch
  uint32_t cores_used = 0;
  std::vector<CoreBusy> per_core;  // cores that ran anything, ascending
  uint64_t lpddr5_read = 0, lpddr5_write = 0, lx = 0, ring = 0;  // bytes
  std::string bottleneck;     // "lpddr5", "pt", "sfp", "dma_load", "dma_store", "ring", "launch"
  double bottleneck_fraction = 0;
  nlohmann::json resources;   // every candidate's busy fraction
  std::vector<std::pair<std::string, double>> stage_ps;  // per stage
  struct Sampled {  // a stage card.sample cut short
    std::string stage;
    // Tiles [first, first + skipped) were not simulated; they took the time per tile measured over
    // [measure, first).
    uint32_t tiles = 0, period = 0, measure = 0, first = 0, skipped = 0;
    double per_tile_ps = 0;  // the cores' mean measured time per tile
  };
  std::vector<Sampled> sampled;
  nlohmann::json to_json() const;
};

// The CoreOp programs of one stage, indexed by core (size = highest core + 1).
std::vector<std::vector<CoreOp>> stage_programs(const plan::Stage& stage);

PlanResult run_plan(Card& card, const plan::Plan& plan);

// Human-readable summary.
std::string format_result(const PlanResult& r);

}  // namespace vspyre
