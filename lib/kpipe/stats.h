// Counters every program keeps, and their --stats line (kpipe(7), COMMON OPTIONS).
#pragma once

#include <cstdint>
#include <string>

#include "kpipe/report.h"
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
};

// Emits a --stats line every interval and a live progress line on a
// terminal. Cheap to call per record: it reads the clock once every 1024
// calls.
class StatsTicker {
 public:
  StatsTicker(std::string program, Millis interval, Reporter& reporter, Clock& clock);
  void tick(const Counters& c) {
    if ((++calls_ & 1023) == 0) tick_now(c);
  }
  void tick_now(const Counters& c);
  // The final line at exit (when --stats was given).
  void finish(const Counters& c);
  // {"program":...,"at":...,"in":...} without the newline.
  std::string line(const Counters& c, Millis now) const;

 private:
  std::string program_;
  Millis interval_;  // 0: no --stats
  Reporter& reporter_;
  Clock& clock_;
  Millis start_;
  Millis last_stats_;
  Millis last_progress_;
  uint64_t calls_ = 0;
};

}  // namespace kpipe
