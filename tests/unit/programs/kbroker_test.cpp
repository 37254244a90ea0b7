// kbroker's --topic NAME[:PARTITIONS]. Serving needs no test here: every
// integration test runs against it.
#include "kpipe/programs/kbroker.h"

#include <catch2/catch.hpp>

using namespace kpipe;

namespace {

std::string spec_error(const std::string& text) {
  auto s = parse_topic_spec(text, 4);
  INFO("--topic " << text);
  if (s) FAIL("accepted");
  CHECK(s.error().status == ExitStatus::kUsage);
  return s.error().message;
}

}  // namespace

TEST_CASE("parse_topic_spec: a name and a partition count", "[kbroker]") {
  auto s = parse_topic_spec("events:8", 4);
  REQUIRE(s.ok());
  CHECK(s->name == "events");
  CHECK(s->partitions == 8);
  s = parse_topic_spec("events", 4);
  REQUIRE(s.ok());
  CHECK(s->partitions == 4);
}

TEST_CASE("parse_topic_spec: a name Kafka would refuse is refused", "[kbroker]") {
  CHECK(spec_error("bad topic!:3") ==
        "--topic 'bad topic!:3': invalid topic name 'bad topic!': only ASCII letters, digits, '.', "
        "'_' and '-' are allowed");
  CHECK(spec_error("..") == "--topic '..': '..' is not a valid topic name");
  CHECK(spec_error(":3") == "--topic ':3': the topic name is missing");
  CHECK(spec_error("t:0") == "--topic 't:0': the partition count must be a number from 1 to 10000");
}
