// The pure parts of kconsume: --from, --partitions and where a partition
// starts; and what -g commits, against librdkafka's mock cluster. The rest
// of the loop is tested in integration/.
#include "kpipe/programs/kconsume.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <csignal>
#include <limits>
#include <thread>

#include "fakes.h"
#include "helpers.h"
#include "kpipe/kafka/client.h"

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
    auto producer = Producer::create(*config, reporter);
    REQUIRE(producer.ok());
    for (int n = 0; n < 50; ++n) {
      std::string value = "{\"n\":" + std::to_string(n) + "}";
      REQUIRE((*producer)->produce("t", 0, std::nullopt, value, {}, 0).ok());
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

  auto group = Consumer::create(*config, "g", reporter);
  REQUIRE(group.ok());
  auto committed = (*group)->committed({{"t", 0}});
  REQUIRE(committed.ok());
  REQUIRE((*committed)[0].has_value());
  CHECK(*(*committed)[0] == 5);
}
