// What a stage tells about the checkpoints that pass it: how many, how long
// the last took from its barrier, and when (kpipe(7), COMMON OPTIONS:
// --metrics).
#pragma once

#include <cstdint>

#include "kpipe/control.h"
#include "kpipe/stats.h"
#include "kpipe/time.h"

namespace kpipe {

class CheckpointMeter {
 public:
  // Checkpoint `c` was saved (a stateful stage) or completed (the terminal
  // stage) at wall-clock time `now`.
  void passed(const Checkpoint& c, Millis now) {
    ++count_;
    took_ = now - c.at;
    at_ = now;
  }
  void fill(Counters& counters) const {
    counters.checkpoints = count_;
    counters.checkpoint_took = took_;
    counters.checkpoint_at = at_;
  }
  uint64_t count() const { return count_; }

 private:
  uint64_t count_ = 0;
  Millis took_ = -1;
  Millis at_ = -1;
};

}  // namespace kpipe
