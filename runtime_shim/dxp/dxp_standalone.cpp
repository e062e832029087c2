// dxp_standalone: vspyre's stand-in for IBM's backend compiler. torch-spyre runs
// `dxp_standalone -d DIR` after writing DIR/bundle.mlir and DIR/sdsc_*.json, then loads
// DIR/spyreCodeDir as a SpyreCode directory (flex-api.md 6 and 10, formats.md E).
//
// This tool validates the bundle with the bundles loader (and binds it once at made-up
// addresses, which runs the unroll/bind checks), then writes spyreCodeDir/spyrecode.json and
// spyreCodeDir/init_binary.bin: a program image that carries the bundle itself
// (runtime_shim/src/program_image.h), and the vspyre HCM the runtime's program correction
// understands. runtime_shim/README.md documents both formats.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>

#include "flex/flex.hpp"
#include "program_image.h"
#include "sim/bundle/bundle.h"
#include "sim/exec/exec.h"
#include "sim/plan/lower.h"

namespace fs = std::filesystem;

namespace {

constexpr const char* kUsage =
    "usage: dxp_standalone -d DIR [-o OUT_DIR]\n"
    "\n"
    "Validates the SuperDSC bundle DIR/bundle.mlir (and the sdsc_*.json files it names) and\n"
    "writes the SpyreCode directory the vspyre runtime shim loads: OUT_DIR (default\n"
    "DIR/spyreCodeDir) with spyrecode.json and init_binary.bin.\n"
    "A bundle the loader rejects exits with status 1 and the loader's one-line message;\n"
    "bad usage exits with status 2.\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct ToolError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr uint64_t kAlign = 128;  // every dev_ptr / job_bin_ptr is 128-byte aligned
uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

void write_file(const fs::path& p, const void* data, size_t n) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  out.close();
  if (!out) throw ToolError("cannot write " + p.string());
}

// `chosen`: the user named out_dir with -o (else it is DIR/spyreCodeDir, the tool's own).
int compile(const std::string& dir, const std::string& out_dir, bool chosen);

int run(int argc, char** argv) {
  std::string dir, out_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto need = [&](const char* what) -> std::string {
      if (i + 1 >= argc) throw UsageError(a + " expects " + what);
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "-d") {
      dir = need("a bundle directory");
    } else if (a == "-o") {
      out_dir = need("an output directory");
      if (out_dir.empty()) throw UsageError("-o expects an output directory, got ''");
    } else {
      throw UsageError("unknown argument '" + a + "'");
    }
  }
  if (dir.empty()) throw UsageError("no bundle directory given (-d DIR)");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw ToolError(dir + ": not a directory");
  // -o naming DIR/spyreCodeDir itself is the default, the tool's own.
  const fs::path own = fs::path(dir) / "spyreCodeDir";
  bool chosen = !out_dir.empty();
  if (chosen) {
    std::error_code wec;
    const fs::path a = fs::weakly_canonical(fs::absolute(out_dir, wec), wec), b = fs::weakly_canonical(fs::absolute(own, wec), wec);
    if (a == b) chosen = false;
  }
  if (out_dir.empty()) out_dir = own.string();
  try {
    return compile(dir, out_dir, chosen);
  } catch (const vspyre::bundle::LoadError& e) {
    // The loader's one-line message, prefixed with the directory it was about.
    throw vspyre::bundle::LoadError(dir + ": " + e.what());
  }
}

int compile(const std::string& dir, const std::string& out_dir, bool chosen) {
  std::error_code ec;
  // Validate: parse + static checks, then one binding at made-up addresses (unroll, alignment).
  namespace bundle = vspyre::bundle;
  const bundle::LoadedBundle lb = bundle::load_bundle(dir);
  const bundle::Bindings bindings = vspyre::plan::default_bindings(lb);
  const auto resolved = bundle::resolve(lb, bindings);
  // Each HBM tensor's per-core start addresses must fit one tensor in its stick layout, as the
  // card's data path maps them: refused here, torch.compile fails at once, not at the launch.
  try {
    vspyre::exec::kernel_tensors(lb, resolved, bindings);
  } catch (const vspyre::exec::ExecError& e) {
    throw bundle::LoadError(e.what());
  }

  // The image embeds exactly the texts that were validated.
  vspyre::shim::ProgramImage img;
  img.kernel = fs::weakly_canonical(fs::path(dir), ec).filename().string();
  if (img.kernel.empty()) img.kernel = fs::path(dir).filename().string();
  const fs::path mlir = fs::path(dir) / "bundle.mlir";
  img.bundle_name = "bundle.mlir";
  img.bundle_text = bundle::read_text_file(mlir, "bundle.mlir");
  for (const auto& [name, sdsc] : lb.sdscs)
    img.sdsc_texts[name] = bundle::read_text_file(lb.dir / name, name);
  bundle::load_bundle_from_memory(img.bundle_text, img.bundle_name, img.sdsc_texts);

  uint32_t slots = 0;
  nlohmann::json input_syms = nlohmann::json::array();
  for (const auto& arg : lb.bundle.args) {
    vspyre::shim::ImageArg ia;
    if (arg.is_dimension) {
      // torch-spyre cannot pass dimension values at this pin ("kDimension is not yet
      // implemented"): the kernel runs at the largest value the compiler allowed.
      ia.dimension = true;
      ia.value = std::max<int64_t>(arg.max_value, arg.granularity);
    } else {
      ia.slot = slots;
      input_syms.push_back({{"name", arg.name}, {"offset", 8 * slots}});
      ++slots;
    }
    img.args.push_back(ia);
  }

  // Program allocation (segment 7): [correction area][job binary][HBM pool].
  const uint64_t corr_bytes = slots ? round_up(8ull * slots, kAlign) : 0;
  img.header.correction_offset = 0;
  img.header.correction_bytes = corr_bytes;
  const uint64_t bin_offset = corr_bytes;
  // The pool offset depends on the image size, which depends on the header: the header has a
  // fixed size, so encode once to learn the size.
  img.header.pool_bytes = lb.bundle.pool_bytes.value_or(0);
  const uint64_t bin_bytes = vspyre::shim::encode_image(img).size();
  img.header.pool_offset = img.header.pool_bytes ? round_up(bin_offset + bin_bytes, kAlign) : 0;
  const std::vector<uint8_t> bin = vspyre::shim::encode_image(img);
  if (bin.size() != bin_bytes) throw ToolError("internal: program image size changed");
  const uint64_t alloc_bytes = img.header.pool_bytes
                                   ? img.header.pool_offset + img.header.pool_bytes
                                   : round_up(bin_offset + bin_bytes, kAlign);
  if (alloc_bytes > flex::SEGMENT_SIZE)
    throw ToolError(mlir.string() + ": the program (" + std::to_string(alloc_bytes) +
                    " bytes incl. the HBM pool) does not fit the 16 GiB program segment");

  const uint64_t base = flex::PROG_OFFSET_BASE;
  auto s = [](uint64_t v) { return std::to_string(v); };
  nlohmann::ordered_json sc;
  sc["JobPreparationPlan"] = nlohmann::ordered_json::array(
      {{{"command", "Allocate"}, {"properties", {{"size", s(alloc_bytes)}}}},
       {{"command", "InitTransfer"},
        {"properties",
         {{"init_bin_file", "init_binary.bin"}, {"size", s(bin_bytes)}, {"dev_ptr", s(base + bin_offset)}}}}});
  auto exec = nlohmann::ordered_json::array();
  if (slots) {
    const std::string handle = "sdscProgCorrect0HostCompute";
    nlohmann::ordered_json hcm;
    hcm["vdci"] = {{"dsName_", "VspyreProgCorrection"},
                   {"inputSym_", input_syms},
                   {"output_size", corr_bytes}};
    hcm["senConstants"] = nlohmann::ordered_json::array();
    exec.push_back({{"command", "ComputeOnHost"},
                    {"properties",
                     {{"ishape", {s(slots)}},
                      {"oshape", {s(corr_bytes)}},
                      {"size", s(corr_bytes)},
                      {"ihandle", ""},
                      {"ohandle", handle},
                      {"hcm", hcm}}}});
    exec.push_back({{"command", "DataTransfer"},
                    {"properties",
                     {{"dirn", "false"},
                      {"host_handle", handle},
                      {"dev_ptr", s(base + img.header.correction_offset)},
                      {"size", s(corr_bytes)}}}});
  }
  exec.push_back({{"command", "ComputeOnDevice"}, {"properties", {{"job_bin_ptr", s(base + bin_offset)}}}});
  sc["JobExecPlan"] = exec;
  const std::string json_text = sc.dump(2) + "\n";

  // Write into a fresh sibling directory, then swap it in, so a reader never sees half a dir.
  // A directory named with -o that exists must be a SpyreCode directory (a previous run's:
  // spyrecode.json and init_binary.bin, nothing else) to be replaced: -o over a directory of the
  // user's (the bundle's own, the current one) deleted everything in it. DIR/spyreCodeDir, the
  // tool's own, is replaced whatever it holds (as torch-spyre's reruns expect).
  fs::path out = fs::path(out_dir).lexically_normal();
  if (out.filename().empty() && out.has_parent_path()) out = out.parent_path();  // "out/"
  if (chosen) {
    std::error_code sec;
    if (fs::exists(fs::symlink_status(out, sec))) {
      if (!fs::is_directory(out, sec))  // a link to a SpyreCode directory is checked as that directory
        throw ToolError(out.string() + " exists and is not a directory; not replaced");
      if (fs::equivalent(out, fs::current_path(), sec) || out.filename() == "." || out.filename() == "..")
        throw ToolError(out.string() + " is the current directory (or above it); not replaced");
      for (const auto& e : fs::directory_iterator(out)) {
        const std::string n = e.path().filename().string();
        if (!(n == "spyrecode.json" || n == "init_binary.bin") || !e.is_regular_file())
          throw ToolError(out.string() + " exists and is not a SpyreCode directory (it holds '" + n +
                          "'); not replaced: remove it or name another -o");
      }
    }
  }
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  std::string tmpl = (parent / ("." + out.filename().string() + ".tmpXXXXXX")).string();
  if (!mkdtemp(tmpl.data())) throw ToolError("cannot create a directory next to " + out.string() + ": " + std::strerror(errno));
  const fs::path tmp(tmpl);
  try {
    write_file(tmp / "spyrecode.json", json_text.data(), json_text.size());
    write_file(tmp / "init_binary.bin", bin.data(), bin.size());
    fs::permissions(tmp, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec);
    fs::remove_all(out);
    fs::rename(tmp, out);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "dxp_standalone: error: %s\n%s", e.what(), kUsage);
    return 2;
  } catch (const vspyre::bundle::LoadError& e) {
    std::fprintf(stderr, "dxp_standalone: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dxp_standalone: error: %s\n", e.what());
    return 1;
  }
}
