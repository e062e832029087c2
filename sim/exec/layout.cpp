// SDSC tensor -> logical shape, stick layout and per-core slices (formats.md B.2, B.5, B.6).
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "sim/exec/layout.h"

namespace vspyre::exec::detail {

std::vector<int64_t> broadcast_steps(const fmt::StickLayout& layout, const std::vector<int64_t>& size,
                                     const std::vector<int64_t>& operand) {
  std::vector<int64_t> st = fmt::contiguous_strides(operand);
  for (size_t d = 0; d < st.size(); ++d)
    if (operand[d] == 1) st[d] = 0;
  std::vector<int64_t> step = fmt::stride_map(layout, size, st);
  for (auto& x : step) x = std::max<int64_t>(x, 0);  // -1: a dim of one unit
  return step;
}

namespace {

const std::set<std::string_view>& reductions() {
  // Never destroyed: a kernel still running on a shim stream worker while the process exits
  // must not find it freed (function-local statics made after the shim's exit handler was
  // registered are destroyed before that handler has stopped the workers).
  static const auto& s = *new const std::set<std::string_view>{
      "sum", "max", "min", "mean", "absmax", "exx2", "exx2_zeromean", "sumnonstick",
      "maxnonstick", "minnonstick", "meannonstick", "absmaxnonstick", "prodnonstick", "quantscalepertoken",
      "quantscalepertokenfp8", "topkvalue", "topkindex",
      "depthwiseconv2dnative"};  // the compiler lists its output as an input too (an accumulator)
  return s;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string stick_size_str(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

bool exx2_role(const bundle::Sdsc& s, uint32_t lds) {
  for (const auto& op : s.compute_ops) {
    const std::string& n = op.op_func_name;
    if ((n == "exx2" || n == "exx2_zeromean") && !op.outputs.empty() && op.outputs[0] == lds) return true;
    const int k = exx2_stats_input(n);
    if (k >= 0 && op.inputs.size() > size_t(k) && op.inputs[size_t(k)] == lds) return true;
  }
  return false;
}

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Per-allocation ownership (coordinates_.coreIdToWkSlice_, the SHUFFLE states): core -> dim -> k.
std::map<uint32_t, std::map<std::string, int64_t>> own_slices(const bundle::Sdsc& s,
                                                             const bundle::Allocation& a) {
  std::map<uint32_t, std::map<std::string, int64_t>> out;
  try {
    const auto& dsc = s.raw.begin().value().at("dscs_").at(0).begin().value();
    const auto& node = dsc.at("scheduleTree_").at(a.node_index);
    if (!node.contains("coordinates_")) return out;
    const auto& c = node.at("coordinates_");
    if (!c.is_object() || !c.contains("coreIdToWkSlice_")) return out;
    const auto& m = c.at("coreIdToWkSlice_");
    if (!m.is_object()) return out;
    for (auto it = m.begin(); it != m.end(); ++it) {
      const uint32_t core = uint32_t(std::stoul(it.key()));
      for (auto jt = it.value().begin(); jt != it.value().end(); ++jt)
        out[core][jt.key()] = jt.value().get<int64_t>();
    }
  } catch (const std::exception& e) {
    throw ExecError(s.file + ": " + a.json_path + "/coordinates_/coreIdToWkSlice_: " +
                    "expected {\"<core>\": {\"<dim>\": slice}} (" + e.what() + ")");
  }
  return out;
}

// Host (logical) axis order of every labeled tensor of an SDSC.
std::vector<std::string> host_dims(const bundle::Sdsc& s, uint32_t lds,
                                   const std::vector<std::string>& layout_of_lds) {
  std::vector<std::string> n_order;
  for (const auto& [d, _] : s.n) n_order.push_back(d);
  const bundle::ComputeOp* mm = nullptr;
  for (const auto& op : s.compute_ops)
    if (is_matmul(op.op_func_name)) mm = &op;
  if (!mm || mm->inputs.size() < 2 || mm->outputs.empty()) return n_order;
  const uint32_t ia = mm->inputs[0], ib = mm->inputs[1], io = mm->outputs[0];
  if (lds != ia && lds != ib && lds != io) return n_order;
  auto dims_of = [&](uint32_t i) -> std::vector<std::string> {
    const auto* a = s.allocation(i, bundle::Placement::hbm);
    if (!a) a = s.allocation(i, bundle::Placement::lx);
    return a ? a->layout_dim_order : std::vector<std::string>{};
  };
  const auto A = dims_of(ia), B = dims_of(ib), O = dims_of(io);
  std::vector<std::string> K, N, M, batch;
  for (const auto& d : n_order) {
    const bool a = has(A, d), b = has(B, d), o = has(O, d);
    if (a && b && !o) K.push_back(d);
    else if (!a && b && o) N.push_back(d);
    else if (a && !b && o) M.push_back(d);
    else if (o) batch.push_back(d);
  }
  if (K.size() != 1 || N.size() != 1)
    throw ExecError(s.file + ": computeOp_ '" + mm->op_func_name +
                    "': cannot tell the matmul dims apart from the layouts (need one reduction "
                    "dim in both inputs only and one generated dim in the kernel and output)");
  // A vector times a matrix (torch.mm of a 1-D input: layouts [in], [in, out], [out]) has no
  // preserved dim: M is 1, on an axis of size 1 that no layout holds ("mb" unless N_ has it).
  std::string m = M.empty() ? (has(n_order, "mb") ? "_m" : "mb") : has(M, "mb") ? "mb" : M.back();
  for (const auto& d : M)
    if (d != m) batch.push_back(d);
  // keep batch in N_ order
  std::vector<std::string> b_sorted;
  for (const auto& d : n_order)
    if (has(batch, d)) b_sorted.push_back(d);
  std::vector<std::string> out = b_sorted;
  if (lds == ia) { out.push_back(m); out.push_back(K[0]); }
  else if (lds == ib) { out.push_back(K[0]); out.push_back(N[0]); }
  else { out.push_back(m); out.push_back(N[0]); }
  for (const auto& d : layout_of_lds)
    if (!has(out, d))
      throw ExecError(s.file + ": labeledDs_ " + std::to_string(lds) + ": dim '" + d +
                      "' has no role in the matmul");
  return out;
}

}  // namespace

uint64_t value_rows(const std::vector<bundle::ResolvedExecution>& plan, size_t pos, const bundle::IndirectAccess& ia) {
  const MappedTensor value = map_tensor(plan[pos], ia.value_lds);
  const uint64_t row = indirect_row_bytes(ia, value);
  uint64_t bytes = 0;
  for (size_t q = 0; q < pos; ++q) {
    const bundle::Sdsc& s = *plan[q].sdsc;
    for (const auto& ds : s.labeled_ds) {
      if (s.indirect_of(ds.idx) || !s.allocation(ds.idx, bundle::Placement::hbm)) continue;
      const TensorInfo t = map_tensor(plan[q], ds.idx).info;
      if (t.base == value.info.base) bytes = std::max(bytes, t.image_bytes);
    }
  }
  return row ? bytes / row : 0;
}

uint64_t indirect_row_bytes(const bundle::IndirectAccess& ia, const MappedTensor& value) {
  const auto pos = std::find(value.layout.begin(), value.layout.end(), ia.dims.front()) - value.layout.begin();
  if (size_t(pos) >= value.layout.size())
    throw ExecError(value.info.sdsc_file + ": " + value.info.name + ": indirect dim '" + ia.dims.front() +
                    "' is not in its layout");
  return uint64_t(value.full_stride[size_t(pos)]);
}

std::vector<int64_t> indirect_index_positions(const bundle::IndirectAccess& ia, const MappedTensor& value,
                                              const TensorInfo& index_info) {
  // The indirect dims in the value layout (innermost first) and their extents in the view.
  std::vector<int64_t> units;
  for (const auto& d : ia.dims) {
    const auto pos = size_t(std::find(value.layout.begin(), value.layout.end(), d) - value.layout.begin());
    units.push_back(value.full_units.at(pos));
  }
  // The index tensor's host strides by dim name (contiguous, outermost first).
  std::map<std::string, int64_t> host_stride;
  int64_t stride = 1;
  for (size_t k = index_info.dims.size(); k-- > 0;) {
    host_stride[index_info.dims[k]] = stride;
    stride *= index_info.size[k];
  }
  int64_t rows = 1;
  for (int64_t u : units) rows *= u;
  // The last position the view reaches must lie in the index tensor (a bundle whose index view and
  // value view disagree, as a scale_ of -1 on one of the index's dims makes them, would read past it).
  int64_t last = 0;
  for (size_t k = 0; k < ia.dims.size(); ++k)
    if (auto it = host_stride.find(ia.dims[k]); it != host_stride.end()) last += (units[k] - 1) * it->second;
  if (rows > 0 && last >= stride)
    throw ExecError(value.info.sdsc_file + ": index tensor " + index_info.name + " holds " + std::to_string(stride) + " indices, but the view of " +
                     value.info.name + " it indexes reaches index " + std::to_string(last) +
                     ": the two tensors' dims disagree (their sizes or scale_)");
  std::vector<int64_t> out(static_cast<size_t>(rows));
  std::vector<int64_t> c(units.size(), 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t e = 0;
    for (size_t k = 0; k < ia.dims.size(); ++k)
      if (auto it = host_stride.find(ia.dims[k]); it != host_stride.end()) e += c[k] * it->second;
    out[size_t(r)] = e;
    for (size_t k = 0; k < c.size(); ++k) {
      if (++c[k] < units[k]) break;
      c[k] = 0;
    }
  }
  return out;
}

IndirectRows indirect_rows(const bundle::IndirectAccess& ia, const MappedTensor& value, const TensorInfo& index_info,
                           const std::vector<uint8_t>& index_host, uint64_t bound) {
  IndirectRows out;
  out.row_bytes = indirect_row_bytes(ia, value);
  const std::vector<int64_t> at = indirect_index_positions(ia, value, index_info);
  out.index.resize(at.size());
  for (size_t r = 0; r < at.size(); ++r) {
    const double v = fmt::load_element(index_info.format, index_host.data(), size_t(at[r]));
    if (!(v >= 0) || (bound && v >= double(bound)))
      throw ExecError(value.info.sdsc_file + ": " + index_info.name + " element " + std::to_string(at[r]) + " is " +
                      std::to_string(int64_t(v)) + ", outside the rows [0, " +
                      (bound ? std::to_string(bound) : std::string("inf")) + ") of the value tensor " +
                      value.info.name);
    out.index[r] = uint64_t(v);
  }
  return out;
}

bool is_reduction(std::string_view op) { return reductions().count(op) != 0; }
bool is_matmul(std::string_view op) {
  return op == "batchmatmul" || op == "batchmatmulfp8" || op == "batchmatmulint8" ||
         op == "batchmatmulint4" || op == "matmul";
}
bool is_mappable(std::string_view op) {
  static const auto& no = *new const std::set<std::string_view>{"conv2d", "conv2dfp8", "conv2dint8", "conv2dint4",
                                             "depthwiseconv2dnative", "avgpoolfwd",
                                             "avgpoolnmapfwd", "maxpoolfwd", "gather", "scatter",
                                             "scatter_add"};
  return !no.count(op);
}
void conv_attrs(const bundle::Sdsc& s, ops::Attrs& a) {
  // One window: the H slot is a plain dim (conv_views), stride 1, no padding.
  const bundle::Window plain;
  const bundle::Window& h = s.windows.size() == 2 ? s.windows.at(0) : plain;
  const bundle::Window& w = s.windows.at(s.windows.size() - 1);
  for (const bundle::Window* x : {&h, &w})
    if (x->pad_front != x->pad_back || x->dilation != 1)
      throw ExecError(s.file + ": N_/paddingSizes_/" + x->dim + ": padding " + std::to_string(x->pad_front) + "/" +
                      std::to_string(x->pad_back) + " with dilation " + std::to_string(x->dilation) +
                      " is not implemented (equal padding, dilation 1)");
  a.stride_h = h.stride;
  a.stride_w = w.stride;
  a.pad_h = h.pad_front;
  a.pad_w = w.pad_front;
}

void pool_attrs(const bundle::Sdsc& s, const TensorInfo& in, ops::Attrs& a) {
  conv_attrs(s, a);  // stride and padding, checked
  const bundle::Window& h = s.windows.at(0);
  const bundle::Window& w = s.windows.at(1);
  auto axis = [&](const std::string& d) {
    const auto it = std::find(in.dims.begin(), in.dims.end(), d);
    if (it == in.dims.end()) throw ExecError(s.file + ": " + in.name + " has no dim '" + d + "' to pool over");
    return int(it - in.dims.begin());
  };
  a.pool_dim_h = axis(h.dim);
  a.pool_dim_w = axis(w.dim);
  a.kernel_h = s.n_of(h.window_dim);
  a.kernel_w = s.n_of(w.window_dim);
}

bool topk_axes(const std::vector<int64_t>& in, const std::vector<int64_t>& out, int& scan, int& kax) {
  if (in.size() != out.size()) return false;
  int s = -1, k = -1;
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t a = in[i], b = out[i];
    if (a == b) continue;
    if (b == 1 && s < 0) s = int(i);
    else if (a == 1 && k < 0) k = int(i);
    else if (a > b && s < 0 && k < 0) s = k = int(i);
    else return false;
  }
  if (s < 0 || k < 0) return false;
  scan = s;
  kax = k;
  return true;
}

bool topk_view(const ops::TensorView& in, ops::TensorView& out, int& scan) {
  int s = -1, k = -1;
  if (!topk_axes(in.size, out.size, s, k) || s == k) return false;
  std::vector<int64_t> st = out.stride.empty() ? fmt::contiguous_strides(out.size) : out.stride;
  ops::TensorView v = out;
  v.size = in.size;
  v.size[size_t(s)] = out.size[size_t(k)];
  v.stride = st;
  v.stride[size_t(s)] = st[size_t(k)];
  v.stride[size_t(k)] = 0;
  out = v;
  scan = s;
  return true;
}

bool conv_views(const bundle::Sdsc& s, const ops::TensorView& x, const TensorInfo& xi, const ops::TensorView& w,
                const TensorInfo& wi, const ops::TensorView& o, const TensorInfo& oi, ops::TensorView& xv,
                ops::TensorView& wv, ops::TensorView& ov) {
  if (s.windows.empty() || s.windows.size() > 2) return false;
  // The W slot takes the last window; the H slot the first, or with one window (a kernel one wide
  // on the other spatial dim, which the compiler gives no window) a plain dim of the output.
  const bundle::Window& wd = s.windows.back();
  const bundle::Window* h = s.windows.size() == 2 ? &s.windows.front() : nullptr;
  auto windowish = [&](const std::string& d) {
    return d == wd.dim || d == wd.window_dim || (h && (d == h->dim || d == h->window_dim));
  };
  // The channel dim: the output's stick dim (a dim in all three that is neither a window's nor a
  // window dim); a batch: any other dim of the output with more than one element.
  // (A dim the output holds first: a full convolution's input channels are in the weight too.)
  auto in_w = [&](const std::string& d) {
    const auto it = std::find(wi.dims.begin(), wi.dims.end(), d);
    return it != wi.dims.end() && wi.size[size_t(it - wi.dims.begin())] > 1;
  };
  std::string chan;
  for (int pass = 0; pass < 2 && chan.empty(); ++pass)
    for (size_t i = 0; i < oi.dims.size() && chan.empty(); ++i)
      if (!windowish(oi.dims[i]) && in_w(oi.dims[i]) && (pass == 1 || oi.size[i] > 1)) chan = oi.dims[i];
  if (chan.empty()) return false;
  std::vector<std::string> extra;
  for (size_t i = 0; i < oi.dims.size(); ++i)
    if (!windowish(oi.dims[i]) && oi.dims[i] != chan && oi.size[i] > 1) extra.push_back(oi.dims[i]);
  std::string hdim = h ? h->dim : "", hwin = h ? h->window_dim : "", batch;
  if (!h && !extra.empty()) {  // the H slot: a plain dim, kernel 1 (as a batch dim would be)
    hdim = extra.back();
    extra.pop_back();
  }
  if (extra.size() > 1) return false;
  if (!extra.empty()) batch = extra.front();
  // A full convolution's input channels: a dim of the input and the weight the output lacks
  // (none in a depthwise one, whose channel dim is in all three).
  auto holds = [](const TensorInfo& t, const std::string& d) {  // a dim of more than one element
    const auto it = std::find(t.dims.begin(), t.dims.end(), d);
    return it != t.dims.end() && t.size[size_t(it - t.dims.begin())] > 1;
  };
  std::string cin;
  for (size_t i = 0; i < xi.dims.size() && cin.empty(); ++i) {
    const std::string& d = xi.dims[i];
    if (d == hdim || d == wd.dim || d == chan || xi.size[i] <= 1) continue;
    if (!holds(oi, d) && holds(wi, d)) cin = d;
  }
  auto pick = [](const ops::TensorView& t, const TensorInfo& info, const std::vector<std::string>& want,
                 ops::TensorView& out) {
    const std::vector<int64_t> st = t.stride.empty() ? fmt::contiguous_strides(t.size) : t.stride;
    out = t;
    out.size.clear();
    out.stride.clear();
    for (const auto& d : want) {
      const auto it = std::find(info.dims.begin(), info.dims.end(), d);
      if (d.empty() || it == info.dims.end()) {
        out.size.push_back(1);
        out.stride.push_back(0);
      } else {
        out.size.push_back(t.size[size_t(it - info.dims.begin())]);
        out.stride.push_back(st[size_t(it - info.dims.begin())]);
      }
    }
  };
  pick(x, xi, {batch, cin.empty() ? chan : cin, hdim, wd.dim}, xv);  // NCHW
  pick(w, wi, {chan, cin, hwin, wd.window_dim}, wv);  // OIHW (depthwise: one input channel per group)
  pick(o, oi, {batch, chan, hdim, wd.dim}, ov);       // NOHW
  // Every element in its view: no dim of more than one element left out.
  return xv.numel() == x.numel() && wv.numel() == w.numel() && ov.numel() == o.numel();
}

int stagger_axis(const bundle::Sdsc& s, std::string_view op, const TensorInfo& in, const TensorInfo& out) {
  if (op != "fp32todl16" && op != "dl16tofp32") return -1;
  const std::string where = s.file + ": computeOp_ '" + std::string(op) + "'";
  auto stick_axis = [](const TensorInfo& t) { return t.layout.dim_map.empty() ? -1 : int(t.layout.dim_map.back()); };
  const int ia = stick_axis(in), oa = stick_axis(out);
  if (ia < 0 || oa < 0 || size_t(ia) >= in.dims.size() || size_t(oa) >= out.dims.size() ||
      in.dims[size_t(ia)] != out.dims[size_t(oa)] || in.size[size_t(ia)] != out.size[size_t(oa)])
    throw ExecError(where + ": input " + in.name + " and output " + out.name +
                    " must have the same stick dim (the conversion's staggered order is modelled along it)");
  if (out.size[size_t(oa)] % 64 != 0)
    throw ExecError(where + ": stick dim '" + out.dims[size_t(oa)] + "' of " + std::to_string(out.size[size_t(oa)]) +
                    " elements, expected a multiple of 64: the conversion staggers 64-element groups, and lanes "
                    "past the dim's size would hold data the executor does not model");
  return oa;
}

int64_t stagger_source(std::string_view op, int64_t j) {
  if (op == "fp32todl16") {  // j = 8k + 4s + w
    const int64_t k = j / 8, s = (j % 8) / 4, w = j % 4;
    return 32 * s + 4 * k + w;
  }
  const int64_t s = j / 32, k = (j % 32) / 4, w = j % 4;  // dl16tofp32: j = 32s + 4k + w
  return 8 * k + 4 * s + w;
}

void stagger(std::string_view op, uint8_t* data, size_t elem_bytes, const std::vector<int64_t>& size, int axis) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= size[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < size.size(); ++d) inner *= size[d];
  const int64_t n = size[size_t(axis)];
  int64_t src[64];
  for (int64_t j = 0; j < 64; ++j) src[j] = stagger_source(op, j);
  const size_t row = size_t(inner) * elem_bytes;  // one step along the axis
  std::vector<uint8_t> group(64 * row);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t g = 0; g + 64 <= n; g += 64) {
      uint8_t* base = data + (size_t(o * n + g)) * row;
      std::memcpy(group.data(), base, group.size());
      for (int64_t j = 0; j < 64; ++j) std::memcpy(base + size_t(j) * row, group.data() + size_t(src[j]) * row, row);
    }
}

bool is_pool(std::string_view op) { return op == "avgpoolfwd" || op == "avgpoolnmapfwd" || op == "maxpoolfwd"; }

bool exx2_lanes(const bundle::Sdsc& s, uint32_t lds) {
  if (lds >= s.labeled_ds.size() || !exx2_role(s, lds)) return false;
  const bundle::LabeledDs& ds = s.labeled_ds[lds];
  const bundle::LayoutInfo* li = s.layout_for(ds);
  if (!li || li->stick_dim_order.size() != 1) return false;
  return s.scale_of(ds, li->stick_dim_order[0]) == -2;
}

MappedTensor map_tensor(const bundle::ResolvedExecution& r, uint32_t lds) {
  const bundle::Sdsc& s = *r.sdsc;
  const std::string where = s.file + ": labeledDs_ " + std::to_string(lds);
  if (lds >= s.labeled_ds.size()) throw ExecError(where + ": no such labeled tensor");
  const bundle::LabeledDs& ds = s.labeled_ds[lds];
  // The allocation (HBM preferred when a tensor has both nodes).
  int ai = -1;
  for (size_t i = 0; i < s.allocations.size(); ++i)
    if (s.allocations[i].lds_idx == lds &&
        (ai < 0 || s.allocations[i].placement == bundle::Placement::hbm))
      ai = int(i);
  if (ai < 0) throw ExecError(where + ": no allocate node in scheduleTree_");
  const bundle::Allocation& al = s.allocations[size_t(ai)];
  MappedTensor t;
  t.info.sdsc_file = s.file;
  t.info.lds_idx = lds;
  t.info.name = ds.name;
  t.info.placement = al.placement;
  t.info.format = to_fmt(ds.format);
  if (!fmt::is_convertible(t.info.format) || fmt::elements_per_stick(t.info.format) <= 0)
    throw ExecError(where + " (" + ds.name + "): dataFormat_ " +
                    std::string(bundle::to_string(ds.format)) +
                    " has no element conversion in vspyre::fmt");
  t.layout = al.layout_dim_order;
  if (const bundle::IndirectAccess* ia = s.indirect_of(lds)) t.layout = ia->memory_order(t.layout);
  const size_t n = t.layout.size();
  if (n == 0) throw ExecError(s.file + ": " + al.json_path + "/layoutDimOrder_: empty");
  if (ds.scale.size() != n)
    throw ExecError(where + " (" + ds.name + "): scale_ has " + std::to_string(ds.scale.size()) +
                    " entries, layoutDimOrder_ of " + al.name + " has " + std::to_string(n));
  const bundle::LayoutInfo* li = s.layout_for(ds);
  if (!li) throw ExecError(where + ": primaryDsInfo_ has no entry '" + ds.ds_type + "'");
  // One stick dim (eps elements of it per stick), or two: torch-spyre's fp8 weights (QFP8WT,
  // stickSize_ [2, 64]: two rows of the first dim, 64 of the second, the second's lanes
  // contiguous).
  const size_t nstick = li->stick_dim_order.size();
  const int64_t eps = fmt::elements_per_stick(t.info.format);
  int64_t per_stick = 1;
  for (int64_t v : li->stick_size) per_stick *= v;
  if (nstick < 1 || nstick > 2 || li->stick_size.size() != nstick || per_stick != eps)
    throw ExecError(where + ": primaryDsInfo_['" + ds.ds_type + "']/stickSize_ " + stick_size_str(li->stick_size) +
                    " is not one 128-byte stick of " + std::string(fmt::name(t.info.format)) + " (" +
                    std::to_string(eps) + " elements) over one or two dims");
  std::vector<int64_t> per(n, 1);  // elements of each layout dim per unit (1, or its stick size)
  size_t stick_outer = 0;          // the stick's first dim (its rows in a 2-D stick)
  for (size_t k = 0; k < nstick; ++k) {
    const size_t pos = size_t(std::find(t.layout.begin(), t.layout.end(), li->stick_dim_order[k]) - t.layout.begin());
    if (pos == n)
      throw ExecError(where + ": stick dim '" + li->stick_dim_order[k] + "' not in " + al.name +
                      " layoutDimOrder_");
    if (per[pos] != 1)
      throw ExecError(where + ": primaryDsInfo_['" + ds.ds_type + "']/stickDimOrder_ names '" +
                      li->stick_dim_order[k] + "' twice");
    per[pos] = li->stick_size[k];
    if (k == 0) stick_outer = pos;
    t.stick_pos = pos;  // the lanes: the last stick dim
  }

  const bool exx2 = exx2_lanes(s, lds);
  // Logical sizes per layout dim: N_, or a windowed op's input extent (padding_, Sdsc::windows).
  std::vector<int64_t> tsize(n);
  std::vector<const bundle::Window*> window(n, nullptr);
  for (size_t i = 0; i < n; ++i) {
    const int64_t N = s.n_of(t.layout[i]);
    if (N <= 0) throw ExecError(where + ": dim '" + t.layout[i] + "' has no size in N_");
    tsize[i] = s.scale_of(ds, t.layout[i]) == 1 ? N : 1;
    if (i == t.stick_pos && exx2 && nstick == 1) tsize[i] = 2;  // the two statistics of an EXX2 stick
    if (al.windowed.count(t.layout[i]) && tsize[i] > 1) {
      window[i] = s.window_of(t.layout[i]);
      tsize[i] = window[i]->total;
    }
  }
  // Trailing gaps: the tensor's extent along a dim exceeds the SDSC's (a tile of a larger tensor,
  // a padded dim); HBM: of the whole tensor, LX: of each core's slice.
  // (The loader checked that every gap's dim is in the layout.)
  std::vector<int64_t> gap(n, 0);
  for (const auto& [d, g] : al.back_gap) {
    auto it = std::find(t.layout.begin(), t.layout.end(), d);
    if (it != t.layout.end()) gap[size_t(it - t.layout.begin())] = g;
  }
  // A restickify's padded dims (Sdsc::restickify_pad): both tensors are that much short of N_;
  // the non-stick one's layout ends there (its gap is not a trailing gap), the stick one pads its
  // last stick.
  const auto shrink = s.restickify_pad();
  std::vector<bool> shrunk(n, false);
  for (size_t i = 0; i < n; ++i) {
    auto it = shrink.find(t.layout[i]);
    if (it == shrink.end() || s.scale_of(ds, t.layout[i]) != 1) continue;
    if (it->second >= tsize[i])
      throw ExecError(s.file + ": backGapCore_/" + t.layout[i] + ": gap " + std::to_string(it->second) +
                      " of the restickify leaves nothing of N_ " + std::to_string(tsize[i]));
    tsize[i] -= it->second;
    if (per[i] == 1) gap[i] = 0;
    shrunk[i] = true;
  }
  // Host order.
  t.info.dims = host_dims(s, lds, t.layout);
  t.info.size.assign(t.info.dims.size(), 1);
  std::vector<int32_t> host_index(n, -1);
  for (size_t i = 0; i < n; ++i) {
    auto it = std::find(t.info.dims.begin(), t.info.dims.end(), t.layout[i]);
    if (it == t.info.dims.end())
      throw ExecError(where + ": dim '" + t.layout[i] + "' is not a dimension of N_");
    host_index[i] = int32_t(it - t.info.dims.begin());
    t.info.size[size_t(host_index[i])] = tsize[i];
  }
  if (exx2) t.exx2_axis = host_index[t.stick_pos];
  const bool lx_alloc = al.placement == bundle::Placement::lx;
  // Whole-tensor layout: device dims outermost first, the stick lanes last.
  t.full_units.resize(n);
  t.full_stride.resize(n);
  int64_t stride = fmt::k_stick_bytes;
  for (size_t i = 0; i < n; ++i) {
    const int64_t ext = tsize[i] + (lx_alloc ? 0 : gap[i]);
    t.full_units[i] = ceil_div(ext, per[i]);
    t.full_stride[i] = stride;
    stride *= t.full_units[i];
  }
  t.info.layout.format = t.info.format;
  for (size_t i = n; i-- > 0;) {
    t.info.layout.device_size.push_back(t.full_units[i]);
    t.info.layout.dim_map.push_back(host_index[i]);
  }
  if (nstick == 2) {  // the stick's rows, then its lanes
    t.info.layout.device_size.push_back(per[stick_outer]);
    t.info.layout.dim_map.push_back(host_index[stick_outer]);
  }
  t.info.layout.device_size.push_back(per[t.stick_pos]);
  t.info.layout.dim_map.push_back(host_index[t.stick_pos]);
  t.info.image_bytes = fmt::device_image_bytes(t.info.layout);
  // The span this tensor's own sticks cover (less than the image when it has a trailing gap).
  t.info.span_bytes = fmt::k_stick_bytes;
  for (size_t i = 0; i < n; ++i) {
    const int64_t own = ceil_div(tsize[i], per[i]);
    t.info.span_bytes += uint64_t(std::max<int64_t>(own - 1, 0) * t.full_stride[i]);
    t.info.gapped = t.info.gapped || own != t.full_units[i];
  }
  if (!t.info.gapped) t.info.span_bytes = t.info.image_bytes;

  // Per-core slices.
  const auto own = own_slices(s, al);
  std::map<std::string, int64_t> own_count;
  for (const auto& [c, m] : own)
    for (const auto& [d, k] : m) own_count[d] = std::max(own_count[d], k + 1);
  std::vector<int64_t> slice_elems(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& d = t.layout[i];
    if (s.scale_of(ds, d) != 1) {
      slice_elems[i] = tsize[i];  // 1, or an EXX2 stick's 2 lanes
    } else if (window[i]) {
      // The input positions a core's outputs read (their windows overlap from core to core).
      const int64_t out = std::max<int64_t>({s.ss_of(d), s.el_of(d), 1});
      slice_elems[i] = std::min(tsize[i], window[i]->span(out, s.n_of(window[i]->window_dim)));
    } else if (!own.empty()) {
      const int64_t cnt = own_count.count(d) ? own_count[d] : 1;
      if (tsize[i] % cnt != 0)
        throw ExecError(s.file + ": " + al.json_path + "/coordinates_/coreIdToWkSlice_: dim '" +
                        d + "' (" + std::to_string(tsize[i]) + ") is not divisible into " +
                        std::to_string(cnt) + " slices");
      slice_elems[i] = tsize[i] / cnt;
    } else {
      const int64_t ss = s.ss_of(d), el = s.el_of(d);
      slice_elems[i] = std::max<int64_t>({ss, el, 1});
      if (ss <= 0 && el <= 0) slice_elems[i] = tsize[i];
    }
  }
  t.slice_units.resize(n);
  t.slice_stride.resize(n);
  stride = fmt::k_stick_bytes;
  for (size_t i = 0; i < n; ++i) {
    const int64_t ext = slice_elems[i] + (lx_alloc ? gap[i] : 0);
    t.slice_units[i] = ceil_div(ext, per[i]);
    t.slice_stride[i] = stride;
    stride *= t.slice_units[i];
  }
  if (size_t(ai) >= r.addresses.size())
    throw ExecError(where + ": the resolved execution has no addresses for " + al.name);
  const auto& addr = r.addresses[size_t(ai)];
  std::optional<uint64_t> base;
  for (uint32_t c : s.core_ids) {
    CoreSlice cs;
    cs.core = c;
    if (c >= addr.size()) throw ExecError(where + ": no start address for core " + std::to_string(c));
    cs.start = addr[c];
    cs.origin.resize(n);
    cs.units.resize(n);
    int64_t off = 0;
    for (size_t i = 0; i < n; ++i) {
      const std::string& d = t.layout[i];
      int64_t o = 0, e = tsize[i];
      if (s.scale_of(ds, d) == 1) {
        if (!own.empty()) {
          auto ci = own.find(c);
          const int64_t k = ci == own.end() || !ci->second.count(d) ? 0 : ci->second.at(d);
          o = k * slice_elems[i];
          e = slice_elems[i];
        } else {
          const uint32_t slices = s.slices_of(d);
          auto ci = s.core_slice.find(c);
          int64_t k = 0;
          if (ci != s.core_slice.end()) {
            auto di = ci->second.find(d);
            if (di != ci->second.end()) k = di->second;
          }
          if (slices > 1 && window[i]) {
            // A windowed input: core k's outputs start at output k x ss_ and read from input
            // position (k x ss_) x stride - padFront on, the span of its outputs' windows.
            const bundle::Window& w = *window[i];
            const int64_t ss = s.ss_of(d) > 0 ? s.ss_of(d) : 1;
            const int64_t el = s.el_of(d) > 0 ? s.el_of(d) : ss;
            const int64_t outs = k == int64_t(slices) - 1 ? el : ss;
            o = std::max<int64_t>(0, k * ss * w.stride - w.pad_front);
            e = std::min(tsize[i] - o, w.span(outs, s.n_of(w.window_dim)));
          } else if (slices > 1) {
            const int64_t ss = s.ss_of(d) > 0 ? s.ss_of(d) : tsize[i];
            const int64_t el = s.el_of(d) > 0 ? s.el_of(d) : ss;
            o = k * ss;
            e = k == int64_t(slices) - 1 ? el : ss;
          }
        }
        if (shrunk[i] && o + e > tsize[i]) e = std::max<int64_t>(0, tsize[i] - o);  // the padding
        if (o + e > tsize[i])
          throw ExecError(where + " (" + ds.name + "): core " + std::to_string(c) +
                          "'s slice of dim '" + d + "' [" + std::to_string(o) + ", " +
                          std::to_string(o + e) + ") lies outside N_ " + std::to_string(tsize[i]));
      }
      if (per[i] > 1) {
        if (o % per[i] != 0)
          throw ExecError(where + " (" + ds.name + "): core " + std::to_string(c) +
                          "'s slice of stick dim '" + d + "' starts mid-stick (element " +
                          std::to_string(o) + ")");
        cs.origin[i] = o / per[i];
        cs.units[i] = ceil_div(e, per[i]);
      } else {
        cs.origin[i] = o;
        cs.units[i] = e;
      }
      off += cs.origin[i] * t.full_stride[i];
    }
    if (al.placement == bundle::Placement::hbm) {
      if (cs.start < uint64_t(off))
        throw ExecError(where + " (" + ds.name + "): core " + std::to_string(c) +
                        "'s start address " + std::to_string(cs.start) +
                        " is below its slice offset " + std::to_string(off) +
                        " in the stick layout");
      const uint64_t b = cs.start - uint64_t(off);
      if (!base) base = b;
      else if (*base != b)
        throw ExecError(where + " (" + ds.name + "): the per-core start addresses do not fit one "
                        "tensor in the stick layout of " + al.name + " (core " +
                        std::to_string(c) + " implies base " + std::to_string(b) + ", core " +
                        std::to_string(t.cores.front().core) + " base " + std::to_string(*base) +
                        ")");
    }
    t.cores.push_back(std::move(cs));
  }
  if (t.cores.empty()) throw ExecError(where + ": no cores");
  t.info.base = base.value_or(0);
  return t;
}

}  // namespace vspyre::exec::detail
