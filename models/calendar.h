// A resource's time as a calendar of fixed bins, each holding the resource time still free in it.
// Work placed on it fills the first free time at or after it is ready, at no more than a given
// rate, so a requester running behind in simulated time (temporal decoupling) still finds the
// capacity that was free at its time. Used for the whole device's bus time in the flow DMA model
// and for the ports through which the cores reach device memory.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/engine/error.h"
#include "sim/engine/units.h"

namespace vspyre {

class BinCalendar {
 public:
  // `bin`: bin length (ps); `width`: how many units of resource time one ps of real time holds
  // (the channel count for the device's bus, 1 for a port); `capacity(k)`: resource time in bin k
  // (bin x width less any downtime); `min_free`: a bin with less left than this counts as full.
  BinCalendar(double bin, double width, double min_free, std::function<double(int64_t)> capacity)
      : m_bin(bin), m_width(width), m_min_free(min_free), m_capacity(std::move(capacity)) {}

  // Forgets the bins before `index`: nothing can be placed there any more.
  void prune_before(int64_t index) {
    while (m_head < m_bins.size() && m_first < index) {
      ++m_head;
      ++m_first;
    }
    if (m_head == m_bins.size()) {
      m_bins.clear();
      m_head = 0;
      m_first = std::max(m_first, index);
    } else if (m_head >= 1024 && 2 * m_head >= m_bins.size()) {
      m_bins.erase(m_bins.begin(), m_bins.begin() + static_cast<std::ptrdiff_t>(m_head));  // keep it compact
      m_head = 0;
    }
    m_open_from = std::max(m_open_from, m_first);
  }

  // Places `need` units of resource time no earlier than `ready`, using at most `rate` units per
  // ps; returns when the last of it ends.
  double place(double ready, double need, double rate) {
    rate = std::min(rate, m_width);
    double left = need;
    auto idx = static_cast<int64_t>(std::floor(ready / m_bin));
    // Every bin before m_open_from is full: start there at the earliest.
    for (idx = std::max(idx, m_open_from);; ++idx) {
      Bin& b = at(idx);
      if (b.free < m_min_free) {
        if (idx == m_open_from) ++m_open_from;
        continue;
      }
      const double lo = static_cast<double>(idx) * m_bin;
      const double start = std::max(lo, ready);
      const double usable = std::min(b.free, (lo + m_bin - start) * rate);
      if (usable <= 0) continue;
      const double take = std::min(usable, left);
      b.free -= take;
      left -= take;
      if (b.free < m_min_free && idx == m_open_from) ++m_open_from;
      if (left <= 1e-9) {
        // Ends where the bin's work reaches across the width, and no sooner than its rate allows.
        const double end = std::max(lo + (b.cap - b.free) / m_width, start + take / rate);
        return std::max(end, ready + need / rate);
      }
    }
  }

  double bin() const { return m_bin; }

 private:
  struct Bin {
    double cap = 0, free = 0;
  };
  // The bin `index` (created with its capacity if new). The reference lasts until the next call.
  Bin& at(int64_t& index) {
    // Bins before the first kept one are gone: work aimed there starts at the first.
    if (index < m_first) index = m_first;
    // A calendar reaching this far past its first kept bin (the current time) holds transfers
    // that last hours at the card's rates: some rate or clock is off by orders of magnitude, and
    // the bins would fill the host's memory.
    if (index - m_first > kMaxBins)
      throw InputError("a transfer reaches " + std::to_string(index - m_first) + " bins (of " + format_time_ps(m_bin) +
                       ") past the current time on a memory calendar: a clock, bandwidth or rate in the config is "
                       "likely off by orders of magnitude");
    for (auto kept = static_cast<int64_t>(m_bins.size() - m_head); index >= m_first + kept; ++kept) {
      const double cap = m_capacity(m_first + kept);
      m_bins.push_back(Bin{cap, cap});
    }
    return m_bins[m_head + static_cast<size_t>(index - m_first)];
  }

  static constexpr int64_t kMaxBins = int64_t{1} << 23;  // 8.4 s of 1 us bins, 134 MB
  double m_bin, m_width, m_min_free;
  std::function<double(int64_t)> m_capacity;
  // Bins m_first, m_first + 1, ... are m_bins[m_head], m_bins[m_head + 1], ... (a vector with a
  // moving front rather than a deque: place() indexes it in its inner loop).
  std::vector<Bin> m_bins;
  size_t m_head = 0;
  int64_t m_first = 0;
  int64_t m_open_from = 0;  // every bin before this one is full
};

}  // namespace vspyre
