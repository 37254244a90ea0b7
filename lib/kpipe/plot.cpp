#include "kpipe/plot.h"

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

namespace kpipe {

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

constexpr double kInf = std::numeric_limits<double>::infinity();
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

// The 1-2-5 step (times a power of ten) at or above `raw`.
double nice_125(double raw) {
  double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw * (1 - 1e-9)) return m * p;
  return 10 * p;
}

// A value axis: from lo to hi in steps of step, lo <= 0 <= hi.
struct ValueAxis {
  double lo = 0, hi = 1, step = 0.2;
  int ticks() const { return static_cast<int>(std::lround((hi - lo) / step)) + 1; }
  double tick(int i) const { return lo + i * step; }
};

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

enum class TimeLabel { kMillis, kSeconds, kMinutes, kDayMinutes, kDays };

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

// Each series name's place in the legend, the same across panels (klag's
// "billing" is one colour in records and in seconds).
struct Legend {
  std::vector<std::string> names;
  explicit Legend(const Chart& chart) {
    for (const auto& panel : chart.panels)
      for (const auto& s : panel.series)
        if (std::find(names.begin(), names.end(), s.name) == names.end()) names.push_back(s.name);
  }
  size_t index(const std::string& name) const {
    return static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
  }
};

// The series' points worth drawing: the finite ones, thinned to `buckets`
// of [from, to] when there are more points than buckets (fewer are drawn
// each as it is: a point per sample).
std::vector<PlotPoint> drawn_points(const PlotSeries& s, Millis from, Millis to, size_t buckets) {
  const std::vector<PlotPoint>* points = &s.points;
  std::vector<PlotPoint> finite;
  if (!std::all_of(s.points.begin(), s.points.end(),
                   [](const PlotPoint& p) { return std::isfinite(p.value); })) {
    for (const auto& p : s.points)
      if (std::isfinite(p.value)) finite.push_back(p);
    points = &finite;
  }
  if (points->size() <= buckets) return *points;
  return thin_points(*points, from, to, buckets);
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

// ---------------------------------------------------------------- SVG

constexpr int kWidth = 960;
constexpr int kLeft = 64;  // the y axis's tick labels
constexpr int kRight = 24;
constexpr int kPlotWidth = kWidth - kLeft - kRight;  // one thinning bucket per pixel
constexpr int kPanelHeight = 260;
constexpr int kPanelTitle = 22;  // above the frame
constexpr int kFrameHeight = 200;
constexpr double kCharWidth = 6.5;  // an 11px sans-serif character, roughly
constexpr int kMarkRow = 13;
constexpr int kMarkSpacing = 60;  // the closest two marks' labels may be, in pixels

// Okabe and Ito's palette, safe for the colour-blind; yellow last, as it
// is faint on white.
constexpr const char* kPalette[] = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                                    "#56B4E9", "#CC79A7", "#000000", "#F0E442"};
constexpr size_t kColours = std::size(kPalette);
constexpr const char* kFoldColour = "#999999";
constexpr const char* kSeverityColour[] = {"#009E73", "#E69F00", "#D55E00", "#CC79A7", "#000000"};

const char* series_colour(const Legend& legend, const std::string& name) {
  return is_fold(name) ? kFoldColour : kPalette[legend.index(name) % kColours];
}

// Past the palette, series repeat its colours dashed.
const char* series_dash(const Legend& legend, const std::string& name) {
  size_t i = legend.index(name);
  if (is_fold(name) || i < kColours) return nullptr;
  return (i / kColours) % 2 == 1 ? "6 3" : "2 2";
}

const char* severity_colour(int severity) {
  return kSeverityColour[std::clamp(severity, 0, static_cast<int>(std::size(kSeverityColour)) - 1)];
}

void append_escaped(std::string& out, std::string_view text) {
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // XML 1.0 allows no control characters but tab, newline, return.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r')
          out += ' ';
        else
          out += c;
    }
  }
}

std::string escaped(std::string_view text) {
  std::string out;
  append_escaped(out, text);
  return out;
}

// A coordinate to a tenth of a pixel, "12" or "12.3": small files.
void append_coord(std::string& out, double v) {
  auto tenths = static_cast<int64_t>(std::llround(v * 10));
  if (tenths < 0) {
    out += '-';
    tenths = -tenths;
  }
  fmt::format_to(std::back_inserter(out), "{}", tenths / 10);
  if (tenths % 10 != 0) {
    out += '.';
    out += static_cast<char>('0' + tenths % 10);
  }
}

std::string coord(double v) {
  std::string out;
  append_coord(out, v);
  return out;
}

double text_width(std::string_view text) {
  size_t chars = 0;
  for (char c : text)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++chars;
  return static_cast<double>(chars) * kCharWidth;
}

// A text centred on x, kept within the picture.
const char* anchor_within(double x, double width) {
  if (x - width / 2 < 2) return "start";
  if (x + width / 2 > kWidth - 2) return "end";
  return "middle";
}

struct TimeScale {
  Millis from, to;
  double x(Millis t) const {
    return kLeft + static_cast<double>(t - from) / static_cast<double>(to - from) * kPlotWidth;
  }
};

void svg_panel(std::string& out, const PlotPanel& panel, size_t index, double top,
               const TimeScale& time, const std::vector<Millis>& ticks, TimeLabel label_kind,
               const Legend& legend) {
  const double frame_top = top + kPanelTitle;
  const double bottom = frame_top + kFrameHeight;
  fmt::format_to(std::back_inserter(out),
                 "<text class=\"panel-title\" x=\"{}\" y=\"{}\" font-size=\"12\" "
                 "font-weight=\"bold\">{}</text>\n",
                 kLeft, coord(top + 14), escaped(panel.title));
  double lo = 0, hi = 0;
  bool any = panel_extent(panel, lo, hi);
  ValueAxis axis = value_axis(lo, hi, panel.unit, 5);
  auto y_of = [&](double v) { return bottom - (v - axis.lo) / (axis.hi - axis.lo) * kFrameHeight; };
  // Grid and tick labels: each label's y is the height of its value.
  for (int i = 0; i < axis.ticks(); ++i) {
    double v = axis.tick(i), y = y_of(v);
    fmt::format_to(std::back_inserter(out),
                   "<line class=\"grid\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" "
                   "stroke=\"{}\"/>\n<text class=\"tick-y\" data-panel=\"{}\" x=\"{}\" y=\"{}\" "
                   "dy=\"0.33em\" text-anchor=\"end\">{}</text>\n",
                   kLeft, kLeft + kPlotWidth, coord(y), coord(y), v == 0 ? "#bbbbbb" : "#e6e6e6",
                   index, kLeft - 6, coord(y), escaped(format_plot_value(v, panel.unit)));
  }
  for (Millis t : ticks) {
    double x = time.x(t);
    std::string text = time_label(t, label_kind);
    fmt::format_to(std::back_inserter(out),
                   "<line class=\"grid\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" "
                   "stroke=\"#e6e6e6\"/>\n<text class=\"tick-x\" data-panel=\"{3}\" x=\"{0}\" "
                   "y=\"{4}\" text-anchor=\"{5}\">{6}</text>\n",
                   coord(x), coord(frame_top), coord(bottom), index, coord(bottom + 15),
                   anchor_within(x, text_width(text)), text);
  }
  fmt::format_to(std::back_inserter(out),
                 "<rect class=\"frame\" data-panel=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" "
                 "height=\"{}\" fill=\"none\" stroke=\"#555555\"/>\n",
                 index, kLeft, coord(frame_top), kPlotWidth, kFrameHeight);
  if (!any) {
    fmt::format_to(std::back_inserter(out),
                   "<text class=\"no-data\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" "
                   "fill=\"#777777\" font-size=\"14\">no data</text>\n",
                   coord(kLeft + kPlotWidth / 2.0), coord(frame_top + kFrameHeight / 2.0));
    return;
  }
  // The first series on top: drawn last.
  for (size_t k = panel.series.size(); k-- > 0;) {
    const PlotSeries& s = panel.series[k];
    auto points = drawn_points(s, time.from, time.to, kPlotWidth);
    if (points.empty()) continue;
    const char* colour = series_colour(legend, s.name);
    const char* dash = series_dash(legend, s.name);
    std::string name = escaped(s.name);
    fmt::format_to(std::back_inserter(out),
                   "<polyline class=\"series\" data-series=\"{}\" data-panel=\"{}\" fill=\"none\" "
                   "stroke=\"{}\" stroke-width=\"1.5\" stroke-linejoin=\"round\"{}{}{} points=\"",
                   name, index, colour, dash ? " stroke-dasharray=\"" : "", dash ? dash : "",
                   dash ? "\"" : "");
    out.reserve(out.size() + points.size() * 12);
    for (size_t i = 0; i < points.size(); ++i) {
      if (i > 0) out += ' ';
      append_coord(out, time.x(points[i].at));
      out += ',';
      append_coord(out, y_of(points[i].value));
    }
    out += "\"/>\n";
    // A lone point draws no line; a few points are easier to read as dots.
    if (points.size() > 40) continue;
    double r = points.size() == 1 ? 3 : 2;
    for (const auto& p : points)
      fmt::format_to(std::back_inserter(out),
                     "<circle class=\"point\" data-series=\"{}\" data-panel=\"{}\" cx=\"{}\" "
                     "cy=\"{}\" r=\"{}\" fill=\"{}\"/>\n",
                     name, index, coord(time.x(p.at)), coord(y_of(p.value)), r, colour);
  }
}

// Legend entries, left to right, wrapped at the picture's width; returns
// the y below them.
struct LegendEntry {
  std::string text;
  const char* colour;
  const char* dash;
};

double svg_legend(std::string& out, const std::vector<LegendEntry>& entries, double y) {
  double x = kLeft;
  for (const auto& e : entries) {
    double w = 30 + text_width(e.text) + 18;
    if (x > kLeft && x + w > kWidth - 8) {
      x = kLeft;
      y += 18;
    }
    fmt::format_to(
        std::back_inserter(out),
        "<g class=\"legend\"><line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"{}\" "
        "stroke-width=\"2.5\"{}{}{}/><text x=\"{}\" y=\"{}\">{}</text></g>\n",
        coord(x), coord(x + 24), coord(y - 4), coord(y - 4), e.colour,
        e.dash ? " stroke-dasharray=\"" : "", e.dash ? e.dash : "", e.dash ? "\"" : "",
        coord(x + 30), coord(y), escaped(e.text));
    x += w;
  }
  return y + 18;
}

// ---------------------------------------------------------------- text

// A line's width on a terminal: UTF-8 code points, ANSI escapes taking no
// column.
size_t display_width(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b') {
      while (i < s.size() && s[i] != 'm') ++i;
      continue;
    }
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) ++n;
  }
  return n;
}

// `s` cut to `columns` display columns (an ellipsis marking the cut), any
// colour reset at the end.
std::string fit(std::string_view s, size_t columns) {
  if (display_width(s) <= columns) return std::string(s);
  std::string out;
  size_t n = 0;
  bool coloured = false;
  size_t room = columns == 0 ? 0 : columns - 1;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '\x1b') {
      size_t end = s.find('m', i);
      end = end == std::string_view::npos ? s.size() : end + 1;
      out.append(s.substr(i, end - i));
      coloured = true;
      i = end;
      continue;
    }
    size_t len = 1;
    while (i + len < s.size() && (static_cast<unsigned char>(s[i + len]) & 0xC0) == 0x80) ++len;
    if (n == room) break;
    out.append(s.substr(i, len));
    ++n;
    i += len;
  }
  if (columns > 0) out += "…";
  if (coloured) out += "\x1b[0m";
  return out;
}

constexpr const char* kGlyphs[] = {"█", "▓", "▒", "░", "●", "○", "◆", "◇", "■", "□", "▲", "△"};
// Okabe and Ito's colours in the 256 of a terminal.
constexpr int kAnsiPalette[] = {25, 214, 36, 166, 74, 175, 252, 227};
constexpr int kAnsiSeverity[] = {36, 214, 166, 175, 196};

std::string ansi(int colour) {
  return fmt::format("\x1b[38;5;{}m", colour);
}

int series_ansi(const Legend& legend, const std::string& name) {
  return is_fold(name) ? 245 : kAnsiPalette[legend.index(name) % std::size(kAnsiPalette)];
}

const char* series_glyph(const Legend& legend, const std::string& name) {
  return kGlyphs[legend.index(name) % std::size(kGlyphs)];
}

int severity_ansi(int severity) {
  return kAnsiSeverity[std::clamp(severity, 0, static_cast<int>(std::size(kAnsiSeverity)) - 1)];
}

// A row of cells, each a glyph and a colour (-1: none), joined into a line
// with a colour code where the colour changes.
struct Cell {
  const char* glyph = " ";
  int colour = -1;
};

std::string join_cells(const std::vector<Cell>& cells, bool color) {
  std::string out;
  int current = -1;
  for (const auto& c : cells) {
    if (color && c.colour != current) {
      out += c.colour < 0 ? std::string("\x1b[0m") : ansi(c.colour);
      current = c.colour;
    }
    out += c.glyph;
  }
  if (color && current >= 0) out += "\x1b[0m";
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// Which column of `width` over [from, to] a time falls in.
size_t column_of(Millis t, Millis from, Millis to, size_t width) {
  if (t <= from) return 0;
  if (t >= to) return width - 1;
  auto c = static_cast<size_t>((static_cast<__int128>(t - from) * width) / (to - from));
  return std::min(c, width - 1);
}

// A series' lowest and highest value in each column; the columns between
// two points take the line between them (as the SVG's polyline does).
struct Span {
  double lo = kInf, hi = -kInf;
  bool empty() const { return lo > hi; }
};

std::vector<Span> column_spans(const PlotSeries& s, Millis from, Millis to, size_t width) {
  std::vector<Span> spans(width);
  const PlotPoint* before = nullptr;
  size_t before_col = 0;
  for (const auto& p : s.points) {
    if (!std::isfinite(p.value)) continue;
    size_t c = column_of(p.at, from, to, width);
    Span& span = spans[c];
    span.lo = std::min(span.lo, p.value);
    span.hi = std::max(span.hi, p.value);
    if (before != nullptr && c > before_col + 1) {
      for (size_t k = before_col + 1; k < c; ++k) {
        // The line's value at the column's middle.
        double mid = static_cast<double>(from) + (static_cast<double>(k) + 0.5) *
                                                     static_cast<double>(to - from) /
                                                     static_cast<double>(width);
        double f = (mid - static_cast<double>(before->at)) /
                   static_cast<double>(std::max<Millis>(p.at - before->at, 1));
        double v = before->value + std::clamp(f, 0.0, 1.0) * (p.value - before->value);
        spans[k].lo = std::min(spans[k].lo, v);
        spans[k].hi = std::max(spans[k].hi, v);
      }
    }
    before = &p;
    before_col = c;
  }
  return spans;
}

// Text labels spread along a line of `width`: the first at the left, the
// last ending at the right, the others centred on their columns.
void place(std::string& line, size_t at, const std::string& text) {
  if (line.size() < at + text.size()) line.resize(at + text.size(), ' ');
  line.replace(at, text.size(), text);
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

// Legend items as words wrapped into lines of `columns`.
void wrap_items(std::vector<std::string>& lines, const std::vector<std::string>& items,
                size_t columns, const std::string& lead = "") {
  std::string line = lead;
  size_t width = display_width(lead);
  for (const auto& item : items) {
    size_t w = display_width(item);
    if (width > display_width(lead) && width + 2 + w > columns) {
      lines.push_back(line);
      line = std::string(display_width(lead), ' ');
      width = display_width(lead);
    }
    if (width > display_width(lead)) {
      line += "  ";
      width += 2;
    }
    line += item;
    width += w;
  }
  if (width > display_width(lead)) lines.push_back(line);
}

}  // namespace

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

std::string render_svg(const Chart& chart) {
  const Legend legend(chart);
  auto [from, to] = drawn_range(chart);
  const TimeScale time{from, to};
  const bool has_points = chart_has_points(chart);
  // Time ticks no closer than a "MM-DD HH:MM" label needs.
  const Millis step = time_step(to - from, std::max(2, kPlotWidth / 90));
  const TimeLabel label_kind = time_label_kind(to - from, step);
  std::vector<Millis> ticks;
  if (has_points) ticks = time_ticks(from, to, step);

  std::string body;
  double y = 58;
  // The marks' labels: two rows above the first panel.
  const double marks_top = y;
  if (!chart.marks.empty()) y += 2 * kMarkRow + 4;
  const double panels_top = y;
  for (size_t i = 0; i < chart.panels.size(); ++i) {
    svg_panel(body, chart.panels[i], i, y, time, ticks, label_kind, legend);
    y += kPanelHeight;
  }
  const double last_bottom = y - kPanelHeight + kPanelTitle + kFrameHeight;
  if (chart.panels.empty()) y += 8;

  // Marks: a dashed line across every panel; labelled while each label has
  // room (at least kMarkSpacing pixels from the one before on its row),
  // the rest unlabelled lines (a <title> still names them on hover).
  double row_end[2] = {-1e9, -1e9};
  for (const auto& m : chart.marks) {
    if (!has_points || m.at < from || m.at > to || chart.panels.empty()) continue;
    double x = time.x(m.at);
    const char* colour = severity_colour(m.severity);
    std::string label = escaped(m.label);
    double w = std::max<double>(text_width(m.label), kMarkSpacing - 4);
    bool right = x + w > kWidth - 4;  // the label ends at its line
    double start = right ? x - w : x;
    int row = -1;
    for (int r = 0; r < 2 && row < 0; ++r)
      if (start >= row_end[r] + 4) row = r;
    fmt::format_to(std::back_inserter(body),
                   "<g class=\"mark\" data-severity=\"{}\"><title>{}</title><line x1=\"{}\" "
                   "x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"1.2\" "
                   "stroke-dasharray=\"5 3\"/>",
                   m.severity, label, coord(x), coord(x),
                   coord(row < 0 ? panels_top + kPanelTitle : marks_top + (row + 1) * kMarkRow - 9),
                   coord(last_bottom), colour);
    if (row >= 0) {
      row_end[row] = start + w;
      fmt::format_to(std::back_inserter(body),
                     "<text x=\"{}\" y=\"{}\" fill=\"{}\" font-size=\"10.5\" "
                     "text-anchor=\"{}\">{}</text>",
                     coord(right ? x - 3 : x + 3), coord(marks_top + (row + 1) * kMarkRow - 2),
                     colour, right ? "end" : "start", label);
    }
    body += "</g>\n";
  }

  // The time axis's label, the day it starts on when it spans less than
  // one (its ticks then show only the time of day), and the legend.
  double axis_y = last_bottom + 34;
  if (!chart.panels.empty()) {
    fmt::format_to(std::back_inserter(body),
                   "<text class=\"axis-x\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">time "
                   "(UTC)</text>\n",
                   coord(kLeft + kPlotWidth / 2.0), coord(axis_y));
    if (has_points && label_kind != TimeLabel::kDays && label_kind != TimeLabel::kDayMinutes)
      fmt::format_to(std::back_inserter(body),
                     "<text class=\"date\" x=\"{}\" y=\"{}\" fill=\"#555555\">{}</text>\n", kLeft,
                     coord(axis_y), date_of(from));
  }
  std::vector<LegendEntry> entries;
  for (const auto& name : legend.names)
    entries.push_back({name, series_colour(legend, name), series_dash(legend, name)});
  for (const auto& [status, letter] : mark_letters(chart.marks)) {
    int severity = 0;
    for (const auto& m : chart.marks)
      if (mark_status(m.label) == status) severity = m.severity;
    entries.push_back({status, severity_colour(severity), "5 3"});
  }
  double height = svg_legend(body, entries, axis_y + 22) + 4;

  std::string out;
  out.reserve(body.size() + 1024);
  fmt::format_to(std::back_inserter(out),
                 "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{0}\" "
                 "height=\"{1}\" viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" "
                 "font-size=\"11\">\n<title>{2}</title>\n"
                 "<rect class=\"background\" x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" "
                 "fill=\"white\"/>\n"
                 "<text class=\"title\" x=\"16\" y=\"26\" font-size=\"16\" "
                 "font-weight=\"bold\">{2}</text>\n"
                 "<text class=\"subtitle\" x=\"16\" y=\"45\" font-size=\"12\" "
                 "fill=\"#555555\">{3}</text>\n",
                 kWidth, coord(height), escaped(chart.title), escaped(chart.subtitle));
  out += body;
  out += "</svg>\n";
  return out;
}

std::string render_text_chart(const Chart& chart, const TextChartOptions& options) {
  const size_t columns = options.columns == 0 ? 80 : options.columns;
  const bool color = options.color;
  const size_t rows = std::max<size_t>(options.panel_rows, 2);
  // The y labels' width: 6 columns, none on a terminal too narrow for them.
  const size_t label_width = columns >= 20 ? 6 : 0;
  const size_t width = columns > label_width + 1 ? columns - label_width - 1 : 1;
  const Legend legend(chart);
  auto [from, to] = drawn_range(chart);
  const bool has_points = chart_has_points(chart);

  std::vector<std::string> lines;
  auto paint = [&](const std::string& text, int colour) {
    return color && colour >= 0 ? ansi(colour) + text + "\x1b[0m" : text;
  };
  if (!chart.title.empty()) lines.push_back(chart.title);
  if (!chart.subtitle.empty()) lines.push_back(chart.subtitle);

  // The time labels under each panel's axis: up to 4 at nice times (as
  // the SVG's ticks), each centred on its column, marked ┬ on the axis.
  const Millis span = to - from;
  std::string time_line;
  std::vector<bool> tick_column(width, false);
  if (has_points) {
    std::string labels;
    for (int most = 4; most >= 1; --most) {
      Millis step = time_step(span, most);
      TimeLabel kind = time_label_kind(span, step);
      std::vector<Millis> ticks = time_ticks(from, to, step);
      if (ticks.empty()) ticks.push_back(from);
      size_t len = time_label(ticks.front(), kind).size();
      if (most > 1 && ticks.size() * (len + 2) > width) continue;
      labels.clear();
      std::fill(tick_column.begin(), tick_column.end(), false);
      size_t free_from = 0;  // where the next label may start
      for (Millis t : ticks) {
        std::string text = time_label(t, kind);
        if (text.size() > width) break;
        size_t col = column_of(t, from, to, width);
        size_t at = std::min(col - std::min(col, text.size() / 2), width - text.size());
        if (at < free_from) continue;
        place(labels, at, text);
        tick_column[col] = true;
        free_from = at + text.size() + 2;
      }
      break;
    }
    std::string gutter = label_width > 0 ? fmt::format("{:>{}} ", "UTC", label_width) : " ";
    time_line = gutter + labels;
  }

  for (size_t pi = 0; pi < chart.panels.size(); ++pi) {
    const PlotPanel& panel = chart.panels[pi];
    lines.push_back(panel.title);
    double lo = 0, hi = 0;
    bool any = panel_extent(panel, lo, hi);
    ValueAxis axis =
        value_axis(lo, hi, panel.unit, static_cast<int>(std::max<size_t>(rows / 2, 1)));
    auto row_of = [&](double v) {
      double f = (v - axis.lo) / (axis.hi - axis.lo);
      auto r = static_cast<int64_t>(std::floor(f * static_cast<double>(rows)));
      return static_cast<size_t>(std::clamp<int64_t>(r, 0, static_cast<int64_t>(rows) - 1));
    };
    std::vector<std::vector<Cell>> grid(rows, std::vector<Cell>(width));
    // The first series on top: drawn last.
    for (size_t k = panel.series.size(); any && k-- > 0;) {
      const PlotSeries& s = panel.series[k];
      Cell cell{series_glyph(legend, s.name), series_ansi(legend, s.name)};
      auto spans = column_spans(s, from, to, width);
      for (size_t c = 0; c < width; ++c) {
        if (spans[c].empty()) continue;
        for (size_t r = row_of(spans[c].lo); r <= row_of(spans[c].hi); ++r) grid[r][c] = cell;
      }
    }
    // Tick labels at the rows their values fall in, each row once.
    std::vector<std::string> labels(rows);
    for (int i = axis.ticks() - 1; i >= 0; --i) {
      size_t r = row_of(axis.tick(i));
      if (labels[r].empty()) labels[r] = format_plot_value(axis.tick(i), panel.unit);
    }
    for (size_t r = rows; r-- > 0;) {
      std::string line;
      if (label_width > 0) {
        std::string label = labels[r].substr(0, label_width);
        line = fmt::format("{:>{}}{}", label, label_width, labels[r].empty() ? "│" : "┤");
      } else {
        line = "│";
      }
      std::string cells = join_cells(grid[r], color);
      if (!any && r == rows / 2) {
        cells = std::string((width > 7 ? (width - 7) / 2 : 0), ' ') + "no data";
      }
      lines.push_back(line + cells);
    }
    std::string axis_line = std::string(label_width, ' ') + "└";
    for (size_t c = 0; c < width; ++c) axis_line += tick_column[c] ? "┬" : "─";
    lines.push_back(axis_line);
    // Under the last panel, a letter where each mark happened, the most
    // alarming where several share a column.
    if (pi + 1 == chart.panels.size() && !chart.marks.empty() && has_points) {
      auto letters = mark_letters(chart.marks);
      std::vector<Cell> row(width);
      std::vector<int> severity(width, -1);
      std::vector<std::string> glyphs(width);
      for (const auto& m : chart.marks) {
        if (m.at < from || m.at > to) continue;
        size_t c = column_of(m.at, from, to, width);
        if (m.severity < severity[c]) continue;
        severity[c] = m.severity;
        auto status = mark_status(m.label);
        for (const auto& [name, letter] : letters)
          if (name == status) glyphs[c] = std::string(1, letter);
        row[c] = {glyphs[c].c_str(), severity_ansi(m.severity)};
      }
      lines.push_back(std::string(label_width + 1, ' ') + join_cells(row, color));
    }
    if (!time_line.empty()) lines.push_back(time_line);
  }

  // The legend: a glyph and a name per series; then the marks' letters.
  std::vector<std::string> items;
  for (const auto& name : legend.names) {
    std::string glyph = paint(series_glyph(legend, name), series_ansi(legend, name));
    // A name longer than the line is cut, the glyph kept.
    items.push_back(glyph + " " + fit(name, columns > 3 ? columns - 2 : 1));
  }
  wrap_items(lines, items, columns);
  if (!chart.marks.empty()) {
    std::vector<std::string> keys;
    for (const auto& [status, letter] : mark_letters(chart.marks)) {
      int severity = 0;
      for (const auto& m : chart.marks)
        if (mark_status(m.label) == status) severity = m.severity;
      keys.push_back(paint(std::string(1, letter), severity_ansi(severity)) + " " + status);
    }
    wrap_items(lines, keys, columns, "marks: ");
  }

  std::string out;
  for (const auto& line : lines) {
    out += fit(line, columns);
    out += '\n';
  }
  return out;
}

}  // namespace kpipe
