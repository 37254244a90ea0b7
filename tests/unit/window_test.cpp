#include "kpipe/window.h"
#include "fakes.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "window_fixtures.h"

// The rules of kwindow(1), one test each, and a property test against a small
// reference computation: windows kept as lists of their records, the
// aggregates recomputed from the records at every firing.

namespace kpipe {
namespace {

using namespace window_test;

// --- options -------------------------------------------------------------------

TEST_CASE("window: aggregate specs and their default names", "[window]") {
  auto name = [](std::string_view text) {
    auto s = parse_agg_spec(text);
    if (!s) FAIL(s.error().message);
    return s->name;
  };
  CHECK(name("count") == "count");
  CHECK(name("sum:.value.amount") == "sum_amount");
  CHECK(name("min:amount") == "min_amount");
  CHECK(name("max:/value/price") == "max_price");
  CHECK(name("avg:.\"dotted.name\"") == "avg_dotted.name");
  CHECK(name("distinct:.value.user_id") == "distinct_user_id");
  CHECK(name("total=sum:.value.amount") == "total");
  CHECK(name("n=count") == "n");
  // An '=' inside the path is not a name.
  CHECK(name("sum:.\"a=b\"") == "sum_a=b");

  auto spec = parse_agg_spec("sum:.value.amount");
  REQUIRE(spec.ok());
  CHECK(spec->fn == AggFn::kSum);
  CHECK(spec->path == ".value.amount");

  auto error = [](std::string_view text) {
    auto s = parse_agg_spec(text);
    INFO(text);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().status == ExitStatus::kUsage);
    return s.error().message;
  };
  CHECK(error("summ:.a") == "unknown aggregate function 'summ', did you mean 'sum'?");
  CHECK(error("median:.a") ==
        "unknown aggregate function 'median' (expected count, sum, min, max, avg or distinct)");
  CHECK(error("sum") == "--agg 'sum': sum needs a field path, e.g. sum:.value.amount");
  CHECK(error("sum:") == "--agg 'sum:': sum needs a field path, e.g. sum:.value.amount");
  CHECK(error("count:.a") == "--agg 'count:.a': count takes no field path");
  CHECK(error("=count") == "--agg '=count': the name before '=' is empty");
  CHECK(error("sum:.items[0]") ==
        "--agg 'sum:.items[0]': the path ends without a field name; name the output: "
        "NAME=sum:.items[0]");
  CHECK(error("sum:.a..b").starts_with("invalid field path '.a..b'"));
}

TEST_CASE("window: configurations that cannot work are refused", "[window]") {
  auto error = [](WindowConfig c) {
    Status s = validate_window_config(c);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().status == ExitStatus::kUsage);
    return s.error().message;
  };
  CHECK(error(tumble(0)) == "--tumble: the duration must be positive");
  CHECK(error(session(0)) == "--session: the duration must be positive");
  CHECK(error(slide(kMin, 5 * kMin)) ==
        "--every 5m is longer than --slide 1m: some records would be in no window");
  CHECK(error(slide(kDay, 1)) ==
        "--slide 1d --every 1ms puts each record in more than 10000 windows");
  CHECK(error(tumble(Millis{1} << 54)) == "--tumble: the duration is too long");
  CHECK(error(tumble(kMin, {"count", "count"})) ==
        "--agg: two aggregates are named 'count'; name one with NAME=SPEC");
  CHECK(error(tumble(kMin, {"key=count"})) ==
        "--agg: 'key' is a field of every output line; name the aggregate with NAME=SPEC");
  CHECK(error(tumble(kMin, {"emit=sum:.a"})) ==
        "--agg: 'emit' is a field of every output line; name the aggregate with NAME=SPEC");
  WindowConfig c = tumble(kMin);
  c.aggs.clear();
  CHECK(error(c) == "no aggregate: give --agg");
  CHECK(validate_window_config(slide(kMin, kMin)).ok());
  CHECK(validate_window_config(slide(10 * kMin, 3 * kMin)).ok());
}

// --- tumbling windows ----------------------------------------------------------------

TEST_CASE(
    "window: tumbling windows are half-open, aligned to the epoch, and fire once the watermark "
    "passes",
    "[window]") {
  Run run(tumble(10));
  CHECK(run.add(0) == Placement::kOnTime);
  CHECK(run.add(9) == Placement::kOnTime);
  CHECK(run.take().empty());
  CHECK(run.engine().watermark() == 9);
  // 10 belongs to [10, 20), and moves the watermark to 10: [0, 10) fires.
  CHECK(run.add(10) == Placement::kOnTime);
  CHECK(run.take() == Lines{line(0, 10, "\"a\"", "\"count\":2")});
  CHECK(run.add(25) == Placement::kOnTime);
  CHECK(run.take() == Lines{line(10, 20, "\"a\"", "\"count\":1")});
  run.flush();
  CHECK(run.take() == Lines{line(20, 30, "\"a\"", "\"count\":1")});
}

TEST_CASE("window: negative event times are floored into their window", "[window]") {
  WindowConfig c = tumble(10);
  c.watermark_delay = 20;
  Run run(c);
  run.add(-1);
  run.add(-10);
  run.add(-11);
  run.flush();
  CHECK(run.take() ==
        Lines{line(-20, -10, "\"a\"", "\"count\":1"), line(-10, 0, "\"a\"", "\"count\":2")});
}

TEST_CASE("window: the lines of one window come one per key, in the order the keys were first seen",
          "[window]") {
  Run run(tumble(10));
  run.add(1, "\"b\"");
  run.add(2, "\"a\"");
  run.add(3, "\"b\"");
  run.add(4, "[1,\"x\"]");
  run.add(30, "\"z\"");
  CHECK(run.take() == Lines{line(0, 10, "\"b\"", "\"count\":2"),
                            line(0, 10, "\"a\"", "\"count\":1"),
                            line(0, 10, "[1,\"x\"]", "\"count\":1")});
}

TEST_CASE("window: out-of-order records within the watermark delay land in their windows",
          "[window]") {
  WindowConfig c = tumble(10);
  c.watermark_delay = 5;
  Run run(c);
  run.add(12);  // W = 7
  run.add(3);   // [0, 10) is still open
  CHECK(run.take().empty());
  run.add(14);  // W = 9
  CHECK(run.take().empty());
  run.add(15);  // W = 10: [0, 10) fires
  CHECK(run.take() == Lines{line(0, 10, "\"a\"", "\"count\":1")});
  // The watermark is the largest time seen minus the delay, and never goes back.
  run.add(11);
  CHECK(run.engine().watermark() == 10);
}

TEST_CASE("window: windows fire in order of end when the watermark jumps", "[window]") {
  Run run(tumble(10));
  run.add(25, "\"x\"");
  run.add(5, "\"y\"");  // W is 25: [0, 10) is behind it and lateness is 0: too late
  CHECK(run.take().empty());
  WindowConfig c = tumble(10);
  c.watermark_delay = 100;
  Run jump(c);
  jump.add(35, "\"c\"");
  jump.add(15, "\"b\"");
  jump.add(5, "\"a\"");
  jump.add(200, "\"d\"");  // W = 100
  CHECK(jump.take() == Lines{line(0, 10, "\"a\"", "\"count\":1"),
                             line(10, 20, "\"b\"", "\"count\":1"),
                             line(30, 40, "\"c\"", "\"count\":1")});
}

TEST_CASE(
    "window: a late record within the allowed lateness fires its window again with the full "
    "aggregate",
    "[window]") {
  WindowConfig c = tumble(10, {"count", "sum:.v"});
  c.allowed_lateness = 20;
  Run run(c);
  run.add(1, "\"a\"", {integer(5)});
  run.add(2, "\"b\"", {integer(1)});
  run.add(12, "\"a\"", {integer(100)});  // W = 12: [0, 10) fires on time
  CHECK(run.take() == Lines{line(0, 10, "\"a\"", "\"count\":1,\"sum_v\":5"),
                            line(0, 10, "\"b\"", "\"count\":1,\"sum_v\":1")});
  CHECK(run.add(3, "\"a\"", {integer(7)}) == Placement::kLate);
  CHECK(run.take() == Lines{line(0, 10, "\"a\"", "\"count\":2,\"sum_v\":12", true)});
  CHECK(run.add(4, "\"a\"", {integer(1)}) == Placement::kLate);
  CHECK(run.take() == Lines{line(0, 10, "\"a\"", "\"count\":3,\"sum_v\":13", true)});
  // A key the window had not seen yet: a window of its own, fired late.
  CHECK(run.add(5, "\"c\"", {integer(2)}) == Placement::kLate);
  CHECK(run.take() == Lines{line(0, 10, "\"c\"", "\"count\":1,\"sum_v\":2", true)});
  // W = 29: [0, 10) + 20 > 29, still open for late records.
  run.add(29, "\"z\"", {integer(0)});
  CHECK(run.take() == Lines{line(10, 20, "\"a\"", "\"count\":1,\"sum_v\":100")});
  CHECK(run.add(9, "\"a\"", {integer(1)}) == Placement::kLate);
  CHECK(run.take() == Lines{line(0, 10, "\"a\"", "\"count\":4,\"sum_v\":14", true)});
  // W = 30 = end + lateness: the window is gone, the record too late.
  run.add(30, "\"z\"", {integer(0)});
  CHECK(run.take() == Lines{line(20, 30, "\"z\"", "\"count\":1,\"sum_v\":0")});
  CHECK(run.add(9, "\"a\"", {integer(1)}) == Placement::kTooLate);
  CHECK(run.take().empty());
  // At the end, only what has not fired fires.
  run.flush();
  CHECK(run.take() == Lines{line(30, 40, "\"z\"", "\"count\":1,\"sum_v\":0")});
}

TEST_CASE(
    "window: without allowed lateness a record behind the watermark is too late and changes "
    "nothing",
    "[window]") {
  Run run(tumble(10));
  run.add(5);
  run.add(10);
  CHECK(run.take().size() == 1);
  CHECK(run.add(9) == Placement::kTooLate);
  CHECK(run.add(-100) == Placement::kTooLate);
  CHECK(run.engine().states() == 1);
  run.flush();
  CHECK(run.take() == Lines{line(10, 20, "\"a\"", "\"count\":1")});
}

TEST_CASE("window: state is freed when the watermark passes end plus lateness", "[window]") {
  WindowConfig c = tumble(10);
  c.allowed_lateness = 15;
  Run run(c);
  for (int k = 0; k < 50; ++k) run.add(k % 10, "\"k" + std::to_string(k) + "\"");
  CHECK(run.engine().states() == 50);
  run.add(10, "\"x\"");  // fires [0, 10), keeps it for late records
  CHECK(run.engine().states() == 51);
  run.add(24, "\"x\"");  // [20, 30) opens; [0, 10) is kept until 25
  CHECK(run.engine().states() == 52);
  run.add(25, "\"x\"");  // W = 25 = 10 + 15: freed
  CHECK(run.engine().states() == 2);
  // A long stream over few keys holds a bounded number of states.
  uint64_t most = 0;
  for (int i = 0; i < 100000; ++i) {
    run.add(25 + i, "\"k" + std::to_string(i % 7) + "\"");
    most = std::max(most, run.engine().states());
  }
  CHECK(most <= 7 * 4);
}

// --- sliding windows ------------------------------------------------------------

TEST_CASE("window: a sliding record belongs to every window with start <= t < start + size",
          "[window]") {
  Run run(slide(10, 5));
  run.add(12);  // [5, 15) and [10, 20)
  run.add(14);
  run.add(15);  // [10, 20) and [15, 25); W = 15: [5, 15) fires
  CHECK(run.take() == Lines{line(5, 15, "\"a\"", "\"count\":2")});
  run.flush();
  CHECK(run.take() ==
        Lines{line(10, 20, "\"a\"", "\"count\":3"), line(15, 25, "\"a\"", "\"count\":1")});

  // A size that is not a multiple of the step.
  Run odd(slide(7, 5));
  odd.add(12);  // [10, 17) only: [5, 12) ends at 12
  odd.add(-3);  // W = 12: [-5, 2) is too late
  odd.flush();
  CHECK(odd.take() == Lines{line(10, 17, "\"a\"", "\"count\":1")});

  Run neg(slide(10, 5));
  neg.add(-1);  // [-10, 0) and [-5, 5)
  neg.flush();
  CHECK(neg.take() ==
        Lines{line(-10, 0, "\"a\"", "\"count\":1"), line(-5, 5, "\"a\"", "\"count\":1")});
}

TEST_CASE(
    "window: a late sliding record fires each of its windows behind the watermark, in order of end",
    "[window]") {
  WindowConfig c = slide(10, 5);
  c.allowed_lateness = 7;
  Run run(c);
  run.add(12);
  run.add(21);  // W = 21: [5, 15) and [10, 20) fire
  CHECK(run.take() ==
        Lines{line(5, 15, "\"a\"", "\"count\":1"), line(10, 20, "\"a\"", "\"count\":1")});
  // 14 is in [5, 15) (late, 15 + 7 > 21) and [10, 20) (late).
  CHECK(run.add(14) == Placement::kLate);
  CHECK(run.take() == Lines{line(5, 15, "\"a\"", "\"count\":2", true),
                            line(10, 20, "\"a\"", "\"count\":2", true)});
  // 11 once [5, 15) is gone: late for [10, 20) only.
  run.add(22);  // W = 22 = 15 + 7: [5, 15) freed
  CHECK(run.add(11) == Placement::kLate);
  CHECK(run.take() == Lines{line(10, 20, "\"a\"", "\"count\":3", true)});
  // 19 is in [10, 20) (late) and [15, 25) (open): on time, and one late line.
  CHECK(run.add(19) == Placement::kOnTime);
  CHECK(run.take() == Lines{line(10, 20, "\"a\"", "\"count\":4", true)});
}

// --- session windows -------------------------------------------------------------

TEST_CASE("window: a session ends one gap after its last record, per key", "[window]") {
  Run run(session(10));
  run.add(0, "\"a\"");
  run.add(5, "\"b\"");
  run.add(9, "\"a\"");   // [0, 19)
  run.add(19, "\"a\"");  // touches [0, 19): [0, 29)
  run.add(16, "\"b\"");  // W = 19: [5, 15) of b fires; 16 opens [16, 26)
  CHECK(
      run.take() ==
      Lines{
          "{\"window_start\":5,\"window_end\":15,\"key\":\"b\",\"count\":1,\"emit\":\"on_time\"}"});
  run.add(40, "\"c\"");  // W = 40: sessions fire in order of end
  CHECK(run.take() ==
        Lines{line(16, 26, "\"b\"", "\"count\":1"), line(0, 29, "\"a\"", "\"count\":3")});
  run.flush();
  CHECK(run.take() == Lines{line(40, 50, "\"c\"", "\"count\":1")});
}

TEST_CASE("window: a late record bridging two fired sessions merges them and fires the whole",
          "[window]") {
  WindowConfig c = session(10, {"count", "sum:.v", "min:.v", "distinct:.v"});
  c.allowed_lateness = 100;
  Run run(c);
  run.add(0, "\"a\"", {integer(1), integer(1), integer(1)});   // [0, 10)
  run.add(25, "\"a\"", {integer(2), integer(2), integer(2)});  // [25, 35)
  run.add(50, "\"z\"", {integer(0), integer(0), integer(0)});  // W = 50
  CHECK(run.take() ==
        Lines{line(0, 10, "\"a\"", "\"count\":1,\"sum_v\":1,\"min_v\":1,\"distinct_v\":1"),
              line(25, 35, "\"a\"", "\"count\":1,\"sum_v\":2,\"min_v\":2,\"distinct_v\":1")});
  // 12 touches neither ([12, 22) against [0, 10) and [25, 35)): a late session of its own.
  CHECK(run.add(12, "\"a\"", {integer(5), integer(5), integer(5)}) == Placement::kLate);
  CHECK(run.take() ==
        Lines{line(12, 22, "\"a\"", "\"count\":1,\"sum_v\":5,\"min_v\":5,\"distinct_v\":1", true)});
  // [15, 25) overlaps [12, 22) and touches [25, 35): all three merge.
  CHECK(run.add(15, "\"a\"", {integer(1), integer(1), integer(1)}) == Placement::kLate);
  CHECK(run.take() ==
        Lines{line(12, 35, "\"a\"", "\"count\":3,\"sum_v\":8,\"min_v\":1,\"distinct_v\":3", true)});
  // [10, 20) touches [0, 10) and overlaps [12, 35): two fired sessions bridged.
  CHECK(run.add(10, "\"a\"", {integer(3), integer(3), integer(3)}) == Placement::kLate);
  CHECK(run.take() ==
        Lines{line(0, 35, "\"a\"", "\"count\":5,\"sum_v\":12,\"min_v\":1,\"distinct_v\":4", true)});
  CHECK(run.engine().states() == 2);
}

TEST_CASE(
    "window: a late record can merge a fired session into an open one, which then fires on time",
    "[window]") {
  WindowConfig c = session(10);
  c.allowed_lateness = 100;
  c.watermark_delay = 5;
  Run run(c);
  run.add(0, "\"a\"");   // [0, 10)
  run.add(20, "\"a\"");  // [20, 30), W = 15: [0, 10) fires
  CHECK(run.take() == Lines{line(0, 10, "\"a\"", "\"count\":1")});
  CHECK(run.add(10, "\"a\"") == Placement::kOnTime);  // [0, 30) ends after W
  CHECK(run.take().empty());
  run.add(40, "\"b\"");  // W = 35
  CHECK(run.take() == Lines{line(0, 30, "\"a\"", "\"count\":3")});
}

TEST_CASE("window: a session record is too late only when it would open a session already freed",
          "[window]") {
  WindowConfig c = session(10);
  c.allowed_lateness = 5;
  Run run(c);
  run.add(0, "\"a\"");
  run.add(30, "\"b\"");  // W = 30: [0, 10) fired and freed (10 + 5 <= 30)
  CHECK(run.take() == Lines{line(0, 10, "\"a\"", "\"count\":1")});
  CHECK(run.add(14, "\"a\"") == Placement::kTooLate);  // [14, 24): 24 + 5 <= 30
  CHECK(run.add(16, "\"a\"") == Placement::kLate);     // [16, 26): 26 + 5 > 30
  CHECK(run.take() == Lines{line(16, 26, "\"a\"", "\"count\":1", true)});
  // Joining the open session of b is never too late, whatever its time.
  CHECK(run.add(21, "\"b\"") == Placement::kOnTime);
  run.flush();
  CHECK(run.take() == Lines{line(21, 40, "\"b\"", "\"count\":2")});
}

// --- partitions and idleness ---------------------------------------------------------

Record from(int64_t partition, Millis t, std::string topic = "events") {
  Record r;
  r.t = t;
  r.key = "\"a\"";
  r.partition = partition;
  r.topic = std::move(topic);
  return r;
}

TEST_CASE("window: the watermark is the minimum over the partitions seen", "[window]") {
  Run run(tumble(10));
  run.add(from(0, 50));
  CHECK(run.engine().watermark() == 50);
  run.add(from(1, 20));  // W never moves back
  CHECK(run.engine().watermark() == 50);
  run.add(from(1, 60));
  CHECK(run.engine().watermark() == 50);
  run.add(from(0, 70));
  CHECK(run.engine().watermark() == 60);
  // The same partition number in another topic is another partition.
  run.add(from(0, 65, "other"));
  run.add(from(1, 90));
  CHECK(run.engine().watermark() == 65);
}

TEST_CASE("window: an idle partition stops holding the watermark back until it speaks again",
          "[window]") {
  WindowConfig c = tumble(10);
  c.idle_timeout = 1000;
  Run run(c);
  run.add(from(0, 5));
  run.add(from(1, 5));
  run.add(from(0, 100));
  CHECK(run.engine().watermark() == 5);
  run.clock().advance(999);
  run.idle();
  CHECK(run.engine().watermark() == 5);
  CHECK(run.take().empty());
  // Partition 1 has sent nothing for 1s; partition 0 spoke 1s ago too, so
  // both are idle: nothing holds the watermark below the largest time.
  run.clock().advance(1);
  run.idle();
  CHECK(run.engine().watermark() == 100);
  CHECK(run.take() == Lines{line(0, 10, "\"a\"", "\"count\":2")});
  // Partition 0 keeps speaking; partition 1 stays idle and is ignored.
  run.add(from(0, 200));
  CHECK(run.engine().watermark() == 200);
  CHECK(run.take() == Lines{line(100, 110, "\"a\"", "\"count\":1")});
  // Partition 1 comes back behind: the watermark holds (never moves back)
  // and follows partition 1 until it catches up.
  run.add(from(1, 150));
  CHECK(run.engine().watermark() == 200);
  run.add(from(0, 300));
  CHECK(run.engine().watermark() == 200);
  run.add(from(1, 250));
  CHECK(run.engine().watermark() == 250);
  CHECK(run.take() == Lines{line(200, 210, "\"a\"", "\"count\":1")});
}

TEST_CASE(
    "window: an announced partition holds the watermark until it sends, a revoked one no longer",
    "[window]") {
  // kconsume reads a backlog a partition at a time: without its partition
  // events, the first partition's records would run the watermark ahead
  // and make the others' records too late.
  Run run(tumble(10));
  std::string out;
  run.engine().partition_assigned("events", 0, out);
  run.engine().partition_assigned("events", 1, out);
  run.engine().partition_assigned("events", 2, out);
  run.add(from(0, 5));
  run.add(from(0, 95));
  CHECK(run.engine().watermark() == kNoWatermark);
  run.add(from(1, 7));
  CHECK(run.engine().watermark() == kNoWatermark);  // partition 2 still waits
  CHECK(run.add(from(1, 8)) == Placement::kOnTime);
  // Partition 2 goes to another consumer: the others' minimum holds.
  run.engine().partition_revoked("events", 2, out);
  CHECK(run.engine().watermark() == 8);
  CHECK(split_lines(out) == Lines{});
  run.add(from(1, 96));
  CHECK(run.engine().watermark() == 95);
  CHECK(run.take() == Lines{line(0, 10, "\"a\"", "\"count\":3")});
  // Partition 1 caught up keeps holding the watermark at its last record.
  run.add(from(0, 200));
  CHECK(run.engine().watermark() == 96);
}

TEST_CASE(
    "window: an announcement after a restore holds the watermark for the partitions not yet seen",
    "[window]") {
  // The restored state knows partition 0 only; kconsume then announces 0
  // to 3. The first partition of the announcement must not move the
  // watermark on its own.
  WindowConfig c = tumble(10);
  c.track_changes = true;
  Run before(c);
  std::string out;
  before.engine().partition_assigned("events", 0, out);
  before.engine().partition_assigned("events", 1, out);
  before.add(from(0, 95));
  StateChanges changes;
  before.engine().take_changes(changes);
  FakeClock clock;
  WindowEngine after(c, clock);
  for (const auto& [k, v] : changes.put) REQUIRE(after.restore_entry(k, v).ok());
  REQUIRE(after.finish_restore().ok());
  CHECK(after.watermark() == kNoWatermark);
  for (int p = 0; p < 4; ++p) after.partition_assigned("events", p, out);
  CHECK(after.watermark() == kNoWatermark);
  CHECK(out.empty());
  // The restored window fires once every partition has passed it (it was
  // once freed unfired: the restore computed its timers from no watermark).
  auto add = [&](int64_t partition, Millis t) {
    WindowInput in;
    in.time = t;
    in.key = "\"a\"";
    in.topic = "events";
    in.partition = partition;
    REQUIRE(after.add(in, out).ok());
  };
  add(1, 200);
  add(2, 200);
  add(3, 200);
  CHECK(after.watermark() == 95);
  CHECK(out.empty());
  add(0, 300);
  CHECK(after.watermark() == 200);
  CHECK(split_lines(out) == Lines{line(90, 100, "\"a\"", "\"count\":1")});
}

TEST_CASE("window: records that name no partition are one stream of their own", "[window]") {
  WindowConfig c = tumble(10);
  Run run(c);
  run.add(30);  // no partition
  CHECK(run.engine().watermark() == 30);
  run.add(from(0, 100));
  CHECK(run.engine().watermark() == 30);
  run.add(40);
  CHECK(run.engine().watermark() == 40);
}

TEST_CASE("window: a record whose window would leave RFC 3339's range is bad input", "[window]") {
  auto refused = [](WindowConfig c, Millis t) {
    c.time_path = ".ts";
    Run run(c);
    auto placed = run.try_add(Record{t, "\"a\"", -1, "", {}});
    REQUIRE_FALSE(placed.ok());
    CHECK(placed.error().status == ExitStatus::kDataError);
    CHECK(run.engine().states() == 0);
    return placed.error().message;
  };
  constexpr Millis kHour = 60 * kMin;
  // The last hour of 9999 ends at 10000-01-01, which no program reads back.
  CHECK(refused(tumble(kHour), kMaxTime - 30 * kMin) ==
        "field '.ts': time 9999-12-31T23:29:59.999Z falls in a window that ends after "
        "9999-12-31T23:59:59.999Z, RFC 3339's last time");
  CHECK(refused(session(kHour), kMaxTime - 30 * kMin).ends_with("RFC 3339's last time"));
  // A sliding window of year 0's first hour starts the hour before.
  CHECK(refused(slide(2 * kHour, kHour), kMinTime + 30 * kMin) ==
        "field '.ts': time 0000-01-01T00:30:00.000Z falls in a window that starts before "
        "0000-01-01T00:00:00Z, RFC 3339's first time");
  CHECK(refused(tumble(kHour), kMaxTime + 1) ==
        "field '.ts': time 253402300800000 ms is outside RFC 3339's range, "
        "0000-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z");

  // Windows up to the edges are windows like any other.
  WindowConfig c = tumble(kHour);
  c.time_format = TimeFormat::kRfc3339;
  Run run(c);
  run.add(kMinTime);
  run.add(kMaxTime - kHour);
  CHECK(run.take() == Lines{"{\"window_start\":\"0000-01-01T00:00:00.000Z\",\"window_end\":"
                            "\"0000-01-01T01:00:00.000Z\",\"key\":\"a\",\"count\":1,"
                            "\"emit\":\"on_time\"}"});
  Run sessions(session(kHour));
  sessions.add(kMaxTime - kHour);
  sessions.flush();
  CHECK(sessions.take() == Lines{line(kMaxTime - kHour, kMaxTime, "\"a\"", "\"count\":1")});
}

// --- output -----------------------------------------------------------------------

TEST_CASE("window: output lines as the issue pins them", "[window]") {
  WindowConfig c = tumble(5 * kMin, {"count", "sum:.value.amount"});
  c.time_format = TimeFormat::kRfc3339;
  Run run(c);
  Millis t0 = 1795946400000;  // 2026-11-29T10:00:00Z
  run.add(t0 + 1000, "\"u1\"", {integer(40)});
  run.add(t0 + 2000, "\"u1\"", {integer(1)});
  run.add(t0 + 3000, "\"u1\"", {integer(0)});
  run.flush();
  CHECK(run.take() == Lines{"{\"window_start\":\"2026-11-29T10:00:00.000Z\",\"window_end\":\"2026-"
                            "11-29T10:05:00.000Z\","
                            "\"key\":\"u1\",\"count\":3,\"sum_amount\":41,\"emit\":\"on_time\"}"});

  // Without --key there is no "key"; names given with NAME=SPEC.
  WindowConfig nokey = tumble(10, {"n=count", "total=sum:.v"});
  nokey.keys.clear();
  Run run2(nokey);
  run2.add(-5, "", {integer(2)});
  run2.flush();
  CHECK(run2.take() ==
        Lines{"{\"window_start\":-10,\"window_end\":0,\"n\":1,\"total\":2,\"emit\":\"on_time\"}"});
}

// --- the reference, and random streams ---------------------------------------------

// Everything the engine does, computed the slow and obvious way.
class Reference {
 public:
  explicit Reference(const WindowConfig& c) : c_(c) {}

  std::optional<Placement> add(const Record& r) {
    const Millis size = c_.shape.size;
    const Millis every = c_.shape.kind == WindowKind::kSlide ? c_.shape.every : size;
    Placement placed = Placement::kTooLate;
    if (c_.shape.kind == WindowKind::kSession) {
      std::vector<size_t> touching;
      for (size_t i = 0; i < windows_.size(); ++i) {
        const Window& w = windows_[i];
        if (w.key == r.key && w.start <= r.t + size && r.t <= w.end) touching.push_back(i);
      }
      if (touching.empty() && r.t + size + c_.allowed_lateness <= watermark_) {
        placed = Placement::kTooLate;
      } else {
        Window merged{
            r.t, r.t + size, r.key, touching.empty() ? seq_++ : UINT64_MAX, {records_.size()}};
        for (size_t i : touching) {
          merged.start = std::min(merged.start, windows_[i].start);
          merged.end = std::max(merged.end, windows_[i].end);
          merged.seq = std::min(merged.seq, windows_[i].seq);
          merged.records.insert(merged.records.end(), windows_[i].records.begin(),
                                windows_[i].records.end());
        }
        for (size_t n = touching.size(); n-- > 0;)
          windows_.erase(windows_.begin() + static_cast<long>(touching[n]));
        merged.fired = merged.end <= watermark_;
        windows_.push_back(merged);
        records_.push_back(r);
        placed = merged.fired ? Placement::kLate : Placement::kOnTime;
        if (merged.fired) render(windows_.back(), true);
      }
    } else {
      records_.push_back(r);
      // Every multiple of `every` from well below t up to t.
      std::vector<Millis> starts;
      for (Millis s = (r.t / every - size / every - 2) * every; s <= r.t; s += every)
        if (s <= r.t && r.t < s + size) starts.push_back(s);
      for (Millis s : starts) {
        if (s + size + c_.allowed_lateness <= watermark_) continue;
        Window* w = nullptr;
        for (Window& x : windows_)
          if (x.start == s && x.key == r.key) w = &x;
        if (w == nullptr) {
          windows_.push_back(Window{s, s + size, r.key, seq_++, {}});
          w = &windows_.back();
          w->fired = w->end <= watermark_;
        }
        w->records.push_back(records_.size() - 1);
        if (w->fired) {
          render(*w, true);
          if (placed == Placement::kTooLate) placed = Placement::kLate;
        } else {
          placed = Placement::kOnTime;
        }
      }
    }
    std::string part = r.topic + "/" + std::to_string(r.partition);
    max_[part] = max_.count(part) ? std::max(max_[part], r.t) : r.t;
    Millis low = INT64_MAX;
    for (const auto& [p, m] : max_) low = std::min(low, m);
    if (low - c_.watermark_delay > watermark_) {
      watermark_ = low - c_.watermark_delay;
      fire(false);
      std::vector<Window> kept;
      for (Window& w : windows_)
        if (w.end + c_.allowed_lateness > watermark_) kept.push_back(w);
      windows_ = kept;
    }
    return placed;
  }

  void flush() { fire(true); }

  std::vector<std::string> lines;

 private:
  struct Window {
    Millis start, end;
    std::string key;
    uint64_t seq;
    std::vector<size_t> records;
    bool fired = false;
  };

  void fire(bool all) {
    std::vector<Window*> due;
    for (Window& w : windows_)
      if (!w.fired && (all || w.end <= watermark_)) due.push_back(&w);
    std::sort(due.begin(), due.end(), [](const Window* a, const Window* b) {
      return a->end != b->end ? a->end < b->end : a->seq < b->seq;
    });
    for (Window* w : due) {
      w->fired = true;
      render(*w, false);
    }
  }

  // Numbers before strings; numbers by value, then by text; strings by bytes.
  static bool less(const Value& a, const Value& b) {
    bool sa = a.field.type == JsonType::kString, sb = b.field.type == JsonType::kString;
    if (sa != sb) return !sa;
    if (sa) return a.str < b.str;
    if (a.field.number != b.field.number) return a.field.number < b.field.number;
    return a.raw < b.raw;
  }

  void render(const Window& w, bool late) {
    std::string s = "{\"window_start\":" + std::to_string(w.start) +
                    ",\"window_end\":" + std::to_string(w.end) + ",\"key\":" + w.key;
    size_t input = 0;
    for (const AggSpec& a : c_.aggs) {
      s += ",\"" + a.name + "\":";
      if (a.fn == AggFn::kCount) {
        s += std::to_string(w.records.size());
        continue;
      }
      std::vector<Value> values;
      for (size_t i : w.records) values.push_back(records_[i].aggs[input]);
      ++input;
      bool all_int = true;
      double dsum = 0;
      int64_t isum = 0;
      for (const Value& v : values) {
        all_int = all_int && v.field.is_integer;
        dsum += v.field.number;
        isum += v.field.is_integer ? v.field.integer : 0;
      }
      auto fmt_double = [](double d) { return fmt::format("{}", d); };
      switch (a.fn) {
        case AggFn::kSum:
          s += all_int ? std::to_string(isum) : fmt_double(dsum);
          break;
        case AggFn::kAvg:
          s += fmt_double((all_int ? static_cast<double>(isum) : dsum) / values.size());
          break;
        case AggFn::kMin:
        case AggFn::kMax: {
          const Value& best = a.fn == AggFn::kMin
                                  ? *std::min_element(values.begin(), values.end(), less)
                                  : *std::max_element(values.begin(), values.end(), less);
          s += best.raw;
          break;
        }
        case AggFn::kDistinct: {
          std::set<std::string> seen;
          for (const Value& v : values)
            seen.insert(v.field.type == JsonType::kString ? "s" + v.str
                                                          : "n" + fmt_double(v.field.number));
          s += std::to_string(seen.size());
          break;
        }
        case AggFn::kCount:
          break;
      }
    }
    s += late ? ",\"emit\":\"late\"}" : ",\"emit\":\"on_time\"}";
    lines.push_back(s);
  }

  WindowConfig c_;
  std::vector<Record> records_;
  std::vector<Window> windows_;
  std::map<std::string, Millis> max_;
  Millis watermark_ = kNoWatermark;
  uint64_t seq_ = 0;
};

// Values whose sums are exact in doubles, so that the order of additions
// (which differs when sessions merge) cannot change a result.
Value random_number(std::mt19937& rng) {
  int n = static_cast<int>(rng() % 81) - 40;
  if (rng() % 3 != 0) return integer(n);
  double d = n / 4.0;
  return number(d, fmt::format("{}", d) + (d == static_cast<int>(d) ? ".0" : ""));
}

Value random_value(std::mt19937& rng) {
  if (rng() % 2 == 0) return random_number(rng);
  static const char* const kWords[] = {"ant", "bee", "cat", "dog", "eel"};
  return string(kWords[rng() % 5]);
}

std::vector<Record> random_stream(std::mt19937& rng, size_t n, int keys, int partitions,
                                  Millis spread) {
  std::vector<Record> stream;
  Millis clock = static_cast<Millis>(rng() % 1000) - 500;
  for (size_t i = 0; i < n; ++i) {
    clock += static_cast<Millis>(rng() % 4);
    Record r;
    r.t = clock - static_cast<Millis>(rng() % static_cast<uint32_t>(spread));
    r.key = "\"k" + std::to_string(rng() % static_cast<uint32_t>(keys)) + "\"";
    if (partitions > 0) {
      r.partition = static_cast<int64_t>(rng() % static_cast<uint32_t>(partitions));
      r.topic = "t";
    }
    r.aggs = {random_number(rng), random_number(rng), random_value(rng), random_value(rng),
              random_value(rng)};
    stream.push_back(std::move(r));
  }
  return stream;
}

WindowConfig random_config(std::mt19937& rng) {
  std::vector<std::string> aggs = {"count", "sum:.n", "avg:.n", "min:.v", "max:.v", "distinct:.v"};
  WindowConfig c;
  switch (rng() % 3) {
    case 0:
      c = tumble(1 + rng() % 40, aggs);
      break;
    case 1: {
      Millis every = 1 + rng() % 15;
      c = slide(every * (1 + rng() % 4) + rng() % every, every, aggs);
      break;
    }
    default:
      c = session(1 + rng() % 20, aggs);
      break;
  }
  c.watermark_delay = rng() % 2 == 0 ? 0 : rng() % 30;
  c.allowed_lateness = rng() % 2 == 0 ? 0 : rng() % 40;
  return c;
}

std::string describe(const WindowConfig& c) {
  return fmt::format("kind {} size {} every {} delay {} lateness {}", int(c.shape.kind),
                     c.shape.size, c.shape.every, c.watermark_delay, c.allowed_lateness);
}

TEST_CASE("window: the engine agrees with the reference on random streams", "[window][property]") {
  // The streams must exercise every rule, or agreeing proves little.
  std::map<Placement, int> placements;
  int late_lines = 0, sessions_merged = 0;
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    std::mt19937 rng(seed);
    WindowConfig c = random_config(rng);
    auto stream = random_stream(rng, 150 + rng() % 150, 1 + static_cast<int>(rng() % 6),
                                static_cast<int>(rng() % 3), 1 + static_cast<Millis>(rng() % 60));
    INFO("seed " << seed << ": " << describe(c));
    Run run(c);
    Reference ref(c);
    std::vector<std::string> got;
    for (size_t i = 0; i < stream.size(); ++i) {
      // What placement() foretells is what add() does.
      auto foretold = run.placement(stream[i]);
      Placement placed = run.add(stream[i]);
      if (foretold) REQUIRE(*foretold == placed);
      CHECK(foretold.has_value() == (c.shape.kind != WindowKind::kSession));
      auto want = ref.add(stream[i]);
      INFO("record " << i << " at " << stream[i].t);
      REQUIRE(placed == *want);
      ++placements[placed];
    }
    run.flush();
    ref.flush();
    got = run.take();
    REQUIRE(got == ref.lines);
    for (const std::string& l : got) {
      late_lines += l.ends_with("\"late\"}");
      if (c.shape.kind == WindowKind::kSession)
        sessions_merged += l.find("\"count\":1,") == std::string::npos;
    }
  }
  CHECK(placements[Placement::kOnTime] > 10000);
  CHECK(placements[Placement::kLate] > 1000);
  CHECK(placements[Placement::kTooLate] > 1000);
  CHECK(late_lines > 1000);
  CHECK(sessions_merged > 1000);
}

// Feeds `stream` to a fresh engine, snapshotting after every record in
// `cuts` and going on in a new engine restored from the store.
std::vector<std::string> run_with_restores(const WindowConfig& base,
                                           const std::vector<Record>& stream,
                                           const std::set<size_t>& cuts,
                                           std::vector<Placement>& placements) {
  WindowConfig c = base;
  c.track_changes = true;
  auto run = std::make_unique<Run>(c);
  std::map<std::string, std::string> store;
  std::vector<std::string> lines;
  for (size_t i = 0; i < stream.size(); ++i) {
    placements.push_back(run->add(stream[i]));
    for (auto& l : run->take()) lines.push_back(l);
    if (cuts.count(i) == 0) continue;
    StateChanges changes;
    run->engine().take_changes(changes);
    store = apply_changes(store, changes);
    run = std::make_unique<Run>(c);
    for (const auto& [k, v] : store) REQUIRE(run->engine().restore_entry(k, v).ok());
    Status s = run->engine().finish_restore();
    if (!s.ok()) FAIL(s.error().message);
    REQUIRE(run->take().empty());
  }
  run->flush();
  for (auto& l : run->take()) lines.push_back(l);
  return lines;
}

TEST_CASE("window: snapshots at any point restore into an engine that goes on exactly as before",
          "[window][property]") {
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    std::mt19937 rng(seed * 7919);
    WindowConfig c = random_config(rng);
    auto stream = random_stream(rng, 120 + rng() % 120, 1 + static_cast<int>(rng() % 5),
                                static_cast<int>(rng() % 3), 1 + static_cast<Millis>(rng() % 50));
    INFO("seed " << seed << ": " << describe(c));
    std::vector<Placement> straight, restored;
    auto want = run_with_restores(c, stream, {}, straight);
    std::set<size_t> cuts;
    size_t every = 1 + rng() % 25;
    for (size_t i = rng() % every; i < stream.size(); i += 1 + rng() % every) cuts.insert(i);
    auto got = run_with_restores(c, stream, cuts, restored);
    CHECK(restored == straight);
    REQUIRE(got == want);
  }
}

TEST_CASE(
    "window: snapshots are incremental: the store after many calls equals one snapshot of the "
    "whole",
    "[window]") {
  std::mt19937 rng(42);
  for (WindowKind kind : {WindowKind::kTumble, WindowKind::kSlide, WindowKind::kSession}) {
    WindowConfig c = kind == WindowKind::kTumble  ? tumble(20, {"count", "sum:.n"})
                     : kind == WindowKind::kSlide ? slide(20, 5, {"count", "sum:.n"})
                                                  : session(8, {"count", "sum:.n"});
    c.allowed_lateness = 10;
    c.watermark_delay = 5;
    c.track_changes = true;
    auto stream = random_stream(rng, 500, 4, 2, 30);
    for (Record& r : stream) r.aggs.resize(1);
    Run incremental(c);
    std::map<std::string, std::string> store;
    for (size_t i = 0; i < stream.size(); ++i) {
      incremental.add(stream[i]);
      if (i % 13 != 0) continue;
      StateChanges changes;
      incremental.engine().take_changes(changes);
      store = apply_changes(store, changes);
      // The same state, from scratch: restore the store and snapshot it all.
      Run fresh(c);
      for (const auto& [k, v] : store) REQUIRE(fresh.engine().restore_entry(k, v).ok());
      REQUIRE(fresh.engine().finish_restore().ok());
      CHECK(fresh.engine().states() == incremental.engine().states());
      CHECK(fresh.engine().watermark() == incremental.engine().watermark());
    }
  }
}

}  // namespace
}  // namespace kpipe
