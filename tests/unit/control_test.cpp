#include "kpipe/control.h"

#include <catch2/catch.hpp>

#include <limits>
#include <random>

#include "kpipe/json.h"

using namespace kpipe;

namespace {

Checkpoint parsed(std::string_view line) {
  auto c = parse_checkpoint(line);
  INFO(line);
  if (!c) FAIL("refused: " << c.error().message);
  if (!*c) FAIL("not a checkpoint");
  return **c;
}

std::string parse_error(std::string_view line) {
  auto c = parse_checkpoint(line);
  INFO(line);
  if (c) FAIL("accepted");
  CHECK(c.error().status == ExitStatus::kDataError);
  return c.error().message;
}

}  // namespace

TEST_CASE("parse_checkpoint: the example of kpipe(7), CONTROL LINES AND CHECKPOINTS", "[control]") {
  Checkpoint c = parsed(R"({"$kpipe":"checkpoint","id":7,"at":1764412345123,)"
                        R"("offsets":[{"topic":"events","partition":0,"offset":1043}]})");
  CHECK(c.id == 7);
  CHECK(c.at == 1764412345123);
  REQUIRE(c.offsets.size() == 1);
  CHECK(c.offsets[0].topic == "events");
  CHECK(c.offsets[0].partition == 0);
  CHECK(c.offsets[0].offset == 1043);
}

TEST_CASE("parse_checkpoint: fields in any order, offsets and at optional", "[control]") {
  Checkpoint c = parsed(R"({"$kpipe":"checkpoint","offsets":[],"id":0})");
  CHECK(c.id == 0);
  CHECK(c.at == 0);
  CHECK(c.offsets.empty());
  c = parsed(R"({"$kpipe":"checkpoint","id":3,"extra":{"x":[1]},"offsets":[)"
             R"({"offset":5,"partition":2,"topic":"b"},)"
             R"({"topic":"a","partition":0,"offset":0,"more":true}]})");
  REQUIRE(c.offsets.size() == 2);
  CHECK(c.offsets[0].topic == "b");
  CHECK(c.offsets[0].partition == 2);
  CHECK(c.offsets[0].offset == 5);
  CHECK(c.offsets[1].topic == "a");
}

TEST_CASE("parse_checkpoint: other control kinds are not checkpoints", "[control]") {
  for (const char* line : {R"({"$kpipe":"watermark","at":5})", R"({"$kpipe":"Checkpoint","id":1})",
                           R"({"$kpipe":5,"id":1})", R"({"$kpipe":null})"}) {
    auto c = parse_checkpoint(line);
    INFO(line);
    REQUIRE(c.ok());
    CHECK_FALSE(*c);
  }
}

TEST_CASE("parse_checkpoint: errors", "[control]") {
  CHECK(parse_error(R"({"$kpipe":"checkpoint","id":1)")
            .starts_with("control line: not valid JSON: "));
  for (const char* id : {"", R"(,"id":-1)", R"(,"id":"7")", R"(,"id":1.5)", R"(,"id":null)",
                         R"(,"id":18446744073709551615)"}) {
    INFO(id);
    CHECK(parse_error(std::string(R"({"$kpipe":"checkpoint")") + id + "}") ==
          "checkpoint line: 'id' must be a non-negative integer");
  }
  CHECK(parse_error(R"({"$kpipe":"checkpoint","id":1,"offsets":{}})") ==
        "checkpoint line: 'offsets' must be an array");
  for (const char* entry :
       {R"({"partition":0,"offset":1})", R"({"topic":"t","offset":1})",
        R"({"topic":"t","partition":0})", R"({"topic":1,"partition":0,"offset":1})",
        R"({"topic":"t","partition":"0","offset":1})", R"(["t",0,1])", "null"}) {
    INFO(entry);
    CHECK(parse_error(std::string(R"({"$kpipe":"checkpoint","id":1,"offsets":[)") + entry + "]}") ==
          "checkpoint line: each offset needs 'topic', 'partition' and 'offset'");
  }
  // An offset is an integer; a Kinesis position a string (kpipe(7), LOGS).
  for (const char* offset : {"1.5", R"("x")", R"("007")", R"("-1")", "true", R"("@")", R"("@x")"}) {
    INFO(offset);
    CHECK(
        parse_error(fmt::format(
            R"({{"$kpipe":"checkpoint","id":1,"offsets":[{{"topic":"t","partition":0,"offset":{}}}]}})",
            offset)) ==
        "checkpoint line: 'offset' must be an integer or a string of a sequence number's digits");
  }
}

TEST_CASE("parse_checkpoint: a Kinesis position travels as a string, digit for digit",
          "[control]") {
  const std::string seq = "49590338271490256608559692538361571095921575989136588898";
  std::string line =
      R"({"$kpipe":"checkpoint","id":3,"at":1,"offsets":[{"topic":"s","partition":7,"offset":")" +
      seq + R"("},{"topic":"s","partition":8,"offset":"@1764412345123"}]})";
  auto c = parse_checkpoint(line);
  REQUIRE(c.ok());
  REQUIRE(*c);
  REQUIRE((*c)->offsets.size() == 2);
  CHECK((*c)->offsets[0].offset == *Position::sequence(seq));
  CHECK((*c)->offsets[1].offset == Position::arrived_at(1764412345123));
  std::string again;
  append_checkpoint(again, **c);
  CHECK(again.find("\"offset\":\"" + seq + "\"") != std::string::npos);
  CHECK(again.find("\"offset\":\"@1764412345123\"") != std::string::npos);
}

TEST_CASE("parse_checkpoint: a partition outside int32 is refused, not wrapped", "[control]") {
  CHECK(parse_error(R"({"$kpipe":"checkpoint","id":1,)"
                    R"("offsets":[{"topic":"t","partition":4294967296,"offset":1}]})") ==
        "checkpoint line: partition 4294967296 is out of range");
}

TEST_CASE("append_checkpoint: exact line", "[control]") {
  Checkpoint c{7, 1764412345123, {{"events", 0, 1043}, {"t\"q", 12, 0}}, "", ""};
  std::string out = "prefix\n";
  append_checkpoint(out, c);
  CHECK(out ==
        "prefix\n"
        R"({"$kpipe":"checkpoint","id":7,"at":1764412345123,)"
        R"("offsets":[{"topic":"events","partition":0,"offset":1043},)"
        R"({"topic":"t\"q","partition":12,"offset":0}]})"
        "\n");
  out.clear();
  append_checkpoint(out, Checkpoint{});
  CHECK(out == "{\"$kpipe\":\"checkpoint\",\"id\":0,\"at\":0,\"offsets\":[]}\n");
}

TEST_CASE("checkpoint lines name kconsume's group when it has one", "[control]") {
  Checkpoint c{3, 5, {{"events", 1, 9}}, "clean \"g\"", ""};
  std::string out;
  append_checkpoint(out, c);
  CHECK(out == R"({"$kpipe":"checkpoint","id":3,"at":5,"group":"clean \"g\"",)"
               R"("offsets":[{"topic":"events","partition":1,"offset":9}]})"
               "\n");
  out.pop_back();
  CHECK(parsed(out).group == "clean \"g\"");
  CHECK(parse_error(R"({"$kpipe":"checkpoint","id":1,"group":7})") ==
        "checkpoint line: 'group' must be a string");
}

TEST_CASE("checkpoint commit metadata names the checkpoint and its time, nothing else parses",
          "[control]") {
  CheckpointMark mark{42, 1764412345123};
  CHECK(checkpoint_commit_metadata(mark) == "kpipe:checkpoint:42:1764412345123");
  CHECK(parse_checkpoint_commit_metadata(checkpoint_commit_metadata(mark)) == mark);
  CheckpointMark big{INT64_MAX, 0};
  CHECK(parse_checkpoint_commit_metadata(checkpoint_commit_metadata(big)) == big);
  for (const char* other : {"", "kpipe:checkpoint:", "kpipe:checkpoint:42", "kpipe:checkpoint:42:",
                            "kpipe:checkpoint::5", "kpipe:checkpoint:4x:5", "kpipe:checkpoint:-1:5",
                            "kpipe:checkpoint:+1:5", "kpipe:checkpoint:1:5:6", "checkpoint:4:5",
                            "kpipe:checkpoint:99999999999999999999:5"})
    CHECK_FALSE(parse_checkpoint_commit_metadata(other));
}

TEST_CASE("append_checkpoint then parse_checkpoint round-trips", "[control]") {
  std::mt19937_64 rng(6);
  const char* topics[] = {"events", "a.b-c_d", "é", "quote\"back\\slash", "tab\t", ""};
  for (int i = 0; i < 500; ++i) {
    Checkpoint c;
    c.id = static_cast<int64_t>(rng() >> 1);
    c.at = static_cast<int64_t>(rng());
    size_t n = rng() % 5;
    for (size_t k = 0; k < n; ++k)
      c.offsets.push_back(
          {topics[rng() % 6], static_cast<int32_t>(rng() >> 33), static_cast<int64_t>(rng() >> 1)});
    std::string line;
    append_checkpoint(line, c);
    REQUIRE(line.back() == '\n');
    line.pop_back();
    CHECK(is_control_line(line));
    Checkpoint back = parsed(line);
    CHECK(back.id == c.id);
    CHECK(back.at == c.at);
    REQUIRE(back.offsets.size() == c.offsets.size());
    for (size_t k = 0; k < n; ++k) {
      CHECK(back.offsets[k].topic == c.offsets[k].topic);
      CHECK(back.offsets[k].partition == c.offsets[k].partition);
      CHECK(back.offsets[k].offset == c.offsets[k].offset);
    }
  }
}

// --- epochs (kpipe(7), MANY INSTANCES) ---------------------------------------

namespace {

PartitionEvent event_of(std::string_view line) {
  auto e = parse_partition_event(line);
  INFO(line);
  if (!e) FAIL("refused: " << e.error().message);
  if (!*e) FAIL("not a partitions line");
  return **e;
}

std::string event_error(std::string_view line) {
  auto e = parse_partition_event(line);
  INFO(line);
  if (e) FAIL("accepted");
  CHECK(e.error().status == ExitStatus::kDataError);
  return e.error().message;
}

}  // namespace

TEST_CASE("checkpoint lines carry each offset's owner epoch, absent when there is none",
          "[control]") {
  Checkpoint c = parsed(R"({"$kpipe":"checkpoint","id":9,"at":1,"offsets":[)"
                        R"({"topic":"events","partition":0,"offset":5,"epoch":3},)"
                        R"({"topic":"events","partition":1,"offset":7,"epoch":4}]})");
  REQUIRE(c.offsets.size() == 2);
  CHECK(c.offsets[0].epoch == 3);
  CHECK(c.offsets[1].epoch == 4);
  Checkpoint single = parsed(R"({"$kpipe":"checkpoint","id":9,"at":1,"offsets":[)"
                             R"({"topic":"events","partition":1,"offset":7}]})");
  REQUIRE(single.offsets.size() == 1);
  CHECK(single.offsets[0].epoch == 0);
  // One kconsume writes a line: an instance's or a single pipeline's.
  CHECK(parse_error(R"({"$kpipe":"checkpoint","id":9,"at":1,"offsets":[)"
                    R"({"topic":"events","partition":0,"offset":5,"epoch":3},)"
                    R"({"topic":"events","partition":1,"offset":7}]})") ==
        "checkpoint line: either every offset has an 'epoch' or none");

  // The epoch is written after the offset, and only when there is one, so
  // that a single pipeline's lines stay as they were.
  Checkpoint owned{4, 2, {{"events", 0, 10, 1}, {"events", 1, 20, 9007199254740993}}, "g", ""};
  std::string out;
  append_checkpoint(out, owned);
  CHECK(out == R"({"$kpipe":"checkpoint","id":4,"at":2,"group":"g","offsets":[)"
               R"({"topic":"events","partition":0,"offset":10,"epoch":1},)"
               R"({"topic":"events","partition":1,"offset":20,"epoch":9007199254740993}]})"
               "\n");
  out.pop_back();
  // Beyond a double's integers too: epochs are read as integers.
  CHECK(parsed(out).offsets == owned.offsets);
}

TEST_CASE("checkpoint lines: an epoch that is not a positive integer is refused", "[control]") {
  for (const char* epoch : {"0", "-1", "\"3\"", "1.5", "null", "true"}) {
    INFO(epoch);
    CHECK(parse_error(std::string(R"({"$kpipe":"checkpoint","id":1,"offsets":[)"
                                  R"({"topic":"t","partition":0,"offset":1,"epoch":)") +
                      epoch + "}]}") == "checkpoint line: 'epoch' must be a positive integer");
  }
}

TEST_CASE("partitions lines: owned partitions carry their epochs, and round-trip", "[control]") {
  PartitionEvent e =
      event_of(R"({"$kpipe":"partitions","event":"assigned","partitions":[)"
               R"({"topic":"events","partition":0,"epoch":3},{"topic":"events","partition":2,)"
               R"("epoch":1}]})");
  CHECK(e.kind == PartitionEvent::Kind::kAssigned);
  CHECK(e.partitions == std::vector<TopicPartition>{{"events", 0}, {"events", 2}});
  CHECK(e.epochs == std::vector<int64_t>{3, 1});
  CHECK(e.owned());

  // A single pipeline's kconsume --announce: no epochs, not owned.
  PartitionEvent plain = event_of(
      R"({"$kpipe":"partitions","event":"revoked","partitions":[{"topic":"events","partition":0}]})");
  CHECK(plain.kind == PartitionEvent::Kind::kRevoked);
  CHECK(plain.partitions == std::vector<TopicPartition>{{"events", 0}});
  CHECK(plain.epochs.empty());
  CHECK_FALSE(plain.owned());

  std::string out;
  append_partition_event(out, e);
  CHECK(out == R"({"$kpipe":"partitions","event":"assigned","partitions":[)"
               R"({"topic":"events","partition":0,"epoch":3},)"
               R"({"topic":"events","partition":2,"epoch":1}]})"
               "\n");
  out.pop_back();
  CHECK(is_control_line(out));
  PartitionEvent back = event_of(out);
  CHECK(back.kind == e.kind);
  CHECK(back.partitions == e.partitions);
  CHECK(back.epochs == e.epochs);

  out.clear();
  append_partition_event(out, plain);
  CHECK(
      out ==
      R"({"$kpipe":"partitions","event":"revoked","partitions":[{"topic":"events","partition":0}]})"
      "\n");
  out.pop_back();
  CHECK_FALSE(event_of(out).owned());
}

TEST_CASE("partitions lines: epochs for some partitions only, or not positive, are refused",
          "[control]") {
  // One line comes from one kconsume: its partitions are all owned or none.
  for (const char* parts : {R"({"topic":"t","partition":0},{"topic":"t","partition":1,"epoch":2})",
                            R"({"topic":"t","partition":0,"epoch":2},{"topic":"t","partition":1})",
                            R"({"topic":"t","partition":0,"epoch":2},{"topic":"t","partition":1},)"
                            R"({"topic":"t","partition":2,"epoch":2})"}) {
    INFO(parts);
    CHECK(event_error(std::string(R"({"$kpipe":"partitions","event":"assigned","partitions":[)") +
                      parts + "]}") ==
          "partitions line: either every partition has an 'epoch' or none");
  }
  for (const char* epoch : {"0", "-3", "\"3\"", "2.5", "null"}) {
    INFO(epoch);
    CHECK(event_error(std::string(R"({"$kpipe":"partitions","event":"assigned","partitions":[)"
                                  R"({"topic":"t","partition":0,"epoch":)") +
                      epoch + "}]}") == "partitions line: 'epoch' must be a positive integer");
  }
}

TEST_CASE("partitions lines: other control kinds and newer events are not acted on", "[control]") {
  for (const char* line : {R"({"$kpipe":"checkpoint","id":1,"offsets":[]})",
                           R"({"$kpipe":"partitions","event":"paused","partitions":"any"})"}) {
    auto e = parse_partition_event(line);
    INFO(line);
    REQUIRE(e.ok());
    CHECK_FALSE(*e);
  }
  auto c = parse_checkpoint(R"({"$kpipe":"partitions","event":"assigned","partitions":[]})");
  REQUIRE(c.ok());
  CHECK_FALSE(*c);
}

TEST_CASE("instance lines: written first by an instance's kconsume, read back", "[control]") {
  std::string out;
  append_instance_line(out, {"host \"a\"", "clicks", "00000000000000aa"});
  CHECK(out ==
        "{\"$kpipe\":\"instance\",\"name\":\"host \\\"a\\\"\",\"group\":\"clicks\","
        "\"pipeline\":\"00000000000000aa\"}\n");
  out.pop_back();
  auto back = parse_instance_line(out);
  REQUIRE(back.ok());
  REQUIRE(*back);
  CHECK((*back)->name == "host \"a\"");
  CHECK((*back)->group == "clicks");
  CHECK((*back)->pipeline == "00000000000000aa");
  // Other lines are none, and a broken instance line is bad input.
  CHECK_FALSE(*parse_instance_line(R"({"user":"$kpipe"})"));
  CHECK_FALSE(*parse_instance_line(R"({"$kpipe":"checkpoint","id":1})"));
  CHECK_FALSE(*parse_instance_line("not json \"$kpipe\""));
  auto bad = parse_instance_line(R"({"$kpipe":"instance","pipeline":"aa"})");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "instance line: 'name' must be a non-empty string");
}

TEST_CASE("checkpoint lines carry an instance's group member as base64", "[control]") {
  Checkpoint c;
  c.id = 5;
  c.at = 9;
  c.group = "g";
  c.member = std::string("\x00\x01member\xff", 9);
  std::string out;
  append_checkpoint(out, c);
  CHECK(out.find(",\"member\":\"") != std::string::npos);
  out.pop_back();
  auto back = parse_checkpoint(out);
  REQUIRE(back.ok());
  REQUIRE(*back);
  CHECK((*back)->member == c.member);
  auto bad = parse_checkpoint(R"({"$kpipe":"checkpoint","id":1,"member":"%%","offsets":[]})");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.starts_with("checkpoint line: 'member': "));
}
