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
  std::string name;               // the legend's; one colour per name across panels
  std::vector<PlotPoint> points;  // by time, oldest first; non-finite values are skipped
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
// Points before `from` count in the first interval, after `to` in the last;
// a flat range (from == to) is one interval.
std::vector<PlotPoint> thin_points(const std::vector<PlotPoint>& points, Millis from, Millis to,
                                   size_t buckets);

// How series beyond the few drawn are folded into one.
enum class PlotFold : uint8_t { kSum, kMax };

// At most `keep` series: when there are more, the keep - 1 with the
// highest peaks (in their order), then one series named "N others" of the
// rest, summed or their maximum at every time one of them has a point
// (each counts at its latest point at or before that time, and not before
// its first). Series without points are left out first: they have no peak
// to rank and nothing to add, so they count neither among the kept nor in
// the N of "N others". A keep of 0 is taken as 1 (everything folded).
std::vector<PlotSeries> fold_series(std::vector<PlotSeries> series, size_t keep, PlotFold fold);

// "1.2k", "35", "3M" (kCount); "250ms", "1.5s", "2m", "3h" (kSeconds).
// Three significant digits at most, trailing zeros dropped ("1.25m",
// "12k"), so that every tick of an axis reads back as its exact value.
std::string format_plot_value(double value, PlotUnit unit);

// A standalone SVG 1.1 document, 960 pixels wide: the title and subtitle
// (<text class="title">, "subtitle"), a panel per PlotPanel, stacked (its
// title above its frame, <rect class="frame" data-panel="INDEX">), a y
// axis from 0 (or the lowest value, when below) to a nice maximum, the
// time axis in UTC ("time (UTC)"), a legend of the series' names and the
// marks' statuses, the marks as dashed lines across the panels (<g
// class="mark">: its <line>, its label as the first <text>, left out where
// labels would crowd). Series with more points than the plot has pixels
// are thinned (thin_points, one interval per pixel); fewer are drawn a
// point per point. Each series with points is one <polyline
// class="series"> with data-series="NAME" and data-panel="INDEX" (a series
// without points is only in the legend); the axes' tick labels are <text
// class="tick-y" data-panel="INDEX"> and <text class="tick-x">, each at its
// value's position (a tick-y's y is its value's height). A panel without
// points says "no data". Names are XML-escaped; coordinates have at most
// one decimal.
std::string render_svg(const Chart& chart);

struct TextChartOptions {
  size_t columns = 80;    // the terminal's width; the chart fits it (0: 80)
  size_t panel_rows = 8;  // rows of each panel's plot area
  bool color = false;     // ANSI colours, for a terminal
};

// The same chart in block characters for a terminal: each series drawn
// with a shade of its own (█ ▓ ▒ ░ ...), each column spanning its
// interval's lowest to highest value (the columns between two points take
// the line between them); a legend, and the marks as letters under the
// time axis (each status's first letter not taken by another: STALL S,
// STOP T), with their key. No line is wider than `columns` display
// columns (code points; colour codes take none): what does not fit is
// cut with "…".
std::string render_text_chart(const Chart& chart, const TextChartOptions& options);

}  // namespace kpipe
