#include "kpipe/stage/bad_input.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <map>

#include "dead_letter_rows.h"
#include "fakes.h"
#include "helpers.h"
#include "kpipe/stage/filter.h"
#include "kpipe/store/dlq_store.h"

using namespace kpipe;
using kpipe::test::dead_letter_rows;
using kpipe::test::Padded;
using kpipe::test::TempDir;

namespace {

constexpr Millis kNow = 1795947330123;

// A handler over a store in a temporary directory.
struct Fixture {
  TempDir dir;
  std::string path = dir.file("dlq.db");
  FakeClock clock{kNow};
  std::unique_ptr<BadInputHandler> handler(OnError mode, std::string stage = "kdedup") {
    auto store = DlqStore::open(path);
    REQUIRE(store.ok());
    return std::make_unique<BadInputHandler>(mode, make_store_sink(std::move(*store)),
                                             std::move(stage), clock);
  }
};

// Lines as the reader hands them out: padded, numbered.
struct TestLine {
  Padded text;
  Line line;
  TestLine(std::string_view t, uint64_t n) : text(t) {
    line.text = text.view();
    line.number = n;
  }
};

}  // namespace

TEST_CASE("parse_on_error: the three modes", "[dead_letter]") {
  CHECK(*parse_on_error("fail") == OnError::kFail);
  CHECK(*parse_on_error("dlq") == OnError::kDlq);
  CHECK(*parse_on_error("skip") == OnError::kSkip);
  auto bad = parse_on_error("skp");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().status == ExitStatus::kUsage);
  CHECK(bad.error().message == "unknown --on-error mode 'skp', did you mean 'skip'?");
}

TEST_CASE("BadInputHandler fail: INPUT: line N: REASON, exit 65", "[dead_letter]") {
  Fixture fx;
  BadInputHandler h(OnError::kFail, nullptr, "kdedup", fx.clock);
  TestLine l("{oops", 17);
  Status s = h.handle("events.ndjson", l.line, "not valid JSON: malformed structure");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().status == ExitStatus::kDataError);
  CHECK(s.error().message == "events.ndjson: line 17: not valid JSON: malformed structure");
  CHECK(h.skipped() == 0);
  CHECK(h.dead_lettered() == 0);
  CHECK(h.summary().empty());
  CHECK_FALSE(h.has_sink());
}

TEST_CASE("BadInputHandler skip: counted and summarised", "[dead_letter]") {
  Fixture fx;
  BadInputHandler h(OnError::kSkip, nullptr, "kdedup", fx.clock);
  TestLine l("x", 1);
  REQUIRE(h.handle("<stdin>", l.line, "r").ok());
  CHECK(h.summary() == "skipped 1 bad line");
  REQUIRE(h.handle("<stdin>", l.line, "r").ok());
  REQUIRE(h.handle("<stdin>", l.line, "r").ok());
  CHECK(h.skipped() == 3);
  CHECK(h.summary() == "skipped 3 bad lines");
  CHECK(h.sync().ok());
}

TEST_CASE("BadInputHandler dlq: the line, the reason and the context in the store",
          "[dead_letter]") {
  Fixture fx;
  auto h = fx.handler(OnError::kDlq, "kdedup/eu");
  std::string bytes = test::bytes("bad \xff\xfe line");
  TestLine l(bytes, 4);
  REQUIRE(h->handle("in.ndjson", l.line, "not valid JSON: invalid UTF-8").ok());
  REQUIRE(h->sync().ok());
  auto r = dead_letter_rows(fx.path);
  REQUIRE(r.size() == 1);
  CHECK(r[0].payload == bytes);
  CHECK(r[0].at == kNow);
  CHECK(r[0].stage == "kdedup/eu");
  CHECK(r[0].reason == "line 4: not valid JSON: invalid UTF-8");
  CHECK(r[0].input == "in.ndjson");
  CHECK(r[0].line == 4);
  CHECK_FALSE(r[0].topic);
  CHECK(h->dead_lettered() == 1);
  CHECK(h->skipped() == 0);
  CHECK(h->summary() == "sent 1 line to the dead-letter store " + fx.path);
}

TEST_CASE("BadInputHandler dlq: an envelope line gets its source position", "[dead_letter]") {
  Fixture fx;
  auto h = fx.handler(OnError::kDlq);
  TestLine env(R"({"topic":"events","partition":5,"offset":1043,"timestamp":1,"key":null,)"
               R"("value":{"x":"y"}})",
               9);
  REQUIRE(h->handle("<stdin>", env.line, "field '.value.ts' is missing").ok());
  REQUIRE(h->sync().ok());
  auto r = dead_letter_rows(fx.path);
  REQUIRE(r.size() == 1);
  CHECK(r[0].topic == "events");
  CHECK(r[0].partition == 5);
  CHECK(r[0].offset == 1043);
  CHECK(r[0].payload == env.text.view());
}

TEST_CASE("BadInputHandler dlq: a replayed envelope line is not stored twice", "[dead_letter]") {
  Fixture fx;
  TestLine env(R"({"topic":"events","partition":0,"offset":7,"value":"v"})", 1);
  {
    auto h = fx.handler(OnError::kDlq);
    REQUIRE(h->handle("<stdin>", env.line, "reason").ok());
    REQUIRE(h->sync().ok());
  }
  {
    // The pipeline restarts from an earlier checkpoint: the same record
    // comes again, at another line number.
    auto h = fx.handler(OnError::kDlq);
    TestLine again(env.text.view(), 40);
    REQUIRE(h->handle("<stdin>", again.line, "reason").ok());
    REQUIRE(h->sync().ok());
  }
  {
    auto h = fx.handler(OnError::kDlq, "kwindow");  // another stage keeps its own
    REQUIRE(h->handle("<stdin>", env.line, "reason").ok());
    REQUIRE(h->sync().ok());
  }
  auto r = dead_letter_rows(fx.path);
  REQUIRE(r.size() == 2);
  CHECK(r[0].stage == "kdedup");
  CHECK(r[0].line == 40);  // a pending entry tells of its latest failure (and counts them)
  CHECK(r[1].stage == "kwindow");
}

TEST_CASE("BadInputHandler: dead letters are batched until sync, 1000 or 200 ms", "[dead_letter]") {
  Fixture fx;
  auto h = fx.handler(OnError::kDlq);
  TestLine l("bad", 1);
  for (int i = 0; i < 999; ++i) REQUIRE(h->handle("<stdin>", l.line, "r").ok());
  CHECK(dead_letter_rows(fx.path).empty());
  REQUIRE(h->handle("<stdin>", l.line, "r").ok());  // the 1000th
  CHECK(dead_letter_rows(fx.path).size() == 1000);
  REQUIRE(h->handle("<stdin>", l.line, "r").ok());
  CHECK(dead_letter_rows(fx.path).size() == 1000);
  fx.clock.advance(200);
  REQUIRE(h->handle("<stdin>", l.line, "r").ok());
  CHECK(dead_letter_rows(fx.path).size() == 1002);
}

TEST_CASE("BadInputHandler: dead_letter writes whatever --on-error says", "[dead_letter]") {
  Fixture fx;
  auto h = fx.handler(OnError::kFail);
  TestLine l(R"({"late":true})", 2);
  REQUIRE(h->dead_letter("<stdin>", l.line, "late by 5s").ok());
  REQUIRE(h->sync().ok());
  auto r = dead_letter_rows(fx.path);
  REQUIRE(r.size() == 1);
  CHECK(r[0].reason == "line 2: late by 5s");
  BadInputHandler no_store(OnError::kSkip, nullptr, "k", fx.clock);
  Status s = no_store.dead_letter("<stdin>", l.line, "late");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().status == ExitStatus::kFailure);
  CHECK(s.error().message == "no dead-letter store: give --dlq");
}

namespace {

std::unique_ptr<DlqStore> store_at(const std::string& path) {
  auto s = DlqStore::open(path);
  if (!s) FAIL(s.error().message);
  return std::move(*s);
}

size_t stored_count(const std::string& path) {
  size_t n = 0;
  REQUIRE(store_at(path)
              ->scan({}, 0, false,
                     [&](const DlqEntry&) -> Status {
                       ++n;
                       return {};
                     })
              .ok());
  return n;
}

// A stage that refuses lines starting with '!', and advances the clock a
// little per line, as a busy stream does.
class ClockedStage final : public LineStage {
 public:
  ClockedStage(FakeClock& clock, std::function<void(uint64_t)> on_good)
      : clock_(clock), on_good_(on_good) {}
  Status on_line(const Line& line, Output& out) override {
    clock_.advance(50);
    if (line.text.starts_with("!")) return data_error("refused");
    on_good_(line.number);
    out.write_line(line.text);
    return {};
  }

 private:
  FakeClock& clock_;
  std::function<void(uint64_t)> on_good_;
};

}  // namespace

TEST_CASE("dead letters are batched, but synced after kSyncEvery or kSyncInterval",
          "[dead_letter]") {
  TempDir dir;
  std::string path = dir.file("bad.db");
  FakeClock clock;
  BadInputHandler bad(OnError::kDlq, make_store_sink(store_at(path)), "k", clock);
  TestLine l("x", 1);
  REQUIRE(bad.handle("<stdin>", l.line, "r").ok());
  clock.advance(BadInputHandler::kSyncInterval - 1);
  REQUIRE(bad.tick().ok());
  CHECK(stored_count(path) == 0);
  clock.advance(1);
  REQUIRE(bad.tick().ok());
  CHECK(stored_count(path) == 1);

  for (uint64_t i = 0; i + 1 < BadInputHandler::kSyncEvery; ++i)
    REQUIRE(bad.handle("<stdin>", l.line, "r").ok());
  CHECK(stored_count(path) == 1);
  REQUIRE(bad.handle("<stdin>", l.line, "r").ok());
  CHECK(stored_count(path) == 1 + BadInputHandler::kSyncEvery);
}

TEST_CASE("a dead letter followed only by good lines is durable within the sync interval",
          "[dead_letter]") {
  // Before: the batch was synced only by the next dead letter, a control
  // line, a pause in the input or the end, so a busy stream of good lines
  // kept one dead letter unwritten (and the store locked) indefinitely.
  TempDir dir;
  std::string db = dir.file("bad.db");
  std::string input = dir.file("in.ndjson");
  {
    std::ofstream f(input);
    f << "!bad\n";
    for (int i = 0; i < 20; ++i) f << "{\"good\":" << i << "}\n";
  }
  FakeClock clock;
  RecordingReporter reporter;
  int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  REQUIRE(devnull >= 0);
  Output out(devnull);
  Io io{out, reporter, clock, nullptr, "ktest"};
  BadInputHandler bad(OnError::kDlq, make_store_sink(store_at(db)), "ktest", clock);
  std::map<uint64_t, size_t> seen;  // line number -> dead letters stored when it was processed
  ClockedStage stage(clock, [&](uint64_t n) { seen[n] = stored_count(db); });
  FilterSettings settings;
  settings.input.inputs = {input};
  REQUIRE(run_filter(stage, settings, bad, io).ok());
  ::close(devnull);
  CHECK(seen[2] == 0);   // batched: 50 ms after the dead letter
  CHECK(seen[10] == 1);  // 450 ms after: synced, with no pause and no control line
  CHECK(stored_count(db) == 1);
}

TEST_CASE("BadInputHandler records: kconsume's undecodable records, named by position",
          "[dead_letter]") {
  Fixture fx;
  TestLine env(R"({"topic":"orders","partition":3,"offset":12,"timestamp":1,"key":null,)"
               R"("value_base64":"AAAAAAcB"})",
               0);
  SECTION("fail: TOPIC[P]@OFFSET: REASON, exit 65") {
    auto h = fx.handler(OnError::kFail, "kconsume");
    Status s = h->handle_record("orders[3]@12", env.line, "value: avro: payload is truncated");
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().status == ExitStatus::kDataError);
    CHECK(s.error().message == "orders[3]@12: value: avro: payload is truncated");
    CHECK(h->failed());
  }
  SECTION("skip: counted") {
    auto h = fx.handler(OnError::kSkip, "kconsume");
    REQUIRE(h->handle_record("orders[3]@12", env.line, "why").ok());
    CHECK(h->skipped() == 1);
  }
  SECTION("dlq: the envelope with the raw bytes, byte for byte, at its source position") {
    auto h = fx.handler(OnError::kDlq, "kconsume");
    REQUIRE(h->handle_record("orders[3]@12", env.line, "value: avro: payload is truncated").ok());
    REQUIRE(h->sync().ok());
    auto r = dead_letter_rows(fx.path);
    REQUIRE(r.size() == 1);
    CHECK(r[0].payload == env.text.view());
    CHECK(r[0].reason == "orders[3]@12: value: avro: payload is truncated");
    CHECK(r[0].input == "orders[3]@12");
    CHECK(r[0].topic == "orders");
    CHECK(r[0].partition == 3);
    CHECK(r[0].offset == 12);
    CHECK(r[0].stage == "kconsume");
  }
}
