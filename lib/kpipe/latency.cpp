#include "kpipe/latency.h"

#include <algorithm>

namespace kpipe {

std::optional<TimestampSummary> TimestampSampler::take() {
  if (seen_ == 0) return std::nullopt;
  TimestampSummary s;
  s.records = seen_;
  s.min = min_;
  // The q-quantile as the sample's element at rank floor(q * (n - 1)).
  auto at = [&](double q) {
    auto rank = static_cast<size_t>(q * static_cast<double>(sample_.size() - 1));
    std::nth_element(sample_.begin(), sample_.begin() + static_cast<ptrdiff_t>(rank),
                     sample_.end());
    return sample_[rank];
  };
  s.p50 = at(0.5);
  s.p01 = at(0.01);
  sample_.clear();
  seen_ = 0;
  return s;
}

}  // namespace kpipe
