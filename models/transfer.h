// What travels with a TLM transaction between the card's blocks. Strong index types keep core
// ids, channels and stick counts from being mixed up.
#pragma once
#include <cstdint>

#include <tlm>

namespace vspyre {

enum class CoreId : uint32_t {};
constexpr uint32_t idx(CoreId c) { return static_cast<uint32_t>(c); }

inline constexpr uint64_t kStickBytes = 128;  // every data movement is whole 128-byte sticks

// Who sent a transaction and, for ring transfers, where it goes.
struct TransferExt : tlm::tlm_extension<TransferExt> {
  CoreId src{0};
  CoreId dst{0};
  // Ring: the transfer is done when the receiver's acknowledgement is back at the sender (a
  // descriptor-based copy retiring its slot), not when the last byte arrives.
  bool acked = false;
  tlm_extension_base* clone() const override { return new TransferExt(*this); }
  void copy_from(const tlm_extension_base& other) override {
    *this = static_cast<const TransferExt&>(other);
  }
};

}  // namespace vspyre
