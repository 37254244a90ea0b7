// Whether a client has lost its cluster long enough to say so, and when it
// is back (kpipe(7), KAFKA OPTIONS: --timeout). librdkafka retries for ever
// and quietly; this turns its "all brokers down" into one warning after
// --timeout and one when a broker answers again. Pure: the client feeds it
// librdkafka's events, the time, and a way to ask whether a broker is up.
#pragma once

#include <functional>

#include "kpipe/time.h"

namespace kpipe {

class BrokerWatch {
 public:
  // `patience`: how long the cluster may be out of reach before a warning.
  explicit BrokerWatch(Millis patience) : patience_(patience) {}

  enum class News { kNone, kUnreachable, kBack };

  // librdkafka says that every broker connection is down.
  void all_down(Millis now);
  // Called regularly (each poll). While the cluster is down, asks
  // `broker_up` at most every kProbeEvery; says kUnreachable once the
  // cluster has been down for `patience`, and kBack when a broker is up
  // again after that (a shorter outage passes silently).
  News update(Millis now, const std::function<bool()>& broker_up);

  bool down() const { return down_; }
  // When the cluster went down (meaningful while down() or on kBack).
  Millis since() const { return since_; }

  static constexpr Millis kProbeEvery = kSecond;

 private:
  Millis patience_;
  bool down_ = false;
  bool warned_ = false;
  Millis since_ = 0;
  Millis last_probe_ = 0;
};

}  // namespace kpipe
