#include "kpipe/programs/checkpoint_plot.h"

#include <algorithm>

#include "kpipe/store/sql.h"
#include "kpipe/time.h"

namespace kpipe {

namespace {

// Milliseconds as the panels' seconds. A time below zero (the barrier's and
// the completion's clocks on different hosts, one behind the other) is
// drawn as 0, the axis's foot, as kcheckpoint history's table shows
// latencies.
double seconds(Millis ms) {
  return static_cast<double>(std::max<Millis>(ms, 0)) / 1000.0;
}

}  // namespace

Expected<Chart> checkpoint_chart(const std::vector<CheckpointRecord>& checkpoints,
                                 std::string_view state) {
  std::vector<const CheckpointRecord*> complete;
  for (const auto& c : checkpoints)
    if (c.completed_at) complete.push_back(&c);
  std::string shown = display_target(state);
  if (complete.size() < 2)
    return failure("state '{}' holds {} complete checkpoint{}: a plot needs at least two", shown,
                   complete.size(), complete.size() == 1 ? "" : "s");
  // The time axis is the completion's: ids grow with emission, and a slow
  // checkpoint may complete after a faster later one (instances of a
  // consumer group complete theirs apart).
  std::stable_sort(complete.begin(), complete.end(),
                   [](const CheckpointRecord* a, const CheckpointRecord* b) {
                     return *a->completed_at < *b->completed_at;
                   });
  PlotSeries took{"took", {}};  // the table's TOOK
  PlotSeries p50{"p50", {}};
  PlotSeries p99{"p99", {}};
  int64_t lowest = complete.front()->id, highest = lowest;
  for (const CheckpointRecord* c : complete) {
    Millis at = *c->completed_at;
    lowest = std::min(lowest, c->id);
    highest = std::max(highest, c->id);
    took.points.push_back({at, seconds(at - c->emitted_at)});
    // A checkpoint that covered no record has no latency to show.
    if (!c->latency || c->latency->records == 0) continue;
    p50.points.push_back({at, seconds(c->latency->p50)});
    p99.points.push_back({at, seconds(c->latency->p99)});
  }
  Chart chart;
  chart.title = fmt::format("kcheckpoint: checkpoints of {}", shown);
  chart.subtitle =
      fmt::format("{} complete checkpoints, {} to {}, completed {} to {}", complete.size(), lowest,
                  highest, format_rfc3339(*complete.front()->completed_at),
                  format_rfc3339(*complete.back()->completed_at));
  chart.panels.push_back(
      {"checkpoint time (barrier to completion)", PlotUnit::kSeconds, {std::move(took)}});
  // Without a record's timestamp (a pipeline of empty checkpoints, or a
  // store older than latency), a latency panel would be an empty frame:
  // the subtitle says so instead.
  if (p50.points.empty()) {
    chart.subtitle += "; no end-to-end latency recorded";
    return chart;
  }
  chart.panels.push_back(
      {"end-to-end latency", PlotUnit::kSeconds, {std::move(p50), std::move(p99)}});
  return chart;
}

}  // namespace kpipe
