#include "sim/exec/npy.h"

#include <cstring>
#include <fstream>
#include <string>

namespace vspyre::exec {

namespace {

[[noreturn]] void bad(const std::filesystem::path& f, const std::string& why) {
  throw ExecError(f.string() + ": " + why);
}

bool little_endian() {
  const uint16_t x = 1;
  uint8_t b;
  std::memcpy(&b, &x, 1);
  return b == 1;
}

}  // namespace

void write_npy(const std::filesystem::path& file, std::span<const float> values,
               std::span<const int64_t> shape) {
  if (!little_endian()) bad(file, "writing .npy needs a little-endian host");
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  if (size_t(n) != values.size())
    bad(file, "shape has " + std::to_string(n) + " elements, data " + std::to_string(values.size()));
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    dict += std::to_string(shape[i]) + (shape.size() == 1 ? "," : i + 1 < shape.size() ? ", " : "");
  dict += "), }";
  // magic(6) + version(2) + len(2) + dict + padding + '\n' is a multiple of 64.
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) bad(file, "cannot open for writing");
  const char magic[] = "\x93NUMPY\x01\x00";
  out.write(magic, 8);
  const uint16_t hl = uint16_t(dict.size());
  out.put(char(hl & 0xff));
  out.put(char(hl >> 8));
  out.write(dict.data(), std::streamsize(dict.size()));
  out.write(reinterpret_cast<const char*>(values.data()), std::streamsize(values.size() * 4));
  if (!out) bad(file, "write failed");
}

NpyArray read_npy(const std::filesystem::path& file) {
  if (!little_endian()) bad(file, "reading .npy needs a little-endian host");
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) bad(file, "is a directory, not a .npy file");
  std::ifstream in(file, std::ios::binary);
  if (!in) bad(file, "cannot open");
  char head[10];
  in.read(head, 8);
  if (!in || std::memcmp(head, "\x93NUMPY", 6) != 0) bad(file, "not a .npy file (bad magic)");
  const int major = uint8_t(head[6]);
  uint32_t hl = 0;
  if (major == 1) {
    uint8_t b[2];
    in.read(reinterpret_cast<char*>(b), 2);
    hl = b[0] | (uint32_t(b[1]) << 8);
  } else if (major == 2 || major == 3) {
    uint8_t b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    hl = b[0] | (uint32_t(b[1]) << 8) | (uint32_t(b[2]) << 16) | (uint32_t(b[3]) << 24);
  } else {
    bad(file, "unsupported .npy version " + std::to_string(major));
  }
  if (!in || hl > (1u << 20)) bad(file, "header length invalid");
  std::string dict(hl, '\0');
  in.read(dict.data(), hl);
  if (!in) bad(file, "truncated header");
  auto field = [&](const std::string& k) -> std::string {
    auto p = dict.find("'" + k + "'");
    if (p == std::string::npos) bad(file, "header has no '" + k + "'");
    p = dict.find(':', p);
    if (p == std::string::npos) bad(file, "header field '" + k + "' malformed");
    return dict.substr(p + 1);
  };
  std::string descr = field("descr");
  descr.erase(0, descr.find_first_not_of(' '));
  if (!descr.empty() && descr[0] == '[')
    bad(file, "a structured dtype (named fields) is not supported (expected little-endian float16/32/64)");
  const auto q1 = descr.find('\''), q2 = descr.find('\'', q1 + 1);
  if (q1 == std::string::npos || q2 == std::string::npos) bad(file, "descr malformed");
  descr = descr.substr(q1 + 1, q2 - q1 - 1);
  int width = 0;
  if (descr == "<f4" || descr == "f4") width = 4;
  else if (descr == "<f8" || descr == "f8") width = 8;
  else if (descr == "<f2" || descr == "f2") width = 2;
  else bad(file, "dtype '" + descr + "' not supported (expected little-endian float16/32/64)");
  std::string fo = field("fortran_order");
  fo.erase(0, fo.find_first_not_of(' '));
  if (fo.rfind("False", 0) != 0) bad(file, "fortran_order arrays are not supported");
  std::string sh = field("shape");
  const auto l = sh.find('('), r = sh.find(')');
  if (l == std::string::npos || r == std::string::npos || r < l) bad(file, "shape malformed");
  sh = sh.substr(l + 1, r - l - 1);
  NpyArray a;
  size_t pos = 0;
  int64_t n = 1;
  while (pos < sh.size()) {
    while (pos < sh.size() && (sh[pos] == ' ' || sh[pos] == ',')) ++pos;
    if (pos >= sh.size()) break;
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(sh.substr(pos), &used);
    } catch (const std::exception&) {
      bad(file, "shape entry is not an integer");
    }
    if (v < 0 || v > (1ll << 40)) bad(file, "shape entry out of range");
    a.shape.push_back(v);
    n *= v;
    if (n > (1ll << 34)) bad(file, "array too large");
    pos += used;
  }
  std::vector<uint8_t> raw(size_t(n) * size_t(width));
  in.read(reinterpret_cast<char*>(raw.data()), std::streamsize(raw.size()));
  if (!in) bad(file, "data shorter than the shape says (" + std::to_string(n) + " elements)");
  // Bytes left over mean the header does not describe the data (a float16 header over float32
  // values would otherwise read as garbage).
  if (in.peek() != std::char_traits<char>::eof())
    bad(file, "data longer than the shape and dtype say (" + std::to_string(n) + " elements of " + descr + ")");
  a.values.resize(size_t(n));
  const fmt::DataFormat f = width == 4 ? fmt::DataFormat::IEEE_FP32 : fmt::DataFormat::IEEE_FP16;
  if (width == 8) {
    for (size_t i = 0; i < size_t(n); ++i) {
      double d;
      std::memcpy(&d, raw.data() + i * 8, 8);
      a.values[i] = float(d);
    }
  } else {
    fmt::convert(f, raw.data(), fmt::DataFormat::IEEE_FP32, a.values.data(), size_t(n));
  }
  return a;
}

}  // namespace vspyre::exec
