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

}  // namespace

TEST_CASE("StatsTicker: the --stats line", "[stats]") {
  FakeClock clock(kStart);
  RecordingReporter reporter;
  StatsTicker ticker("kdedup", 1000, reporter, clock);
  Counters c{3000, 2500, 400, 7, 90, 10, 1234};
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
  StatsTicker ticker("kwindow", 1000, reporter, clock);
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
  StatsTicker ticker("k", 1000, reporter, clock);
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
  StatsTicker ticker("k", 0, reporter, clock);
  clock.advance(100000);
  ticker.tick_now(Counters{});
  ticker.finish(Counters{});
  CHECK(reporter.stats_lines.empty());
}

TEST_CASE("StatsTicker: the progress line on a terminal", "[stats]") {
  FakeClock clock(kStart);
  ProgressReporter reporter;
  StatsTicker ticker("kdedup", 0, reporter, clock);
  Counters c{500, 400, 0, 0, 0, 0, 0};
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
