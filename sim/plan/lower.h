// Lowering: a loaded, resolved SuperDSC bundle -> the timing plan (plan.proto). Mechanistic: work
// division from numWkSlicesPerDim_/coreIdToWkSlice_, per-core sizes from dataStageParam_, HBM
// tensors staged through LX by strided DMA in tiles that fit LX (double-buffered when they fit
// twice), compute on PT or SFP at sizes taken from the SDSC, cross-core combines over the ring
// when a reduced dimension is split across cores. No SystemC and no model classes: the card's
// parameters come in as a plain struct.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sim/bundle/bundle.h"
#include "sim/plan/operand_order.h"
#include "sim/plan/plan.pb.h"

namespace vspyre::plan {

// A plan that cannot run on the card (a tile that cannot fit LX, ...). One line.
struct LowerError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// SFP cost classes, cycles per element per lane (the card's `plan.sfp_cycles.*` parameters).
// Which op falls in which class is decided in one table, sfp_cost_class() in lower.cpp.
struct SfpCosts {
  double simple = 1.0;          // add, sub, mul, neg, max, sum, identity, relu, compares, ...
  double divide = 4.0;          // realdiv, reciprocal, ...
  double transcendental = 4.0;  // exp, log, gelu, tanh, sigmoid, sqrt, ...
  // A reduction whose reduced dim is its output's stick dim folds each row across the lanes
  // instead of element-wise down them: cycles per element for that (0: as its op class).
  double reduce_across_stick = 0.0;
};

// The card as the lowering sees it.
struct CardParams {
  uint32_t cores = 32;
  uint32_t corelets = 2;
  uint32_t pt_rows = 8;  // a PT array's rows: a matmul tile thinner than this wastes the array
  uint64_t lx_usable = (2ull << 20) - (64ull << 10);  // per core, bytes a plan may use
  uint32_t stick_bytes = 128;
  double launch_overhead_ps = 15e6;   // once per bundle
  uint64_t tile_target_bytes = 64ull << 10;  // streamed HBM bytes per tile above which work is tiled
  // Streamed bytes per tile a plan buffers at most (card.plan.tile_max): a larger LX keeps more
  // resident, not larger tiles (a tile filled up to half a 4 MiB LX lengthened the pipeline's fill
  // and drain). The default is half the default card's usable LX, so that its plans are unchanged.
  uint64_t tile_max_bytes = 992ull << 10;
  // A DMA request's bytes: a tiling whose contiguous runs are shorter than this wastes the
  // engine's outstanding requests (each run is its own request), so it is avoided when another fits.
  uint64_t dma_request_bytes = 4096;
  // A contiguous run this long gives every memory channel whole rows (channels x row size): the
  // tiling prefers runs at least this long (up to the tile target) when another tiling fits.
  uint64_t dma_run_bytes = 4096;
  // How an SFP operand laid out in device memory unlike the op's primary layout is moved
  // (card.plan.sfp_operand_order).
  OperandOrder sfp_operand_order = OperandOrder::layout_inner;
  SfpCosts sfp;
  // Rates the tiling search estimates a candidate's time with, when it must cut several
  // dimensions (plan_card_params fills them from the card; 0: no estimate, and double buffering
  // ranks first as it did before them). A tiling that fits LX only once overlaps nothing, but one
  // that fits twice may have to read its operands again: on a memory-bound kernel the reading
  // costs more than the overlap saves (bench/validation/README.md, "The tiling weighs re-reading
  // against overlap").
  double pt_macs_per_ps = 0;         // one core's PT array on a large fp16 matmul
  double sfp_elements_per_ps = 0;    // one core's SFP at one cycle per element
  double core_dma_bytes_per_ps = 0;  // one DMA engine: its requests in flight over an unloaded round trip
  double memory_bytes_per_ps = 0;    // the device memory's peak, shared by every core
};

enum class SfpClass { simple, divide, transcendental };
SfpClass sfp_cost_class(std::string_view op_func_name);
double sfp_cycles_per_element(const SfpCosts& costs, std::string_view op_func_name);

// Argument addresses for a timing run: every address argument gets its own region, spaced by
// the largest tensor, starting at `base`; dimension arguments take their max_value. The pool
// follows the arguments.
bundle::Bindings default_bindings(const bundle::LoadedBundle& lb, uint64_t base = 1ull << 30);

// Lowers `resolved` (from bundle::resolve) into a plan. Throws LowerError.
Plan lower(const bundle::LoadedBundle& lb, const std::vector<bundle::ResolvedExecution>& resolved,
           const CardParams& card);
// The same into `plan` (cleared first). A large bundle lowers to ~10^5 small messages (one
// per op, its name and its stride levels): with `plan` created on a google::protobuf::Arena
// (Arena::CreateMessage<Plan>) they are allocated from a few large blocks and freed with them,
// instead of one heap allocation and one free each.
void lower(const bundle::LoadedBundle& lb, const std::vector<bundle::ResolvedExecution>& resolved,
           const CardParams& card, Plan& plan);

// The plan as protobuf text format, and back (throws LowerError on a parse error).
std::string to_text(const Plan& p);
Plan from_text(const std::string& text);

}  // namespace vspyre::plan
