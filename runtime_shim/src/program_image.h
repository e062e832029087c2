// The device program image vspyre's dxp_standalone writes as spyreCodeDir/init_binary.bin and
// the shim's Compute launch reads back out of device memory (runtime_shim/README.md, "Program
// image"). IBM's real job binary is opaque; ours carries the kernel bundle itself.
//
// Layout (little-endian), at the job binary's address (job_bin_ptr):
//   0   char[8]  magic "VSPYPRG1"
//   8   u32      format version (1)
//   12  u32      header bytes (64)
//   16  u64      total image bytes (header + payload)
//   24  u64      FNV-1a 64 hash of the payload
//   32  u64      correction area offset, relative to the start of the program allocation
//   40  u64      correction area bytes
//   48  u64      HBM pool offset, relative to the start of the program allocation
//   56  u64      HBM pool bytes (0: the bundle has no pool)
//   64  payload: UTF-8 JSON {"kernel": name, "args": [{"kind": "address", "slot": k} |
//                {"kind": "dimension", "value": v}, ...], "bundle": {"name", "text"},
//                "sdscs": {file: text, ...}}
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "flex/flex_api.h"

namespace vspyre::shim {

inline constexpr char kImageMagic[8] = {'V', 'S', 'P', 'Y', 'P', 'R', 'G', '1'};
inline constexpr uint32_t kImageVersion = 1;
inline constexpr uint64_t kImageHeaderBytes = 64;

struct ImageArg {
  bool dimension = false;
  uint32_t slot = 0;   // address args: index of the int64 DMVA in the correction blob
  int64_t value = 0;   // dimension args: the value bound at every launch
};

struct ImageHeader {
  uint64_t total_bytes = 0;
  uint64_t payload_hash = 0;
  uint64_t correction_offset = 0;
  uint64_t correction_bytes = 0;
  uint64_t pool_offset = 0;
  uint64_t pool_bytes = 0;
};

struct ProgramImage {
  ImageHeader header;
  std::string kernel;
  std::vector<ImageArg> args;  // one per bundle argument, in bundle order
  std::string bundle_name = "bundle.mlir";
  std::string bundle_text;
  std::map<std::string, std::string> sdsc_texts;  // sdsc_filename -> JSON text
};

FLEX_API uint64_t fnv1a64(const void* data, size_t n);

// Serialises `img` (header.total_bytes and payload_hash are filled in).
FLEX_API std::vector<uint8_t> encode_image(const ProgramImage& img);
// Parses the 64-byte header; throws std::runtime_error naming `where` when it is not one.
FLEX_API ImageHeader decode_image_header(const uint8_t* p, size_t n, const std::string& where);
// Parses a whole image (header + payload), checking the hash; throws std::runtime_error.
FLEX_API ProgramImage decode_image(const uint8_t* p, size_t n, const std::string& where);

}  // namespace vspyre::shim
