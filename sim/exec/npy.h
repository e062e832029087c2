// Minimal NumPy .npy I/O for host tensors (C order; write: little-endian fp32; read: fp16, fp32
// or fp64, little-endian, format versions 1-3). Errors throw ExecError naming the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "sim/exec/exec.h"

namespace vspyre::exec {

void write_npy(const std::filesystem::path& file, std::span<const float> values,
               std::span<const int64_t> shape);

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> values;  // converted to fp32 (fp64 rounds to nearest)
};
NpyArray read_npy(const std::filesystem::path& file);

}  // namespace vspyre::exec
