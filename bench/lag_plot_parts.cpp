// The parts of `klag status --history FILE -g GROUP --plot OUT.svg`, timed
// one by one on a history bench/plot.sh made: reading every sample
// (LagHistory::all), judging each (LagEngine::statuses), building the
// chart (lag_chart) and writing it (render_svg).
//
//   lag_plot_parts HISTORY GROUP [partition|topic]
#include <chrono>
#include <cstdio>
#include <string>

#include "kpipe/lag_plot.h"
#include "kpipe/store/lag_history.h"

namespace {

double since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: lag_plot_parts HISTORY GROUP [partition|topic]\n");
    return 2;
  }
  using Clock = std::chrono::steady_clock;
  auto history = kpipe::LagHistory::open(argv[1], true);
  if (!history) {
    std::fprintf(stderr, "lag_plot_parts: %s\n", history.error().message.c_str());
    return 1;
  }
  kpipe::LagSubject subject{kpipe::LagSubject::Kind::kGroup, argv[2]};
  auto start = Clock::now();
  auto samples = (*history)->all(subject);
  double read = since(start);
  if (!samples) {
    std::fprintf(stderr, "lag_plot_parts: %s\n", samples.error().message.c_str());
    return 1;
  }
  size_t rows = 0;
  for (const auto& s : *samples) rows += s.partitions.size();
  kpipe::SystemClock clock;
  kpipe::LagEngine engine(clock, {10, 0});
  const size_t depth = 30;  // klag's, for --window 10
  start = Clock::now();
  auto statuses = engine.statuses(*samples, depth);
  double judged = since(start);
  kpipe::LagPlotOptions options;
  options.history = argv[1];
  options.depth = depth;
  std::string by = argc > 3 ? argv[3] : "group";
  if (by == "partition") options.by = kpipe::LagSeriesBy::kPartition;
  if (by == "topic") options.by = kpipe::LagSeriesBy::kTopic;
  std::vector<std::vector<kpipe::LagSample>> histories;
  histories.push_back(std::move(*samples));  // moved, as klag does
  start = Clock::now();
  auto chart = kpipe::lag_chart(histories, engine, options);
  double charted = since(start);
  if (!chart) {
    std::fprintf(stderr, "lag_plot_parts: %s\n", chart.error().message.c_str());
    return 1;
  }
  start = Clock::now();
  std::string svg = kpipe::render_svg(*chart);
  double drawn = since(start);
  std::printf(
      "%zu samples, %zu partition rows: read %.0f ms, statuses %.1f ms, chart (statuses "
      "included) %.0f ms, svg %.0f ms (%zu bytes)\n",
      histories[0].size(), rows, read, judged, charted, drawn, svg.size());
  return statuses.size() == histories[0].size() ? 0 : 1;
}
