// floor(x / d) for a fixed positive divisor d and arguments that mostly grow slowly (a channel's
// refresh epoch of the current time), exactly as std::floor(x / d) computes it, without dividing
// for every argument: the range of x giving the last quotient is worked out once (correctly
// rounded division is monotonic in x, so that range is an interval of doubles), and an argument
// inside it gets the quotient straight away.
#pragma once
#include <cmath>
#include <limits>

namespace vspyre {

class FloorDiv {
 public:
  explicit FloorDiv(double d = 1.0) : m_d(d) {}

  double operator()(double x) {
    if (x >= m_lo && x < m_hi) return m_q;
    const double q = std::floor(x / m_d);
    m_q = q;
    m_lo = first_reaching(q, x, true);
    m_hi = first_reaching(q + 1, x, false);
    return q;
  }

 private:
  // The smallest double y with floor(y / d) >= k, searched from k * d (next to the answer, since
  // the division is correctly rounded). `x` is an argument known to give k - 1 + lower: when the
  // search does not settle quickly (it always should), it returns a bound that keeps the cache
  // from claiming anything it has not checked (x itself for the lower bound, x for the upper).
  double first_reaching(double k, double x, bool lower) const {
    auto reaches = [&](double y) { return std::floor(y / m_d) >= k; };
    double y = k * m_d;
    if (!std::isfinite(y)) return lower ? x : std::nextafter(x, std::numeric_limits<double>::infinity());
    constexpr int kMaxSteps = 64;
    const double inf = std::numeric_limits<double>::infinity();
    if (reaches(y)) {
      for (int i = 0; i < kMaxSteps; ++i) {
        const double below = std::nextafter(y, -inf);
        if (!reaches(below)) return y;
        y = below;
      }
    } else {
      for (int i = 0; i < kMaxSteps; ++i) {
        y = std::nextafter(y, inf);
        if (reaches(y)) return y;
      }
    }
    return lower ? x : std::nextafter(x, inf);
  }

  double m_d;
  double m_lo = 0, m_hi = 0;  // empty until the first call
  double m_q = 0;
};

}  // namespace vspyre
