#include "kpipe/kinesis/stream_reader.h"

#include <simdjson.h>
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "fake_http.h"
#include "fakes.h"
#include "kpipe/json.h"
#include "kpipe/kinesis/put_records.h"
#include "local_kinesis.h"

// Reading a stream's shards: the requests it makes (every page of shards,
// each iterator from where the shard starts), an expired iterator renewed
// after the last record read, a closed shard's children read after it, 5
// calls a second per shard at most; and, against the local Kinesis, every
// record once and in order per key across a split made while reading.

namespace kpipe {
namespace {

HttpResponse records(std::vector<std::pair<std::string, std::string>> seq_data, const char* next,
                     int behind, const char* children = nullptr) {
  std::string body = "{" + records_json(seq_data);
  body += R"(,"NextShardIterator":)" +
          (next ? "\"" + std::string(next) + "\"" : std::string("null")) +
          R"(,"MillisBehindLatest":)" + std::to_string(behind);
  if (children != nullptr) body += R"(,"ChildShards":)" + std::string(children);
  return {200, body + "}"};
}

}  // namespace

TEST_CASE("kinesis stream reader: iterators from where each shard starts",
          "[kinesis][stream_reader]") {
  CHECK(
      shard_iterator_body("s", "shardId-000000000001", {}) ==
      R"({"StreamName":"s","ShardId":"shardId-000000000001","ShardIteratorType":"TRIM_HORIZON"})");
  CHECK(shard_iterator_body("s", "x", {ShardStart::Kind::kLatest, "", 0}) ==
        R"({"StreamName":"s","ShardId":"x","ShardIteratorType":"LATEST"})");
  CHECK(
      shard_iterator_body("s", "x", {ShardStart::Kind::kAtTimestamp, "", 1764412345012}) ==
      R"({"StreamName":"s","ShardId":"x","ShardIteratorType":"AT_TIMESTAMP","Timestamp":1764412345.012})");
  CHECK(
      shard_iterator_body("s", "x", {ShardStart::Kind::kAfterSequence, "4965", 0}) ==
      R"({"StreamName":"s","ShardId":"x","ShardIteratorType":"AFTER_SEQUENCE_NUMBER","StartingSequenceNumber":"4965"})");
}

TEST_CASE("kinesis stream reader: pages of shards, a renewed iterator, a closed shard's children",
          "[kinesis][stream_reader]") {
  FakeHttp http;
  FakeClock clock(1796465730000);
  KinesisClient client(test_settings("http://127.0.0.1:4568"), test_keys(), http, clock,
                       10 * kSecond);
  StreamReader reader(client, "s", clock);
  http.answers.push_back(HttpResponse{200, R"({"Shards":[{"ShardId":"shardId-000000000000",
    "SequenceNumberRange":{"StartingSequenceNumber":"1","EndingSequenceNumber":"9"}}],"NextToken":"t2"})"});
  http.answers.push_back(HttpResponse{
      200, R"({"Shards":[{"ShardId":"shardId-000000000001","ParentShardId":"shardId-000000000000",
    "SequenceNumberRange":{"StartingSequenceNumber":"10"}}],"NextToken":null})"});
  REQUIRE(reader.open([](const Shard&) { return StreamReader::Plan{}; }).ok());
  CHECK(http.sent[1].body == R"({"NextToken":"t2"})");
  CHECK(reader.lineage().readable() == std::vector<std::string>{"shardId-000000000000"});

  std::vector<std::string> seen;
  auto handler = [&](const StreamReader::Event& e) -> Status {
    std::string what =
        e.kind == StreamReader::Event::Kind::kRecord
            ? e.record->sequence + "=" + e.record->data
            : (e.kind == StreamReader::Event::Kind::kClosed ? "closed " : "tip ") + e.shard->id;
    seen.push_back(what);
    return {};
  };
  // Shard 0: an iterator, two records, then its iterator expired; renewed
  // after the last record read; then its end, and its child named.
  http.answers.push_back(HttpResponse{200, R"({"ShardIterator":"it0"})"});
  http.answers.push_back(records({{"1", "a"}, {"2", "b"}}, "it0b", 500));
  REQUIRE(reader.poll(handler).ok());
  http.answers.push_back(
      HttpResponse{400, R"({"__type":"ExpiredIteratorException","message":"Iterator expired"})"});
  REQUIRE(reader.poll(handler).ok());  // not due yet: waits 200 ms on the clock, calls nothing
  CHECK(clock.steady() == kGetRecordsInterval);
  REQUIRE(reader.poll(handler).ok());  // the expired answer
  CHECK(reader.renewed() == 1);
  http.answers.push_back(HttpResponse{200, R"({"ShardIterator":"it0c"})"});
  http.answers.push_back(
      records({{"3", "c"}}, nullptr, 0,
              R"([{"ShardId":"shardId-000000000001","ParentShards":["shardId-000000000000"]}])"));
  clock.advance(kGetRecordsInterval);
  REQUIRE(reader.poll(handler).ok());
  // Shard 1, now readable: at its tip at once.
  http.answers.push_back(HttpResponse{200, R"({"ShardIterator":"it1"})"});
  http.answers.push_back(records({}, "it1b", 0));
  REQUIRE(reader.poll(handler).ok());
  CHECK(seen == std::vector<std::string>{"1=a", "2=b", "3=c", "closed shardId-000000000000",
                                         "tip shardId-000000000001"});
  CHECK(reader.caught_up());
  CHECK_FALSE(reader.caught_up(clock.steady() + 1));  // nothing asked since
  CHECK(reader.last_read() == std::map<std::string, std::string>{{"shardId-000000000000", "3"}});

  std::vector<std::string> calls;
  for (const auto& r : http.sent) calls.push_back(amz_operation(r));
  CHECK(calls == std::vector<std::string>{"ListShards", "ListShards", "GetShardIterator",
                                          "GetRecords", "GetRecords", "GetShardIterator",
                                          "GetRecords", "GetShardIterator", "GetRecords"});
  // Renewed after the last record read, not from the start.
  CHECK(
      http.sent[5].body ==
      R"({"StreamName":"s","ShardId":"shardId-000000000000","ShardIteratorType":"AFTER_SEQUENCE_NUMBER","StartingSequenceNumber":"2"})");
}

// kinesalite answers every page "0 ms behind", full ones too: a full page
// is never the tip (kconsume -e once ended after one page a shard).
TEST_CASE("kinesis stream reader: a full page is not the tip, whatever it says",
          "[kinesis][stream_reader]") {
  FakeHttp http;
  FakeClock clock(1796465730000);
  KinesisClient client(test_settings(), test_keys(), http, clock, 10 * kSecond);
  StreamReader reader(client, "s", clock);
  http.answers.push_back(HttpResponse{200, R"({"Shards":[{"ShardId":"shardId-000000000000",
    "SequenceNumberRange":{"StartingSequenceNumber":"1"}}]})"});
  REQUIRE(reader.open([](const Shard&) { return StreamReader::Plan{}; }).ok());
  std::vector<std::pair<std::string, std::string>> full;
  for (size_t i = 1; i <= kGetRecordsLimit; ++i) full.emplace_back(std::to_string(i), "x");
  size_t read = 0, tips = 0;
  auto handler = [&](const StreamReader::Event& e) -> Status {
    if (e.kind == StreamReader::Event::Kind::kRecord) ++read;
    if (e.kind == StreamReader::Event::Kind::kCaughtUp) ++tips;
    return {};
  };
  http.answers.push_back(HttpResponse{200, R"({"ShardIterator":"i"})"});
  http.answers.push_back(records(full, "i2", 0));
  REQUIRE(reader.poll(handler).ok());
  CHECK(read == kGetRecordsLimit);
  CHECK(tips == 0);
  CHECK_FALSE(reader.caught_up());
  http.answers.push_back(records({{"10001", "y"}}, "i3", 0));
  clock.advance(kGetRecordsInterval);
  REQUIRE(reader.poll(handler).ok());
  CHECK(read == kGetRecordsLimit + 1);
  CHECK(tips == 1);
  CHECK(reader.caught_up());
}

TEST_CASE(
    "kinesis stream reader on a local Kinesis: every record once, in order per key, across a "
    "split made while reading",
    "[kinesis-server]") {
  auto http = make_curl_transport();
  SystemClock clock;
  KinesisClient client(test_settings(local_kinesis_url()), test_keys(), *http, clock, 30 * kSecond);
  std::string stream = make_stream(client, clock, "read", 2);
  KinesisWriter writer(client, stream, clock, 30 * kSecond);
  auto write = [&](int from, int to) {
    for (int i = from; i < to; ++i)
      REQUIRE(
          writer.write(PutEntry{"user-" + std::to_string(i % 13), std::to_string(i), "", 0}).ok());
    REQUIRE(writer.flush().ok());
  };
  write(0, 300);
  StreamReader reader(client, stream, clock);
  REQUIRE(reader.open([](const Shard&) { return StreamReader::Plan{}; }).ok());
  std::map<std::string, std::vector<int>> by_key;
  size_t closed = 0;
  auto handler = [&](const StreamReader::Event& e) -> Status {
    if (e.kind == StreamReader::Event::Kind::kRecord)
      by_key[e.record->partition_key].push_back(std::stoi(e.record->data));
    if (e.kind == StreamReader::Event::Kind::kClosed) ++closed;
    return {};
  };
  // Until every shard is at its tip as answered after what was written.
  auto read_to_tip = [&] {
    Millis since = clock.steady();
    Millis deadline = since + 60 * kSecond;
    do {
      REQUIRE(reader.poll(handler).ok());
      REQUIRE(clock.steady() < deadline);
    } while (!reader.caught_up(since));
  };
  read_to_tip();
  // Split shard 0 at the middle of its hash range, then write more.
  call_ok(
      client, "SplitShard",
      R"({"StreamName":")" + stream +
          R"(","ShardToSplit":"shardId-000000000000","NewStartingHashKey":"85070591730234615865843651857942052864"})");
  Millis deadline = clock.steady() + 30 * kSecond;
  while (call_ok(client, "DescribeStreamSummary", R"({"StreamName":")" + stream + R"("})")
             .find(R"("StreamStatus":"ACTIVE")") == std::string::npos) {
    REQUIRE(clock.steady() < deadline);
    clock.sleep_for(50);
  }
  write(300, 600);
  read_to_tip();
  CHECK(closed == 1);
  CHECK(reader.lineage().finished("shardId-000000000000"));
  size_t total = 0;
  for (const auto& [key, values] : by_key) {
    INFO(key);
    CHECK(std::is_sorted(values.begin(), values.end()));
    CHECK(std::adjacent_find(values.begin(), values.end()) == values.end());
    total += values.size();
  }
  CHECK(total == 600);
  call_ok(client, "DeleteStream", R"({"StreamName":")" + stream + R"("})");
}

}  // namespace kpipe

namespace kpipe {

// kconsume --partitions 2 on a stream whose shard 2 is the child of shard 0:
// shard 0, left out, is paused, and its child is read all the same.
TEST_CASE("kinesis stream reader: a paused parent does not hold its child back",
          "[kinesis][stream_reader]") {
  FakeHttp http;
  FakeClock clock(1796465730000);
  KinesisClient client(test_settings(), test_keys(), http, clock, 10 * kSecond);
  StreamReader reader(client, "s", clock);
  http.answers.push_back(HttpResponse{200, R"({"Shards":[
    {"ShardId":"shardId-000000000000","SequenceNumberRange":{"StartingSequenceNumber":"1","EndingSequenceNumber":"5"}},
    {"ShardId":"shardId-000000000002","ParentShardId":"shardId-000000000000","SequenceNumberRange":{"StartingSequenceNumber":"6"}}]})"});
  REQUIRE(reader.open([](const Shard&) { return StreamReader::Plan{}; }).ok());
  CHECK(reader.lineage().readable() == std::vector<std::string>{"shardId-000000000000"});
  reader.pause("shardId-000000000000");
  std::vector<std::string> read;
  auto handler = [&](const StreamReader::Event& e) -> Status {
    if (e.kind == StreamReader::Event::Kind::kRecord) read.push_back(e.record->sequence);
    return {};
  };
  http.answers.push_back(HttpResponse{200, R"({"ShardIterator":"i2"})"});
  http.answers.push_back(records({{"7", "x"}}, "i2b", 0));
  REQUIRE(reader.poll(handler).ok());
  CHECK(read == std::vector<std::string>{"7"});
  std::vector<std::string> shards_read;
  for (const auto& r : http.sent)
    if (amz_operation(r) == "GetShardIterator") shards_read.push_back(r.body);
  REQUIRE(shards_read.size() == 1);
  CHECK(shards_read[0].find("shardId-000000000002") != std::string::npos);
}

}  // namespace kpipe
