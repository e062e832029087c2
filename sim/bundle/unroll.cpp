// Unrolling: walks the Execute/Loop tree in program order and binds every symbol to a value.
#include <limits>

#include "sim/bundle/mlir.h"

namespace vspyre::bundle {
namespace {

constexpr uint64_t k_saturated = std::numeric_limits<uint64_t>::max();

uint64_t sat_add(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? k_saturated : r;
}
uint64_t sat_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? k_saturated : r;
}

uint64_t count_steps(const std::vector<Step>& steps) {
  uint64_t n = 0;
  for (const Step& s : steps) {
    if (const auto* e = std::get_if<Execute>(&s.node)) {
      (void)e;
      n = sat_add(n, 1);
    } else {
      const Loop& l = std::get<Loop>(s.node);
      n = sat_add(n, sat_mul(l.trip_count(), count_steps(l.body)));
    }
  }
  return n;
}

class Unroller {
 public:
  Unroller(const Bundle& b, const Bindings& bindings, const CardLimits& limits)
      : m_bundle(b), m_bindings(bindings), m_limits(limits), m_loop_values(b.num_loops, 0) {}

  std::vector<Execution> run() {
    walk(m_bundle.steps);
    return std::move(m_out);
  }

 private:
  std::string where(int line) const { return m_bundle.file + ":" + std::to_string(line); }

  void walk(const std::vector<Step>& steps) {
    for (const Step& s : steps) {
      if (const auto* e = std::get_if<Execute>(&s.node)) {
        emit(*e);
        continue;
      }
      const Loop& l = std::get<Loop>(s.node);
      // A body that executes nothing is skipped outright, so the iterations visited never
      // exceed the executions produced (no hang on a huge empty loop).
      if (count_steps(l.body) == 0) continue;
      uint64_t trips = l.trip_count();
      for (uint64_t k = 0; k < trips; ++k) {
        // lb + k*step stays below ub, so it fits in int64.
        m_loop_values[l.id] = static_cast<int64_t>(static_cast<uint64_t>(l.lb) +
                                                   k * static_cast<uint64_t>(l.step));
        m_stack.push_back(m_loop_values[l.id]);
        walk(l.body);
        m_stack.pop_back();
      }
    }
  }

  void emit(const Execute& e) {
    if (m_out.size() >= m_limits.max_executions)
      throw LoadError(where(e.line) + ": unrolled bundle exceeds " +
                      std::to_string(m_limits.max_executions) + " executions");
    m_bindings_total += e.symbol_ids.size();
    if (m_bindings_total > m_limits.max_symbol_bindings)
      throw LoadError(where(e.line) + ": unrolled bundle exceeds " +
                      std::to_string(m_limits.max_symbol_bindings) + " symbol bindings");
    Execution x;
    x.source = &e;
    x.sdsc_file = e.sdsc_file;
    x.loop_indices = m_stack;
    for (size_t i = 0; i < e.symbol_ids.size() && i < e.operands.size(); ++i) {
      int64_t v = evaluate(e.operands[i], m_bindings, m_loop_values, where(e.line));
      if (v < 0)
        throw LoadError(where(e.line) + ": symbol " + std::to_string(e.symbol_ids[i]) +
                        " evaluates to negative value " + std::to_string(v));
      x.symbols.emplace(e.symbol_ids[i], static_cast<uint64_t>(v));
    }
    m_out.push_back(std::move(x));
  }

  const Bundle& m_bundle;
  const Bindings& m_bindings;
  const CardLimits& m_limits;
  std::vector<int64_t> m_loop_values;
  std::vector<int64_t> m_stack;
  std::vector<Execution> m_out;
  uint64_t m_bindings_total = 0;
};

}  // namespace

uint64_t Loop::trip_count() const {
  if (step <= 0 || ub <= lb) return 0;
  uint64_t span = static_cast<uint64_t>(ub) - static_cast<uint64_t>(lb);  // exact in two's complement
  return (span - 1) / static_cast<uint64_t>(step) + 1;
}

uint64_t count_executions(const Bundle& b) { return count_steps(b.steps); }

int64_t evaluate(const AffineValue& v, const Bindings& bindings,
                 const std::vector<int64_t>& loop_values, const std::string& where) {
  int64_t acc = v.constant;
  for (const Term& t : v.terms) {
    int64_t x = 0;
    switch (t.kind) {
      case AtomKind::arg:
        if (t.index >= bindings.args.size())
          throw LoadError(where + ": argument " + std::to_string(t.index) + " is not bound");
        if (bindings.args[t.index] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          throw LoadError(where + ": argument " + std::to_string(t.index) + " value out of range");
        x = static_cast<int64_t>(bindings.args[t.index]);
        break;
      case AtomKind::pool:
        if (bindings.pool_base > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          throw LoadError(where + ": pool base out of range");
        x = static_cast<int64_t>(bindings.pool_base);
        break;
      case AtomKind::loop_var:
        if (t.index >= loop_values.size())
          throw LoadError(where + ": loop variable out of scope");
        x = loop_values[t.index];
        break;
    }
    int64_t p;
    if (__builtin_mul_overflow(t.coeff, x, &p) || __builtin_add_overflow(acc, p, &acc))
      throw LoadError(where + ": integer overflow evaluating a symbol value");
  }
  return acc;
}

std::vector<Execution> unroll(const Bundle& b, const Bindings& bindings, const CardLimits& limits) {
  const std::string where = b.file + ":1";
  if (bindings.args.size() != b.args.size())
    throw LoadError(where + ": bundle has " + std::to_string(b.args.size()) +
                    " arguments but " + std::to_string(bindings.args.size()) + " values were bound");
  for (size_t i = 0; i < b.args.size(); ++i) {
    const Argument& a = b.args[i];
    const std::string at = b.file + ":" + std::to_string(a.line);
    uint64_t v = bindings.args[i];
    if (a.is_dimension) {
      if (v > static_cast<uint64_t>(a.max_value))
        throw LoadError(at + ": dimension argument " + quote(a.name) + " value " +
                        std::to_string(v) + " exceeds max_value " + std::to_string(a.max_value));
      if (a.granularity > 0 && v % static_cast<uint64_t>(a.granularity) != 0)
        throw LoadError(at + ": dimension argument " + quote(a.name) + " value " +
                        std::to_string(v) + " is not a multiple of granularity " +
                        std::to_string(a.granularity));
    }
  }
  uint64_t total = count_executions(b);
  if (total > limits.max_executions)
    throw LoadError(where + ": unrolled bundle would have " +
                    (total == k_saturated ? std::string("more than 2^64") : std::to_string(total)) +
                    " executions, above the limit of " + std::to_string(limits.max_executions));
  return Unroller(b, bindings, limits).run();
}

}  // namespace vspyre::bundle
