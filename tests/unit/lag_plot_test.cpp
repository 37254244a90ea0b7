#include "kpipe/lag_plot.h"
#include "fakes.h"

#include <catch2/catch.hpp>

#include "lag_fixtures.h"

using namespace kpipe;
using namespace kpipe::lag_test;

namespace {

LagSample of(std::string group, LagSample s) {
  s.subject.name = std::move(group);
  return s;
}

std::vector<PlotPoint> pts(std::initializer_list<std::pair<Millis, double>> list) {
  std::vector<PlotPoint> out;
  for (auto [at, v] : list) out.push_back({at, v});
  return out;
}

std::vector<std::string> names(const PlotPanel& panel) {
  std::vector<std::string> out;
  for (const auto& s : panel.series) out.push_back(s.name);
  return out;
}

LagPlotOptions options(LagSeriesBy by = LagSeriesBy::kGroup) {
  LagPlotOptions o;
  o.by = by;
  o.history = "lag.db";
  o.depth = 30;
  return o;
}

struct Fixture {
  FakeClock clock{kT0};
  LagEngine engine{clock, {3, 0}};
};

// Eight partitions of events, partition p lagging p * 10 records more at
// each of three samples, and audit [0] lagging 1000 at the last.
std::vector<LagSample> eight_partitions() {
  std::vector<LagSample> out;
  for (int i = 0; i < 3; ++i) {
    std::vector<PartitionSample> parts;
    if (i == 2) parts.push_back(part("audit", 0, 0, 1000));
    for (int p = 0; p < 8; ++p) parts.push_back(part("events", p, 0, (i + 1) * p * 10));
    out.push_back(sample_at(kT0 + i * kMinute, std::move(parts)));
  }
  return out;
}

}  // namespace

TEST_CASE("lag_chart: a series per group, a point per sample, the lags summed", "[lag_plot]") {
  Fixture f;
  // billing: events [0] and [1] with lag in seconds at the last sample;
  // audit [0] never committed counts nothing (kIgnore).
  auto billing = billing_history();
  std::vector<LagSample> payments = {
      of("payments", sample_at(kT0 + 30 * kSecond, {part("events", 0, 5, 9, 2.0)})),
      of("payments", sample_at(kT0 + 90 * kSecond, {part("events", 0, 9, 9, 0.5)})),
  };
  auto chart = lag_chart({billing, payments}, f.engine, options());
  REQUIRE(chart);
  CHECK(chart->title == "klag: lag of 2 groups");
  CHECK(chart->subtitle ==
        "history lag.db: 5 samples from 2026-11-29T10:00:00Z to 2026-11-29T10:02:00Z");
  REQUIRE(chart->panels.size() == 2);
  const PlotPanel& records = chart->panels[0];
  CHECK(records.title == "lag (records)");
  CHECK(records.unit == PlotUnit::kCount);
  CHECK(names(records) == std::vector<std::string>{"billing", "payments"});
  CHECK(records.series[0].points == pts({{kT0, 10}, {kT0 + kMinute, 22}, {kT0 + 2 * kMinute, 30}}));
  CHECK(records.series[1].points == pts({{kT0 + 30 * kSecond, 4}, {kT0 + 90 * kSecond, 0}}));
  const PlotPanel& seconds = chart->panels[1];
  CHECK(seconds.title == "lag (seconds)");
  CHECK(seconds.unit == PlotUnit::kSeconds);
  // Only the samples that knew a lag in seconds, each its largest.
  CHECK(seconds.series[0].name == "billing");
  CHECK(seconds.series[0].points == pts({{kT0 + 2 * kMinute, 125.5}}));
  CHECK(seconds.series[1].points == pts({{kT0 + 30 * kSecond, 2}, {kT0 + 90 * kSecond, 0.5}}));
}

TEST_CASE("lag_chart: one group's title, and no seconds panel without lag in seconds",
          "[lag_plot]") {
  Fixture f;
  auto history = eight_partitions();
  auto chart = lag_chart({history}, f.engine, options());
  REQUIRE(chart);
  CHECK(chart->title == "klag: lag of group 'billing'");
  CHECK(chart->subtitle ==
        "history lag.db: 3 samples from 2026-11-29T10:00:00Z to 2026-11-29T10:02:00Z");
  REQUIRE(chart->panels.size() == 1);
  REQUIRE(chart->panels[0].series.size() == 1);
  CHECK(chart->panels[0].series[0].points ==
        pts({{kT0, 280}, {kT0 + kMinute, 560}, {kT0 + 2 * kMinute, 1840}}));
}

TEST_CASE("lag_chart: a series per partition, the lowest folded into one", "[lag_plot]") {
  Fixture f;
  auto o = options(LagSeriesBy::kPartition);
  o.series = 4;
  auto chart = lag_chart({eight_partitions()}, f.engine, o);
  REQUIRE(chart);
  const PlotPanel& records = chart->panels[0];
  // The three highest peaks drawn, the six others summed.
  CHECK(names(records) ==
        std::vector<std::string>{"audit[0]", "events[6]", "events[7]", "6 others"});
  CHECK(records.series[0].points == pts({{kT0 + 2 * kMinute, 1000}}));
  CHECK(records.series[2].points ==
        pts({{kT0, 70}, {kT0 + kMinute, 140}, {kT0 + 2 * kMinute, 210}}));
  CHECK(records.series[3].points ==
        pts({{kT0, 150}, {kT0 + kMinute, 300}, {kT0 + 2 * kMinute, 450}}));
  // Unfolded, every partition is a series of its own, by topic and number.
  o.series = 20;
  auto all = lag_chart({eight_partitions()}, f.engine, o);
  REQUIRE(all);
  REQUIRE(all->panels[0].series.size() == 9);
  CHECK(all->panels[0].series[1].name == "events[0]");
  CHECK(all->panels[0].series[4].points ==
        pts({{kT0, 30}, {kT0 + kMinute, 60}, {kT0 + 2 * kMinute, 90}}));
  // Among several groups, a partition's series names its group.
  auto two =
      lag_chart({eight_partitions(),
                 {of("payments", eight_partitions()[0]), of("payments", eight_partitions()[1])}},
                f.engine, o);
  REQUIRE(two);
  CHECK(two->panels[0].series[0].name == "billing audit[0]");
  CHECK(two->panels[0].series[9].name == "payments events[0]");
}

TEST_CASE("lag_chart: a series per topic, its partitions summed", "[lag_plot]") {
  Fixture f;
  auto chart = lag_chart({eight_partitions()}, f.engine, options(LagSeriesBy::kTopic));
  REQUIRE(chart);
  const PlotPanel& records = chart->panels[0];
  CHECK(names(records) == std::vector<std::string>{"audit", "events"});
  CHECK(records.series[1].points ==
        pts({{kT0, 280}, {kT0 + kMinute, 560}, {kT0 + 2 * kMinute, 840}}));
}

TEST_CASE("lag_chart: -t draws only those topics' partitions", "[lag_plot]") {
  Fixture f;
  auto o = options(LagSeriesBy::kPartition);
  o.topics = {"audit"};
  // audit has one sample only: too few.
  auto few = lag_chart({eight_partitions()}, f.engine, o);
  REQUIRE_FALSE(few);
  CHECK(few.error().message ==
        "history 'lag.db' holds 1 sample of group 'billing' on topic 'audit': a plot needs at "
        "least two");
  o.topics = {"events"};
  o.by = LagSeriesBy::kGroup;
  auto chart = lag_chart({eight_partitions()}, f.engine, o);
  REQUIRE(chart);
  CHECK(chart->subtitle ==
        "history lag.db on topic 'events': 3 samples from 2026-11-29T10:00:00Z to "
        "2026-11-29T10:02:00Z");
  CHECK(chart->panels[0].series[0].points ==
        pts({{kT0, 280}, {kT0 + kMinute, 560}, {kT0 + 2 * kMinute, 840}}));
}

TEST_CASE("lag_chart: marks where a group's verdict changed", "[lag_plot]") {
  Fixture f;  // window 3
  // events [0]: caught up, then stuck at 10 while its end grows (STALL at
  // the fourth sample, when no zero lag is left in the window), caught up
  // again at the fifth.
  std::vector<std::pair<int64_t, int64_t>> offsets = {{0, 0},   {10, 20}, {10, 30},
                                                      {10, 40}, {40, 40}, {40, 40}};
  std::vector<LagSample> billing;
  for (size_t i = 0; i < offsets.size(); ++i)
    billing.push_back(sample_at(kT0 + static_cast<Millis>(i) * kMinute,
                                {part("events", 0, offsets[i].first, offsets[i].second)}, 1));
  auto chart = lag_chart({billing}, f.engine, options());
  REQUIRE(chart);
  REQUIRE(chart->marks.size() == 2);
  CHECK(chart->marks[0].at == kT0 + 3 * kMinute);
  CHECK(chart->marks[0].label == "STALL");
  CHECK(chart->marks[0].severity == static_cast<int>(LagStatus::kStall));
  CHECK(chart->marks[1].at == kT0 + 4 * kMinute);
  CHECK(chart->marks[1].label == "OK");
  CHECK(chart->marks[1].severity == 0);
  // Among several groups a mark names its group, and marks go by time.
  std::vector<LagSample> payments;
  for (const auto& s : billing) {
    payments.push_back(of("payments", s));
    payments.back().at -= 30 * kSecond;
  }
  auto two = lag_chart({billing, payments}, f.engine, options());
  REQUIRE(two);
  REQUIRE(two->marks.size() == 4);
  CHECK(two->marks[0].label == "payments: STALL");
  CHECK(two->marks[1].label == "billing: STALL");
  CHECK(two->marks[2].label == "payments: OK");
  CHECK(two->marks[3].at == kT0 + 4 * kMinute);
  // A history whose verdict never changes has no mark.
  billing.resize(3);
  auto calm = lag_chart({billing}, f.engine, options());
  REQUIRE(calm);
  CHECK(calm->marks.empty());
}

TEST_CASE("lag_chart: fewer than two samples is an error, not an empty picture", "[lag_plot]") {
  Fixture f;
  auto one = lag_chart({{billing_history()[0]}}, f.engine, options());
  REQUIRE_FALSE(one);
  CHECK(one.error().message ==
        "history 'lag.db' holds 1 sample of group 'billing': a plot needs at least two");
  CHECK(one.error().status == ExitStatus::kFailure);
}
