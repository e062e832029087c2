#include "sim/plan/lower.h"

#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <set>

namespace vspyre::plan {

using bundle::Allocation;
using bundle::LabeledDs;
using bundle::Placement;
using bundle::Sdsc;

// The one table of SFP cost classes. Everything not listed is `simple` (one cycle per element
// per lane), which measured.md 6a supports for exp/gelu at HBM-bound sizes.
SfpClass sfp_cost_class(std::string_view op) {
  // Never destroyed: the shim lowers kernels on its worker threads, which may still run while
  // the process exits (see sim/exec/layout.cpp, reductions()).
  static const auto& divide = *new const std::set<std::string, std::less<>>{"realdiv", "div", "reciprocal", "divide", "fmod",
                                                          "remainder", "floor_divide"};
  static const auto& transcendental = *new const std::set<std::string, std::less<>>{
      "exp", "exp2", "log", "log2", "log1p", "gelu", "gelufwd", "fastexp", "fastsigmoid", "tanh", "sigmoid",
      "sqrt", "rsqrt", "softplus", "silu", "erf", "sin", "cos", "pow", "swish", "mish", "layernormscale",
      "layernormnorm", "softmax"};
  if (divide.count(op)) return SfpClass::divide;
  if (transcendental.count(op)) return SfpClass::transcendental;
  return SfpClass::simple;
}

double sfp_cycles_per_element(const SfpCosts& c, std::string_view op) {
  switch (sfp_cost_class(op)) {
    case SfpClass::divide: return c.divide;
    case SfpClass::transcendental: return c.transcendental;
    default: return c.simple;
  }
}

bundle::Bindings default_bindings(const bundle::LoadedBundle& lb, uint64_t base) {
  uint64_t largest = 1ull << 20;
  for (const auto& [name, s] : lb.sdscs)
    for (const auto& a : s.allocations) largest = std::max(largest, a.tensor_bytes);
  const uint64_t align = 1ull << 20;
  const uint64_t spacing = (largest + align - 1) / align * align + align;
  bundle::Bindings b;
  uint64_t next = base;
  for (const auto& arg : lb.bundle.args) {
    if (arg.is_dimension) {
      b.args.push_back(static_cast<uint64_t>(std::max<int64_t>(arg.max_value, arg.granularity)));
    } else {
      b.args.push_back(next);
      next += spacing;
    }
  }
  b.pool_base = next;
  return b;
}

namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return b ? (a + b - 1) / b : 0; }

// One tensor of an SDSC as the lowering needs it.
struct Tensor {
  uint32_t idx = 0;
  std::string name;
  bool hbm = false;
  int alloc = -1;  // index in Sdsc::allocations (the HBM one if any)
  bool is_input = false, is_output = false;
  std::vector<std::string> dims;  // layout order, innermost first
  // Flags as char, not vector<bool>: the tile loop reads them for every op it writes.
  std::vector<char> reduced;      // per layout dim
  std::vector<char> stick;        // per layout dim: a stick dimension (one, or two: a 2-D stick)
  std::vector<uint64_t> full;     // whole-tensor count per dim (sticks for the stick dim)
  std::vector<uint64_t> stride;   // bytes
  std::vector<uint64_t> max_ext;  // per layout dim: largest per-core extent over the cores, elements
  std::vector<uint64_t> per;      // per layout dim: elements per unit (its stickSize_, or 1)
  // A PT operand whose row dim is not the first layout dim right outside the stick: that dim's
  // layout index, else -1. Its blocks move stick by stick, row dim innermost (pt_operand_rows()).
  int pt_row = -1;
  // Such an operand that is the op's input, with a second M dim (one the weight lacks) as the
  // first layout dim right outside the stick: that dim's layout index, else -1. The array's rows
  // are then that dim and the row dim together (a 3-D input's batch folded into M: `x` of
  // [M][K/64][B][64] against a 2-D weight), and a stick column moves in runs of that dim's sticks,
  // the row dim next (pt_operand_rows()).
  int pt_run = -1;
  // An SFP operand whose HBM layout orders its dims unlike its role's primary layout (the order
  // the SFP streams the op in, and so the order of its LX image): the layout dims in the order
  // the DMA walks them, innermost first (primary_walk()). Empty: the layout order.
  std::vector<size_t> move;
  // Such an operand walked in its own layout a stick at a time (OperandOrder::layout_sticks).
  bool stick_runs = false;
  // Such an operand walked in its own layout, one run per stretch of its innermost dim of more
  // than one unit (OperandOrder::layout_inner).
  bool inner_runs = false;
  // A gather's or scatter's value tensor (bundle::IndirectAccess): the bytes of one row (its
  // inner, direct dims). Each row is wherever its index points, so a block moves as one run per
  // row; 0 for any other tensor.
  uint64_t gather_row = 0;
  // The core's slice is lone sticks (plan::Op::lone_sticks): walking the layout dims from the
  // innermost, the first one the cores split leaves one unit a core before any run of two
  // sticks has formed.
  bool lone_sticks = false;
  // Per layout dim: the window this tensor is the input of along it (a pooling's), else null.
  std::vector<const bundle::Window*> win;
  bool has(const std::string& d) const {
    for (size_t i = 0; i < dims.size(); ++i)
      if (dims[i] == d && !reduced[i]) return true;
    return false;
  }
};

// Units (sticks along a stick dim, elements along any other; 1 along a reduced one) of tensor t's
// layout dim i for an extent of `ext` elements.
uint64_t units(const Tensor& t, size_t i, uint64_t ext) {
  if (t.reduced[i]) return 1;
  return ceil_div(ext, t.per[i]);
}

// The index in `ts` of the tensor with labeledDs_ index `idx`, or -1.
int find_tensor(const std::vector<Tensor>& ts, uint32_t idx) {
  for (size_t k = 0; k < ts.size(); ++k)
    if (ts[k].idx == idx) return static_cast<int>(k);
  return -1;
}

struct DimTile {
  std::string dim;
  uint64_t gran = 1;   // elements per tile step (a stick for a stick dimension)
  uint64_t max_ext = 0;  // largest per-core extent, elements
  uint64_t tile = 0;   // tile extent, elements
  uint64_t count() const { return ceil_div(max_ext, tile); }
};

std::string sdsc_label(const Sdsc& s) { return s.file + " " + s.key; }

class Lowerer {
 public:
  Lowerer(const CardParams& card, Plan& plan) : m_card(card), m_plan(plan) {}

  void sdsc(const Sdsc& s, const bundle::ResolvedExecution& r, uint64_t exec_index);

 private:
  bool shuffle(const Sdsc& s, uint64_t exec_index);
  std::vector<Tensor> tensors(const Sdsc& s) const;
  uint64_t ext_of(const Sdsc& s, uint32_t core, const std::string& d) const;
  uint64_t max_ext_of(const Sdsc& s, const std::string& d) const;  // over the SDSC's cores

  const CardParams& m_card;
  Plan& m_plan;
};

// The order a DMA walks an SFP operand in (Tensor::move). The SFP streams an op in the order of
// its primaryDsInfo_ layout and each operand's LX image follows it; a tensor whose HBM layout
// orders the dims it holds (more than one unit of) differently is moved in that order, in runs as
// long as both orders keep contiguous. The compiler writes such a tensor for
// `torch.cat([x, x], dim=0)`: primary [x, out, mb] (rows innermost), output [mb, out, x] (the
// copy index innermost, rows outermost), so its store is a stick at a time. Empty when the orders
// agree. (A ReStickifyOpHBM changes the stick dim and has its own path; PT operands have
// Tensor::pt_row.)
std::vector<size_t> primary_walk(const Tensor& t, const bundle::LayoutInfo& primary) {
  std::vector<size_t> order;  // the tensor's dims in primary order, then any the primary lacks
  for (const auto& d : primary.layout_dim_order)
    for (size_t i = 0; i < t.dims.size(); ++i)
      if (t.dims[i] == d && std::find(order.begin(), order.end(), i) == order.end()) order.push_back(i);
  for (size_t i = 0; i < t.dims.size(); ++i)
    if (std::find(order.begin(), order.end(), i) == order.end()) order.push_back(i);
  // Only the dims of more than one unit decide: a dim of one unit is contiguous anywhere.
  std::vector<size_t> a, b;
  for (size_t i = 0; i < t.dims.size(); ++i)
    if (t.full[i] > 1) a.push_back(i);
  for (size_t i : order)
    if (t.full[i] > 1) b.push_back(i);
  if (a == b) order.clear();
  return order;
}

std::vector<Tensor> Lowerer::tensors(const Sdsc& s) const {
  std::vector<Tensor> out;
  std::set<uint32_t> ins, outs;
  const auto restickify_pad = s.restickify_pad();
  for (const auto& op : s.compute_ops) {
    ins.insert(op.inputs.begin(), op.inputs.end());
    ins.insert(op.index_inputs.begin(), op.index_inputs.end());  // a gather's index: loaded like an input
    outs.insert(op.outputs.begin(), op.outputs.end());
  }
  // card.plan.sfp_operand_order primary, layout_sticks or layout_inner: in an SDSC that runs on
  // the SFP only, an HBM tensor laid out unlike its primary layout (primary_walk() not empty) is
  // walked in the primary order, or in its own a stick at a time (Tensor::stick_runs), or in its
  // own a stretch of its innermost dim at a time (Tensor::inner_runs).
  bool unlike_primary = m_card.sfp_operand_order != OperandOrder::layout;  // look for such tensors
  for (const auto& op : s.compute_ops)
    if (op.ex_unit != bundle::ExUnit::sfp || op.op_func_name == "ReStickifyOpHBM") unlike_primary = false;
  for (const LabeledDs& ds : s.labeled_ds) {
    Tensor t;
    t.idx = ds.idx;
    t.name = ds.name;
    t.is_output = outs.count(ds.idx) > 0;
    t.is_input = ins.count(ds.idx) > 0 && !t.is_output;
    for (size_t i = 0; i < s.allocations.size(); ++i) {
      const Allocation& a = s.allocations[i];
      if (a.lds_idx != ds.idx) continue;
      if (a.placement == Placement::hbm) {
        t.hbm = true;
        t.alloc = static_cast<int>(i);
      } else if (t.alloc < 0) {
        t.alloc = static_cast<int>(i);
      }
    }
    const bundle::LayoutInfo* li = s.layout_for(ds);
    // Elements per stick of each stick dim: one dim (64 of DL16), or two (an fp8 weight's
    // [2, 64]: two rows in one stick). Without a layout, 64.
    std::map<std::string, uint64_t> stick_elems;
    if (li)
      for (size_t k = 0; k < li->stick_dim_order.size(); ++k)
        stick_elems[li->stick_dim_order[k]] =
            k < li->stick_size.size() && li->stick_size[k] > 0 ? static_cast<uint64_t>(li->stick_size[k]) : 64;
    t.dims = t.alloc >= 0 && !s.allocations[t.alloc].layout_dim_order.empty() ? s.allocations[t.alloc].layout_dim_order
             : li ? li->layout_dim_order : std::vector<std::string>{};
    if (const bundle::IndirectAccess* ia = s.indirect_of(ds.idx)) t.dims = ia->memory_order(t.dims);
    // The whole tensor's extent along each dim: N_, plus an HBM allocation's trailing gap
    // (backGapCore_), less a restickify's padding (Sdsc::restickify_pad).
    const Allocation* al = t.alloc >= 0 ? &s.allocations[t.alloc] : nullptr;
    uint64_t stride = m_card.stick_bytes;
    for (const auto& d : t.dims) {
      const bool red = s.scale_of(ds, d) < 0;
      const auto se = stick_elems.find(d);
      const bool stk = se != stick_elems.end();
      const uint64_t per = stk ? se->second : 1;
      int64_t ext = s.n_of(d);
      const auto pad = restickify_pad.find(d);
      if (pad != restickify_pad.end()) ext -= pad->second;
      if (al && al->placement == Placement::hbm && (pad == restickify_pad.end() || stk))
        if (auto g = al->back_gap.find(d); g != al->back_gap.end()) ext += g->second;
      // A windowed op's input (padding_: a pooling's): the window's input extent, and per core
      // the span its outputs' windows read.
      const bundle::Window* win = al && al->windowed.count(d) ? s.window_of(d) : nullptr;
      if (win) ext = win->total;
      const uint64_t n = static_cast<uint64_t>(std::max<int64_t>(1, ext));
      const uint64_t full = red ? 1 : ceil_div(n, per);
      t.reduced.push_back(red);
      t.stick.push_back(stk);
      t.per.push_back(per);
      t.win.push_back(red ? nullptr : win);
      t.full.push_back(full);
      t.stride.push_back(stride);
      t.max_ext.push_back(win ? static_cast<uint64_t>(std::min<int64_t>(
                                    win->total, win->span(static_cast<int64_t>(max_ext_of(s, d)), s.n_of(win->window_dim))))
                              : max_ext_of(s, d));
      stride *= full;
    }
    if (t.hbm) {
      uint64_t run = 1;  // sticks of the core's slice that lie one after another
      bool split = false;
      for (size_t i = 0; i < t.dims.size() && !split; ++i) {
        if (t.reduced[i]) continue;
        const uint64_t u = std::max<uint64_t>(1, units(t, i, t.max_ext[i]));
        run *= u;
        split = u < t.full[i];
      }
      t.lone_sticks = split && run == 1;
    }
    if (unlike_primary && t.hbm && li) {
      t.move = primary_walk(t, *li);
      if (m_card.sfp_operand_order != OperandOrder::primary && !t.move.empty()) {
        t.move.clear();
        t.stick_runs = m_card.sfp_operand_order == OperandOrder::layout_sticks;
        t.inner_runs = m_card.sfp_operand_order == OperandOrder::layout_inner;
      }
    }
    if (const bundle::IndirectAccess* ia = s.indirect_of(ds.idx)) {
      const auto pos = std::find(t.dims.begin(), t.dims.end(), ia->dims.front()) - t.dims.begin();
      if (static_cast<size_t>(pos) < t.dims.size()) t.gather_row = t.stride[static_cast<size_t>(pos)];
    }
    out.push_back(std::move(t));
  }
  return out;
}

// Where the PT array finds a matmul operand's sticks in LX, whose image of the operand follows
// its per-core layout: the sticks between two the array reads one after the other, going down a
// stick column (the rows that share a stick: the dims laid out inside the row dim) or along a row
// (its next stick: the dims laid out inside the stick dim), whichever lie closer. Adjacent (1) in
// the default 2-D layouts and batch-outer 3-D; in torch-spyre's default 3-D [M][K/64][B][64] a
// batch's next stick along a row is the per-core batch count further on. `row`: the operand's row
// dim (the input's M, the weight's K).
uint32_t feed_stride(const Tensor& t, const std::string& row) {
  size_t stick_i = t.dims.size(), row_i = t.dims.size();
  for (size_t i = 0; i < t.dims.size(); ++i) {
    if (t.reduced[i]) continue;
    if (t.stick[i] && stick_i == t.dims.size()) stick_i = i;
    else if (!t.stick[i] && t.dims[i] == row) row_i = i;
  }
  auto inside = [&](size_t end) {
    uint64_t n = 1;
    for (size_t i = 0; i < end && i < t.dims.size(); ++i)
      n *= std::max<uint64_t>(1, units(t, i, t.max_ext[i]));
    return n;
  };
  // An operand with neither (every dim reduced, or the row dim absent with no stick dim left):
  // nothing tells where its sticks lie, so it is fed as adjacent, the layouts' common case, rather
  // than charged a line per stick.
  if (stick_i == t.dims.size() && row_i == t.dims.size()) return 1;
  uint64_t best = UINT32_MAX;
  if (stick_i < t.dims.size()) best = std::min(best, inside(stick_i));
  if (row_i < t.dims.size()) best = std::min(best, inside(row_i));
  return static_cast<uint32_t>(std::min<uint64_t>(best, UINT32_MAX));
}

// The roles of a PT op's N_ dims: the input's row dim (M; `mb` when there is one), the reduction
// (K), and the batch dims (in both operands and the output, outside every stick).
struct PtDims {
  std::string m, k;
  std::vector<std::string> batch;
};
PtDims pt_dims(const Sdsc& s, const Tensor& a, const Tensor& b, const Tensor& c) {
  PtDims r;
  for (const auto& [d, v] : s.n) {
    const bool ia = a.has(d), ib = b.has(d), ic = c.has(d);
    if (ia && !ib && ic && (r.m.empty() || d == "mb")) r.m = d;
    if (ia && ib && !ic && r.k.empty()) r.k = d;
    if (ia && ib && ic) {
      bool in_stick = false;
      for (const Tensor* t : {&a, &b, &c})
        for (size_t i = 0; i < t->dims.size(); ++i)
          if (t->dims[i] == d && t->stick[i]) in_stick = true;
      if (!in_stick) r.batch.push_back(d);
    }
  }
  return r;
}

// A PT op's input, weight and output (indices into the SDSC's tensors; -1 when not found) and,
// when all three are found, the roles of its dims: worked out once per SDSC for the rows the DMA
// moves (pt_operand_rows), the tiling (the batch dims) and the tile loop (the operands' strides).
struct PtOp {
  int a = -1, b = -1, c = -1;
  PtDims dims;
  bool whole() const { return a >= 0 && b >= 0 && c >= 0; }
};
std::vector<std::optional<PtOp>> pt_ops_of(const Sdsc& s, const std::vector<Tensor>& ts) {
  std::vector<std::optional<PtOp>> ops(s.compute_ops.size());
  for (size_t ci = 0; ci < s.compute_ops.size(); ++ci) {
    const auto& cop = s.compute_ops[ci];
    if (cop.ex_unit != bundle::ExUnit::pt || cop.inputs.size() < 2 || cop.outputs.empty()) continue;
    PtOp po{find_tensor(ts, cop.inputs[0]), find_tensor(ts, cop.inputs[1]), find_tensor(ts, cop.outputs[0]), {}};
    if (po.whole()) po.dims = pt_dims(s, ts[po.a], ts[po.b], ts[po.c]);
    ops[ci] = std::move(po);
  }
  return ops;
}

// Sets Tensor::pt_row for the HBM operands of the SDSC's PT ops. The array reads an operand from
// LX as stick columns: for one stick of the input (K) or of the weight and output (N), the rows
// that share it one after another (the input's and output's M, the weight's K), and the DMA that
// fills LX writes it in that order. A run is therefore longer than one stick only when the row
// dim is the first layout dim (of more than one element) right outside the stick, as in the
// default 2-D layouts ([K/64][M][64], [N/64][K][64]) and batch-outer 3-D ([B][K/64][M][64]).
// Otherwise (torch-spyre's default 3-D [M][K/64][B][64], a row-major [M][K/64][64]) the block
// moves stick by stick. Evidence: validation sections 2 and 8 (the card is 1.4-3.9x slower in
// those layouts on 32 cores; at one core a row-outer input costs up to 1.7x). Of the op's M dims
// (in the input and the output, not the weight) the row dim is `mb` when there is one: a batch
// `x` is looped outside it (at x = 1, `x,in,mb` measured 3.4 ms and `mb,in,x` 1.0 ms).
// An x that is no batch (the weight lacks it: `torch.matmul` of [B,M,K] by a 2-D weight) is part
// of the input's rows, and when it is the dim right outside the stick a stick column's rows lie
// in runs of its sticks: the input moves in those runs, `mb` next (Tensor::pt_run). Evidence:
// validation section 10's shared-weight matmuls split 4 x 8 (+44 to +104 % stick by stick, -30
// to +61 % so). The output, laid out the same, stays stick by stick: moving it so too made
// section 2's default-layout rows 2.3 points worse and the table 0.06 (bench/validation/README.md,
// stop 58).
void pt_operand_rows(const std::vector<std::optional<PtOp>>& pt_ops, std::vector<Tensor>& ts) {
  auto mark = [&](int k, const std::string& row) {
    Tensor& t = ts[static_cast<size_t>(k)];
    if (row.empty() || !t.hbm) return size_t{t.dims.size()};
    size_t first = t.dims.size();  // the first layout dim holding more than one unit
    for (size_t i = 0; i < t.dims.size() && first == t.dims.size(); ++i)
      if (t.full[i] > 1) first = i;
    for (size_t i = 0; i < t.dims.size(); ++i)
      if (t.dims[i] == row && !t.stick[i] && i != first) t.pt_row = static_cast<int>(i);
    return first;
  };
  for (const auto& po : pt_ops) {
    if (!po || !po->whole()) continue;
    const size_t first = mark(po->a, po->dims.m);
    mark(po->b, po->dims.k);
    mark(po->c, po->dims.m);
    Tensor& a = ts[static_cast<size_t>(po->a)];
    if (a.pt_row >= 0 && first < a.dims.size() && !a.stick[first] && ts[static_cast<size_t>(po->c)].has(a.dims[first]) &&
        !ts[static_cast<size_t>(po->b)].has(a.dims[first]))
      a.pt_run = static_cast<int>(first);
  }
}

// The layout dim (Tensor::pt_run) whose sticks lengthen the runs of a PT operand moved stick by
// stick, when it lies right outside the stick; else -1.
int pt_run_dim(const Tensor& t, uint64_t stick_bytes) {
  return t.pt_row >= 0 && t.pt_run >= 0 && t.stride[static_cast<size_t>(t.pt_run)] == stick_bytes ? t.pt_run : -1;
}

uint64_t Lowerer::ext_of(const Sdsc& s, uint32_t core, const std::string& d) const {
  const uint32_t slices = s.slices_of(d);
  uint32_t k = 0;
  if (auto it = s.core_slice.find(core); it != s.core_slice.end())
    if (auto jt = it->second.find(d); jt != it->second.end()) k = jt->second;
  int64_t v = (k + 1 == slices) ? s.el_of(d) : s.ss_of(d);
  if (v <= 0) v = s.ss_of(d);
  if (v <= 0) v = static_cast<int64_t>(ceil_div(static_cast<uint64_t>(std::max<int64_t>(1, s.n_of(d))), slices));
  return static_cast<uint64_t>(v);
}

uint64_t Lowerer::max_ext_of(const Sdsc& s, const std::string& d) const {
  uint64_t ext = 0;
  for (uint32_t c : s.core_ids) ext = std::max(ext, ext_of(s, c, d));
  return ext;
}

// A block of a tensor: per layout dim, an offset and a count in that dim's units.
struct Block {
  uint64_t addr = 0, bytes = 0, run = 0;
  std::vector<std::pair<uint64_t, uint64_t>> levels;  // (count, stride), innermost first
};

// Layout dim of tensor t at position j of the order its blocks are walked in.
inline size_t walk_dim(const Tensor& t, size_t j) { return t.move.empty() ? j : t.move[j]; }

// The contiguous run of a block of tensor t: the stick, times every inner dim (in the order the
// block is walked, walk_dim()) the block holds whole, times the first one it cuts, as long as
// they lie one after another in memory. `cnt(i)`: the block's units along layout dim i. `next`:
// set to the first walk position past the run. `span`: for a tensor moved a stick at a time in
// its own layout (Tensor::stick_runs) or a stretch of its innermost dim at a time
// (Tensor::inner_runs), the stretch of device memory it walks in address order
// instead (what the tiling keeps long, so that the sticks fill DRAM rows one after another).
template <typename Cnt>
uint64_t leading_run(const Tensor& t, uint64_t stick_bytes, Cnt&& cnt, size_t* next = nullptr, bool span = false) {
  uint64_t run = stick_bytes;
  size_t i = 0;
  if (t.pt_row >= 0 || (t.stick_runs && !span)) {  // moved stick by stick: every stick is a run
    if (next) *next = 0;
    if (const int d = pt_run_dim(t, stick_bytes); d >= 0) run *= cnt(static_cast<size_t>(d));  // or a run of them
    return run;
  }
  // Along the walk order, while the dims chain contiguously (in the layout order they always do).
  auto chains = [&](size_t d) { return t.stride[d] == run; };
  if (t.inner_runs && !span) {  // the stick, times its innermost dim of more than one unit
    while (i < t.dims.size() && t.full[walk_dim(t, i)] <= 1 && chains(walk_dim(t, i))) ++i;
    if (i < t.dims.size() && chains(walk_dim(t, i))) run *= cnt(walk_dim(t, i++));
    if (next) *next = i;
    return run;
  }
  while (i < t.dims.size() && chains(walk_dim(t, i)) && cnt(walk_dim(t, i)) == t.full[walk_dim(t, i)])
    run *= cnt(walk_dim(t, i++));
  if (i < t.dims.size() && chains(walk_dim(t, i))) run *= cnt(walk_dim(t, i++));
  if (next) *next = i;
  return run;
}

// The bytes make_block() moves for these counts, without building the block.
uint64_t block_byte_count(const Tensor& t, const std::vector<uint64_t>& cnt, uint64_t stick_bytes) {
  size_t i = 0;
  uint64_t bytes = leading_run(t, stick_bytes, [&](size_t d) { return cnt[d]; }, &i);
  const int in_run = pt_run_dim(t, stick_bytes);
  for (; i < t.dims.size(); ++i)
    if (cnt[walk_dim(t, i)] > 1 && static_cast<int>(walk_dim(t, i)) != in_run) bytes *= cnt[walk_dim(t, i)];
  return bytes;
}

// The block of tensor t at offsets `off` with counts `cnt` (per layout dim), into `b`: the tile
// loop makes one per DMA op, so the storage of b.levels is reused.
void make_block(const Tensor& t, uint64_t base, const std::vector<uint64_t>& off, const std::vector<uint64_t>& cnt,
                uint64_t stick_bytes, Block& b) {
  b.levels.clear();
  b.addr = base;
  for (size_t i = 0; i < t.dims.size(); ++i) b.addr += off[i] * t.stride[i];
  size_t i = 0;
  const uint64_t run = leading_run(t, stick_bytes, [&](size_t d) { return cnt[d]; }, &i);
  b.run = run;
  b.bytes = run;
  auto level = [&](size_t d) {
    if (cnt[d] <= 1) return;
    b.bytes *= cnt[d];
    if (!b.levels.empty() && b.levels.back().second * b.levels.back().first == t.stride[d])
      b.levels.back().first *= cnt[d];
    else
      b.levels.emplace_back(cnt[d], t.stride[d]);
  };
  // A PT operand moved in the array's order (Tensor::pt_row): its row dim first, then the rest
  // (but a dim already in the run, Tensor::pt_run).
  const size_t row = t.pt_row >= 0 ? static_cast<size_t>(t.pt_row) : t.dims.size();
  const int in_run = pt_run_dim(t, stick_bytes);
  if (row < t.dims.size()) level(row);
  for (; i < t.dims.size(); ++i)
    if (walk_dim(t, i) != row && static_cast<int>(walk_dim(t, i)) != in_run) level(walk_dim(t, i));
  // A single run covering everything: no levels needed (unless the sticks move one by one, or a
  // stretch of the innermost dim at a time).
  if (b.levels.size() == 1 && b.levels[0].second == run && !t.stick_runs && !t.inner_runs) {
    b.run = b.bytes;
    b.levels.clear();
  }
}

// The transfer of a DMA_IN / DMA_OUT op: block b of tensor `tensor`.
// A gather's or scatter's value block (Tensor::gather_row): one run per row. The rows' places
// depend on the index's values, which the plan does not know: they are timed as consecutive
// rows (each its own run and requests), after the index has arrived.
Block gathered_block(Block b, uint64_t row) {
  if (row == 0 || b.run <= row || b.bytes < row) return b;
  b.run = row;
  b.levels.assign(1, {b.bytes / row, row});
  return b;
}

void set_transfer(Op* o, const Block& b, uint32_t tensor, bool lone_sticks) {
  o->set_addr(b.addr);
  if (lone_sticks) o->set_lone_sticks(true);
  o->set_bytes(b.bytes);
  o->set_run_bytes(b.run);
  o->set_tensor(tensor);
  o->mutable_levels()->Reserve(static_cast<int>(b.levels.size()));
  for (auto [cnt, stride] : b.levels) {
    StrideLevel* l = o->add_levels();
    l->set_count(cnt);
    l->set_stride(stride);
  }
}

// One LX state of a shuffle (formats.md C.5): which core holds which slice, and where each stick
// of a core's slice sits in that core's LX.
struct LxState {
  std::vector<std::string> dims;    // layout order, innermost first
  std::vector<int64_t> core_alpha;  // per dim: the per-core extent slices step by (0: not split)
  std::vector<int64_t> ext;         // per dim: elements one core holds
  std::vector<int64_t> cnt;         // per dim: units one core holds (sticks for the stick dim)
  std::vector<int64_t> stride;      // per dim: in sticks
  size_t stick = 0;                 // index of the stick dim
  int64_t stick_elems = 64;
  std::map<uint32_t, std::vector<int64_t>> slice;  // core -> slice index per dim
};

// Builds the state from an allocation's coordinates_; nullopt when the folds do not describe it.
std::optional<LxState> lx_state(const Sdsc& s, const Allocation& a) {
  LxState st;
  const LabeledDs* ds = nullptr;
  for (const auto& d : s.labeled_ds)
    if (d.idx == a.lds_idx) ds = &d;
  const bundle::LayoutInfo* li = ds ? s.layout_for(*ds) : nullptr;
  if (!li || li->stick_dim_order.size() != 1 || li->stick_size.empty() || li->stick_size[0] <= 0) return std::nullopt;
  st.dims = a.layout_dim_order;
  st.stick_elems = li->stick_size[0];
  bool found = false;
  int64_t stride = 1;
  for (size_t i = 0; i < st.dims.size(); ++i) {
    auto it = a.coord_folds.find(st.dims[i]);
    if (it == a.coord_folds.end()) return std::nullopt;
    int64_t alpha = 0, ext = 1;
    for (const auto& f : it->second) {
      if (f.label == "core_fold") alpha = f.factor > 1 ? f.alpha : 0;
      else ext *= f.factor;
    }
    const bool is_stick = st.dims[i] == li->stick_dim_order[0];
    if (is_stick) {
      st.stick = i;
      found = true;
      // A stick must not straddle two cores' slices.
      if (alpha % st.stick_elems) return std::nullopt;
    }
    const int64_t cnt = is_stick ? (ext + st.stick_elems - 1) / st.stick_elems : ext;
    st.core_alpha.push_back(alpha);
    st.ext.push_back(ext);
    st.cnt.push_back(cnt);
    st.stride.push_back(stride);
    stride *= cnt;
  }
  if (!found) return std::nullopt;
  for (const auto& [core, sl] : a.wk_slice) {
    std::vector<int64_t> v;
    for (const auto& d : st.dims) {
      auto it = sl.find(d);
      v.push_back(it == sl.end() ? 0 : it->second);
    }
    st.slice[core] = std::move(v);
  }
  return st;
}

// LX relayout (formats.md C.5): the consumer's state S2 is built from the producer's S1 across
// cores. Every stick of every destination core's slice is traced to the core holding it in S1;
// sticks consecutive at both ends form one run. The source core sends each remote run over the
// ring as a transfer of its own (one descriptor each, `outstanding` in flight, each retired by
// the receiver's acknowledgement); runs that stay on a core are an LX copy on its SFP. Returns
// false, leaving the SDSC to the generic lowering, when the states are not described by affine
// folds and slice ownership.
bool Lowerer::shuffle(const Sdsc& s, uint64_t exec_index) {
  if (s.compute_ops.size() != 1 || s.compute_ops[0].op_func_name != "shuffle") return false;
  const bundle::ComputeOp& cop = s.compute_ops[0];
  if (cop.inputs.size() != 1 || cop.outputs.size() != 1) return false;
  const Allocation* a1 = s.allocation(cop.inputs[0], Placement::lx);
  const Allocation* a2 = s.allocation(cop.outputs[0], Placement::lx);
  if (!a1 || !a2 || a1->wk_slice.empty() || a2->wk_slice.empty()) return false;
  const auto s1 = lx_state(s, *a1);
  const auto s2 = lx_state(s, *a2);
  if (!s1 || !s2 || s1->dims.size() != s2->dims.size() || s1->stick_elems != s2->stick_elems ||
      s1->dims[s1->stick] != s2->dims[s2->stick])
    return false;
  // Dim i of S2 is dim map[i] of S1.
  std::vector<size_t> map;
  for (const auto& d : s2->dims) {
    auto it = std::find(s1->dims.begin(), s1->dims.end(), d);
    if (it == s1->dims.end()) return false;
    map.push_back(static_cast<size_t>(it - s1->dims.begin()));
  }
  // Slice (in S1's dim order) -> the S1 core holding it; several holders: the lowest id.
  std::map<std::vector<int64_t>, uint32_t> owner;
  for (const auto& [core, sl] : s1->slice) owner.emplace(sl, core);
  int64_t per_core = 1;
  for (int64_t c : s2->cnt) per_core *= c;
  if (per_core <= 0 || per_core > (int64_t{1} << 24)) return false;

  struct Flow { uint64_t sticks = 0, runs = 0; };
  std::map<std::pair<uint32_t, uint32_t>, Flow> flows;  // (source, destination)
  const size_t nd = s2->dims.size();
  std::vector<int64_t> global(nd), sl1(nd);
  for (const auto& [c2, slice2] : s2->slice) {
    int64_t prev_src = -2;
    uint32_t prev_c1 = UINT32_MAX;
    for (int64_t idx = 0; idx < per_core; ++idx) {
      int64_t rem = idx, src_idx = 0;
      for (size_t i = 0; i < nd; ++i) {
        const int64_t u = rem % s2->cnt[i];
        rem /= s2->cnt[i];
        global[i] = slice2[i] * s2->core_alpha[i] + (i == s2->stick ? u * s2->stick_elems : u);
      }
      for (size_t i = 0; i < nd; ++i) {
        const size_t j = map[i];
        const int64_t alpha = s1->core_alpha[j];
        sl1[j] = alpha ? global[i] / alpha : 0;
        const int64_t local = global[i] - sl1[j] * alpha;
        if (local >= s1->ext[j]) return false;  // S2 reaches past what S1 holds
        src_idx += (j == s1->stick ? local / s1->stick_elems : local) * s1->stride[j];
      }
      auto it = owner.find(sl1);
      if (it == owner.end()) return false;  // no core holds this slice in S1
      Flow& f = flows[{it->second, c2}];
      ++f.sticks;
      if (it->second != prev_c1 || src_idx != prev_src + 1) ++f.runs;
      prev_c1 = it->second;
      prev_src = src_idx;
    }
  }

  Stage* st = m_plan.add_stages();
  st->set_name(sdsc_label(s));
  st->set_sdsc(s.file);
  st->set_execution(exec_index);
  st->set_tiles(1);
  st->set_lx_peak_bytes(a1->bytes_per_core + a2->bytes_per_core);
  const uint64_t SB = m_card.stick_bytes;
  std::map<uint32_t, CoreProgram*> progs;
  auto prog = [&](uint32_t core) {
    CoreProgram*& p = progs[core];
    if (!p) {
      p = st->add_cores();
      p->set_core(core);
    }
    return p;
  };
  // Each source serves its destinations starting with the next core up, so that the sources do
  // not all send to the same destination at once.
  std::map<uint32_t, std::vector<std::pair<uint32_t, Flow>>> by_source;
  for (const auto& [key, f] : flows) by_source[key.first].emplace_back(key.second, f);
  for (auto& [c1, list] : by_source) {
    std::stable_sort(list.begin(), list.end(), [&, c1 = c1](const auto& x, const auto& y) {
      const uint32_t n = m_card.cores;
      return (x.first + n - c1) % n < (y.first + n - c1) % n;
    });
    CoreProgram* p = prog(c1);
    for (const auto& [c2, f] : list) {
      Op* o = p->add_ops();
      const uint64_t bytes = f.sticks * SB;
      if (c2 == c1) {
        o->set_kind(Op::SFP);
        o->set_name("shuffle (local)");
        o->set_elements(f.sticks * static_cast<uint64_t>(s1->stick_elems));
        o->set_cycles_per_element(m_card.sfp.simple);
        o->set_lx_bytes(2 * bytes);
      } else {
        o->set_kind(Op::RING_SEND);
        o->set_name("shuffle to core " + std::to_string(c2));
        o->set_dst_core(c2);
        o->set_bytes(bytes);
        o->set_runs(f.runs);
      }
    }
  }
  return true;
}

void Lowerer::sdsc(const Sdsc& s, const bundle::ResolvedExecution& r, uint64_t exec_index) {
  if (shuffle(s, exec_index)) return;
  std::vector<Tensor> built = tensors(s);
  const std::vector<std::optional<PtOp>> pt_ops = pt_ops_of(s, built);
  pt_operand_rows(pt_ops, built);
  const std::vector<Tensor> ts = std::move(built);
  const uint64_t SB = m_card.stick_bytes;

  // Reduced dims: non-reduced in some input, in no output.
  std::set<std::string> reduced_dims, out_dims;
  for (const auto& t : ts)
    if (t.is_output)
      for (size_t i = 0; i < t.dims.size(); ++i)
        if (!t.reduced[i]) out_dims.insert(t.dims[i]);
  for (const auto& t : ts)
    if (t.is_input)
      for (size_t i = 0; i < t.dims.size(); ++i)
        if (!t.reduced[i] && !out_dims.count(t.dims[i])) reduced_dims.insert(t.dims[i]);
  bool cross_core = false;
  for (const auto& d : reduced_dims)
    if (s.slices_of(d) > 1) cross_core = true;

  bool uses_pt = false;
  for (const auto& cop : s.compute_ops)
    if (cop.ex_unit == bundle::ExUnit::pt || cop.ex_unit == bundle::ExUnit::pe) uses_pt = true;
  // A batched matmul's batch dims (in both operands and the output, outside the stick): each batch
  // is a matmul of its own, so a tile of one batch wastes nothing on the array.
  std::set<std::string> pt_batch;
  for (const auto& po : pt_ops)
    if (po) pt_batch.insert(po->dims.batch.begin(), po->dims.batch.end());
  // Tile candidates: output dims, outermost (in the first output's layout) first.
  std::vector<DimTile> tiles;
  const Tensor* first_out = nullptr;
  for (const auto& t : ts)
    if (t.is_output) {
      first_out = &t;
      break;
    }
  std::vector<std::string> order;
  if (first_out)
    for (auto it = first_out->dims.rbegin(); it != first_out->dims.rend(); ++it)
      if (out_dims.count(*it)) order.push_back(*it);
  for (const auto& d : out_dims)
    if (std::find(order.begin(), order.end(), d) == order.end()) order.push_back(d);
  // Reduced dims tile too (a matmul's K, a reduction's row): the output block stays in LX and
  // accumulates over them, so they are always the innermost loops (see the loop order below).
  // Split across cores they are combined over the ring instead, so only a core-local extent tiles.
  for (const auto& d : reduced_dims)
    if (std::find(order.begin(), order.end(), d) == order.end()) order.push_back(d);
  for (const auto& d : order) {
    // A window's dim is not cut: a tile of outputs would need its inputs' overlapping windows.
    if (s.window_of(d)) continue;
    DimTile dt;
    dt.dim = d;
    for (const auto& t : ts)
      for (size_t i = 0; i < t.dims.size(); ++i)
        if (t.dims[i] == d && t.stick[i] && !t.reduced[i]) dt.gran = std::max(dt.gran, t.per[i]);
    // On the PT array a tile thinner than its rows (times the corelets sharing the work) wastes
    // the array; never cut a matmul's dimension finer than that.
    if (uses_pt && !pt_batch.count(d))
      dt.gran = std::max<uint64_t>(dt.gran, static_cast<uint64_t>(m_card.pt_rows) * m_card.corelets);
    dt.max_ext = max_ext_of(s, d);
    dt.tile = ceil_div(dt.max_ext, dt.gran) * dt.gran;
    if (dt.max_ext > dt.gran) tiles.push_back(dt);
  }
  auto tile_of = [&](const std::string& d) -> const DimTile* {
    for (const auto& dt : tiles)
      if (dt.dim == d) return &dt;
    return nullptr;
  };
  // Units of tensor t along layout dim i in its largest block with the current tiling, or in its
  // whole per-core share (`whole`: no tiling).
  auto block_units = [&](const Tensor& t, size_t i, bool whole) -> uint64_t {
    const DimTile* dt = t.reduced[i] ? nullptr : tile_of(t.dims[i]);
    const uint64_t ext = !dt ? t.max_ext[i] : whole ? dt->max_ext : std::min(dt->tile, dt->max_ext);
    return units(t, i, ext);
  };
  // Bytes of the largest block of tensor t with the current tiling (max extents), or of its whole
  // per-core share (`whole`: no tiling).
  auto share_bytes = [&](const Tensor& t, bool whole) -> uint64_t {
    uint64_t b = SB;
    for (size_t i = 0; i < t.dims.size(); ++i) b *= block_units(t, i, whole);
    return b;
  };
  auto block_bytes = [&](const Tensor& t) { return share_bytes(t, false); };
  auto streamed = [&](const Tensor& t) {
    if (!t.hbm) return false;
    for (size_t i = 0; i < t.dims.size(); ++i)
      if (!t.reduced[i] && tile_of(t.dims[i])) return true;
    return false;
  };
  // Where tensor t's allocation starts on `core` (0 when the bundle gives no address).
  auto alloc_addr = [&](const Tensor& t, uint32_t core) -> uint64_t {
    return t.alloc >= 0 && static_cast<size_t>(t.alloc) < r.addresses.size() && core < r.addresses[t.alloc].size()
               ? r.addresses[t.alloc][core]
               : 0;
  };
  uint64_t lx_resident = 0;
  {
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    const uint32_t c0 = s.core_ids.empty() ? 0 : s.core_ids.front();
    for (const auto& t : ts) {
      if (t.hbm || t.alloc < 0) continue;
      const uint64_t off = alloc_addr(t, c0);
      ranges.emplace_back(off, off + share_bytes(t, true));
    }
    std::sort(ranges.begin(), ranges.end());
    uint64_t end = 0;
    for (auto [lo, hi] : ranges) {
      lo = std::max(lo, end);
      if (hi > lo) lx_resident += hi - lo;
      end = std::max(end, hi);
    }
  }
  struct Need {
    uint64_t resident = 0, buffers = 0;
    uint64_t target = 0;  // the streamed bytes the tile target is about (see `tiny` below)
  };
  // A tensor whose whole per-core share is shorter than dma_run_bytes (a reduction's output row,
  // a broadcast row) is a handful of sticks however it is cut: it takes its LX, but it does not
  // count toward the tile target, or 128 B of it would push a tiling of 64 KiB of streamed input
  // over the target and into a different tiling (softmax's max with its output in device memory
  // against the same max with its output in LX).
  std::vector<char> tiny(ts.size());
  for (size_t k = 0; k < ts.size(); ++k) tiny[k] = ts[k].is_output && !ts[k].is_input && share_bytes(ts[k], true) < m_card.dma_run_bytes;
  auto need = [&]() {
    Need n;
    for (size_t k = 0; k < ts.size(); ++k) {
      const auto& t = ts[k];
      if (t.alloc < 0) continue;
      if (!t.hbm) {
        continue;  // LX-resident tensors: counted once below, by the LX ranges they occupy
      } else if (streamed(t)) {
        n.buffers += block_bytes(t);
        if (!tiny[k]) n.target += block_bytes(t);
      } else {
        n.resident += block_bytes(t);
      }
    }
    n.resident += lx_resident;
    return n;
  };
  // Loop order: the innermost tile loop is the dimension the largest operands do not depend on,
  // so that they stay in LX across it and are not read again.
  // The shortest contiguous run any streamed tensor's block has with the current tiling (as
  // make_block forms it: whole inner dims, then the first cut one).
  // A tensor whose whole share is shorter than dma_run_bytes has short runs however it is cut
  // (the broadcast row of a softmax's max, a bias): it does not count, or it would veto every
  // tiling that cuts its dims. (Independent of the tiling: decided once.)
  std::vector<char> short_share(ts.size());
  // So does a PT operand moved stick by stick (Tensor::pt_row).
  // So does a broadcast operand (an input reduced along a dim the output has: a row added to every
  // row) whose whole share is within the tile target: its bytes are a sliver of each tile's, so
  // its runs must not shorten the others' (`bcast` 2048x16384: cut for its 8 KiB row runs, the
  // 2 MiB operands moved in 4 KiB runs, not 8).
  auto broadcast = [&](const Tensor& t) {
    if (!t.is_input) return false;
    for (size_t i = 0; i < t.dims.size(); ++i)
      if (t.reduced[i] && out_dims.count(t.dims[i])) return true;
    return false;
  };
  for (size_t k = 0; k < ts.size(); ++k) {
    const uint64_t share = share_bytes(ts[k], true);
    short_share[k] = ts[k].pt_row >= 0 || !ts[k].move.empty() || share < m_card.dma_run_bytes ||
                     (broadcast(ts[k]) && share <= m_card.tile_target_bytes);
  }
  auto min_run = [&]() {
    uint64_t best = UINT64_MAX;
    for (size_t k = 0; k < ts.size(); ++k) {
      const auto& t = ts[k];
      if (t.alloc < 0 || !streamed(t) || short_share[k]) continue;
      best = std::min(best, leading_run(t, SB, [&](size_t i) { return block_units(t, i, false); }, nullptr, true));
    }
    return best;
  };
  {
    std::map<std::string, uint64_t> lacking;
    for (const auto& dt : tiles)
      for (const auto& t : ts)
        if (t.hbm && !t.has(dt.dim)) lacking[dt.dim] += block_bytes(t);
    std::stable_sort(tiles.begin(), tiles.end(),
                     [&](const DimTile& a, const DimTile& b) { return lacking[a.dim] < lacking[b.dim]; });
    std::stable_partition(tiles.begin(), tiles.end(),
                          [&](const DimTile& dt) { return !reduced_dims.count(dt.dim); });
  }
  const uint64_t usable = m_card.lx_usable;
  // Tiling. Preferred: cut one dimension only (no operand is ever re-read), halving it until the
  // streamed bytes per tile meet the tile target and the buffers fit LX twice. The first such
  // dimension (outermost in the output layout) with the fewest tiles wins. Otherwise cut several
  // dimensions, greedily the one with the most steps left, until the tile fits LX.
  auto reset = [&] {
    for (auto& dt : tiles) dt.tile = ceil_div(dt.max_ext, dt.gran) * dt.gran;
  };
  auto halve = [&](DimTile& dt) { dt.tile = ceil_div(ceil_div(dt.tile, 2), dt.gran) * dt.gran; };
  // A tile streams at most tile_max (twice that single-buffered): a larger LX holds more resident,
  // not larger tiles. On the default card LX itself is the tighter bound (CardParams::tile_max_bytes).
  const uint64_t cap = m_card.tile_max_bytes;
  auto fits = [&](const Need& n) { return n.resident + 2 * n.buffers <= usable && n.buffers <= cap; };
  int best_dim = -1;
  uint64_t best_tiles = UINT64_MAX;
  bool best_target = false;
  for (size_t j = 0; j < tiles.size(); ++j) {
    reset();
    for (;;) {
      const Need n = need();
      if (fits(n) && n.target <= m_card.tile_target_bytes) break;
      if (tiles[j].tile <= tiles[j].gran) break;
      halve(tiles[j]);
    }
    const Need n = need();
    if (!fits(n)) continue;
    const bool target = n.target <= m_card.tile_target_bytes;
    const uint64_t count = tiles[j].count();
    if (best_dim < 0 || (target && !best_target) || (target == best_target && count < best_tiles)) {
      best_dim = static_cast<int>(j);
      best_tiles = count;
      best_target = target;
    }
  }
  reset();
  if (best_dim >= 0) {
    for (;;) {
      const Need n = need();
      if ((fits(n) && n.target <= m_card.tile_target_bytes) || tiles[best_dim].tile <= tiles[best_dim].gran) break;
      halve(tiles[best_dim]);
    }
  }
  // A one-dimension cut whose runs are shorter than CardParams::dma_run_bytes (enough to give
  // every memory channel whole rows; a stick-tiled tensor cut across its stick columns: one
  // core's 4096x4096 add took 256 B runs, the broadcast add 4 KiB) is replaced by the
  // several-dimension tiling with the longest runs, if they are longer and it moves no more bytes.
  const bool short_runs = best_dim >= 0 && tiles.size() > 1 && min_run() < m_card.dma_run_bytes;
  std::vector<uint64_t> single_dim;
  for (const auto& dt : tiles) single_dim.push_back(dt.tile);
  if ((best_dim < 0 || short_runs) && !tiles.empty()) {
    // Several dimensions must be cut. Search the tile sizes (powers of two times the granule)
    // for the fastest tiling by the estimate below, then the least device-memory traffic that fits
    // LX double-buffered (or at least single):
    // with the loops in `tiles` order, a tensor is loaded again whenever a loop over one of its
    // own dimensions, or any loop outside that, moves on.
    // `out`, if given, gets the outputs' share (stores) of the bytes.
    auto traffic = [&](double* out = nullptr) {
      double bytes = 0;
      if (out) *out = 0;
      for (const auto& t : ts) {
        if (!t.hbm || t.alloc < 0) continue;
        double loads = 1;
        int inner = -1;
        for (size_t j = 0; j < tiles.size(); ++j)
          if (t.has(tiles[j].dim)) inner = static_cast<int>(j);
        for (int j = 0; j <= inner; ++j) loads *= static_cast<double>(tiles[static_cast<size_t>(j)].count());
        bytes += loads * static_cast<double>(block_bytes(t));
        if (out && t.is_output) *out += loads * static_cast<double>(block_bytes(t));
      }
      return bytes;
    };
    // A candidate's time, estimated as a backend planning it would (0 when the card gave no
    // rates): its reads and writes at what one core gets (its DMA engines' rate, or its share of
    // the device memory when every core of the SDSC streams at once), its compute at the PT's or
    // SFP's rate. Double buffered, loads, compute and stores overlap (past the first tile's load
    // and the last one's store); in one buffer each tile loads, computes and stores in turn.
    // Which tiling wins on a memory-bound kernel is then the one that reads its operands the
    // fewest times, not the one that overlaps (bmm [16,1024,2048] @ [16,2048,1024] under the
    // compiler's forced split, 32 cores: double buffered it read every operand twice).
    // Not when replacing a one-dimension cut for its short runs: those candidates all overlap.
    double compute_ps = 0;
    const bool estimate = !short_runs && m_card.core_dma_bytes_per_ps > 0 && m_card.memory_bytes_per_ps > 0 &&
                          (uses_pt ? m_card.pt_macs_per_ps > 0 : m_card.sfp_elements_per_ps > 0);
    if (estimate) {
      double points = 1;  // the op's iteration space on one core: a matmul's MACs, an SFP op's elements
      for (const auto& d : order) points *= static_cast<double>(std::max<uint64_t>(max_ext_of(s, d), 1));
      if (uses_pt) {
        compute_ps = points / m_card.pt_macs_per_ps;
      } else {
        for (const auto& cop : s.compute_ops)
          compute_ps += points * sfp_cycles_per_element(m_card.sfp, cop.op_func_name) / m_card.sfp_elements_per_ps;
      }
    }
    const double active = static_cast<double>(std::max<size_t>(s.core_ids.size(), 1));
    const double share = m_card.memory_bytes_per_ps / active;  // one core's share of the memory
    auto estimated_ps = [&](double in_bytes, double out_bytes, bool overlapped, uint64_t count) {
      if (!estimate) return 0.0;
      const bool device_bound = share < m_card.core_dma_bytes_per_ps;
      const double rate = std::min(share, m_card.core_dma_bytes_per_ps);
      const double t_in = in_bytes / rate, t_out = out_bytes / rate;
      if (!overlapped) return t_in + compute_ps + t_out;
      // Loads and stores have an engine each; on a device-bound card they share the memory.
      const double memory = device_bound ? t_in + t_out : std::max(t_in, t_out);
      const double per_tile = (t_in + compute_ps + t_out) / static_cast<double>(std::max<uint64_t>(count, 1));
      return std::max(memory, compute_ps) + per_tile;
    };
    std::vector<std::vector<uint64_t>> options;
    for (const auto& dt : tiles) {
      std::vector<uint64_t> o;
      for (uint64_t v = dt.gran; v < dt.max_ext; v *= 2) o.push_back(v);
      o.push_back(ceil_div(dt.max_ext, dt.gran) * dt.gran);
      options.push_back(o);
    }
    // What the one-dimension cut moves: a tiling replacing it for its runs may not move more.
    const double single_cost = short_runs ? traffic() : 0.0;
    const uint64_t single_run = short_runs ? std::min(min_run(), m_card.tile_target_bytes) : 0;
    std::vector<uint64_t> best(tiles.size(), 0), cur(tiles.size(), 0);
    double best_cost = -1, best_est = 0;
    uint64_t best_count = 0;
    bool best_dbl = false;
    uint64_t best_run = 0;
    std::vector<size_t> pick(tiles.size(), 0);
    for (;;) {
      for (size_t j = 0; j < tiles.size(); ++j) tiles[j].tile = options[j][pick[j]];
      const Need nn = need();
      const bool single = nn.resident + nn.buffers <= usable && nn.buffers <= 2 * cap;
      uint64_t count = 1;
      for (const auto& dt : tiles) count *= dt.count();
      const bool dbl2 = fits(nn) && count > 1;  // one tile overlaps nothing, whatever LX holds
      // Replacing a one-dimension cut: only tilings as good as it on LX (double buffered) and on
      // traffic count.
      const bool candidate = single && (!short_runs || dbl2);
      double out_cost = 0;
      const double cost = candidate ? traffic(&out_cost) : 0.0;
      if (candidate && (!short_runs || cost <= 1.01 * single_cost)) {
        // Runs count up to the tile target: past it a longer run saves nothing more.
        const uint64_t run = std::min(min_run(), m_card.tile_target_bytes);
        // Double buffering first; then, when replacing a one-dimension cut for its short runs, the
        // longest runs (each run is its own DMA requests and opens its own rows); then the least
        // traffic (within 1 %); then the fewest tiles, since every tile pays its own fill and
        // drain on the PT array and its DMA setup.
        const bool same_cost = best_cost >= 0 && std::abs(cost - best_cost) <= 0.01 * best_cost;
        const bool better_runs = short_runs && run > best_run;
        const bool same_runs = !short_runs || run == best_run;
        // Before all that (when there is an estimate): an estimated time more than 2 % shorter
        // wins, and one more than 2 % longer loses.
        const double est = estimated_ps(cost - out_cost, out_cost, dbl2, count);
        const bool est_better = best_cost >= 0 && est < 0.98 * best_est;
        const bool est_worse = best_cost >= 0 && est > 1.02 * best_est;
        if (best_cost < 0 || est_better ||
            (!est_worse && ((dbl2 && !best_dbl) || (dbl2 == best_dbl && better_runs) ||
                            (dbl2 == best_dbl && same_runs &&
                             ((!same_cost && cost < best_cost) || (same_cost && count < best_count)))))) {
          best_est = est;
          best_cost = cost;
          best_count = count;
          best_dbl = dbl2;
          best_run = run;
          for (size_t j = 0; j < tiles.size(); ++j) best[j] = tiles[j].tile;
        }
      }
      size_t j = 0;
      while (j < tiles.size() && ++pick[j] == options[j].size()) pick[j++] = 0;
      if (j == tiles.size()) break;
    }
    if (short_runs && !(best_cost >= 0 && best_run > single_run)) {
      for (size_t j = 0; j < tiles.size(); ++j) tiles[j].tile = single_dim[j];  // nothing better: keep it
    } else if (best_cost >= 0) {
      for (size_t j = 0; j < tiles.size(); ++j) tiles[j].tile = best[j];
    } else {
      for (auto& dt : tiles) dt.tile = dt.gran;  // nothing fits: the error below names the sizes
    }
  }
  const Need n = need();
  bool dbl = n.resident + 2 * n.buffers <= usable;
  if (!dbl && n.resident + n.buffers > usable) {
    std::string sizes;
    for (const auto& t : ts)
      if (t.alloc >= 0) sizes += std::string(sizes.empty() ? "" : ", ") + t.name + " " + std::to_string(block_bytes(t)) + " B";
    throw LowerError(sdsc_label(s) + ": core " + std::to_string(s.core_ids.empty() ? 0 : s.core_ids.front()) +
                     ": one tile (a single stick row) needs " + std::to_string(n.resident + n.buffers) +
                     " B of LX (" + sizes + ") but only " + std::to_string(usable) + " B are usable");
  }
  const uint32_t nbuf = dbl ? 2 : 1;

  Stage* st = m_plan.add_stages();
  st->set_name(sdsc_label(s));
  st->set_sdsc(s.file);
  st->set_execution(exec_index);
  uint64_t tile_count = 1;
  for (const auto& dt : tiles) tile_count *= dt.count();
  st->set_double_buffered(dbl && n.buffers > 0 && tile_count > 1);
  st->set_lx_peak_bytes(n.resident + nbuf * n.buffers);
  st->set_tiles(static_cast<uint32_t>(tile_count));

  // What the tile loop below needs, worked out once per SDSC (the loop runs per core and per tile,
  // 7168 times for a large matmul): which tile loop cuts each dim of each tensor, which tensors
  // each compute op reads and writes, how a PT op's dims map to m, k and n. Per tile it then only
  // does integer arithmetic; the plan it writes is the one the straightforward per-tile map and
  // vector building gave.
  const size_t nt = tiles.size();
  auto in_n = [&](const std::string& d) {
    for (const auto& [nd, v] : s.n)
      if (nd == d) return true;
    return false;
  };
  std::vector<std::vector<int>> cut(ts.size());         // tensor, layout dim -> tile loop, or -1
  std::vector<std::vector<char>> has_tile(ts.size());   // tensor, tile loop -> Tensor::has(its dim)
  std::vector<size_t> slot(ts.size());                  // tensors with one index share a load state
  std::vector<std::string> in_name(ts.size()), out_name(ts.size());
  for (size_t k = 0; k < ts.size(); ++k) {
    const Tensor& t = ts[k];
    cut[k].assign(t.dims.size(), -1);
    for (size_t i = 0; i < t.dims.size(); ++i) {
      if (t.reduced[i]) continue;
      if (!in_n(t.dims[i]))
        throw LowerError(sdsc_label(s) + ": tensor " + t.name + ": layout dimension '" + t.dims[i] + "' is not in N_");
      for (size_t j = 0; j < nt; ++j)
        if (tiles[j].dim == t.dims[i]) cut[k][i] = static_cast<int>(j);
    }
    for (size_t j = 0; j < nt; ++j) has_tile[k].push_back(t.has(tiles[j].dim) ? 1 : 0);
    slot[k] = k;
    for (size_t m = 0; m < k; ++m)
      if (ts[m].idx == t.idx) {
        slot[k] = m;
        break;
      }
    in_name[k] = t.name + " in";
    out_name[k] = t.name + " out";
  }
  // Tile loop cutting each dim of N_ (in N_ order), or -1.
  std::vector<int> n_cut(s.n.size(), -1);
  for (size_t q = 0; q < s.n.size(); ++q)
    for (size_t j = 0; j < nt; ++j)
      if (tiles[j].dim == s.n[q].first) n_cut[q] = static_cast<int>(j);
  struct CopPlan {
    std::vector<int> ins, outs;  // tensors found for the op's inputs and outputs
    bool pt = false;
    std::vector<char> role;      // PT, per N_ dim: 0 none, 1 k, 2 m (or batch), 3 n
    uint32_t bits = 16;
    double cpe = 0;
    uint32_t a_stride = 1, b_stride = 1;  // PT: where its operands' sticks lie in LX (feed_stride)
  };
  std::vector<CopPlan> cops;
  for (size_t ci = 0; ci < s.compute_ops.size(); ++ci) {
    const auto& cop = s.compute_ops[ci];
    CopPlan cp;
    for (uint32_t i : cop.inputs)
      if (int k = find_tensor(ts, i); k >= 0) cp.ins.push_back(k);
    for (uint32_t i : cop.outputs)
      if (int k = find_tensor(ts, i); k >= 0) cp.outs.push_back(k);
    cp.pt = pt_ops[ci].has_value();
    if (cp.pt) {
      const int a = pt_ops[ci]->a, b = pt_ops[ci]->b, c = pt_ops[ci]->c;
      for (const auto& [d, v] : s.n) {
        const bool ia = a >= 0 && ts[a].has(d), ib = b >= 0 && ts[b].has(d), ic = c >= 0 && ts[c].has(d);
        char r = 0;
        if (ia && ib && !ic) r = 1;
        else if (ia && !ib && ic) r = 2;
        else if (!ia && ib && ic) r = 3;
        else if (ia && ib && ic) r = 2;  // batch
        cp.role.push_back(r);
      }
      const uint32_t bits = bundle::data_format_bits(cop.data_format);
      cp.bits = bits ? bits : 16;
      if (pt_ops[ci]->whole()) {
        const PtDims& pd = pt_ops[ci]->dims;
        cp.a_stride = feed_stride(ts[a], pd.m);
        cp.b_stride = feed_stride(ts[b], pd.k);
      }
    } else {
      double cpe = sfp_cycles_per_element(m_card.sfp, cop.op_func_name);
      // Reduced across the stick (a row max/sum over the stick dim): the lanes hold one row's
      // elements, so the reduction runs across them.
      bool across = false;
      for (int k : cp.outs)
        for (size_t d = 0; d < ts[k].dims.size(); ++d)
          if (ts[k].reduced[d] && ts[k].stick[d]) across = true;
      if (across && m_card.sfp.reduce_across_stick > 0) cpe = m_card.sfp.reduce_across_stick;
      cp.cpe = cpe;
    }
    cops.push_back(std::move(cp));
  }

  std::map<uint32_t, uint64_t> partial_bytes, partial_elems;  // for cross-core combines
  std::vector<uint64_t> off_scratch, cnt_scratch;
  Block block_scratch;
  for (uint32_t core : s.core_ids) {
    CoreProgram* prog = st->add_cores();
    prog->set_core(core);
    auto add = [&](Op::Kind k, const std::string& name, uint32_t tile) {
      Op* o = prog->add_ops();
      o->set_kind(k);
      o->set_name(name);
      o->set_tile(tile);
      return std::pair<Op*, uint32_t>{o, static_cast<uint32_t>(prog->ops_size() - 1)};
    };
    std::map<std::string, uint64_t> core_ext;
    for (const auto& [d, v] : s.n) core_ext[d] = ext_of(s, core, d);
    // Tile index space, row-major over `tiles` (outermost first).
    std::vector<uint64_t> counts;
    for (const auto& dt : tiles) counts.push_back(ceil_div(core_ext[dt.dim], dt.tile));
    uint64_t total = 1;
    for (auto c : counts) total *= c;
    // This core's extent of each layout dim of each tensor, of each N_ dim, of each tile loop's dim.
    std::vector<std::vector<uint64_t>> dim_ext(ts.size());
    for (size_t k = 0; k < ts.size(); ++k)
      for (size_t i = 0; i < ts[k].dims.size(); ++i) {
        uint64_t e = ts[k].reduced[i] ? 0 : core_ext[ts[k].dims[i]];
        if (const bundle::Window* w = ts[k].win[i])  // a window's input: what this core's outputs read
          e = static_cast<uint64_t>(
              std::min<int64_t>(w->total, w->span(static_cast<int64_t>(e), s.n_of(w->window_dim))));
        dim_ext[k].push_back(e);
      }
    std::vector<uint64_t> n_ext;
    for (const auto& [d, v] : s.n) n_ext.push_back(core_ext[d]);
    std::vector<uint64_t> tile_dim_ext;
    for (const auto& dt : tiles) tile_dim_ext.push_back(core_ext[dt.dim]);

    std::vector<std::vector<uint64_t>> last_proj(ts.size());  // slot -> tile coords it last loaded
    std::vector<char> loaded(ts.size(), 0);
    std::vector<int64_t> last_load(ts.size(), 0);              // slot -> op index of its latest load
    std::vector<int64_t> compute_end(total, -1);
    // Per output tensor, its stores in order: the j-th stores the j-th block the tiles computed.
    std::vector<std::vector<uint32_t>> stores(ts.size());
    std::vector<size_t> waited(ts.size(), SIZE_MAX);  // per output: the block whose buffer was waited for
    std::vector<uint64_t> coord(nt, 0), next(nt, 0), tile_off(nt, 0), tile_ext(nt, 0);
    // Per tile loop: the offset and extent of the current tile (as the per-tile extent map had them).
    auto set_tile = [&](const std::vector<uint64_t>& c) {
      for (size_t j = 0; j < nt; ++j) {
        tile_off[j] = c[j] * tiles[j].tile;
        tile_ext[j] = std::min(tiles[j].tile, tile_dim_ext[j] - tile_off[j]);
      }
    };
    // Counts per layout dim of tensor k's block for the current tile (in cnt_scratch; offsets in
    // off_scratch).
    auto block_counts = [&](size_t k) {
      const Tensor& t = ts[k];
      off_scratch.assign(t.dims.size(), 0);
      cnt_scratch.assign(t.dims.size(), 1);
      for (size_t i = 0; i < t.dims.size(); ++i) {
        if (t.reduced[i]) continue;
        uint64_t o = 0, e = dim_ext[k][i];
        if (const int j = cut[k][i]; j >= 0) {
          o = tile_off[static_cast<size_t>(j)];
          e = tile_ext[static_cast<size_t>(j)];
        }
        off_scratch[i] = o / t.per[i];
        cnt_scratch[i] = units(t, i, e);
      }
    };
    auto block_at = [&](size_t k) -> const Block& {
      block_counts(k);
      const Tensor& t = ts[k];
      make_block(t, alloc_addr(t, core), off_scratch, cnt_scratch, SB, block_scratch);
      return block_scratch;
    };
    // make_block's byte count, without building the block.
    auto block_size = [&](size_t k) {
      block_counts(k);
      return block_byte_count(ts[k], cnt_scratch, SB);
    };
    // The extent of a tensor dim or N_ dim in the current tile.
    auto cur_ext = [&](int j, uint64_t whole) { return j >= 0 ? tile_ext[static_cast<size_t>(j)] : whole; };
    auto elems_at = [&](size_t k) {
      uint64_t e = 1;
      for (size_t i = 0; i < ts[k].dims.size(); ++i)
        if (!ts[k].reduced[i]) e *= cur_ext(cut[k][i], dim_ext[k][i]);
      return e;
    };
    std::vector<uint32_t> in_deps;
    for (uint64_t ti = 0; ti < total; ++ti) {
      // Coordinates of tile ti.
      uint64_t rem = ti;
      for (size_t j = nt; j-- > 0;) {
        coord[j] = rem % counts[j];
        rem /= counts[j];
      }
      set_tile(coord);
      const uint32_t tile = static_cast<uint32_t>(ti);
      // DMA in: HBM inputs whose block changed.
      in_deps.clear();
      for (size_t k = 0; k < ts.size(); ++k) {
        const Tensor& t = ts[k];
        if (!t.is_input || !t.hbm) continue;
        const size_t sl = slot[k];
        std::vector<uint64_t>& lp = last_proj[sl];
        bool same = loaded[sl] != 0;
        for (size_t j = 0; same && j < nt; ++j) same = lp[j] == (has_tile[k][j] ? coord[j] : UINT64_MAX);
        if (!same) {
          auto [o, idx] = add(Op::DMA_IN, in_name[k], tile);
          set_transfer(o, gathered_block(block_at(k), t.gather_row), t.idx, t.lone_sticks);
          // A gather's rows leave once its index is in LX (this tile's, or the last one loaded).
          if (const bundle::IndirectAccess* ia = t.gather_row ? s.indirect_of(t.idx) : nullptr)
            for (size_t q = 0; q < ts.size(); ++q)
              if (ts[q].idx == ia->index_lds && loaded[slot[q]]) o->add_deps(static_cast<uint32_t>(last_load[slot[q]]));
          // Its buffer is free once the compute that used it nbuf tiles ago is done.
          if (loaded[sl] && ti >= nbuf && compute_end[ti - nbuf] >= 0)
            o->add_deps(static_cast<uint32_t>(compute_end[ti - nbuf]));
          lp.resize(nt);
          for (size_t j = 0; j < nt; ++j) lp[j] = has_tile[k][j] ? coord[j] : UINT64_MAX;
          loaded[sl] = 1;
          last_load[sl] = idx;
        }
        in_deps.push_back(static_cast<uint32_t>(last_load[sl]));
      }
      // Compute, chained in computeOp_ order.
      int64_t prev = -1;
      for (size_t ci = 0; ci < cops.size(); ++ci) {
        const auto& cop = s.compute_ops[ci];
        const CopPlan& cp = cops[ci];
        uint64_t lx = 0;
        for (int k : cp.ins) lx += block_size(static_cast<size_t>(k));
        for (int k : cp.outs) lx += block_size(static_cast<size_t>(k));
        std::pair<Op*, uint32_t> o;
        if (cp.pt) {
          uint64_t m = 1, k = 1, nn = 1;
          for (size_t q = 0; q < s.n.size(); ++q) {
            const uint64_t e = cur_ext(n_cut[q], n_ext[q]);
            if (cp.role[q] == 1) k *= e;
            else if (cp.role[q] == 2) m *= e;
            else if (cp.role[q] == 3) nn *= e;
          }
          o = add(Op::PT, cop.op_func_name, tile);
          o.first->set_m(m);
          o.first->set_k(k);
          o.first->set_n(nn);
          o.first->set_bits(cp.bits);
          o.first->set_a_stride(cp.a_stride);
          o.first->set_b_stride(cp.b_stride);
        } else {
          uint64_t e = 1;
          for (int k : cp.ins) e = std::max(e, elems_at(static_cast<size_t>(k)));
          for (int k : cp.outs) e = std::max(e, elems_at(static_cast<size_t>(k)));
          o = add(Op::SFP, cop.op_func_name, tile);
          o.first->set_elements(e);
          o.first->set_cycles_per_element(cp.cpe);
        }
        o.first->set_lx_bytes(lx);
        for (uint32_t d : in_deps) o.first->add_deps(d);
        if (prev >= 0) o.first->add_deps(static_cast<uint32_t>(prev));
        // An output block's buffer is free once the store of the block nbuf blocks before it is
        // done. A block spans every tile that accumulates into it (a matmul's k steps), and the
        // block being computed is the one after the last stored: the first compute op of its first
        // tile waits (the rest follow it in program order).
        for (size_t k = 0; k < ts.size(); ++k)
          if (const auto& sk = stores[k]; sk.size() >= nbuf && waited[k] != sk.size()) {
            o.first->add_deps(sk[sk.size() - nbuf]);
            waited[k] = sk.size();
          }
        prev = o.second;
      }
      compute_end[ti] = prev;
      // DMA out: HBM outputs whose block is complete (the next tile moves to another block).
      if (!cross_core) {
        const bool last = ti + 1 == total;
        next = coord;
        if (!last) {
          uint64_t rem2 = ti + 1;
          for (size_t j = nt; j-- > 0;) {
            next[j] = rem2 % counts[j];
            rem2 /= counts[j];
          }
        }
        for (size_t k = 0; k < ts.size(); ++k) {
          const Tensor& t = ts[k];
          if (!t.is_output || !t.hbm) continue;
          if (!last) {
            bool same = true;
            for (size_t j = 0; same && j < nt; ++j) same = !has_tile[k][j] || next[j] == coord[j];
            if (same) continue;
          }
          auto [o, idx] = add(Op::DMA_OUT, out_name[k], tile);
          set_transfer(o, gathered_block(block_at(k), t.gather_row), t.idx, t.lone_sticks);
          if (prev >= 0) o->add_deps(static_cast<uint32_t>(prev));
          stores[k].push_back(idx);
        }
      }
    }
    if (cross_core) {
      uint64_t b = 0, e = 0;
      std::fill(coord.begin(), coord.end(), 0);
      set_tile(coord);
      for (size_t k = 0; k < ts.size(); ++k)
        if (ts[k].is_output) {
          // Its whole per-core extent (not the first tile's): the partial sums of every tile.
          uint64_t el = 1;
          std::vector<uint64_t> whole(ts[k].dims.size(), 1);
          for (size_t i = 0; i < ts[k].dims.size(); ++i)
            if (!ts[k].reduced[i]) {
              el *= dim_ext[k][i];
              whole[i] = units(ts[k], i, dim_ext[k][i]);
            }
          b += block_byte_count(ts[k], whole, SB);
          e = std::max(e, el);
        }
      partial_bytes[core] = b;
      partial_elems[core] = e;
    }
  }

  if (!cross_core) return;
  // Cross-core combine: cores sharing every non-reduced slice form a group; a binary tree over
  // the reduce-sum ring (card.ring.reduce_bandwidth), one stage per step; the group's first core
  // stores the result.
  std::map<std::vector<uint32_t>, std::vector<std::pair<std::vector<uint32_t>, uint32_t>>> groups;
  for (uint32_t core : s.core_ids) {
    std::vector<uint32_t> key, rank;
    for (const auto& [d, v] : s.n) {
      uint32_t k = 0;
      if (auto it = s.core_slice.find(core); it != s.core_slice.end())
        if (auto jt = it->second.find(d); jt != it->second.end()) k = jt->second;
      (reduced_dims.count(d) ? rank : key).push_back(k);
    }
    groups[key].emplace_back(rank, core);
  }
  size_t max_group = 1;
  for (auto& [k, g] : groups) {
    std::sort(g.begin(), g.end());
    max_group = std::max(max_group, g.size());
  }
  std::vector<Stage*> steps;
  for (size_t stride = 1; stride < max_group; stride *= 2) steps.push_back(nullptr);
  const size_t nsteps = steps.size();
  // Stage k (0..nsteps): combines of step k-1's receivers, then step k's sends; the last stores.
  std::map<std::pair<size_t, uint32_t>, CoreProgram*> progs;
  std::vector<Stage*> stages;
  for (size_t k = 0; k <= nsteps; ++k) {
    Stage* cs = m_plan.add_stages();
    cs->set_name(sdsc_label(s) + " combine " + std::to_string(k + 1));
    cs->set_sdsc(s.file);
    cs->set_execution(exec_index);
    stages.push_back(cs);
  }
  auto prog_of = [&](size_t k, uint32_t core) {
    auto& p = progs[{k, core}];
    if (!p) {
      p = stages[k]->add_cores();
      p->set_core(core);
    }
    return p;
  };
  for (auto& [key, g] : groups) {
    for (size_t k = 0; k <= nsteps; ++k) {
      const size_t stride = size_t{1} << k;
      for (size_t rnk = 0; rnk < g.size(); ++rnk) {
        const uint32_t core = g[rnk].second;
        int64_t combine = -1;
        // Received in step k-1 (stride/2): combine now.
        if (k > 0 && rnk % stride == 0 && rnk + stride / 2 < g.size()) {
          CoreProgram* p = prog_of(k, core);
          Op* o = p->add_ops();
          o->set_kind(Op::COMBINE);
          o->set_name("combine");
          o->set_elements(partial_elems[core]);
          o->set_cycles_per_element(m_card.sfp.simple);
          o->set_lx_bytes(3 * partial_bytes[core]);
          combine = p->ops_size() - 1;
        }
        if (k < nsteps && rnk % (2 * stride) == stride) {
          CoreProgram* p = prog_of(k, core);
          Op* o = p->add_ops();
          o->set_kind(Op::RING_SEND);
          o->set_name("partial");
          o->set_reduce_ring(true);
          o->set_dst_core(g[rnk - stride].second);
          o->set_bytes(partial_bytes[core]);
          if (combine >= 0) o->add_deps(static_cast<uint32_t>(combine));
        }
        if (k == nsteps && rnk == 0) {
          for (const auto& t : ts) {
            if (!t.is_output || !t.hbm) continue;
            CoreProgram* p = prog_of(k, core);
            Op* o = p->add_ops();
            o->set_kind(Op::DMA_OUT);
            o->set_name(t.name + " out");
            std::vector<uint64_t> off(t.dims.size(), 0), cnt(t.dims.size(), 1);
            for (size_t i = 0; i < t.dims.size(); ++i) cnt[i] = units(t, i, ext_of(s, core, t.dims[i]));
            Block b;
            make_block(t, alloc_addr(t, core), off, cnt, SB, b);
            set_transfer(o, gathered_block(b, t.gather_row), t.idx, t.lone_sticks);
            if (combine >= 0) o->add_deps(static_cast<uint32_t>(combine));
          }
        }
      }
    }
  }
}

}  // namespace

Plan lower(const bundle::LoadedBundle& lb, const std::vector<bundle::ResolvedExecution>& resolved,
           const CardParams& card) {
  Plan plan;
  lower(lb, resolved, card, plan);
  return plan;
}

void lower(const bundle::LoadedBundle& lb, const std::vector<bundle::ResolvedExecution>& resolved,
           const CardParams& card, Plan& plan) {
  plan.Clear();
  plan.set_bundle(lb.dir.string());
  plan.set_card_cores(card.cores);
  LoweringInfo* info = plan.mutable_info();
  info->set_lx_usable_bytes(card.lx_usable);
  info->set_tile_target_bytes(card.tile_target_bytes);
  info->set_tile_max_bytes(card.tile_max_bytes);
  info->set_launch_overhead_ps(card.launch_overhead_ps);
  Stage* launch = plan.add_stages();
  launch->set_name("launch");
  CoreProgram* p = launch->add_cores();
  p->set_core(0);
  Op* o = p->add_ops();
  o->set_kind(Op::LAUNCH);
  o->set_name("launch");
  o->set_fixed_ps(card.launch_overhead_ps);
  Lowerer l(card, plan);
  uint64_t i = 0;
  for (const auto& r : resolved) {
    if (!r.sdsc) continue;
    for (uint32_t c : r.sdsc->core_ids)
      if (c >= card.cores)
        throw LowerError(r.sdsc->file + ": core " + std::to_string(c) + " does not exist on a card of " +
                         std::to_string(card.cores) + " cores");
    l.sdsc(*r.sdsc, r, i++);
  }
}

std::string to_text(const Plan& p) {
  std::string out;
  google::protobuf::TextFormat::PrintToString(p, &out);
  return out;
}

Plan from_text(const std::string& text) {
  Plan p;
  if (!google::protobuf::TextFormat::ParseFromString(text, &p)) throw LowerError("plan: not a valid text-format Plan");
  return p;
}

}  // namespace vspyre::plan
