// bundle.mlir: the parsed IR (arguments, pool, a tree of Execute/Loop steps) and its unrolling
// into the ordered list of SDSC executions with concrete symbol values (formats.md A).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "sim/bundle/common.h"

namespace vspyre::bundle {

// A symbol value is affine: constant + sum(coeff * atom), each atom a kernel argument, the
// pool base or a loop induction variable. Nothing else can appear in the bundle subset.
enum class AtomKind : uint8_t { arg, pool, loop_var };

struct Term {
  AtomKind kind = AtomKind::arg;
  uint32_t index = 0;  // argument position, 0 for the pool, or Loop::id
  int64_t coeff = 0;   // never 0 once normalised
};

struct AffineValue {
  int64_t constant = 0;
  std::vector<Term> terms;  // sorted by (kind, index), no duplicates, no zero coefficients
  bool is_constant() const { return terms.empty(); }
};

struct Argument {
  std::string name;           // "%arg_0_base_addr"
  bool is_dimension = false;  // !sdscbundle.input_arg<index, granularity=G, max_value=M>
  int64_t granularity = 0;    // dimension args only
  int64_t max_value = 0;      // dimension args only
  int line = 0;
};

struct Execute {
  std::string sdsc_file;              // as written; resolved relative to the bundle directory
  std::vector<int64_t> symbol_ids;    // negative, unique within this execute
  std::vector<AffineValue> operands;  // operands[i] binds symbol_ids[i]
  int line = 0;
};

struct Loop;
struct Step;

struct Loop {
  std::string var;  // "%i"
  uint32_t id = 0;  // AtomKind::loop_var index, unique in the bundle
  int64_t lb = 0, ub = 0, step = 1;
  std::vector<Step> body;
  int line = 0;
  uint64_t trip_count() const;
};

struct Step {
  std::variant<Execute, Loop> node;
};

struct Bundle {
  std::string file;       // name used in messages
  std::string func_name;  // "sdsc_bundle"
  std::vector<Argument> args;
  std::optional<uint64_t> pool_bytes;  // sdscbundle.device_mem_allocate, if present
  std::vector<Step> steps;
  uint32_t num_loops = 0;
};

// Parses the bundle.mlir subset. `file_name` only labels error messages.
Bundle parse_bundle_mlir(std::string_view text, std::string_view file_name);

// Concrete runtime values for unrolling.
struct Bindings {
  std::vector<uint64_t> args;  // one per Bundle::args entry (address or dimension value)
  uint64_t pool_base = 0;
};

struct Execution {
  const Execute* source = nullptr;   // points into the Bundle; keep the Bundle alive
  std::string sdsc_file;
  std::vector<int64_t> loop_indices;  // induction values of the enclosing loops, outer first
  std::map<int64_t, uint64_t> symbols;  // symbol id -> value
};

// Number of executions unrolling would produce, saturating at UINT64_MAX.
uint64_t count_executions(const Bundle& b);

// Program-order list of executions. Throws LoadError if the bindings do not match the
// arguments, a dimension value breaks its granularity/max, a value is negative or overflows,
// or the result would exceed limits.max_executions / limits.max_symbol_bindings.
std::vector<Execution> unroll(const Bundle& b, const Bindings& bindings,
                              const CardLimits& limits = {});

// Evaluates one affine value (loop_values indexed by Loop::id).
int64_t evaluate(const AffineValue& v, const Bindings& bindings,
                 const std::vector<int64_t>& loop_values, const std::string& where);

}  // namespace vspyre::bundle
