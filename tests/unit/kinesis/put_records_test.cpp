#include "kpipe/kinesis/put_records.h"

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <tuple>

#include "fake_http.h"
#include "fakes.h"
#include "kpipe/json.h"
#include "kpipe/kinesis/shards.h"
#include "local_kinesis.h"

// Writing to Kinesis: what the service could never take refused as bad
// input, batches within PutRecords' limits, the records a call failed sent
// again in their order and only those, each record's fate told once; and,
// against the local Kinesis, every record written once and read back in
// order per partition key.

namespace kpipe {
namespace {

PutEntry entry(std::string key, std::string data, uint64_t tag = 0) {
  return PutEntry{std::move(key), std::move(data), "", tag};
}

// An answer writing every record of a request of `n`, or failing those
// whose index is in `failed` with the code given.
HttpResponse answer(size_t n, const std::map<size_t, std::string>& failed = {}) {
  std::string body = R"({"FailedRecordCount":)" + std::to_string(failed.size()) + R"(,"Records":[)";
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) body += ",";
    auto f = failed.find(i);
    if (f == failed.end()) {
      body += R"({"SequenceNumber":"4965678901234567890123456789012345678901234567890123456)" +
              std::to_string(i) + R"(","ShardId":"shardId-000000000000","ErrorCode":null})";
    } else {
      body +=
          R"({"ErrorCode":")" + f->second + R"(","ErrorMessage":"m)" + std::to_string(i) + R"("})";
    }
  }
  return {200, body + "]}"};
}

// The records of a PutRecords body sent, as "KEY:DATA" in order.
std::vector<std::string> records_of(const HttpRequest& r) {
  std::vector<std::string> out;
  simdjson::dom::parser p;
  for (auto rec : p.parse(r.body)["Records"].get_array()) {
    std::string_view data = rec["Data"].get_string();
    std::string_view key = rec["PartitionKey"].get_string();
    out.push_back(std::string(key) + ":" + decode_base64(data).value());
  }
  return out;
}

// A writer over a scripted transport, on a fake clock, keeping each
// record's fate (and checking each is told once).
struct ScriptedWriter {
  explicit ScriptedWriter(Millis timeout = 10 * kSecond) : writer_timeout(timeout) {
    writer.set_delivery_handler([this](uint64_t tag, const Error* err) {
      CHECK(fate.count(tag) == 0);
      fate[tag] = err == nullptr ? "written" : err->message;
    });
  }
  FakeHttp http;
  FakeClock clock{1796465730000};
  KinesisClient client{test_settings(), test_keys(), http, clock, 10 * kSecond};
  Millis writer_timeout = 10 * kSecond;
  KinesisWriter writer{client, "s", clock, writer_timeout};
  std::map<uint64_t, std::string> fate;
};

}  // namespace

TEST_CASE("kinesis put: what the service could never take is bad input", "[kinesis][put_records]") {
  CHECK(check_put_entry(entry("k", "v")).ok());
  auto none = check_put_entry(entry("", "v"));
  CHECK(none.error().status == ExitStatus::kDataError);
  CHECK(none.error().message == "a Kinesis record needs a partition key, and this one has none");
  // 256 characters, not bytes: 'é' is two bytes and one character.
  std::string e256;
  for (int i = 0; i < 256; ++i) e256 += "\xC3\xA9";
  CHECK(check_put_entry(entry(e256, "v")).ok());
  CHECK(check_put_entry(entry(e256 + "x", "v")).error().message ==
        "the partition key has 257 characters, over Kinesis's 256");
  CHECK(check_put_entry(entry("k", std::string(kPutRecordMaxBytes - 1, 'x'))).ok());
  CHECK(check_put_entry(entry("k", std::string(kPutRecordMaxBytes, 'x'))).error().message ==
        "the record has 1048577 bytes (data and partition key), over Kinesis's 1048576 (1 MiB)");
  PutEntry hashed = entry("k", "v");
  hashed.explicit_hash_key = "340282366920938463463374607431768211455";
  CHECK(check_put_entry(hashed).ok());
  hashed.explicit_hash_key = "340282366920938463463374607431768211456";
  CHECK(check_put_entry(hashed).error().message ==
        "the explicit hash key '340282366920938463463374607431768211456' is not a decimal "
        "integer from 0 to 2^128-1");
  hashed.explicit_hash_key = "007";
  CHECK(check_put_entry(hashed).error().message == "the explicit hash key '007' has leading zeros");
}

TEST_CASE("kinesis put: the request and the answer", "[kinesis][put_records]") {
  std::vector<PutEntry> e{entry("u\"1", "{\"a\":1}"), PutEntry{"u2", "\x01\x02", "12345", 0}};
  CHECK(put_records_body("user-events", e) ==
        R"({"StreamName":"user-events","Records":[{"Data":"eyJhIjoxfQ==","PartitionKey":"u\"1"},)"
        R"({"Data":"AQI=","PartitionKey":"u2","ExplicitHashKey":"12345"}]})");
  auto o = parse_put_records(answer(3, {{1, "ProvisionedThroughputExceededException"}}).body, 3);
  REQUIRE(o.ok());
  CHECK((*o)[0].written);
  CHECK((*o)[0].shard_id == "shardId-000000000000");
  CHECK_FALSE((*o)[1].written);
  CHECK((*o)[1].error_code == "ProvisionedThroughputExceededException");
  CHECK((*o)[1].error_message == "m1");
  CHECK((*o)[2].written);
  CHECK(parse_put_records(answer(2).body, 3).error().message ==
        "kinesis PutRecords: 2 answers for 3 records");
}

TEST_CASE("kinesis put: batches within 500 records and 5 MiB", "[kinesis][put_records]") {
  ScriptedWriter w;
  auto& http = w.http;
  auto& writer = w.writer;
  for (int i = 0; i < 501; ++i) {
    if (i == 500) http.answers.push_back(answer(500));
    REQUIRE(writer.write(entry("k", std::to_string(i), i)).ok());
  }
  REQUIRE(http.sent.size() == 1);
  CHECK(records_of(http.sent[0]).size() == 500);
  http.answers.push_back(answer(1));
  REQUIRE(writer.flush().ok());
  REQUIRE(http.sent.size() == 2);
  CHECK(records_of(http.sent[1]) == std::vector<std::string>{"k:500"});
  CHECK(writer.delivered() == 501);

  // Six records of almost 1 MiB: five fit in 5 MiB, the sixth waits.
  std::string big(kPutRecordMaxBytes - 10, 'x');
  for (int i = 0; i < 6; ++i) {
    if (i == 5) http.answers.push_back(answer(5));
    REQUIRE(writer.write(entry("k", big, 1000 + i)).ok());
  }
  CHECK(http.sent.size() == 3);
  http.answers.push_back(answer(1));
  REQUIRE(writer.flush().ok());
  CHECK(http.sent.size() == 4);
}

TEST_CASE("kinesis put: the failed records again, only they, in their order",
          "[kinesis][put_records]") {
  ScriptedWriter w;
  auto [http, writer, fate] = std::tie(w.http, w.writer, w.fate);
  for (uint64_t i = 0; i < 5; ++i)
    REQUIRE(writer.write(entry(i % 2 ? "b" : "a", std::to_string(i), i)).ok());
  http.answers.push_back(answer(5, {{1, "ProvisionedThroughputExceededException"},
                                    {2, "KMSAccessDeniedException"},
                                    {3, "InternalFailure"}}));
  http.answers.push_back(answer(2, {{1, "ProvisionedThroughputExceededException"}}));
  http.answers.push_back(answer(1));
  REQUIRE(writer.flush().ok());
  REQUIRE(http.sent.size() == 3);
  CHECK(records_of(http.sent[1]) == std::vector<std::string>{"b:1", "b:3"});
  CHECK(records_of(http.sent[2]) == std::vector<std::string>{"b:3"});
  CHECK(fate == std::map<uint64_t, std::string>{
                    {0, "written"},
                    {1, "written"},
                    {2, "kinesis refused the record: KMSAccessDeniedException: m2"},
                    {3, "written"},
                    {4, "written"}});
  CHECK(writer.delivered() == 4);
  CHECK(writer.resent() == 3);
}

TEST_CASE("kinesis put: past the timeout, the records not written are told so",
          "[kinesis][put_records]") {
  ScriptedWriter w(2 * kSecond);
  auto [http, writer, fate] = std::tie(w.http, w.writer, w.fate);
  auto& clock = w.clock;
  REQUIRE(writer.write(entry("a", "0", 0)).ok());
  REQUIRE(writer.write(entry("a", "1", 1)).ok());
  http.fallback = answer(1, {{0, "ProvisionedThroughputExceededException"}});
  http.answers.push_back(answer(2, {{1, "ProvisionedThroughputExceededException"}}));
  Status s = writer.flush();
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message ==
        "kinesis PutRecords: 1 records not written within 2s: "
        "ProvisionedThroughputExceededException: m0");
  CHECK(fate.at(0) == "written");
  CHECK(fate.at(1) == s.error().message);
  CHECK(clock.steady() < 2 * kSecond);
}

TEST_CASE("kinesis put on a local Kinesis: every record once, in order per partition key",
          "[kinesis-server]") {
  auto http = make_curl_transport();
  SystemClock clock;
  KinesisClient client(test_settings(local_kinesis_url()), test_keys(), *http, clock, 30 * kSecond);
  std::string stream = make_stream(client, clock, "put", 3);
  KinesisWriter writer(client, stream, clock, 30 * kSecond);
  uint64_t told = 0;
  writer.set_delivery_handler([&](uint64_t, const Error* err) {
    CHECK(err == nullptr);
    ++told;
  });
  const int n = 1200;  // three batches
  for (int i = 0; i < n; ++i)
    REQUIRE(writer.write(entry("user-" + std::to_string(i % 17), std::to_string(i), i)).ok());
  REQUIRE(writer.flush().ok());
  CHECK(told == n);
  // Each record once, each key's in the order written.
  std::map<std::string, std::vector<int>> by_key;
  size_t read = 0;
  for (const auto& [shard, records] : read_stream(client, stream))
    for (const auto& r : records) {
      by_key[r.partition_key].push_back(std::stoi(r.data));
      ++read;
    }
  CHECK(read == static_cast<size_t>(n));
  CHECK(by_key.size() == 17);
  for (const auto& [key, values] : by_key) {
    INFO(key);
    CHECK(std::is_sorted(values.begin(), values.end()));
  }
  call_ok(client, "DeleteStream", R"({"StreamName":")" + stream + R"("})");
}

}  // namespace kpipe
