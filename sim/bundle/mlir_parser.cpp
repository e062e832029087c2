// Recursive-descent parser for the bundle.mlir subset (formats.md A.2). It works on tokens, not
// lines, because attribute dictionaries and operand lists may wrap (spec example 3).
#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "sim/bundle/mlir.h"

namespace vspyre::bundle {
namespace {

constexpr int k_max_loop_depth = 64;
constexpr int k_max_expr_depth = 64;

enum class Tok : uint8_t { value_id, symbol_ref, attr_alias, type_alias, ident, integer, string, punct, eof };

struct Token {
  Tok kind = Tok::eof;
  std::string text;  // for punct: the character(s); for string: the unescaped contents
  int64_t value = 0;  // integer tokens
  int line = 0;
};

bool is_id_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.';
}

// ---------------------------------------------------------------------------------------------
// Affine values

[[noreturn]] void fail_at(const std::string& file, int line, const std::string& rule) {
  throw LoadError(file + ":" + std::to_string(line) + ": " + rule);
}

AffineValue constant_value(int64_t c) {
  AffineValue v;
  v.constant = c;
  return v;
}

bool term_less(const Term& a, const Term& b) {
  return a.kind != b.kind ? a.kind < b.kind : a.index < b.index;
}

// Returns false on overflow.
bool add_values(const AffineValue& a, const AffineValue& b, AffineValue& out) {
  AffineValue r;
  if (__builtin_add_overflow(a.constant, b.constant, &r.constant)) return false;
  size_t i = 0, j = 0;
  while (i < a.terms.size() || j < b.terms.size()) {
    if (j == b.terms.size() || (i < a.terms.size() && term_less(a.terms[i], b.terms[j]))) {
      r.terms.push_back(a.terms[i++]);
    } else if (i == a.terms.size() || term_less(b.terms[j], a.terms[i])) {
      r.terms.push_back(b.terms[j++]);
    } else {
      Term t = a.terms[i];
      if (__builtin_add_overflow(a.terms[i].coeff, b.terms[j].coeff, &t.coeff)) return false;
      if (t.coeff != 0) r.terms.push_back(t);
      ++i;
      ++j;
    }
  }
  out = std::move(r);
  return true;
}

bool scale_value(const AffineValue& a, int64_t k, AffineValue& out) {
  AffineValue r;
  if (k == 0) {
    out = r;
    return true;
  }
  if (__builtin_mul_overflow(a.constant, k, &r.constant)) return false;
  for (const Term& t : a.terms) {
    Term s = t;
    if (__builtin_mul_overflow(t.coeff, k, &s.coeff)) return false;
    r.terms.push_back(s);
  }
  out = std::move(r);
  return true;
}

// An affine_map with one result, as constant + coeffs over (dims..., symbols...).
struct AffineMap {
  size_t num_dims = 0;
  size_t num_syms = 0;
  int64_t constant = 0;
  std::vector<int64_t> coeffs;
};

struct Linear {  // an affine expression inside a map
  int64_t constant = 0;
  std::vector<int64_t> coeffs;
  bool is_constant() const {
    return std::all_of(coeffs.begin(), coeffs.end(), [](int64_t c) { return c == 0; });
  }
};

// ---------------------------------------------------------------------------------------------
// Lexer

class Lexer {
 public:
  Lexer(std::string_view text, const std::string& file) : m_text(text), m_file(file) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    while (true) {
      skip_space();
      Token t;
      t.line = m_line;
      if (m_pos >= m_text.size()) {
        t.kind = Tok::eof;
        out.push_back(t);
        return out;
      }
      char c = m_text[m_pos];
      if (c == '%' || c == '@' || c == '#' || c == '!') {
        size_t start = m_pos++;
        // MLIR would also allow '-' in names; torch-spyre never emits it and it would make
        // "%p->" ambiguous, so it is not accepted.
        while (m_pos < m_text.size() && is_id_char(m_text[m_pos])) ++m_pos;
        if (m_pos == start + 1) fail("stray " + quote(std::string(1, c)));
        t.kind = c == '%' ? Tok::value_id
                 : c == '@' ? Tok::symbol_ref
                 : c == '#' ? Tok::attr_alias
                            : Tok::type_alias;
        t.text = std::string(m_text.substr(start, m_pos - start));
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        t.kind = Tok::integer;
        t.value = lex_integer();
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t start = m_pos;
        while (m_pos < m_text.size() && is_id_char(m_text[m_pos])) ++m_pos;
        t.kind = Tok::ident;
        t.text = std::string(m_text.substr(start, m_pos - start));
      } else if (c == '"') {
        t.kind = Tok::string;
        t.text = lex_string();
      } else if (c == '-' && m_pos + 1 < m_text.size() && m_text[m_pos + 1] == '>') {
        t.kind = Tok::punct;
        t.text = "->";
        m_pos += 2;
      } else if (std::string_view("(){}[]<>=,:+-*").find(c) != std::string_view::npos) {
        t.kind = Tok::punct;
        t.text = std::string(1, c);
        ++m_pos;
      } else {
        fail("unexpected character " + quote(std::string(1, c)));
      }
      out.push_back(std::move(t));
    }
  }

 private:
  [[noreturn]] void fail(const std::string& rule) { fail_at(m_file, m_line, rule); }

  void skip_space() {
    while (m_pos < m_text.size()) {
      char c = m_text[m_pos];
      if (c == '\n') {
        ++m_line;
        ++m_pos;
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
        ++m_pos;
      } else if (c == '/' && m_pos + 1 < m_text.size() && m_text[m_pos + 1] == '/') {
        while (m_pos < m_text.size() && m_text[m_pos] != '\n') ++m_pos;
      } else {
        return;
      }
    }
  }

  int64_t lex_integer() {
    uint64_t v = 0;
    bool hex = m_text[m_pos] == '0' && m_pos + 1 < m_text.size() &&
               (m_text[m_pos + 1] == 'x' || m_text[m_pos + 1] == 'X');
    if (hex) m_pos += 2;
    size_t digits = 0;
    while (m_pos < m_text.size()) {
      char c = m_text[m_pos];
      int d;
      if (c >= '0' && c <= '9') {
        d = c - '0';
      } else if (hex && std::isxdigit(static_cast<unsigned char>(c))) {
        d = std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
      } else {
        break;
      }
      if (__builtin_mul_overflow(v, hex ? 16u : 10u, &v) || __builtin_add_overflow(v, d, &v) ||
          v > static_cast<uint64_t>(INT64_MAX))
        fail("integer literal out of range");
      ++m_pos;
      ++digits;
    }
    if (digits == 0) fail("malformed integer literal");
    if (m_pos < m_text.size() && (std::isalpha(static_cast<unsigned char>(m_text[m_pos])) ||
                                  m_text[m_pos] == '_'))
      fail("malformed integer literal");
    return static_cast<int64_t>(v);
  }

  std::string lex_string() {
    ++m_pos;  // opening quote
    std::string s;
    while (true) {
      if (m_pos >= m_text.size() || m_text[m_pos] == '\n') fail("unterminated string literal");
      char c = m_text[m_pos++];
      if (c == '"') return s;
      if (c == '\\') {
        if (m_pos >= m_text.size()) fail("unterminated string literal");
        char e = m_text[m_pos++];
        if (e == 'n') {
          s += '\n';
        } else if (e == 't') {
          s += '\t';
        } else if (e == '"' || e == '\\') {
          s += e;
        } else {
          fail("unsupported escape in string literal");
        }
      } else {
        s += c;
      }
    }
  }

  std::string_view m_text;
  const std::string& m_file;
  size_t m_pos = 0;
  int m_line = 1;
};

// ---------------------------------------------------------------------------------------------
// Parser

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::string file)
      : m_toks(std::move(tokens)), m_file(std::move(file)) {}

  Bundle run() {
    Bundle b;
    b.file = m_file;
    m_bundle = &b;
    bool seen_func = false;
    while (peek().kind == Tok::attr_alias) parse_alias();
    if (is_ident("module")) {
      next();
      if (peek().kind == Tok::symbol_ref) next();
      if (is_ident("attributes")) fail("module attributes are not supported");
      expect_punct("{");
      while (!is_punct("}")) {
        if (peek().kind == Tok::eof) fail("missing '}' closing the module");
        if (peek().kind == Tok::attr_alias) {
          parse_alias();
          continue;
        }
        if (!is_ident("func.func")) fail("expected func.func, got " + describe(peek()));
        if (seen_func) fail("a bundle holds exactly one func.func");
        parse_func();
        seen_func = true;
      }
      next();
    } else if (is_ident("func.func")) {
      parse_func();
      seen_func = true;
    }
    while (peek().kind == Tok::attr_alias) parse_alias();
    if (peek().kind != Tok::eof) {
      if (is_ident("func.func")) fail("a bundle holds exactly one func.func");
      fail("unexpected " + describe(peek()) + " after the module");
    }
    if (!seen_func) fail("no func.func in bundle");
    b.num_loops = m_num_loops;
    return b;
  }

 private:
  enum class DefKind : uint8_t { value, param, loop_var };
  struct Def {
    DefKind kind = DefKind::value;
    AffineValue value;
    uint32_t param_index = 0;
    int line = 0;
  };

  // --- token helpers --------------------------------------------------------------------------
  const Token& peek() const { return m_toks[m_pos]; }
  const Token& next() {
    const Token& t = m_toks[m_pos];
    if (t.kind != Tok::eof) ++m_pos;
    return t;
  }
  bool is_punct(std::string_view p) const {
    return peek().kind == Tok::punct && peek().text == p;
  }
  bool is_ident(std::string_view p) const {
    return peek().kind == Tok::ident && peek().text == p;
  }
  [[noreturn]] void fail(const std::string& rule) const { fail_at(m_file, peek().line, rule); }
  [[noreturn]] void fail_line(int line, const std::string& rule) const {
    fail_at(m_file, line, rule);
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::eof:
        return "end of file";
      case Tok::integer:
        return "integer " + std::to_string(t.value);
      case Tok::string:
        return "string " + quote(t.text);
      default:
        return quote(t.text);
    }
  }
  void expect_punct(std::string_view p) {
    if (!is_punct(p)) fail("expected '" + std::string(p) + "', got " + describe(peek()));
    next();
  }
  void expect_ident(std::string_view p) {
    if (!is_ident(p)) fail("expected '" + std::string(p) + "', got " + describe(peek()));
    next();
  }
  int64_t parse_signed_integer() {
    bool neg = false;
    if (is_punct("-")) {
      next();
      neg = true;
    }
    if (peek().kind != Tok::integer) fail("expected an integer, got " + describe(peek()));
    int64_t v = next().value;
    return neg ? -v : v;
  }
  // `: index` style trailers. Only integer-like types make sense for bundle values.
  void parse_scalar_type() {
    if (peek().kind != Tok::ident) fail("expected a type, got " + describe(peek()));
    const std::string& t = peek().text;
    bool ok = t == "index" || (t.size() > 1 && t[0] == 'i' &&
                               std::all_of(t.begin() + 1, t.end(),
                                           [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }));
    if (!ok) fail("unsupported type " + quote(t) + " (expected index)");
    next();
  }

  // --- affine maps ----------------------------------------------------------------------------
  void parse_alias() {
    Token name = next();
    expect_punct("=");
    if (m_maps.count(name.text)) fail_line(name.line, "redefinition of affine map " + quote(name.text));
    m_maps.emplace(name.text, parse_affine_map());
  }

  AffineMap parse_affine_map() {
    expect_ident("affine_map");
    expect_punct("<");
    std::vector<std::string> names;
    auto parse_names = [&](std::string_view close) {
      while (!is_punct(close)) {
        if (peek().kind != Tok::ident) fail("bad affine map: expected a dimension or symbol name, got " + describe(peek()));
        if (std::find(names.begin(), names.end(), peek().text) != names.end())
          fail("bad affine map: duplicate name " + quote(peek().text));
        names.push_back(next().text);
        if (is_punct(",")) {
          next();
          if (is_punct(close)) fail("bad affine map: trailing ','");
        } else if (!is_punct(close)) {
          fail("bad affine map: expected ',' or '" + std::string(close) + "', got " + describe(peek()));
        }
      }
      next();
    };
    expect_punct("(");
    parse_names(")");
    AffineMap m;
    m.num_dims = names.size();
    if (is_punct("[")) {
      next();
      parse_names("]");
    }
    m.num_syms = names.size() - m.num_dims;
    expect_punct("->");
    expect_punct("(");
    Linear r = parse_affine_expr(names, 0);
    if (is_punct(",")) fail("bad affine map: exactly one result is supported");
    expect_punct(")");
    expect_punct(">");
    m.constant = r.constant;
    m.coeffs = std::move(r.coeffs);
    m.coeffs.resize(names.size(), 0);
    return m;
  }

  Linear lin_constant(int64_t c, size_t n) { return Linear{c, std::vector<int64_t>(n, 0)}; }

  Linear lin_add(const Linear& a, const Linear& b, int64_t sign) {
    Linear r = a;
    int64_t t;
    if (__builtin_mul_overflow(b.constant, sign, &t) || __builtin_add_overflow(r.constant, t, &r.constant))
      fail("bad affine map: integer overflow");
    for (size_t i = 0; i < r.coeffs.size(); ++i)
      if (__builtin_mul_overflow(b.coeffs[i], sign, &t) || __builtin_add_overflow(r.coeffs[i], t, &r.coeffs[i]))
        fail("bad affine map: integer overflow");
    return r;
  }

  Linear lin_scale(const Linear& a, int64_t k) {
    Linear r = a;
    if (__builtin_mul_overflow(a.constant, k, &r.constant)) fail("bad affine map: integer overflow");
    for (auto& c : r.coeffs)
      if (__builtin_mul_overflow(c, k, &c)) fail("bad affine map: integer overflow");
    return r;
  }

  Linear parse_affine_expr(const std::vector<std::string>& names, int depth) {
    if (depth > k_max_expr_depth) fail("bad affine map: expression nested too deeply");
    Linear acc = parse_affine_term(names, depth);
    while (is_punct("+") || is_punct("-")) {
      int64_t sign = next().text == "+" ? 1 : -1;
      acc = lin_add(acc, parse_affine_term(names, depth), sign);
    }
    return acc;
  }

  Linear parse_affine_term(const std::vector<std::string>& names, int depth) {
    Linear acc = parse_affine_factor(names, depth);
    while (true) {
      if (is_ident("floordiv") || is_ident("ceildiv") || is_ident("mod"))
        fail("bad affine map: '" + peek().text + "' is not supported (addresses must be linear)");
      if (!is_punct("*")) return acc;
      next();
      Linear rhs = parse_affine_factor(names, depth);
      if (rhs.is_constant()) {
        acc = lin_scale(acc, rhs.constant);
      } else if (acc.is_constant()) {
        acc = lin_scale(rhs, acc.constant);
      } else {
        fail("bad affine map: product of two non-constant expressions");
      }
    }
  }

  Linear parse_affine_factor(const std::vector<std::string>& names, int depth) {
    if (depth > k_max_expr_depth) fail("bad affine map: expression nested too deeply");
    if (is_punct("-")) {
      next();
      return lin_scale(parse_affine_factor(names, depth + 1), -1);
    }
    if (is_punct("(")) {
      next();
      Linear r = parse_affine_expr(names, depth + 1);
      expect_punct(")");
      return r;
    }
    if (peek().kind == Tok::integer) return lin_constant(next().value, names.size());
    if (peek().kind == Tok::ident) {
      auto it = std::find(names.begin(), names.end(), peek().text);
      if (it == names.end()) fail("bad affine map: unknown name " + quote(peek().text));
      next();
      Linear r = lin_constant(0, names.size());
      r.coeffs[static_cast<size_t>(it - names.begin())] = 1;
      return r;
    }
    fail("bad affine map: unexpected " + describe(peek()));
  }

  // --- values ---------------------------------------------------------------------------------
  void define(const Token& name, Def def) {
    if (m_defs.count(name.text)) fail_line(name.line, "redefinition of " + quote(name.text));
    def.line = name.line;
    m_defs.emplace(name.text, std::move(def));
    m_scopes.back().push_back(name.text);
  }

  AffineValue use_value() {
    if (peek().kind != Tok::value_id) fail("expected an SSA value, got " + describe(peek()));
    const Token& t = next();
    auto it = m_defs.find(t.text);
    if (it == m_defs.end()) fail_line(t.line, "use of undefined value " + quote(t.text));
    if (it->second.kind == DefKind::param)
      fail_line(t.line, "parameter " + quote(t.text) +
                            " used as index without sdscbundle.input_arg_extract");
    return it->second.value;
  }

  std::vector<AffineValue> parse_operand_list(std::string_view open, std::string_view close) {
    std::vector<AffineValue> out;
    expect_punct(open);
    while (!is_punct(close)) {
      out.push_back(use_value());
      if (is_punct(",")) {
        next();
        if (is_punct(close)) fail("trailing ',' in operand list");
      } else if (!is_punct(close)) {
        fail("expected ',' or '" + std::string(close) + "', got " + describe(peek()));
      }
    }
    next();
    return out;
  }

  // !sdscbundle.input_arg<index> or <index, granularity=G, max_value=M>
  Argument parse_input_arg_type() {
    Argument a;
    if (peek().kind != Tok::type_alias || peek().text != "!sdscbundle.input_arg")
      fail("expected !sdscbundle.input_arg, got " + describe(peek()));
    next();
    expect_punct("<");
    expect_ident("index");
    bool has_gran = false, has_max = false;
    while (is_punct(",")) {
      next();
      if (peek().kind != Tok::ident) fail("expected granularity= or max_value=, got " + describe(peek()));
      std::string key = next().text;
      expect_punct("=");
      int64_t v = parse_signed_integer();
      if (key == "granularity" && !has_gran) {
        if (v <= 0) fail("dimension argument granularity must be positive");
        a.granularity = v;
        has_gran = true;
      } else if (key == "max_value" && !has_max) {
        if (v < 0) fail("dimension argument max_value must not be negative");
        a.max_value = v;
        has_max = true;
      } else {
        fail("unknown or repeated input_arg parameter " + quote(key));
      }
    }
    expect_punct(">");
    if (has_gran != has_max) fail("dimension argument needs both granularity and max_value");
    a.is_dimension = has_gran;
    return a;
  }

  // --- function -------------------------------------------------------------------------------
  void parse_func() {
    expect_ident("func.func");
    if (peek().kind != Tok::symbol_ref) fail("expected function name, got " + describe(peek()));
    m_bundle->func_name = next().text.substr(1);
    m_scopes.emplace_back();
    expect_punct("(");
    while (!is_punct(")")) {
      if (peek().kind != Tok::value_id) fail("expected a parameter, got " + describe(peek()));
      Token name = next();
      expect_punct(":");
      Argument a = parse_input_arg_type();
      a.name = name.text;
      a.line = name.line;
      Def d;
      d.kind = DefKind::param;
      d.param_index = static_cast<uint32_t>(m_bundle->args.size());
      define(name, std::move(d));
      m_bundle->args.push_back(std::move(a));
      if (is_punct(",")) {
        next();
        if (is_punct(")")) fail("trailing ',' in parameter list");
      } else if (!is_punct(")")) {
        fail("expected ',' or ')', got " + describe(peek()));
      }
    }
    next();
    if (is_punct("->")) fail("the bundle function must not return values");
    expect_punct("{");
    bool returned = parse_region(m_bundle->steps, 0);
    if (!returned) fail("func.func body must end with return");
    expect_punct("}");
    m_scopes.pop_back();
  }

  // Parses statements up to (not including) the closing '}'. Returns whether `return` was seen.
  bool parse_region(std::vector<Step>& out, int depth) {
    bool returned = false;
    while (!is_punct("}")) {
      if (peek().kind == Tok::eof) fail("missing '}' (unexpected end of file)");
      if (returned) fail("statement after return");
      returned = parse_statement(out, depth);
    }
    return returned;
  }

  bool parse_statement(std::vector<Step>& out, int depth) {
    const Token& t = peek();
    int line = t.line;
    if (t.kind == Tok::value_id) {
      Token result = next();
      if (is_punct(",")) fail("ops in a bundle have one result");
      expect_punct("=");
      parse_value_op(result, depth);
      return false;
    }
    if (t.kind != Tok::ident) fail("expected an operation, got " + describe(t));
    std::string op = next().text;
    if (op == "sdscbundle.sdsc_execute") {
      out.push_back(Step{parse_execute(line)});
    } else if (op == "scf.for") {
      if (depth + 1 > k_max_loop_depth) fail_line(line, "scf.for nested too deeply");
      out.push_back(Step{parse_loop(line, depth + 1)});
    } else if (op == "scf.yield") {
      if (depth == 0) fail_line(line, "scf.yield outside scf.for");
      if (!is_punct("}")) fail_line(line, "loops carry no values: scf.yield must be bare and last");
    } else if (op == "return" || op == "func.return") {
      if (depth != 0) fail_line(line, "return inside scf.for");
      if (peek().kind == Tok::value_id) fail_line(line, "the bundle function must not return values");
      return true;
    } else {
      fail_line(line, "unsupported operation " + quote(op));
    }
    return false;
  }

  void parse_value_op(const Token& result, int depth) {
    if (peek().kind != Tok::ident) fail("expected an operation, got " + describe(peek()));
    int line = peek().line;
    std::string op = next().text;
    Def def;
    if (op == "arith.constant") {
      def.value = constant_value(parse_signed_integer());
      if (is_punct(":")) {
        next();
        parse_scalar_type();
      }
    } else if (op == "arith.addi") {
      AffineValue a = use_value();
      expect_punct(",");
      AffineValue b = use_value();
      expect_punct(":");
      parse_scalar_type();
      if (!add_values(a, b, def.value)) fail_line(line, "integer overflow in arith.addi");
    } else if (op == "affine.apply") {
      AffineMap map;
      if (peek().kind == Tok::attr_alias) {
        auto it = m_maps.find(peek().text);
        if (it == m_maps.end()) fail("bad affine map: undefined alias " + quote(peek().text));
        map = it->second;
        next();
      } else {
        map = parse_affine_map();
      }
      std::vector<AffineValue> dims = parse_operand_list("(", ")");
      std::vector<AffineValue> syms;
      if (is_punct("[")) syms = parse_operand_list("[", "]");
      if (dims.size() != map.num_dims || syms.size() != map.num_syms)
        fail_line(line, "bad affine map: it takes " + std::to_string(map.num_dims) + " dims and " +
                            std::to_string(map.num_syms) + " symbols, got " +
                            std::to_string(dims.size()) + " and " + std::to_string(syms.size()));
      AffineValue acc = constant_value(map.constant);
      for (size_t i = 0; i < map.coeffs.size(); ++i) {
        const AffineValue& operand = i < dims.size() ? dims[i] : syms[i - dims.size()];
        AffineValue scaled;
        if (!scale_value(operand, map.coeffs[i], scaled) || !add_values(acc, scaled, acc))
          fail_line(line, "integer overflow in affine.apply");
      }
      def.value = std::move(acc);
    } else if (op == "sdscbundle.input_arg_extract") {
      expect_ident("value");
      expect_ident("from");
      if (peek().kind != Tok::value_id) fail("expected a parameter, got " + describe(peek()));
      const Token& p = next();
      auto it = m_defs.find(p.text);
      if (it == m_defs.end() || it->second.kind != DefKind::param)
        fail_line(p.line, "input_arg_extract source " + quote(p.text) + " is not a function parameter");
      uint32_t index = it->second.param_index;
      expect_punct(":");
      Argument type = parse_input_arg_type();
      const Argument& param = m_bundle->args[index];
      if (type.is_dimension != param.is_dimension || type.granularity != param.granularity ||
          type.max_value != param.max_value)
        fail_line(line, "input_arg_extract type does not match parameter " + quote(p.text));
      expect_punct("->");
      expect_ident("index");
      def.value.terms.push_back(Term{AtomKind::arg, index, 1});
    } else if (op == "sdscbundle.device_mem_allocate") {
      if (depth != 0) fail_line(line, "device_mem_allocate inside scf.for");
      if (m_bundle->pool_bytes) fail_line(line, "more than one device_mem_allocate");
      int64_t bytes = parse_signed_integer();
      if (bytes <= 0) fail_line(line, "device_mem_allocate size must be positive");
      expect_ident("bytes");
      expect_punct(":");
      expect_ident("index");
      m_bundle->pool_bytes = static_cast<uint64_t>(bytes);
      def.value.terms.push_back(Term{AtomKind::pool, 0, 1});
    } else {
      fail_line(line, "unsupported operation " + quote(op));
    }
    define(result, std::move(def));
  }

  Execute parse_execute(int line) {
    Execute e;
    e.line = line;
    e.operands = parse_operand_list("(", ")");
    expect_punct("{");
    bool has_file = false, has_ids = false;
    while (!is_punct("}")) {
      std::string key;
      if (peek().kind == Tok::ident || peek().kind == Tok::string) {
        key = next().text;
      } else {
        fail("expected an attribute name, got " + describe(peek()));
      }
      expect_punct("=");
      if (key == "sdsc_filename" && !has_file) {
        if (peek().kind != Tok::string) fail("sdsc_filename must be a string");
        e.sdsc_file = next().text;
        has_file = true;
      } else if (key == "symbol_ids" && !has_ids) {
        has_ids = true;
        expect_punct("[");
        while (!is_punct("]")) {
          int64_t id = parse_signed_integer();
          if (id >= 0) fail("symbol id " + std::to_string(id) + " must be negative");
          if (std::find(e.symbol_ids.begin(), e.symbol_ids.end(), id) != e.symbol_ids.end())
            fail("duplicate symbol id " + std::to_string(id) + " in symbol_ids");
          e.symbol_ids.push_back(id);
          if (is_punct(",")) {
            next();
            if (is_punct("]")) fail("trailing ',' in symbol_ids");
          } else if (!is_punct("]")) {
            fail("expected ',' or ']' in symbol_ids, got " + describe(peek()));
          }
        }
        next();
      } else {
        fail("unknown or repeated sdsc_execute attribute " + quote(key));
      }
      if (is_punct(",")) {
        next();
        if (is_punct("}")) fail("trailing ',' in attribute dictionary");
      } else if (!is_punct("}")) {
        fail("expected ',' or '}' in attribute dictionary, got " + describe(peek()));
      }
    }
    next();
    if (!has_file) fail_line(line, "sdsc_execute without sdsc_filename");
    const std::string& f = e.sdsc_file;
    if (f.empty() || f.front() == '/' || f.find('\0') != std::string::npos ||
        f.find('\\') != std::string::npos || f == ".." || f.rfind("../", 0) == 0 ||
        f.find("/../") != std::string::npos ||
        (f.size() >= 3 && f.compare(f.size() - 3, 3, "/..") == 0))
      fail_line(line, "sdsc_filename " + quote(f) + " must be a relative path inside the bundle directory");
    if (e.operands.size() != e.symbol_ids.size())
      fail_line(line, "symbol count mismatch: " + std::to_string(e.operands.size()) +
                          " operands but " + std::to_string(e.symbol_ids.size()) + " symbol_ids");
    return e;
  }

  Loop parse_loop(int line, int depth) {
    Loop l;
    l.line = line;
    if (peek().kind != Tok::value_id) fail("expected the induction variable, got " + describe(peek()));
    Token var = next();
    l.var = var.text;
    auto bound = [&](const char* what) {
      int bline = peek().line;
      AffineValue v = use_value();
      if (!v.is_constant())
        fail_line(bline, std::string("non-constant loop ") + what +
                             " (symbolic trip counts are not supported)");
      return v.constant;
    };
    expect_punct("=");
    l.lb = bound("lower bound");
    expect_ident("to");
    l.ub = bound("upper bound");
    expect_ident("step");
    l.step = bound("step");
    if (l.step <= 0) fail_line(line, "loop step must be positive");
    if (is_punct(":")) {
      next();
      parse_scalar_type();
    }
    l.id = m_num_loops++;
    m_scopes.emplace_back();
    Def d;
    d.kind = DefKind::loop_var;
    d.value.terms.push_back(Term{AtomKind::loop_var, l.id, 1});
    define(var, std::move(d));
    expect_punct("{");
    parse_region(l.body, depth);
    expect_punct("}");
    for (const auto& n : m_scopes.back()) m_defs.erase(n);
    m_scopes.pop_back();
    return l;
  }

  std::vector<Token> m_toks;
  size_t m_pos = 0;
  std::string m_file;
  Bundle* m_bundle = nullptr;
  std::unordered_map<std::string, AffineMap> m_maps;
  std::unordered_map<std::string, Def> m_defs;
  std::vector<std::vector<std::string>> m_scopes;
  uint32_t m_num_loops = 0;
};

}  // namespace

Bundle parse_bundle_mlir(std::string_view text, std::string_view file_name) {
  std::string file(file_name);
  if (text.find('\0') != std::string_view::npos) fail_at(file, 1, "NUL byte in bundle text");
  Lexer lexer(text, file);
  Parser parser(lexer.run(), file);
  return parser.run();
}

}  // namespace vspyre::bundle
