// Encode/decode of the vspyre program image (program_image.h).
#include "program_image.h"

#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace vspyre::shim {
namespace {

void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}
uint32_t get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{p[i]} << (8 * i);
  return v;
}

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw std::runtime_error(where + ": not a vspyre program image: " + what);
}

}  // namespace

uint64_t fnv1a64(const void* data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

std::vector<uint8_t> encode_image(const ProgramImage& img) {
  nlohmann::json j;
  j["kernel"] = img.kernel;
  j["args"] = nlohmann::json::array();
  for (const auto& a : img.args) {
    if (a.dimension)
      j["args"].push_back({{"kind", "dimension"}, {"value", a.value}});
    else
      j["args"].push_back({{"kind", "address"}, {"slot", a.slot}});
  }
  j["bundle"] = {{"name", img.bundle_name}, {"text", img.bundle_text}};
  j["sdscs"] = nlohmann::json::object();
  for (const auto& [name, text] : img.sdsc_texts) j["sdscs"][name] = text;
  const std::string payload = j.dump();

  std::vector<uint8_t> out(kImageHeaderBytes + payload.size());
  std::memcpy(out.data(), kImageMagic, 8);
  put32(out.data() + 8, kImageVersion);
  put32(out.data() + 12, static_cast<uint32_t>(kImageHeaderBytes));
  put64(out.data() + 16, out.size());
  put64(out.data() + 24, fnv1a64(payload.data(), payload.size()));
  put64(out.data() + 32, img.header.correction_offset);
  put64(out.data() + 40, img.header.correction_bytes);
  put64(out.data() + 48, img.header.pool_offset);
  put64(out.data() + 56, img.header.pool_bytes);
  std::memcpy(out.data() + kImageHeaderBytes, payload.data(), payload.size());
  return out;
}

ImageHeader decode_image_header(const uint8_t* p, size_t n, const std::string& where) {
  if (n < kImageHeaderBytes) bad(where, "shorter than its 64-byte header");
  if (std::memcmp(p, kImageMagic, 8) != 0) bad(where, "magic is not VSPYPRG1");
  if (get32(p + 8) != kImageVersion)
    bad(where, "format version " + std::to_string(get32(p + 8)) + " (expected " +
                   std::to_string(kImageVersion) + ")");
  if (get32(p + 12) != kImageHeaderBytes) bad(where, "header size is not 64");
  ImageHeader h;
  h.total_bytes = get64(p + 16);
  h.payload_hash = get64(p + 24);
  h.correction_offset = get64(p + 32);
  h.correction_bytes = get64(p + 40);
  h.pool_offset = get64(p + 48);
  h.pool_bytes = get64(p + 56);
  if (h.total_bytes < kImageHeaderBytes) bad(where, "total size smaller than the header");
  return h;
}

ProgramImage decode_image(const uint8_t* p, size_t n, const std::string& where) {
  ProgramImage img;
  img.header = decode_image_header(p, n, where);
  if (img.header.total_bytes > n)
    bad(where, "image of " + std::to_string(img.header.total_bytes) + " bytes truncated to " +
                   std::to_string(n));
  const uint8_t* payload = p + kImageHeaderBytes;
  const size_t len = img.header.total_bytes - kImageHeaderBytes;
  if (fnv1a64(payload, len) != img.header.payload_hash) bad(where, "payload hash mismatch");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(payload, payload + len);
    img.kernel = j.at("kernel").get<std::string>();
    for (const auto& a : j.at("args")) {
      ImageArg ia;
      const std::string kind = a.at("kind").get<std::string>();
      if (kind == "dimension") {
        ia.dimension = true;
        ia.value = a.at("value").get<int64_t>();
      } else if (kind == "address") {
        ia.slot = a.at("slot").get<uint32_t>();
      } else {
        bad(where, "argument kind '" + kind + "'");
      }
      img.args.push_back(ia);
    }
    img.bundle_name = j.at("bundle").at("name").get<std::string>();
    img.bundle_text = j.at("bundle").at("text").get<std::string>();
    for (const auto& [name, text] : j.at("sdscs").items())
      img.sdsc_texts[name] = text.get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    bad(where, std::string("payload: ") + e.what());
  }
  return img;
}

}  // namespace vspyre::shim
