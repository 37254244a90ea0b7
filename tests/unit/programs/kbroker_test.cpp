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

// kbroker's control commands (kbroker(1), FAULTS): what each line asks of
// the mock cluster, and the one-line answer to a line that asks nothing
// it can do.
namespace {

FaultCommand command(const std::string& line) {
  auto c = parse_fault_command(line);
  INFO(line);
  if (!c) FAIL(c.error().message);
  return *c;
}

std::string command_error(const std::string& line) {
  auto c = parse_fault_command(line);
  INFO(line);
  if (c) FAIL("accepted");
  return c.error().message;
}

}  // namespace

TEST_CASE("parse_fault_command: request errors, by Kafka's names in any case", "[kbroker]") {
  auto c = command("error produce 3 not_leader_for_partition");
  CHECK(c.kind == FaultCommand::Kind::kError);
  CHECK(c.api_key == 0);
  CHECK(c.api_name == "Produce");
  CHECK(c.count == 3);
  CHECK(c.error == "NOT_LEADER_FOR_PARTITION");
  c = command("  error OffsetCommit NOT_COORDINATOR  ");
  CHECK(c.api_key == 8);
  CHECK(c.api_name == "OffsetCommit");
  CHECK(c.count == 1);
  CHECK(c.error == "NOT_COORDINATOR");
  CHECK(command("ERROR\tjoingroup\t2\tREBALANCE_IN_PROGRESS").api_key == 11);
  c = command("clear produce");
  CHECK(c.kind == FaultCommand::Kind::kClear);
  CHECK(c.api_key == 0);
}

TEST_CASE("parse_fault_command: brokers down, up and slow", "[kbroker]") {
  auto c = command("down 2");
  CHECK(c.kind == FaultCommand::Kind::kDown);
  CHECK(c.broker == 2);
  c = command("up all");
  CHECK(c.kind == FaultCommand::Kind::kUp);
  CHECK(c.broker == FaultCommand::kAllBrokers);
  c = command("rtt 1 500ms");
  CHECK(c.kind == FaultCommand::Kind::kRtt);
  CHECK(c.broker == 1);
  CHECK(c.rtt == 500);
  c = command("rtt all 0");
  CHECK(c.broker == FaultCommand::kAllBrokers);
  CHECK(c.rtt == 0);
}

TEST_CASE("parse_fault_command: coordinators, leaders and topic errors", "[kbroker]") {
  auto c = command("coordinator group my-group 2");
  CHECK(c.kind == FaultCommand::Kind::kCoordinator);
  CHECK(c.key_type == "group");
  CHECK(c.key == "my-group");
  CHECK(c.broker == 2);
  CHECK(command("coordinator Transaction tx.1 1").key_type == "transaction");
  c = command("leader events 3 2");
  CHECK(c.kind == FaultCommand::Kind::kLeader);
  CHECK(c.topic == "events");
  CHECK(c.partition == 3);
  CHECK(c.broker == 2);
  CHECK(command("leader events 0 none").broker == FaultCommand::kNoLeader);
  c = command("topic-error events unknown_topic_or_part");
  CHECK(c.kind == FaultCommand::Kind::kTopicError);
  CHECK(c.topic == "events");
  CHECK(c.error == "UNKNOWN_TOPIC_OR_PART");
}

TEST_CASE("parse_fault_command: a bad line says what is wrong with it", "[kbroker]") {
  CHECK(command_error("dwon 1") == "unknown command 'dwon', did you mean 'down'?");
  CHECK(command_error("error prodcue 1 NOT_COORDINATOR") ==
        "unknown request type 'prodcue', did you mean 'Produce'?");
  CHECK(command_error("error produce") == "usage: error REQUEST [COUNT] ERROR");
  CHECK(command_error("error produce 0 NOT_COORDINATOR") ==
        "count '0' is not a number from 1 to 100000");
  CHECK(command_error("error produce 1 not-a-name") ==
        "'not-a-name' is not a Kafka error name (such as NOT_LEADER_OR_FOLLOWER)");
  // librdkafka's own errors never come from a broker.
  CHECK(command_error("error produce _TRANSPORT") ==
        "'_TRANSPORT' is not a Kafka error name (such as NOT_LEADER_OR_FOLLOWER)");
  CHECK(command_error("down") == "usage: down BROKER|all");
  CHECK(command_error("down 0") == "broker '0' is not a number from 1 to 1000");
  CHECK(command_error("rtt 1 fast").find("fast") != std::string::npos);
  CHECK(command_error("rtt 1 2h") == "a round trip of more than an hour ('2h')");
  CHECK(command_error("coordinator group g all") == "broker 'all' is not a number from 1 to 1000");
  CHECK(command_error("coordinator member g 1").starts_with("unknown coordinator type 'member'"));
  CHECK(command_error("leader events x 1") == "partition 'x' is not a number from 0 to 9999");
  CHECK(command_error("leader bad! 0 1").find("invalid topic name") != std::string::npos);
  CHECK(command_error("") == "an empty command");
}

TEST_CASE("is_blank_control_line: blank lines and comments are no commands", "[kbroker]") {
  CHECK(is_blank_control_line(""));
  CHECK(is_blank_control_line("  \t"));
  CHECK(is_blank_control_line("# the next produce fails"));
  CHECK(is_blank_control_line("  #down 1"));
  CHECK_FALSE(is_blank_control_line("down 1"));
}
