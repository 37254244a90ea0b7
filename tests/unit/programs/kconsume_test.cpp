// The pure parts of kconsume: --from, --until, --partitions and where a
// partition starts and ends; and what -g commits and where --until stops,
// against librdkafka's mock cluster. The rest of the loop is tested in
// integration/.
#include "kpipe/programs/kconsume.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <csignal>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "fake_log.h"
#include "fakes.h"
#include "helpers.h"
#include "kpipe/control.h"
#include "kpipe/kafka/client.h"
#include "kpipe/kafka/mock_cluster.h"
#include "kpipe/programs/kconsume_internal.h"
#include "kpipe/store/state_store.h"

using namespace kpipe;
using Kind = StartPosition::Kind;

namespace {

constexpr Millis kNow = 1795947330123;  // date -u -d 2026-11-29T10:15:30.123Z +%s%3N

StartPosition from(std::string_view text) {
  auto p = parse_start_position(text, kNow);
  INFO("--from " << text);
  if (!p) FAIL("refused: " << p.error().message);
  return *p;
}

std::string from_error(std::string_view text) {
  auto p = parse_start_position(text, kNow);
  INFO("--from " << text);
  if (p) FAIL("accepted");
  CHECK(p.error().status == ExitStatus::kUsage);
  return p.error().message;
}

std::vector<int32_t> partitions(std::string_view text) {
  auto p = parse_partition_list(text);
  INFO("--partitions " << text);
  if (!p) FAIL("refused: " << p.error().message);
  return *p;
}

std::string partitions_error(std::string_view text) {
  auto p = parse_partition_list(text);
  INFO("--partitions " << text);
  if (p) FAIL("accepted");
  CHECK(p.error().status == ExitStatus::kUsage);
  return p.error().message;
}

}  // namespace

TEST_CASE("parse_start_position: names", "[consume]") {
  CHECK(from("earliest").kind == Kind::kEarliest);
  CHECK(from("beginning").kind == Kind::kEarliest);
  CHECK(from("latest").kind == Kind::kLatest);
  CHECK(from("end").kind == Kind::kLatest);
}

TEST_CASE("parse_start_position: offsets and counts back from the end", "[consume]") {
  CHECK(from("0").kind == Kind::kOffset);
  CHECK(from("0").value == 0);
  CHECK(from("1043").value == 1043);
  CHECK(from("9223372036854775807").value == std::numeric_limits<int64_t>::max());
  CHECK(from("-5").kind == Kind::kFromEnd);
  CHECK(from("-5").value == 5);
  CHECK(from("-0").kind == Kind::kFromEnd);
  CHECK(from("-0").value == 0);
}

TEST_CASE("parse_start_position: times", "[consume]") {
  StartPosition p = from("@2026-11-29T10:15:30.123Z");
  CHECK(p.kind == Kind::kTime);
  CHECK(p.value == 1795947330123);
  CHECK(from("@2026-11-29T12:15:30+02:00").value == 1795947330000);
  CHECK(from("@1764412345123").value == 1764412345123);
  CHECK(from("@now").value == kNow);
  CHECK(from("@-5m").value == kNow - 5 * 60 * 1000);
  CHECK(from("@-1h30m").value == kNow - 90 * 60 * 1000);
}

TEST_CASE("parse_start_position: every invalid form", "[consume]") {
  CHECK(from_error("earlist") == "--from 'earlist': did you mean 'earliest'?");
  CHECK(from_error("lates") == "--from 'lates': did you mean 'latest'?");
  CHECK(from_error("yesterday") ==
        "--from 'yesterday': expected earliest, latest, an offset, -N or @TIME");
  CHECK(from_error("") == "--from '': expected earliest, latest, an offset, -N or @TIME");
  CHECK(from_error("-") == "--from '-': expected earliest, latest, an offset, -N or @TIME");
  CHECK(from_error("+5") == "--from '+5': expected earliest, latest, an offset, -N or @TIME");
  CHECK(from_error("5x") == "--from '5x': expected earliest, latest, an offset, -N or @TIME");
  CHECK(from_error("1.5") == "--from '1.5': expected earliest, latest, an offset, -N or @TIME");
  CHECK(from_error("99999999999999999999") ==
        "--from '99999999999999999999': expected earliest, latest, an offset, -N or @TIME");
  CHECK(from_error("@").starts_with("--from '@': "));
  CHECK(from_error("@2026-13-01T00:00:00Z").starts_with("--from '@2026-13-01T00:00:00Z': "));
  CHECK(from_error("@soon").starts_with("--from '@soon': "));
}

TEST_CASE("parse_start_position: a doubled minus is not a count from the end", "[consume]") {
  // "--5" once read as "5 records after the end", past the high watermark.
  CHECK(from_error("--5") == "--from '--5': expected earliest, latest, an offset, -N or @TIME");
  CHECK(from_error("-+5") == "--from '-+5': expected earliest, latest, an offset, -N or @TIME");
}

TEST_CASE("parse_partition_list: lists and ranges, sorted and unique", "[consume]") {
  CHECK(partitions("0") == std::vector<int32_t>{0});
  CHECK(partitions("0,2-5") == std::vector<int32_t>{0, 2, 3, 4, 5});
  CHECK(partitions("7,1,3-4,1,4") == std::vector<int32_t>{1, 3, 4, 7});
  CHECK(partitions("3-3") == std::vector<int32_t>{3});
  CHECK(partitions("2147483646-2147483647") == std::vector<int32_t>{2147483646, 2147483647});
}

TEST_CASE("parse_partition_list: every invalid form", "[consume]") {
  for (const char* bad : {"", "a", "1-", "-1", "5-2", "1,,2", "1,", ",1", " 1", "1 ", "1-2-3",
                          "1.5", "2147483648", "0x1", "1-a"}) {
    INFO(bad);
    CHECK(partitions_error(bad) ==
          "--partitions '" + std::string(bad) + "': expected a list like 0,2-5");
  }
}

TEST_CASE("parse_partition_list: a range too large to list is refused", "[consume]") {
  // 0-2147483647 once looped forever (the int32 counter overflowed).
  CHECK(partitions_error("0-2147483647") == "--partitions '0-2147483647': too many partitions");
  CHECK(partitions_error("0-99999999") == "--partitions '0-99999999': too many partitions");
}

TEST_CASE("resolve_start: each --from against the watermarks", "[consume]") {
  auto at = [](Kind k, int64_t v) { return StartPosition{k, v}; };
  // low 100, high 250: records 100..249 are there.
  CHECK(resolve_start(at(Kind::kEarliest, 0), 100, 250, 0) == 100);
  CHECK(resolve_start(at(Kind::kLatest, 0), 100, 250, 0) == 250);
  CHECK(resolve_start(at(Kind::kOffset, 120), 100, 250, 0) == 120);
  CHECK(resolve_start(at(Kind::kOffset, 5), 100, 250, 0) == 100);    // already deleted
  CHECK(resolve_start(at(Kind::kOffset, 900), 100, 250, 0) == 250);  // not there yet
  CHECK(resolve_start(at(Kind::kFromEnd, 10), 100, 250, 0) == 240);
  CHECK(resolve_start(at(Kind::kFromEnd, 0), 100, 250, 0) == 250);
  CHECK(resolve_start(at(Kind::kFromEnd, 1000), 100, 250, 0) == 100);
  CHECK(resolve_start(at(Kind::kFromEnd, std::numeric_limits<int64_t>::max()), 100, 250, 0) == 100);
  CHECK(resolve_start(at(Kind::kTime, kNow), 100, 250, 180) == 180);
  CHECK(resolve_start(at(Kind::kTime, kNow), 100, 250, 40) == 100);
  CHECK(resolve_start(at(Kind::kTime, kNow), 100, 250, 251) == 250);
  // An empty partition.
  for (Kind k : {Kind::kEarliest, Kind::kLatest, Kind::kOffset, Kind::kFromEnd, Kind::kTime})
    CHECK(resolve_start(at(k, 3), 0, 0, 0) == 0);
}

TEST_CASE("kconsume -g commits the records its reader has read, not those left in the pipe",
          "[consume]") {
  // The reader takes 5 lines and dies while 45 more sit in the pipe: the
  // group must resume after the 5th record, where nothing is lost.
  auto previous = std::signal(SIGPIPE, SIG_IGN);
  RecordingReporter reporter;
  auto mock = MockCluster::create(1, reporter);
  REQUIRE(mock.ok());
  REQUIRE((*mock)->create_topic("t", 1).ok());
  KafkaOptions k;
  k.brokers = (*mock)->bootstraps();
  auto config = resolve_kafka_config(k, nullptr);
  REQUIRE(config.ok());
  {
    SystemClock clock;
    auto producer = Producer::create(*config, reporter, clock);
    REQUIRE(producer.ok());
    for (int n = 0; n < 50; ++n) {
      std::string value = "{\"n\":" + std::to_string(n) + "}";
      REQUIRE((*producer)->write("t", 0, std::nullopt, value, {}, 0).ok());
    }
    REQUIRE((*producer)->flush(10 * kSecond).ok());
  }

  ConsumeOptions o;
  o.kafka = k;
  o.topics = {"t"};
  o.group = "g";
  o.count = 50;
  o.format = "value";
  test::Pipe pipe;
  std::string got;
  std::thread reader([&] {
    char ch;
    int lines = 0;
    while (lines < 5 && ::read(pipe.read_end, &ch, 1) == 1) {
      got.push_back(ch);
      if (ch == '\n') ++lines;
    }
    pipe.close_read();
  });
  FakeClock clock(1795946400000);  // no commit interval passes: only the final commit
  Status s;
  {
    Output out(pipe.write_end);
    Io io{out, reporter, clock, nullptr, "kconsume", nullptr, false};
    s = run_consume(o, io);
  }
  reader.join();
  std::signal(SIGPIPE, previous);
  REQUIRE(s.ok());
  CHECK(got == "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n");

  SystemClock real;
  auto group = Consumer::create(*config, "g", reporter, real);
  REQUIRE(group.ok());
  auto committed = (*group)->committed({{"t", 0}});
  REQUIRE(committed.ok());
  REQUIRE((*committed)[0].has_value());
  CHECK(*(*committed)[0] == 5);
}

// --- --until -------------------------------------------------------------------------

namespace {

using EndKind = EndPosition::Kind;

EndPosition until(std::string_view text) {
  auto p = parse_end_position(text, kNow);
  INFO("--until " << text);
  if (!p) FAIL("refused: " << p.error().message);
  return *p;
}

std::string until_error(std::string_view text) {
  auto p = parse_end_position(text, kNow);
  INFO("--until " << text);
  if (p) FAIL("accepted");
  CHECK(p.error().status == ExitStatus::kUsage);
  return p.error().message;
}

}  // namespace

TEST_CASE("parse_end_position: none, offsets and --from's times", "[consume]") {
  CHECK(until("").kind == EndKind::kNone);
  CHECK(until("0").kind == EndKind::kOffset);
  CHECK(until("0").value == 0);
  CHECK(until("1043").value == 1043);
  CHECK(until("9223372036854775807").value == std::numeric_limits<int64_t>::max());
  EndPosition t = until("@2026-11-29T10:15:30.123Z");
  CHECK(t.kind == EndKind::kTime);
  CHECK(t.value == 1795947330123);
  CHECK(until("@2026-11-29T12:15:30+02:00").value == 1795947330000);
  CHECK(until("@1764412345123").value == 1764412345123);
  CHECK(until("@now").value == kNow);
  CHECK(until("@-1h30m").value == kNow - 90 * 60 * 1000);
}

TEST_CASE("parse_end_position: every invalid form", "[consume]") {
  for (const char* bad :
       {"-5", "--5", "+5", "5x", "1.5", "latest", "earliest", " 5", "99999999999999999999"}) {
    INFO(bad);
    CHECK(until_error(bad) == "--until '" + std::string(bad) + "': expected an offset or @TIME");
  }
  CHECK(until_error("@").starts_with("--until '@': "));
  CHECK(until_error("@2026-13-01T00:00:00Z").starts_with("--until '@2026-13-01T00:00:00Z': "));
  CHECK(until_error("@soon").starts_with("--until '@soon': "));
}

TEST_CASE("resolve_end: the offset given, or the broker's for the time", "[consume]") {
  CHECK(resolve_end({EndKind::kNone, 0}, 0) == kNoEnd);
  CHECK(resolve_end({EndKind::kOffset, 5}, 0) == 5);
  // Not clamped to the high watermark: the partition waits for offset 900.
  CHECK(resolve_end({EndKind::kOffset, 900}, 0) == 900);
  CHECK(resolve_end({EndKind::kTime, kNow}, 180) == 180);
  CHECK(resolve_end({EndKind::kTime, kNow}, 0) == 0);
}

namespace {

constexpr Millis kBase = 1764412345000;  // the records' first timestamp

// Two partitions of "t" on librdkafka's mock cluster, 10 records each, the
// record at offset i stamped kBase + i seconds.
struct UntilCluster {
  RecordingReporter reporter;
  std::unique_ptr<MockCluster> mock;
  KafkaOptions kafka;

  UntilCluster() {
    auto m = MockCluster::create(1, reporter);
    REQUIRE(m.ok());
    mock = std::move(*m);
    REQUIRE(mock->create_topic("t", 2).ok());
    kafka.brokers = mock->bootstraps();
    auto config = resolve_kafka_config(kafka, nullptr);
    REQUIRE(config.ok());
    SystemClock clock;
    auto producer = Producer::create(*config, reporter, clock);
    REQUIRE(producer.ok());
    for (int32_t p = 0; p < 2; ++p)
      for (int i = 0; i < 10; ++i) {
        std::string value = fmt::format("[{},{}]", p, i);
        REQUIRE((*producer)->write("t", p, std::nullopt, value, {}, kBase + i * 1000).ok());
      }
    REQUIRE((*producer)->flush(10 * kSecond).ok());
  }

  // Runs kconsume (values only) to its end; a run that does not end within
  // a minute is stopped, and fails on its output rather than hanging.
  std::string consume(ConsumeOptions o) {
    o.kafka = kafka;
    o.topics = {"t"};
    o.format = "value";
    test::TempDir dir;
    std::string path = dir.file("out");
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    std::atomic<bool> stop{false};
    std::mutex mu;
    std::condition_variable cv;
    bool finished = false;
    std::thread watchdog([&] {
      std::unique_lock lock(mu);
      if (!cv.wait_for(lock, std::chrono::seconds(60), [&] { return finished; })) stop = true;
    });
    FakeClock clock(kNow);
    Status s;
    {
      Output out(fd);
      Io io{out, reporter, clock, &stop, "kconsume", nullptr, false};
      s = run_consume(o, io);
    }
    {
      std::lock_guard lock(mu);
      finished = true;
    }
    cv.notify_one();
    watchdog.join();
    ::close(fd);
    REQUIRE(s.ok());
    CHECK_FALSE(stop.load());
    // Per partition in order; partitions sorted, as they interleave.
    std::string text = test::read_file(path);
    std::vector<std::string> lines;
    for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1)
      lines.push_back(text.substr(at, nl - at));
    std::stable_sort(lines.begin(), lines.end(),
                     [](const std::string& a, const std::string& b) { return a[1] < b[1]; });
    std::string sorted;
    for (const auto& l : lines) sorted += l + " ";
    return sorted;
  }

  std::optional<int64_t> committed(const std::string& group, int32_t partition) {
    auto config = resolve_kafka_config(kafka, nullptr);
    REQUIRE(config.ok());
    SystemClock clock;
    auto c = Consumer::create(*config, group, reporter, clock);
    REQUIRE(c.ok());
    auto got = (*c)->committed({{"t", partition}});
    REQUIRE(got.ok());
    return (*got)[0];
  }
};

}  // namespace

TEST_CASE("kconsume --until OFFSET ends each partition before it, without -e", "[consume]") {
  UntilCluster cluster;
  ConsumeOptions o;
  o.until = "3";
  CHECK(cluster.consume(o) == "[0,0] [0,1] [0,2] [1,0] [1,1] [1,2] ");
  // A partition that starts at or past its end gives nothing, and ends.
  o.from = "3";
  CHECK(cluster.consume(o) == "");
  o.from = "7";
  CHECK(cluster.consume(o) == "");
  o.until = "0";
  o.from = "earliest";
  CHECK(cluster.consume(o) == "");
  // With -e, whichever end comes first: the partition's own end at 10.
  o.until = "12";
  o.exit_at_end = true;
  o.from = "8";
  CHECK(cluster.consume(o) == "[0,8] [0,9] [1,8] [1,9] ");
  o.until = "9";
  CHECK(cluster.consume(o) == "[0,8] [1,8] ");
}

TEST_CASE("kconsume --from @A --until @B reads the records from A up to B, B left out",
          "[consume]") {
  UntilCluster cluster;
  ConsumeOptions o;
  o.from = "@" + std::to_string(kBase + 2000);
  o.until = "@" + std::to_string(kBase + 5000);
  CHECK(cluster.consume(o) == "[0,2] [0,3] [0,4] [1,2] [1,3] [1,4] ");
  // Between two records' times: the record at the end's time is left out,
  // the one after the start's time is in.
  o.from = "@" + std::to_string(kBase + 7500);
  o.until = "@" + std::to_string(kBase + 9000);
  CHECK(cluster.consume(o) == "[0,8] [1,8] ");
  // No record at or after the end's time: the partitions end where they
  // ended when kconsume asked, without -e.
  o.until = "@" + std::to_string(kBase + 60000);
  CHECK(cluster.consume(o) == "[0,8] [0,9] [1,8] [1,9] ");
  o.from = "earliest";
  o.until = "@" + std::to_string(kBase - 1);
  CHECK(cluster.consume(o) == "");
}

TEST_CASE("kconsume -g --until commits the end, and the next run goes on from there", "[consume]") {
  UntilCluster cluster;
  ConsumeOptions o;
  o.group = "g";
  o.until = "5";
  CHECK(cluster.consume(o) == "[0,0] [0,1] [0,2] [0,3] [0,4] [1,0] [1,1] [1,2] [1,3] [1,4] ");
  CHECK(cluster.committed("g", 0) == 5);
  CHECK(cluster.committed("g", 1) == 5);
  o.until = "8";
  CHECK(cluster.consume(o) == "[0,5] [0,6] [0,7] [1,5] [1,6] [1,7] ");
  CHECK(cluster.committed("g", 0) == 8);
  // At its end already: nothing read, nothing moved.
  CHECK(cluster.consume(o) == "");
  CHECK(cluster.committed("g", 1) == 8);
}

// --- an instance (kpipe(7), MANY INSTANCES) -----------------------------------------

TEST_CASE("kconsume: an instance's first line names it, before it joins the group",
          "[consume][group]") {
  RecordingReporter reporter;
  auto mock = MockCluster::create(1, reporter);
  REQUIRE(mock.ok());
  REQUIRE((*mock)->create_topic("t", 2).ok());
  test::TempDir dir;
  ConsumeOptions o;
  o.kafka.brokers = (*mock)->bootstraps();
  o.topics = {"t"};
  o.group = "g";
  o.state = dir.file("s.db");
  o.instance = "east";
  std::string out_path = dir.file("out");
  int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  FakeClock clock(1795946400000);
  Status s;
  {
    Output out(fd);
    // Stopped at once (SIGTERM): the line is written before anything else.
    std::atomic<bool> stop{true};
    Io io{out, reporter, clock, &stop, "kconsume", nullptr, false};
    s = run_consume(o, io);
  }
  ::close(fd);
  REQUIRE(s.ok());
  std::string got = test::read_file(out_path);
  std::string first = got.substr(0, got.find('\n'));
  auto line = parse_instance_line(first);
  REQUIRE(line.ok());
  REQUIRE(*line);
  CHECK((*line)->name == "east");
  CHECK((*line)->group == "g");
  CHECK((*line)->pipeline.size() == 16);
  CHECK(got == first + "\n");
}

TEST_CASE("kconsume --instance names an instance of a consumer group only", "[consume]") {
  RecordingReporter reporter;
  FakeClock clock(1795946400000);
  ConsumeOptions o;
  o.kafka.brokers = "127.0.0.1:1";
  o.topics = {"t"};
  o.instance = "east";
  test::Pipe pipe;
  Output out(pipe.write_end);
  Io io{out, reporter, clock, nullptr, "kconsume", nullptr, false};
  Status s = run_consume(o, io);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().status == ExitStatus::kUsage);
  CHECK(s.error().message.starts_with("--instance names an instance of a consumer group"));
}

// --- any log, through its reader (kpipe/log.h) ----------------------------------------

namespace {

// kconsume over a log in memory whose positions are 100, 110, 120, ...:
// what it writes, checkpoints and resumes from is what the log says, not
// an offset it computed.
struct FakeLogRun {
  FakeLog log{100, 10};
  RecordingReporter reporter;
  test::TempDir dir;
  std::string state = dir.file("state.db");

  FakeLogRun() {
    log.add("t", 2);
    for (int32_t p = 0; p < 2; ++p)
      for (int i = 0; i < 3; ++i)
        log.append("t", p, std::nullopt, fmt::format("[{},{}]", p, i), kBase + i * 1000);
  }

  // One run of kconsume -e; its output's lines.
  std::vector<std::string> consume(ConsumeOptions o) {
    o.kafka.brokers = "in-memory:9092";  // resolved, never reached: the log is the fake
    o.topics = {"t"};
    o.exit_at_end = true;
    std::string path = dir.file("out");
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    FakeClock clock(kNow);
    Status s;
    {
      Output out(fd);
      Io io{out, reporter, clock, nullptr, "kconsume", nullptr, false};
      s = run_consume(o, io,
                      [this](const KafkaLog&,
                             const KafkaLog::ReaderSettings& settings) -> Expected<OpenedReader> {
                        CHECK(settings.group.empty());
                        OpenedReader r;
                        r.log = std::make_unique<FakeLog>(log);  // the same partitions
                        return r;
                      });
    }
    ::close(fd);
    REQUIRE(s.ok());
    std::string text = test::read_file(path);
    std::vector<std::string> lines;
    for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1)
      lines.push_back(text.substr(at, nl - at));
    return lines;
  }

  // The records' values, in order per partition, partitions in turn.
  static std::string values(const std::vector<std::string>& lines) {
    std::string out;
    for (const auto& l : lines) {
      auto at = l.find("\"value\":");
      if (at == std::string::npos || l.starts_with("{\"$kpipe\"")) continue;
      out += l.substr(at + 8, l.find(']', at) - at - 7) + " ";
    }
    return out;
  }
};

}  // namespace

TEST_CASE("kconsume over any log: records with the log's positions, every partition to its end",
          "[consume][log]") {
  FakeLogRun run;
  auto lines = run.consume({});
  REQUIRE(lines.size() == 6);
  CHECK(FakeLogRun::values(lines) == "[0,0] [0,1] [0,2] [1,0] [1,1] [1,2] ");
  CHECK(lines[0].find("\"topic\":\"t\",\"partition\":0,\"offset\":100,") != std::string::npos);
  CHECK(lines[5].find("\"partition\":1,\"offset\":120,") != std::string::npos);
  CHECK(run.log.closed_by_reader());
  // --from by time, through the log's own lookup: from the second record.
  ConsumeOptions o;
  o.from = "@" + std::to_string(kBase + 1000);
  CHECK(FakeLogRun::values(run.consume(o)) == "[0,1] [0,2] [1,1] [1,2] ");
}

// A Kinesis split: partition 0 closes, and its child 2 is read after it.
TEST_CASE("kconsume over any log: a partition the log adds is announced, read and checkpointed",
          "[consume][log]") {
  FakeLogRun run;
  run.log.close_partition("t", 0);
  run.log.add_child("t", 2, 0);
  run.log.append("t", 2, std::nullopt, "[2,0]", kBase + 5000);
  ConsumeOptions o;
  o.state = run.state;
  auto lines = run.consume(o);
  CHECK(FakeLogRun::values(lines) == "[0,0] [0,1] [0,2] [1,0] [1,1] [1,2] [2,0] ");
  std::vector<std::string> controls;
  for (const auto& l : lines)
    if (l.starts_with(R"({"$kpipe":"partitions")")) controls.push_back(l);
  CHECK(
      controls ==
      std::vector<std::string>{
          R"({"$kpipe":"partitions","event":"assigned","partitions":[{"topic":"t","partition":0},{"topic":"t","partition":1}]})",
          R"({"$kpipe":"partitions","event":"revoked","partitions":[{"topic":"t","partition":0}]})",
          R"({"$kpipe":"partitions","event":"assigned","partitions":[{"topic":"t","partition":2}]})"});
  std::optional<Checkpoint> last;
  for (const auto& l : lines)
    if (auto c = parse_checkpoint(l); c.ok() && *c) last = **c;
  REQUIRE(last);
  // The closed parent is kept too, at its end.
  CHECK(last->offsets == std::vector<PartitionOffset>{{"t", 0, 130}, {"t", 1, 130}, {"t", 2, 110}});
}

TEST_CASE(
    "kconsume over any log: a checkpoint keeps where the log says to resume, and a restart "
    "resumes there",
    "[consume][log]") {
  FakeLogRun run;
  ConsumeOptions o;
  o.state = run.state;
  o.count = 2;
  o.count_given = true;
  auto lines = run.consume(o);
  CHECK(FakeLogRun::values(lines) == "[0,0] [0,1] ");
  std::optional<Checkpoint> last;
  for (const auto& l : lines)
    if (auto c = parse_checkpoint(l); c.ok() && *c) last = **c;
  REQUIRE(last);
  // After the record at 110 the log resumes at 111 (LogEvent::resume),
  // not at 120, where its next record is; partition 1 where it started.
  CHECK(last->offsets == std::vector<PartitionOffset>{{"t", 0, 111}, {"t", 1, 100}});
  {
    auto store = StateStore::open(run.state);
    REQUIRE(store.ok());
    REQUIRE((*store)->complete(*last, "kcheckpoint", kNow).ok());
  }
  run.log.append("t", 0, std::nullopt, "[0,3]", kBase + 3000);
  o.count = 0;
  o.count_given = false;
  lines = run.consume(o);
  CHECK(FakeLogRun::values(lines) == "[0,2] [0,3] [1,0] [1,1] [1,2] ");
  // Caught up, a partition's position is the log's upper bound.
  last.reset();
  for (const auto& l : lines)
    if (auto c = parse_checkpoint(l); c.ok() && *c) last = **c;
  REQUIRE(last);
  CHECK(last->offsets == std::vector<PartitionOffset>{{"t", 0, 140}, {"t", 1, 130}});
}

TEST_CASE("kconsume over any log: a closed partition is at its end for good", "[consume][log]") {
  FakeLogRun run;
  run.log.close_partition("t", 1);
  ConsumeOptions o;
  o.until = "130";  // past every record: the end is the log's, or the partition's closing
  CHECK(FakeLogRun::values(run.consume(o)) == "[0,0] [0,1] [0,2] [1,0] [1,1] [1,2] ");
}
