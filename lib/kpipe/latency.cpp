#include "kpipe/latency.h"

#include <algorithm>

#include "kpipe/json.h"

namespace kpipe {

void append_latency_json(std::string& out, const Latency& l, std::optional<int64_t> checkpoint) {
  out.push_back('{');
  if (checkpoint) {
    out.append("\"checkpoint\":");
    append_int(out, *checkpoint);
    out.push_back(',');
  }
  out.append("\"p50\":");
  append_int(out, l.p50);
  out.append(",\"p99\":");
  append_int(out, l.p99);
  out.append(",\"max\":");
  append_int(out, l.max);
  out.append(",\"records\":");
  append_uint(out, l.records);
  out.push_back('}');
}

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
