// End-to-end latency of a checkpoint (kpipe(7), CONTROL LINES AND
// CHECKPOINTS): for the records it covers, the time it completed less each
// record's Kafka timestamp. kconsume samples the timestamps of the records
// between two barriers; the store keeps their quantiles with the
// checkpoint, and the latency follows from its completion time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kpipe/time.h"

namespace kpipe {

// Quantiles of the record timestamps a checkpoint covers. The 1st
// percentile of the timestamps is the 99th of the latency.
struct TimestampSummary {
  uint64_t records = 0;  // with a timestamp
  Millis p50 = 0;
  Millis p01 = 0;
  Millis min = 0;
  bool operator==(const TimestampSummary&) const = default;
};

struct Latency {
  Millis p50 = 0;
  Millis p99 = 0;
  Millis max = 0;
  uint64_t records = 0;
  bool operator==(const Latency&) const = default;
};

// The latency of records summarised by `ts`, for a checkpoint completed
// at `completed`.
inline Latency latency_at(const TimestampSummary& ts, Millis completed) {
  return {completed - ts.p50, completed - ts.p01, completed - ts.min, ts.records};
}

// {"checkpoint":N,"p50":..,"p99":..,"max":..,"records":..} in milliseconds,
// "checkpoint" only when given: kcheckpoint history's and klag's latency_ms.
void append_latency_json(std::string& out, const Latency& l,
                         std::optional<int64_t> checkpoint = std::nullopt);

// A uniform sample of the timestamps seen since the last take(), of at
// most kCapacity (Vitter's reservoir), and the exact minimum: memory and
// time per checkpoint stay bounded however many records it covers.
class TimestampSampler {
 public:
  static constexpr size_t kCapacity = 4096;

  // A timestamp below 0 (none: the broker gave none) is not counted.
  void add(Millis ts) {
    if (ts < 0) return;
    ++seen_;
    if (ts < min_ || seen_ == 1) min_ = ts;
    if (sample_.size() < kCapacity) {
      sample_.push_back(ts);
      return;
    }
    uint64_t j = next_random() % seen_;
    if (j < kCapacity) sample_[j] = ts;
  }
  // The summary of what was added since the last take, and a fresh start;
  // nullopt when nothing was.
  std::optional<TimestampSummary> take();

 private:
  uint64_t next_random() {
    // xorshift64*: fast, and the same sequence each run (tests compare).
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 2685821657736338717ULL;
  }

  std::vector<Millis> sample_;
  uint64_t seen_ = 0;
  Millis min_ = 0;
  uint64_t state_ = 0x9e3779b97f4a7c15ULL;
};

}  // namespace kpipe
