#include "kpipe/stats.h"

#include <catch2/catch.hpp>

#include "fakes.h"
#include "kpipe/json.h"

using namespace kpipe;

namespace {

constexpr Millis kStart = 1795947330123;  // 2026-11-29T10:15:30.123Z

// A terminal: wants the live progress line.
class ProgressReporter final : public Reporter {
 public:
  void warning(std::string_view) override {}
  void info(std::string_view) override {}
  void stats(std::string_view m) override { stats_lines.emplace_back(m); }
  void progress(std::string_view m) override { progress_lines.emplace_back(m); }
  bool wants_progress() const override { return true; }
  std::vector<std::string> stats_lines, progress_lines;
};

StatsSettings every(Millis interval) {
  StatsSettings s;
  s.interval = interval;
  return s;
}

Counters counters(uint64_t in, uint64_t out, uint64_t dropped, uint64_t late,
                  uint64_t dead_lettered, uint64_t skipped, uint64_t state_size) {
  Counters c;
  c.in = in;
  c.out = out;
  c.dropped = dropped;
  c.late = late;
  c.dead_lettered = dead_lettered;
  c.skipped = skipped;
  c.state_size = state_size;
  return c;
}

}  // namespace

TEST_CASE("StatsTicker: the --stats line", "[stats]") {
  FakeClock clock(kStart);
  RecordingReporter reporter;
  StatsTicker ticker("kdedup", every(1000), reporter, clock);
  Counters c = counters(3000, 2500, 400, 7, 90, 10, 1234);
  clock.advance(2000);
  CHECK(ticker.line(c, clock.steady()) ==
        R"({"program":"kdedup","at":"2026-11-29T10:15:32.123Z","in":3000,"out":2500,"rate":1500,)"
        R"("dropped":400,"late":7,"dead_lettered":90,"skipped":10,"state_size":1234})");
  CHECK(parse_json(ticker.line(c, clock.steady())).ok());
  // The rate is whole records per second since the start, rounded down.
  c.in = 3001;
  clock.advance(1000);
  CHECK(ticker.line(c, clock.steady()).find(R"("rate":1000,)") != std::string::npos);
}

TEST_CASE("StatsTicker: one line per interval", "[stats]") {
  FakeClock clock(kStart);
  RecordingReporter reporter;
  StatsTicker ticker("kwindow", every(1000), reporter, clock);
  Counters c;
  ticker.tick_now(c);
  CHECK(reporter.stats_lines.empty());
  clock.advance(999);
  ticker.tick_now(c);
  CHECK(reporter.stats_lines.empty());
  clock.advance(1);
  c.in = 10;
  ticker.tick_now(c);
  REQUIRE(reporter.stats_lines.size() == 1);
  CHECK(reporter.stats_lines[0].find(R"("in":10,)") != std::string::npos);
  clock.advance(500);
  ticker.tick_now(c);
  CHECK(reporter.stats_lines.size() == 1);
  clock.advance(3700);  // a long pause gives one line, not four
  ticker.tick_now(c);
  CHECK(reporter.stats_lines.size() == 2);
  clock.advance(999);
  ticker.tick_now(c);
  CHECK(reporter.stats_lines.size() == 2);
  ticker.finish(c);
  CHECK(reporter.stats_lines.size() == 3);
  CHECK(reporter.warnings.empty());
  CHECK(reporter.infos.empty());
}

TEST_CASE("StatsTicker: tick looks at the clock once every 1024 calls", "[stats]") {
  FakeClock clock(kStart);
  RecordingReporter reporter;
  StatsTicker ticker("k", every(1000), reporter, clock);
  Counters c;
  clock.advance(5000);
  for (int i = 0; i < 1023; ++i) ticker.tick(c);
  CHECK(reporter.stats_lines.empty());
  ticker.tick(c);
  CHECK(reporter.stats_lines.size() == 1);
}

TEST_CASE("StatsTicker: without --stats there is no line, even at the end", "[stats]") {
  FakeClock clock(kStart);
  RecordingReporter reporter;
  StatsTicker ticker("k", every(0), reporter, clock);
  clock.advance(100000);
  ticker.tick_now(Counters{});
  ticker.finish(Counters{});
  CHECK(reporter.stats_lines.empty());
}

TEST_CASE("StatsTicker: the progress line on a terminal", "[stats]") {
  FakeClock clock(kStart);
  ProgressReporter reporter;
  StatsTicker ticker("kdedup", every(0), reporter, clock);
  Counters c = counters(500, 400, 0, 0, 0, 0, 0);
  clock.advance(249);
  ticker.tick_now(c);
  CHECK(reporter.progress_lines.empty());
  clock.advance(1);
  ticker.tick_now(c);
  REQUIRE(reporter.progress_lines.size() == 1);
  CHECK(reporter.progress_lines[0] == "kdedup: 500 in, 400 out, 2000/s");
  c.dropped = 3;
  c.dead_lettered = 2;
  clock.advance(250);
  ticker.tick_now(c);
  CHECK(reporter.progress_lines.back() ==
        "kdedup: 500 in, 400 out, 1000/s, 3 dropped, 2 dead-lettered");
  ticker.finish(c);
  CHECK(reporter.progress_lines.back().empty());  // cleared at exit
  CHECK(reporter.stats_lines.empty());
}

TEST_CASE("prometheus_metrics: counters, checkpoints and the watermark", "[stats]") {
  Counters c = counters(3000, 2500, 400, 7, 90, 10, 1234);
  std::string text = prometheus_metrics("kdedup", "kdedup/eu", c, kStart);
  CHECK(text.find("# HELP kpipe_records_in_total Records read.\n"
                  "# TYPE kpipe_records_in_total counter\n"
                  "kpipe_records_in_total{program=\"kdedup\",stage=\"kdedup/eu\"} 3000\n") !=
        std::string::npos);
  CHECK(text.find("kpipe_records_out_total{program=\"kdedup\",stage=\"kdedup/eu\"} 2500\n") !=
        std::string::npos);
  CHECK(text.find("kpipe_records_dropped_total{program=\"kdedup\",stage=\"kdedup/eu\"} 400\n") !=
        std::string::npos);
  CHECK(text.find("kpipe_records_late_total{program=\"kdedup\",stage=\"kdedup/eu\"} 7\n") !=
        std::string::npos);
  // Bad lines: dead-lettered and skipped.
  CHECK(text.find("kpipe_bad_lines_total{program=\"kdedup\",stage=\"kdedup/eu\"} 100\n") !=
        std::string::npos);
  CHECK(text.find("kpipe_dead_letters_total{program=\"kdedup\",stage=\"kdedup/eu\"} 90\n") !=
        std::string::npos);
  CHECK(text.find("# TYPE kpipe_state_size gauge\n"
                  "kpipe_state_size{program=\"kdedup\",stage=\"kdedup/eu\"} 1234\n") !=
        std::string::npos);
  CHECK(text.find("kpipe_checkpoints_total{program=\"kdedup\",stage=\"kdedup/eu\"} 0\n") !=
        std::string::npos);
  // No checkpoint and no watermark yet: no series that would read as 0.
  CHECK(text.find("kpipe_checkpoint_duration_seconds") == std::string::npos);
  CHECK(text.find("kpipe_last_checkpoint_age_seconds") == std::string::npos);
  CHECK(text.find("kpipe_watermark") == std::string::npos);

  c.checkpoints = 4;
  c.checkpoint_took = 250;
  c.checkpoint_at = kStart - 1500;
  c.watermark = kStart - 61000;
  text = prometheus_metrics("kwindow", "kwindow", c, kStart);
  CHECK(text.find("kpipe_checkpoints_total{program=\"kwindow\",stage=\"kwindow\"} 4\n") !=
        std::string::npos);
  CHECK(text.find("kpipe_checkpoint_duration_seconds{program=\"kwindow\",stage=\"kwindow\"} "
                  "0.25\n") != std::string::npos);
  CHECK(text.find("kpipe_last_checkpoint_age_seconds{program=\"kwindow\",stage=\"kwindow\"} "
                  "1.5\n") != std::string::npos);
  CHECK(text.find("kpipe_last_checkpoint_timestamp_seconds{program=\"kwindow\",stage=\"kwindow\"} "
                  "1795947328.623\n") != std::string::npos);
  CHECK(text.find("kpipe_watermark_lag_seconds{program=\"kwindow\",stage=\"kwindow\"} 61\n") !=
        std::string::npos);
  CHECK(text.find("kpipe_watermark_timestamp_seconds{program=\"kwindow\",stage=\"kwindow\"} "
                  "1795947269.123\n") != std::string::npos);
}

TEST_CASE("prometheus_metrics: label values are escaped", "[stats]") {
  std::string text = prometheus_metrics("kdedup", "kdedup/a\"b\\c\nd", Counters{}, kStart);
  CHECK(text.find("{program=\"kdedup\",stage=\"kdedup/a\\\"b\\\\c\\nd\"}") != std::string::npos);
}

TEST_CASE("StatsTicker: --metrics at the first tick, every 5 s, and at exit", "[stats]") {
  FakeClock clock(kStart);
  RecordingReporter reporter;
  std::vector<std::string> files;
  StatsSettings settings;
  settings.stage = "kdedup";
  settings.metrics = "k.prom";
  settings.write_metrics = [&](std::string_view text) {
    files.emplace_back(text);
    return Status();
  };
  StatsTicker ticker("kdedup", settings, reporter, clock);
  CHECK(ticker.ticking());
  Counters c = counters(10, 9, 1, 0, 0, 0, 9);
  ticker.tick_now(c);
  REQUIRE(files.size() == 1);
  CHECK(files[0].find("kpipe_records_in_total{program=\"kdedup\",stage=\"kdedup\"} 10\n") !=
        std::string::npos);
  clock.advance(StatsTicker::kMetricsInterval - 1);
  ticker.tick_now(c);
  CHECK(files.size() == 1);
  clock.advance(1);
  c.in = 20;
  ticker.tick_now(c);
  REQUIRE(files.size() == 2);
  CHECK(files[1].find("kpipe_records_in_total{program=\"kdedup\",stage=\"kdedup\"} 20\n") !=
        std::string::npos);
  c.in = 25;
  ticker.finish(c);
  REQUIRE(files.size() == 3);
  CHECK(files[2].find("kpipe_records_in_total{program=\"kdedup\",stage=\"kdedup\"} 25\n") !=
        std::string::npos);
  CHECK(reporter.stats_lines.empty());  // --metrics alone writes no --stats line
}

TEST_CASE("StatsTicker: a metrics file that cannot be written is said once", "[stats]") {
  FakeClock clock(kStart);
  RecordingReporter reporter;
  int fail = 2;
  StatsSettings settings;
  settings.write_metrics = [&](std::string_view) {
    return fail-- > 0 ? Status(failure("cannot write 'k.prom.tmp': Permission denied")) : Status();
  };
  StatsTicker ticker("k", settings, reporter, clock);
  ticker.tick_now(Counters{});
  clock.advance(StatsTicker::kMetricsInterval);
  ticker.tick_now(Counters{});
  CHECK(reporter.warnings ==
        std::vector<std::string>{"cannot write 'k.prom.tmp': Permission denied"});
  clock.advance(StatsTicker::kMetricsInterval);
  ticker.tick_now(Counters{});  // written again: a later failure is said again
  fail = 1;
  clock.advance(StatsTicker::kMetricsInterval);
  ticker.tick_now(Counters{});
  CHECK(reporter.warnings.size() == 2);
}

TEST_CASE("StatsTicker: the progress line says what is left where it is known", "[stats]") {
  FakeClock clock(kStart);
  ProgressReporter reporter;
  StatsTicker ticker("kconsume", every(0), reporter, clock);
  Counters c = counters(5000, 5000, 0, 0, 0, 0, 0);
  c.left = 12000;
  clock.advance(2000);
  ticker.tick_now(c);
  REQUIRE(reporter.progress_lines.size() == 1);
  // 2500/s: 12000 left take about 5 s (rounded up).
  CHECK(reporter.progress_lines[0] == "kconsume: 5000 in, 5000 out, 2500/s, 12000 left (~5s)");
  c.in = c.out = 0;
  c.left = 7;
  clock.advance(250);
  ticker.tick_now(c);  // no rate yet: no time
  CHECK(reporter.progress_lines.back() == "kconsume: 0 in, 0 out, 0/s, 7 left");
}
