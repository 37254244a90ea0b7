#include "kpipe/kafka/broker_watch.h"

namespace kpipe {

void BrokerWatch::all_down(Millis now) {
  if (down_) return;
  down_ = true;
  warned_ = false;
  since_ = now;
  // The first look a moment later: librdkafka says "all down" also while
  // it swaps a bootstrap connection for the broker's own.
  last_probe_ = now;
}

BrokerWatch::News BrokerWatch::update(Millis now, const std::function<bool()>& broker_up) {
  if (!down_) return News::kNone;
  if (now - last_probe_ >= kProbeEvery) {
    last_probe_ = now;
    if (broker_up()) {
      down_ = false;
      return warned_ ? News::kBack : News::kNone;
    }
  }
  if (warned_ || now - since_ < patience_) return News::kNone;
  warned_ = true;
  return News::kUnreachable;
}

}  // namespace kpipe
