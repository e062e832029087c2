// Test helpers for files: a scratch directory removed with everything in it on destruction,
// and reading a whole file.
#pragma once
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace vspyre::testing {

struct TempDir {
  std::filesystem::path dir;
  TempDir() {
    static std::atomic<int> n{0};
    dir = std::filesystem::temp_directory_path() /
          ("vspyre_test_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    std::filesystem::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // Writes `text` to dir/rel (creating folders) and returns the file's path.
  std::string write(const std::string& rel, const std::string& text) const {
    const std::filesystem::path p = dir / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
};

// The whole content of a file ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace vspyre::testing
