// One partition's part in a watermark (kpipe(7), TIMES), and the lowest
// over a stream's partitions, for kwindow's watermark and kjoin's table
// watermark alike. Each engine keeps its own rules on top: the delay it
// trails by, what it does when no partition holds the watermark, and how
// it uses the value (kwindow fires a window at end <= watermark, kjoin
// releases a record only once the watermark is beyond its time).
#pragma once

#include <algorithm>
#include <limits>

#include "kpipe/time.h"

namespace kpipe {

// No event time (yet).
inline constexpr Millis kNoTime = std::numeric_limits<Millis>::min();

struct PartitionProgress {
  Millis newest = kNoTime;  // the newest event time read
  Millis last_read = 0;     // processing time (steady) of the last record, or of its assignment
  bool waiting = false;     // known, nothing read yet: holds the watermark where it is
  bool revoked = false;     // no longer read here: holds nothing

  // Silent for the idle timeout (0: never idle): it stops holding the
  // watermark back.
  bool idle(Millis idle_timeout, Millis now) const {
    return idle_timeout > 0 && now - last_read >= idle_timeout;
  }
};

// What the partitions that hold a watermark say of it.
struct LowestNewest {
  enum class Kind {
    kHeld,  // one is waiting: the watermark stays where it is
    kNone,  // none holds it (each idle, revoked, or without a time)
    kTime,  // `newest`, the lowest of their newest times
  };
  Kind kind = Kind::kNone;
  Millis newest = kNoTime;
};

// Over `parts`, whose PartitionProgress `progress(part)` gives.
template <typename Parts, typename Progress>
LowestNewest lowest_newest(const Parts& parts, Progress progress, Millis idle_timeout, Millis now) {
  LowestNewest low;
  for (const auto& part : parts) {
    const PartitionProgress& p = progress(part);
    if (p.idle(idle_timeout, now) || p.revoked) continue;
    if (p.waiting) return {LowestNewest::Kind::kHeld, kNoTime};
    if (p.newest == kNoTime) continue;
    low.newest = low.kind == LowestNewest::Kind::kNone ? p.newest : std::min(low.newest, p.newest);
    low.kind = LowestNewest::Kind::kTime;
  }
  return low;
}

}  // namespace kpipe
