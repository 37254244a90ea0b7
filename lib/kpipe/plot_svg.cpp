// render_svg (plot.h): the chart as a standalone SVG document.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/plot.h"
#include "kpipe/plot_internal.h"

namespace kpipe {

using namespace plot_internal;

namespace {

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

}  // namespace

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

}  // namespace kpipe
