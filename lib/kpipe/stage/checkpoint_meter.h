// What a stage tells about the checkpoints that pass it: how many, how long
// the last took from its barrier, and when (kpipe(7), COMMON OPTIONS:
// --metrics).
#pragma once

#include <cstdint>
#include <optional>

#include <fmt/format.h>

#include "kpipe/control.h"
#include "kpipe/latency.h"
#include "kpipe/report.h"
#include "kpipe/stats.h"
#include "kpipe/time.h"

namespace kpipe {

class CheckpointMeter {
 public:
  // The terminal stage's meter tells the service manager (kpipe(7),
  // SYSTEMD): READY=1 at the first checkpoint completed after the start,
  // since the pipeline has restored its state and resumed by then; then
  // WATCHDOG=1 at each, so that a pipeline whose checkpoints stop
  // completing (a stuck stage, a broker gone) is restarted.
  void notify_to(ServiceNotifier* notifier) { notifier_ = notifier; }

  // Checkpoint `c` was saved (a stateful stage) or completed (the terminal
  // stage, which knows its end-to-end latency when kconsume gave its
  // records' times) at wall-clock time `now`.
  void passed(const Checkpoint& c, Millis now, std::optional<Latency> latency = {}) {
    ++count_;
    took_ = now - c.at;
    at_ = now;
    if (latency) latency_ = latency;
    if (notifier_ != nullptr)
      notifier_->notify(fmt::format(
          "{}=1\nSTATUS=checkpoint {} complete {} ms after its barrier{}; {} since the start",
          count_ == 1 ? "READY" : "WATCHDOG", c.id, took_,
          latency ? fmt::format(", end to end p99 {} ms", latency->p99) : "", count_));
  }
  void fill(Counters& counters) const {
    counters.checkpoints = count_;
    counters.checkpoint_took = took_;
    counters.checkpoint_at = at_;
    counters.latency = latency_;
  }
  uint64_t count() const { return count_; }

 private:
  uint64_t count_ = 0;
  Millis took_ = -1;
  Millis at_ = -1;
  ServiceNotifier* notifier_ = nullptr;
  std::optional<Latency> latency_;  // the last checkpoint's that had one
};

}  // namespace kpipe
