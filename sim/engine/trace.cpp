#include "sim/engine/trace.h"

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "sim/engine/error.h"

namespace vspyre {

TraceWriter::TrackId TraceWriter::track(const std::string& group, const std::string& name) {
  std::lock_guard lock(m_mutex);
  auto [it, inserted] = m_pids.emplace(group, static_cast<uint32_t>(m_pids.size() + 1));
  uint32_t tid = 1;
  for (const auto& t : m_tracks)
    if (t.pid == it->second) ++tid;
  m_tracks.push_back({it->second, tid, group, name});
  return static_cast<TrackId>(m_tracks.size() - 1);
}

void TraceWriter::complete(TrackId track, const std::string& name, double start_ps, double dur_ps,
                           const std::string& args_json) {
  std::lock_guard lock(m_mutex);
  m_events.push_back({'X', track, name, start_ps, dur_ps, args_json});
}

void TraceWriter::counter(TrackId track, const std::string& name, double t_ps, double value) {
  std::lock_guard lock(m_mutex);
  char buf[64];
  std::snprintf(buf, sizeof buf, "{\"value\":%.6g}", value);
  m_events.push_back({'C', track, name, t_ps, 0, buf});
}

void TraceWriter::write(const std::string& path) const {
  std::lock_guard lock(m_mutex);
  std::ofstream out(path);
  if (!out) throw InputError(path + ": cannot write trace file");
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&] {
    if (!first) out << ",\n";
    first = false;
  };
  for (const auto& [group, pid] : m_pids) {
    sep();
    out << nlohmann::json{{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0},
                          {"args", {{"name", group}}}}.dump();
  }
  for (const auto& t : m_tracks) {
    sep();
    out << nlohmann::json{{"ph", "M"}, {"name", "thread_name"}, {"pid", t.pid}, {"tid", t.tid},
                          {"args", {{"name", t.name}}}}.dump();
  }
  char buf[128];
  for (const auto& e : m_events) {
    const Track& t = m_tracks.at(e.track);
    sep();
    // Trace-event timestamps are microseconds; keep picosecond resolution in the fraction.
    out << "{\"ph\":\"" << e.ph << "\",\"name\":" << nlohmann::json(e.name).dump() << ",\"pid\":" << t.pid
        << ",\"tid\":" << t.tid;
    std::snprintf(buf, sizeof buf, ",\"ts\":%.6f", e.start_ps / 1e6);
    out << buf;
    if (e.ph == 'X') {
      std::snprintf(buf, sizeof buf, ",\"dur\":%.6f", e.dur_ps / 1e6);
      out << buf;
    }
    if (!e.args.empty()) out << ",\"args\":" << e.args;
    out << "}";
  }
  out << "\n]}\n";
  if (!out) throw InputError(path + ": error while writing trace file");
}

}  // namespace vspyre
