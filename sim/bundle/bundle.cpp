#include "sim/bundle/bundle.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

namespace vspyre::bundle {
namespace {

constexpr uintmax_t k_max_file_bytes = 64ull << 20;

void for_each_execute(const std::vector<Step>& steps, const std::function<void(const Execute&)>& f) {
  for (const Step& s : steps) {
    if (const auto* e = std::get_if<Execute>(&s.node)) {
      f(*e);
    } else {
      for_each_execute(std::get<Loop>(s.node).body, f);
    }
  }
}

std::string at_line(const Bundle& b, int line) { return b.file + ":" + std::to_string(line); }

// Each sdsc_execute must bind exactly the symbols its SDSC references.
void check_symbols(const LoadedBundle& lb) {
  for_each_execute(lb.bundle.steps, [&](const Execute& e) {
    const Sdsc& s = lb.sdscs.at(e.sdsc_file);
    std::set<int64_t> bound(e.symbol_ids.begin(), e.symbol_ids.end());
    for (int64_t id : s.symbols)
      if (!bound.count(id))
        throw LoadError(at_line(lb.bundle, e.line) + ": symbol mismatch: " + quote(e.sdsc_file) +
                        " uses symbol " + std::to_string(id) + " that sdsc_execute does not bind (" +
                        std::to_string(e.symbol_ids.size()) + " bound, " +
                        std::to_string(s.symbols.size()) + " used)");
    for (int64_t id : e.symbol_ids)
      if (!std::binary_search(s.symbols.begin(), s.symbols.end(), id))
        throw LoadError(at_line(lb.bundle, e.line) + ": symbol mismatch: symbol " + std::to_string(id) +
                        " is bound but " + quote(e.sdsc_file) + " never uses it (" +
                        std::to_string(e.symbol_ids.size()) + " bound, " +
                        std::to_string(s.symbols.size()) + " used)");
  });
}

// The bundle's SDSC files, each once, in the order sdsc_execute first names them; `load(e)`
// reads and parses the file `e` names, `size(e)` is its size in bytes (0 when unknown). A
// bundle of a few dozen SDSCs (a captured attention kernel: 52 files, 1.7 MB of JSON) spends
// most of its load time parsing JSON, and the files are independent, so large sets are parsed
// on several threads. The result does not depend on them: the SDSCs go into the bundle in the
// same order, and when files fail, the first in that order gives the error, as a load one file
// at a time would (files after a failed one are skipped once it has failed; those before it are
// all parsed).
void load_sdscs(LoadedBundle& lb, const std::function<Sdsc(const Execute&)>& load,
                const std::function<uint64_t(const Execute&)>& size) {
  std::vector<const Execute*> files;
  std::set<std::string> seen;
  uint64_t total_bytes = 0;
  for_each_execute(lb.bundle.steps, [&](const Execute& e) {
    if (!seen.insert(e.sdsc_file).second) return;
    files.push_back(&e);
    total_bytes += size(e);
  });
  std::vector<std::optional<Sdsc>> parsed(files.size());
  std::vector<std::exception_ptr> failed(files.size());
  std::atomic<size_t> next{0}, first_failed{files.size()};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < files.size();) {
      if (i > first_failed.load()) continue;  // an earlier file has failed: this one cannot matter
      try {
        parsed[i].emplace(load(*files[i]));
      } catch (...) {
        failed[i] = std::current_exception();
        for (size_t f = first_failed.load(); i < f && !first_failed.compare_exchange_weak(f, i);) {
        }
      }
    }
  };
  // Threads only pay off on a few hundred KiB of JSON; small bundles (and the fuzzer's inputs)
  // load on the calling thread.
  constexpr uint64_t kParallelBytes = 256 << 10;
  const size_t want = total_bytes < kParallelBytes || files.size() < 4
                          ? 1
                          : std::min<size_t>({files.size(), std::max(1u, std::thread::hardware_concurrency()), 8});
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < want; ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads to be had: the rest run here
    }
  }
  work();
  for (std::thread& h : helpers) h.join();
  for (size_t i = 0; i < files.size(); ++i) {
    if (failed[i]) std::rethrow_exception(failed[i]);
    lb.sdscs.emplace(files[i]->sdsc_file, std::move(*parsed[i]));
  }
}

}  // namespace

const Sdsc& LoadedBundle::sdsc(const std::string& file) const {
  auto it = sdscs.find(file);
  if (it == sdscs.end()) throw LoadError(bundle.file + ":1: no SDSC " + quote(file) + " loaded");
  return it->second;
}

std::string read_text_file(const std::filesystem::path& p, const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) {
    std::error_code xec;
    if (std::filesystem::exists(p, xec))  // a device, a pipe, ...: there, but not a bundle's file
      throw LoadError(what + ": " + quote(p.string()) + " is not a regular file (expected a bundle directory, "
                      "its bundle.mlir or an SDSC file)");
    throw LoadError(what + ": file " + quote(p.string()) + " not found");
  }
  auto size = std::filesystem::file_size(p, ec);
  if (ec) throw LoadError(what + ": cannot stat " + quote(p.string()));
  if (size > k_max_file_bytes)
    throw LoadError(what + ": file " + quote(p.string()) + " is larger than " +
                    std::to_string(k_max_file_bytes) + " bytes");
  std::ifstream in(p, std::ios::binary);
  if (!in) throw LoadError(what + ": cannot open " + quote(p.string()));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

LoadedBundle load_bundle_from_memory(std::string_view mlir_text, std::string_view mlir_name,
                                     const std::map<std::string, std::string>& sdsc_texts,
                                     const CardLimits& limits) {
  LoadedBundle lb;
  lb.bundle = parse_bundle_mlir(mlir_text, mlir_name);
  load_sdscs(
      lb,
      [&](const Execute& e) {
        auto it = sdsc_texts.find(e.sdsc_file);
        if (it == sdsc_texts.end())
          throw LoadError(at_line(lb.bundle, e.line) + ": sdsc file " + quote(e.sdsc_file) + " not found");
        return parse_sdsc_json(it->second, e.sdsc_file, limits);
      },
      [&](const Execute& e) -> uint64_t {
        auto it = sdsc_texts.find(e.sdsc_file);
        return it == sdsc_texts.end() ? 0 : it->second.size();
      });
  check_symbols(lb);
  return lb;
}

std::filesystem::path bundle_mlir_path(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path mlir = dir / k_bundle_mlir, ref = dir / k_bundle_ref;
  const bool has_mlir = fs::exists(mlir, ec), has_ref = fs::exists(ref, ec);
  if (!has_ref) {
    if (!has_mlir)
      throw LoadError(quote(dir.string()) + ": not a bundle directory (it holds no " + k_bundle_mlir +
                      " and no " + k_bundle_ref + ")");
    return mlir;
  }
  const std::string where = ref.string();
  if (has_mlir)
    throw LoadError(where + ": stands beside " + mlir.string() +
                    "; a bundle directory holds one or the other, not both");
  const std::string text = read_text_file(ref, k_bundle_ref);
  std::string target;
  int line_no = 0, target_line = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    const auto b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    const auto e = line.find_last_not_of(" \t\r");
    if (target_line != 0)
      throw LoadError(where + ":" + std::to_string(line_no) + ": a second path (the first is on line " +
                      std::to_string(target_line) + "); expected one path to a bundle.mlir");
    target = line.substr(b, e - b + 1);
    target_line = line_no;
  }
  if (target_line == 0)
    throw LoadError(where + ": no path; expected one line naming a bundle.mlir, relative to " +
                    dir.string());
  const fs::path p = fs::path(target).is_absolute() ? fs::path(target) : dir / target;
  if (!fs::is_regular_file(p, ec))
    throw LoadError(where + ":" + std::to_string(target_line) + ": names " + quote(target) + " (" +
                    p.lexically_normal().string() + "), which is not a file");
  return p;
}

bool is_bundle_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::is_directory(dir, ec) &&
         (std::filesystem::exists(dir / k_bundle_mlir, ec) || std::filesystem::exists(dir / k_bundle_ref, ec));
}

LoadedBundle load_bundle(const std::filesystem::path& path, const CardLimits& limits) {
  std::error_code ec;
  const bool is_dir = std::filesystem::is_directory(path, ec);
  const std::filesystem::path dir = is_dir ? path : path.parent_path();
  const std::filesystem::path mlir =
      is_dir || path.filename() == k_bundle_ref ? bundle_mlir_path(dir) : path;
  std::string name = mlir.filename().string();
  std::string text = read_text_file(mlir, name);
  LoadedBundle lb;
  lb.dir = dir;
  lb.bundle = parse_bundle_mlir(text, name);
  load_sdscs(
      lb,
      [&](const Execute& e) {
        std::error_code fec;
        std::filesystem::path p = lb.dir / e.sdsc_file;
        if (!std::filesystem::is_regular_file(p, fec))
          throw LoadError(at_line(lb.bundle, e.line) + ": sdsc file " + quote(e.sdsc_file) +
                          " not found next to the bundle");
        return parse_sdsc_json(read_text_file(p, e.sdsc_file), e.sdsc_file, limits);
      },
      [&](const Execute& e) -> uint64_t {
        std::error_code fec;  // a missing file counts 0 here and fails when its turn comes
        const auto n = std::filesystem::file_size(lb.dir / e.sdsc_file, fec);
        return fec ? 0 : n;
      });
  check_symbols(lb);
  return lb;
}

std::vector<ResolvedExecution> resolve(const LoadedBundle& lb, const Bindings& bindings,
                                       const CardLimits& limits) {
  std::vector<ResolvedExecution> out;
  for (Execution& x : unroll(lb.bundle, bindings, limits)) {
    ResolvedExecution r;
    r.sdsc = &lb.sdsc(x.sdsc_file);
    const Sdsc& s = *r.sdsc;
    // Symbols whose value the bundle computes from the pool (%pool + offset): the tensors at them
    // are the kernel's private HBM, and must lie inside the bytes device_mem_allocate asked for
    // (past them is whatever the runtime placed next).
    std::set<int64_t> pool_symbols;
    if (x.source && lb.bundle.pool_bytes)
      for (size_t i = 0; i < x.source->symbol_ids.size() && i < x.source->operands.size(); ++i)
        for (const Term& t : x.source->operands[i].terms)
          if (t.kind == AtomKind::pool && t.coeff != 0) pool_symbols.insert(x.source->symbol_ids[i]);
    for (const Allocation& a : s.allocations) {
      std::vector<uint64_t> addr(a.start.size(), 0);
      for (uint32_t core : s.core_ids) {
        const StartAddress& sa = a.start[core];
        if (!sa.symbolic) {
          addr[core] = static_cast<uint64_t>(sa.value);  // literals were checked at load
          continue;
        }
        auto it = x.symbols.find(sa.value);
        const std::string where = s.file + ": " + a.json_path + "/startAddressCoreCorelet_/data_: core " +
                                  std::to_string(core) + " symbol " + std::to_string(sa.value) +
                                  " (bound at " + at_line(lb.bundle, x.source ? x.source->line : 0) + ")";
        if (it == x.symbols.end()) throw LoadError(where + ": symbol is not bound");
        uint64_t v = it->second;
        if (v % limits.stick_bytes != 0)
          throw LoadError(where + ": address " + std::to_string(v) + " is not aligned to the " +
                          std::to_string(limits.stick_bytes) + "-byte stick");
        if (a.placement == Placement::lx) {
          if (v > limits.lx_usable() || a.bytes_per_core > limits.lx_usable() - v)
            throw LoadError(where + ": LX overflow: offset " + std::to_string(v) + " + " +
                            std::to_string(a.bytes_per_core) + " bytes exceeds the " +
                            std::to_string(limits.lx_usable()) + " usable LX bytes per core");
        } else if (v + a.span_per_core < v) {
          throw LoadError(where + ": HBM span wraps around the address space");
        } else if (pool_symbols.count(sa.value)) {
          const uint64_t pool = *lb.bundle.pool_bytes;
          if (v < bindings.pool_base || v - bindings.pool_base > pool || a.span_per_core > pool - (v - bindings.pool_base))
            throw LoadError(where + ": the tensor lies in the kernel's pool at offset " +
                            std::to_string(static_cast<int64_t>(v - bindings.pool_base)) + " and spans " +
                            std::to_string(a.span_per_core) + " bytes: past the end of the " + std::to_string(pool) +
                            "-byte pool that sdscbundle.device_mem_allocate asks for");
        }
        addr[core] = v;
      }
      r.addresses.push_back(std::move(addr));
    }
    r.exec = std::move(x);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace vspyre::bundle
