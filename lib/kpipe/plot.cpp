#include "kpipe/plot.h"

#include <fmt/format.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <limits>
#include <numeric>
#include <queue>
#include <string_view>
#include <utility>

#include "kpipe/plot_internal.h"

namespace kpipe {

using plot_internal::kInf;

namespace {

// ---------------------------------------------------------------- values

// `v` with `decimals` decimals, the trailing zeros (and point) dropped.
std::string trimmed(double v, int decimals) {
  std::string s = fmt::format("{:.{}f}", v, decimals);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

struct Unit {
  double scale;
  const char* suffix;
  double next;  // the value (in this unit) from which the next unit takes over
};

constexpr Unit kCountUnits[] = {
    {1, "", 1000}, {1e3, "k", 1000}, {1e6, "M", 1000}, {1e9, "G", 1000}, {1e12, "T", kInf}};
constexpr Unit kSecondUnits[] = {
    {0.001, "ms", 1000}, {1, "s", 60}, {60, "m", 60}, {3600, "h", 24}, {86400, "d", kInf}};

// Three significant digits at most: every tick of an axis in 1-2-5 steps
// (and 15s, 15m, 3h, 6h steps) then reads back exactly ("1.25m", "2.5k"),
// which a reader of the picture (and tests/integration/bin/svg_info) needs
// to turn a height into a value.
template <size_t N>
std::string with_units(double a, const Unit (&units)[N]) {
  size_t i = 0;
  while (i + 1 < N && a >= units[i + 1].scale) ++i;
  for (;; ++i) {
    double scaled = a / units[i].scale;
    int decimals = scaled >= 99.95 ? 0 : scaled >= 9.995 ? 1 : 2;
    double p = std::pow(10.0, decimals);
    // 59.999s is written "1m", not "60s".
    if (i + 1 < N && std::round(scaled * p) / p >= units[i].next) continue;
    return trimmed(scaled, decimals) + units[i].suffix;
  }
}

}  // namespace

namespace plot_internal {

// The 1-2-5 step (times a power of ten) at or above `raw`.
double nice_125(double raw) {
  double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw * (1 - 1e-9)) return m * p;
  return 10 * p;
}

// From 0 (or the lowest value, when below) to a nice maximum in at most
// `most` steps: 1-2-5 steps, and for durations above a second the clock's
// (15s, 30s, 15m, 3h, ...). Counts step by whole numbers. An empty or flat
// range is padded to [0, 1] so that nothing divides by zero.
ValueAxis value_axis(double lo, double hi, PlotUnit unit, int most) {
  lo = std::min(lo, 0.0);
  hi = std::max(hi, 0.0);
  if (!(hi - lo > 1e-12) || !std::isfinite(hi - lo)) {
    lo = std::min(lo, 0.0);
    hi = lo + 1;
  }
  double raw = (hi - lo) / std::max(most, 1);
  double step = 0;
  if (unit == PlotUnit::kSeconds && raw > 1) {
    static constexpr double kClock[] = {2,   5,    10,   15,   30,    60,    120,   300,  600,
                                        900, 1800, 3600, 7200, 10800, 21600, 43200, 86400};
    for (double s : kClock)
      if (s >= raw) {
        step = s;
        break;
      }
    if (step == 0) step = 86400 * nice_125(raw / 86400);
  } else {
    step = nice_125(raw);
    if (unit == PlotUnit::kCount) step = std::max(step, 1.0);
  }
  ValueAxis axis;
  axis.step = step;
  axis.lo = std::floor(lo / step + 1e-9) * step;
  axis.hi = std::ceil(hi / step - 1e-9) * step;
  if (axis.hi <= axis.lo) axis.hi = axis.lo + step;
  return axis;
}

// ---------------------------------------------------------------- time

// The chart's time range, a flat one (one time, or none) padded by a minute
// each side so that the point sits in the middle of a real axis.
std::pair<Millis, Millis> drawn_range(const Chart& chart) {
  auto [from, to] = chart_time_range(chart);
  if (to <= from) {
    from -= kMinute;
    to += kMinute;
  }
  return {from, to};
}

// A tick step for a time axis of `span` with at most `most` ticks.
Millis time_step(Millis span, int most) {
  static constexpr Millis kSteps[] = {1,
                                      2,
                                      5,
                                      10,
                                      20,
                                      50,
                                      100,
                                      200,
                                      500,
                                      kSecond,
                                      2 * kSecond,
                                      5 * kSecond,
                                      10 * kSecond,
                                      15 * kSecond,
                                      30 * kSecond,
                                      kMinute,
                                      2 * kMinute,
                                      5 * kMinute,
                                      10 * kMinute,
                                      15 * kMinute,
                                      30 * kMinute,
                                      kHour,
                                      2 * kHour,
                                      3 * kHour,
                                      6 * kHour,
                                      12 * kHour,
                                      kDay,
                                      2 * kDay,
                                      7 * kDay,
                                      14 * kDay};
  Millis raw = (span + most - 1) / std::max(most, 1);
  for (Millis s : kSteps)
    if (s >= raw) return s;
  return kDay * static_cast<Millis>(nice_125(static_cast<double>(raw) / kDay));
}

// How ticks `step` apart over `span` are written: HH:MM:SS(.mmm), HH:MM,
// and with the month and day when the axis spans days.
TimeLabel time_label_kind(Millis span, Millis step) {
  if (span >= kDay) return step >= kDay ? TimeLabel::kDays : TimeLabel::kDayMinutes;
  if (step < kSecond) return TimeLabel::kMillis;
  if (step < kMinute) return TimeLabel::kSeconds;
  return TimeLabel::kMinutes;
}

// From RFC 3339's "2026-11-29T10:15:30.123Z" (time.h writes the calendar).
std::string time_label(Millis t, TimeLabel kind) {
  std::string s = format_rfc3339(t);
  size_t at = s.find('T');
  if (at == std::string::npos || at < 6 || s.size() < at + 13) return s;
  std::string day = s.substr(at - 5, 5);
  switch (kind) {
    case TimeLabel::kMillis:
      return s.substr(at + 1, 12);
    case TimeLabel::kSeconds:
      return s.substr(at + 1, 8);
    case TimeLabel::kMinutes:
      return s.substr(at + 1, 5);
    case TimeLabel::kDayMinutes:
      return day + " " + s.substr(at + 1, 5);
    case TimeLabel::kDays:
      return day;
  }
  return s;
}

std::string date_of(Millis t) {
  std::string s = format_rfc3339(t);
  size_t at = s.find('T');
  return at == std::string::npos ? s : s.substr(0, at);
}

// The time ticks of [from, to]: multiples of the step, in UTC.
std::vector<Millis> time_ticks(Millis from, Millis to, Millis step) {
  std::vector<Millis> out;
  for (Millis t = floor_div(from, step) * step; t <= to; t += step)
    if (t >= from) out.push_back(t);
  return out;
}

// ---------------------------------------------------------------- series

bool chart_has_points(const Chart& chart) {
  return std::any_of(chart.panels.begin(), chart.panels.end(), [](const PlotPanel& p) {
    return std::any_of(p.series.begin(), p.series.end(),
                       [](const PlotSeries& s) { return !s.points.empty(); });
  });
}

// "N others", the name fold_series gives what it folded: drawn in grey.
bool is_fold(const std::string& name) {
  size_t space = name.find(' ');
  return space != std::string::npos && space > 0 && name.substr(space) == " others" &&
         std::all_of(name.begin(), name.begin() + static_cast<std::ptrdiff_t>(space),
                     [](char c) { return c >= '0' && c <= '9'; });
}

Legend::Legend(const Chart& chart) {
  for (const auto& panel : chart.panels)
    for (const auto& s : panel.series)
      if (std::find(names.begin(), names.end(), s.name) == names.end()) names.push_back(s.name);
}

size_t Legend::index(const std::string& name) const {
  return static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
}

// The lowest and highest finite value of a panel; false when it has none.
bool panel_extent(const PlotPanel& panel, double& lo, double& hi) {
  bool any = false;
  lo = kInf;
  hi = -kInf;
  for (const auto& s : panel.series)
    for (const auto& p : s.points) {
      if (!std::isfinite(p.value)) continue;
      any = true;
      lo = std::min(lo, p.value);
      hi = std::max(hi, p.value);
    }
  if (!any) lo = hi = 0;
  return any;
}

// The status a mark's label names: "WARN" of "billing: WARN".
std::string_view mark_status(const std::string& label) {
  std::string_view s = label;
  size_t colon = s.rfind(": ");
  if (colon != std::string_view::npos) s.remove_prefix(colon + 2);
  return s;
}

// A letter for each mark status: its first letter not taken by another
// status (STALL's S, then STOP's T).
std::vector<std::pair<std::string, char>> mark_letters(const std::vector<PlotMark>& marks) {
  std::vector<std::pair<std::string, char>> out;
  std::string taken;
  for (const auto& m : marks) {
    std::string status(mark_status(m.label));
    if (std::any_of(out.begin(), out.end(), [&](const auto& e) { return e.first == status; }))
      continue;
    char letter = 0;
    for (char c : status) {
      char u = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
      bool alnum = (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9');
      if (alnum && taken.find(u) == std::string::npos) {
        letter = u;
        break;
      }
    }
    for (char d = '1'; letter == 0 && d <= '9'; ++d)
      if (taken.find(d) == std::string::npos) letter = d;
    if (letter == 0) letter = '*';
    taken += letter;
    out.emplace_back(std::move(status), letter);
  }
  return out;
}

}  // namespace plot_internal

using namespace plot_internal;

// ---------------------------------------------------------------- public

std::pair<Millis, Millis> chart_time_range(const Chart& chart) {
  bool any = false;
  Millis from = 0, to = 0;
  for (const auto& panel : chart.panels)
    for (const auto& s : panel.series) {
      if (s.points.empty()) continue;
      Millis first = s.points.front().at, last = s.points.back().at;
      from = any ? std::min(from, first) : first;
      to = any ? std::max(to, last) : last;
      any = true;
    }
  return {from, to};
}

std::vector<PlotPoint> thin_points(const std::vector<PlotPoint>& points, Millis from, Millis to,
                                   size_t buckets) {
  if (buckets == 0 || points.size() <= 2) return points;
  const Millis span = to - from;
  // Bucket b holds the times t with floor((t - from) * buckets / span) == b;
  // its first time is from + ceil(b * span / buckets). Times before `from`
  // fall in the first bucket, after `to` in the last.
  auto bucket_of = [&](Millis at) -> size_t {
    if (span <= 0 || at <= from) return 0;
    if (at >= to) return buckets - 1;
    return std::min(static_cast<size_t>((static_cast<__int128>(at - from) * buckets) / span),
                    buckets - 1);
  };
  auto start_of = [&](size_t b) -> Millis {
    if (span <= 0 || b >= buckets) return std::numeric_limits<Millis>::max();
    __int128 n = static_cast<__int128>(b) * span;
    return from + static_cast<Millis>((n + static_cast<__int128>(buckets) - 1) / buckets);
  };
  std::vector<PlotPoint> out;
  out.reserve(std::min(points.size(), 2 * buckets));
  const size_t n = points.size();
  size_t i = 0;
  while (i < n) {
    size_t b = bucket_of(points[i].at);
    Millis next = b + 1 == buckets ? std::numeric_limits<Millis>::max() : start_of(b + 1);
    size_t lo = i, hi = i, j = i + 1;
    for (; j < n && points[j].at < next && points[j].at >= points[i].at; ++j) {
      if (points[j].value < points[lo].value) lo = j;
      if (points[j].value > points[hi].value) hi = j;
    }
    if (j - i <= 2) {
      out.insert(out.end(), points.begin() + static_cast<std::ptrdiff_t>(i),
                 points.begin() + static_cast<std::ptrdiff_t>(j));
    } else {
      out.push_back(points[std::min(lo, hi)]);
      if (lo != hi) out.push_back(points[std::max(lo, hi)]);
    }
    i = j;
  }
  return out;
}

std::vector<PlotSeries> fold_series(std::vector<PlotSeries> series, size_t keep, PlotFold fold) {
  std::erase_if(series, [](const PlotSeries& s) { return s.points.empty(); });
  keep = std::max<size_t>(keep, 1);
  if (series.size() <= keep) return series;

  const size_t n = series.size();
  std::vector<double> peak(n, -kInf);
  for (size_t i = 0; i < n; ++i)
    for (const auto& p : series[i].points)
      if (p.value > peak[i]) peak[i] = p.value;
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return peak[a] > peak[b]; });
  std::vector<bool> kept(n, false);
  for (size_t k = 0; k + 1 < keep; ++k) kept[order[k]] = true;

  std::vector<PlotSeries> out;
  std::vector<const PlotSeries*> rest;
  for (size_t i = 0; i < n; ++i) {
    if (kept[i])
      out.push_back(std::move(series[i]));
    else
      rest.push_back(&series[i]);
  }

  // The rest merged by time: at each time one of them has a point, each
  // counts at its latest point so far (a step function), combined in a
  // tree of their current values, so a sum is exact for whole numbers and
  // a maximum needs no scan of all of them.
  const bool sum = fold == PlotFold::kSum;
  const double none = sum ? 0.0 : -kInf;
  size_t width = 1;
  while (width < rest.size()) width *= 2;
  std::vector<double> tree(2 * width, none);
  auto combine = [sum](double a, double b) { return sum ? a + b : std::max(a, b); };
  auto set = [&](size_t leaf, double v) {
    size_t at = width + leaf;
    tree[at] = v;
    for (at /= 2; at >= 1; at /= 2) tree[at] = combine(tree[2 * at], tree[2 * at + 1]);
  };
  using Cursor = std::pair<Millis, size_t>;  // the next point's time, the series
  std::priority_queue<Cursor, std::vector<Cursor>, std::greater<>> next;
  std::vector<size_t> at(rest.size(), 0);
  size_t total = 0;
  for (size_t r = 0; r < rest.size(); ++r) {
    next.emplace(rest[r]->points.front().at, r);
    total += rest[r]->points.size();
  }
  PlotSeries folded;
  folded.name = fmt::format("{} others", rest.size());
  folded.points.reserve(total);
  while (!next.empty()) {
    const Millis t = next.top().first;
    while (!next.empty() && next.top().first == t) {
      size_t r = next.top().second;
      next.pop();
      const auto& points = rest[r]->points;
      size_t& k = at[r];
      while (k + 1 < points.size() && points[k + 1].at <= t) ++k;
      double v = points[k].value;
      set(r, std::isfinite(v) ? v : none);
      if (++k < points.size()) next.emplace(points[k].at, r);
    }
    folded.points.push_back({t, tree[1]});
  }
  out.push_back(std::move(folded));
  return out;
}

std::string format_plot_value(double value, PlotUnit unit) {
  if (!std::isfinite(value)) return fmt::format("{}", value);
  if (value == 0) return "0";
  std::string sign = value < 0 ? "-" : "";
  double a = std::fabs(value);
  std::string text =
      unit == PlotUnit::kCount ? with_units(a, kCountUnits) : with_units(a, kSecondUnits);
  // A value too small for the unit's digits is 0, never "-0".
  if (text.front() == '0' && text.find_first_not_of("0.") == std::string::npos) return "0";
  if (unit == PlotUnit::kSeconds && text.rfind("0ms", 0) == 0) return "0";
  return sign + text;
}

}  // namespace kpipe
