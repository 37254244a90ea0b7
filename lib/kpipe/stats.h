// Counters every program keeps, their --stats line and their --metrics
// file (kpipe(7), COMMON OPTIONS).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "kpipe/latency.h"
#include "kpipe/report.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

struct Counters {
  uint64_t in = 0;
  uint64_t out = 0;
  uint64_t dropped = 0;
  uint64_t late = 0;
  uint64_t dead_lettered = 0;
  uint64_t skipped = 0;
  uint64_t state_size = 0;  // keys, windows: what the program holds
  // Checkpoints this stage saved its state at, or completed (a terminal
  // stage); the last one's time from its barrier (the control line's
  // "at") to that, and when (wall clock). -1: none yet.
  uint64_t checkpoints = 0;
  Millis checkpoint_took = -1;
  Millis checkpoint_at = -1;
  std::optional<Millis> watermark;  // event time, for the stages that keep one
  // The terminal stage's last checkpoint with its records' times: end to
  // end, its completion less their Kafka timestamps.
  std::optional<Latency> latency;
  // Records left to read where the program knows (kconsume -e): the
  // progress line says how many and how long they would take.
  std::optional<uint64_t> left;
};

// What --stats and --metrics asked for.
struct StatsSettings {
  Millis interval = 0;  // --stats; 0: none
  std::string stage;    // the stage's name in the metrics' labels
  // Replaces the --metrics file's content; null: no --metrics. (Writing
  // files is the stage layer's: parse_stats makes it.)
  std::function<Status(std::string_view text)> write_metrics;
  std::string metrics;  // the file's name, for the warning when it fails
};

// A label value in Prometheus' text format, escaped, without its quotes.
void append_prometheus_label(std::string& out, std::string_view v);

// The Prometheus text format (node_exporter's textfile collector) of `c`
// at wall-clock time `now`.
std::string prometheus_metrics(std::string_view program, std::string_view stage, const Counters& c,
                               Millis now);

// Emits a --stats line every interval, rewrites the --metrics file every
// kMetricsInterval, and keeps a live progress line on a terminal. Cheap to
// call per record: it reads the clock once every 1024 calls.
class StatsTicker {
 public:
  static constexpr Millis kMetricsInterval = 5 * kSecond;

  StatsTicker(std::string program, StatsSettings settings, Reporter& reporter, Clock& clock);
  // Whether tick() has anything to do: stats, metrics or progress.
  bool ticking() const;
  void tick(const Counters& c) {
    if (due()) tick_now(c);
  }
  // Whether this call is one in 1024, when tick() looks at the clock: a
  // caller whose counters cost something to gather gathers them then.
  bool due() { return (++calls_ & 1023) == 0; }
  void tick_now(const Counters& c);
  // The final line at exit (when --stats was given).
  void finish(const Counters& c);
  // {"program":...,"at":...,"in":...} without the newline.
  std::string line(const Counters& c, Millis now) const;

 private:
  void write_metrics(const Counters& c);

  std::string program_;
  Millis interval_;  // 0: no --stats
  StatsSettings settings_;
  bool metrics_failed_ = false;  // warned once; tried again each time
  Reporter& reporter_;
  Clock& clock_;
  Millis start_;
  Millis last_stats_;
  Millis last_progress_;
  Millis last_metrics_;
  uint64_t calls_ = 0;
};

}  // namespace kpipe
