// The process's virtual card: one SystemC simulation, elaborated once, on one thread of its own
// ("the card thread"). Every SystemC call happens on that thread; host threads queue jobs to it
// and wait for their results. Simulated time only moves forward: each stream has a timeline
// (when its last operation ended), an operation starts at max(its stream's timeline, the card's
// current time), PCIe transfers contend per direction in the link model, kernels run one at a
// time on the cores (Card::run advances the SystemC clock to the kernel's end).
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <future>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "kernel.h"
#include "models/card.h"
#include "models/plan_runner.h"
#include "sim/engine/simulation.h"
#include "sim/plan/lower.h"

// libsystemc.so is linked with BIND_NOW and references sc_main, which a Python process does not
// define: libflex provides it. It is never called (nobody calls sc_elab_and_sim through us).
extern "C" __attribute__((visibility("default"), weak)) int sc_main(int, char**) {
  std::fputs("vspyre libflex: sc_main called unexpectedly\n", stderr);
  return 1;
}

namespace vspyre::shim {
namespace {

namespace fs = std::filesystem;

std::string config_path() {
  if (const char* env = std::getenv("VSPYRE_CONFIG"); env && *env) return env;
  // Installed: <prefix>/lib/libflex.so -> <prefix>/share/vspyre/configs/spyre.yaml.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&config_path), &info) && info.dli_fname) {
    std::error_code ec;
    const fs::path lib = fs::weakly_canonical(fs::path(info.dli_fname), ec);
    const fs::path p = lib.parent_path().parent_path() / "share" / "vspyre" / "configs" / "spyre.yaml";
    if (!ec && fs::is_regular_file(p, ec)) return p.string();
  }
  return std::string(VSPYRE_DEFAULT_CONFIG_DIR) + "/spyre.yaml";  // the build tree
}

std::string fmt_bytes(uint64_t b) {
  std::ostringstream s;
  if (b >= (1ull << 20)) s << static_cast<double>(b) / (1 << 20) << " MiB";
  else if (b >= 1024) s << static_cast<double>(b) / 1024 << " KiB";
  else s << b << " B";
  return s.str();
}

class CardService {
 public:
  struct Info {
    plan::CardParams params;
    bundle::CardLimits limits;
    uint64_t memory_capacity = 0;
    std::string config;
  };

  static CardService& get();
  static CardService* existing();

  const Info& info() const { return info_; }

  double transfer(uint64_t key, bool to_device, uint64_t bytes) {
    return call<double>([=, this] {
      const double issue = std::max(ready(key), now_ps());
      const double end = card_->host_link().transfer(to_device, bytes, issue);
      ready_[key] = end;
      clock_ps_ = std::max(clock_ps_, end);
      if (to_device) {
        ++stats_.h2d_transfers;
        stats_.h2d_bytes += bytes;
        stats_.h2d_busy_ps += end - issue;
      } else {
        ++stats_.d2h_transfers;
        stats_.d2h_bytes += bytes;
        stats_.d2h_busy_ps += end - issue;
      }
      if (tw_) tw_->complete(track(key), std::string(to_device ? "H2D " : "D2H ") + fmt_bytes(bytes), issue, end - issue);
      return end;
    });
  }

  KernelReport kernel(uint64_t key, const std::string& name, std::shared_ptr<const plan::Plan> p) {
    return call<KernelReport>([=, this] {
      const double issue = std::max(ready(key), now_ps());
      if (issue > now_ps()) sc_core::sc_start(sc_core::sc_time(issue - now_ps(), sc_core::SC_PS));
      const double start = now_ps();
      const PlanResult r = run_plan(*card_, *p);
      const double end = std::max(now_ps(), start + r.kernel_ps);
      ready_[key] = end;
      clock_ps_ = std::max(clock_ps_, end);
      KernelReport rep;
      rep.start_ps = start;
      rep.end_ps = end;
      rep.kernel_ps = r.kernel_ps;
      ++stats_.kernels;
      stats_.kernel_ps += r.kernel_ps;
      if (tw_) {
        nlohmann::json args = {{"cores_used", r.cores_used}, {"bottleneck", r.bottleneck},
                               {"kernel_us", r.kernel_ps / 1e6}};
        tw_->complete(track(key), "kernel " + name, start, end - start, args.dump());
      }
      if (log_) {
        std::fprintf(log_,
                     "vspyre kernel %llu (stream %s) %s: %.3f us on %u cores, bottleneck %s (%.0f %%), "
                     "device memory read %s written %s; card clock %.3f us\n",
                     static_cast<unsigned long long>(stats_.kernels), stream_name(key).c_str(), name.c_str(),
                     r.kernel_ps / 1e6, r.cores_used, r.bottleneck.c_str(), 100 * r.bottleneck_fraction,
                     fmt_bytes(r.lpddr5_read).c_str(), fmt_bytes(r.lpddr5_write).c_str(), end / 1e6);
        std::fflush(log_);
      }
      return rep;
    });
  }

  CardStats stats() {
    return call<CardStats>([this] {
      CardStats s = stats_;
      s.config = info_.config;
      s.clock_ps = std::max(clock_ps_, now_ps());
      return s;
    });
  }

  bool flush() {
    return call<bool>([this] { return write_trace(); });
  }

  // Stops the card thread: the job in progress finishes, queued jobs fail, the trace is written.
  void shutdown() {
    std::deque<Job> dropped;
    {
      std::lock_guard<std::mutex> lk(mutex_);
      if (stopping_) return;
      stopping_ = true;
      dropped.swap(queue_);
    }
    cv_.notify_all();
    for (auto& j : dropped) j.cancel("flex: the virtual card shut down (process exit) with this operation still queued");
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Job {
    std::function<void()> run;
    std::function<void(const std::string&)> cancel;
  };
  // What a job hands back to its caller: a value, or the message of what it threw. No exception
  // object crosses from the card thread to the caller's: it is rethrown there as a new one (an
  // exception shared between threads had its message read on one while the other freed it).
  template <class R>
  struct Outcome {
    std::optional<R> value;
    std::string error;
  };

  CardService() {
    thread_ = std::thread([this] { loop(); });
    try {
      call<int>([this] {
        elaborate();
        return 0;
      });
    } catch (const std::exception& e) {
      error_ = e.what();
    }
  }

  template <class R, class F>
  R call(F f) {
    auto pr = std::make_shared<std::promise<Outcome<R>>>();
    std::future<Outcome<R>> fut = pr->get_future();
    Job j;
    j.run = [pr, f = std::move(f)]() mutable {
      Outcome<R> o;
      try {
        o.value.emplace(f());
      } catch (const std::exception& e) {
        o.error = e.what();
      } catch (...) {
        o.error = "flex: unknown error on the virtual card's thread";
      }
      pr->set_value(std::move(o));
    };
    j.cancel = [pr](const std::string& why) { pr->set_value(Outcome<R>{std::nullopt, why}); };
    {
      std::lock_guard<std::mutex> lk(mutex_);
      if (stopping_) throw std::runtime_error("flex: the virtual card has shut down (process exit)");
      queue_.push_back(std::move(j));
    }
    cv_.notify_one();
    Outcome<R> o = fut.get();
    if (!o.value) throw std::runtime_error(o.error);
    return std::move(*o.value);
  }

  void loop() {
    for (;;) {
      Job j;
      {
        std::unique_lock<std::mutex> lk(mutex_);
        cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) break;
        j = std::move(queue_.front());
        queue_.pop_front();
      }
      j.run();
    }
    try {
      write_trace();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "vspyre libflex: %s\n", e.what());
    }
    close_log();
  }

  // VSPYRE_KERNEL_LOG's summary line, and the file closed (not stderr).
  void close_log() {
    if (!log_) return;
    std::fprintf(log_,
                 "vspyre card: %llu kernel%s, %.3f us of kernel time; %llu H2D (%s, %.3f us), %llu D2H (%s, %.3f us); "
                 "card clock %.3f us; config %s\n",
                 static_cast<unsigned long long>(stats_.kernels), stats_.kernels == 1 ? "" : "s", stats_.kernel_ps / 1e6,
                 static_cast<unsigned long long>(stats_.h2d_transfers), fmt_bytes(stats_.h2d_bytes).c_str(),
                 stats_.h2d_busy_ps / 1e6, static_cast<unsigned long long>(stats_.d2h_transfers),
                 fmt_bytes(stats_.d2h_bytes).c_str(), stats_.d2h_busy_ps / 1e6, std::max(clock_ps_, now_ps()) / 1e6,
                 info_.config.c_str());
    if (log_ != stderr) std::fclose(log_);
    log_ = nullptr;
  }

  // Card thread.
  void elaborate() {
    setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
    sc_core::sc_report_handler::set_actions(sc_core::SC_ERROR, sc_core::SC_THROW);
    SimOptions o;
    o.config_file = config_path();
    info_.config = o.config_file;
    if (const char* t = std::getenv("VSPYRE_TRACE"); t && *t) {
      trace_path_ = t;
      o.overrides = {"card.core.trace=true", "card.host_link.trace=true"};
    }
    try {
      sim_ = std::make_unique<Simulation>(resolve_config(o));
      card_ = &sim_->top_as<Card>();
      sc_core::sc_start(sc_core::SC_ZERO_TIME);  // finish elaboration
    } catch (const std::exception& e) {
      throw std::runtime_error("flex: cannot build the virtual card from " + o.config_file +
                               " (VSPYRE_CONFIG): " + e.what());
    }
    info_.params = plan_card_params(*card_);
    info_.limits.cores = info_.params.cores;
    if (!card_->cores().empty()) {
      info_.limits.lx_bytes = card_->core(0).lx_size();
      info_.limits.lx_reserved = card_->core(0).lx_size() - card_->core(0).lx_usable();
    }
    info_.memory_capacity = card_->memory().capacity();
    if (!trace_path_.empty()) tw_ = sim_->trace();
    // VSPYRE_KERNEL_LOG: 1 or stderr, a line per kernel on stderr; any other value, a file (written
    // afresh, as VSPYRE_TRACE is; not inherited by the compiler's child processes); unset, empty or
    // 0, nothing. Opened once the card is built, so that a card that fails leaves no log behind.
    if (const char* l = std::getenv("VSPYRE_KERNEL_LOG"); l && *l && std::string(l) != "0") {
      const std::string v = l;
      if (v == "1" || v == "stderr") {
        log_ = stderr;
      } else if (!(log_ = std::fopen(v.c_str(), "we"))) {
        throw std::runtime_error("flex: VSPYRE_KERNEL_LOG: cannot write '" + v + "': " + std::strerror(errno) +
                                 " (expected 1, stderr or a file to write)");
      }
    }
  }

  double now_ps() const { return sc_core::sc_time_stamp().to_seconds() * 1e12; }
  double ready(uint64_t key) const {
    auto it = ready_.find(key);
    return it == ready_.end() ? 0.0 : it->second;
  }
  static std::string stream_name(uint64_t key) {
    return std::to_string(key >> 32) + ":" + std::to_string(key & 0xffffffffu);
  }
  TraceWriter::TrackId track(uint64_t key) {
    auto it = tracks_.find(key);
    if (it != tracks_.end()) return it->second;
    return tracks_[key] = tw_->track("host streams", "stream " + stream_name(key));
  }
  bool write_trace() {
    if (!tw_) return false;
    tw_->write(trace_path_);
    return true;
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::thread thread_;

 public:
  std::string error_;  // elaboration failed: every use throws this

 private:
  Info info_;
  // Card-thread state.
  std::unique_ptr<Simulation> sim_;
  Card* card_ = nullptr;
  std::unordered_map<uint64_t, double> ready_;
  double clock_ps_ = 0;
  CardStats stats_;
  std::string trace_path_;
  TraceWriter* tw_ = nullptr;
  FILE* log_ = nullptr;  // VSPYRE_KERNEL_LOG
  std::unordered_map<uint64_t, TraceWriter::TrackId> tracks_;
};

std::mutex g_card_mutex;
CardService* g_card = nullptr;  // never deleted: stopped at exit, SystemC's statics outlive it

CardService& CardService::get() {
  std::lock_guard<std::mutex> lk(g_card_mutex);
  if (!g_card) {
    g_card = new CardService();
    registerExitHandler();  // stops the streams' workers, then calls shutdownCard()
  }
  if (!g_card->error_.empty()) throw std::runtime_error(g_card->error_);
  return *g_card;
}

CardService* CardService::existing() {
  std::lock_guard<std::mutex> lk(g_card_mutex);
  return g_card && g_card->error_.empty() ? g_card : nullptr;
}

std::mutex g_last_mutex;
KernelReport g_last_kernel;

}  // namespace

CardBackend::CardBackend() { CardService::get(); }

uint64_t CardBackend::memoryCapacity() const { return CardService::get().info().memory_capacity; }

void CardBackend::transferTime(uint64_t key, bool to_device, uint64_t bytes) {
  CardService::get().transfer(key, to_device, bytes);
}

KernelReport CardBackend::launch(const ComputeLaunch& l) {
  CardService& card = CardService::get();
  const auto& info = card.info();
  BoundKernel k = bind_kernel(*this, *kernels_, l, info.limits);
  const std::string name = l.name.empty() ? k.program->image.kernel : l.name;
  // Timing: the plan for these addresses (the lowering sees the real DMVAs), run on the cores.
  auto p = std::make_shared<plan::Plan>();
  try {
    *p = plan::lower(k.program->lb, k.resolved, info.params);
  } catch (const std::exception& e) {
    throw std::runtime_error("flex: Compute '" + name + "': " + e.what());
  }
  KernelReport r = card.kernel(l.stream_key, name, std::move(p));
  r.kernel = k.program->image.kernel;
  // Data: sim/exec computes the results in device memory.
  run_kernel_data(*this, k, info.limits, r, name);
  std::lock_guard<std::mutex> lk(g_last_mutex);
  g_last_kernel = r;
  return r;
}

std::optional<CardStats> cardStats() {
  CardService* c = CardService::existing();
  if (!c) return std::nullopt;
  CardStats s = c->stats();
  std::lock_guard<std::mutex> lk(g_last_mutex);
  s.last_kernel = g_last_kernel;
  return s;
}

bool flushTrace() {
  CardService* c = CardService::existing();
  return c ? c->flush() : false;
}

void shutdownCard() {
  CardService* c = nullptr;
  {
    std::lock_guard<std::mutex> lk(g_card_mutex);
    c = g_card;
  }
  if (c) c->shutdown();
}

}  // namespace vspyre::shim
