// kcheckpoint history --plot's chart (programs/checkpoint_plot.h): what
// the store's checkpoints become, before any renderer draws them.
#include "kpipe/programs/checkpoint_plot.h"

#include <catch2/catch.hpp>

using namespace kpipe;

namespace {

// Checkpoint `id`, its barrier at `emitted`, complete `took` ms later
// (none: not complete), its records' latency p50/p99 (none: no records).
CheckpointRecord checkpoint(int64_t id, Millis emitted, std::optional<Millis> took,
                            std::optional<Latency> latency = std::nullopt) {
  CheckpointRecord c;
  c.id = id;
  c.emitted_at = emitted;
  if (took) c.completed_at = emitted + *took;
  c.latency = latency;
  return c;
}

Latency latency(Millis p50, Millis p99) {
  return {p50, p99, p99 + 100, 10};
}

constexpr Millis kT = 1'796'000'000'000;

}  // namespace

TEST_CASE("checkpoint_chart: took, p50 and p99 in seconds at each completion",
          "[checkpoint_plot]") {
  std::vector<CheckpointRecord> cs = {
      checkpoint(7, kT, 250, latency(1500, 4000)),
      checkpoint(8, kT + 5000, 1250, latency(2000, 9500)),
      checkpoint(9, kT + 10000, std::nullopt),  // never completed: not drawn
      checkpoint(10, kT + 15000, 40, latency(500, 700)),
  };
  auto chart = checkpoint_chart(cs, "p.db");
  REQUIRE(chart.ok());
  CHECK(chart->title == "kcheckpoint: checkpoints of p.db");
  CHECK(chart->subtitle == "3 complete checkpoints, 7 to 10, completed " +
                               format_rfc3339(kT + 250) + " to " + format_rfc3339(kT + 15040));
  REQUIRE(chart->panels.size() == 2);
  const PlotPanel& took = chart->panels[0];
  CHECK(took.title == "checkpoint time (barrier to completion)");
  CHECK(took.unit == PlotUnit::kSeconds);
  REQUIRE(took.series.size() == 1);
  CHECK(took.series[0].name == "took");
  CHECK(took.series[0].points ==
        std::vector<PlotPoint>{{kT + 250, 0.25}, {kT + 6250, 1.25}, {kT + 15040, 0.04}});
  const PlotPanel& e2e = chart->panels[1];
  CHECK(e2e.title == "end-to-end latency");
  CHECK(e2e.unit == PlotUnit::kSeconds);
  REQUIRE(e2e.series.size() == 2);
  CHECK(e2e.series[0].name == "p50");
  CHECK(e2e.series[0].points ==
        std::vector<PlotPoint>{{kT + 250, 1.5}, {kT + 6250, 2.0}, {kT + 15040, 0.5}});
  CHECK(e2e.series[1].name == "p99");
  CHECK(e2e.series[1].points ==
        std::vector<PlotPoint>{{kT + 250, 4.0}, {kT + 6250, 9.5}, {kT + 15040, 0.7}});
  CHECK(chart->marks.empty());
}

TEST_CASE("checkpoint_chart: latency only where the checkpoint covered records",
          "[checkpoint_plot]") {
  Latency none = latency(0, 0);
  none.records = 0;
  std::vector<CheckpointRecord> cs = {
      checkpoint(1, kT, 100),  // no records' timestamps
      checkpoint(2, kT + 1000, 100, latency(300, 600)),
      checkpoint(3, kT + 2000, 100, none),
  };
  auto chart = checkpoint_chart(cs, "p.db");
  REQUIRE(chart.ok());
  REQUIRE(chart->panels.size() == 2);
  CHECK(chart->panels[0].series[0].points.size() == 3);
  CHECK(chart->panels[1].series[0].points == std::vector<PlotPoint>{{kT + 1100, 0.3}});
  CHECK(chart->panels[1].series[1].points == std::vector<PlotPoint>{{kT + 1100, 0.6}});
}

TEST_CASE("checkpoint_chart: no latency at all leaves its panel out and says so",
          "[checkpoint_plot]") {
  auto chart = checkpoint_chart({checkpoint(1, kT, 100), checkpoint(2, kT + 1000, 200)}, "p.db");
  REQUIRE(chart.ok());
  REQUIRE(chart->panels.size() == 1);
  CHECK(chart->panels[0].series[0].points ==
        std::vector<PlotPoint>{{kT + 100, 0.1}, {kT + 1200, 0.2}});
  CHECK(chart->subtitle.ends_with("; no end-to-end latency recorded"));
}

TEST_CASE("checkpoint_chart: by completion time, a clock behind drawn at 0", "[checkpoint_plot]") {
  // 5 was emitted first but completed after 6; 6's completion is stamped
  // before its barrier (another host's clock).
  std::vector<CheckpointRecord> cs = {
      checkpoint(5, kT, 3000, latency(-20, 50)),
      checkpoint(6, kT + 1000, -10, latency(100, 200)),
  };
  auto chart = checkpoint_chart(cs, "p.db");
  REQUIRE(chart.ok());
  CHECK(chart->panels[0].series[0].points ==
        std::vector<PlotPoint>{{kT + 990, 0.0}, {kT + 3000, 3.0}});
  CHECK(chart->panels[1].series[0].points ==
        std::vector<PlotPoint>{{kT + 990, 0.1}, {kT + 3000, 0.0}});
  CHECK(chart->subtitle.starts_with("2 complete checkpoints, 5 to 6, "));
}

TEST_CASE("checkpoint_chart: fewer than two complete checkpoints is an error, not a picture",
          "[checkpoint_plot]") {
  auto none = checkpoint_chart({}, "p.db");
  REQUIRE(!none.ok());
  CHECK(none.error().status == ExitStatus::kFailure);
  CHECK(none.error().message ==
        "state 'p.db' holds 0 complete checkpoints: a plot needs at least two");
  auto one =
      checkpoint_chart({checkpoint(1, kT, 100), checkpoint(2, kT + 1, std::nullopt)}, "p.db");
  REQUIRE(!one.ok());
  CHECK(one.error().message ==
        "state 'p.db' holds 1 complete checkpoint: a plot needs at least two");
}

TEST_CASE("checkpoint_chart: a PostgreSQL state is named without its password",
          "[checkpoint_plot]") {
  const char* target = "postgresql://kpipe:s3cret@db.example:5432/pipe";
  auto chart = checkpoint_chart({checkpoint(1, kT, 100), checkpoint(2, kT + 1000, 100)}, target);
  REQUIRE(chart.ok());
  CHECK(chart->title.find("s3cret") == std::string::npos);
  CHECK(chart->title == "kcheckpoint: checkpoints of " + display_target(target));
  auto error = checkpoint_chart({}, target);
  REQUIRE(!error.ok());
  CHECK(error.error().message.find("s3cret") == std::string::npos);
}
