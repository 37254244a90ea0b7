#include "kpipe/programs/kwindow.h"

#include <catch2/catch.hpp>

#include <string>

#include "fakes.h"
#include "helpers.h"
#include "kpipe/store/sqlite.h"
#include "kpipe/store/state_store.h"
#include "program_run.h"

// kwindow as a whole, short of the command line: times and keys read from
// lines, bad input, late records, control lines, the options' usage errors.

namespace kpipe {
namespace {

using test::read_file;
using test::TempDir;
using Result = test::ProgramRun;

// Runs kwindow over `input` (one file) and collects what it wrote.
void run_tool(WindowOptions o, const std::string& input, Result& r, const TempDir& dir) {
  test::run_program("kwindow", input, dir, o.input, r, [&](Io& io) { return run_window(o, io); });
}

WindowOptions options() {
  WindowOptions o;
  o.time = ".ts";
  o.keys = {".k"};
  o.tumble = "10s";
  o.time_format = "ms";
  return o;
}

std::string usage_error_of(WindowOptions o) {
  TempDir dir;
  Result r;
  run_tool(std::move(o), "", r, dir);
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.error().status == ExitStatus::kUsage);
  CHECK(r.out.empty());
  return r.status.error().message;
}

TEST_CASE("window tool: option errors", "[window]") {
  WindowOptions o = options();
  o.tumble.clear();
  CHECK(usage_error_of(o) ==
        "give one of --tumble SIZE, --slide SIZE --every STEP or --session GAP");
  o = options();
  o.session = "1m";
  CHECK(usage_error_of(o) == "--tumble, --slide and --session are alternatives: give one");
  o = options();
  o.tumble.clear();
  o.slide = "1m";
  CHECK(usage_error_of(o) == "--slide needs --every STEP");
  o = options();
  o.every = "1m";
  CHECK(usage_error_of(o) == "--every goes with --slide");
  o = options();
  o.tumble = "5";
  CHECK(usage_error_of(o) == "--tumble: duration '5' has no unit (write 5s or 5ms)");
  o = options();
  o.watermark = "-1s";
  CHECK(usage_error_of(o) == "--watermark: duration '-1s' is negative");
  o = options();
  o.idle_timeout = "0s";
  CHECK(usage_error_of(o) == "--idle-timeout: the duration must be positive");
  o = options();
  o.time_format = "rfc";
  CHECK(usage_error_of(o) == "unknown time format 'rfc', did you mean 'rfc3339'?");
  o = options();
  o.time_unit = "sec";
  CHECK(usage_error_of(o).starts_with("unknown time unit 'sec'"));
  o = options();
  o.late = "dlq";
  CHECK(usage_error_of(o) == "--late dlq needs --dlq FILE.db or --dlq kafka:TOPIC");
  o = options();
  o.late = "-";
  CHECK(usage_error_of(o) == "--late: late records cannot share standard output with the windows");
  o = options();
  o.flush_at_end = true;
  CHECK(usage_error_of(o) == "--flush-at-end goes with --state");
  o = options();
  o.keys = {".a..b"};
  CHECK(usage_error_of(o) == "invalid field path '.a..b': empty segment");
  o = options();
  o.aggs = {"sum:.v", "sum:.v"};
  CHECK(usage_error_of(o) == "--agg: two aggregates are named 'sum_v'; name one with NAME=SPEC");
}

TEST_CASE("window tool: a kafka: dead-letter topic takes the program's Kafka options", "[window]") {
  WindowOptions o = options();
  o.errors.dlq = "kafka:dead";
  o.kafka.brokers = "localhost:1";
  o.kafka.properties = {"no.such.property=1"};
  CHECK(usage_error_of(o) ==
        "kafka property 'no.such.property': No such configuration property: \"no.such.property\"");
}

TEST_CASE("window tool: an input that is also the --late file is refused", "[window]") {
  TempDir dir;
  Result r;
  WindowOptions o = options();
  o.late = dir.file("in.ndjson");
  run_tool(o, "{\"k\":1,\"ts\":20000}\n{\"k\":1,\"ts\":1}\n", r, dir);
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.error().status == ExitStatus::kUsage);
  CHECK(r.status.error().message == "input '" + dir.file("in.ndjson") +
                                        "' is also the --late file: the program would read what "
                                        "it writes");
  CHECK(r.out.empty());
  CHECK(read_file(dir.file("in.ndjson")) == "{\"k\":1,\"ts\":20000}\n{\"k\":1,\"ts\":1}\n");
}

TEST_CASE("window tool: a sum that cannot be written exactly is said once", "[window]") {
  TempDir dir;
  Result r;
  WindowOptions o = options();
  o.aggs = {"sum:.v"};
  run_tool(o,
           "{\"k\":1,\"ts\":1,\"v\":9223372036854775807}\n{\"k\":1,\"ts\":1,\"v\":1}\n"
           "{\"k\":2,\"ts\":1,\"v\":9223372036854775807}\n{\"k\":2,\"ts\":1,\"v\":1}\n",
           r, dir);
  REQUIRE(r.status.ok());
  CHECK(r.out ==
        "{\"window_start\":0,\"window_end\":10000,\"key\":1,\"sum_v\":9.223372036854776e+18,"
        "\"emit\":\"on_time\"}\n"
        "{\"window_start\":0,\"window_end\":10000,\"key\":2,\"sum_v\":9.223372036854776e+18,"
        "\"emit\":\"on_time\"}\n");
  CHECK(r.reporter.warnings ==
        std::vector<std::string>{"sum 'sum_v' of the window at 0 with key 1: the sum is "
                                 "9223372036854775808, beyond 64-bit integers: written as the "
                                 "float 9.223372036854776e+18 (said once)"});
}

TEST_CASE("window tool: times as numbers in any unit or as RFC 3339, negative ones too",
          "[window]") {
  TempDir dir;
  Result r;
  WindowOptions o = options();
  o.watermark = "1h";
  run_tool(o,
           "{\"k\":\"b\",\"ts\":-1}\n"
           "{\"k\":\"b\",\"ts\":\"1969-12-31T23:59:50Z\"}\n"
           "{\"k\":\"a\",\"ts\":\"2026-11-29T10:00:05.5Z\"}\n"
           "{\"k\":\"a\",\"ts\":\"2026-11-29T12:00:09+02:00\"}\n"
           "\n"
           "{\"k\":\"a\",\"ts\":1795946401234}\n"
           "{\"k\":\"a\",\"ts\":1795946401234.9}\n",
           r, dir);
  REQUIRE(r.status.ok());
  CHECK(
      r.out ==
      "{\"window_start\":-10000,\"window_end\":0,\"key\":\"b\",\"count\":2,\"emit\":\"on_time\"}\n"
      "{\"window_start\":1795946400000,\"window_end\":1795946410000,\"key\":\"a\",\"count\":4,"
      "\"emit\":\"on_time\"}\n");

  Result s;
  o.time_unit = "s";
  o.time_format = "rfc3339";
  run_tool(o, "{\"k\":\"a\",\"ts\":1795946405}\n{\"k\":\"a\",\"ts\":1795946399.999}\n", s, dir);
  REQUIRE(s.status.ok());
  CHECK(s.out ==
        "{\"window_start\":\"2026-11-29T09:59:50.000Z\",\"window_end\":\"2026-11-29T10:00:00."
        "000Z\",\"key\":\"a\","
        "\"count\":1,\"emit\":\"on_time\"}\n"
        "{\"window_start\":\"2026-11-29T10:00:00.000Z\",\"window_end\":\"2026-11-29T10:00:10."
        "000Z\",\"key\":\"a\","
        "\"count\":1,\"emit\":\"on_time\"}\n");
}

TEST_CASE("window tool: keys are JSON values; several keys make an array", "[window]") {
  TempDir dir;
  Result r;
  WindowOptions o = options();
  o.keys = {".k", ".n"};
  run_tool(o,
           "{\"k\":\"a\",\"n\":1,\"ts\":1}\n"
           "{\"n\":1,\"k\":\"\\u0061\",\"ts\":2}\n"
           // Field names with escapes are found all the same.
           "{\"k\":{\"x\": [1, 2]},\"n\":null,\"\\u0074s\":3}\n"
           "{\"k\":{\"x\":[1,2]},\"n\":null,\"ts\":4}\n",
           r, dir);
  REQUIRE(r.status.ok());
  CHECK(r.out ==
        "{\"window_start\":0,\"window_end\":10000,\"key\":[\"a\",1],\"count\":2,\"emit\":\"on_"
        "time\"}\n"
        "{\"window_start\":0,\"window_end\":10000,\"key\":[{\"x\":[1,2]},null],\"count\":2,"
        "\"emit\":\"on_time\"}\n");

  Result none;
  o.keys.clear();
  o.aggs = {"count", "max:.k"};
  run_tool(o, "{\"k\":\"a\",\"ts\":1}\n{\"k\":\"b\",\"ts\":2}\n", none, dir);
  REQUIRE(none.status.ok());
  CHECK(none.out ==
        "{\"window_start\":0,\"window_end\":10000,\"count\":2,\"max_k\":\"b\",\"emit\":\"on_time\"}"
        "\n");
}

TEST_CASE("window tool: bad input stops with the line and the reason, or is skipped", "[window]") {
  TempDir dir;
  auto failing = [&](const std::string& input) {
    Result r;
    WindowOptions o = options();
    o.aggs = {"sum:.v"};
    run_tool(o, input, r, dir);
    REQUIRE_FALSE(r.status.ok());
    CHECK(r.status.error().status == ExitStatus::kDataError);
    return r.status.error().message;
  };
  std::string in = dir.file("in.ndjson");
  CHECK(failing("{\"k\":\"a\",\"ts\":1,\"v\":1}\n{\"k\":\"a\",\"v\":1}\n") ==
        in + ": line 2: field '.ts' is missing");
  CHECK(failing("{\"k\":\"a\",\"ts\":true,\"v\":1}\n") ==
        in + ": line 1: field '.ts' is a bool, not a number or an RFC 3339 string");
  CHECK(failing("{\"k\":\"a\",\"ts\":\"yesterday\",\"v\":1}\n") ==
        in + ": line 1: field '.ts': 'yesterday' is not an RFC 3339 time (expected a yyyy-mm-dd "
             "date)");
  CHECK(failing("{\"ts\":1,\"v\":1}\n") == in + ": line 1: field '.k' is missing");
  CHECK(failing("{\"k\":\"a\",\"ts\":1,\"v\":\"1\"}\n") ==
        in + ": line 1: field '.v' is a string, not a number (sum)");
  CHECK(failing("{\"k\":\"a\",\"ts\":1e300,\"v\":1}\n")
            .starts_with(in + ": line 1: field '.ts': time '1e+300'"));
  CHECK(failing("{\"k\":\"a\",\"ts\":1,\"v\":1\n") ==
        in + ": line 1: not valid JSON: truncated object or array");

  // What the lines before a bad one fired is out before the diagnostic.
  Result before;
  run_tool(options(), "{\"k\":\"a\",\"ts\":1000}\n{\"k\":\"a\",\"ts\":12000}\n{\"k\":\"a\"}\n",
           before, dir);
  REQUIRE_FALSE(before.status.ok());
  CHECK(before.status.error().message == in + ": line 3: field '.ts' is missing");
  CHECK(
      before.out ==
      "{\"window_start\":0,\"window_end\":10000,\"key\":\"a\",\"count\":1,\"emit\":\"on_time\"}\n");

  Result r;
  WindowOptions o = options();
  o.aggs = {"sum:.v"};
  o.errors.on_error = "skip";
  run_tool(o,
           "{\"k\":\"a\",\"ts\":1,\"v\":1}\n{\"k\":\"a\",\"ts\":2}\nnot "
           "json\n{\"k\":\"a\",\"ts\":3,\"v\":2}\n",
           r, dir);
  REQUIRE(r.status.ok());
  CHECK(
      r.out ==
      "{\"window_start\":0,\"window_end\":10000,\"key\":\"a\",\"sum_v\":3,\"emit\":\"on_time\"}\n");
  CHECK(r.reporter.warnings == std::vector<std::string>{"skipped 2 bad lines"});
}

const char* const kLateInput =
    "{\"k\":\"a\",\"ts\":1000}\n"
    "{\"k\":\"a\",\"ts\":25000}\n"
    "{\"k\":\"a\", \"ts\":2000}\n"
    "{\"k\":\"a\",\"ts\":3000}\n";
const char* const kLateOutput =
    "{\"window_start\":0,\"window_end\":10000,\"key\":\"a\",\"count\":1,\"emit\":\"on_time\"}\n"
    "{\"window_start\":20000,\"window_end\":30000,\"key\":\"a\",\"count\":1,\"emit\":\"on_time\"}"
    "\n";

TEST_CASE("window tool: records too late for every window are counted, or kept with --late FILE",
          "[window]") {
  TempDir dir;
  Result counted;
  run_tool(options(), kLateInput, counted, dir);
  REQUIRE(counted.status.ok());
  CHECK(counted.out == kLateOutput);
  CHECK(counted.reporter.warnings ==
        std::vector<std::string>{
            "dropped 2 records too late for every window (--late FILE keeps them)"});

  Result kept;
  WindowOptions o = options();
  o.late = dir.file("late.ndjson");
  run_tool(o, kLateInput, kept, dir);
  REQUIRE(kept.status.ok());
  CHECK(kept.out == kLateOutput);
  CHECK(kept.reporter.warnings.empty());
  // Byte for byte, and appended to what the file held.
  CHECK(read_file(dir.file("late.ndjson")) ==
        "{\"k\":\"a\", \"ts\":2000}\n{\"k\":\"a\",\"ts\":3000}\n");
  Result again;
  run_tool(o, kLateInput, again, dir);
  CHECK(read_file(dir.file("late.ndjson")) ==
        "{\"k\":\"a\", \"ts\":2000}\n{\"k\":\"a\",\"ts\":3000}\n{\"k\":\"a\", "
        "\"ts\":2000}\n{\"k\":\"a\",\"ts\":3000}\n");
}

TEST_CASE("window tool: with --late dlq, records too late go to the dead-letter store",
          "[window]") {
  TempDir dir;
  Result r;
  WindowOptions o = options();
  o.late = "dlq";
  o.errors.dlq = dir.file("dlq.db");
  run_tool(o, kLateInput, r, dir);
  REQUIRE(r.status.ok());
  CHECK(r.out == kLateOutput);
  auto db = Database::open(dir.file("dlq.db"));
  REQUIRE(db.ok());
  auto q =
      (*db)->prepare("SELECT stage, reason, input, line, payload FROM dead_letters ORDER BY id");
  REQUIRE(q.ok());
  std::vector<std::string> rows;
  for (;;) {
    auto more = q->step();
    REQUIRE(more.ok());
    if (!*more) break;
    rows.push_back(fmt::format("{}|{}|{}|{}|{}", q->column_text(0), q->column_text(1),
                               q->column_text(2), q->column_int(3), q->column_text(4)));
  }
  std::string in = dir.file("in.ndjson");
  CHECK(
      rows ==
      std::vector<std::string>{
          "kwindow|line 3: too late for every window: the watermark is 1970-01-01T00:00:25.000Z|" +
              in + "|3|{\"k\":\"a\", \"ts\":2000}",
          "kwindow|line 4: too late for every window: the watermark is 1970-01-01T00:00:25.000Z|" +
              in + "|4|{\"k\":\"a\",\"ts\":3000}"});
}

TEST_CASE("window tool: control lines pass through in order with the windows around them",
          "[window]") {
  TempDir dir;
  Result r;
  run_tool(options(),
           "{\"$kpipe\":\"checkpoint\",\"id\":1,\"at\":5,\"offsets\":[]}\n"
           "{\"k\":\"a\",\"ts\":1000}\n"
           "{\"k\":\"a\",\"ts\":12000}\n"
           "{\"$kpipe\":\"something\", \"new\":true}\n"
           "{\"k\":\"a\",\"ts\":13000}\n",
           r, dir);
  REQUIRE(r.status.ok());
  CHECK(r.out ==
        "{\"$kpipe\":\"checkpoint\",\"id\":1,\"at\":5,\"offsets\":[]}\n"
        "{\"window_start\":0,\"window_end\":10000,\"key\":\"a\",\"count\":1,\"emit\":\"on_time\"}\n"
        "{\"$kpipe\":\"something\", \"new\":true}\n"
        "{\"window_start\":10000,\"window_end\":20000,\"key\":\"a\",\"count\":2,\"emit\":\"on_"
        "time\"}\n");
}

TEST_CASE("window tool: envelopes hold one watermark per partition", "[window]") {
  TempDir dir;
  Result r;
  WindowOptions o = options();
  o.time = ".value.ts";
  o.keys = {".value.user"};
  o.aggs = {"count", "sum:.value.amount"};
  run_tool(o,
           "{\"topic\":\"ev\",\"partition\":0,\"offset\":0,\"timestamp\":1,\"key\":null,"
           "\"value\":{\"user\":\"u1\",\"ts\":1000,\"amount\":5}}\n"
           "{\"topic\":\"ev\",\"partition\":1,\"offset\":0,\"timestamp\":1,\"key\":null,"
           "\"value\":{\"user\":\"u1\",\"ts\":2000,\"amount\":1}}\n"
           // Partition 0 runs ahead; partition 1 holds the watermark at 2s.
           "{\"topic\":\"ev\",\"partition\":0,\"offset\":1,\"timestamp\":1,\"key\":null,"
           "\"value\":{\"user\":\"u1\",\"ts\":50000,\"amount\":1}}\n"
           "{\"topic\":\"ev\",\"partition\":1,\"offset\":1,\"timestamp\":1,\"key\":null,"
           "\"value\":{\"user\":\"u1\",\"ts\":3000,\"amount\":10}}\n"
           "{\"topic\":\"ev\",\"partition\":1,\"offset\":2,\"timestamp\":1,\"key\":null,"
           "\"value\":{\"user\":\"u1\",\"ts\":60000,\"amount\":1}}\n",
           r, dir);
  REQUIRE(r.status.ok());
  CHECK(r.out ==
        "{\"window_start\":0,\"window_end\":10000,\"key\":\"u1\",\"count\":3,\"sum_amount\":16,"
        "\"emit\":\"on_time\"}\n"
        "{\"window_start\":50000,\"window_end\":60000,\"key\":\"u1\",\"count\":1,\"sum_amount\":1,"
        "\"emit\":\"on_time\"}\n"
        "{\"window_start\":60000,\"window_end\":70000,\"key\":\"u1\",\"count\":1,\"sum_amount\":1,"
        "\"emit\":\"on_time\"}\n");
}

TEST_CASE(
    "window tool: --state saves the windows at each checkpoint and a new run goes on from them",
    "[window]") {
  TempDir dir;
  WindowOptions o = options();
  o.state = dir.file("state.db");
  Result first;
  run_tool(o,
           "{\"k\":\"a\",\"ts\":1000}\n"
           "{\"k\":\"b\",\"ts\":2000}\n"
           "{\"k\":\"a\",\"ts\":12000}\n"
           "{\"$kpipe\":\"checkpoint\",\"id\":1,\"at\":5,\"offsets\":[{\"topic\":\"t\","
           "\"partition\":0,\"offset\":3}]}\n"
           "{\"k\":\"a\",\"ts\":13000}\n",
           first, dir);
  REQUIRE(first.status.ok());
  // [10s, 20s) is still open: it stays in the state instead of firing.
  CHECK(first.out ==
        "{\"window_start\":0,\"window_end\":10000,\"key\":\"a\",\"count\":1,\"emit\":\"on_time\"}\n"
        "{\"window_start\":0,\"window_end\":10000,\"key\":\"b\",\"count\":1,\"emit\":\"on_time\"}\n"
        "{\"$kpipe\":\"checkpoint\",\"id\":1,\"at\":5,\"offsets\":[{\"topic\":\"t\",\"partition\":"
        "0,\"offset\":3}]}\n");
  {
    // The last stage completes checkpoint 1.
    auto store = StateStore::open(o.state);
    REQUIRE(store.ok());
    Checkpoint c;
    c.id = 1;
    c.offsets = {{"t", 0, 3}};
    REQUIRE((*store)->complete(c, "test", 10).ok());
  }
  // The record after the checkpoint comes again; the restored window holds
  // the one before it.
  Result second;
  o.flush_at_end = true;
  run_tool(o, "{\"k\":\"a\",\"ts\":13000}\n{\"k\":\"a\",\"ts\":25000}\n", second, dir);
  REQUIRE(second.status.ok());
  CHECK(second.out ==
        "{\"window_start\":10000,\"window_end\":20000,\"key\":\"a\",\"count\":2,\"emit\":\"on_"
        "time\"}\n"
        "{\"window_start\":20000,\"window_end\":30000,\"key\":\"a\",\"count\":1,\"emit\":\"on_"
        "time\"}\n");
  CHECK(second.reporter.infos.at(0) ==
        "restored 'kwindow' as of checkpoint 1: 1 window aggregate, watermark "
        "1970-01-01T00:00:12.000Z");

  // Under another name the state is another stage's: nothing to restore.
  Result other;
  o.name = "other";
  run_tool(o, "{\"k\":\"a\",\"ts\":13000}\n", other, dir);
  REQUIRE(other.status.ok());
  CHECK(other.out ==
        "{\"window_start\":10000,\"window_end\":20000,\"key\":\"a\",\"count\":1,\"emit\":\"on_"
        "time\"}\n");

  // The same stage with other window options cannot use the saved state.
  Result changed;
  o.name.clear();
  o.tumble = "20s";
  run_tool(o, "", changed, dir);
  REQUIRE_FALSE(changed.status.ok());
  CHECK(changed.status.error().status == ExitStatus::kFailure);
  CHECK(changed.status.error().message ==
        "the saved state was made with other options (tumble 10s; key .k; agg count), not these "
        "(tumble 20s; key .k; "
        "agg count): give another --name or state file");
}

// --- an instance of a consumer group (kpipe(7), MANY INSTANCES) -------------

// kconsume's part in an instance, done by hand: claims `partitions` of
// "events" in the store and returns the epoch each got.
std::vector<int64_t> claim(const std::string& path, const std::vector<int32_t>& partitions) {
  auto store = StateStore::open(path);
  REQUIRE(store.ok());
  std::vector<TopicPartition> tps;
  for (int32_t p : partitions) tps.push_back({"events", p});
  auto claims = (*store)->claim(tps, 5);
  REQUIRE(claims.ok());
  std::vector<int64_t> epochs;
  for (const auto& c : *claims) epochs.push_back(c.epoch);
  return epochs;
}

// The assigned line of an instance's kconsume: partitions of "events" and
// their epochs.
std::string assigned(const std::vector<std::pair<int32_t, int64_t>>& partitions) {
  PartitionEvent e;
  for (const auto& [p, epoch] : partitions) {
    e.partitions.push_back({"events", p});
    e.epochs.push_back(epoch);
  }
  std::string line;
  append_partition_event(line, e);
  return line;
}

std::string record(int32_t partition, int64_t offset, const std::string& user, Millis ts) {
  return fmt::format(
      "{{\"topic\":\"events\",\"partition\":{},\"offset\":{},\"value\":{{\"user\":\"{}\","
      "\"ts\":{}}}}}\n",
      partition, offset, user, ts);
}

std::string window(Millis start, const std::string& user, int count) {
  return fmt::format(
      "{{\"window_start\":{},\"window_end\":{},\"key\":\"{}\",\"count\":{},\"emit\":\"on_time\"}}"
      "\n",
      start, start + 10000, user, count);
}

WindowOptions instance_options(const TempDir& dir) {
  WindowOptions o = options();
  o.time = ".value.ts";
  o.keys = {".value.user"};
  o.state = dir.file("state.db");
  return o;
}

TEST_CASE("window tool: an instance keeps windows and a watermark per partition, restored apart",
          "[window]") {
  TempDir dir;
  WindowOptions o = instance_options(dir);
  REQUIRE(claim(o.state, {0, 1}) == std::vector<int64_t>{1, 1});
  Checkpoint c{1, 7, {{"events", 0, 2, 1}, {"events", 1, 2, 1}}, "g", ""};
  std::string checkpoint;
  append_checkpoint(checkpoint, c);
  std::string both = assigned({{0, 1}, {1, 1}});
  Result first;
  run_tool(o,
           both + record(0, 0, "u1", 1000) + record(1, 0, "u2", 2000) + record(0, 1, "u1", 50000) +
               record(1, 1, "u2", 3000) + checkpoint,
           first, dir);
  REQUIRE(first.status.ok());
  // Partition 0's time fires partition 0's window, however far behind
  // partition 1 is: each partition's windows go by its own watermark.
  CHECK(first.out == both + window(0, "u1", 1) + checkpoint);
  CHECK(first.reporter.warnings.empty());
  {
    // The terminal stage completes checkpoint 1.
    auto store = StateStore::open(o.state);
    REQUIRE(store.ok());
    REQUIRE((*store)->complete(c, "kcheckpoint", 8).ok());
  }

  // The instance restarts with partition 1 only: its window goes on from
  // the checkpoint; partition 0's open window is not this run's.
  o.flush_at_end = true;
  REQUIRE(claim(o.state, {1}) == std::vector<int64_t>{2});
  std::string one = assigned({{1, 2}});
  Result second;
  run_tool(o, one + record(1, 2, "u2", 4000) + record(1, 3, "u2", 15000), second, dir);
  REQUIRE(second.status.ok());
  CHECK(second.out == one + window(0, "u2", 3) + window(10000, "u2", 1));
  CHECK(second.reporter.infos.at(0) ==
        "restored 'kwindow' for events [1] as of checkpoint 1 in '" + o.state +
            "': 1 window aggregate, watermark 1970-01-01T00:00:03.000Z");

  // Partition 0's window, with the watermark partition 0 had, goes to the
  // instance that takes it.
  REQUIRE(claim(o.state, {0}) == std::vector<int64_t>{2});
  std::string zero = assigned({{0, 2}});
  Result third;
  run_tool(o, zero + record(0, 2, "u1", 51000), third, dir);
  REQUIRE(third.status.ok());
  CHECK(third.out == zero + window(50000, "u1", 2));
  CHECK(third.reporter.infos.at(0) ==
        "restored 'kwindow' for events [0] as of checkpoint 1 in '" + o.state +
            "': 1 window aggregate, watermark 1970-01-01T00:00:50.000Z");
}

TEST_CASE("window tool: an instance says once that keys came from two of its partitions",
          "[window]") {
  TempDir dir;
  WindowOptions o = instance_options(dir);
  claim(o.state, {0, 1});
  std::string both = assigned({{0, 1}, {1, 1}});
  // Forty users on partition 0, then the same on partition 1, all in one
  // window: each partition counts its own share, and the stage, which may
  // look at some records only, sees the topic is not keyed by them.
  std::string input = both;
  for (int32_t p : {0, 1})
    for (int i = 0; i < 40; ++i) input += record(p, i, fmt::format("u{}", i), 1000 + i);
  Result r;
  o.flush_at_end = true;
  run_tool(o, input, r, dir);
  REQUIRE(r.status.ok());
  // Each partition's window of u0 counts one.
  CHECK(r.out.find(window(0, "u0", 1)) != std::string::npos);
  CHECK(r.out.find(window(0, "u0", 2)) == std::string::npos);
  REQUIRE(r.reporter.warnings.size() == 1);
  const std::string& warning = r.reporter.warnings[0];
  INFO(warning);
  CHECK(warning.starts_with("key \"u"));
  CHECK(warning.find("came from partitions events [0] and events [1]") != std::string::npos);
  CHECK(warning.ends_with(
      "an instance keeps its windows per partition, so each counts its own share of the key; "
      "re-key the topic by it first: kconsume -t events --format value | kproduce -t "
      "events-rekeyed -k .user (kpipe(7), MANY INSTANCES)"));
}

TEST_CASE("window tool: an instance's record of a partition not assigned, or of none, is bad input",
          "[window]") {
  TempDir dir;
  WindowOptions o = instance_options(dir);
  claim(o.state, {0});
  std::string zero = assigned({{0, 1}});
  std::string in = dir.file("in.ndjson");

  Result unassigned;
  run_tool(o,
           zero + record(0, 0, "u1", 1000) + record(0, 1, "u1", 12000) + record(1, 0, "u2", 2000),
           unassigned, dir);
  REQUIRE_FALSE(unassigned.status.ok());
  CHECK(unassigned.status.error().status == ExitStatus::kDataError);
  CHECK(unassigned.status.error().message ==
        in + ": line 4: a record of events [1], a partition kconsume has not assigned");
  // What the lines before it fired is out before the diagnostic.
  CHECK(unassigned.out == zero + window(0, "u1", 1));

  Result bare;
  run_tool(o, zero + "{\"value\":{\"user\":\"u1\",\"ts\":1000}}\n", bare, dir);
  REQUIRE_FALSE(bare.status.ok());
  CHECK(bare.status.error().status == ExitStatus::kDataError);
  CHECK(bare.status.error().message ==
        in + ": line 2: a record without the envelope's 'topic' and 'partition', which an "
             "instance of a consumer group keeps its windows by");

  o.errors.on_error = "skip";
  o.flush_at_end = true;
  Result skipped;
  run_tool(o,
           zero + record(1, 0, "u2", 2000) + "{\"value\":{\"user\":\"u1\",\"ts\":1000}}\n" +
               record(0, 0, "u1", 1000),
           skipped, dir);
  REQUIRE(skipped.status.ok());
  CHECK(skipped.out == zero + window(0, "u1", 1));
  CHECK(skipped.reporter.warnings == std::vector<std::string>{"skipped 2 bad lines"});
}

}  // namespace
}  // namespace kpipe
