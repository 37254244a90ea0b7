// Charts of a history over time, drawn by kpipe itself: SVG for a browser
// or a mail, and block characters for a terminal (klag --plot, kcheckpoint
// history --plot). Pure: a program builds the Chart from its samples, and
// a renderer turns it into text; neither reads a clock or a file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kpipe/time.h"

namespace kpipe {

struct PlotPoint {
  Millis at = 0;
  double value = 0;
  bool operator==(const PlotPoint&) const = default;
};

struct PlotSeries {
  std::string name;               // the legend's
  std::vector<PlotPoint> points;  // by time, oldest first
};

// What a panel's values are, for its axis labels: counts (1.2k, 3M) or
// durations in seconds (250ms, 1.5s, 2m, 3h).
enum class PlotUnit : uint8_t { kCount, kSeconds };

struct PlotPanel {
  std::string title;  // the y axis's label, with its unit: "lag (records)"
  PlotUnit unit = PlotUnit::kCount;
  std::vector<PlotSeries> series;
};

// A moment marked across every panel: where a group's verdict changed.
struct PlotMark {
  Millis at = 0;
  std::string label;  // "WARN", or "billing: WARN" when several groups are drawn
  // 0 (fine) and up: how alarming, for its colour (LagStatus's order).
  int severity = 0;
};

struct Chart {
  std::string title;
  std::string subtitle;           // what was drawn from: "history lag.db, 1440 samples"
  std::vector<PlotPanel> panels;  // stacked, sharing the time axis
  std::vector<PlotMark> marks;    // by time
};

// The time range of every point of the chart's series; {0, 0} when none.
std::pair<Millis, Millis> chart_time_range(const Chart& chart);

// `points` (by time) thinned to `buckets` equal intervals of [from, to]:
// from each interval its lowest and highest point, in time order (one
// where they are the same point), so that a spike survives any thinning.
// Points already no more than two per interval are returned unchanged.
std::vector<PlotPoint> thin_points(const std::vector<PlotPoint>& points, Millis from, Millis to,
                                   size_t buckets);

// How series beyond the few drawn are folded into one.
enum class PlotFold : uint8_t { kSum, kMax };

// At most `keep` series: when there are more, the keep - 1 with the
// highest peaks (in their order), then one series named "N others" of the
// rest, summed or their maximum at every time one of them has a point
// (each counts at its latest point at or before that time).
std::vector<PlotSeries> fold_series(std::vector<PlotSeries> series, size_t keep, PlotFold fold);

// "1.2k", "35", "3M" (kCount); "250ms", "1.5s", "2m", "3h" (kSeconds).
std::string format_plot_value(double value, PlotUnit unit);

// A standalone SVG 1.1 document: the title, a panel per PlotPanel with a
// labelled y axis (from 0) and the time axis in UTC, a legend, the marks as
// labelled vertical lines. Long series are thinned to the plot's width
// (thin_points). Each series is one <polyline class="series"> with
// data-series="NAME" and data-panel="INDEX"; the axes' tick labels are
// <text class="tick-y"> and <text class="tick-x"> at their positions.
std::string render_svg(const Chart& chart);

struct TextChartOptions {
  size_t columns = 80;    // the terminal's width; the chart fits it
  size_t panel_rows = 8;  // rows of each panel's plot area
  bool color = false;     // ANSI colours, for a terminal
};

// The same chart in block characters for a terminal: each series drawn
// with a shade of its own (█ ▓ ▒ ░ ...), each column spanning its
// interval's lowest to highest value; a legend, and the marks as letters
// under the time axis. No line is wider than `columns`.
std::string render_text_chart(const Chart& chart, const TextChartOptions& options);

}  // namespace kpipe
