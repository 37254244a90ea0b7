// klag --plot's picture of a lag history (klag(1), PLOTS): lag over time
// in records and in seconds, a series per group (or per topic or
// partition, the worst few drawn and the rest folded into one), and the
// moments each group's verdict changed, judged as klag would have judged
// them then. Pure: the samples come from the history (store/lag_history.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kpipe/lag.h"
#include "kpipe/plot.h"
#include "kpipe/status.h"

namespace kpipe {

// What a series stands for.
enum class LagSeriesBy : uint8_t { kGroup, kTopic, kPartition };

struct LagPlotOptions {
  LagSeriesBy by = LagSeriesBy::kGroup;
  std::vector<std::string> topics;  // -t: only these topics' partitions (none: every one)
  std::string history;              // the history file's name, for the subtitle and errors
  size_t series = 6;                // drawn per panel; more are folded into "N others"
  // The samples each verdict was judged from, as klag judges them
  // (LagEngine::statuses): the last `depth` up to it; 0: all before it.
  size_t depth = 0;
};

// The chart of `histories`: one subject's samples each, oldest first. An
// error when a subject has fewer than two samples (in the topics asked
// for): one sample is a point, not a trend. Panels: "lag (records)", the
// lag summed over the series' partitions, and "lag (seconds)", their
// largest lag in seconds (left out when no sample knows one); a point per
// sample where the series has a value. Marks: each sample where a
// subject's verdict differs from the one before (the first where it is not
// OK), judged on the partitions drawn.
Expected<Chart> lag_chart(const std::vector<std::vector<LagSample>>& histories,
                          const LagEngine& engine, const LagPlotOptions& options);

}  // namespace kpipe
