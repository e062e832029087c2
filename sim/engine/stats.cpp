#include "sim/engine/stats.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace vspyre {

void Histogram::sample(double v, uint64_t n) {
  if (m_count == 0) m_lo = m_hi = v;
  m_lo = std::min(m_lo, v);
  m_hi = std::max(m_hi, v);
  m_count += n;
  m_sum += v * static_cast<double>(n);
  if (v < m_min) {
    m_under += n;
    return;
  }
  const auto b = static_cast<size_t>((v - m_min) / m_bucket);
  if (b >= m_counts.size()) m_over += n;
  else m_counts[b] += n;
}

nlohmann::json Histogram::to_json() const {
  return {{"min", m_min},   {"bucket", m_bucket}, {"counts", m_counts}, {"underflow", m_under},
          {"overflow", m_over}, {"samples", m_count}, {"mean", mean()}, {"lo", m_lo}, {"hi", m_hi}};
}

StatGroup::Entry& StatGroup::add(const std::string& name, const std::string& unit,
                                 const std::string& desc) {
  for (const auto& e : m_entries)
    if (e->name == name) throw std::logic_error("stat '" + name + "' declared twice in " + m_path);
  auto e = std::make_unique<Entry>();
  e->name = name;
  e->unit = unit;
  e->desc = desc;
  m_entries.push_back(std::move(e));
  return *m_entries.back();
}

Scalar& StatGroup::scalar(const std::string& name, const std::string& unit, const std::string& desc) {
  auto& e = add(name, unit, desc);
  e.scalar = std::make_unique<Scalar>();
  return *e.scalar;
}
Vector& StatGroup::vector(const std::string& name, size_t n, const std::string& unit,
                          const std::string& desc) {
  auto& e = add(name, unit, desc);
  e.vector = std::make_unique<Vector>(n);
  return *e.vector;
}
Histogram& StatGroup::histogram(const std::string& name, double min, double bucket, size_t buckets,
                                const std::string& unit, const std::string& desc) {
  auto& e = add(name, unit, desc);
  e.histogram = std::make_unique<Histogram>(min, bucket, buckets);
  return *e.histogram;
}
void StatGroup::formula(const std::string& name, std::function<double()> f, const std::string& unit,
                        const std::string& desc) {
  add(name, unit, desc).formula = std::move(f);
}
StatGroup& StatGroup::group(const std::string& name) {
  for (auto& g : m_groups)
    if (g->path() == m_path + "." + name) return *g;
  m_groups.push_back(std::make_unique<StatGroup>(m_path + "." + name));
  return *m_groups.back();
}

double StatGroup::get(const std::string& name) const {
  for (const auto& e : m_entries) {
    if (e->name != name) continue;
    if (e->scalar) return e->scalar->value();
    if (e->formula) return e->formula();
  }
  throw std::out_of_range("no scalar stat '" + name + "' in " + m_path);
}

namespace {
nlohmann::json& at_path(nlohmann::json& root, const std::string& path) {
  nlohmann::json* node = &root;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!key.empty()) node = &(*node)[key];
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return *node;
}
}  // namespace

void StatGroup::write(nlohmann::json& tree, nlohmann::json& meta) const {
  nlohmann::json& node = at_path(tree, m_path);
  for (const auto& e : m_entries) {
    nlohmann::json v;
    if (e->scalar) v = e->scalar->value();
    else if (e->vector) v = e->vector->values();
    else if (e->histogram) v = e->histogram->to_json();
    else if (e->formula) {
      const double x = e->formula();
      v = std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr);
    }
    node[e->name] = std::move(v);
    meta[m_path + "." + e->name] = {{"unit", e->unit}, {"desc", e->desc}};
  }
  for (const auto& g : m_groups) g->write(tree, meta);
}

nlohmann::json StatsRegistry::to_json() const {
  nlohmann::json tree = nlohmann::json::object(), meta = nlohmann::json::object();
  for (const auto* g : m_groups) g->write(tree, meta);
  return {{"stats", tree}, {"units", meta}};
}

}  // namespace vspyre
