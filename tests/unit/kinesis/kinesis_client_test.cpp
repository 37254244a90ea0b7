#include "kpipe/kinesis/kinesis_client.h"

#include <catch2/catch.hpp>

#include <string>

#include "fake_http.h"
#include "fakes.h"
#include "kpipe/kinesis/shards.h"
#include "local_kinesis.h"

// One Kinesis call as the SDKs make it: signed, its target in the header,
// throttling and the service's failures retried with backoff until the
// timeout (on a fake clock: no test waits), a refusal for good said at
// once, and temporary credentials renewed before they expire.

namespace kpipe {
namespace {

HttpResponse throttled() {
  return {
      400,
      R"({"__type":"ProvisionedThroughputExceededException","message":"Rate exceeded for shard shardId-000000000000"})"};
}

// A client over a scripted transport (answering 200 once the script has
// run out), on a fake clock.
struct ScriptedClient {
  explicit ScriptedClient(Millis timeout = 10 * kSecond, CredentialSource keys = test_keys())
      : client(test_settings(), std::move(keys), http, clock, timeout) {
    http.fallback = HttpResponse{200, R"({"Shards":[]})"};
  }
  FakeHttp http;
  FakeClock clock{1796465730000};
  KinesisClient client;
};

}  // namespace

TEST_CASE("kinesis errors: the exception's name and message", "[kinesis][kinesis_client]") {
  auto e = parse_kinesis_error(
      R"({"__type":"com.amazonaws.kinesis#ResourceNotFoundException","message":"Stream s not found"})");
  CHECK(e.type == "ResourceNotFoundException");
  CHECK(e.message == "Stream s not found");
  CHECK(parse_kinesis_error(R"({"__type":"X","Message":"m"})").message == "m");
  CHECK(parse_kinesis_error("").type.empty());
  CHECK(is_retriable(400, parse_kinesis_error(throttled().body)));
  CHECK(is_retriable(400, {"LimitExceededException", ""}));
  CHECK(is_retriable(503, {}));
  CHECK(is_retriable(500, {"InternalFailure", ""}));
  // kinesis-mock's bad iterator: renewed by the caller, not retried here.
  CHECK_FALSE(is_retriable(500, {}));
  CHECK_FALSE(is_retriable(400, {"ResourceNotFoundException", ""}));
  CHECK_FALSE(is_retriable(400, {"ExpiredIteratorException", ""}));
}

TEST_CASE("kinesis client: a call, signed, its operation in X-Amz-Target",
          "[kinesis][kinesis_client]") {
  ScriptedClient c;
  auto& [http, clock, client] = c;
  auto answer = client.call("ListShards", R"({"StreamName":"s"})");
  REQUIRE(answer.ok());
  CHECK(*answer == R"({"Shards":[]})");
  REQUIRE(http.sent.size() == 1);
  CHECK(http.sent[0].method == "POST");
  CHECK(http.sent[0].url == "http://127.0.0.1:4568/");
  CHECK(http.sent[0].sigv4_scope == "aws:amz:eu-west-1:kinesis");
  CHECK(http.sent[0].headers == std::vector<std::pair<std::string, std::string>>{
                                    {"Content-Type", "application/x-amz-json-1.1"},
                                    {"X-Amz-Target", "Kinesis_20131202.ListShards"}});
  CHECK(http.sent[0].body == R"({"StreamName":"s"})");
}

TEST_CASE("kinesis client: throttling and failures are retried, nothing lost",
          "[kinesis][kinesis_client]") {
  ScriptedClient c;
  auto& [http, clock, client] = c;
  http.answers.push_back(throttled());
  http.answers.push_back(Expected<HttpResponse>(failure("Connection reset by peer")));
  http.answers.push_back(HttpResponse{503, ""});
  http.answers.push_back(HttpResponse{200, R"({"Records":[]})"});
  auto answer = client.call("GetRecords", "{}");
  REQUIRE(answer.ok());
  CHECK(*answer == R"({"Records":[]})");
  CHECK(http.sent.size() == 4);
  CHECK(client.retries() == 3);
  // Backoff waited (on the fake clock), within the SDKs' bounds.
  CHECK(clock.steady() <= 100 + 200 + 400);
}

TEST_CASE("kinesis client: past the timeout, one error with the last reason",
          "[kinesis][kinesis_client]") {
  ScriptedClient c(3 * kSecond);
  auto& [http, clock, client] = c;
  for (int i = 0; i < 1000; ++i) http.answers.push_back(throttled());
  auto answer = client.call("PutRecords", "{}");
  REQUIRE_FALSE(answer.ok());
  CHECK(answer.error().message ==
        "kinesis PutRecords: no answer from http://127.0.0.1:4568 within 3s: "
        "ProvisionedThroughputExceededException: Rate exceeded for shard shardId-000000000000");
  CHECK(clock.steady() <= 3 * kSecond);
  CHECK(http.sent.size() > 3);
}

TEST_CASE("kinesis client: a refusal for good is said at once", "[kinesis][kinesis_client]") {
  ScriptedClient c;
  auto& [http, clock, client] = c;
  http.answers.push_back(HttpResponse{
      400,
      R"({"__type":"ResourceNotFoundException","message":"Stream nope under account 000000000000 not found."})"});
  auto answer = client.call("ListShards", "{}");
  REQUIRE_FALSE(answer.ok());
  CHECK(answer.error().message ==
        "kinesis ListShards: ResourceNotFoundException: Stream nope under account 000000000000 "
        "not found.");
  CHECK(http.sent.size() == 1);
  CHECK(clock.steady() == 0);
}

TEST_CASE("kinesis client: temporary credentials are renewed before they expire",
          "[kinesis][kinesis_client]") {
  int asked = 0;
  FakeClock* now = nullptr;  // the client's clock, once it is made
  ScriptedClient c(10 * kSecond, [&] {
    ++asked;
    return Expected<AwsCredentials>(AwsCredentials{"ASIA" + std::to_string(asked), "s", "t",
                                                   "web identity", now->now() + 3600 * kSecond});
  });
  auto& [http, clock, client] = c;
  now = &clock;
  REQUIRE(client.call("ListShards", "{}").ok());
  clock.advance(50 * 60 * kSecond);  // 10 minutes left: kept
  REQUIRE(client.call("ListShards", "{}").ok());
  clock.advance(6 * 60 * kSecond);  // 4 minutes left: renewed
  REQUIRE(client.call("ListShards", "{}").ok());
  CHECK(asked == 2);
  CHECK(http.signed_with == std::vector<std::string>{"ASIA1", "ASIA1", "ASIA2"});
}

}  // namespace kpipe

// --- against a real Kinesis API: ctest's unit/kinesis runs these with
// KPIPE_TEST_KINESIS_URL naming the local Kinesis scripts/kinesis started
// (tests/unit/kinesis.sh). It checks no signature, but refuses a request
// without one, and keeps each stream in the region it was signed for.

namespace kpipe {
namespace {

struct LocalKinesis {
  LocalKinesis() {
    http = make_curl_transport();
    client = std::make_unique<KinesisClient>(test_settings(local_kinesis_url()), test_keys(), *http,
                                             clock, 30 * kSecond);
  }

  std::unique_ptr<HttpTransport> http;
  SystemClock clock;
  std::unique_ptr<KinesisClient> client;
};

}  // namespace

TEST_CASE("kinesis client on a local Kinesis: a stream made, written, listed and read back",
          "[kinesis-server]") {
  LocalKinesis k;
  std::string stream = make_stream(*k.client, k.clock, "client", 2);
  std::string put =
      call_ok(*k.client, "PutRecord",
              R"({"StreamName":")" + stream + R"(","PartitionKey":"u1","Data":"eyJhIjoxfQ=="})");
  auto shards = read_stream(*k.client, stream);
  REQUIRE(shards.size() == 2);
  CHECK(shards[0].first.partition == 0);
  CHECK(shards[1].first.partition == 1);
  CHECK_FALSE(shards[0].first.closed());
  std::vector<KinesisRecord> got;
  for (auto& [shard, records] : shards)
    for (auto& r : records) got.push_back(r);
  REQUIRE(got.size() == 1);
  CHECK(got[0].data == R"({"a":1})");
  CHECK(got[0].partition_key == "u1");
  CHECK(put.find(got[0].sequence) != std::string::npos);
  CHECK(got[0].arrival > 0);
  call_ok(*k.client, "DeleteStream", R"({"StreamName":")" + stream + R"("})");
}

TEST_CASE("kinesis client on a local Kinesis: a refusal names the exception", "[kinesis-server]") {
  LocalKinesis k;
  auto answer = k.client->call("ListShards", R"({"StreamName":"kpipe-no-such-stream"})");
  REQUIRE_FALSE(answer.ok());
  CHECK(answer.error().message.starts_with("kinesis ListShards: ResourceNotFoundException"));
  CHECK(k.client->retries() == 0);
}

}  // namespace kpipe
