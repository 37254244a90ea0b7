// kproduce's usage errors, which come before any broker is asked (the
// brokers named here do not exist). Producing is tested in integration/.
#include "kpipe/programs/kproduce.h"

#include <catch2/catch.hpp>

#include "fakes.h"
#include "helpers.h"

using namespace kpipe;
using kpipe::test::TempDir;

namespace {

Status produce(ProduceOptions o) {
  TempDir dir;
  auto out = Output::open_append(dir.file("out"));
  REQUIRE(out.ok());
  RecordingReporter reporter;
  FakeClock clock;
  Io io{**out, reporter, clock, nullptr, "kproduce", nullptr, false};
  o.kafka.brokers = "127.0.0.1:1";
  o.kafka.timeout = "1ms";
  Status s = run_produce(o, io);
  CHECK(reporter.warnings.empty());
  return s;
}

std::string usage_error_of(ProduceOptions o) {
  Status s = produce(std::move(o));
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().status == ExitStatus::kUsage);
  return s.error().message;
}

}  // namespace

TEST_CASE("kproduce: -p takes partitions from 0, not the partitioner's -1", "[kproduce]") {
  ProduceOptions o;
  o.topic = "events";
  o.partition = -1;
  CHECK(usage_error_of(o) == "-p -1: a partition is a number from 0");
  o.partition = int64_t{1} << 31;
  CHECK(usage_error_of(o) == "-p 2147483648: a partition is a number from 0");
  o.partition = 0;
  o.keep_partition = true;
  o.envelope = true;
  CHECK(usage_error_of(o) == "--keep-partition and --partition cannot be combined");
}

TEST_CASE("kproduce: a topic name Kafka refuses is refused before any broker", "[kproduce]") {
  for (std::string_view topic : {"bad topic!", "."}) {
    ProduceOptions o;
    o.topic = topic;
    CHECK(usage_error_of(o) == (topic == "."
                                    ? "'.' is not a valid topic name"
                                    : "invalid topic name 'bad topic!': only ASCII letters, "
                                      "digits, '.', '_' and '-' are allowed"));
  }
}

TEST_CASE("kproduce: the default transactional id is stable, and differs by topic and store",
          "[kproduce]") {
  std::string id = default_transactional_id("events-clean", "/srv/p/s.db");
  CHECK(id.starts_with("kpipe-events-clean-"));
  CHECK(id.size() == std::string("kpipe-events-clean-").size() + 16);
  CHECK(default_transactional_id("events-clean", "/srv/p/s.db") == id);
  CHECK(default_transactional_id("events-other", "/srv/p/s.db") != id);
  CHECK(default_transactional_id("events-clean", "/srv/q/s.db") != id);
}

TEST_CASE("kproduce: --transactional's options are refused alone, before any broker",
          "[kproduce]") {
  ProduceOptions o;
  o.topic = "events";
  o.transactional = true;
  CHECK(usage_error_of(o) ==
        "--transactional needs --state STORE: the pipeline's checkpoints complete there");
  o.transactional = false;
  o.state = "s.db";
  CHECK(usage_error_of(o) == "--state and --transactional-id go with --transactional");
  o.state.clear();
  o.transactional_id = "mine";
  CHECK(usage_error_of(o) == "--state and --transactional-id go with --transactional");
}

TEST_CASE("kproduce: --explicit-hash-key is a Kinesis stream's, refused for a Kafka topic",
          "[kproduce]") {
  ProduceOptions o;
  o.topic = "events";
  o.explicit_hash_key = ".h";
  CHECK(usage_error_of(o) ==
        "--explicit-hash-key places records in a Kinesis stream's shards: a Kafka topic's "
        "records go by their key or -p (give -t kinesis:STREAM)");
}
