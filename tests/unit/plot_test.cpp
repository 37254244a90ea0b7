#include "kpipe/plot.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <string>
#include <string_view>
#include <vector>

using namespace kpipe;

namespace {

constexpr Millis kT0 = 1'795'946'400'000;  // 2026-11-29T10:00:00Z

std::vector<PlotPoint> pts(std::initializer_list<std::pair<Millis, double>> list) {
  std::vector<PlotPoint> out;
  for (auto [at, v] : list) out.push_back({at, v});
  return out;
}

PlotSeries series(std::string name, std::vector<PlotPoint> points) {
  return {std::move(name), std::move(points)};
}

// ---- the SVG, read back as a reader of the picture would (as
// tests/integration/bin/svg_info does with an XML parser): elements by tag,
// their attributes, the text of <text> elements.

struct Element {
  std::string tag;   // "<polyline class=... />"
  std::string text;  // a <text>'s content, still escaped
};

std::vector<Element> elements(const std::string& svg, std::string_view name) {
  std::vector<Element> out;
  std::string open = "<" + std::string(name) + " ";
  for (size_t at = svg.find(open); at != std::string::npos; at = svg.find(open, at + 1)) {
    size_t end = svg.find('>', at);
    Element e{svg.substr(at, end - at + 1), ""};
    if (name == "text") e.text = svg.substr(end + 1, svg.find("</text>", end) - end - 1);
    out.push_back(std::move(e));
  }
  return out;
}

std::string attr(const Element& e, std::string_view name) {
  std::string key = " " + std::string(name) + "=\"";
  size_t at = e.tag.find(key);
  if (at == std::string::npos) return "";
  at += key.size();
  return e.tag.substr(at, e.tag.find('"', at) - at);
}

bool has_class(const Element& e, std::string_view c) {
  std::string classes = " " + attr(e, "class") + " ";
  return classes.find(" " + std::string(c) + " ") != std::string::npos;
}

// "1.5k", "250ms", "2m" back to a number, as svg_info reads tick labels.
double value_of_label(const std::string& text) {
  static const std::map<std::string, double> units = {
      {"", 1},      {"k", 1e3}, {"M", 1e6}, {"G", 1e9},  {"T", 1e12},
      {"ms", 1e-3}, {"s", 1},   {"m", 60},  {"h", 3600}, {"d", 86400}};
  size_t end = text.find_first_not_of("-0123456789.");
  std::string unit = end == std::string::npos ? "" : text.substr(end);
  REQUIRE(units.count(unit) == 1);
  return std::stod(text.substr(0, end)) * units.at(unit);
}

struct Frame {
  double x0, y0, x1, y1;
};

struct Polyline {
  std::string name;
  int panel;
  std::vector<std::pair<double, double>> points;
};

struct Svg {
  std::string text;
  std::vector<Polyline> series;
  std::map<int, Frame> frames;
  std::map<int, std::vector<std::pair<double, double>>> ticks;  // per panel: (y, value)

  explicit Svg(std::string svg) : text(std::move(svg)) {
    for (const auto& e : elements(text, "polyline")) {
      if (!has_class(e, "series")) continue;
      Polyline p{attr(e, "data-series"), std::stoi(attr(e, "data-panel")), {}};
      std::string all = attr(e, "points");
      for (size_t at = 0; at < all.size();) {
        size_t end = all.find(' ', at);
        if (end == std::string::npos) end = all.size();
        std::string pair = all.substr(at, end - at);
        size_t comma = pair.find(',');
        p.points.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
        at = end + 1;
      }
      series.push_back(std::move(p));
    }
    for (const auto& e : elements(text, "rect")) {
      if (!has_class(e, "frame")) continue;
      double x = std::stod(attr(e, "x")), y = std::stod(attr(e, "y"));
      frames[std::stoi(attr(e, "data-panel"))] = {x, y, x + std::stod(attr(e, "width")),
                                                  y + std::stod(attr(e, "height"))};
    }
    for (const auto& e : elements(text, "text"))
      if (has_class(e, "tick-y"))
        ticks[std::stoi(attr(e, "data-panel"))].emplace_back(std::stod(attr(e, "y")),
                                                             value_of_label(e.text));
  }

  const Polyline& line(const std::string& name, int panel) const {
    auto it = std::find_if(series.begin(), series.end(),
                           [&](const Polyline& p) { return p.name == name && p.panel == panel; });
    REQUIRE(it != series.end());
    return *it;
  }

  // The value a height stands for, from the lowest and highest tick label.
  double value_at(int panel, double y) const {
    auto t = ticks.at(panel);
    std::sort(t.begin(), t.end());
    REQUIRE(t.size() >= 2);
    double slope = (t.back().second - t.front().second) / (t.back().first - t.front().first);
    return t.front().second + slope * (y - t.front().first);
  }
  double value_per_pixel(int panel) const {
    return std::abs(value_at(panel, 1) - value_at(panel, 0));
  }

  std::vector<std::string> texts(std::string_view cls = "") const {
    std::vector<std::string> out;
    for (const auto& e : elements(text, "text"))
      if (cls.empty() || has_class(e, cls)) out.push_back(e.text);
    return out;
  }
};

// ---- the text chart

size_t code_points(std::string_view line) {
  size_t n = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\x1b') {
      while (i < line.size() && line[i] != 'm') ++i;
      continue;
    }
    if ((static_cast<unsigned char>(line[i]) & 0xC0) != 0x80) ++n;
  }
  return n;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

size_t count(std::string_view text, std::string_view what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A chart of two panels, sharing names, with awkward characters.
Chart two_panels() {
  Chart chart;
  chart.title = "klag: lag of 'a&b' <2 groups>";
  chart.subtitle = "history \"lag.db\"";
  chart.panels.push_back(
      {"lag (records)",
       PlotUnit::kCount,
       {series("a&b <c>", pts({{kT0, 10}, {kT0 + kMinute, 1500}, {kT0 + 2 * kMinute, 30}})),
        series("d'e\"", pts({{kT0 + 30 * kSecond, 400}, {kT0 + 90 * kSecond, 0}}))}});
  chart.panels.push_back({"lag (seconds)",
                          PlotUnit::kSeconds,
                          {series("a&b <c>", pts({{kT0, 0.25}, {kT0 + 2 * kMinute, 125.5}}))}});
  return chart;
}

}  // namespace

TEST_CASE("thin_points: a spike among a million points survives, two per interval at most",
          "[plot]") {
  std::vector<PlotPoint> points;
  const size_t n = 1'000'000;
  points.reserve(n);
  for (size_t i = 0; i < n; ++i)
    points.push_back({kT0 + static_cast<Millis>(i) * 10, static_cast<double>(i % 97)});
  points[654'321].value = 1e9;  // the spike
  points[123'457].value = -5;   // and a dip
  const size_t buckets = 800;
  Millis from = points.front().at, to = points.back().at;
  auto thin = thin_points(points, from, to, buckets);
  CHECK(thin.size() <= 2 * buckets);
  CHECK(std::is_sorted(thin.begin(), thin.end(),
                       [](const PlotPoint& a, const PlotPoint& b) { return a.at <= b.at; }));
  CHECK(std::adjacent_find(thin.begin(), thin.end(), [](const PlotPoint& a, const PlotPoint& b) {
          return a.at == b.at;
        }) == thin.end());
  CHECK(std::find(thin.begin(), thin.end(), points[654'321]) != thin.end());
  CHECK(std::find(thin.begin(), thin.end(), points[123'457]) != thin.end());
  // Each interval's lowest and highest value, found by brute force, kept.
  auto bucket = [&](Millis at) {
    return std::min<size_t>(static_cast<size_t>(static_cast<double>(at - from) * buckets /
                                                static_cast<double>(to - from)),
                            buckets - 1);
  };
  std::vector<double> lo(buckets, 1e300), hi(buckets, -1e300), kept_lo(buckets, 1e300),
      kept_hi(buckets, -1e300);
  std::vector<size_t> kept(buckets, 0);
  for (const auto& p : points) {
    lo[bucket(p.at)] = std::min(lo[bucket(p.at)], p.value);
    hi[bucket(p.at)] = std::max(hi[bucket(p.at)], p.value);
  }
  for (const auto& p : thin) {
    ++kept[bucket(p.at)];
    kept_lo[bucket(p.at)] = std::min(kept_lo[bucket(p.at)], p.value);
    kept_hi[bucket(p.at)] = std::max(kept_hi[bucket(p.at)], p.value);
  }
  CHECK(*std::max_element(kept.begin(), kept.end()) == 2);
  CHECK(kept_lo == lo);
  CHECK(kept_hi == hi);
}

TEST_CASE("thin_points: points no more than two per interval are returned unchanged", "[plot]") {
  std::vector<PlotPoint> few;
  for (int i = 0; i < 100; ++i) few.push_back({kT0 + i * kSecond, static_cast<double>(i % 7)});
  CHECK(thin_points(few, few.front().at, few.back().at, 800) == few);
  // Three points in one interval: its lowest and highest, in time order,
  // whichever comes first; a flat interval leaves one point.
  CHECK(thin_points(pts({{0, 5}, {1, 1}, {2, 9}}), 0, 1000, 10) == pts({{1, 1}, {2, 9}}));
  CHECK(thin_points(pts({{0, 9}, {1, 1}, {2, 5}}), 0, 1000, 10) == pts({{0, 9}, {1, 1}}));
  CHECK(thin_points(pts({{0, 3}, {1, 3}, {2, 3}}), 0, 1000, 10) == pts({{0, 3}}));
  // Intervals apart stay apart: [0, 100) and [100, 200).
  CHECK(thin_points(pts({{0, 1}, {50, 9}, {99, 5}, {100, 2}, {150, 2}}), 0, 1000, 10) ==
        pts({{0, 1}, {50, 9}, {100, 2}, {150, 2}}));
  // A flat time range is one interval.
  CHECK(thin_points(pts({{7, 1}, {7, 4}, {7, 2}}), 7, 7, 10) == pts({{7, 1}, {7, 4}}));
}

TEST_CASE("fold_series: the highest peaks kept in their order, the rest summed at unaligned times",
          "[plot]") {
  std::vector<PlotSeries> in = {
      series("c", pts({{5, 10}, {15, 20}})),
      series("b", pts({{0, 1}, {10, 2}})),
      series("a", pts({{3, 100}})),
      series("d", pts({{12, 3}})),
  };
  auto sum = fold_series(in, 3, PlotFold::kSum);
  REQUIRE(sum.size() == 3);
  CHECK(sum[0].name == "c");
  CHECK(sum[1].name == "a");
  CHECK(sum[1].points == pts({{3, 100}}));
  CHECK(sum[2].name == "2 others");
  // b counts from 0, d from 12, each at its latest point.
  CHECK(sum[2].points == pts({{0, 1}, {10, 2}, {12, 5}}));

  auto all = fold_series(in, 2, PlotFold::kSum);
  REQUIRE(all.size() == 2);
  CHECK(all[0].name == "a");
  CHECK(all[1].name == "3 others");
  CHECK(all[1].points == pts({{0, 1}, {5, 11}, {10, 12}, {12, 15}, {15, 25}}));

  auto max = fold_series(in, 2, PlotFold::kMax);
  CHECK(max[1].points == pts({{0, 1}, {5, 10}, {10, 10}, {12, 10}, {15, 20}}));

  // One series only: everything is folded.
  auto one = fold_series(in, 1, PlotFold::kMax);
  REQUIRE(one.size() == 1);
  CHECK(one[0].name == "4 others");
  CHECK(one[0].points == pts({{0, 1}, {3, 100}, {5, 100}, {10, 100}, {12, 100}, {15, 100}}));
}

TEST_CASE("fold_series: few series unchanged; series without points left out", "[plot]") {
  std::vector<PlotSeries> in = {series("x", pts({{0, 1}})), series("empty", {}),
                                series("y", pts({{0, 2}, {1, 3}}))};
  auto out = fold_series(in, 2, PlotFold::kSum);
  REQUIRE(out.size() == 2);
  CHECK(out[0].name == "x");
  CHECK(out[1].name == "y");
  CHECK(out[1].points == in[2].points);
  // Two points at one time in a folded series: its later one counts.
  std::vector<PlotSeries> twice = {series("top", pts({{0, 50}})),
                                   series("p", pts({{0, 1}, {0, 4}, {2, 6}})),
                                   series("q", pts({{1, 10}}))};
  CHECK(fold_series(twice, 2, PlotFold::kSum)[1].points == pts({{0, 4}, {1, 14}, {2, 16}}));
}

TEST_CASE("format_plot_value: counts and durations, short", "[plot]") {
  auto count = [](double v) { return format_plot_value(v, PlotUnit::kCount); };
  auto seconds = [](double v) { return format_plot_value(v, PlotUnit::kSeconds); };
  CHECK(count(0) == "0");
  CHECK(count(12) == "12");
  CHECK(count(950) == "950");
  CHECK(count(1200) == "1.2k");
  CHECK(count(12000) == "12k");
  CHECK(count(1500000) == "1.5M");
  CHECK(count(2e9) == "2G");
  CHECK(count(2500) == "2.5k");
  CHECK(count(999.7) == "1k");
  CHECK(count(-1500) == "-1.5k");
  CHECK(count(0.5) == "0.5");
  CHECK(seconds(0) == "0");
  CHECK(seconds(0.25) == "250ms");
  CHECK(seconds(1.5) == "1.5s");
  CHECK(seconds(45) == "45s");
  CHECK(seconds(120) == "2m");
  CHECK(seconds(75) == "1.25m");  // a tick of 15s steps reads back exactly
  CHECK(seconds(5400) == "1.5h");
  CHECK(seconds(2 * 86400) == "2d");
  CHECK(seconds(59.999) == "1m");
  CHECK(seconds(0.0000001) == "0");
}

TEST_CASE(
    "render_svg: a polyline per series, a point per sample, in the plot, higher values higher",
    "[plot]") {
  Chart chart = two_panels();
  Svg svg(render_svg(chart));
  CHECK(svg.text.rfind("<?xml", 0) == 0);
  CHECK(svg.text.find("<svg xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
  CHECK(svg.text.find("viewBox=\"0 0 960 ") != std::string::npos);
  REQUIRE(svg.series.size() == 3);
  REQUIRE(svg.frames.size() == 2);
  const Frame& f0 = svg.frames.at(0);
  const Frame& f1 = svg.frames.at(1);
  CHECK(f1.y0 > f0.y1);  // stacked

  const Polyline& a = svg.line("a&amp;b &lt;c&gt;", 0);
  const Polyline& d = svg.line("d&apos;e&quot;", 0);
  const Polyline& a1 = svg.line("a&amp;b &lt;c&gt;", 1);
  REQUIRE(a.points.size() == 3);
  REQUIRE(d.points.size() == 2);
  REQUIRE(a1.points.size() == 2);
  // Time: the first and last sample at the frame's edges, the rest linear.
  CHECK(a.points[0].first == Approx(f0.x0).margin(0.05));
  CHECK(a.points[2].first == Approx(f0.x1).margin(0.05));
  CHECK(a.points[1].first == Approx((f0.x0 + f0.x1) / 2).margin(0.1));
  CHECK(d.points[0].first == Approx(f0.x0 + (f0.x1 - f0.x0) / 4).margin(0.1));
  CHECK(a1.points[1].first == a.points[2].first);  // the panels share the time axis
  // Values: read back through the tick labels, within a pixel's rounding.
  auto check_values = [&](const Polyline& p, const std::vector<double>& values) {
    for (size_t i = 0; i < values.size(); ++i) {
      INFO(p.name << " point " << i);
      auto [x, y] = p.points[i];
      const Frame& f = svg.frames.at(p.panel);
      CHECK((x >= f.x0 && x <= f.x1 && y >= f.y0 - 0.05 && y <= f.y1 + 0.05));
      CHECK(svg.value_at(p.panel, y) == Approx(values[i]).margin(svg.value_per_pixel(p.panel)));
    }
  };
  check_values(a, {10, 1500, 30});
  check_values(d, {400, 0});
  check_values(a1, {0.25, 125.5});
  CHECK(a.points[1].second < d.points[0].second);  // 1500 above 400
  CHECK(d.points[0].second < a.points[0].second);  // 400 above 10
  CHECK(d.points[1].second == Approx(f0.y1));      // 0 at the foot
  // The axes: from 0 to a nice top at or above the highest value.
  auto top = [&](int panel) {
    double v = 0;
    for (auto [y, value] : svg.ticks.at(panel)) v = std::max(v, value);
    return v;
  };
  CHECK(top(0) == 1500);
  auto labels = [&](int panel) {
    std::vector<std::string> out;
    for (const auto& e : elements(svg.text, "text"))
      if (has_class(e, "tick-y") && attr(e, "data-panel") == std::to_string(panel))
        out.push_back(e.text);
    return out;
  };
  CHECK(labels(0) == std::vector<std::string>{"0", "500", "1k", "1.5k"});
  CHECK(labels(1) == std::vector<std::string>{"0", "30s", "1m", "1.5m", "2m", "2.5m"});
  CHECK(top(1) == 150);  // 2.5m, in 30s steps
  CHECK(svg.ticks.at(0).size() >= 4);

  // Titles and legend: escaped, once each name.
  CHECK(svg.texts("title") == std::vector<std::string>{"klag: lag of &apos;a&amp;b&apos; &lt;2 "
                                                       "groups&gt;"});
  CHECK(svg.texts("subtitle") == std::vector<std::string>{"history &quot;lag.db&quot;"});
  CHECK(svg.texts("panel-title") == std::vector<std::string>{"lag (records)", "lag (seconds)"});
  auto texts = svg.texts();
  CHECK(std::count(texts.begin(), texts.end(), "a&amp;b &lt;c&gt;") == 1);
  CHECK(std::count(texts.begin(), texts.end(), "d&apos;e&quot;") == 1);
  CHECK(std::count(texts.begin(), texts.end(), "time (UTC)") == 1);
  CHECK(std::count(texts.begin(), texts.end(), "2026-11-29") == 1);
  CHECK(svg.texts("tick-x").front() == "10:00:00");
  CHECK(svg.text.find("<c>") == std::string::npos);
  CHECK(svg.text.find("\"d'e") == std::string::npos);
  // Every & starts an entity.
  for (size_t at = svg.text.find('&'); at != std::string::npos; at = svg.text.find('&', at + 1)) {
    std::string_view rest = std::string_view(svg.text).substr(at);
    CHECK((rest.starts_with("&amp;") || rest.starts_with("&lt;") || rest.starts_with("&gt;") ||
           rest.starts_with("&quot;") || rest.starts_with("&apos;")));
  }
  // Colours: one per name, the same in both panels.
  auto stroke = [&](const std::string& name, const std::string& panel) {
    for (const auto& e : elements(svg.text, "polyline"))
      if (attr(e, "data-series") == name && attr(e, "data-panel") == panel)
        return attr(e, "stroke");
    return std::string();
  };
  CHECK(stroke("a&amp;b &lt;c&gt;", "0") == stroke("a&amp;b &lt;c&gt;", "1"));
  CHECK(stroke("a&amp;b &lt;c&gt;", "0") != stroke("d&apos;e&quot;", "0"));
}

TEST_CASE("render_svg: fewer points than pixels are drawn every one, even three in a pixel",
          "[plot]") {
  Chart chart;
  chart.panels.push_back(
      {"v",
       PlotUnit::kCount,
       {series("s", pts({{kT0, 1}, {kT0 + 1, 5}, {kT0 + 2, 3}, {kT0 + kHour, 2}}))}});
  Svg svg(render_svg(chart));
  REQUIRE(svg.series.size() == 1);
  CHECK(svg.series[0].points.size() == 4);
}

TEST_CASE("render_svg: a million points thinned to the plot's width, spikes kept, quickly",
          "[plot]") {
  Chart chart;
  chart.title = "big";
  chart.panels.push_back({"lag (records)", PlotUnit::kCount, {}});
  const size_t per_series = 1'000'000 / 6;
  for (int s = 0; s < 6; ++s) {
    PlotSeries one{fmt::format("s{}", s), {}};
    one.points.reserve(per_series);
    for (size_t i = 0; i < per_series; ++i)
      one.points.push_back({kT0 + static_cast<Millis>(i) * kSecond,
                            100.0 * s + static_cast<double>((i * 7919) % 50)});
    chart.panels[0].series.push_back(std::move(one));
  }
  chart.panels[0].series[3].points[100'000].value = 20'000;  // one spike in one series
  auto started = std::chrono::steady_clock::now();
  std::string text = render_svg(chart);
  auto took = std::chrono::steady_clock::now() - started;
  INFO("render_svg of a million points took "
       << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
  // Well under 100 ms on a quiet machine; the bound leaves room for a
  // loaded one, and still catches a renderer that draws every point.
  CHECK(took < std::chrono::milliseconds(500));
  CHECK(text.size() < 300'000);
  Svg svg(std::move(text));
  REQUIRE(svg.series.size() == 6);
  const Frame& f = svg.frames.at(0);
  double width = f.x1 - f.x0;
  for (const auto& p : svg.series) {
    INFO(p.name);
    CHECK(p.points.size() <= 2 * static_cast<size_t>(width));
    CHECK(p.points.size() >= static_cast<size_t>(width));
    CHECK(std::is_sorted(p.points.begin(), p.points.end(),
                         [](auto& a, auto& b) { return a.first < b.first; }));
  }
  // The spike, at the top of the axis (20k), and no other point near it.
  const Polyline& spiked = svg.line("s3", 0);
  auto highest = std::min_element(spiked.points.begin(), spiked.points.end(),
                                  [](auto& a, auto& b) { return a.second < b.second; });
  CHECK(svg.value_at(0, highest->second) == Approx(20'000).margin(svg.value_per_pixel(0)));
  double spike_x = f.x0 + width * 100'000.0 / static_cast<double>(per_series - 1);
  CHECK(highest->first == Approx(spike_x).margin(1));
  for (const auto& p : svg.line("s2", 0).points) CHECK(svg.value_at(0, p.second) < 300);
}

TEST_CASE("render_svg: an empty panel says no data; one time and zeros divide nothing by zero",
          "[plot]") {
  Chart chart;
  chart.title = "t";
  chart.panels.push_back({"empty", PlotUnit::kCount, {series("none", {})}});
  chart.panels.push_back({"flat", PlotUnit::kSeconds, {series("zero", pts({{kT0, 0}}))}});
  Svg svg(render_svg(chart));
  CHECK(svg.frames.size() == 2);
  CHECK(svg.texts("no-data").size() == 1);
  CHECK(svg.text.find("nan") == std::string::npos);
  CHECK(svg.text.find("inf") == std::string::npos);
  CHECK(svg.ticks.at(0).size() >= 2);
  CHECK(svg.ticks.at(1).size() >= 2);
  // The lone point in the middle of a padded time axis, at 0, with a dot.
  REQUIRE(svg.series.size() == 1);
  const Frame& f = svg.frames.at(1);
  auto [x, y] = svg.line("zero", 1).points.at(0);
  CHECK(x == Approx((f.x0 + f.x1) / 2).margin(0.1));
  CHECK(y == Approx(f.y1).margin(0.05));
  CHECK(elements(svg.text, "circle").size() == 1);

  // No panel with any point: frames, no time ticks, still an SVG.
  Chart nothing;
  nothing.panels.push_back({"empty", PlotUnit::kCount, {}});
  std::string text = render_svg(nothing);
  CHECK(text.find("no data") != std::string::npos);
  CHECK(text.find("tick-x") == std::string::npos);
  CHECK(text.ends_with("</svg>\n"));
}

TEST_CASE("render_svg: marks are dashed lines across the panels, the crowded ones unlabelled",
          "[plot]") {
  Chart chart = two_panels();
  chart.marks.push_back({kT0, "a: WARN", 1});
  chart.marks.push_back({kT0 + kMinute, "a: STALL", 2});
  // Twenty marks within a second (under a pixel): at most two labelled.
  for (int i = 0; i < 20; ++i) chart.marks.push_back({kT0 + 90 * kSecond + i * 50, "b: OK", 0});
  chart.marks.push_back({kT0 + 2 * kMinute, "a & b: <OK>", 0});
  Svg svg(render_svg(chart));
  const Frame& f0 = svg.frames.at(0);
  const Frame& f1 = svg.frames.at(1);
  std::vector<std::pair<double, std::string>> labelled;
  size_t marks = 0;
  for (size_t at = svg.text.find("<g class=\"mark\""); at != std::string::npos;
       at = svg.text.find("<g class=\"mark\"", at + 1)) {
    ++marks;
    std::string g = svg.text.substr(at, svg.text.find("</g>", at) - at);
    auto line = elements(g, "line").at(0);
    CHECK(attr(line, "x1") == attr(line, "x2"));
    CHECK(std::stod(attr(line, "y1")) <= f0.y0);
    CHECK(std::stod(attr(line, "y2")) == Approx(f1.y1));
    CHECK(attr(line, "stroke-dasharray") != "");
    auto texts = elements(g, "text");
    if (texts.empty()) continue;
    labelled.emplace_back(std::stod(attr(line, "x1")), texts[0].text);
  }
  CHECK(marks == 23);
  REQUIRE(labelled.size() >= 3);
  CHECK(labelled.size() <= 5);
  CHECK(labelled.front() == std::pair<double, std::string>{f0.x0, "a: WARN"});
  CHECK(labelled[1].second == "a: STALL");
  CHECK(labelled[1].first == Approx((f0.x0 + f0.x1) / 2).margin(0.1));
  CHECK(labelled.back().second == "a &amp; b: &lt;OK&gt;");
  CHECK(labelled.back().first == Approx(f0.x1).margin(0.1));
}

TEST_CASE("render_svg: time labels by the span, in UTC", "[plot]") {
  auto labels = [](Millis span) {
    Chart chart;
    chart.panels.push_back(
        {"v", PlotUnit::kCount, {series("s", pts({{kT0 + 7 * kSecond, 1}, {kT0 + span, 2}}))}});
    return Svg(render_svg(chart)).texts("tick-x");
  };
  CHECK(labels(2 * kHour) == std::vector<std::string>{"10:15", "10:30", "10:45", "11:00", "11:15",
                                                      "11:30", "11:45", "12:00"});
  CHECK(labels(40 * kSecond) == std::vector<std::string>{"10:00:10", "10:00:15", "10:00:20",
                                                         "10:00:25", "10:00:30", "10:00:35",
                                                         "10:00:40"});
  auto days = labels(3 * kDay);
  REQUIRE(!days.empty());
  CHECK(days.front() == "11-29 12:00");
  CHECK(days.back() == "12-02 00:00");
}

TEST_CASE("render_text_chart: no line wider than the terminal", "[plot]") {
  Chart chart = two_panels();
  chart.panels[0].series.push_back(
      series("ünïcødé–név–that–is–much–longer–than–any–narrow–terminal–could–show",
             pts({{kT0, 5}, {kT0 + 2 * kMinute, 7}})));
  chart.subtitle = std::string(300, 'x');
  chart.marks.push_back({kT0 + kMinute, "a: WARN", 1});
  chart.marks.push_back({kT0 + 2 * kMinute, "a: STOP", 3});
  for (size_t columns : {1, 5, 10, 20, 29, 30, 40, 80, 200})
    for (bool color : {false, true}) {
      INFO("columns " << columns << (color ? ", colour" : ""));
      std::string text = render_text_chart(chart, {columns, 8, color});
      CHECK((text.find('\x1b') != std::string::npos) == color);
      auto lines = lines_of(text);
      CHECK(lines.size() >= 2 * 10);
      for (const auto& line : lines) {
        INFO(line);
        CHECK(code_points(line) <= columns);
      }
    }
  // At 80 columns, the whole of it: title, panels, the legend and marks.
  std::string text = render_text_chart(chart, {80, 8, false});
  auto lines = lines_of(text);
  CHECK(lines[0] == chart.title);
  CHECK(count(text, "lag (records)\n") == 1);
  CHECK(count(text, "lag (seconds)\n") == 1);
  CHECK(count(text, "█ a&b <c>") == 1);
  CHECK(count(text, "▓ d'e\"") == 1);
  CHECK(count(text, "marks: W WARN  S STOP") == 1);
  size_t axes = 0;
  for (const auto& line : lines)
    if (line.starts_with("      └")) {
      ++axes;
      CHECK(code_points(line) == 80);
    }
  CHECK(axes == 2);
}

TEST_CASE("render_text_chart: a spike keeps its column; axis, labels and mark letters", "[plot]") {
  Chart chart;
  chart.title = "spike";
  PlotSeries s{"lag", {}};
  for (int i = 0; i < 10'000; ++i) s.points.push_back({kT0 + i * kSecond, 1});
  s.points[5'000].value = 1000;
  chart.panels.push_back({"lag (records)", PlotUnit::kCount, {s}});
  chart.marks.push_back({kT0, "WARN", 1});
  chart.marks.push_back({kT0 + 9'999 * kSecond, "STALL", 2});
  auto lines = lines_of(render_text_chart(chart, {80, 8, false}));
  // "spike", "lag (records)", then 8 rows: the top one holds the spike only.
  REQUIRE(lines.size() >= 14);
  CHECK(lines[1] == "lag (records)");
  CHECK(lines[2].starts_with("    1k┤"));
  CHECK(count(lines[2], "█") == 1);
  const size_t spike_column = lines[2].find("█") - std::string("    1k┤").size();
  CHECK(spike_column == 36);  // the middle of 73 columns
  for (int r = 3; r < 9; ++r) CHECK(count(lines[r], "█") <= 1);
  CHECK(lines[9].starts_with("     0┤"));
  CHECK(count(lines[9], "█") == 73);  // every column at 1, the foot
  // Ticks on the axis at 10:00, 11:00 and 12:00, their labels centred
  // under them.
  CHECK(lines[10] == "      └" + [] {
    std::string axis;
    for (int i = 0; i < 73; ++i) axis += i == 0 || i == 26 || i == 52 ? "┬" : "─";
    return axis;
  }());
  // The marks' letters at their columns, then the time labels.
  CHECK(lines[11] == "       W" + std::string(71, ' ') + "S");
  CHECK(lines[12] ==
        "   UTC 10:00" + std::string(19, ' ') + "11:00" + std::string(21, ' ') + "12:00");
  CHECK(lines[13] == "█ lag");
  CHECK(lines[14] == "marks: W WARN  S STALL");
  // In colour: the same picture, each glyph coloured and reset.
  auto coloured = lines_of(render_text_chart(chart, {80, 8, true}));
  CHECK(coloured[2].find("\x1b[38;5;") != std::string::npos);
  CHECK(coloured[2].ends_with("\x1b[0m"));
  CHECK(code_points(coloured[9]) == 80);
}
