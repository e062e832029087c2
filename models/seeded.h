// Seeded draws that are the same on every platform, compiler and scheduler: splitmix64's
// finaliser over a key built from the seed and whatever identifies the draw.
#pragma once
#include <cstdint>

namespace vspyre {

inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A draw in [0, n) for (a, b, c); 0 when n is 0.
inline uint64_t seeded_below(uint64_t n, uint64_t a, uint64_t b, uint64_t c) {
  return n == 0 ? 0 : mix64(mix64(mix64(a) ^ b) ^ c) % n;
}

}  // namespace vspyre
