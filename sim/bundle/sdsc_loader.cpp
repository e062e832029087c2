// SDSC JSON loader. Every access goes through Node, which knows its JSON path, so each
// violation is reported as "<file>: <path>: <rule>".
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include "sim/bundle/sdsc.h"

namespace vspyre::bundle {
namespace {

using Json = nlohmann::ordered_json;

constexpr int k_max_json_depth = 128;
constexpr size_t k_max_array = 4096;  // far above anything a 32-core SDSC needs
constexpr int64_t k_max_dim = int64_t{1} << 40;

std::string one_line(std::string_view s, size_t max = 300) {
  std::string out;
  for (char c : s) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? ' ' : c;
  }
  return out;
}

class Node {
 public:
  Node(const Json* j, std::string path, const std::string* file)
      : m_j(j), m_path(std::move(path)), m_file(file) {}

  [[noreturn]] void fail(const std::string& rule) const {
    throw LoadError(*m_file + ": " + (m_path.empty() ? "/" : m_path) + ": " + rule);
  }
  const std::string& path() const { return m_path; }
  const Json& json() const { return *m_j; }

  bool is_object() const { return m_j->is_object(); }
  bool is_array() const { return m_j->is_array(); }
  bool is_string() const { return m_j->is_string(); }

  Node child(std::string_view key) const {  // like at() but for keys taken from the file
    require_object();
    auto it = m_j->find(std::string(key));
    if (it == m_j->end()) fail("missing field " + quote(key));
    return Node(&*it, m_path + "/" + one_line(key, 80), m_file);
  }
  Node at(std::string_view key) const {
    require_object();
    auto it = m_j->find(std::string(key));
    if (it == m_j->end()) fail("missing required field " + quote(key));
    return Node(&*it, m_path + "/" + std::string(key), m_file);
  }
  std::optional<Node> opt(std::string_view key) const {
    require_object();
    auto it = m_j->find(std::string(key));
    if (it == m_j->end()) return std::nullopt;
    return Node(&*it, m_path + "/" + std::string(key), m_file);
  }
  Node at(size_t i) const { return Node(&(*m_j)[i], m_path + "/" + std::to_string(i), m_file); }

  void require_object() const {
    if (!m_j->is_object()) fail("expected an object, got " + std::string(m_j->type_name()));
  }
  size_t array_size(size_t max = k_max_array) const {
    if (!m_j->is_array()) fail("expected an array, got " + std::string(m_j->type_name()));
    if (m_j->size() > max) fail("array has " + std::to_string(m_j->size()) + " entries, at most " + std::to_string(max) + " allowed");
    return m_j->size();
  }
  size_t object_size(size_t max = k_max_array) const {
    require_object();
    if (m_j->size() > max) fail("object has " + std::to_string(m_j->size()) + " entries, at most " + std::to_string(max) + " allowed");
    return m_j->size();
  }
  // Visits members in file order.
  template <class F>
  void for_each_member(F&& f, size_t max = k_max_array) const {
    object_size(max);
    for (auto it = m_j->begin(); it != m_j->end(); ++it)
      f(it.key(), Node(&it.value(), m_path + "/" + one_line(it.key(), 80), m_file));
  }

  int64_t as_int(int64_t lo = std::numeric_limits<int64_t>::min(),
                 int64_t hi = std::numeric_limits<int64_t>::max()) const {
    int64_t v = 0;
    if (m_j->is_number_unsigned()) {
      auto u = m_j->get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) fail("integer out of range");
      v = static_cast<int64_t>(u);
    } else if (m_j->is_number_integer()) {
      v = m_j->get<int64_t>();
    } else {
      fail("expected an integer, got " + std::string(m_j->type_name()));
    }
    if (v < lo || v > hi)
      fail("value " + std::to_string(v) + " outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v;
  }
  double as_number() const {
    if (!m_j->is_number()) fail("expected a number, got " + std::string(m_j->type_name()));
    return m_j->get<double>();
  }
  std::string as_string() const {
    if (!m_j->is_string()) fail("expected a string, got " + std::string(m_j->type_name()));
    return m_j->get<std::string>();
  }
  // The compiler writes flags as 0/1 where the schema says boolean: accept both.
  bool as_flag() const {
    if (m_j->is_boolean()) return m_j->get<bool>();
    if (m_j->is_number_integer() || m_j->is_number_unsigned()) {
      int64_t v = as_int();
      if (v == 0 || v == 1) return v == 1;
    }
    fail("expected a boolean or 0/1");
  }
  std::vector<std::string> as_string_list(size_t max = 64) const {
    std::vector<std::string> out;
    size_t n = array_size(max);
    for (size_t i = 0; i < n; ++i) out.push_back(at(i).as_string());
    return out;
  }

 private:
  const Json* m_j;
  std::string m_path;
  const std::string* m_file;
};

// Strict decimal integer, optional leading '-', no leading zeros, fits int64.
std::optional<int64_t> parse_decimal(std::string_view s) {
  bool neg = !s.empty() && s[0] == '-';
  if (neg) s.remove_prefix(1);
  if (s.empty() || s.size() > 19 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
}

// Fold-manager keys: "[1, 0, 0]".
std::optional<std::vector<int64_t>> parse_index_key(std::string_view s) {
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') return std::nullopt;
  s = s.substr(1, s.size() - 2);
  std::vector<int64_t> out;
  while (true) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    size_t n = 0;
    while (n < s.size() && s[n] != ',' && s[n] != ' ') ++n;
    auto v = parse_decimal(s.substr(0, n));
    if (!v || *v < 0 || out.size() >= 16) return std::nullopt;
    out.push_back(*v);
    s.remove_prefix(n);
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    if (s.empty()) return out;
    if (s.front() != ',') return std::nullopt;
    s.remove_prefix(1);
  }
}

int json_depth(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      max_depth = std::max(max_depth, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return max_depth;
}

// Keys of N_/ss_/el_ ending in '_' with integer values are dimensions; objects such as
// paddingSizes_ and the name_ string are skipped.
DimSizes parse_dims(const Node& node, int64_t lo) {
  DimSizes out;
  node.for_each_member([&](const std::string& key, const Node& v) {
    if (key == "name_" || key.size() < 2 || key.back() != '_') return;
    if (!v.json().is_number()) return;
    out.emplace_back(key.substr(0, key.size() - 1), v.as_int(lo, k_max_dim));
  }, 256);
  return out;
}

int64_t find_dim(const DimSizes& d, std::string_view name) {
  for (const auto& [k, v] : d)
    if (k == name) return v;
  return -1;
}

const std::set<std::string, std::less<>> k_ds_types = {
    "OUTPUT", "INPUT", "MODEL", "WEIGHT", "STACK", "HEAP",
    "RESERVE1", "RESERVE2", "CONST", "KERNEL", "KERNEL_IDX"};

DataFormat parse_format(const Node& n) {
  std::string s = n.as_string();
  auto f = parse_data_format(s);
  if (!f) n.fail("unknown data format " + quote(s));
  return *f;
}

uint64_t sat_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}
uint64_t sat_add(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}

class SdscLoader {
 public:
  SdscLoader(std::string_view text, std::string file, const CardLimits& limits)
      : m_text(text), m_limits(limits) {
    m_s.file = std::move(file);
  }

  Sdsc run() {
    if (m_limits.stick_bytes == 0 || m_limits.cores == 0)
      throw LoadError(m_s.file + ": /: card limits need at least one core and a stick size");
    if (json_depth(m_text) > k_max_json_depth)
      throw LoadError(m_s.file + ": /: JSON nested deeper than " + std::to_string(k_max_json_depth));
    try {
      m_s.raw = Json::parse(m_text.begin(), m_text.end());
    } catch (const Json::exception& e) {
      throw LoadError(m_s.file + ": /: invalid JSON: " + one_line(e.what()));
    }
    Node root(&m_s.raw, "", &m_s.file);
    if (root.object_size() != 1) root.fail("the SDSC envelope must hold exactly one key \"<N>_<opfunc>\"");
    m_s.key = m_s.raw.begin().key();
    Node sd = root.child(m_s.key);
    size_t us = m_s.key.find('_');
    auto idx = us == std::string::npos ? std::nullopt : parse_decimal(m_s.key.substr(0, us));
    if (!idx || *idx < 0 || us + 1 >= m_s.key.size())
      sd.fail("envelope key " + quote(m_s.key) + " is not \"<N>_<opfunc>\"");
    m_s.index = *idx;
    sd.require_object();

    load_work_division(sd);
    load_dscs(sd);
    finish_symbols();
    return std::move(m_s);
  }

 private:
  // ---- work division (B.2, B.3) ---------------------------------------------------------------
  void load_work_division(const Node& sd) {
    Node ncores = sd.at("numCoresUsed_");
    m_s.num_cores = static_cast<uint32_t>(ncores.as_int(1, std::numeric_limits<int32_t>::max()));
    if (m_s.num_cores > m_limits.cores)
      ncores.fail("numCoresUsed_ " + std::to_string(m_s.num_cores) + " exceeds the card's " +
                  std::to_string(m_limits.cores) + " cores");

    Node slices = sd.at("numWkSlicesPerDim_");
    uint64_t product = 1;
    slices.for_each_member([&](const std::string& dim, const Node& v) {
      auto n = static_cast<uint32_t>(v.as_int(1, m_limits.cores));
      m_s.slices_per_dim.emplace_back(dim, n);
      product = sat_mul(product, n);
    }, 64);
    if (product != m_s.num_cores)
      slices.fail("work division inconsistent: product of slices is " + std::to_string(product) +
                  " but numCoresUsed_ is " + std::to_string(m_s.num_cores));

    Node map = sd.at("coreIdToWkSlice_");
    if (map.object_size(m_limits.cores) != m_s.num_cores)
      map.fail("work division inconsistent: " + std::to_string(map.json().size()) +
               " cores listed but numCoresUsed_ is " + std::to_string(m_s.num_cores));
    std::set<std::vector<uint32_t>> owned;
    map.for_each_member([&](const std::string& key, const Node& v) {
      uint32_t core = parse_core_id(key, v);
      std::vector<uint32_t> tuple;
      auto& slice = m_s.core_slice[core];
      if (v.object_size(64) != m_s.slices_per_dim.size())
        v.fail("core slice must name exactly the dimensions of numWkSlicesPerDim_");
      for (const auto& [dim, n] : m_s.slices_per_dim) {
        auto o = v.opt(dim);
        if (!o) v.fail("core slice lacks dimension " + quote(dim));
        auto k = static_cast<uint32_t>(o->as_int(0, static_cast<int64_t>(n) - 1));
        slice[dim] = k;
        tuple.push_back(k);
      }
      if (!owned.insert(tuple).second) v.fail("work division inconsistent: two cores own the same slice");
      m_s.core_ids.push_back(core);
    });
    std::sort(m_s.core_ids.begin(), m_s.core_ids.end());

    if (auto o = sd.opt("dataOpdscs_")) m_s.num_data_dscs += static_cast<uint32_t>(o->array_size());
    if (auto o = sd.opt("datadscs_")) m_s.num_data_dscs += static_cast<uint32_t>(o->array_size());
    Node dscs = sd.at("dscs_");
    m_num_dscs = dscs.array_size(1);
    if (m_num_dscs == 0 && m_s.num_data_dscs == 0)
      dscs.fail("neither dscs_ nor dataOpdscs_ has an entry");

    if (auto o = sd.opt("coreIdToDsc_")) {
      check_core_keys(*o);
      o->for_each_member([&](const std::string& key, const Node& v) {
        m_s.core_dsc[parse_core_id(key, v)] =
            static_cast<uint32_t>(v.as_int(0, static_cast<int64_t>(m_num_dscs) - 1));
      });
    }
    if (auto o = sd.opt("coreIdToDscSchedule")) {
      check_core_keys(*o);
      o->for_each_member([&](const std::string& key, const Node& v) {
        uint32_t core = parse_core_id(key, v);
        auto& steps = m_s.core_schedule[core];
        size_t n = v.array_size(256);
        for (size_t i = 0; i < n; ++i) steps.push_back(parse_schedule_step(v.at(i)));
        // All cores running one DSC must share a schedule (B.3).
        uint32_t dsc = m_s.core_dsc.count(core) ? m_s.core_dsc[core] : 0;
        auto [it, fresh] = m_schedule_by_dsc.emplace(dsc, core);
        if (!fresh) {
          const auto& ref = m_s.core_schedule[it->second];
          bool same = ref.size() == steps.size() &&
                      std::equal(ref.begin(), ref.end(), steps.begin(), [](const ScheduleStep& a, const ScheduleStep& b) {
                        return a.data_dsc == b.data_dsc && a.dl_dsc == b.dl_dsc &&
                               a.before_sync == b.before_sync && a.after_sync == b.after_sync;
                      });
          if (!same) v.fail("cores running the same DSC must have identical schedules");
        }
      });
    }
  }

  uint32_t parse_core_id(const std::string& key, const Node& at) const {
    auto v = parse_decimal(key);
    if (!v || *v < 0) at.fail("core id " + quote(key) + " is not a non-negative integer");
    if (*v >= m_limits.cores)
      at.fail("core id " + std::to_string(*v) + " out of range (card has " + std::to_string(m_limits.cores) + " cores)");
    return static_cast<uint32_t>(*v);
  }

  void check_core_keys(const Node& n) const {
    n.object_size(m_limits.cores);
    std::vector<uint32_t> ids;
    n.for_each_member([&](const std::string& key, const Node& v) { ids.push_back(parse_core_id(key, v)); });
    std::sort(ids.begin(), ids.end());
    if (ids != m_s.core_ids) n.fail("core ids differ from those of coreIdToWkSlice_");
  }

  ScheduleStep parse_schedule_step(const Node& n) const {
    ScheduleStep s;
    auto check = [&](const Node& at, int64_t v, uint64_t count, const char* what) {
      if (v < -1 || v >= static_cast<int64_t>(count))
        at.fail(std::string(what) + " index " + std::to_string(v) + " does not name an existing DSC");
      return static_cast<int32_t>(v);
    };
    if (n.is_array()) {
      if (n.array_size() != 4) n.fail("schedule step must be [datadsc, dldsc, before_sync, after_sync]");
      s.data_dsc = check(n.at(0), n.at(0).as_int(), m_s.num_data_dscs, "datadsc");
      s.dl_dsc = check(n.at(1), n.at(1).as_int(), m_num_dscs, "dldsc");
      s.before_sync = n.at(2).as_flag();
      s.after_sync = n.at(3).as_flag();
    } else {
      n.require_object();
      if (auto o = n.opt("datadsc_idx")) s.data_dsc = check(*o, o->as_int(), m_s.num_data_dscs, "datadsc");
      if (auto o = n.opt("dldsc_idx")) s.dl_dsc = check(*o, o->as_int(), m_num_dscs, "dldsc");
      if (auto o = n.opt("before_sync")) s.before_sync = o->as_flag();
      if (auto o = n.opt("after_sync")) s.after_sync = o->as_flag();
    }
    return s;
  }

  // ---- the compute descriptor (B.4 - B.9) -----------------------------------------------------
  void load_dscs(const Node& sd) {
    if (m_num_dscs == 0) return;
    Node entry = sd.at("dscs_").at(size_t{0});
    if (entry.object_size() != 1) entry.fail("a dscs_ entry must hold exactly one key");
    m_s.dsc_name = entry.json().begin().key();
    Node d = entry.child(m_s.dsc_name);
    d.require_object();

    if (auto o = d.opt("numCoresUsed_"); o && o->as_int() != m_s.num_cores)
      o->fail("numCoresUsed_ differs from the SuperDSC's " + std::to_string(m_s.num_cores));
    if (auto o = d.opt("coreIdsUsed_")) {
      std::vector<uint32_t> ids;
      size_t n = o->array_size(m_limits.cores + 1);
      for (size_t i = 0; i < n; ++i)
        ids.push_back(static_cast<uint32_t>(o->at(i).as_int(0, m_limits.cores - 1)));
      std::sort(ids.begin(), ids.end());
      if (ids != m_s.core_ids) o->fail("coreIdsUsed_ differs from the cores of coreIdToWkSlice_");
    }

    Node n_node = d.at("N_");
    m_s.n = parse_dims(n_node, 1);
    if (auto ps = n_node.opt("paddingSizes_")) load_windows(*ps);
    Node stage = d.at("dataStageParam_").at("0");
    Node ss_node = stage.at("ss_");
    Node el_node = stage.at("el_");
    m_s.ss = parse_dims(ss_node, 1);
    m_s.el = parse_dims(el_node, 1);
    check_sizes(n_node, ss_node, el_node);

    load_primary_ds_info(d.at("primaryDsInfo_"));
    load_labeled_ds(d.at("labeledDs_"));
    load_schedule_tree(d.at("scheduleTree_"));
    load_constants(d.opt("constantInfo_"));
    load_masking(d.opt("coordinateMasking_"), d.opt("maskingConstId_"));
    load_compute_ops(d.at("computeOp_"));
    load_indirect(d);
    if (auto o = d.opt("dimToSymbolMapping_")) {
      o->for_each_member([&](const std::string& dim, const Node& v) {
        size_t n = v.array_size(64);
        for (size_t i = 0; i < n; ++i) {
          Node id = v.at(i).at("id");
          int64_t s = id.as_int();
          if (s >= 0) id.fail("dimension symbol id must be negative");
          m_s.dim_symbols[dim].push_back(s);
        }
      }, 64);
    }
  }

  void check_sizes(const Node& n_node, const Node& ss_node, const Node& el_node) const {
    for (const auto& [dim, k] : m_s.slices_per_dim)
      if (find_dim(m_s.n, dim) < 0) n_node.fail("work division inconsistent: sliced dimension " + quote(dim) + " is not in N_");
    for (const auto& [dim, full] : m_s.n) {
      int64_t ss = find_dim(m_s.ss, dim), el = find_dim(m_s.el, dim);
      if (ss < 0) ss_node.fail("dimension " + quote(dim) + " of N_ missing");
      if (el < 0) el_node.fail("dimension " + quote(dim) + " of N_ missing");
      if (el > ss) el_node.fail("epilogue size of " + quote(dim) + " exceeds the steady-state size");
      int64_t k = m_s.slices_of(dim);
      // k-1 full slices plus one epilogue slice must tile the dimension exactly.
      if (ss * (k - 1) + el != full)
        ss_node.fail("work division inconsistent: " + quote(dim) + " has " + std::to_string(k) +
                     " slices of " + std::to_string(ss) + " (last " + std::to_string(el) +
                     ") but N_ is " + std::to_string(full));
    }
  }

  void load_primary_ds_info(const Node& node) {
    node.for_each_member([&](const std::string& role, const Node& v) {
      LayoutInfo li;
      Node lo = v.at("layoutDimOrder_");
      li.layout_dim_order = lo.as_string_list();
      check_dims_known(lo, li.layout_dim_order);
      Node so = v.at("stickDimOrder_");
      li.stick_dim_order = so.as_string_list();
      Node sz = v.at("stickSize_");
      size_t n = sz.array_size(64);
      if (n != li.stick_dim_order.size()) sz.fail("stickSize_ and stickDimOrder_ differ in length");
      if (n == 0) so.fail("a layout needs at least one stick dimension");
      int64_t elems = 1;
      for (size_t i = 0; i < n; ++i) {
        li.stick_size.push_back(sz.at(i).as_int(1, 512));
        elems = std::min<int64_t>(elems * li.stick_size.back(), 1 << 20);
        if (std::find(li.layout_dim_order.begin(), li.layout_dim_order.end(), li.stick_dim_order[i]) ==
            li.layout_dim_order.end())
          so.fail("stick dimension " + quote(li.stick_dim_order[i]) + " is not in layoutDimOrder_");
      }
      if (elems > 512) sz.fail("a 128-byte stick holds at most 512 elements, stickSize_ gives " + std::to_string(elems));
      // Every core's slice is a whole number of sticks (B.2); index tensors are exempt.
      if (role != "KERNEL_IDX" && n == 1) {
        const std::string& dim = li.stick_dim_order[0];
        int64_t ss = m_s.ss_of(dim);
        if (m_s.slices_of(dim) > 1 && ss > 0 && ss % li.stick_size[0] != 0)
          so.fail("core slice of stick dimension " + quote(dim) + " (ss_ " + std::to_string(ss) +
                  ") is not a whole number of sticks of " + std::to_string(li.stick_size[0]));
      }
      m_s.primary_ds_info[role] = std::move(li);
    }, 16);
  }

  void check_dims_known(const Node& at, const std::vector<std::string>& dims) const {
    for (size_t i = 0; i < dims.size(); ++i) {
      if (find_dim(m_s.n, dims[i]) < 0) at.at(i).fail("layout dimension " + quote(dims[i]) + " is not in N_");
      for (size_t j = 0; j < i; ++j)
        if (dims[j] == dims[i]) at.at(i).fail("layout dimension " + quote(dims[i]) + " repeated");
    }
  }

  void load_labeled_ds(const Node& node) {
    size_t n = node.array_size();
    if (n > m_limits.max_labeled_ds)
      node.fail("too many labeled tensors: " + std::to_string(n) + " (at most " +
                std::to_string(m_limits.max_labeled_ds) + ")");
    if (n == 0) node.fail("a compute DSC needs at least one labeled tensor");
    for (size_t i = 0; i < n; ++i) {
      Node v = node.at(i);
      LabeledDs ds;
      ds.idx = static_cast<uint32_t>(i);
      Node idx = v.at("ldsIdx_");
      if (idx.as_int() != static_cast<int64_t>(i)) idx.fail("ldsIdx_ must equal the entry's position " + std::to_string(i));
      ds.name = v.at("dsName_").as_string();
      Node type = v.at("dsType_");
      ds.ds_type = type.as_string();
      if (!k_ds_types.count(ds.ds_type)) type.fail("unknown dsType_ " + quote(ds.ds_type));
      Node scale = v.at("scale_");
      size_t ns = scale.array_size(16);
      for (size_t k = 0; k < ns; ++k) {
        Node s = scale.at(k);
        double x = s.as_number();
        if (x != 1 && x != -1 && x != -2) s.fail("scale_ entries must be 1, -1 or -2");
        ds.scale.push_back(static_cast<int32_t>(x));
      }
      ds.format = parse_format(v.at("dataFormat_"));
      Node wl = v.at("wordLength");
      ds.word_length = wl.as_number();
      if (!(ds.word_length > 0 && ds.word_length <= 8)) wl.fail("wordLength must be in (0, 8]");
      uint32_t bits = data_format_bits(ds.format);
      if (bits >= 8 && ds.word_length * 8 != bits)
        wl.fail("wordLength " + one_line(wl.json().dump()) + " does not match " +
                std::string(to_string(ds.format)) + " (" + std::to_string(bits / 8) + " bytes)");
      if (auto mo = v.opt("memOrg_")) {
        mo->require_object();
        if (auto h = mo->opt("hbm")) ds.mem_hbm = h->opt("isPresent") ? h->at("isPresent").as_flag() : true;
        if (auto l = mo->opt("lx")) ds.mem_lx = l->opt("isPresent") ? l->at("isPresent").as_flag() : true;
      } else {
        ds.mem_hbm = ds.mem_lx = true;  // absent: no residency restriction stated
      }
      m_s.labeled_ds.push_back(std::move(ds));
    }
  }

  void load_schedule_tree(const Node& node) {
    size_t n = node.array_size(256);
    for (size_t i = 0; i < n; ++i) {
      Node v = node.at(i);
      if (v.at("nodeType_").as_string() != "allocate") continue;  // other node kinds: raw only
      Allocation a;
      a.node_index = static_cast<uint32_t>(i);
      a.json_path = v.path();
      if (auto o = v.opt("name_")) a.name = o->as_string();
      Node li = v.at("ldsIdx_");
      a.lds_idx = static_cast<uint32_t>(li.as_int(0, static_cast<int64_t>(m_s.labeled_ds.size()) - 1));
      const LabeledDs& ds = m_s.labeled_ds[a.lds_idx];
      Node comp = v.at("component_");
      std::string c = comp.as_string();
      if (c == "hbm") {
        a.placement = Placement::hbm;
      } else if (c == "lx") {
        a.placement = Placement::lx;
      } else {
        comp.fail("component_ must be \"hbm\" or \"lx\", got " + quote(c));
      }
      if (a.placement == Placement::hbm && !ds.mem_hbm)
        comp.fail("allocation in hbm but memOrg_ of " + quote(ds.name) + " has no hbm");
      if (a.placement == Placement::lx && !ds.mem_lx)
        comp.fail("allocation in lx but memOrg_ of " + quote(ds.name) + " has no lx");
      if (m_s.allocation(a.lds_idx, a.placement))
        v.fail("second " + c + " allocation of labeled tensor " + std::to_string(a.lds_idx));
      if (auto o = v.opt("isStartAddrSymbolic_")) a.symbolic = o->as_flag();
      Node lo = v.at("layoutDimOrder_");
      a.layout_dim_order = lo.as_string_list();
      check_dims_known(lo, a.layout_dim_order);
      if (a.layout_dim_order.size() != ds.scale.size())
        lo.fail("layoutDimOrder_ has " + std::to_string(a.layout_dim_order.size()) +
                " dimensions but scale_ of " + quote(ds.name) + " has " + std::to_string(ds.scale.size()));
      if (auto o = v.opt("maxDimSizes_")) {
        size_t nm = o->array_size(16);
        if (nm != a.layout_dim_order.size()) o->fail("maxDimSizes_ length differs from layoutDimOrder_");
        for (size_t k = 0; k < nm; ++k) a.max_dim_sizes.push_back(o->at(k).as_int(-1, k_max_dim));
      }
      if (auto o = v.opt("indirectAllocType_")) {
        a.indirect_alloc_type = o->as_string();
        if (a.indirect_alloc_type != "no_indirection" && a.indirect_alloc_type != "index_tensor" &&
            a.indirect_alloc_type != "value_tensor")
          o->fail("unknown indirectAllocType_ " + quote(a.indirect_alloc_type) +
                  " (expected \"no_indirection\", \"index_tensor\" or \"value_tensor\")");
        if (a.indirect_alloc_type != "no_indirection" && a.placement != Placement::hbm)
          o->fail("an indirect access's " + a.indirect_alloc_type + " must be in hbm, not lx");
      }
      if (auto o = v.opt("relatedIndirectAccessAlloc_")) a.related_indirect = o->as_string();
      if (auto o = v.opt("padding_")) {
        o->for_each_member([&](const std::string& dim, const Node& val) {
          const Window* w = m_s.window_of(dim);
          if (!w) val.fail("padding_ on " + quote(dim) + ", which no N_.paddingSizes_ window covers");
          if (std::find(a.layout_dim_order.begin(), a.layout_dim_order.end(), dim) == a.layout_dim_order.end()) {
            // A window's dim of one element, left out of N_ and of the layout (load_windows)
            if (find_dim(m_s.n, dim) < 0 && w->total == 1) return;
            val.fail("padding_ on " + quote(dim) + ", which is not in the allocation's layoutDimOrder_");
          }
          a.windowed.insert(dim);
        }, 16);
      }
      if (auto o = v.opt("indexTensorType_")) a.index_tensor_type = o->as_string();
      if (auto o = v.opt("backGapCore_")) load_back_gap(a, *o);
      const LayoutInfo* layout = m_s.layout_for(ds);
      if (!layout) v.fail("no primaryDsInfo_ entry for dsType_ " + quote(ds.ds_type));
      for (const auto& sd : layout->stick_dim_order)
        if (std::find(a.layout_dim_order.begin(), a.layout_dim_order.end(), sd) == a.layout_dim_order.end())
          lo.fail("stick dimension " + quote(sd) + " missing from the allocation's layout");
      compute_footprint(a, ds, *layout, v);
      load_start_addresses(a, v.at("startAddressCoreCorelet_"));
      if (auto co = v.opt("coordinates_")) load_coordinates(a, *co);
      m_s.allocations.push_back(std::move(a));
    }
    for (const auto& ds : m_s.labeled_ds)
      if (!m_s.allocation(ds.idx, Placement::hbm) && !m_s.allocation(ds.idx, Placement::lx))
        node.fail("labeled tensor " + std::to_string(ds.idx) + " (" + quote(ds.name) + ") has no allocate node");
  }

  // backGapCore_: {"<dim>": {"<core>": "<elements>"}}, core "-1" for HBM (one value for the whole
  // tensor), else each used core, all with the same value (per-core gaps are not modelled).
  void load_back_gap(Allocation& a, const Node& g) const {
    g.for_each_member([&](const std::string& dim, const Node& per_core) {
      if (std::find(a.layout_dim_order.begin(), a.layout_dim_order.end(), dim) == a.layout_dim_order.end())
        per_core.fail("dim " + quote(dim) + " is not in the allocation's layoutDimOrder_");
      if (per_core.object_size(64) == 0) per_core.fail("expected {\"<core>\": \"<elements>\"}, got an empty object");
      std::optional<int64_t> gap;
      per_core.for_each_member([&](const std::string& core, const Node& val) {
        if (core != "-1") {
          auto c = parse_decimal(core);
          if (!c || *c < 0 || std::find(m_s.core_ids.begin(), m_s.core_ids.end(), uint32_t(*c)) == m_s.core_ids.end())
            val.fail("core key " + quote(core) + " is neither \"-1\" nor a used core id");
        }
        int64_t x = 0;
        if (val.is_string()) {
          auto d = parse_decimal(val.as_string());
          if (!d) val.fail("expected a decimal element count, got " + quote(val.as_string()));
          x = *d;
        } else {
          x = val.as_int();
        }
        if (x < 0 || x > k_max_dim) val.fail("gap " + std::to_string(x) + " outside [0, " + std::to_string(k_max_dim) + "]");
        if (gap && *gap != x)
          val.fail("gap " + std::to_string(x) + " differs from another core's " + std::to_string(*gap) +
                   " (per-core gaps are not supported)");
        gap = x;
      }, 64);
      a.back_gap[dim] = *gap;
    }, 16);
  }

  // Stick-tiled footprint (B.5): the first listed dim has a stride of one stick, each later dim
  // the product of the earlier counts; a stick dim counts sticks, not elements.
  void compute_footprint(Allocation& a, const LabeledDs& ds, const LayoutInfo& layout, const Node& at) const {
    uint32_t bits = data_format_bits(ds.format);
    if (bits == 0) bits = static_cast<uint32_t>(std::lround(ds.word_length * 8));
    const uint64_t stick_bits = uint64_t{m_limits.stick_bytes} * 8;
    uint64_t core_sticks = 1, full_sticks = 1, span = 0, stride = 1;
    for (size_t i = 0; i < a.layout_dim_order.size(); ++i) {
      const std::string& dim = a.layout_dim_order[i];
      int32_t scale = m_s.scale_of(ds, dim);
      auto full = static_cast<uint64_t>(m_s.n_of(dim));
      auto core = static_cast<uint64_t>(std::max(m_s.ss_of(dim), m_s.el_of(dim)));
      // A windowed op's input: its extent is the window's input, a core's the span of its outputs'.
      if (const Window* w = a.windowed.count(dim) ? m_s.window_of(dim) : nullptr) {
        const int64_t k = m_s.n_of(w->window_dim);
        full = static_cast<uint64_t>(w->total);
        core = static_cast<uint64_t>(std::min<int64_t>(w->total, w->span(static_cast<int64_t>(core), k)));
      }
      // A trailing gap widens the whole tensor (HBM) or each core's slice (LX).
      if (auto g = a.back_gap.find(dim); g != a.back_gap.end())
        (a.placement == Placement::hbm ? full : core) += static_cast<uint64_t>(g->second);
      if (scale < 0) full = core = 1;  // reduced or broadcast: one element (or one stick)
      uint64_t per_stick = 0;
      if (layout.stick_dim_order.size() == 1 && layout.stick_dim_order[0] == dim) {
        per_stick = (bits > 0 && stick_bits % bits == 0) ? stick_bits / bits
                                                          : static_cast<uint64_t>(layout.stick_size[0]);
      } else {
        for (size_t k = 0; k < layout.stick_dim_order.size(); ++k)
          if (layout.stick_dim_order[k] == dim)
            per_stick = std::max<uint64_t>(per_stick, 1) * static_cast<uint64_t>(layout.stick_size[k]);
      }
      if (per_stick > 0) {
        full = (full + per_stick - 1) / per_stick;
        core = (core + per_stick - 1) / per_stick;
      }
      core_sticks = sat_mul(core_sticks, core);
      full_sticks = sat_mul(full_sticks, full);
      span = sat_add(span, sat_mul(core - 1, stride));
      stride = sat_mul(stride, full);
    }
    constexpr uint64_t k_cap = uint64_t{1} << 56;
    a.bytes_per_core = sat_mul(core_sticks, m_limits.stick_bytes);
    a.tensor_bytes = sat_mul(full_sticks, m_limits.stick_bytes);
    a.span_per_core = a.placement == Placement::lx ? a.bytes_per_core
                                                   : sat_mul(sat_add(span, 1), m_limits.stick_bytes);
    if (a.tensor_bytes > k_cap) at.fail("tensor size overflows the address space");
    if (a.placement == Placement::hbm && a.span_per_core > m_limits.per_core_span)
      at.fail("per-core HBM span of " + std::to_string(a.span_per_core) + " bytes exceeds the " +
              std::to_string(m_limits.per_core_span) + "-byte limit");
    if (a.placement == Placement::lx && a.bytes_per_core > m_limits.lx_usable())
      at.fail("LX overflow: one core's slice needs " + std::to_string(a.bytes_per_core) +
              " bytes, LX has " + std::to_string(m_limits.lx_usable()) + " usable");
  }

  // coordinates_: {coordInfo: {dim: {folds: fold manager}}, coreIdToWkSlice_: {core: {dim: slice}}}.
  void load_coordinates(Allocation& a, const Node& co) {
    co.require_object();
    if (auto ci = co.opt("coordInfo")) {
      ci->object_size(16);
      for (auto it = ci->json().begin(); it != ci->json().end(); ++it) {
        Node dim = ci->child(it.key());
        if (std::find(a.layout_dim_order.begin(), a.layout_dim_order.end(), it.key()) == a.layout_dim_order.end())
          dim.fail("coordinate dimension " + quote(it.key()) + " is not in the allocation's layoutDimOrder_");
        auto fo = dim.opt("folds");
        if (!fo) continue;
        Node attrs = fo->at("dim_prop_attr");
        Node funcs = fo->at("dim_prop_func");
        const size_t n = attrs.array_size(8);
        if (funcs.array_size(8) != n) funcs.fail("dim_prop_func and dim_prop_attr differ in length");
        std::vector<Allocation::Fold> folds;
        for (size_t i = 0; i < n; ++i) {
          Allocation::Fold f;
          // The compiler writes factor_ 0 on some folds (index_select): an empty fold, kept as is.
          f.factor = attrs.at(i).at("factor_").as_int(0, k_max_dim);
          if (auto l = attrs.at(i).opt("label_")) f.label = l->as_string();
          Node fn = funcs.at(i);
          if (auto af = fn.opt("Affine")) f.alpha = af->at("alpha_").as_int(0, k_max_dim);
          folds.push_back(std::move(f));
        }
        a.coord_folds[it.key()] = std::move(folds);
      }
    }
    if (auto ws = co.opt("coreIdToWkSlice_")) {
      ws->object_size(1024);
      for (auto it = ws->json().begin(); it != ws->json().end(); ++it) {
        Node core = ws->child(it.key());
        int64_t id = -1;
        try {
          size_t used = 0;
          id = std::stoll(it.key(), &used);
          if (used != it.key().size()) id = -1;
        } catch (const std::exception&) {
        }
        if (id < 0 || id > 4095) core.fail("core id " + quote(it.key()) + " is not a number in [0, 4095]");
        core.object_size(16);
        auto& slice = a.wk_slice[static_cast<uint32_t>(id)];
        for (auto jt = core.json().begin(); jt != core.json().end(); ++jt)
          slice[jt.key()] = core.child(jt.key()).as_int(0, k_max_dim);
      }
    }
  }

  void load_start_addresses(Allocation& a, const Node& fm) {
    Node attrs = fm.at("dim_prop_attr");
    Node funcs = fm.at("dim_prop_func");
    size_t nd = attrs.array_size(8);
    if (nd == 0) attrs.fail("fold manager needs at least the core dimension");
    if (funcs.array_size(8) != nd) funcs.fail("dim_prop_func and dim_prop_attr differ in length");
    std::vector<int64_t> factors;
    std::vector<bool> is_const;
    for (size_t i = 0; i < nd; ++i) {
      factors.push_back(attrs.at(i).at("factor_").as_int(1, 1024));
      Node f = funcs.at(i);
      if (f.object_size() != 1) f.fail("a fold function holds exactly one key (Map, Const or Affine)");
      std::string kind = f.json().begin().key();
      if (kind != "Map" && kind != "Const" && kind != "Affine") f.fail("unknown fold function " + quote(kind));
      is_const.push_back(kind == "Const");
    }
    Node label = attrs.at(size_t{0}).at("label_");
    if (label.as_string() != "core") label.fail("the first start-address fold must be \"core\"");
    uint32_t max_core = m_s.core_ids.empty() ? 0 : m_s.core_ids.back();
    if (factors[0] > static_cast<int64_t>(m_limits.cores))
      attrs.at(size_t{0}).fail("core fold factor exceeds the card's cores");
    if (!is_const[0] && factors[0] <= static_cast<int64_t>(max_core))
      attrs.at(size_t{0}).fail("core fold factor " + std::to_string(factors[0]) + " does not cover core " + std::to_string(max_core));

    Node data = fm.at("data_");
    // Map dims enumerate their factor; Const dims have the single index 0.
    uint64_t expected = 1;
    for (size_t i = 0; i < nd; ++i) expected = sat_mul(expected, is_const[i] ? 1 : static_cast<uint64_t>(factors[i]));
    data.object_size(std::min<uint64_t>(expected, k_max_array));
    std::map<std::vector<int64_t>, StartAddress> values;
    data.for_each_member([&](const std::string& key, const Node& v) {
      auto k = parse_index_key(key);
      if (!k || k->size() != nd) v.fail("fold key must be a list of " + std::to_string(nd) + " indices");
      for (size_t i = 0; i < nd; ++i)
        if ((*k)[i] >= factors[i] || (is_const[i] && (*k)[i] != 0))
          v.fail("fold index " + std::to_string((*k)[i]) + " out of range in dimension " + std::to_string(i));
      StartAddress sa;
      std::optional<int64_t> x;
      if (v.is_string()) {
        x = parse_decimal(v.as_string());
      } else {
        x = v.as_int();
      }
      if (!x) v.fail("start address must be a decimal integer string");
      sa.value = *x;
      sa.symbolic = a.symbolic;
      if (a.symbolic && *x >= 0)
        v.fail("isStartAddrSymbolic_ is set but " + std::to_string(*x) + " is not a (negative) symbol id");
      if (!a.symbolic && *x < 0)
        v.fail("negative start address " + std::to_string(*x) + " without isStartAddrSymbolic_");
      if (!a.symbolic) check_literal(a, *x, v);
      values[*k] = sa;
    });
    a.start.assign(max_core + 1, StartAddress{});
    for (uint32_t core : m_s.core_ids) {
      std::vector<int64_t> key(nd, 0);
      key[0] = is_const[0] ? 0 : core;
      auto it = values.find(key);
      if (it == values.end()) data.fail("no start address for core " + std::to_string(core));
      a.start[core] = it->second;
    }
  }

  void check_literal(const Allocation& a, int64_t x, const Node& at) const {
    if (x % m_limits.stick_bytes != 0)
      at.fail("start address " + std::to_string(x) + " is not aligned to the " +
              std::to_string(m_limits.stick_bytes) + "-byte stick");
    if (a.placement == Placement::lx) {
      uint64_t end = sat_add(static_cast<uint64_t>(x), a.bytes_per_core);
      if (end > m_limits.lx_usable())
        at.fail("LX overflow: offset " + std::to_string(x) + " + " + std::to_string(a.bytes_per_core) +
                " bytes exceeds the " + std::to_string(m_limits.lx_usable()) + " usable LX bytes per core");
    }
  }

  // coordinateMasking_ {"<dim>": [[start, length], ...]} (or "{}"), maskingConstId_ (-1 or the
  // constantInfo_ key of the mask value).
  void load_masking(const std::optional<Node>& masking, const std::optional<Node>& const_id) {
    if (masking && !(masking->is_string() && masking->as_string() == "{}")) {
      masking->for_each_member([&](const std::string& dim, const Node& ranges) {
        const int64_t n = m_s.n_of(dim);
        if (n < 0) ranges.fail("dim " + quote(dim) + " is not in N_");
        const size_t k = ranges.array_size(64);
        for (size_t i = 0; i < k; ++i) {
          const Node r = ranges.at(i);
          if (r.array_size(2) != 2) r.fail("expected [start, length]");
          const int64_t start = r.at(size_t{0}).as_int(0, n), len = r.at(size_t{1}).as_int(0, n);
          if (start + len > n)
            r.fail("range [" + std::to_string(start) + ", +" + std::to_string(len) + ") runs past N_ " + std::to_string(n));
          m_s.coordinate_masking[dim].emplace_back(start, len);
        }
      }, 16);
    }
    const int64_t id = const_id ? const_id->as_int(-1, 1 << 20) : -1;
    if (m_s.coordinate_masking.empty()) return;
    if (id < 0) (const_id ? *const_id : *masking).fail("coordinateMasking_ is set but maskingConstId_ names no constant");
    for (size_t i = 0; i < m_s.constants.size(); ++i)
      if (m_s.constants[i].key == std::to_string(id)) m_s.masking_constant = static_cast<int>(i);
    if (m_s.masking_constant < 0) const_id->fail("no constantInfo_ entry " + quote(std::to_string(id)) + " for the mask value");
  }

  void load_constants(const std::optional<Node>& node) {
    if (!node) return;
    if (node->is_string()) {
      std::string s = node->as_string();
      if (s != "{}" && !s.empty()) node->fail("constantInfo_ string must be \"{}\"");
      return;
    }
    node->for_each_member([&](const std::string& key, const Node& v) {
      Constant c;
      c.key = key;
      c.name = v.at("name_").as_string();
      c.format = parse_format(v.at("dataFormat_"));
      Node data = v.at("data_").at("data_");
      if (data.object_size() == 0) data.fail("constant has no value");
      Node first = data.child(data.json().begin().key());
      size_t n = first.array_size(256);
      uint32_t bits = data_format_bits(c.format);
      for (size_t i = 0; i < n; ++i) {
        Node e = first.at(i);
        std::optional<int64_t> x = e.is_string() ? parse_decimal(e.as_string()) : std::optional<int64_t>(e.as_int());
        if (!x || *x < 0) e.fail("constant encoding must be a non-negative decimal string");
        if (bits > 0 && bits < 63 && (static_cast<uint64_t>(*x) >> bits) != 0)
          e.fail("constant encoding " + std::to_string(*x) + " does not fit " + std::string(to_string(c.format)));
        c.raw.push_back(static_cast<uint64_t>(*x));
      }
      m_s.constants.push_back(std::move(c));
    }, 64);
  }

  std::vector<uint32_t> parse_operands(const Node& node) const {
    std::vector<uint32_t> out;
    size_t n = node.array_size(16);
    for (size_t i = 0; i < n; ++i) {
      Node e = node.at(i);
      std::string s = e.as_string();
      size_t p = s.rfind("-idx");
      auto k = p == std::string::npos ? std::nullopt : parse_decimal(s.substr(p + 4));
      if (!k || *k < 0 || *k >= static_cast<int64_t>(m_s.labeled_ds.size()))
        e.fail("operand " + quote(s) + " does not name a labeled tensor (\"Tensor<i>-idx<k>\")");
      const LabeledDs& ds = m_s.labeled_ds[static_cast<size_t>(*k)];
      if (s.substr(0, p) != ds.name)
        e.fail("operand " + quote(s) + " does not match labeledDs_[" + std::to_string(*k) + "] " + quote(ds.name));
      out.push_back(static_cast<uint32_t>(*k));
    }
    return out;
  }

  void load_compute_ops(const Node& node) {
    size_t n = node.array_size(64);
    if (n == 0) node.fail("computeOp_ is empty");
    for (size_t i = 0; i < n; ++i) {
      Node v = node.at(i);
      ComputeOp op;
      Node unit = v.at("exUnit");
      std::string u = unit.as_string();
      if (u == "pt") {
        op.ex_unit = ExUnit::pt;
      } else if (u == "sfp") {
        op.ex_unit = ExUnit::sfp;
      } else if (u == "pe") {
        op.ex_unit = ExUnit::pe;
      } else {
        unit.fail("unknown exUnit " + quote(u));
      }
      Node name = v.at("opFuncName");
      op.op_func_name = name.as_string();
      auto engine = op_func_engine(op.op_func_name);
      if (!engine) name.fail("unknown opFuncName " + quote(op.op_func_name));
      if (*engine == OpEngine::pt && op.ex_unit == ExUnit::sfp)
        unit.fail(quote(op.op_func_name) + " runs on the pt array, not sfp");
      if (*engine == OpEngine::sfp && op.ex_unit != ExUnit::sfp)
        unit.fail(quote(op.op_func_name) + " runs on the sfp, not " + u);
      if (auto attrs = v.opt("attributes_")) {
        if (auto f = attrs->opt("dataFormat_")) op.data_format = parse_format(*f);
        if (auto f = attrs->opt("fidelity_")) op.fidelity = f->as_string();
      }
      if (auto o = v.opt("location")) op.location = o->as_string();
      op.inputs = parse_operands(v.at("inputLabeledDs"));
      Node outs = v.at("outputLabeledDs");
      op.outputs = parse_operands(outs);
      if (op.outputs.empty()) outs.fail("a compute op needs an output");
      if (auto o = v.opt("indirectAccessIndexLabeledDs")) op.index_inputs = parse_operands(*o);
      m_s.compute_ops.push_back(std::move(op));
    }
  }

  // ---- windows (N_.paddingSizes_: a pooling op's input extents) ---------------------------------
  void load_windows(const Node& ps) {
    ps.for_each_member([&](const std::string& dim, const Node& v) {
      Window w;
      w.dim = dim;
      Node wd = v.at("windowDim_");
      w.window_dim = wd.as_string();
      if (find_dim(m_s.n, w.window_dim) < 0) wd.fail("window dim " + quote(w.window_dim) + " is not in N_");
      w.total = v.at("totalSize_").as_int(1, k_max_dim);
      // A spatial dim of one element is dropped from N_ (torch-spyre's depthwise convolution of a
      // [N, C, H, 1] input keeps the window, totalSize_ 1): its one output position.
      int64_t outputs = find_dim(m_s.n, dim);
      if (outputs < 0) {
        if (w.total != 1)
          v.fail("window over " + quote(dim) + ", which is not in N_ (only a dim of one element, totalSize_ 1, may be "
                 "left out)");
        outputs = 1;
      }
      if (auto o = v.opt("stride_")) w.stride = o->as_int(1, k_max_dim);
      if (auto o = v.opt("dilation_")) w.dilation = o->as_int(1, k_max_dim);
      if (auto o = v.opt("padFront_")) w.pad_front = o->as_int(0, k_max_dim);
      if (auto o = v.opt("padBack_")) w.pad_back = o->as_int(0, k_max_dim);
      const int64_t reach = w.span(outputs, find_dim(m_s.n, w.window_dim));
      if (reach > w.total + w.pad_front + w.pad_back)
        v.fail("the windows of N_ " + std::to_string(outputs) + " outputs reach " + std::to_string(reach) +
               " positions, past totalSize_ " + std::to_string(w.total) + " and its padding");
      // And as far as a window fits: a further stride would hold another output (the extents
      // disagree, and the data run would size its input by totalSize_, up to 2^40 elements).
      if (w.total + w.pad_front + w.pad_back - reach >= w.stride)
        v.fail("totalSize_ " + std::to_string(w.total) + " with its padding holds more windows than N_'s " +
               std::to_string(outputs) + " outputs (they reach " + std::to_string(reach) + " positions, stride " +
               std::to_string(w.stride) + ")");
      m_s.windows.push_back(std::move(w));
    }, 16);
  }

  // ---- indirect access (B.7): value / index tensor pairs ----------------------------------------
  void load_indirect(const Node& d) {
    Node tree = d.at("scheduleTree_");
    auto node_of = [&](const Allocation& a) { return tree.at(size_t{a.node_index}); };
    auto by_name = [&](const std::string& name) -> const Allocation* {
      for (const auto& a : m_s.allocations)
        if (a.name == name) return &a;
      return nullptr;
    };
    std::set<uint32_t> index_lds;
    for (const auto& a : m_s.allocations) {
      const LabeledDs& ds = m_s.labeled_ds[a.lds_idx];
      const bool idx = a.indirect_alloc_type == "index_tensor";
      if ((ds.ds_type == "KERNEL_IDX") != idx)
        node_of(a).fail(idx ? "an index_tensor allocation's labeled tensor must have dsType_ \"KERNEL_IDX\", not " +
                                  quote(ds.ds_type)
                            : "labeled tensor " + quote(ds.name) +
                                  " has dsType_ \"KERNEL_IDX\" but its allocation's indirectAllocType_ is not \"index_tensor\"");
      if (a.indirect_alloc_type != "index_tensor" && a.indirect_alloc_type != "value_tensor") continue;
      const Allocation* other = a.related_indirect.empty() ? nullptr : by_name(a.related_indirect);
      const std::string want = idx ? "value_tensor" : "index_tensor";
      if (!other || other->indirect_alloc_type != want || other->related_indirect != a.name)
        node_of(a).fail("relatedIndirectAccessAlloc_ " + quote(a.related_indirect) + " must name this SDSC's " + want +
                        " allocation, which names this one back");
      if (idx) {
        index_lds.insert(a.lds_idx);
        if (a.index_tensor_type != "index")
          node_of(a).fail("indexTensorType_ " + quote(a.index_tensor_type) +
                          " is not supported: vspyre reads \"index\" (element numbers along the value tensor's "
                          "rows), as torch-spyre writes it");
        if (ds.format != DataFormat::senuint32 && ds.format != DataFormat::ieee_int32)
          node_of(a).fail("an index tensor must be SENUINT32 or IEEE_INT32, " + quote(ds.name) + " is not");
        continue;
      }
      IndirectAccess ia;
      ia.value_lds = a.lds_idx;
      ia.index_lds = other->lds_idx;
      Node nd = node_of(a);
      if (a.max_dim_sizes.size() != a.layout_dim_order.size())
        nd.fail("a value_tensor allocation needs maxDimSizes_ (1 on the dims its index replaces)");
      const LayoutInfo* li = m_s.layout_for(ds);
      for (size_t k = 0; k < a.layout_dim_order.size(); ++k) {
        const int64_t m = a.max_dim_sizes[k];
        const std::string& dim = a.layout_dim_order[k];
        if (m == 1) {
          if (li && std::find(li->stick_dim_order.begin(), li->stick_dim_order.end(), dim) != li->stick_dim_order.end())
            nd.fail("maxDimSizes_ makes the stick dimension " + quote(dim) + " indirect; an index selects whole rows");
          ia.dims.push_back(dim);
        } else if (m != -1) {
          nd.fail("maxDimSizes_ " + std::to_string(m) + " on " + quote(dim) +
                  ": only -1 (direct) and 1 (replaced by the index) are supported");
        }
        // A direct dim listed outside an indexed one is not refused: memory holds the indexed
        // dims outermost (IndirectAccess::memory_order).
      }
      if (ia.dims.empty()) nd.fail("a value_tensor allocation needs maxDimSizes_ 1 on the dims its index replaces");
      std::vector<std::string> want_dims = ia.dims, have_dims = other->layout_dim_order;
      std::sort(want_dims.begin(), want_dims.end());
      std::sort(have_dims.begin(), have_dims.end());
      if (want_dims != have_dims)
        nd.fail("the dims maxDimSizes_ makes indirect differ from the index tensor " +
                quote(m_s.labeled_ds[other->lds_idx].name) + "'s layoutDimOrder_");
      m_s.indirect.push_back(std::move(ia));
    }
    Node ops = d.at("computeOp_");
    for (size_t i = 0; i < m_s.compute_ops.size(); ++i) {
      const ComputeOp& op = m_s.compute_ops[i];
      Node on = ops.at(i);
      for (uint32_t k : op.index_inputs)
        if (!index_lds.count(k))
          on.at("indirectAccessIndexLabeledDs").fail("labeled tensor " + std::to_string(k) + " is not an index tensor");
      for (const auto* list : {&op.inputs, &op.outputs})
        for (uint32_t k : *list) {
          if (index_lds.count(k))
            on.fail("index tensor " + std::to_string(k) + " is an operand; it belongs in indirectAccessIndexLabeledDs");
          if (const IndirectAccess* ia = m_s.indirect_of(k);
              ia && std::find(op.index_inputs.begin(), op.index_inputs.end(), ia->index_lds) == op.index_inputs.end())
            on.fail("value tensor " + std::to_string(k) + " is reached through index tensor " +
                    std::to_string(ia->index_lds) + ", which indirectAccessIndexLabeledDs does not list");
        }
    }
    for (uint32_t k : index_lds) {
      bool used = false;
      for (const auto& op : m_s.compute_ops)
        used = used || std::find(op.index_inputs.begin(), op.index_inputs.end(), k) != op.index_inputs.end();
      if (!used) ops.fail("index tensor " + std::to_string(k) + " is in no computeOp_'s indirectAccessIndexLabeledDs");
    }
  }

  void finish_symbols() {
    std::set<int64_t> syms;
    for (const auto& a : m_s.allocations)
      for (uint32_t core : m_s.core_ids)
        if (a.start[core].symbolic) syms.insert(a.start[core].value);
    for (const auto& [dim, ids] : m_s.dim_symbols) syms.insert(ids.begin(), ids.end());
    m_s.symbols.assign(syms.begin(), syms.end());
  }

  std::string_view m_text;
  const CardLimits& m_limits;
  Sdsc m_s;
  size_t m_num_dscs = 0;
  std::map<uint32_t, uint32_t> m_schedule_by_dsc;
};

}  // namespace

int64_t Sdsc::n_of(std::string_view dim) const { return find_dim(n, dim); }
int64_t Sdsc::ss_of(std::string_view dim) const { return find_dim(ss, dim); }
int64_t Sdsc::el_of(std::string_view dim) const { return find_dim(el, dim); }
uint32_t Sdsc::slices_of(std::string_view dim) const {
  for (const auto& [k, v] : slices_per_dim)
    if (k == dim) return v;
  return 1;
}
const Window* Sdsc::window_of(std::string_view dim) const {
  for (const auto& w : windows)
    if (w.dim == dim) return &w;
  return nullptr;
}
const IndirectAccess* Sdsc::indirect_of(uint32_t value_lds) const {
  for (const auto& ia : indirect)
    if (ia.value_lds == value_lds) return &ia;
  return nullptr;
}
bool Sdsc::is_index_tensor(uint32_t lds) const {
  for (const auto& ia : indirect)
    if (ia.index_lds == lds) return true;
  return false;
}
const Allocation* Sdsc::allocation(uint32_t lds_idx, Placement p) const {
  for (const auto& a : allocations)
    if (a.lds_idx == lds_idx && a.placement == p) return &a;
  return nullptr;
}
int32_t Sdsc::scale_of(const LabeledDs& ds, std::string_view dim) const {
  const LayoutInfo* li = layout_for(ds);
  if (!li) return 1;
  auto it = std::find(li->layout_dim_order.begin(), li->layout_dim_order.end(), dim);
  const auto pos = static_cast<size_t>(it - li->layout_dim_order.begin());
  return it != li->layout_dim_order.end() && pos < ds.scale.size() ? ds.scale[pos] : 1;
}

std::map<std::string, int64_t> Sdsc::restickify_pad() const {
  std::map<std::string, int64_t> out;
  bool restickify = false;
  for (const auto& op : compute_ops) restickify = restickify || op.op_func_name == "ReStickifyOpHBM";
  if (!restickify) return out;
  std::map<std::string, int64_t> sticks;  // a tensor's stick dim -> its elements per stick
  for (const auto& ds : labeled_ds)
    if (const LayoutInfo* li = layout_for(ds); li && li->stick_dim_order.size() == 1 && !li->stick_size.empty())
      sticks[li->stick_dim_order[0]] = li->stick_size[0];
  for (const auto& a : allocations) {
    if (a.placement != Placement::hbm || a.lds_idx >= labeled_ds.size()) continue;
    const LayoutInfo* li = layout_for(labeled_ds[a.lds_idx]);
    const std::string own_stick = li && li->stick_dim_order.size() == 1 ? li->stick_dim_order[0] : "";
    for (const auto& [d, g] : a.back_gap) {
      auto st = sticks.find(d);
      if (d == own_stick || st == sticks.end() || g <= 0 || st->second <= 0) continue;
      // Only a padded dim: N_ is the real extent rounded up to whole sticks (so the gap is less
      // than a stick and the real extent is not whole sticks), and torch-spyre does not split
      // it. Otherwise the gap is an ordinary trailing one (a tile of a larger tensor, as in its
      // flash attention, whose restickify carries a gap of 128 on a split dim of N_ 128). A
      // trailing gap that meets all four conditions would be misread; the JSON cannot tell.
      const int64_t n = n_of(d), eps = st->second, real = n - g;
      if (real > 0 && n % eps == 0 && real % eps != 0 && g < eps && slices_of(d) == 1)
        out[d] = std::max(out[d], g);
    }
  }
  return out;
}

const LayoutInfo* Sdsc::layout_for(const LabeledDs& ds) const {
  auto it = primary_ds_info.find(ds.ds_type);
  return it == primary_ds_info.end() ? nullptr : &it->second;
}

Sdsc parse_sdsc_json(std::string_view text, std::string_view file_name, const CardLimits& limits) {
  return SdscLoader(text, std::string(file_name), limits).run();
}

}  // namespace vspyre::bundle
