// Chrome trace-event / Perfetto JSON ("traceEvents", ph "X"). One track per core, DMA engine,
// ring direction and memory channel; tracks are grouped into processes by component. Recording is
// switched on per component, so a model checks `enabled()` (one branch) before building an event.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace vspyre {

class TraceWriter {
 public:
  using TrackId = uint32_t;
  // `group` becomes the process (e.g. "core_3"), `name` the thread (e.g. "dma_in").
  TrackId track(const std::string& group, const std::string& name);
  void complete(TrackId track, const std::string& name, double start_ps, double dur_ps,
                const std::string& args_json = "");
  void counter(TrackId track, const std::string& name, double t_ps, double value);
  size_t event_count() const { return m_events.size(); }
  // Writes the whole trace; throws InputError when the file cannot be written.
  void write(const std::string& path) const;

 private:
  struct Track { uint32_t pid, tid; std::string group, name; };
  struct Event { char ph; TrackId track; std::string name; double start_ps, dur_ps; std::string args; };
  std::vector<Track> m_tracks;
  std::map<std::string, uint32_t> m_pids;
  std::vector<Event> m_events;
  mutable std::mutex m_mutex;
};

}  // namespace vspyre
