// The host-speed helpers of the memory model must give exactly what the plain computations they
// replace give: FlatMap against std::unordered_map under the memory model's pattern of use, and
// FloorDiv against std::floor(x / d), boundaries included.
#include "catch.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <unordered_map>

#include "models/flat_map.h"
#include "models/floor_div.h"

using namespace vspyre;

namespace {
struct Val {
  uint64_t a = 0;
  double t = 0;
  bool operator==(const Val& o) const { return a == o.a && t == o.t; }
};
}  // namespace

TEST_CASE("FlatMap behaves as std::unordered_map for find, insert, erase, size and clear", "[models][host_speed]") {
  std::mt19937_64 rng(7);
  FlatMap<Val> flat(4);  // small on purpose: it must grow
  std::unordered_map<uint64_t, Val> ref;
  // Keys as the memory model makes them (address times a constant, xor the size), drawn from a
  // small range so that inserts overwrite, erases hit, and probe chains collide.
  auto key = [&] {
    const uint64_t addr = (rng() % 3000) * 4096, bytes = 128 << (rng() % 6);
    return addr * 1315423911ull ^ bytes;
  };
  for (int step = 0; step < 200000; ++step) {
    const uint64_t k = key();
    const int op = static_cast<int>(rng() % 10);
    if (op < 4) {
      const Val* f = flat.find(k);
      auto it = ref.find(k);
      REQUIRE((f != nullptr) == (it != ref.end()));
      if (f) REQUIRE(*f == it->second);
    } else if (op < 8) {
      const Val v{rng(), static_cast<double>(step)};
      flat.insert_or_assign(k, v);
      ref[k] = v;
    } else {
      flat.erase(k);
      ref.erase(k);
    }
    REQUIRE(flat.size() == ref.size());
    if (ref.size() > 2000 && rng() % 50 == 0) {  // the memory model bounds its tables by clearing them
      flat.clear();
      ref.clear();
    }
  }
  // Everything still in the reference is found, with its value.
  for (const auto& [k, v] : ref) {
    const Val* f = flat.find(k);
    REQUIRE(f != nullptr);
    CHECK(*f == v);
  }
}

TEST_CASE("FlatMap clear forgets every entry and the map stays usable", "[models][host_speed]") {
  FlatMap<Val> m(8);
  for (uint64_t k = 0; k < 100; ++k) m.insert_or_assign(k * 977, Val{k, 0});
  CHECK(m.size() == 100);
  m.clear();
  CHECK(m.size() == 0);
  for (uint64_t k = 0; k < 100; ++k) CHECK(m.find(k * 977) == nullptr);
  m.insert_or_assign(5, Val{1, 2});
  REQUIRE(m.find(5) != nullptr);
  CHECK(m.find(5)->a == 1);
  m.erase(5);
  CHECK(m.find(5) == nullptr);
  CHECK(m.size() == 0);
}

TEST_CASE("FloorDiv equals std::floor of the quotient, at and around every boundary", "[models][host_speed]") {
  const double inf = std::numeric_limits<double>::infinity();
  for (const double d : {3906000.0, 3906.25, 1e6 / 3.0, 7.0}) {
    FloorDiv f(d);
    std::mt19937_64 rng(11);
    // Slowly growing arguments (the memory model's use), with jumps back and forth.
    double x = -3 * d;
    for (int i = 0; i < 100000; ++i) {
      x += std::uniform_real_distribution<double>(0, d / 50)(rng);
      if (i % 997 == 0) x -= d * std::uniform_real_distribution<double>(0, 3)(rng);
      REQUIRE(f(x) == std::floor(x / d));
    }
    // Within a few ulps of k * d, for many k: where rounding of the quotient decides.
    for (int k = -5; k < 2000; k += (k < 20 ? 1 : 97)) {
      double y = k * d;
      for (int s = 0; s < 6; ++s) y = std::nextafter(y, -inf);
      for (int s = 0; s < 12; ++s) {
        REQUIRE(f(y) == std::floor(y / d));
        y = std::nextafter(y, inf);
      }
    }
  }
}
