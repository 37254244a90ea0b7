// What plot.cpp, plot_svg.cpp and plot_text.cpp share, private to them:
// the value and time axes, the legend's order, and the marks' statuses, so
// that the SVG and the text chart draw one chart alike.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kpipe/plot.h"

namespace kpipe::plot_internal {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// The 1-2-5 step (times a power of ten) at or above `raw`.
double nice_125(double raw);

// A value axis: from lo to hi in steps of step, lo <= 0 <= hi.
struct ValueAxis {
  double lo = 0, hi = 1, step = 0.2;
  int ticks() const { return static_cast<int>(std::lround((hi - lo) / step)) + 1; }
  double tick(int i) const { return lo + i * step; }
};

// From 0 (or the lowest value, when below) to a nice maximum in at most
// `most` steps (see plot.cpp).
ValueAxis value_axis(double lo, double hi, PlotUnit unit, int most);

// The chart's time range, a flat one padded by a minute each side.
std::pair<Millis, Millis> drawn_range(const Chart& chart);
// A tick step for a time axis of `span` with at most `most` ticks.
Millis time_step(Millis span, int most);

enum class TimeLabel { kMillis, kSeconds, kMinutes, kDayMinutes, kDays };
// How ticks `step` apart over `span` are written.
TimeLabel time_label_kind(Millis span, Millis step);
std::string time_label(Millis t, TimeLabel kind);
std::string date_of(Millis t);  // "2026-11-29"
// The time ticks of [from, to]: multiples of the step, in UTC.
std::vector<Millis> time_ticks(Millis from, Millis to, Millis step);

bool chart_has_points(const Chart& chart);
// "N others", the name fold_series gives what it folded: drawn in grey.
bool is_fold(const std::string& name);

// Each series name's place in the legend, the same across panels (klag's
// "billing" is one colour in records and in seconds).
struct Legend {
  std::vector<std::string> names;
  explicit Legend(const Chart& chart);
  size_t index(const std::string& name) const;
};

// The lowest and highest finite value of a panel; false when it has none.
bool panel_extent(const PlotPanel& panel, double& lo, double& hi);

// The status a mark's label names: "WARN" of "billing: WARN".
std::string_view mark_status(const std::string& label);
// A letter for each mark status: its first letter not taken by another
// status (STALL's S, then STOP's T).
std::vector<std::pair<std::string, char>> mark_letters(const std::vector<PlotMark>& marks);

}  // namespace kpipe::plot_internal
