// H2D / D2H (raw or through a DCI with format conversion), fill, compute launches.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "shim_internal.h"
#include "sim/formats/formats.h"
#include "spyrecode-host-functions/sendataconvert/sen_host_ops.h"

namespace flex {
namespace {

namespace fmt = vspyre::fmt;
using vspyre::shim::StagedBytes;

fmt::DataFormat to_fmt(DataFormats f) { return static_cast<fmt::DataFormat>(static_cast<int32_t>(f)); }

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error("flex: " + what); }

std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

struct Resolved {
  uint64_t dmva = 0;
  uint64_t size = 0;
};

// Checks a device address against the allocator: one chunk, a known region, inside one live
// allocation. Throws with the reason.
Resolved resolve(detail::ContextImpl& ctx, const CompositeAddress* a, const char* op) {
  if (!a) fail(std::string(op) + ": null device address");
  if (a->chunks().empty())
    fail(std::string(op) + ": use after free: empty (moved-from or released) device address");
  if (a->chunks().size() != 1)
    fail(std::string(op) + ": interleaved (multi-chunk) device addresses are not supported");
  const Chunk& c = a->chunks().front();
  if (c.addr.region_id >= NUM_SEGMENTS)
    fail(std::string(op) + ": wrong segment: region " + std::to_string(c.addr.region_id) +
         " does not exist (segments 0.." + std::to_string(NUM_SEGMENTS - 1) + ")");
  if (c.addr.offset >= SEGMENT_SIZE)
    fail(std::string(op) + ": wrong segment: offset " + hex(c.addr.offset) +
         " lies outside region " + std::to_string(c.addr.region_id));
  Resolved r{(uint64_t{c.addr.region_id} << SEGMENT_SIZE_BITS) + c.addr.offset, a->total_size()};
  auto live = ctx.core->findLive(r.dmva);
  if (!live) {
    if (ctx.core->wasFreed(r.dmva))
      fail(std::string(op) + ": use after free: device address " + hex(r.dmva) +
           " belongs to a released allocation");
    if (auto below = ctx.core->liveBelow(r.dmva))
      fail(std::string(op) + ": device access out of bounds: " + hex(r.dmva) +
           " lies past the end of the allocation [" + hex(below->base) + ", +" +
           std::to_string(below->size) + ")");
    fail(std::string(op) + ": device address " + hex(r.dmva) + " is not allocated");
  }
  if (r.dmva + r.size > live->base + live->size)
    fail(std::string(op) + ": device access out of bounds: [" + hex(r.dmva) + ", +" +
         std::to_string(r.size) + ") exceeds the allocation [" + hex(live->base) + ", +" +
         std::to_string(live->size) + ")");
  return r;
}

// Elements [lo, hi) one side of a nest touches.
struct Extent {
  int64_t lo = INT64_MAX;
  int64_t hi = INT64_MIN;
  bool empty() const { return lo >= hi; }
  void add(int64_t a, int64_t b) {
    lo = std::min(lo, a);
    hi = std::max(hi, b);
  }
};

void check_nest(const data_conversion_stride_info& n) {
  if (n.size_.empty() || n.stride_src_.size() != n.size_.size() ||
      n.stride_dst_.size() != n.size_.size())
    fail("malformed DCI: size_, stride_src_ and stride_dst_ must have the same non-zero rank");
  for (auto s : n.size_)
    if (s < 0) fail("malformed DCI: negative loop extent");
}

Extent extent_of(const std::vector<data_conversion_stride_info>& nests, bool src) {
  Extent e;
  for (const auto& n : nests) {
    bool zero = false;
    int64_t lo = src ? n.offset_src_ : n.offset_dst_, hi = lo;
    for (size_t k = 0; k < n.size_.size(); ++k) {
      if (n.size_[k] == 0) zero = true;
      const int64_t st = src ? n.stride_src_[k] : n.stride_dst_[k];
      const int64_t span = (n.size_[k] - 1) * st;
      if (span < 0) lo += span; else hi += span;
    }
    if (!zero) e.add(lo, hi + 1);
  }
  return e;
}

// Whole bytes covering elements [lo, hi) of format f, and the element index of the first byte.
struct ByteRange {
  uint64_t lo = 0, hi = 0;
  int64_t base_elem = 0;
};
ByteRange bytes_of(fmt::DataFormat f, const Extent& e) {
  const int bits = fmt::bits_per_element(f);
  ByteRange r;
  r.lo = static_cast<uint64_t>(e.lo) * bits / 8;
  r.hi = (static_cast<uint64_t>(e.hi) * bits + 7) / 8;
  r.base_elem = static_cast<int64_t>(r.lo * 8 / bits);
  return r;
}

fmt::StridedNest to_nest(const data_conversion_stride_info& n, int64_t src_base, int64_t dst_base) {
  fmt::StridedNest s;
  s.size = n.size_;
  s.stride_src = n.stride_src_;
  s.stride_dst = n.stride_dst_;
  s.offset_src = n.offset_src_ - src_base;
  s.offset_dst = n.offset_dst_ - dst_base;
  return s;
}

// True when the nests provably write every element of the device extent e (device side given
// by `dev_is_dst`) and e starts and ends on whole bytes: then an H2D need not read the device
// bytes back before writing [lo, hi). Conservative: each nest's device side must be a dense box
// (strides, sorted, 1, size0, size0*size1, ... over the loops longer than 1) and the boxes'
// element intervals must chain without a gap across e.
bool covers_densely(const std::vector<data_conversion_stride_info>& nests, bool dev_is_dst,
                    int bits, const Extent& e) {
  if ((e.lo * bits) % 8 != 0 || (e.hi * bits) % 8 != 0) return false;
  std::vector<std::pair<int64_t, int64_t>> boxes;  // element intervals [a, b)
  for (const auto& n : nests) {
    std::vector<std::pair<int64_t, int64_t>> d;  // stride, size
    bool zero = false;
    for (size_t k = 0; k < n.size_.size(); ++k) {
      if (n.size_[k] == 0) zero = true;
      if (n.size_[k] > 1) d.emplace_back(dev_is_dst ? n.stride_dst_[k] : n.stride_src_[k], n.size_[k]);
    }
    if (zero) continue;
    std::sort(d.begin(), d.end());
    int64_t len = 1;
    for (const auto& [st, sz] : d) {
      if (st != len) return false;
      len *= sz;
    }
    const int64_t a = dev_is_dst ? n.offset_dst_ : n.offset_src_;
    boxes.emplace_back(a, a + len);
  }
  std::sort(boxes.begin(), boxes.end());
  int64_t covered = e.lo;
  for (const auto& [a, b] : boxes) {
    if (a > covered) return false;
    covered = std::max(covered, b);
  }
  return covered >= e.hi;
}

// Device elements one nest (absolute offsets) touches on its source side.
Extent src_extent(const fmt::StridedNest& n) {
  int64_t lo = n.offset_src, hi = lo;
  for (size_t k = 0; k < n.size.size(); ++k) {
    const int64_t span = (n.size[k] - 1) * n.stride_src[k];
    if (span < 0) lo += span; else hi += span;
  }
  Extent e;
  e.add(lo, hi + 1);
  return e;
}

// D2H in pieces: splits each nest (device = source side, absolute offsets) along its loop of
// largest device stride so that every piece's device extent is at most `limit` elements, as long
// as that keeps the host writes in their order (the loop is the outermost one longer than 1) or
// the host side is written at most once per element, each nest's pieces together read at most
// twice its extent, and all pieces at most `budget` elements. False: read the whole range at once.
bool split_for_d2h(const std::vector<data_conversion_stride_info>& nests, int64_t limit,
                   int64_t budget, std::vector<fmt::StridedNest>& out) {
  int64_t reads = 0;
  for (const auto& dn : nests) {
    const fmt::StridedNest n = to_nest(dn, 0, 0);
    if (std::any_of(n.size.begin(), n.size.end(), [](int64_t s) { return s == 0; })) continue;
    const Extent e = src_extent(n);
    const int64_t total = e.hi - e.lo;
    if (total <= limit) {
      reads += total;
      if (reads > budget) return false;
      out.push_back(n);
      continue;
    }
    size_t k = 0;
    int64_t best = -1;
    for (size_t j = 0; j < n.size.size(); ++j)
      if (n.size[j] > 1 && std::abs(n.stride_src[j]) > best) best = std::abs(n.stride_src[j]), k = j;
    if (best <= 0) return false;
    const int64_t rest = total - (n.size[k] - 1) * best;
    if (rest > limit) return false;
    bool outermost = true;
    for (size_t j = k + 1; j < n.size.size(); ++j) outermost = outermost && n.size[j] == 1;
    if (!outermost && !fmt::loops_injective(n.size, n.stride_dst)) return false;
    const int64_t b = (limit - rest) / best + 1;
    const int64_t pieces = (n.size[k] + b - 1) / b;
    if (pieces * (rest + (b - 1) * best) > 2 * total) return false;
    reads += pieces * (rest + (b - 1) * best);
    if (reads > budget) return false;
    for (int64_t i = 0; i < n.size[k]; i += b) {
      fmt::StridedNest p = n;
      p.size[k] = std::min(b, n.size[k] - i);
      p.offset_src += i * n.stride_src[k];
      p.offset_dst += i * n.stride_dst[k];
      out.push_back(std::move(p));
    }
  }
  return true;
}

uint64_t stream_key(const detail::StreamImpl* s);

// Prepares one DMA: validates at launch, snapshots the H2D source, returns the operation.
detail::Op make_dma(detail::ContextImpl& ctx, DmaParams* p, bool to_device, uint64_t key) {
  const char* op = to_device ? "H2D" : "D2H";
  if (!p) throw std::invalid_argument(std::string("flex: launchOperation") + op + ": null params");
  if (p->to_device != to_device)
    fail(std::string(op) + ": DmaParams::to_device says the opposite direction");
  const Resolved dev = resolve(ctx, p->device, op);
  auto backend = ctx.backend;
  detail::Op result;
  result.finish = [cb = p->callback, ud = p->user_data] {
    if (cb) cb(ud);
  };
  if (!p->host) fail(std::string(op) + ": null host pointer");

  if (!p->dci) {
    if (p->size > dev.size)
      fail(std::string(op) + ": transfer out of bounds: " + std::to_string(p->size) +
           " bytes into a " + std::to_string(dev.size) + "-byte device address");
    if (to_device) {
      // The snapshot is laid out like device pages, so the backend can keep it as its memory.
      auto snap = std::make_shared<StagedBytes>(StagedBytes::make(dev.dmva, dev.dmva + p->size));
      if (p->size) std::memcpy(snap->at(snap->lo), p->host, p->size);
      result.run = [backend, snap, key] {
        const uint64_t n = snap->size();
        if (n) backend->writeStaged(std::move(*snap));
        backend->transferTime(key, true, n);
      };
    } else {
      result.run = [backend, dev, host = p->host, n = p->size, key] {
        backend->read(dev.dmva, host, n);
        backend->transferTime(key, false, n);
      };
    }
    return result;
  }

  const data_conversion_info& dci = *p->dci;
  if (dci.isHostToSen_ != to_device)
    fail(std::string(op) + ": DCI direction (isHostToSen_) does not match the operation");
  const auto src_f = to_fmt(dci.dataformat_src_), dst_f = to_fmt(dci.dataformat_dst_);
  if (!fmt::is_convertible(src_f) || !fmt::is_convertible(dst_f) ||
      !fmt::dci_pair_supported(src_f, dst_f))
    fail(std::string(op) + ": unsupported DCI conversion " +
         EnumsConversion::dataFormatsToString(dci.dataformat_src_) + " -> " +
         EnumsConversion::dataFormatsToString(dci.dataformat_dst_));
  if (dci.dcsi_.empty()) fail(std::string(op) + ": malformed DCI: no dcsi_ entries");
  for (const auto& n : dci.dcsi_) check_nest(n);
  const Extent se = extent_of(dci.dcsi_, true), de = extent_of(dci.dcsi_, false);
  if (se.empty() || de.empty()) {
    result.run = [] {};
    return result;
  }
  if (se.lo < 0 || de.lo < 0) fail(std::string(op) + ": malformed DCI: negative element index");
  const fmt::DataFormat dev_f = to_device ? dst_f : src_f;
  const Extent& dev_e = to_device ? de : se;
  const ByteRange dev_b = bytes_of(dev_f, dev_e);
  const int dev_bits = fmt::bits_per_element(dev_f);
  if (dev_bits >= 8 && dev.dmva % (dev_bits / 8) != 0)
    fail(std::string(op) + ": misaligned device address " + hex(dev.dmva) + " for " +
         std::string(fmt::name(dev_f)) + " elements");
  if (dev_b.hi > dev.size)
    fail(std::string(op) + ": DCI transfer out of bounds: device bytes [" +
         std::to_string(dev_b.lo) + ", " + std::to_string(dev_b.hi) + ") exceed the " +
         std::to_string(dev.size) + "-byte device address");
  auto nests = p->dci;  // keep the DCI (shared, immutable after launch)
  if (to_device) {
    const ByteRange hb = bytes_of(src_f, se);
    const auto* host = static_cast<const uint8_t*>(p->host);
    auto staged = std::make_shared<StagedBytes>(
        StagedBytes::make(dev.dmva + dev_b.lo, dev.dmva + dev_b.hi));
    if (covers_densely(dci.dcsi_, true, dev_bits, dev_e)) {
      // Every device byte of [lo, hi) is written: convert now, straight from the caller's buffer
      // into the device-format snapshot (later host writes cannot leak in), and skip the
      // read-back. The snapshot becomes the device pages.
      uint8_t* out = staged->at(staged->lo);
      for (const auto& n : dci.dcsi_)
        fmt::convert_nest(src_f, host + hb.lo, dst_f, out, to_nest(n, hb.base_elem, dev_b.base_elem));
      result.run = [backend, staged, key] {
        const uint64_t n = staged->size();
        backend->writeStaged(std::move(*staged));
        backend->transferTime(key, true, n);  // the device-format bytes cross PCIe
      };
    } else {
      // Bytes the DCI leaves alone keep their device contents: snapshot the host bytes now, and
      // merge them into the device bytes read back in stream order.
      auto snap = std::make_shared<std::vector<uint8_t>>(host + hb.lo, host + hb.hi);
      result.run = [backend, staged, hb, snap, nests, src_f, dst_f, dev_b, key]() mutable {
        const uint64_t n = staged->size();
        uint8_t* out = staged->at(staged->lo);
        backend->read(staged->lo, out, n);
        for (const auto& nest : nests->dcsi_)
          fmt::convert_nest(src_f, snap->data(), dst_f, out, to_nest(nest, hb.base_elem, dev_b.base_elem));
        snap.reset();
        backend->writeStaged(std::move(*staged));
        backend->transferTime(key, true, n);  // the device-format bytes cross PCIe
      };
    }
  } else {
    result.run = [backend, dev, dev_b, host = p->host, nests, src_f, dst_f, key] {
      const int bits = fmt::bits_per_element(src_f);
      // Device pieces of at most 4 MiB where the nests allow it, else the whole range at once.
      constexpr int64_t kPieceBytes = int64_t{4} << 20;
      std::vector<fmt::StridedNest> pieces;
      std::vector<uint8_t> buf;
      const auto whole = static_cast<int64_t>((dev_b.hi - dev_b.lo) * 8 / uint64_t(bits));
      if (split_for_d2h(nests->dcsi_, kPieceBytes * 8 / bits, 2 * whole + 1, pieces)) {
        for (const auto& piece : pieces) {
          const ByteRange b = bytes_of(src_f, src_extent(piece));
          buf.resize(b.hi - b.lo);
          backend->read(dev.dmva + b.lo, buf.data(), buf.size());
          fmt::StridedNest rel = piece;
          rel.offset_src -= b.base_elem;
          fmt::convert_nest(src_f, buf.data(), dst_f, host, rel);
        }
      } else {
        buf.resize(dev_b.hi - dev_b.lo);
        backend->read(dev.dmva + dev_b.lo, buf.data(), buf.size());
        for (const auto& n : nests->dcsi_)
          fmt::convert_nest(src_f, buf.data(), dst_f, host, to_nest(n, dev_b.base_elem, 0));
      }
      backend->transferTime(key, false, dev_b.hi - dev_b.lo);
    };
  }
  return result;
}

uint64_t stream_key(const detail::StreamImpl* s) {
  return (s->ctx->serial << 32) | static_cast<uint32_t>(s->id);
}

// Errors found at launch surface at synchronize(), in stream order.
detail::Op deferred_error(std::exception_ptr e) {
  detail::Op op;
  op.run = [e] { std::rethrow_exception(e); };
  return op;
}

template <typename Make>
uint64_t launch_checked(detail::StreamImpl* s, Make&& make) {
  detail::Op op;
  try {
    op = make();
  } catch (const std::invalid_argument&) {
    throw;  // programming errors (null params) throw at once
  } catch (...) {
    op = deferred_error(std::current_exception());
  }
  return s->ctx->enqueue(s, std::move(op));
}

}  // namespace

uint64_t RuntimeStream::launchOperationH2D(DmaParams* params) {
  return launch_checked(impl_, [&] { return make_dma(*impl_->ctx, params, true, stream_key(impl_)); });
}

uint64_t RuntimeStream::launchOperationD2H(DmaParams* params) {
  return launch_checked(impl_, [&] { return make_dma(*impl_->ctx, params, false, stream_key(impl_)); });
}

uint64_t RuntimeStream::launchOperationCompute(ComputeParams* params) {
  if (!params) throw std::invalid_argument("flex: launchOperationCompute: null params");
  return launch_checked(impl_, [&] {
    auto& ctx = *impl_->ctx;
    const Resolved prog = resolve(ctx, params->program, "Compute (program)");
    if (params->bootstrap_offset >= prog.size)
      fail("Compute: bootstrap offset " + std::to_string(params->bootstrap_offset) +
           " outside the " + std::to_string(prog.size) + "-byte program");
    vspyre::shim::ComputeLaunch l;
    l.program_dmva = prog.dmva;
    l.program_size = prog.size;
    l.bootstrap_offset = params->bootstrap_offset;
    l.name = params->kernel_name;
    for (const auto* t : params->tensors) {
      const Resolved r = resolve(ctx, t, "Compute (tensor)");
      l.tensors.emplace_back(r.dmva, r.size);
    }
    l.stream_key = stream_key(impl_);
    l.find_live = [core = ctx.core](uint64_t dmva) -> std::optional<vspyre::shim::LiveAllocation> {
      auto r = core->findLive(dmva);
      if (!r) return std::nullopt;
      return vspyre::shim::LiveAllocation{r->base, r->size};
    };
    detail::Op op;
    op.run = [backend = ctx.backend, l = std::move(l)] { backend->launch(l); };
    return op;
  });
}

uint64_t RuntimeStream::fillAsync(const CompositeAddress* dst, double value, DataFormats dtype,
                                  bool /*use_dmai*/) {
  return launch_checked(impl_, [&] {
    auto& ctx = *impl_->ctx;
    const Resolved dev = resolve(ctx, dst, "fill");
    const auto f = to_fmt(dtype);
    if (!fmt::is_convertible(f))
      fail("fill: unsupported data format " + EnumsConversion::dataFormatsToString(dtype));
    const int bits = fmt::bits_per_element(f);
    if (bits >= 8 && (dev.dmva % (bits / 8) != 0 || dev.size % (bits / 8) != 0))
      fail("fill: misaligned: " + std::to_string(dev.size) + " bytes at " + hex(dev.dmva) +
           " is not a whole number of " + std::string(fmt::name(f)) + " elements");
    auto pattern = std::make_shared<std::vector<uint8_t>>(fmt::k_stick_bytes);
    const size_t n = static_cast<size_t>(fmt::k_stick_bytes) * 8 / bits;
    for (size_t i = 0; i < n; ++i) fmt::store_element(f, pattern->data(), i, value);
    detail::Op op;
    op.run = [backend = ctx.backend, dev, pattern] {
      backend->fill(dev.dmva, dev.size, pattern->data(), pattern->size());
    };
    return op;
  });
}

}  // namespace flex
