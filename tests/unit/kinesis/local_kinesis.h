// What the Kinesis layer's tests share: a client's settings and keys,
// and what the [kinesis-server] tests do on the local Kinesis that ctest's
// unit/kinesis names (tests/unit/kinesis.sh): a stream of their own, made
// and waited for, and read back whole.
#pragma once

#include <unistd.h>

#include <simdjson.h>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "kpipe/kinesis/kinesis_client.h"
#include "kpipe/kinesis/shards.h"

namespace kpipe {

inline AwsSettings test_settings(std::string endpoint = "http://127.0.0.1:4568") {
  AwsSettings s;
  s.region = "eu-west-1";
  s.endpoint = std::move(endpoint);
  return s;
}

inline CredentialSource test_keys() {
  return [] { return Expected<AwsCredentials>(AwsCredentials{"AKID", "s", "", "test", 0}); };
}

inline std::string local_kinesis_url() {
  const char* url = std::getenv("KPIPE_TEST_KINESIS_URL");
  if (url == nullptr || *url == '\0')
    FAIL("KPIPE_TEST_KINESIS_URL is not set: run these through ctest's unit/kinesis");
  return url;
}

inline std::string call_ok(KinesisClient& client, std::string_view operation,
                           const std::string& body) {
  auto answer = client.call(operation, body);
  if (!answer) FAIL(answer.error().message);
  return *answer;
}

// A stream named for this test and process, ACTIVE (bounded wait).
inline std::string make_stream(KinesisClient& client, Clock& clock, std::string_view test,
                               int shards) {
  std::string stream = "kpipe-" + std::string(test) + "-" + std::to_string(::getpid()) + "-" +
                       std::to_string(clock.now());
  call_ok(client, "CreateStream",
          R"({"StreamName":")" + stream + R"(","ShardCount":)" + std::to_string(shards) + "}");
  Millis deadline = clock.steady() + 30 * kSecond;
  while (call_ok(client, "DescribeStreamSummary", R"({"StreamName":")" + stream + R"("})")
             .find(R"("StreamStatus":"ACTIVE")") == std::string::npos) {
    REQUIRE(clock.steady() < deadline);
    clock.sleep_for(50);
  }
  return stream;
}

// Every shard's records from TRIM_HORIZON to where it is caught up.
inline std::vector<std::pair<Shard, std::vector<KinesisRecord>>> read_stream(
    KinesisClient& client, const std::string& stream) {
  auto shards =
      parse_list_shards(call_ok(client, "ListShards", R"({"StreamName":")" + stream + R"("})"));
  REQUIRE(shards.ok());
  std::vector<std::pair<Shard, std::vector<KinesisRecord>>> out;
  for (const auto& shard : shards->shards) {
    std::string answer = call_ok(client, "GetShardIterator",
                                 R"({"StreamName":")" + stream + R"(","ShardId":")" + shard.id +
                                     R"(","ShardIteratorType":"TRIM_HORIZON"})");
    simdjson::dom::parser p;
    std::string iterator(p.parse(answer)["ShardIterator"].get_string().value());
    std::vector<KinesisRecord> records;
    for (;;) {
      auto page = parse_get_records(
          call_ok(client, "GetRecords", R"({"ShardIterator":")" + iterator + R"(","Limit":1000})"));
      REQUIRE(page.ok());
      for (auto& r : page->records) records.push_back(std::move(r));
      if (page->records.empty() || !page->next_iterator) break;
      iterator = *page->next_iterator;
    }
    out.emplace_back(shard, std::move(records));
  }
  return out;
}

}  // namespace kpipe
