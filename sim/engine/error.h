// Error types that decide the exit code: InputError is the user's (exit 1), anything else is ours (exit 2).
#pragma once
#include <stdexcept>
#include <string>

namespace vspyre {

// Where a value came from, for messages: "configs/spyre.yaml:12:5" or "-p card.core.count".
struct SourceLoc {
  std::string file;
  int line = 0;    // 1-based; 0 when not from a file
  int column = 0;  // 1-based
  std::string str() const {
    if (line <= 0) return file.empty() ? std::string("<default>") : file;
    return file + ":" + std::to_string(line) + ":" + std::to_string(column);
  }
};

// Bad input from the user: a config, a bundle, a command line. One line, names where and what.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ConfigError : public InputError {
 public:
  ConfigError(const SourceLoc& loc, const std::string& what) : InputError(loc.str() + ": " + what) {}
};

}  // namespace vspyre
