// How a DMA walks an SFP operand whose device-memory layout orders its dims unlike the op's
// primaryDsInfo_ layout (card.plan.sfp_operand_order). Its own header, with nothing in it but
// the choice, so that the card model (which may be built without the plan library) and the
// lowering share one definition.
#pragma once

namespace vspyre::plan {

enum class OperandOrder {
  layout,         // its own layout's order, in whole runs
  primary,        // the SFP's streaming order (which its LX image follows), runs as long as both keep contiguous
  layout_sticks,  // its own layout's order, a stick at a time (no two sticks in a row are neighbours in LX too)
  // its own layout's order, one run per stretch of its innermost dim (of more than one unit): the
  // DMA gathers those sticks from LX at one stride, so they go as one request, not one each
  layout_inner,
};

}  // namespace vspyre::plan
