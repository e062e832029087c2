// The functional executor: SDSC tensors <-> device memory, ops through vspyre::ops.
#include "sim/exec/exec.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "sim/exec/layout.h"
#include "sim/ops/ops.h"

namespace vspyre::exec {

// ---------------------------------------------------------------------------------------------
// SparseMemory
// ---------------------------------------------------------------------------------------------
void SparseMemory::read(uint64_t addr, void* dst, size_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  while (n > 0) {
    const uint64_t page = addr / k_page_bytes, off = addr % k_page_bytes;
    const size_t chunk = size_t(std::min<uint64_t>(n, k_page_bytes - off));
    auto it = pages_.find(page);
    if (it == pages_.end())
      std::memset(out, 0, chunk);
    else
      std::memcpy(out, it->second.get() + off, chunk);
    out += chunk;
    addr += chunk;
    n -= chunk;
  }
}

void SparseMemory::write(uint64_t addr, const void* src, size_t n) {
  const auto* in = static_cast<const uint8_t*>(src);
  while (n > 0) {
    const uint64_t page = addr / k_page_bytes, off = addr % k_page_bytes;
    const size_t chunk = size_t(std::min<uint64_t>(n, k_page_bytes - off));
    auto& p = pages_[page];
    if (!p) {
      // A new page reads as zero outside what this write covers. A write of the whole page (every
      // page of a large tensor's image) leaves nothing to clear: the page is not zeroed first
      // (make_unique<uint8_t[]> and a memset did so twice, on top of the kernel's first touch).
      p.reset(new uint8_t[k_page_bytes]);
      if (chunk < k_page_bytes) {
        std::memset(p.get(), 0, size_t(off));
        std::memset(p.get() + off + chunk, 0, size_t(k_page_bytes - off - chunk));
      }
    }
    std::memcpy(p.get() + off, in, chunk);
    in += chunk;
    addr += chunk;
    n -= chunk;
  }
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t s : size) n *= s;
  return n;
}

fmt::DataFormat to_fmt(bundle::DataFormat f) {
  auto r = fmt::data_format_from_name(bundle::to_string(f));
  return r ? *r : fmt::DataFormat::INVALID;
}

TensorInfo describe_tensor(const bundle::ResolvedExecution& r, uint32_t lds_idx) {
  return detail::map_tensor(r, lds_idx).info;
}

// ---------------------------------------------------------------------------------------------
// Whole-tensor HBM access
// ---------------------------------------------------------------------------------------------
namespace {

void need_hbm(const TensorInfo& info, const char* what) {
  if (info.placement != bundle::Placement::hbm)
    throw ExecError(info.sdsc_file + ": " + info.name + ": " + what +
                    " needs an HBM tensor (this one lives in LX)");
}

fmt::HostTensor host_of(const TensorInfo& info, const void* data, const std::vector<int64_t>& st) {
  return fmt::HostTensor{data, info.format, info.size, st, 0};
}

}  // namespace

std::vector<uint8_t> read_tensor_raw(Memory& mem, const TensorInfo& info) {
  need_hbm(info, "read_tensor");
  std::vector<uint8_t> image(info.image_bytes);
  mem.read(info.base, image.data(), image.size());
  std::vector<uint8_t> out(fmt::bytes_for(info.format, size_t(info.numel())));
  const auto st = fmt::contiguous_strides(info.size);
  fmt::device_to_host(image.data(), info.layout,
                      fmt::MutableHostTensor{out.data(), info.format, info.size, st, 0});
  return out;
}

void write_tensor_raw(Memory& mem, const TensorInfo& info, std::span<const uint8_t> elements) {
  need_hbm(info, "write_tensor");
  if (elements.size() != fmt::bytes_for(info.format, size_t(info.numel())))
    throw ExecError(info.sdsc_file + ": " + info.name + ": write_tensor got " +
                    std::to_string(elements.size()) + " bytes, expected " +
                    std::to_string(fmt::bytes_for(info.format, size_t(info.numel()))));
  std::vector<uint8_t> image(info.image_bytes);
  const auto st = fmt::contiguous_strides(info.size);
  // A tile of a larger tensor: the image's other sticks hold other data (the other half of a
  // cat's input), so they are read and written back unchanged.
  if (info.gapped) mem.read(info.base, image.data(), image.size());
  fmt::host_to_device(host_of(info, elements.data(), st), info.layout, image.data(),
                      info.gapped ? fmt::Padding::leave : fmt::Padding::zero);
  mem.write(info.base, image.data(), image.size());
}

std::vector<float> read_tensor(Memory& mem, const TensorInfo& info) {
  need_hbm(info, "read_tensor");
  std::vector<uint8_t> image(info.image_bytes);
  mem.read(info.base, image.data(), image.size());
  // Converted on the way out of the image (device_to_host converts each element to the host
  // tensor's format): no host-order copy in the device format.
  std::vector<float> out(size_t(info.numel()));
  const auto st = fmt::contiguous_strides(info.size);
  fmt::device_to_host(image.data(), info.layout,
                      fmt::MutableHostTensor{out.data(), fmt::DataFormat::IEEE_FP32, info.size, st, 0});
  return out;
}

void write_tensor(Memory& mem, const TensorInfo& info, std::span<const float> values) {
  if (values.size() != size_t(info.numel()))
    throw ExecError(info.sdsc_file + ": " + info.name + ": write_tensor got " +
                    std::to_string(values.size()) + " values, expected " +
                    std::to_string(info.numel()));
  std::vector<uint8_t> raw(fmt::bytes_for(info.format, values.size()));
  fmt::convert(fmt::DataFormat::IEEE_FP32, values.data(), info.format, raw.data(), values.size());
  write_tensor_raw(mem, info, raw);
}

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

void random_values_into(uint64_t seed, size_t arg, size_t first, std::span<float> out) {
  const uint64_t s = splitmix64(seed ^ splitmix64(0x5eed0000ull + arg));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = float(double(splitmix64(s + first + i) >> 11) * 0x1.0p-52 - 1.0);
}

std::vector<float> random_values(uint64_t seed, size_t arg, size_t n) {
  std::vector<float> v(n);
  random_values_into(seed, arg, 0, v);
  return v;
}

std::vector<uint8_t> random_device_values(uint64_t seed, size_t arg, size_t n, fmt::DataFormat format) {
  std::vector<uint8_t> raw(fmt::bytes_for(format, n));
  // In pieces of a whole number of bytes of every format (a multiple of 8 elements).
  constexpr size_t k_piece = 1u << 16;
  std::vector<float> piece(std::min(n, k_piece));
  const int bits = fmt::bits_per_element(format);
  for (size_t i = 0; i < n; i += k_piece) {
    const size_t m = std::min(k_piece, n - i);
    random_values_into(seed, arg, i, std::span<float>(piece.data(), m));
    fmt::convert(fmt::DataFormat::IEEE_FP32, piece.data(), format, raw.data() + i * size_t(bits) / 8, m);
  }
  return raw;
}

void write_random_indices(Memory& mem, const TensorInfo& info, uint64_t seed, size_t arg, uint64_t bound) {
  need_hbm(info, "write_random_indices");
  const size_t n = size_t(info.numel());
  const std::vector<float> u = random_values(seed, arg, n);
  std::vector<uint8_t> raw(fmt::bytes_for(info.format, n));
  for (size_t i = 0; i < n; ++i) {
    const double row = std::floor((double(u[i]) + 1.0) / 2.0 * double(bound));
    fmt::store_element(info.format, raw.data(), i, std::min(row, double(bound - 1)));
  }
  write_tensor_raw(mem, info, raw);
}

void write_random_input(Memory& mem, const KernelTensor& kt, uint64_t seed) {
  if (kt.index_unknown_bound)
    throw ExecError(kernel_tensor_label(kt) + " is the index of a gather or scatter whose value tensor's row count "
                    "the bundle does not give: give its values (--input " + kernel_tensor_label(kt) + "=FILE.npy)");
  if (kt.index_bound)
    write_random_indices(mem, kt.info, seed + kt.offset, kt.arg_index, kt.index_bound);
  else
    write_random_tensor(mem, kt.info, seed + kt.offset, kt.arg_index);
}

void write_random_tensor(Memory& mem, const TensorInfo& info, uint64_t seed, size_t arg) {
  need_hbm(info, "write_random_tensor");
  const int bits = fmt::bits_per_element(info.format);
  const int64_t n = info.numel();
  if (info.gapped || bits <= 0 || bits % 8 != 0 || n == 0 || !detail::one_dim_stick(info.layout) ||
      info.image_bytes != fmt::bytes_for(info.format, size_t(n))) {
    write_tensor_raw(mem, info, random_device_values(seed, arg, size_t(n), info.format));
    return;
  }
  // No padding: every image element is a logical one. Each stick's lane 0 is host element `base`
  // and lane l is base + l x lane (fmt::stride_map of the contiguous host strides).
  const int64_t eps = int64_t(fmt::k_stick_bytes) * 8 / bits;
  const std::vector<int64_t> step = detail::broadcast_steps(info.layout, info.size, info.size);
  const int64_t lane = step.back();
  const int64_t chunk = std::max<int64_t>(eps, (int64_t(1) << 16) / eps * eps);
  std::vector<float> vals(size_t(std::min(chunk, n)));
  std::vector<uint8_t> raw(vals.size() * size_t(bits) / 8);
  for (int64_t e0 = 0; e0 < n; e0 += chunk) {
    const int64_t cnt = std::min(chunk, n - e0);
    detail::for_each_stick_base(info.layout.device_size, step, eps, e0, cnt, [&](int64_t e, int64_t base) {
      if (lane == 1) {
        random_values_into(seed, arg, size_t(base), std::span<float>(vals.data() + e, size_t(eps)));
        return;
      }
      for (int64_t l = 0; l < eps; ++l)
        random_values_into(seed, arg, size_t(base + l * lane), std::span<float>(vals.data() + e + l, 1));
    });
    fmt::convert(fmt::DataFormat::IEEE_FP32, vals.data(), info.format, raw.data(), size_t(cnt));
    mem.write(info.base + uint64_t(e0) * uint64_t(bits) / 8, raw.data(), size_t(cnt) * size_t(bits) / 8);
  }
}

// ---------------------------------------------------------------------------------------------
// Kernel arguments
// ---------------------------------------------------------------------------------------------
std::string kernel_tensor_label(const KernelTensor& kt) {
  return "arg" + std::to_string(kt.arg_index) + (kt.offset ? "+" + std::to_string(kt.offset) : "");
}

std::vector<KernelTensor> kernel_tensors(const bundle::LoadedBundle& lb,
                                         const std::vector<bundle::ResolvedExecution>& plan,
                                         const bundle::Bindings& bindings) {
  std::map<uint64_t, size_t> arg_of_addr;
  for (size_t i = 0; i < lb.bundle.args.size() && i < bindings.args.size(); ++i)
    if (!lb.bundle.args[i].is_dimension) arg_of_addr.emplace(bindings.args[i], i);
  const uint64_t pool_end = bindings.pool_base + lb.bundle.pool_bytes.value_or(0);
  std::map<std::pair<size_t, uint64_t>, KernelTensor> found;
  for (size_t pos = 0; pos < plan.size(); ++pos) {
    const auto& r = plan[pos];
    for (const auto& op : r.sdsc->compute_ops) {
      auto touch = [&](uint32_t lds, bool write) {
        const auto* alloc = r.sdsc->allocation(lds, bundle::Placement::hbm);
        if (!alloc) return;
        // A gather's or scatter's value view covers the rows its index picks, not the tensor at
        // its address: it does not say what the argument holds.
        if (r.sdsc->indirect_of(lds)) return;
        TensorInfo info = describe_tensor(r, lds);
        if (info.base >= bindings.pool_base && info.base < pool_end) return;  // kernel-private
        auto it = arg_of_addr.upper_bound(info.base);
        if (it == arg_of_addr.begin()) return;
        --it;
        const uint64_t offset = info.base - it->first;
        auto [kt, fresh] = found.try_emplace({it->second, offset});
        if (fresh) {
          kt->second.arg_index = it->second;
          kt->second.offset = offset;
          kt->second.info = std::move(info);
          kt->second.read_first = !write;
          for (const auto& ia : r.sdsc->indirect)
            if (ia.index_lds == lds) {
              kt->second.index_bound = detail::value_rows(plan, pos, ia);
              kt->second.index_unknown_bound = kt->second.index_bound == 0;
            }
        }
        if (write) kt->second.written = true;
      };
      for (uint32_t i : op.index_inputs) touch(i, false);
      const std::set<uint32_t> outs(op.outputs.begin(), op.outputs.end());
      for (uint32_t i : op.inputs)
        if (!outs.count(i)) touch(i, false);
      for (uint32_t i : op.inputs)
        if (outs.count(i) && !detail::is_reduction(op.op_func_name)) touch(i, false);
      for (uint32_t o : op.outputs) touch(o, true);
    }
  }
  std::vector<KernelTensor> v;
  for (auto& [_, kt] : found) v.push_back(std::move(kt));
  return v;
}

// ---------------------------------------------------------------------------------------------
// run()
// ---------------------------------------------------------------------------------------------
namespace {

double decode_constant(const bundle::Constant& c) {
  const fmt::DataFormat f = to_fmt(c.format);
  uint8_t buf[16] = {};
  fmt::write_code(f, buf, 0, c.raw.front());
  return fmt::load_element(f, buf, 0);
}

struct Executor {
  Memory& mem;
  const ExecOptions& opt;
  ExecStats st;
  LxState own_lx;  // this run's LX unless ExecOptions::lx gives one that outlives it

  SparseMemory& lx_of(uint32_t core) { return (opt.lx ? *opt.lx : own_lx).cores[core]; }

  // The full device image of `t` (HBM: one read of the whole image; LX: each core's slice).
  // One image buffer, reused (and grown) for every tensor of the run: fresh multi-megabyte
  // allocations cost more in page faults than the copies themselves.
  std::unique_ptr<uint8_t[]> scratch;
  size_t scratch_bytes = 0;
  uint8_t* image_buffer(size_t bytes) {
    if (bytes > scratch_bytes) {
      scratch.reset(new uint8_t[bytes]);
      scratch_bytes = bytes;
    }
    return scratch.get();
  }

  // Host-order buffers of the run's earlier executions, reused: a chain of SDSCs over one large
  // tensor would otherwise fault in fresh pages for every operand and result of every step.
  // At most k_spares are kept (the smallest goes first); all are freed when the run ends.
  static constexpr size_t k_spares = 4;
  std::vector<std::vector<uint8_t>> spares;
  // `bytes` zero bytes, in the smallest spare that holds them where there is one.
  std::vector<uint8_t> host_buffer(size_t bytes) {
    size_t best = spares.size();
    for (size_t i = 0; i < spares.size(); ++i)
      if (spares[i].capacity() >= bytes && (best == spares.size() || spares[i].capacity() < spares[best].capacity()))
        best = i;
    if (best == spares.size()) return std::vector<uint8_t>(bytes);
    std::vector<uint8_t> v = std::move(spares[best]);
    spares.erase(spares.begin() + ptrdiff_t(best));
    v.assign(bytes, 0);  // within its capacity: no new pages
    return v;
  }
  void give_back(std::vector<uint8_t>&& v) {
    if (v.capacity() == 0) return;
    spares.push_back(std::move(v));
    if (spares.size() > k_spares) {
      auto smallest = std::min_element(spares.begin(), spares.end(),
                                       [](const auto& a, const auto& b) { return a.capacity() < b.capacity(); });
      spares.erase(smallest);
    }
  }

  // The full device image of `t` in the scratch buffer (HBM: one read of the whole image; LX:
  // each core's slice, the rest zero).
  uint8_t* gather_image(const detail::MappedTensor& t) {
    const size_t bytes = size_t(t.info.image_bytes);
    uint8_t* image = image_buffer(bytes);
    if (t.info.placement == bundle::Placement::hbm) {
      mem.read(t.info.base, image, bytes);
      st.bytes_read += bytes;
      return image;
    }
    std::memset(image, 0, bytes);
    std::set<std::vector<int64_t>> done;
    for (const auto& cs : t.cores) {
      if (!done.insert(cs.origin).second) continue;
      auto& l = lx_of(cs.core);
      detail::for_each_run(t, cs, [&](uint64_t image_off, uint64_t slice_off, uint64_t n) {
        const uint64_t a = lx_at(t, cs.core, cs.start + slice_off, n, "read");
        l.read(a, image + image_off, size_t(n));
        st.lx_bytes_read += n;
      });
    }
    return image;
  }

  // `t`'s host-order device-format elements (in a spare host buffer where one fits), read from
  // its full device image.
  std::vector<uint8_t> host_copy(const detail::MappedTensor& t) { return host_of_image(t, gather_image(t)); }

  // `t`'s host-order device-format elements from its full device `image`.
  std::vector<uint8_t> host_of_image(const detail::MappedTensor& t, const uint8_t* image) {
    std::vector<uint8_t> buf = host_buffer(fmt::bytes_for(t.info.format, size_t(t.info.numel())));
    const auto stv = fmt::contiguous_strides(t.info.size);
    fmt::device_to_host(image, t.info.layout,
                        fmt::MutableHostTensor{buf.data(), t.info.format, t.info.size, stv, 0});
    return buf;
  }

  // An LX access of n bytes at offset a on `core`: a, or an error when it runs past the LX.
  uint64_t lx_at(const detail::MappedTensor& t, uint32_t core, uint64_t a, uint64_t n,
                 const char* what) const {
    if (a + n > opt.lx_bytes)
      throw ExecError(t.info.sdsc_file + ": " + t.info.name + ": LX " + what + " of core " +
                      std::to_string(core) + " at offset " + std::to_string(a) +
                      " runs past the LX (" + std::to_string(opt.lx_bytes) + " bytes)");
    return a;
  }

  // Writes each core's slice of `image` where that core writes it.
  void scatter_image(const detail::MappedTensor& t, const uint8_t* image) {
    std::set<std::pair<std::vector<int64_t>, uint64_t>> done;
    for (const auto& cs : t.cores) {
      if (!done.insert({cs.origin, t.info.placement == bundle::Placement::hbm ? cs.start
                                                                              : cs.core})
               .second)
        continue;
      if (t.info.placement == bundle::Placement::hbm) {
        detail::for_each_run(t, cs, [&](uint64_t image_off, uint64_t rel_off, uint64_t n) {
          mem.write(cs.start + rel_off, image + image_off, size_t(n));
          st.bytes_written += n;
        });
      } else {
        auto& l = lx_of(cs.core);
        detail::for_each_run(t, cs, [&](uint64_t image_off, uint64_t slice_off, uint64_t n) {
          const uint64_t a = lx_at(t, cs.core, cs.start + slice_off, n, "write");
          l.write(a, image + image_off, size_t(n));
          st.lx_bytes_written += n;
        });
      }
    }
  }

  // coordinateMasking_: the input elements at masked coordinates read as the mask constant
  // (torch-spyre: a padded stick dim's padding lanes as the reduction's identity, or -inf before
  // exp). Returns whether anything was masked.
  // Writes the mask value over the masked elements of `buf` (host-order elements of `info`).
  static void mask_input(const bundle::Sdsc& s, const TensorInfo& info, std::vector<uint8_t>& buf,
                         const std::string& where) {
    const int bits = fmt::bits_per_element(info.format);
    if (bits % 8 != 0) throw ExecError(where + ": coordinateMasking_ of a sub-byte format is not implemented");
    const size_t w = size_t(bits / 8);
    uint8_t code[16] = {};
    const float value = float(decode_constant(s.constants.at(size_t(s.masking_constant))));
    fmt::convert(fmt::DataFormat::IEEE_FP32, &value, info.format, code, 1);
    detail::for_each_masked(s, info.dims, info.size,
                            [&](int64_t i) { std::memcpy(buf.data() + size_t(i) * w, code, w); });
  }

  // The streaming path. An execution qualifies when
  //  - it has no coordinateMasking_ and every op is elementwise (ops::is_elementwise) with one
  //    output;
  //  - every tensor it names lives in HBM and none is a tile of a larger one;
  //  - all its tensors but the broadcast operands have one shape and one stick layout (so one
  //    format) whose image has no padding: element k of every image then holds the same logical
  //    coordinate, and an elementwise op can run on any range of image elements. A broadcast
  //    operand is read only, of the same rank, of size 1 where it differs (a row, a column, or
  //    one element: the compiler's copy is x + a broadcast 0); it is read whole and expanded
  //    chunk by chunk through the streamed layout's stride map;
  //  - any two of its tensors occupy the same bytes or disjoint ones: a chunk's writes then never
  //    reach bytes another tensor reads in a later chunk;
  //  - each written tensor's core slices, as scatter_image writes them, cover its image exactly
  //    once at its own addresses.
  // It then reads, computes and writes k_stream_chunk_bytes of each image at a time. Within a
  // chunk it keeps the whole-tensor path's order: an operand comes from this execution's own
  // earlier result if there is one, else from memory as it was before the execution; results
  // are written after the last op, in tensor order. Returns false (having done nothing) when the
  // execution does not qualify.
  static constexpr uint64_t k_stream_chunk_bytes = 1ull << 20;

  // n copies of the w-byte element at `v` from `dst` on.
  static void fill_stick(uint8_t* dst, const uint8_t* v, size_t w, size_t n) {
    auto fill = [&](auto x) {
      std::memcpy(&x, v, sizeof x);
      for (size_t l = 0; l < n; ++l) std::memcpy(dst + l * sizeof x, &x, sizeof x);
    };
    switch (w) {
      case 1: std::memset(dst, *v, n); break;
      case 2: fill(uint16_t{}); break;
      case 4: fill(uint32_t{}); break;
      case 8: fill(uint64_t{}); break;
      default:
        for (size_t l = 0; l < n; ++l) std::memcpy(dst + l * w, v, w);
    }
  }

  // `tensor(lds)` is execute()'s mapping of the execution's tensors (each mapped once, kept
  // for the whole-tensor path when this one declines).
  template <class TensorOf>
  bool stream(const bundle::ResolvedExecution& r, const ops::Attrs& attrs, TensorOf&& tensor) {
    const bundle::Sdsc& s = *r.sdsc;
    if (!opt.stream_elementwise || !s.coordinate_masking.empty() || s.compute_ops.empty() || !s.indirect.empty())
      return false;
    std::set<uint32_t> ids, written;
    for (const auto& op : s.compute_ops) {
      if (!ops::is_elementwise(op.op_func_name) || op.outputs.size() != 1 || op.inputs.empty())
        return false;
      ids.insert(op.inputs.begin(), op.inputs.end());
      ids.insert(op.outputs[0]);
      written.insert(op.outputs[0]);
    }
    std::map<uint32_t, const detail::MappedTensor*> mapped;  // the streamed tensors
    std::map<uint32_t, const detail::MappedTensor*> bcast;   // read-only operands broadcast over them
    const detail::MappedTensor& first = tensor(s.compute_ops.front().outputs[0]);
    if (first.info.image_bytes != fmt::bytes_for(first.info.format, size_t(first.info.numel())) ||
        fmt::bits_per_element(first.info.format) <= 0 || !detail::one_dim_stick(first.info.layout))
      return false;
    for (uint32_t lds : ids) {
      const detail::MappedTensor& t = tensor(lds);
      if (t.info.placement != bundle::Placement::hbm || t.info.gapped) return false;
      if (t.info.size == first.info.size) {
        if (!(t.info.layout == first.info.layout)) return false;
        mapped.emplace(lds, &t);
        continue;
      }
      // A broadcast operand: as ops::binary broadcasts it, position by position.
      if (written.count(lds) || t.info.size.size() != first.info.size.size() ||
          fmt::bits_per_element(t.info.format) % 8 != 0)
        return false;
      for (size_t d = 0; d < t.info.size.size(); ++d)
        if (t.info.size[d] != 1 && t.info.size[d] != first.info.size[d]) return false;
      bcast.emplace(lds, &t);
    }
    std::vector<std::pair<uint64_t, uint64_t>> ranges;  // (base, image bytes) of every tensor
    for (const auto* m : {&mapped, &bcast})
      for (const auto& [_, t] : *m) ranges.emplace_back(t->info.base, t->info.image_bytes);
    for (size_t a = 0; a < ranges.size(); ++a)
      for (size_t b = a + 1; b < ranges.size(); ++b) {
        const auto [x, nx] = ranges[a];
        const auto [y, ny] = ranges[b];
        if (!(x == y && nx == ny) && x < y + ny && y < x + nx) return false;
      }
    const uint64_t image = first.info.image_bytes;
    for (uint32_t o : written) {
      const detail::MappedTensor& t = *mapped.at(o);
      std::vector<std::pair<uint64_t, uint64_t>> runs;  // (image offset, bytes)
      bool at_home = true;
      std::set<std::pair<std::vector<int64_t>, uint64_t>> done;
      for (const auto& cs : t.cores) {
        if (!done.insert({cs.origin, cs.start}).second) continue;
        detail::for_each_run(t, cs, [&](uint64_t io, uint64_t rel, uint64_t n) {
          at_home = at_home && cs.start + rel == t.info.base + io;
          runs.emplace_back(io, n);
        });
      }
      if (!at_home) return false;
      std::sort(runs.begin(), runs.end());
      uint64_t end = 0;
      for (const auto& [io, n] : runs) {
        if (io != end) return false;
        end += n;
      }
      if (end != image) return false;
    }

    const fmt::DataFormat f = first.info.format;
    const int bits = fmt::bits_per_element(f);
    const int64_t eps = int64_t(fmt::k_stick_bytes) * 8 / bits;
    // Whole sticks per chunk: every format's element boundary falls on a byte there.
    const uint64_t chunk_bytes = std::min<uint64_t>(image, k_stream_chunk_bytes / fmt::k_stick_bytes * fmt::k_stick_bytes);
    std::map<uint32_t, std::vector<uint8_t>> buf;  // this chunk of each tensor, when `have`
    std::map<uint32_t, bool> have;
    std::vector<uint8_t> result(static_cast<size_t>(chunk_bytes));
    for (const auto& [lds, _] : mapped) buf[lds].resize(size_t(chunk_bytes));
    // Each broadcast operand whole in host order, read as the whole-tensor path reads it (its
    // whole image), and the host element step of a step along each device dim of the streamed
    // images (0 along a broadcast dim). A one-element operand is passed as it is.
    struct Bcast {
      std::vector<uint8_t> host;
      std::vector<int64_t> step;  // empty: one element
      fmt::DataFormat format;
    };
    std::map<uint32_t, Bcast> bc;
    const std::vector<int64_t>& dsize = first.info.layout.device_size;
    for (const auto& [lds, tp] : bcast) {
      const detail::MappedTensor& t = *tp;
      Bcast& o = bc[lds];
      o.format = t.info.format;
      o.host = host_copy(t);
      if (t.info.numel() == 1) continue;
      o.step = detail::broadcast_steps(first.info.layout, first.info.size, t.info.size);
      buf[lds].resize(size_t(chunk_bytes * 8 / uint64_t(bits)) * size_t(fmt::bits_per_element(o.format) / 8));
    }
    // Image elements [e0, e0 + count) (whole sticks) of broadcast operand `o`, into `out`.
    auto expand = [&](const Bcast& o, int64_t e0, int64_t count, uint8_t* out) {
      const size_t w = size_t(fmt::bits_per_element(o.format) / 8);
      const int64_t lane = o.step.back();
      detail::for_each_stick_base(dsize, o.step, eps, e0, count, [&](int64_t e, int64_t base) {
        uint8_t* dst = out + size_t(e) * w;
        if (lane == 0)
          fill_stick(dst, o.host.data() + size_t(base) * w, w, size_t(eps));
        else if (lane == 1)
          std::memcpy(dst, o.host.data() + size_t(base) * w, size_t(eps) * w);
        else
          for (int64_t l = 0; l < eps; ++l)
            std::memcpy(dst + size_t(l) * w, o.host.data() + size_t(base + l * lane) * w, w);
      });
    };
    for (uint64_t off = 0; off < image; off += chunk_bytes) {
      const uint64_t n = std::min(chunk_bytes, image - off);
      const int64_t count = int64_t(n * 8 / uint64_t(bits));
      for (uint32_t lds : ids) have[lds] = false;
      for (const auto& op : s.compute_ops) {
        std::vector<ops::TensorView> ins;
        for (uint32_t i : op.inputs) {
          if (auto b = bc.find(i); b != bc.end()) {
            if (b->second.step.empty()) {
              ins.push_back(ops::view(b->second.host.data(), b->second.format, {1}));
              continue;
            }
            if (!have[i]) {
              expand(b->second, int64_t(off * 8 / uint64_t(bits)), count, buf[i].data());
              have[i] = true;
            }
            ins.push_back(ops::view(buf[i].data(), b->second.format, {count}));
            continue;
          }
          if (!have[i]) {
            mem.read(mapped.at(i)->info.base + off, buf[i].data(), size_t(n));
            st.bytes_read += n;
            have[i] = true;
          }
          ins.push_back(ops::view(buf[i].data(), f, {count}));
        }
        ops::TensorView ov = ops::view(result.data(), f, {count});
        const auto t0 = std::chrono::steady_clock::now();
        try {
          ops::run(op.op_func_name, ins, std::span<const ops::TensorView>(&ov, 1), attrs);
        } catch (const std::exception& e) {
          throw ExecError(s.file + ": computeOp_ '" + op.op_func_name + "': " + e.what());
        }
        st.compute_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::swap(buf[op.outputs[0]], result);
        have[op.outputs[0]] = true;
      }
      for (uint32_t o : written) {
        mem.write(mapped.at(o)->info.base + off, buf[o].data(), size_t(n));
        st.bytes_written += n;
      }
    }
    const int64_t numel = first.info.numel();
    for (auto& [_, o] : bc) give_back(std::move(o.host));
    st.ops += s.compute_ops.size();
    st.elements += uint64_t(numel) * s.compute_ops.size();
    ++st.streamed;
    return true;
  }

  // A gather's value view in host order: its image built row by row from the rows the index
  // picks (detail::indirect_rows), then as host_copy converts it.
  std::vector<uint8_t> gathered_copy(const detail::MappedTensor& t, const detail::IndirectRows& rows) {
    const size_t bytes = size_t(t.info.image_bytes);
    uint8_t* image = image_buffer(bytes);
    std::memset(image, 0, bytes);
    for (size_t r = 0; r < rows.index.size() && (r + 1) * rows.row_bytes <= bytes; ++r) {
      mem.read(t.info.base + rows.index[r] * rows.row_bytes, image + r * rows.row_bytes, size_t(rows.row_bytes));
      st.bytes_read += rows.row_bytes;
    }
    return host_of_image(t, image);
  }

  void execute(const std::vector<bundle::ResolvedExecution>& plan, size_t pos) {
    const bundle::ResolvedExecution& r = plan[pos];
    const bundle::Sdsc& s = *r.sdsc;
    ++st.executions;
    std::map<uint32_t, detail::MappedTensor> mapped;
    auto tensor = [&](uint32_t lds) -> detail::MappedTensor& {
      auto it = mapped.find(lds);
      if (it == mapped.end()) it = mapped.emplace(lds, detail::map_tensor(r, lds)).first;
      return it->second;
    };
    // Host-order device-format elements of each tensor this execution has touched.
    std::map<uint32_t, std::vector<uint8_t>> host;
    std::set<uint32_t> written;
    // A gather's or scatter's rows: from the index tensor's elements (read first, as the card's
    // DMA does), checked against the value tensor's row count where the bundle gives it.
    std::map<uint32_t, detail::IndirectRows> rows_of;
    std::function<std::vector<uint8_t>&(uint32_t)> load;
    auto rows = [&](const bundle::IndirectAccess& ia) -> const detail::IndirectRows& {
      auto it = rows_of.find(ia.value_lds);
      if (it != rows_of.end()) return it->second;
      const std::vector<uint8_t>& idx = load(ia.index_lds);
      return rows_of
          .emplace(ia.value_lds, detail::indirect_rows(ia, tensor(ia.value_lds), tensor(ia.index_lds).info, idx,
                                                       detail::value_rows(plan, pos, ia)))
          .first->second;
    };
    load = [&](uint32_t lds) -> std::vector<uint8_t>& {
      auto it = host.find(lds);
      if (it != host.end()) return it->second;
      if (const bundle::IndirectAccess* ia = s.indirect_of(lds))
        return host.emplace(lds, gathered_copy(tensor(lds), rows(*ia))).first->second;
      return host.emplace(lds, host_copy(tensor(lds))).first->second;
    };

    ops::Attrs attrs;
    attrs.rules = opt.rules;
    for (const auto& c : s.constants)
      if (!c.raw.empty() && fmt::is_convertible(to_fmt(c.format)))
        attrs.set(c.name, decode_constant(c));
    if (stream(r, attrs, tensor)) return;

    for (const auto& op : s.compute_ops) {
      const std::string where = s.file + ": computeOp_ '" + op.op_func_name + "'";
      if (!ops::is_supported(op.op_func_name))
        throw ExecError(where + ": operation not supported by the functional executor (vspyre::ops)");
      const bool pool = detail::is_pool(op.op_func_name);
      const bool dwconv = op.op_func_name == "depthwiseconv2dnative";
      const bool conv = dwconv || op.op_func_name == "conv2d";  // a window op with a weight
      // (A convolution whose kernel is one wide on a spatial dim has one window: conv_views.)
      if ((pool && s.windows.size() != 2) || (conv && (s.windows.empty() || s.windows.size() > 2)))
        throw ExecError(where + ": a 2-D window op needs " + (pool ? "two windows" : "one or two windows") +
                        " in N_.paddingSizes_, the SDSC gives " + std::to_string(s.windows.size()));
      if (!pool && !conv && !detail::is_mappable(op.op_func_name))
        throw ExecError(where + ": the executor cannot map this op's tensors to logical shapes "
                                "(conv layouts are not implemented)");
      if (op.outputs.size() != 1)
        throw ExecError(where + ": expected one output tensor, got " +
                        std::to_string(op.outputs.size()));
      const bool red = detail::is_reduction(op.op_func_name);
      std::vector<uint32_t> in_ids;
      for (uint32_t i : op.inputs)
        if (!(red && i == op.outputs[0])) in_ids.push_back(i);
      std::vector<ops::TensorView> ins;
      std::vector<std::vector<uint8_t>> masked;  // inputs with coordinateMasking_ applied
      masked.reserve(in_ids.size());
      for (uint32_t i : in_ids) {
        auto& buf = load(i);
        auto& t = tensor(i);
        const uint8_t* data = buf.data();
        if (detail::for_each_masked(s, t.info.dims, t.info.size, [](int64_t) {}) > 0) {
          masked.push_back(buf);  // a copy: `buf` is the tensor as stored, other ops read it
          mask_input(s, t.info, masked.back(), where);
          data = masked.back().data();
        }
        ins.push_back(ops::view(data, t.info.format, t.info.size));
      }
      auto& ot = tensor(op.outputs[0]);
      std::vector<uint8_t> obuf = host_buffer(fmt::bytes_for(ot.info.format, size_t(ot.info.numel())));
      ops::TensorView ov = ops::view(obuf.data(), ot.info.format, ot.info.size);
      ops::Attrs a = attrs;
      if (pool && !ins.empty()) detail::pool_attrs(s, tensor(in_ids.front()).info, a);
      std::vector<float> merged;  // a reduction over several dims: its input with them innermost, in fp32
      ops::TensorView rv = ov;     // and the output it writes
      if (ot.exx2_axis >= 0) {
        a.dim = ot.exx2_axis;  // exx2: the reduced dim holds the two statistics
      } else if (const int k = detail::exx2_stats_input(op.op_func_name); k >= 0 && in_ids.size() > size_t(k)) {
        const int lanes = tensor(in_ids[size_t(k)]).exx2_axis;  // EXX2 statistics
        if (lanes >= 0) a.dim = lanes;
      } else if (red && !ins.empty()) {
        std::vector<int> reduced, kept;
        for (int k = 0; k < ins[0].rank(); ++k)
          (k < ov.rank() && ins[0].size[size_t(k)] != 1 && ov.size[size_t(k)] == 1 ? reduced : kept).push_back(k);
        if (!reduced.empty()) a.dim = reduced.front();
        if (reduced.size() > 1 && ins.size() == 1 && ins[0].rank() == ov.rank()) {
          // One dim of their product, as the card reduces the whole slice into one accumulator:
          // the reduced dims moved innermost (a strided view), widened to fp32 (exact), reduced
          // along the last; the output in its own order is the kept dims row-major.
          ops::TensorView x = ins[0];
          const std::vector<int64_t> st = x.strides();
          x.size.clear();
          x.stride.clear();
          std::vector<int64_t> shape;
          int64_t len = 1;
          for (int k : kept) {
            x.size.push_back(ins[0].size[size_t(k)]);
            x.stride.push_back(st[size_t(k)]);
            shape.push_back(ins[0].size[size_t(k)]);
          }
          for (int k : reduced) {
            x.size.push_back(ins[0].size[size_t(k)]);
            x.stride.push_back(st[size_t(k)]);
            len *= ins[0].size[size_t(k)];
          }
          merged = ops::load_f32(x, a.rules);
          shape.push_back(len);
          ins[0] = ops::view(merged.data(), fmt::DataFormat::IEEE_FP32, shape);
          shape.back() = 1;
          rv = ops::view(obuf.data(), ot.info.format, shape);
          a.dim = int(shape.size()) - 1;
        }
      }
      // fp32todl16 / dl16tofp32: the output in the conversion's staggered order
      const int stag = in_ids.size() == 1 ? detail::stagger_axis(s, op.op_func_name, tensor(in_ids[0]).info, ot.info) : -1;
      const auto t0 = std::chrono::steady_clock::now();
      try {
        int scan = -1;
        ops::TensorView tv = ov;
        ops::TensorView xv, wv, cv;
        if (conv) {  // input, weight and output by dim name as NCHW, OIHW, NOHW
          if (ins.size() != 2 ||
              !detail::conv_views(s, ins[0], tensor(in_ids[0]).info, ins[1], tensor(in_ids[1]).info, ov, ot.info, xv, wv,
                                  cv))
            throw ExecError(dwconv ? "the tensors are not an input [.., H, W, C], a weight [KH, KW, C] and an output"
                                   : "the tensors are not an input [.., H, W, Cin], a weight [Cout, KH, KW, Cin] "
                                     "and an output [.., OH, OW, Cout]");
          detail::conv_attrs(s, a);
          const ops::TensorView xs[2] = {xv, wv};
          ops::run(op.op_func_name, std::span<const ops::TensorView>(xs, 2), std::span<const ops::TensorView>(&cv, 1), a);
        } else if ((op.op_func_name == "topkvalue" || op.op_func_name == "topkindex") && ins.size() == 1 &&
                   detail::topk_view(ins[0], tv, scan))  // k along a dim the input does not have
          ops::topk(ins[0], tv, scan, op.op_func_name == "topkindex");
        else
          ops::run(op.op_func_name, ins, std::span<const ops::TensorView>(&rv, 1), a);
      } catch (const std::exception& e) {
        throw ExecError(where + ": " + e.what());
      }
      if (stag >= 0)
        detail::stagger(op.op_func_name, obuf.data(), size_t(fmt::bits_per_element(ot.info.format) / 8), ot.info.size, stag);
      st.compute_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++st.ops;
      st.elements += uint64_t(ov.numel());
      if (detail::is_matmul(op.op_func_name) && !ins.empty())
        st.macs += uint64_t(ov.numel()) * uint64_t(ins[0].size.back());
      if (auto old = host.find(op.outputs[0]); old != host.end()) give_back(std::move(old->second));
      host[op.outputs[0]] = std::move(obuf);
      written.insert(op.outputs[0]);
    }
    for (uint32_t o : written) {
      auto& t = tensor(o);
      // A scatter's rows first: reading the index tensor uses the image buffer too.
      const bundle::IndirectAccess* ia = s.indirect_of(o);
      const detail::IndirectRows* rw = ia ? &rows(*ia) : nullptr;
      uint8_t* image = image_buffer(size_t(t.info.image_bytes));
      const auto stv = fmt::contiguous_strides(t.info.size);
      // Padding::zero writes every byte of the image: data lanes, padding lanes, empty sticks.
      fmt::host_to_device(fmt::HostTensor{host[o].data(), t.info.format, t.info.size, stv, 0},
                          t.info.layout, image, fmt::Padding::zero, opt.rules);
      if (rw) {
        // A scatter: row r of the result goes to the value tensor's row index[r] (in index order,
        // so a repeated index keeps the last row written).
        for (size_t q = 0; q < rw->index.size() && (q + 1) * rw->row_bytes <= t.info.image_bytes; ++q) {
          mem.write(t.info.base + rw->index[q] * rw->row_bytes, image + q * rw->row_bytes, size_t(rw->row_bytes));
          st.bytes_written += rw->row_bytes;
        }
        continue;
      }
      scatter_image(t, image);
    }
    for (auto& [lds, buf] : host) give_back(std::move(buf));
  }
};

}  // namespace

ExecStats run(const bundle::LoadedBundle& lb, const std::vector<bundle::ResolvedExecution>& plan,
              Memory& mem, const ExecOptions& opt) {
  (void)lb;
  const auto t0 = std::chrono::steady_clock::now();
  Executor ex{mem, opt, {}, {}};
  for (size_t pos = 0; pos < plan.size(); ++pos) {
    if (!plan[pos].sdsc) throw ExecError("exec::run: a resolved execution without its SDSC");
    ex.execute(plan, pos);
  }
  ex.st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return ex.st;
}

}  // namespace vspyre::exec
