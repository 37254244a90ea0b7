#include "kpipe/programs/dlq_targets.h"

#include <catch2/catch.hpp>

#include "fakes.h"
#include "helpers.h"

using namespace kpipe;
using kpipe::test::TempDir;

TEST_CASE("open_dead_letter_sink and make_bad_input_handler: targets and usage errors",
          "[dead_letter]") {
  TempDir dir;
  std::string path = dir.file("dlq.db");
  FakeClock clock{1795947330123};
  RecordingReporter reporter;
  CHECK(open_dead_letter_sink("", nullptr, reporter, clock).error().message ==
        "--on-error dlq needs --dlq FILE.db or --dlq kafka:TOPIC");
  CHECK(open_dead_letter_sink("kafka:", nullptr, reporter, clock).error().message ==
        "--dlq 'kafka:': the topic name is missing");
  CHECK(open_dead_letter_sink("kafka:bad", nullptr, reporter, clock).error().message ==
        "--dlq 'kafka:bad' needs brokers: use -b or set KPIPE_BROKERS");
  auto sink = open_dead_letter_sink(path, nullptr, reporter, clock);
  REQUIRE(sink.ok());
  CHECK((*sink)->describe() == path);

  std::string out_path = dir.file("out");
  auto out = Output::open_append(out_path);
  REQUIRE(out.ok());
  Io io{**out, reporter, clock, nullptr, "kdedup", nullptr, false};
  auto h = make_bad_input_handler(ErrorOptions{"dlq", ""}, "kdedup", io);
  REQUIRE_FALSE(h.ok());
  CHECK(h.error().status == ExitStatus::kUsage);
  CHECK(h.error().message == "--on-error dlq needs --dlq FILE.db or --dlq kafka:TOPIC");
  CHECK(make_bad_input_handler(ErrorOptions{"sometimes", ""}, "kdedup", io).error().message ==
        "unknown --on-error mode 'sometimes' (expected fail, dlq or skip)");
  auto kafka_without_brokers =
      make_bad_input_handler(ErrorOptions{"dlq", "kafka:dead"}, "kdedup", io);
  REQUIRE_FALSE(kafka_without_brokers.ok());
  CHECK(kafka_without_brokers.error().status == ExitStatus::kUsage);
  auto fail_with_store = make_bad_input_handler(ErrorOptions{"fail", path}, "kdedup", io);
  REQUIRE(fail_with_store.ok());
  CHECK((*fail_with_store)->mode() == OnError::kFail);
  CHECK((*fail_with_store)->has_sink());
  auto skip = make_bad_input_handler(ErrorOptions{"skip", ""}, "kdedup", io);
  REQUIRE(skip.ok());
  CHECK_FALSE((*skip)->has_sink());
}

TEST_CASE("make_bad_input_handler: --dlq without --on-error means dlq", "[dead_letter]") {
  TempDir dir;
  std::string path = dir.file("dlq.db");
  FakeClock clock{1795947330123};
  RecordingReporter reporter;
  auto out = Output::open_append(dir.file("out"));
  REQUIRE(out.ok());
  Io io{**out, reporter, clock, nullptr, "kdedup", nullptr, false};
  auto implied = make_bad_input_handler(ErrorOptions{"", path}, "kdedup", io);
  REQUIRE(implied.ok());
  CHECK((*implied)->mode() == OnError::kDlq);
  auto neither = make_bad_input_handler(ErrorOptions{"", ""}, "kdedup", io);
  REQUIRE(neither.ok());
  CHECK((*neither)->mode() == OnError::kFail);
  auto skip = make_bad_input_handler(ErrorOptions{"skip", path}, "kdedup", io);
  REQUIRE(skip.ok());
  CHECK((*skip)->mode() == OnError::kSkip);
  // A Kafka target with brokers from the program's own -b.
  KafkaOptions kafka;
  auto no_brokers = make_bad_input_handler(ErrorOptions{"", "kafka:dead"}, "kdedup", io, kafka);
  REQUIRE_FALSE(no_brokers.ok());
  CHECK(no_brokers.error().message.find("broker") != std::string::npos);
}
