#include "kpipe/kafka/topic.h"

#include <catch2/catch.hpp>

#include <string>

using namespace kpipe;

namespace {

std::string topic_error(std::string_view name) {
  Status s = check_topic_name(name);
  INFO(name);
  if (s.ok()) FAIL("accepted");
  CHECK(s.error().status == ExitStatus::kUsage);
  return s.error().message;
}

}  // namespace

TEST_CASE("check_topic_name: what Kafka takes", "[kafka_topic]") {
  for (const char* name :
       {"events", "a", "Events.v2", "my_topic-1", "...", "__consumer_offsets", "0"})
    CHECK(check_topic_name(name).ok());
  CHECK(check_topic_name(std::string(kMaxTopicNameLength, 'x')).ok());
}

TEST_CASE("check_topic_name: a bad topic name is refused before a broker creates it",
          "[kafka_topic]") {
  CHECK(
      topic_error("bad topic!") ==
      "invalid topic name 'bad topic!': only ASCII letters, digits, '.', '_' and '-' are allowed");
  CHECK(topic_error("a/b") ==
        "invalid topic name 'a/b': only ASCII letters, digits, '.', '_' and '-' are allowed");
  CHECK(
      topic_error("t\xc3\xa9") ==
      "invalid topic name 't\\xc3\\xa9': only ASCII letters, digits, '.', '_' and '-' are allowed");
  CHECK(topic_error("a\nb") ==
        "invalid topic name 'a\\x0ab': only ASCII letters, digits, '.', '_' and '-' are allowed");
  CHECK(topic_error("") == "the topic name is empty");
  CHECK(topic_error(".") == "'.' is not a valid topic name");
  CHECK(topic_error("..") == "'..' is not a valid topic name");
  CHECK(topic_error(std::string(kMaxTopicNameLength + 1, 'x')) ==
        "topic name 'xxxxxxxxxxxxxxxxxxxx...' is 250 characters long; Kafka takes at most 249");
}
