// Statistics, one group per component, written as one JSON tree keyed by the SystemC object path
// (card.core_7.lx.bytes_read). Scalars, vectors, histograms and formulas carry a unit and a
// description; formulas are evaluated when the tree is written, so they always agree with their inputs.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vspyre {

class Scalar {
 public:
  Scalar& operator+=(double v) { m_value += v; return *this; }
  Scalar& operator++() { m_value += 1; return *this; }
  void set(double v) { m_value = v; }
  void max_with(double v) { if (v > m_value) m_value = v; }
  double value() const { return m_value; }
 private:
  double m_value = 0;
};

class Vector {
 public:
  explicit Vector(size_t n = 0) : m_values(n, 0.0) {}
  void resize(size_t n) { m_values.resize(n, 0.0); }
  double& operator[](size_t i) { return m_values.at(i); }
  const std::vector<double>& values() const { return m_values; }
 private:
  std::vector<double> m_values;
};

// Fixed-width buckets from `min`; samples outside go to underflow/overflow counts.
class Histogram {
 public:
  Histogram(double min = 0, double bucket = 1, size_t buckets = 16)
      : m_min(min), m_bucket(bucket), m_counts(buckets, 0) {}
  void sample(double v, uint64_t n = 1);
  nlohmann::json to_json() const;
  uint64_t count() const { return m_count; }
  double mean() const { return m_count ? m_sum / static_cast<double>(m_count) : 0.0; }
 private:
  double m_min, m_bucket;
  std::vector<uint64_t> m_counts;
  uint64_t m_under = 0, m_over = 0, m_count = 0;
  double m_sum = 0, m_lo = 0, m_hi = 0;
};

class StatGroup {
 public:
  explicit StatGroup(std::string path = "") : m_path(std::move(path)) {}
  const std::string& path() const { return m_path; }
  void set_path(std::string p) { m_path = std::move(p); }

  Scalar& scalar(const std::string& name, const std::string& unit, const std::string& desc);
  Vector& vector(const std::string& name, size_t n, const std::string& unit, const std::string& desc);
  Histogram& histogram(const std::string& name, double min, double bucket, size_t buckets,
                       const std::string& unit, const std::string& desc);
  void formula(const std::string& name, std::function<double()> f, const std::string& unit,
               const std::string& desc);
  // A nested group (core_7 -> lx), for sub-blocks that are not SystemC modules.
  StatGroup& group(const std::string& name);

  // Writes values into `tree` at this group's path, and units/descriptions into `meta`.
  void write(nlohmann::json& tree, nlohmann::json& meta) const;
  // Looks up a value by name (scalar or formula) for tests and reports. Throws if absent.
  double get(const std::string& name) const;

 private:
  struct Entry {
    std::string name, unit, desc;
    std::unique_ptr<Scalar> scalar;
    std::unique_ptr<Vector> vector;
    std::unique_ptr<Histogram> histogram;
    std::function<double()> formula;
  };
  Entry& add(const std::string& name, const std::string& unit, const std::string& desc);

  std::string m_path;
  std::vector<std::unique_ptr<Entry>> m_entries;
  std::vector<std::unique_ptr<StatGroup>> m_groups;
};

// Every StatGroup of a run registers here so that one call writes the whole tree.
class StatsRegistry {
 public:
  void add(const StatGroup* g) { m_groups.push_back(g); }
  // {"stats": {card: {...}}, "units": {"card.core_0.x": {"unit":..,"desc":..}}}
  nlohmann::json to_json() const;
 private:
  std::vector<const StatGroup*> m_groups;
};

}  // namespace vspyre
