// render_text_chart (plot.h): the chart in block characters, for a
// terminal.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/plot.h"
#include "kpipe/plot_internal.h"

namespace kpipe {

using namespace plot_internal;

namespace {

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
