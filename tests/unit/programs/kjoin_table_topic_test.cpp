#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "fakes.h"
#include "kpipe/kafka/client.h"
#include "kpipe/kafka/mock_cluster.h"
#include "kpipe/programs/kjoin_internal.h"

// kjoin's table in a topic, on its own, against librdkafka's mock cluster
// in the process: read to its end, the newest value of a key winning and a
// tombstone deleting, a record with no key left out and told of once, and
// the count at exit; a topic that is not there, and no brokers.

namespace kpipe {
namespace {

using kjoin_internal::JoinPlan;
using kjoin_internal::TableSource;

struct TopicTableRun {
  TopicTableRun() {
    auto m = MockCluster::create(1, reporter);
    REQUIRE(m.ok());
    mock = std::move(*m);
    REQUIRE(mock->create_topic("users", 1).ok());
    options.table = "kafka:users";
    options.kafka.brokers = mock->bootstraps();
    plan.table = Target{TargetKind::kKafka, "users", ""};
    plan.kind = &kjoin_internal::kTopicTable;
  }
  ~TopicTableRun() { ::close(null_fd); }

  void produce(std::optional<std::string_view> key, std::optional<std::string_view> value) {
    auto config = resolve_kafka_config(options.kafka, nullptr);
    REQUIRE(config.ok());
    SystemClock real;
    auto producer = Producer::create(*config, reporter, real);
    REQUIRE(producer.ok());
    REQUIRE((*producer)->produce("users", 0, key, value, {}, 1000).ok());
    REQUIRE((*producer)->flush(10 * kSecond).ok());
  }

  Expected<std::unique_ptr<TableSource>> open() { return plan.kind->open(plan, options, io); }

  std::string row(std::string_view key) const {
    auto found = engine.find(key);
    return found ? std::string(*found) : std::string("(none)");
  }

  RecordingReporter reporter;
  std::unique_ptr<MockCluster> mock;
  JoinPlan plan;
  JoinOptions options;
  int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  Output out{null_fd};
  FakeClock clock{1795946400000};
  Io io{out, reporter, clock, nullptr, "kjoin", nullptr};
  JoinEngine engine{JoinMode::kLookup, true, 0, 0, clock};
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
  REQUIRE(source.ok());
  REQUIRE(*source != nullptr);
  CHECK((*source)->rows_saved());
  REQUIRE((*source)->kafka_config() != nullptr);
  CHECK((*source)->kafka_config()->brokers() == t.mock->bootstraps());
  (*source)->set_on_error(OnError::kSkip);
  REQUIRE((*source)->load(t.engine).ok());
  CHECK(t.engine.rows() == 1);
  CHECK(t.row("u1") == R"({"n":"b"})");
  CHECK(t.row("u2") == "(none)");
  const std::string first =
      "left out a bad table row (--on-error skip): table topic 'users': partition 0 offset 4: "
      "the record has no key";
  CHECK(t.reporter.warnings == std::vector<std::string>{first});
  // One bad record was told as it came: nothing more at exit.
  (*source)->at_exit(t.reporter);
  CHECK(t.reporter.warnings.size() == 1);

  // Followed: a new record comes with the next catch-up; a second bad one
  // is counted, not told, until exit.
  t.produce("u2", R"({"n":"d"})");
  t.produce(std::nullopt, R"({"n":"no key again"})");
  REQUIRE((*source)->catch_up(t.engine).ok());
  CHECK(t.row("u2") == R"({"n":"d"})");
  CHECK((*source)->skipped() == 2);
  CHECK(t.reporter.warnings.size() == 1);
  (*source)->at_exit(t.reporter);
  CHECK(t.reporter.warnings == std::vector<std::string>{first, "left out 2 bad table rows in all"});
}

TEST_CASE("kjoin topic table: under --on-error fail a record with no key fails the read",
          "[kjoin][kjoin_table_topic]") {
  TopicTableRun t;
  t.produce(std::nullopt, R"({"n":"no key"})");
  auto source = t.open();
  REQUIRE(source.ok());
  Status loaded = (*source)->load(t.engine);
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.error().status == ExitStatus::kDataError);
  CHECK(loaded.error().message ==
        "table topic 'users': partition 0 offset 0: the record has no key");
}

TEST_CASE("kjoin topic table: a topic that is not there is a usage error",
          "[kjoin][kjoin_table_topic]") {
  TopicTableRun t;
  t.plan.table.location = "nope";
  auto source = t.open();
  REQUIRE(source.ok());
  Status loaded = (*source)->load(t.engine);
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.error().status == ExitStatus::kUsage);
  CHECK(loaded.error().message == "--table: there is no topic 'nope' at " + t.mock->bootstraps());
}

TEST_CASE("kjoin topic table: without brokers it is not opened", "[kjoin][kjoin_table_topic]") {
  TopicTableRun t;
  t.options.kafka.brokers.clear();
  auto source = t.open();
  REQUIRE_FALSE(source.ok());
  CHECK(source.error().status == ExitStatus::kUsage);
  CHECK(source.error().message == "no brokers given: use -b HOST:PORT or set KPIPE_BROKERS");
}

}  // namespace
}  // namespace kpipe
