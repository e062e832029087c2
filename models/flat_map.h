// A map from 64-bit keys to small values, for the memory model's tables of recent reads (read
// coalescing). Behaves exactly as std::unordered_map<uint64_t, V> for the operations it offers
// (find, insert or overwrite, erase, size, clear), but keeps its entries in one flat array with
// linear probing: one cache line per lookup instead of a bucket and a node, no allocation per
// insertion, and clear() in constant time (a generation count marks which slots are live).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#ifdef __linux__
#include <sys/mman.h>
#endif

namespace vspyre {

template <typename V>
class FlatMap {
 public:
  // `expected`: how many entries the map is expected to hold at most (it grows past that, at a cost).
  explicit FlatMap(size_t expected = 64) {
    size_t cap = 16;
    while (cap < 2 * expected) cap *= 2;
    allocate(cap);
  }

  size_t size() const { return m_size; }

  // A hint that `key` will be looked up soon: starts loading its slot (no effect on the contents).
  void prefetch(uint64_t key) const { __builtin_prefetch(&m_slots[home(key)]); }

  size_t capacity() const { return m_mask + 1; }

  // The value stored under `key`, or null.
  V* find(uint64_t key) {
    for (size_t i = home(key);; i = (i + 1) & m_mask) {
      Slot& s = m_slots[i];
      if (s.gen != m_gen) return nullptr;
      if (s.key == key) return &s.value;
    }
  }

  // Stores `value` under `key`, replacing what was there.
  void insert_or_assign(uint64_t key, const V& value) {
    if (2 * (m_size + 1) > capacity()) grow();
    for (size_t i = home(key);; i = (i + 1) & m_mask) {
      Slot& s = m_slots[i];
      if (s.gen != m_gen) {
        s = Slot{key, m_gen, value};
        ++m_size;
        return;
      }
      if (s.key == key) {
        s.value = value;
        return;
      }
    }
  }

  // Removes `key` if present (backward-shift deletion: no tombstones, probe chains stay short).
  void erase(uint64_t key) {
    size_t i = home(key);
    for (;; i = (i + 1) & m_mask) {
      const Slot& s = m_slots[i];
      if (s.gen != m_gen) return;
      if (s.key == key) break;
    }
    // Move later entries of the chain back into the hole when their home allows it.
    for (size_t j = (i + 1) & m_mask;; j = (j + 1) & m_mask) {
      Slot& s = m_slots[j];
      if (s.gen != m_gen) break;
      const size_t h = home(s.key);
      // s may move to i when i lies cyclically in [h, j).
      if (((j - h) & m_mask) >= ((j - i) & m_mask)) {
        m_slots[i] = s;
        i = j;
      }
    }
    m_slots[i].gen = m_gen - 1;  // dead (never equals the current generation)
    --m_size;
  }

  void clear() {
    m_size = 0;
    if (++m_gen == 0) {  // generations wrapped: really clear, so no old slot looks live
      for (size_t i = 0; i <= m_mask; ++i) m_slots[i].gen = 0;
      m_gen = 1;
    }
  }

 private:
  struct Slot {
    uint64_t key = 0;
    uint32_t gen = 0;  // live when equal to m_gen
    V value{};
  };
  size_t home(uint64_t key) const {
    // Fibonacci hashing: the keys are products of addresses, whose low bits repeat.
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & m_mask;
  }
  void grow() {
    const size_t old_cap = m_mask + 1;
    std::unique_ptr<Slot[], Free> old = std::move(m_slots);
    const uint32_t g = m_gen;
    allocate(old_cap * 2);
    m_gen = 1;
    m_size = 0;
    for (size_t i = 0; i < old_cap; ++i)
      if (old[i].gen == g) insert_or_assign(old[i].key, old[i].value);
  }
  // A table of megabytes is looked up at random, a TLB miss per lookup on 4 KiB pages: large tables
  // ask for transparent huge pages.
  void allocate(size_t cap) {
    constexpr size_t kHuge = size_t{2} << 20;
    size_t bytes = cap * sizeof(Slot);
    const size_t align = bytes >= kHuge ? kHuge : alignof(Slot) > 64 ? alignof(Slot) : 64;
    bytes = (bytes + align - 1) / align * align;
    void* p = std::aligned_alloc(align, bytes);
    if (!p) throw std::bad_alloc();
#ifdef __linux__
    if (align == kHuge) madvise(p, bytes, MADV_HUGEPAGE);
#endif
    Slot* slots = static_cast<Slot*>(p);
    for (size_t i = 0; i < cap; ++i) new (&slots[i]) Slot{};
    m_slots.reset(slots);
    m_mask = cap - 1;
  }
  struct Free {
    void operator()(Slot* p) const { std::free(p); }  // Slot is trivially destructible
  };

  std::unique_ptr<Slot[], Free> m_slots;
  size_t m_mask = 0;
  size_t m_size = 0;
  uint32_t m_gen = 1;
};

// A table of recent events that matter only for a while (the memory's reads that a later read can
// still coalesce with), in two FlatMap generations: an insertion at time t more than `span`
// after the current generation began starts a new one and drops the one before it whole. So the
// table holds the entries of the last one to two spans and stays small and in cache however
// long the simulation runs. What it drops was inserted at least `span` before the insertion
// that drops it (its users pick `span` so that such entries can no longer match), except when a
// generation passes `limit` entries: then both are emptied, as a single bounded table would be.
// Lookups see the current generation first (its entry is the newer when both hold the key).
template <typename V>
class RecentTable {
 public:
  V* find(uint64_t key) {
    if (V* v = m_maps[m_cur].find(key)) return v;
    return m_maps[m_cur ^ 1].find(key);
  }
  void prefetch(uint64_t key) const {
    m_maps[0].prefetch(key);
    m_maps[1].prefetch(key);
  }
  void erase(uint64_t key) {
    m_maps[0].erase(key);
    m_maps[1].erase(key);
  }
  // `limit`: when the current generation holds more entries than this, both are emptied first
  // (a bound on memory for spans that see millions of events).
  void insert_or_assign(uint64_t key, const V& value, double t, double span, size_t limit) {
    if (t - m_start > span) {
      m_cur ^= 1;
      m_maps[m_cur].clear();
      m_start = t;
    }
    if (m_maps[m_cur].size() > limit) {
      m_maps[0].clear();
      m_maps[1].clear();
    }
    m_maps[m_cur].insert_or_assign(key, value);
  }
  size_t size() const { return m_maps[0].size() + m_maps[1].size(); }

 private:
  FlatMap<V> m_maps[2];
  int m_cur = 0;
  double m_start = -1e300;
};

}  // namespace vspyre
