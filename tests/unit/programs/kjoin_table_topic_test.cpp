#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "fake_log.h"
#include "fakes.h"
#include "kjoin_table_run.h"
#include "kpipe/kafka/client.h"
#include "kpipe/kafka/kafka_log.h"
#include "kpipe/kafka/mock_cluster.h"
#include "kpipe/programs/kjoin_internal.h"

// kjoin's table in a log's partitions, on its own: over a log in memory
// (fake_log.h), read to its end, the newest value of a key winning and a
// tombstone deleting, a record with no key left out and told of once, the
// count at exit, and the positions kept with the rows the log's own; then
// as kjoin opens it for --table kafka:TOPIC, against librdkafka's mock
// cluster in the process: a topic that is not there, and no brokers.

namespace kpipe {
namespace {

using kjoin_internal::JoinPlan;
using kjoin_internal::TableSource;

// A topic's table: kjoin plans it so.
void plan_topic(TableRun& run) {
  run.plan.table = Target{TargetKind::kKafka, "users", ""};
  run.plan.kind = &kjoin_internal::kTopicTable;
}

struct TopicTableRun : TableRun {
  TopicTableRun() : TableRun(true) {
    plan_topic(*this);
    log.add("users", 1);
  }

  void produce(std::optional<std::string> key, std::optional<std::string> value) {
    log.append("users", 0, std::move(key), std::move(value), 1000);
  }

  // The table over the log in memory: each load reads it anew.
  std::unique_ptr<TableSource> open() {
    return kjoin_internal::make_topic_table(
        plan,
        [this]() -> Expected<std::unique_ptr<LogReader>> {
          return std::unique_ptr<LogReader>(std::make_unique<FakeLog>(log));
        },
        "memory", nullptr, io);
  }

  FakeLog log{100, 10};  // positions 100, 110, ...
};

TEST_CASE("kjoin topic table: read to its end, the newest value wins, a tombstone deletes",
          "[kjoin][kjoin_table_topic]") {
  TopicTableRun t;
  t.produce("u1", R"({"n":"a"})");
  t.produce("u2", R"({"n":"c"})");
  t.produce("u1", R"({"n":"b"})");
  t.produce("u2", std::nullopt);
  t.produce(std::nullopt, R"({"n":"no key"})");
  auto source = t.open();
  CHECK(source->rows_saved());
  CHECK(source->kafka_log() == nullptr);
  source->set_on_error(OnError::kSkip);
  REQUIRE(source->load(t.engine).ok());
  CHECK(t.engine.rows() == 1);
  CHECK(t.row("u1") == R"({"n":"b"})");
  CHECK(t.row("u2") == "(none)");
  // Kept with the rows: where the partition resumes after its last record
  // (at 140), as the log says, not where its next record will be (150).
  CHECK(t.engine.offsets() == std::map<int32_t, Position>{{0, 141}});
  const std::string first =
      "left out a bad table row (--on-error skip): table topic 'users': partition 0 offset 140: "
      "the record has no key";
  CHECK(t.reporter.warnings == std::vector<std::string>{first});
  // One bad record was told as it came: nothing more at exit.
  source->at_exit(t.reporter);
  CHECK(t.reporter.warnings.size() == 1);

  // Followed: a new record comes with the next catch-up; a second bad one
  // is counted, not told, until exit.
  t.produce("u2", R"({"n":"d"})");
  t.produce(std::nullopt, R"({"n":"no key again"})");
  REQUIRE(source->catch_up(t.engine).ok());
  CHECK(t.row("u2") == R"({"n":"d"})");
  CHECK(source->skipped() == 2);
  CHECK(t.reporter.warnings.size() == 1);
  source->at_exit(t.reporter);
  CHECK(t.reporter.warnings == std::vector<std::string>{first, "left out 2 bad table rows in all"});
}

TEST_CASE("kjoin topic table: a restored table resumes where its saved positions say",
          "[kjoin][kjoin_table_topic]") {
  TopicTableRun t;
  t.produce("u1", R"({"n":"a"})");
  t.produce("u1", R"({"n":"b"})");
  REQUIRE(t.open()->load(t.engine).ok());
  CHECK(t.engine.offsets() == std::map<int32_t, Position>{{0, 111}});
  // The rows saved and restored (as at a checkpoint and a restart): a
  // second load reads only what came after.
  t.produce("u2", R"({"n":"c"})");
  t.engine.apply("u1", 1000, R"({"n":"restored"})", 0, 111);
  REQUIRE(t.open()->load(t.engine).ok());
  CHECK(t.row("u1") == R"({"n":"restored"})");
  CHECK(t.row("u2") == R"({"n":"c"})");
  CHECK(t.engine.offsets() == std::map<int32_t, Position>{{0, 121}});
}

TEST_CASE("kjoin topic table: a closed partition is read to its end",
          "[kjoin][kjoin_table_topic]") {
  TopicTableRun t;
  t.log.add("users", 2);  // partition 1 beside 0
  t.log.append("users", 1, "u9", R"({"n":"z"})", 1000);
  t.log.close_partition("users", 1);
  t.produce("u1", R"({"n":"a"})");
  REQUIRE(t.open()->load(t.engine).ok());
  CHECK(t.row("u9") == R"({"n":"z"})");
  CHECK(t.row("u1") == R"({"n":"a"})");
}

TEST_CASE("kjoin topic table: under --on-error fail a record with no key fails the read",
          "[kjoin][kjoin_table_topic]") {
  TopicTableRun t;
  t.produce(std::nullopt, R"({"n":"no key"})");
  Status loaded = t.open()->load(t.engine);
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.error().status == ExitStatus::kDataError);
  CHECK(loaded.error().message ==
        "table topic 'users': partition 0 offset 100: the record has no key");
}

TEST_CASE("kjoin topic table: a topic that is not there is a usage error naming the log",
          "[kjoin][kjoin_table_topic]") {
  TopicTableRun t;
  t.plan.table.location = "nope";
  Status loaded = t.open()->load(t.engine);
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.error().status == ExitStatus::kUsage);
  CHECK(loaded.error().message == "--table: there is no topic 'nope' at memory");
}

// As kjoin opens --table kafka:TOPIC.
struct KafkaTableRun : TableRun {
  KafkaTableRun() : TableRun(true) {
    plan_topic(*this);
    auto m = MockCluster::create(1, reporter);
    REQUIRE(m.ok());
    mock = std::move(*m);
    REQUIRE(mock->create_topic("users", 1).ok());
    options.table = "kafka:users";
    options.kafka.brokers = mock->bootstraps();
  }

  Expected<std::unique_ptr<TableSource>> open() { return plan.kind->open(plan, options, io); }

  std::unique_ptr<MockCluster> mock;
};

TEST_CASE("kjoin topic table on Kafka: read through a consumer, its settings shared with --dlq",
          "[kjoin][kjoin_table_topic]") {
  KafkaTableRun t;
  {
    auto log = KafkaLog::open(t.options.kafka, nullptr, t.reporter, t.clock);
    REQUIRE(log.ok());
    auto writer = log->writer();
    REQUIRE(writer.ok());
    REQUIRE(writer->log->write("users", 0, "u1", R"({"n":"a"})", {}, 1000).ok());
    REQUIRE(writer->log->flush(10 * kSecond).ok());
  }
  auto source = t.open();
  REQUIRE(source.ok());
  REQUIRE((*source)->kafka_log() != nullptr);
  CHECK((*source)->kafka_log()->config().brokers() == t.mock->bootstraps());
  REQUIRE((*source)->load(t.engine).ok());
  CHECK(t.row("u1") == R"({"n":"a"})");
  CHECK(t.engine.offsets() == std::map<int32_t, Position>{{0, 1}});
}

TEST_CASE("kjoin topic table on Kafka: a topic that is not there is a usage error",
          "[kjoin][kjoin_table_topic]") {
  KafkaTableRun t;
  t.plan.table.location = "nope";
  auto source = t.open();
  REQUIRE(source.ok());
  Status loaded = (*source)->load(t.engine);
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.error().status == ExitStatus::kUsage);
  CHECK(loaded.error().message == "--table: there is no topic 'nope' at " + t.mock->bootstraps());
}

TEST_CASE("kjoin topic table on Kafka: without brokers it is not opened",
          "[kjoin][kjoin_table_topic]") {
  KafkaTableRun t;
  t.options.kafka.brokers.clear();
  auto source = t.open();
  REQUIRE_FALSE(source.ok());
  CHECK(source.error().status == ExitStatus::kUsage);
  CHECK(source.error().message == "no brokers given: use -b HOST:PORT or set KPIPE_BROKERS");
}

}  // namespace
}  // namespace kpipe
