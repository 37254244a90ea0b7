#include "kpipe/kinesis/kinesis_log.h"

#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "fake_http.h"
#include "fakes.h"
#include "kpipe/dlq_entry.h"
#include "kpipe/dlq_replay.h"
#include "kpipe/json.h"
#include "kpipe/kinesis/kinesis_log_internal.h"
#include "kpipe/kinesis/stream_reader.h"
#include "local_kinesis.h"

// Kinesis as a log (kpipe(7), LOGS): a target names a stream or its ARN;
// a reader reads the shards it is given from their positions (a sequence
// number, the trim horizon, a time), passes records at their sequence
// numbers, a child shard made since as a partition added, and a closed
// shard as closed; a writer refuses what a Kinesis record cannot be.

namespace kpipe {
namespace {

HttpResponse page(const std::string& records, const char* next, int behind,
                  const char* children = nullptr) {
  std::string body = R"({"Records":[)" + records + R"(],"NextShardIterator":)" +
                     (next ? "\"" + std::string(next) + "\"" : std::string("null")) +
                     R"(,"MillisBehindLatest":)" + std::to_string(behind);
  if (children != nullptr) body += R"(,"ChildShards":)" + std::string(children);
  return {200, body + "}"};
}

std::string record(const std::string& seq, const std::string& key, const std::string& data) {
  std::string b64;
  append_base64(b64, data);
  return R"({"SequenceNumber":")" + seq + R"(","PartitionKey":")" + key + R"(","Data":")" + b64 +
         R"(","ApproximateArrivalTimestamp":1764412345.5})";
}

// ListShards' answer: these shards, open, none a child.
HttpResponse shards(std::initializer_list<const char*> ids) {
  std::string body = R"({"Shards":[)";
  for (const char* id : ids) {
    if (body.back() != '[') body += ",";
    body += fmt::format(
        R"({{"ShardId":"{}","SequenceNumberRange":{{"StartingSequenceNumber":"1"}}}})", id);
  }
  return {200, body + "]}"};
}

struct Fixture {
  std::shared_ptr<FakeHttp> http = std::make_shared<FakeHttp>();
  FakeClock clock{1796465730000};
  KinesisLog log = make_kinesis_log(test_settings(), "s", http, test_keys(), clock, 10 * kSecond);
};

// Each event as a line: "record 0 @SEQ key=value resume SEQ", "added 2 resume -2", ...
std::vector<std::string> poll_all(LogReader& reader, int polls) {
  std::vector<std::string> seen;
  for (int i = 0; i < polls; ++i) {
    Status s = reader.poll(0, 100, [&](const LogEvent& e) -> Status {
      const char* kind = e.kind == LogEvent::Kind::kRecord   ? "record"
                         : e.kind == LogEvent::Kind::kAdded  ? "added"
                         : e.kind == LogEvent::Kind::kClosed ? "closed"
                                                             : "tip";
      std::string line = fmt::format("{} {} {}", kind, e.record.partition, e.resume);
      if (e.kind == LogEvent::Kind::kRecord)
        line += fmt::format(" {}={} at {}", *e.record.key, *e.record.value, e.record.timestamp);
      seen.push_back(line);
      return {};
    });
    REQUIRE(s.ok());
  }
  return seen;
}

}  // namespace

TEST_CASE("kinesis log: a target names a stream, or a stream's ARN and its region",
          "[kinesis][kinesis_log]") {
  auto plain = parse_kinesis_target("kinesis:user-events");
  REQUIRE(plain.ok());
  CHECK(plain->name == "user-events");
  CHECK(plain->region.empty());
  auto arn = parse_kinesis_target("kinesis:arn:aws:kinesis:eu-west-1:123456789012:stream/clicks_2");
  REQUIRE(arn.ok());
  CHECK(arn->name == "clicks_2");
  CHECK(arn->region == "eu-west-1");
  CHECK(is_kinesis_target("kinesis:x"));
  CHECK_FALSE(is_kinesis_target("events"));
  for (const char* bad :
       {"kinesis:", "kinesis:a b", "kinesis:a/b", "kinesis:arn:aws:sqs:eu-west-1:1:queue/x",
        "kinesis:arn:aws:kinesis:eu-west-1:1:table/x"}) {
    INFO(bad);
    auto p = parse_kinesis_target(bad);
    REQUIRE_FALSE(p.ok());
    CHECK(p.error().status == ExitStatus::kUsage);
  }
  CHECK_FALSE(parse_kinesis_target("kinesis:" + std::string(129, 'a')).ok());
}

TEST_CASE("kinesis log: a reader starts each shard where it is given, reads a child as added",
          "[kinesis][kinesis_log]") {
  Fixture f;
  auto opened = f.log.reader();
  REQUIRE(opened.ok());
  LogReader& reader = *opened->log;
  CHECK_FALSE(reader.consecutive_positions());
  CHECK(opened->group == nullptr);
  CHECK(opened->offsets == nullptr);
  f.http->answers.push_back(shards({"shardId-000000000000", "shardId-000000000001"}));
  REQUIRE(reader
              .assign({{"s", 0,
                        *Position::sequence(
                            "49590338271490256608559692538361571095921575989136588898")},
                       {"s", 1, Position::arrived_at(1764412345123)}})
              .ok());
  // Poll 1: shard 0 after its sequence number, two records, then closed
  // with its child 2; shard 1 from its time, at its tip at once.
  f.http->answers.push_back(HttpResponse{200, R"({"ShardIterator":"i0"})"});
  f.http->answers.push_back(
      page(record("49590338271490256608559692538361571095921575989136588899", "k1", "a") + "," +
               record("49590338271490256608559692538361571095921575989136588900", "k2", "b"),
           nullptr, 0,
           R"([{"ShardId":"shardId-000000000002","ParentShards":["shardId-000000000000"]}])"));
  f.http->answers.push_back(HttpResponse{200, R"({"ShardIterator":"i1"})"});
  f.http->answers.push_back(page("", "i1b", 0));
  // Poll 2: shard 1 not due yet; the child, added, from its trim horizon.
  f.http->answers.push_back(HttpResponse{200, R"({"ShardIterator":"i2"})"});
  f.http->answers.push_back(page(record("5", "k1", "c"), "i2b", 0));
  auto seen = poll_all(reader, 2);
  CHECK(seen == std::vector<std::string>{
                    "record 0 49590338271490256608559692538361571095921575989136588899 k1=a at "
                    "1764412345500",
                    "record 0 49590338271490256608559692538361571095921575989136588900 k2=b at "
                    "1764412345500",
                    "closed 0 49590338271490256608559692538361571095921575989136588900",
                    "tip 1 @1764412345123", "added 2 -2", "record 2 5 k1=c at 1764412345500",
                    "tip 2 5"});
  std::vector<std::string> bodies;
  for (const auto& r : f.http->sent)
    if (amz_operation(r) == "GetShardIterator") bodies.push_back(r.body);
  CHECK(
      bodies ==
      std::vector<std::string>{
          R"({"StreamName":"s","ShardId":"shardId-000000000000","ShardIteratorType":"AFTER_SEQUENCE_NUMBER","StartingSequenceNumber":"49590338271490256608559692538361571095921575989136588898"})",
          R"({"StreamName":"s","ShardId":"shardId-000000000001","ShardIteratorType":"AT_TIMESTAMP","Timestamp":1764412345.123})",
          R"({"StreamName":"s","ShardId":"shardId-000000000002","ShardIteratorType":"TRIM_HORIZON"})"});
  std::vector<TopicPartition> parts = reader.assignment();
  CHECK(parts == std::vector<TopicPartition>{{"s", 0}, {"s", 1}, {"s", 2}});
}

// A shard made between the caller's listing and assign(): read as added,
// never skipped.
TEST_CASE("kinesis log: a shard the reader was not given is read as added",
          "[kinesis][kinesis_log]") {
  Fixture f;
  auto opened = f.log.reader();
  REQUIRE(opened.ok());
  f.http->answers.push_back(shards({"shardId-000000000000", "shardId-000000000004"}));
  REQUIRE(opened->log->assign({{"s", 0, LogStart::kEarliest}}).ok());
  f.http->answers.push_back(HttpResponse{200, R"({"ShardIterator":"i0"})"});
  f.http->answers.push_back(page("", "i0b", 0));
  f.http->answers.push_back(HttpResponse{200, R"({"ShardIterator":"i4"})"});
  f.http->answers.push_back(page(record("7", "k", "x"), "i4b", 0));
  CHECK(poll_all(*opened->log, 1) == std::vector<std::string>{"tip 0 -2", "added 4 -2",
                                                              "record 4 7 k=x at 1764412345500",
                                                              "tip 4 7"});
}

TEST_CASE("kinesis log: a shard cannot start at an offset, nor a reader read another stream",
          "[kinesis][kinesis_log]") {
  Fixture f;
  auto opened = f.log.reader();
  REQUIRE(opened.ok());
  Status other = opened->log->assign({{"t", 0, LogStart::kEarliest}});
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().message == "kinesis: this reads and writes stream 's', not 't'");
  f.http->answers.push_back(shards({"shardId-000000000000"}));
  REQUIRE(opened->log->assign({{"s", 0, 17}}).ok());
  Status s = opened->log->poll(0, 100, [](const LogEvent&) { return Status(); });
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message ==
        "shardId-000000000000 of a Kinesis stream cannot start at offset 17: a shard is read "
        "after a sequence number, or from a time (kpipe(7), LOGS)");
}

TEST_CASE("kinesis log: a writer keys each record, and refuses what a record cannot hold",
          "[kinesis][kinesis_log]") {
  Fixture f;
  auto opened = f.log.writer();
  REQUIRE(opened.ok());
  LogWriter& writer = *opened->log;
  CHECK(opened->transactions == nullptr);
  std::vector<Header> headers{{"h", std::string_view("v")}};
  Status with_headers = writer.write("s", -1, "k", "v", headers, 0, 1);
  REQUIRE_FALSE(with_headers.ok());
  CHECK(with_headers.error().status == ExitStatus::kDataError);
  Status tombstone = writer.write("s", -1, "k", std::nullopt, {}, 0, 2);
  REQUIRE_FALSE(tombstone.ok());
  CHECK(tombstone.error().status == ExitStatus::kDataError);
  CHECK(tombstone.error().message == "a Kinesis record cannot be a tombstone (a null value)");
  CHECK_FALSE(writer.write("s", 3, "k", "v", {}, 0, 3).ok());
  CHECK_FALSE(writer.write("t", -1, "k", "v", {}, 0, 3).ok());

  std::vector<uint64_t> delivered;
  writer.set_delivery_handler([&](uint64_t tag, const Error* err) {
    CHECK(err == nullptr);
    delivered.push_back(tag);
  });
  REQUIRE(writer.write("s", -1, "user-1", R"({"n":1})", {}, 0, 10).ok());
  REQUIRE(writer.write("s", -1, std::nullopt, R"({"n":2})", {}, 0, 11).ok());
  REQUIRE(writer.write("s", -1, std::nullopt, R"({"n":3})", {}, 0, 12).ok());
  f.http->answers.push_back(HttpResponse{200, R"({"FailedRecordCount":0,"Records":[
    {"SequenceNumber":"1","ShardId":"shardId-000000000000"},
    {"SequenceNumber":"2","ShardId":"shardId-000000000001"},
    {"SequenceNumber":"3","ShardId":"shardId-000000000000"}]})"});
  REQUIRE(writer.flush(kSecond).ok());
  CHECK(delivered == std::vector<uint64_t>{10, 11, 12});
  CHECK(writer.delivered() == 3);
  REQUIRE(f.http->sent.size() == 1);
  CHECK(amz_operation(f.http->sent[0]) == "PutRecords");
  // Records without a key get keys of their own, so that they spread.
  const std::string& body = f.http->sent[0].body;
  CHECK(body.find(R"("PartitionKey":"user-1")") != std::string::npos);
  CHECK(body.find(R"("PartitionKey":"kpipe-0")") != std::string::npos);
  CHECK(body.find(R"("PartitionKey":"kpipe-1")") != std::string::npos);
}

TEST_CASE("kinesis log: an explicit hash key is a decimal from 0 to 2^128-1",
          "[kinesis][kinesis_log]") {
  CHECK(*parse_explicit_hash_key("0") == "0");
  CHECK(*parse_explicit_hash_key("000") == "0");
  CHECK(*parse_explicit_hash_key("0042") == "42");
  CHECK(*parse_explicit_hash_key("340282366920938463463374607431768211455") ==
        "340282366920938463463374607431768211455");
  for (std::string_view bad :
       {"", "-1", "1.5", " 1", "0x10", "abc", "340282366920938463463374607431768211456",
        "1000000000000000000000000000000000000000"}) {
    auto refused = parse_explicit_hash_key(bad);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().status == ExitStatus::kDataError);
    CHECK(refused.error().message ==
          fmt::format("'{}' is not a decimal integer from 0 to 2^128-1", bad));
  }
  // A long one is cut short in the message.
  CHECK(parse_explicit_hash_key(std::string(100, '9')).error().message ==
        std::string("'") + std::string(45, '9') +
            "...' is not a decimal integer from 0 to 2^128-1");
}

TEST_CASE("kinesis log: a writer places a record by the hash key it is given, key unchanged",
          "[kinesis][kinesis_log]") {
  Fixture f;
  auto opened = f.log.writer();
  REQUIRE(opened.ok());
  REQUIRE(opened->hashing != nullptr);
  HashPlacement& hashing = *opened->hashing;
  Status bad = hashing.write_hashed("s", "k", "v", {}, "2^64", 1);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().status == ExitStatus::kDataError);
  CHECK(bad.error().message ==
        "the explicit hash key '2^64' is not a decimal integer from 0 to 2^128-1");
  CHECK(hashing.write_hashed("s", "k", std::nullopt, {}, "1", 2).error().status ==
        ExitStatus::kDataError);
  CHECK_FALSE(hashing.write_hashed("t", "k", "v", {}, "1", 3).ok());

  std::vector<uint64_t> delivered;
  opened->log->set_delivery_handler([&](uint64_t tag, const Error* err) {
    CHECK(err == nullptr);
    delivered.push_back(tag);
  });
  REQUIRE(
      hashing.write_hashed("s", "user-1", "a", {}, "00170141183460469231731687303715884105728", 10)
          .ok());
  REQUIRE(hashing.write_hashed("s", std::nullopt, "b", {}, "0", 11).ok());
  REQUIRE(opened->log->write("s", -1, "user-1", "c", {}, 0, 12).ok());
  f.http->answers.push_back(HttpResponse{200, R"({"FailedRecordCount":0,"Records":[
    {"SequenceNumber":"1","ShardId":"shardId-000000000001"},
    {"SequenceNumber":"2","ShardId":"shardId-000000000000"},
    {"SequenceNumber":"3","ShardId":"shardId-000000000000"}]})"});
  REQUIRE(opened->log->flush(kSecond).ok());
  CHECK(delivered == std::vector<uint64_t>{10, 11, 12});
  REQUIRE(f.http->sent.size() == 1);
  CHECK(
      f.http->sent[0].body ==
      R"({"StreamName":"s","Records":[)"
      R"({"Data":"YQ==","PartitionKey":"user-1","ExplicitHashKey":"170141183460469231731687303715884105728"},)"
      R"({"Data":"Yg==","PartitionKey":"kpipe-0","ExplicitHashKey":"0"},)"
      R"({"Data":"Yw==","PartitionKey":"user-1"}]})");
}

}  // namespace kpipe

namespace kpipe {

// klag's reading (klag(1), Kinesis): one record after each shard's
// position, past pages the service answers empty while still behind; a
// shard not given is read from its start, unless it is a closed parent of
// one given.
TEST_CASE("kinesis log: the first record after each shard's position, for klag",
          "[kinesis][kinesis_log]") {
  Fixture f;
  f.http->answers.push_back(HttpResponse{
      200,
      R"({"Shards":[{"ShardId":"shardId-000000000000","SequenceNumberRange":{"StartingSequenceNumber":"1","EndingSequenceNumber":"9"}},)"
      R"({"ShardId":"shardId-000000000001","ParentShardId":"shardId-000000000000","SequenceNumberRange":{"StartingSequenceNumber":"10"}},)"
      R"({"ShardId":"shardId-000000000002","SequenceNumberRange":{"StartingSequenceNumber":"11"}},)"
      R"({"ShardId":"shardId-000000000003","SequenceNumberRange":{"StartingSequenceNumber":"12"}}]})"});
  // Shard 1, after its sequence number: an empty page 5 s behind, then
  // the record.
  f.http->answers.push_back(HttpResponse{200, R"({"ShardIterator":"i1"})"});
  f.http->answers.push_back(page("", "i1b", 5000));
  f.http->answers.push_back(page(record("21", "k", "x"), "i1c", 4000));
  // Shard 2, given: at its tip.
  f.http->answers.push_back(HttpResponse{200, R"({"ShardIterator":"i2"})"});
  f.http->answers.push_back(page("", "i2b", 0));
  // Shard 3, not given: from its trim horizon.
  f.http->answers.push_back(HttpResponse{200, R"({"ShardIterator":"i3"})"});
  f.http->answers.push_back(page(record("30", "k", "y"), "i3b", 100));
  Millis before = f.clock.steady();
  auto next = f.log.next_arrivals(
      {{1, *Position::sequence("20")}, {2, Position::arrived_at(1764412340000)}});
  REQUIRE(next.ok());
  // Shard 0, closed, the parent of shard 1: read past, left out, nothing
  // asked of it.
  REQUIRE(next->size() == 3);
  CHECK((*next)[0].partition == 1);
  CHECK(*(*next)[0].arrival == 1764412345500);
  CHECK((*next)[1].partition == 2);
  CHECK_FALSE((*next)[1].arrival);
  CHECK((*next)[2].partition == 3);
  CHECK(*(*next)[2].arrival == 1764412345500);
  // The second call on shard 1 waited for the service's rate.
  CHECK(f.clock.steady() - before == kGetRecordsInterval);
  std::vector<std::string> bodies;
  for (const auto& r : f.http->sent)
    if (amz_operation(r) == "GetShardIterator") bodies.push_back(r.body);
  CHECK(
      bodies ==
      std::vector<std::string>{
          R"({"StreamName":"s","ShardId":"shardId-000000000001","ShardIteratorType":"AFTER_SEQUENCE_NUMBER","StartingSequenceNumber":"20"})",
          R"({"StreamName":"s","ShardId":"shardId-000000000002","ShardIteratorType":"AT_TIMESTAMP","Timestamp":1764412340.000})",
          R"({"StreamName":"s","ShardId":"shardId-000000000003","ShardIteratorType":"TRIM_HORIZON"})"});
  CHECK(f.http->answers.empty());
}

namespace {

// An entry of store "s1": an envelope line (from topic src) when `key` is
// given, else a plain line.
ReplayItem entry(int64_t id, const std::string& key, const std::string& value) {
  ReplayItem item;
  item.entry.id = id;
  item.replay_id = "s1:" + std::to_string(id);
  if (key.empty()) {
    item.entry.payload = value;
    return item;
  }
  item.entry.payload = R"({"topic":"src","partition":0,"offset":)" + std::to_string(id) +
                       R"(,"key":")" + key + R"(","headers":[["h","v"]],"value":)" + value + "}";
  item.entry.source = SourcePosition{"src", 0, id};
  return item;
}

}  // namespace

TEST_CASE("kinesis log: a replay target sends an entry as its record, keyed, without headers",
          "[kinesis][kinesis_log][dlq_replay]") {
  Fixture f;
  f.http->answers.push_back(shards({"shardId-000000000000"}));
  auto target = f.log.replay_target();
  REQUIRE(target.ok());
  ReplayTarget& t = **target;
  CHECK(t.describe() == "kinesis:s");
  CHECK(t.acknowledges_later());
  CHECK(t.finds_by_content());
  // A second before the clock: the service's may be behind.
  CHECK(*t.mark() == "@1796465729000");
  REQUIRE(*t.send(entry(1, "user-1", R"({"n":1})"), 0));
  REQUIRE(*t.send(entry(2, "", "plain line"), 1));
  auto tombstone = t.send(entry(3, "user-3", "null"), 2);
  REQUIRE_FALSE(tombstone.ok());
  CHECK(tombstone.error().message ==
        "cannot deliver to 'kinesis:s': entry s1:3 is a tombstone (a null value), which a "
        "Kinesis record cannot be");
  f.http->answers.push_back(HttpResponse{200, R"({"FailedRecordCount":0,"Records":[
    {"SequenceNumber":"1","ShardId":"shardId-000000000000"},
    {"SequenceNumber":"2","ShardId":"shardId-000000000000"}]})"});
  std::vector<uint64_t> delivered;
  REQUIRE(t.flush(delivered).ok());
  CHECK(delivered == std::vector<uint64_t>{0, 1});
  // The envelope's key and value; the plain line keyed by its replay id.
  std::string a, b;
  append_base64(a, R"({"n":1})");
  append_base64(b, "plain line");
  CHECK(f.http->sent.back().body == R"({"StreamName":"s","Records":[{"Data":")" + a +
                                        R"(","PartitionKey":"user-1"},)" + R"({"Data":")" + b +
                                        R"(","PartitionKey":"s1:2"}]})");
}

TEST_CASE("kinesis log: a replay target finds in-doubt entries by key and bytes since the mark",
          "[kinesis][kinesis_log][dlq_replay]") {
  Fixture f;
  f.http->answers.push_back(shards({"shardId-000000000000"}));
  auto target = f.log.replay_target();
  REQUIRE(target.ok());
  // Entries 4 and 5 replay as the same record, of which the stream holds
  // one; 6 is a plain line keyed by its id; 7 never arrived.
  std::vector<ReplayItem> in_doubt{entry(4, "user-1", R"({"n":1})"),
                                   entry(5, "user-1", R"({"n":1})"), entry(6, "", "plain line"),
                                   entry(7, "user-2", R"({"n":2})")};
  f.http->answers.push_back(shards({"shardId-000000000000"}));
  f.http->answers.push_back(HttpResponse{200, R"({"ShardIterator":"i0"})"});
  f.http->answers.push_back(
      page(record("10", "user-1", R"({"n":1})") + "," + record("11", "other", "plain line") + "," +
               record("12", "s1:6", "plain line") + "," + record("13", "user-2", R"({"n":3})"),
           "i1", 0));
  f.http->answers.push_back(page("", "i2", 0));
  auto found = (*target)->delivered_since("@1796465729000", "s1:", in_doubt);
  REQUIRE(found.ok());
  CHECK(*found == std::set<std::string>{"s1:4", "s1:6"});
  std::vector<std::string> bodies;
  for (const auto& r : f.http->sent)
    if (amz_operation(r) == "GetShardIterator") bodies.push_back(r.body);
  CHECK(
      bodies ==
      std::vector<std::string>{
          R"({"StreamName":"s","ShardId":"shardId-000000000000","ShardIteratorType":"AT_TIMESTAMP","Timestamp":1796465729.000})"});
  CHECK((*target)->delivered_since("17", "s1:", in_doubt).error().message ==
        "'kinesis:s' keeps a replay mark '17' that is not a time");
}

// --- a stream as a dead-letter store ----------------------------------------------

namespace {

// A dead-letter sink on the stream "s", which exists.
std::unique_ptr<DeadLetterSink> sink_of(Fixture& f) {
  f.http->answers.push_back(shards({"shardId-000000000000"}));
  auto sink = f.log.dead_letter_sink();
  REQUIRE(sink.ok());
  return std::move(*sink);
}

}  // namespace

TEST_CASE("kinesis log: a dead-letter sink says a missing stream at start",
          "[kinesis][kinesis_log][dead_letter]") {
  Fixture f;
  f.http->answers.push_back(HttpResponse{
      400,
      R"({"__type":"ResourceNotFoundException","message":"Stream s under account 0 not found."})"});
  auto sink = f.log.dead_letter_sink();
  REQUIRE_FALSE(sink.ok());
  CHECK(sink.error().status == ExitStatus::kFailure);
  CHECK(sink.error().message == "dead-letter store 'kinesis:s': stream 's' does not exist");
}

TEST_CASE("kinesis log: a dead letter is one record, keyed by its source partition or its stage",
          "[kinesis][kinesis_log][dead_letter]") {
  Fixture f;
  auto sink = sink_of(f);
  CHECK(sink->describe() == "kinesis:s");
  DeadLetter plain;
  plain.at = 1764412345123;
  plain.stage = "kdedup";
  plain.reason = "line 1: not valid JSON";
  plain.payload = "{\"broken\":";
  DeadLetter from_envelope = plain;
  from_envelope.source = SourcePosition{"events", 3, 17};
  REQUIRE(sink->write(plain).ok());
  REQUIRE(sink->write(from_envelope).ok());
  CHECK(f.http->sent.size() == 1);  // queued until sync
  f.http->answers.push_back(HttpResponse{200, R"({"FailedRecordCount":0,"Records":[
    {"SequenceNumber":"1","ShardId":"shardId-000000000000"},
    {"SequenceNumber":"2","ShardId":"shardId-000000000000"}]})"});
  REQUIRE(sink->sync().ok());
  REQUIRE(f.http->sent.size() == 2);
  auto body = parse_json(f.http->sent[1].body);
  REQUIRE(body.ok());
  const JsonValue* records = body->find("Records");
  REQUIRE(records != nullptr);
  REQUIRE(records->items.size() == 2);
  CHECK(records->items[0].find("PartitionKey")->str == "kdedup");
  CHECK(records->items[1].find("PartitionKey")->str == "events/3");
  auto data = decode_base64(records->items[1].find("Data")->str);
  REQUIRE(data.ok());
  CHECK(*data == dead_letter_json(from_envelope));
}

TEST_CASE("kinesis log: a dead letter too large for a record is the store failing, not bad input",
          "[kinesis][kinesis_log][dead_letter]") {
  Fixture f;
  auto sink = sink_of(f);
  std::string line(1024 * 1024, 'x');
  DeadLetter d;
  d.stage = "kdlq-guard";
  d.reason = "line 1: longer than 10 bytes";
  d.payload = line;
  Status s = sink->write(d);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().status == ExitStatus::kFailure);
  CHECK(
      s.error().message.starts_with("cannot write a dead letter to 'kinesis:s': the record has "));
}

TEST_CASE("kinesis log: a stream read as a dead-letter store, foreign records as payloads",
          "[kinesis][kinesis_log][dead_letter]") {
  Fixture f;
  f.http->answers.push_back(shards({"shardId-000000000000"}));
  auto letters = f.log.dead_letters(nullptr);
  REQUIRE(letters.ok());
  DeadLetter d;
  d.at = 1764412345123;
  d.stage = "kwindow";
  d.reason = "line 4: late";
  d.payload = "{\"ts\":1}";
  f.http->answers.push_back(shards({"shardId-000000000000"}));
  f.http->answers.push_back(HttpResponse{200, R"({"ShardIterator":"i0"})"});
  f.http->answers.push_back(page(
      record("10", "kwindow", dead_letter_json(d)) + "," + record("11", "k", "foreign"), "i1", 0));
  f.http->answers.push_back(page("", "i2", 0));
  std::vector<std::string> seen;
  REQUIRE((*letters)
              ->scan({}, 0, true,
                     [&](const DlqEntry& e) -> Expected<bool> {
                       seen.push_back(fmt::format("{} {} {} {} {} {}", e.id_text(), e.at, e.stage,
                                                  e.reason, e.payload, e.replayed));
                       return true;
                     })
              .ok());
  CHECK(seen == std::vector<std::string>{"0:10 1764412345123 kwindow line 4: late {\"ts\":1} false",
                                         "0:11 1764412345500 " + std::string("  foreign false")});
  // Without a ledger there is nothing to replay with, and a stream deletes nothing.
  FakeClock clock{0};
  auto ledger = (*letters)->replay_ledger({}, 0, clock);
  REQUIRE_FALSE(ledger.ok());
  CHECK(ledger.error().status == ExitStatus::kUsage);
  auto purged = (*letters)->purge(true, std::nullopt, false);
  REQUIRE_FALSE(purged.ok());
  CHECK(purged.error().status == ExitStatus::kUsage);
}

}  // namespace kpipe

namespace kpipe {

// A shard the service keeps calling behind while it gives no record is
// given up at --timeout, never read for ever.
TEST_CASE("kinesis log: klag's read of a shard ends at the timeout", "[kinesis][kinesis_log]") {
  Fixture f;
  f.http->answers.push_back(shards({"shardId-000000000000"}));
  f.http->answers.push_back(HttpResponse{200, R"({"ShardIterator":"i0"})"});
  for (int i = 0; i < 100; ++i) f.http->answers.push_back(page("", "i0b", 5000));
  auto next = f.log.next_arrivals({{0, *Position::sequence("20")}});
  REQUIRE_FALSE(next.ok());
  CHECK(next.error().message ==
        "kinesis: shardId-000000000000 of stream 's' gave no record within 10s, though 5000 ms "
        "behind its tip");
  CHECK(f.http->answers.size() > 40);  // it stopped asking
}

}  // namespace kpipe
