#include "kpipe/kinesis/fan_out.h"

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "fake_http.h"
#include "fake_streaming.h"
#include "fakes.h"
#include "kpipe/json.h"
#include "local_kinesis.h"

// Enhanced fan-out against a scripted connection and a fake clock: the
// consumer registered or reused, subscriptions started where each shard
// starts and again after the last continuation once a second at most,
// events cut anywhere, a closed shard's end (AWS's ChildShards, or
// kinesis-mock's event at the tip of a shard known closed, or a shard
// found closed by listing the shards) and its children read after it,
// exceptions retried until the timeout or said at once.

namespace kpipe {
namespace {

constexpr const char* kArn = "arn:aws:kinesis:eu-west-1:000000000000:stream/s/consumer/c:1";
const std::string kShard0 = "shardId-000000000000";
const std::string kShard1 = "shardId-000000000001";
const std::string kShard2 = "shardId-000000000002";

std::string event(std::vector<std::pair<std::string, std::string>> seq_data,
                  const char* continuation, int behind, const char* children = nullptr) {
  std::string body = "{" + records_json(seq_data);
  body += R"(,"ContinuationSequenceNumber":)" +
          (continuation ? "\"" + std::string(continuation) + "\"" : std::string("null")) +
          R"(,"MillisBehindLatest":)" + std::to_string(behind);
  body += R"(,"ChildShards":)" + std::string(children ? children : "null") + "}";
  return encode_event_message({{":message-type", "event"},
                               {":event-type", "SubscribeToShardEvent"},
                               {":content-type", "application/json"}},
                              body);
}

std::string exception(const std::string& type, const std::string& message) {
  return encode_event_message({{":message-type", "exception"},
                               {":exception-type", type},
                               {":content-type", "application/json"}},
                              R"({"message":")" + message + R"("})");
}

// shard 0 closed, shard 1 its child, open.
const char* kListed = R"({"Shards":[
  {"ShardId":"shardId-000000000000","SequenceNumberRange":{"StartingSequenceNumber":"1","EndingSequenceNumber":"9"}},
  {"ShardId":"shardId-000000000001","ParentShardId":"shardId-000000000000","SequenceNumberRange":{"StartingSequenceNumber":"10"}}]})";

struct Fixture {
  FakeHttp http;
  FakeClock clock{1796465730000};
  KinesisClient client{test_settings(), test_keys(), http, clock, 10 * kSecond};
  FakeStreaming* net = nullptr;
  std::unique_ptr<StreamReader> reader;
  std::vector<std::string> seen;

  explicit Fixture(const char* listed = kListed) {
    http.answers.push_back(HttpResponse{200, listed});
    // Listings after the first say the same.
    http.fallback = HttpResponse{200, listed};
    auto transport = std::make_unique<FakeStreaming>(clock);
    net = transport.get();
    reader = std::make_unique<StreamReader>(
        client, "s",
        std::make_unique<FanOutFetcher>(client, "s", kArn, std::move(transport), clock,
                                        10 * kSecond));
    REQUIRE(reader->open([](const Shard&) { return StreamReader::Plan{}; }).ok());
  }

  Status poll() {
    return reader->poll([this](const StreamReader::Event& e) -> Status {
      switch (e.kind) {
        case StreamReader::Event::Kind::kRecord:
          seen.push_back(e.record->sequence + "=" + e.record->data);
          break;
        case StreamReader::Event::Kind::kClosed:
          seen.push_back("closed " + e.shard->id);
          break;
        case StreamReader::Event::Kind::kCaughtUp:
          seen.push_back("tip " + e.shard->id);
          break;
        case StreamReader::Event::Kind::kAdded:
          seen.push_back("added " + e.shard->id);
          break;
      }
      return {};
    });
  }
  // Polls until `done` (at most `n` times).
  template <typename F>
  void poll_until(F done, int n = 100) {
    for (int i = 0; i < n && !done(); ++i) REQUIRE(poll().ok());
    REQUIRE(done());
  }
};

}  // namespace

TEST_CASE("fan-out: SubscribeToShard's bodies", "[kinesis][fan_out]") {
  CHECK(
      subscribe_body("arn", "shardId-000000000001", {}) ==
      R"({"ConsumerARN":"arn","ShardId":"shardId-000000000001","StartingPosition":{"Type":"TRIM_HORIZON"}})");
  CHECK(subscribe_body("arn", "x", {ShardStart::Kind::kLatest, "", 0}) ==
        R"({"ConsumerARN":"arn","ShardId":"x","StartingPosition":{"Type":"LATEST"}})");
  CHECK(
      subscribe_body("arn", "x", {ShardStart::Kind::kAtTimestamp, "", 1764412345012}) ==
      R"({"ConsumerARN":"arn","ShardId":"x","StartingPosition":{"Type":"AT_TIMESTAMP","Timestamp":1764412345.012}})");
  CHECK(
      subscribe_body("arn", "x", {ShardStart::Kind::kAfterSequence, "4965", 0}) ==
      R"({"ConsumerARN":"arn","ShardId":"x","StartingPosition":{"Type":"AFTER_SEQUENCE_NUMBER","SequenceNumber":"4965"}})");
}

TEST_CASE("fan-out: records pushed, resubscribed after the continuation, a parent before its child",
          "[kinesis][fan_out]") {
  Fixture f;
  REQUIRE(f.poll().ok());
  // The child waits for its parent: one subscription.
  REQUIRE(f.net->started.size() == 1);
  CHECK(f.net->last().body == subscribe_body(kArn, kShard0, {}));
  // An event cut in three, the second cut inside its prelude.
  std::string e = event({{"1", "a"}, {"2", "b"}}, "2", 0);
  f.net->send(e.substr(0, 5));
  f.net->send(e.substr(5, 40));
  f.net->send(e.substr(45));
  f.poll_until([&] { return f.seen.size() == 3; });
  CHECK(f.seen == std::vector<std::string>{"1=a", "2=b", "tip " + kShard0});
  CHECK_FALSE(f.reader->caught_up(f.clock.steady() + 1));
  CHECK(f.reader->caught_up());

  // The service ends the subscription (its 5 minutes): subscribed again
  // after the continuation, a second after the first at the earliest.
  f.net->end();
  f.poll_until([&] { return f.net->started.size() == 2; });
  CHECK(f.net->last().at - f.net->started[0].at >= kSubscribeInterval);
  CHECK(f.net->last().body ==
        subscribe_body(kArn, kShard0, {ShardStart::Kind::kAfterSequence, "2", 0}));
  CHECK(f.reader->renewed() == 1);

  // Shard 0 was closed when subscribed (kinesis-mock sends no
  // ChildShards): an event at its tip with no record ends it, and its
  // child is subscribed from its start.
  f.net->send(event({}, "2", 0));
  f.poll_until([&] { return f.net->started.size() == 3; });
  CHECK(f.seen.back() == "closed " + kShard0);
  CHECK(f.net->started[1].cancelled);
  CHECK(f.net->last().body == subscribe_body(kArn, kShard1, {}));

  // AWS's end of a closed shard: its last event names its children, with
  // no continuation.
  f.net->send(event({{"11", "c"}}, nullptr, 0,
                    R"([{"ShardId":"shardId-000000000002","ParentShards":["shardId-000000000001"],
                        "HashKeyRange":{"StartingHashKey":"0","EndingHashKey":"9"}}])"));
  f.poll_until([&] { return f.net->started.size() == 4; });
  CHECK(f.seen == std::vector<std::string>{"1=a", "2=b", "tip " + kShard0, "closed " + kShard0,
                                           "11=c", "closed " + kShard1});
  CHECK(f.net->last().body == subscribe_body(kArn, kShard2, {}));
  CHECK(f.reader->lineage().finished(kShard1));
}

TEST_CASE("fan-out: a shard found closed by listing is subscribed again, and ends at its tip",
          "[kinesis][fan_out]") {
  const char* open = R"({"Shards":[
    {"ShardId":"shardId-000000000000","SequenceNumberRange":{"StartingSequenceNumber":"1"}}]})";
  Fixture f(open);
  REQUIRE(f.poll().ok());
  REQUIRE(f.net->started.size() == 1);
  f.net->send(event({{"1", "a"}}, "1", 0));
  f.poll_until([&] { return f.seen.size() == 2; });
  // A split: the listing says shard 0 closed, with two children.
  f.http.fallback = HttpResponse{200, R"({"Shards":[
    {"ShardId":"shardId-000000000000","SequenceNumberRange":{"StartingSequenceNumber":"1","EndingSequenceNumber":"5"}},
    {"ShardId":"shardId-000000000001","ParentShardId":"shardId-000000000000","SequenceNumberRange":{"StartingSequenceNumber":"10"}},
    {"ShardId":"shardId-000000000002","ParentShardId":"shardId-000000000000","SequenceNumberRange":{"StartingSequenceNumber":"20"}}]})"};
  // Empty events at the tip of a shard not known closed end nothing.
  for (int i = 0; i < 3; ++i) f.net->send(event({}, "1", 0));
  f.poll_until([&] { return f.net->started.size() == 2; });
  CHECK(f.net->started[0].cancelled);
  CHECK(f.net->started[1].at >= kRelistInterval);
  CHECK(f.net->last().body ==
        subscribe_body(kArn, kShard0, {ShardStart::Kind::kAfterSequence, "1", 0}));
  f.net->send(event({{"2", "b"}}, "2", 0));
  f.net->send(event({}, "2", 0));
  f.poll_until([&] { return f.net->started.size() == 4; });
  CHECK(f.seen == std::vector<std::string>{"1=a", "tip " + kShard0, "2=b", "tip " + kShard0,
                                           "closed " + kShard0});
  CHECK(f.net->started[2].body == subscribe_body(kArn, kShard1, {}));
  CHECK(f.net->started[3].body == subscribe_body(kArn, kShard2, {}));
}

TEST_CASE("fan-out: exceptions retried with backoff, or said at once", "[kinesis][fan_out]") {
  Fixture f;
  REQUIRE(f.poll().ok());
  // A subscription of a run before is still open: retried, a second
  // after the first at the earliest.
  f.net->send(exception("ResourceInUseException", "Another active subscription"));
  f.poll_until([&] { return f.net->started.size() == 2; });
  CHECK(f.net->last().at - f.net->started[0].at >= kSubscribeInterval);
  CHECK(f.net->last().body == subscribe_body(kArn, kShard0, {}));
  // A lost connection too.
  f.net->end("Connection reset by peer");
  f.poll_until([&] { return f.net->started.size() == 3; });

  SECTION("one the service keeps saying, until the timeout") {
    Status s;
    for (int i = 0; i < 1000 && s.ok(); ++i) {
      if (!f.net->queued.empty() || f.net->last().cancelled) {
        s = f.poll();
        continue;
      }
      f.net->send(exception("ResourceInUseException", "busy"));
      s = f.poll();
    }
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message ==
          "kinesis SubscribeToShard: no subscription to shardId-000000000000 of stream 's' "
          "within 10s: ResourceInUseException: busy");
    CHECK(f.clock.steady() <= 11 * kSecond);
  }
  SECTION("one that does not pass, at once") {
    f.net->send(exception("AccessDeniedException", "not yours"));
    Status s;
    for (int i = 0; i < 10 && s.ok(); ++i) s = f.poll();
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message ==
          "kinesis SubscribeToShard: shardId-000000000000 of stream 's': AccessDeniedException: "
          "not yours");
  }
  SECTION("subscriptions that end before their first event, until the timeout") {
    Status s;
    for (int i = 0; i < 1000 && s.ok(); ++i) {
      if (f.net->queued.empty() && !f.net->last().cancelled) f.net->end();
      s = f.poll();
    }
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message ==
          "kinesis SubscribeToShard: no subscription to shardId-000000000000 of stream 's' "
          "within 10s: the subscription ended before its first event");
  }
  SECTION("a refusal as an HTTP status") {
    f.net->send(R"({"__type":"ResourceNotFoundException","message":"no consumer"})", 400);
    f.net->end("", 400);
    Status s;
    for (int i = 0; i < 10 && s.ok(); ++i) s = f.poll();
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message ==
          "kinesis SubscribeToShard: shardId-000000000000 of stream 's': "
          "ResourceNotFoundException: no consumer");
  }
  SECTION("a broken framing") {
    std::string e = event({{"1", "a"}}, "1", 0);
    e[e.size() - 1] ^= 1;
    f.net->send(e);
    Status s;
    for (int i = 0; i < 10 && s.ok(); ++i) s = f.poll();
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message ==
          fmt::format("kinesis SubscribeToShard: shardId-000000000000 of stream 's': event "
                      "stream: a message of {} bytes fails its CRC32",
                      e.size()));
  }
}

TEST_CASE("fan-out: the consumer registered, waited for, or reused", "[kinesis][fan_out]") {
  FakeHttp http;
  FakeClock clock(1796465730000);
  KinesisClient client(test_settings(), test_keys(), http, clock, 10 * kSecond);
  const std::string summary =
      R"({"StreamDescriptionSummary":{"StreamName":"s","StreamARN":"arn:aws:kinesis:eu-west-1:000000000000:stream/s"}})";
  auto consumer = [](const char* status) {
    return HttpResponse{
        200, std::string(R"({"ConsumerDescription":{"ConsumerName":"c","ConsumerARN":")") + kArn +
                 R"(","ConsumerStatus":")" + status + R"("}})"};
  };
  SECTION("registered when new, asked for until ACTIVE") {
    http.answers.push_back(HttpResponse{200, summary});
    http.answers.push_back(
        HttpResponse{400, R"({"__type":"ResourceNotFoundException","message":"none"})"});
    http.answers.push_back(consumer("CREATING"));  // RegisterStreamConsumer's
    http.answers.push_back(consumer("CREATING"));
    http.answers.push_back(consumer("ACTIVE"));
    bool registered = false;
    auto arn = register_consumer(client, "s", "c", clock, 10 * kSecond, &registered);
    REQUIRE(arn);
    CHECK(*arn == kArn);
    CHECK(registered);
    std::vector<std::string> ops;
    for (const auto& r : http.sent) ops.push_back(amz_operation(r));
    CHECK(ops == std::vector<std::string>{"DescribeStreamSummary", "DescribeStreamConsumer",
                                          "RegisterStreamConsumer", "DescribeStreamConsumer",
                                          "DescribeStreamConsumer"});
    CHECK(http.sent[2].body ==
          R"({"StreamARN":"arn:aws:kinesis:eu-west-1:000000000000:stream/s","ConsumerName":"c"})");
    CHECK(clock.steady() == 2 * kSecond);
  }
  SECTION("reused when it exists") {
    http.answers.push_back(HttpResponse{200, summary});
    http.answers.push_back(consumer("ACTIVE"));
    bool registered = true;
    auto arn = register_consumer(client, "s", "c", clock, 10 * kSecond, &registered);
    REQUIRE(arn);
    CHECK_FALSE(registered);
    CHECK(http.sent.size() == 2);
  }
  SECTION("not ACTIVE within the timeout") {
    http.answers.push_back(HttpResponse{200, summary});
    http.fallback = consumer("CREATING");
    auto arn = register_consumer(client, "s", "c", clock, 3 * kSecond);
    REQUIRE_FALSE(arn);
    CHECK(arn.error().message ==
          "kinesis: consumer 'c' of stream 's' is not ACTIVE within 3s (it is CREATING)");
  }
  SECTION("no such stream") {
    http.answers.push_back(
        HttpResponse{400, R"({"__type":"ResourceNotFoundException","message":"none"})"});
    auto arn = register_consumer(client, "s", "c", clock, 3 * kSecond);
    REQUIRE_FALSE(arn);
    CHECK(arn.error().message ==
          "kinesis stream 's' does not exist (region eu-west-1, endpoint http://127.0.0.1:4568)");
  }
}

}  // namespace kpipe
