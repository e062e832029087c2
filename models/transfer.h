// What travels with a TLM transaction between the card's blocks. Strong index types keep core
// ids, channels and stick counts from being mixed up.
#pragma once
#include <cstdint>
#include <vector>

#include <tlm>

namespace vspyre {

enum class CoreId : uint32_t {};
constexpr uint32_t idx(CoreId c) { return static_cast<uint32_t>(c); }

inline constexpr uint64_t kStickBytes = 128;  // every data movement is whole 128-byte sticks

// An outer loop of a multi-level strided transfer: `count` repeats, `stride` bytes apart.
struct DmaLevel {
  uint64_t count = 1, stride = 0;
};

// How many pieces the outer levels repeat a transfer's pattern (1 without levels).
inline uint64_t dma_repeats(const std::vector<DmaLevel>& outer) {
  uint64_t n = 1;
  for (const DmaLevel& l : outer) n *= l.count;
  return n;
}

// Byte offset of piece `p` (first level fastest).
inline uint64_t dma_piece_offset(const std::vector<DmaLevel>& outer, uint64_t p) {
  uint64_t off = 0;
  for (const DmaLevel& l : outer) {
    off += (p % l.count) * l.stride;
    p /= l.count;
  }
  return off;
}

// The bytes past its start address that a strided transfer reaches: `bytes` in runs of
// `run_bytes` (0: one run) `stride` apart, that piece repeated over the outer levels; the end of
// its last piece's last run.
inline uint64_t dma_extent(uint64_t bytes, uint64_t run_bytes, uint64_t stride, const std::vector<DmaLevel>* outer) {
  const uint64_t run = run_bytes ? run_bytes : bytes;
  const uint64_t runs = run ? (bytes + run - 1) / run : 0;
  uint64_t e = runs ? (runs - 1) * (run_bytes ? stride : 0) + (bytes - (runs - 1) * run) : 0;
  if (outer)
    for (const DmaLevel& l : *outer) e += (l.count ? l.count - 1 : 0) * l.stride;
  return e;
}

// Who sent a transaction and, for ring transfers, where it goes.
struct TransferExt : tlm::tlm_extension<TransferExt> {
  CoreId src{0};
  CoreId dst{0};
  // Ring: the transfer is done when the receiver's acknowledgement is back at the sender (a
  // descriptor-based copy retiring its slot), not when the last byte arrives.
  bool acked = false;
  // Ring: partial sums, over the reduce-sum ring (its own links and bandwidth).
  bool reduce = false;
  // Device memory, flow mode: the transaction is a whole DMA operation (a stream), not one request.
  // `stream_bytes` bytes move as runs of `run_bytes` (0: one contiguous run) every `stride` bytes;
  // the engine keeps `outstanding` requests of at most `request_bytes` in flight, issued no closer
  // than `issue_ps` apart. The memory derives the stream's rate from these and its own latency.
  // `outer` (may be null) repeats that pattern at the offsets its levels enumerate, first level
  // fastest; `stream_bytes` counts one repeat.
  bool stream = false;
  uint64_t stream_bytes = 0, run_bytes = 0, stride = 0, request_bytes = 0;
  const std::vector<DmaLevel>* outer = nullptr;
  uint32_t outstanding = 1;
  double issue_ps = 0;
  // dma.run_order serial: runs longer than a stick go one after another (each starts when the
  // previous one is back), so the stream has at most one run in flight.
  bool serial_runs = false;
  // Device memory, request mode: where the sender's next request will go (0 bytes: not known). A
  // hint for the host only (the memory fetches its bookkeeping for it early); no effect on timing.
  uint64_t next_addr = 0, next_bytes = 0;
  tlm_extension_base* clone() const override { return new TransferExt(*this); }
  void copy_from(const tlm_extension_base& other) override {
    *this = static_cast<const TransferExt&>(other);
  }
};

}  // namespace vspyre
