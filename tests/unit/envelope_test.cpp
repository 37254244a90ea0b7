#include "kpipe/envelope.h"

#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "helpers.h"
#include "kpipe/json.h"

using namespace kpipe;
using kpipe::test::Padded;

namespace {

std::string envelope(const RecordView& r) {
  EnvelopeWriter w;
  std::string out;
  w.append(out, r);
  return out;
}

RecordView record(std::string_view topic, int32_t partition, int64_t offset, int64_t timestamp) {
  RecordView r;
  r.topic = topic;
  r.partition = partition;
  r.offset = offset;
  r.timestamp = timestamp;
  return r;
}

// The line without its newline, checked to be one valid JSON object.
std::string_view checked_line(const std::string& out) {
  REQUIRE(!out.empty());
  REQUIRE(out.back() == '\n');
  std::string_view line(out.data(), out.size() - 1);
  CHECK(line.find('\n') == std::string_view::npos);
  auto tree = parse_json(line);
  INFO(line);
  REQUIRE(tree.ok());
  CHECK(tree->type == JsonType::kObject);
  return line;
}

EnvelopeRecord read_back(std::string_view line) {
  EnvelopeReader reader;
  EnvelopeRecord rec;
  Padded padded(line);
  Status s = reader.read(padded, rec);
  INFO(line);
  if (!s.ok()) FAIL("refused: " << s.error().message);
  return rec;
}

std::string read_error(std::string_view line) {
  EnvelopeReader reader;
  EnvelopeRecord rec;
  Padded padded(line);
  Status s = reader.read(padded, rec);
  INFO(line);
  if (s.ok()) FAIL("accepted");
  CHECK(s.error().status == ExitStatus::kDataError);
  return s.error().message;
}

const std::string kBinary("\xff\x00\xfe", 3);  // base64 "/wD+"

}  // namespace

// --- EnvelopeWriter: exact output ------------------------------------------------

TEST_CASE("EnvelopeWriter: the example of kpipe(7), THE ENVELOPE", "[envelope]") {
  RecordView r = record("events", 0, 42, 1764412345123);
  r.key = "u1";
  r.headers = {{"trace", "a1"}};
  r.value = R"({"user_id":"u1"})";
  CHECK(envelope(r) ==
        R"({"topic":"events","partition":0,"offset":42,"timestamp":1764412345123,"key":"u1",)"
        R"("headers":[["trace","a1"]],"value":{"user_id":"u1"}})"
        "\n");
}

TEST_CASE("EnvelopeWriter: key forms", "[envelope]") {
  RecordView r = record("t", 3, 7, 5);
  r.value = "1";
  SECTION("absent") {
    CHECK(envelope(r) ==
          R"({"topic":"t","partition":3,"offset":7,"timestamp":5,"key":null,"value":1})"
          "\n");
  }
  SECTION("empty") {
    r.key = "";
    CHECK(envelope(r) ==
          R"({"topic":"t","partition":3,"offset":7,"timestamp":5,"key":"","value":1})"
          "\n");
  }
  SECTION("text that looks like JSON stays a string") {
    r.key = R"({"id":1})";
    CHECK(envelope(r) ==
          R"({"topic":"t","partition":3,"offset":7,"timestamp":5,"key":"{\"id\":1}","value":1})"
          "\n");
  }
  SECTION("not UTF-8") {
    r.key = kBinary;
    CHECK(envelope(r) ==
          R"({"topic":"t","partition":3,"offset":7,"timestamp":5,"key_base64":"/wD+","value":1})"
          "\n");
  }
}

TEST_CASE("EnvelopeWriter: value forms", "[envelope]") {
  RecordView r = record("t", 0, 0, 0);
  r.key = "k";
  std::string head = R"({"topic":"t","partition":0,"offset":0,"timestamp":0,"key":"k",)";
  SECTION("JSON, minified") {
    r.value = "{ \"a\" : [1, 2],\n \"s\":\"x y\" }\n";
    CHECK(envelope(r) == head + R"("value":{"a":[1,2],"s":"x y"}})"
                                "\n");
  }
  SECTION("a JSON number") {
    r.value = "-1.50";
    CHECK(envelope(r) == head + R"("value":-1.50})"
                                "\n");
  }
  SECTION("text") {
    r.value = "plain text, not JSON\twith a tab";
    CHECK(envelope(r) == head + R"("value":"plain text, not JSON\twith a tab"})"
                                "\n");
  }
  SECTION("almost JSON") {
    r.value = R"({"a":1} x)";
    CHECK(envelope(r) == head + R"("value":"{\"a\":1} x"})"
                                "\n");
  }
  SECTION("empty") {
    r.value = "";
    CHECK(envelope(r) == head + R"("value":""})"
                                "\n");
  }
  SECTION("not UTF-8") {
    r.value = kBinary;
    CHECK(envelope(r) == head + R"("value_base64":"/wD+"})"
                                "\n");
  }
  SECTION("a tombstone") {
    CHECK(envelope(r) == head + R"("value":null})"
                                "\n");
  }
  SECTION("a JSON string is written as the string of its bytes") {
    // Embedded as JSON it would read back as its content, without quotes:
    // indistinguishable from the payload hello.
    r.value = R"("hello")";
    CHECK(envelope(r) == head + R"("value":"\"hello\""})"
                                "\n");
    r.value = R"( "spaced" )";
    CHECK(envelope(r) == head + R"("value":" \"spaced\" "})"
                                "\n");
  }
  SECTION("the payload null is written as a string, not as a tombstone") {
    r.value = "null";
    CHECK(envelope(r) == head + R"("value":"null"})"
                                "\n");
    r.value = " null\n";
    CHECK(envelope(r) == head + R"("value":" null\n"})"
                                "\n");
  }
}

TEST_CASE("EnvelopeWriter: headers", "[envelope]") {
  RecordView r = record("t", 1, 2, 3);
  r.value = "{}";
  r.headers = {
      {"trace", "a1"}, {"trace", "a2"}, {"empty", std::nullopt}, {"bin", kBinary}, {"q\"", ""}};
  CHECK(envelope(r) == R"({"topic":"t","partition":1,"offset":2,"timestamp":3,"key":null,)"
                       R"("headers":[["trace","a1"],["trace","a2"],["empty",null],)"
                       R"(["bin",{"base64":"/wD+"}],["q\"",""]],)"
                       R"("value":{}})"
                       "\n");
}

TEST_CASE("EnvelopeWriter: a header name that is not UTF-8 is shown as base64 text", "[envelope]") {
  RecordView r = record("t", 0, 0, 0);
  r.value = "{}";
  r.headers = {{kBinary, "v"}};
  std::string out = envelope(r);
  checked_line(out);
  CHECK(out.find(R"("headers":[["/wD+","v"]])") != std::string::npos);
}

TEST_CASE("EnvelopeWriter: a record without a timestamp", "[envelope]") {
  RecordView r = record("t", 0, 0, -1);
  r.value = "{}";
  CHECK(envelope(r) ==
        R"({"topic":"t","partition":0,"offset":0,"timestamp":null,"key":null,"value":{}})"
        "\n");
}

TEST_CASE("EnvelopeWriter: topics are escaped and the cache follows topic changes", "[envelope]") {
  EnvelopeWriter w;
  std::string out;
  for (std::string_view topic : {"a", "b\"c", "a", "a"}) {
    RecordView r = record(topic, 0, 0, 0);
    r.value = "{}";
    w.append(out, r);
  }
  CHECK(out == R"({"topic":"a","partition":0,"offset":0,"timestamp":0,"key":null,"value":{}})"
               "\n"
               R"({"topic":"b\"c","partition":0,"offset":0,"timestamp":0,"key":null,"value":{}})"
               "\n"
               R"({"topic":"a","partition":0,"offset":0,"timestamp":0,"key":null,"value":{}})"
               "\n"
               R"({"topic":"a","partition":0,"offset":0,"timestamp":0,"key":null,"value":{}})"
               "\n");
}

TEST_CASE("EnvelopeWriter: an empty topic name still makes a JSON line", "[envelope]") {
  RecordView r = record("", 0, 0, 0);
  r.value = "{}";
  std::string out = envelope(r);
  checked_line(out);
  CHECK(out == R"({"topic":"","partition":0,"offset":0,"timestamp":0,"key":null,"value":{}})"
               "\n");
}

TEST_CASE("EnvelopeWriter: append_value for --format value", "[envelope]") {
  EnvelopeWriter w;
  std::string out;
  RecordView r = record("t", 0, 0, 0);
  w.append_value(out, r);
  r.value = "{ \"a\": 1 }";
  w.append_value(out, r);
  r.value = "text";
  w.append_value(out, r);
  r.value = R"("json string")";
  w.append_value(out, r);
  r.value = kBinary;
  w.append_value(out, r);
  CHECK(out == "null\n{\"a\":1}\n\"text\"\n\"json string\"\n{\"value_base64\":\"/wD+\"}\n");
}

// --- EnvelopeReader -----------------------------------------------------------------

TEST_CASE("EnvelopeReader: reads every field of the contract's example", "[envelope]") {
  auto rec = read_back(
      R"({"topic":"events","partition":0,"offset":42,"timestamp":1764412345123,"key":"u1",)"
      R"("headers":[["trace","a1"]],"value":{"user_id":"u1"}})");
  CHECK(rec.topic == "events");
  CHECK(rec.partition == 0);
  CHECK(rec.offset == 42);
  CHECK(rec.timestamp == 1764412345123);
  CHECK(rec.key == "u1");
  CHECK(rec.value == R"({"user_id":"u1"})");
  REQUIRE(rec.headers.size() == 1);
  CHECK(rec.headers[0].name == "trace");
  CHECK(rec.headers[0].value == "a1");
}

TEST_CASE("EnvelopeReader: only value is required; nulls are absences", "[envelope]") {
  auto rec = read_back(R"({"value":"v"})");
  CHECK_FALSE(rec.topic);
  CHECK_FALSE(rec.partition);
  CHECK_FALSE(rec.offset);
  CHECK_FALSE(rec.timestamp);
  CHECK_FALSE(rec.key);
  CHECK(rec.value == "v");
  CHECK(rec.headers.empty());
  rec = read_back(R"({"timestamp":null,"key":null,"value":null,"headers":null})");
  CHECK_FALSE(rec.timestamp);
  CHECK_FALSE(rec.key);
  CHECK_FALSE(rec.value);
}

TEST_CASE("EnvelopeReader: values are restored byte for byte", "[envelope]") {
  CHECK(read_back(R"({"value":{ "a" : [1, 2] }})").value == R"({"a":[1,2]})");
  CHECK(read_back(R"({"value":[]})").value == "[]");
  CHECK(read_back(R"({"value":-1.50})").value == "-1.50");
  CHECK(read_back(R"({"value":true})").value == "true");
  CHECK(read_back(R"({"value":"a\"b\n\u00e9"})").value == "a\"b\n\xc3\xa9");
  CHECK(read_back(R"({"value_base64":"/wD+"})").value == kBinary);
  CHECK(read_back(R"({"key_base64":"/wD+","value":""})").key == kBinary);
  CHECK(read_back(R"({"value":""})").value == "");
}

TEST_CASE("EnvelopeReader: headers in order, repeated names, null and binary values",
          "[envelope]") {
  auto rec = read_back(
      R"({"value":1,"headers":[["h","1"],["h","2"],["n",null],["b",{"base64":"/wD+"}],["",""]]})");
  REQUIRE(rec.headers.size() == 5);
  CHECK(rec.headers[0].name == "h");
  CHECK(rec.headers[0].value == "1");
  CHECK(rec.headers[1].name == "h");
  CHECK(rec.headers[1].value == "2");
  CHECK(rec.headers[2].name == "n");
  CHECK_FALSE(rec.headers[2].value);
  CHECK(rec.headers[3].value == kBinary);
  CHECK(rec.headers[4].name.empty());
  CHECK(rec.headers[4].value == "");
}

TEST_CASE("EnvelopeReader: errors for wrong types", "[envelope]") {
  CHECK(read_error(R"({"partition":"0","value":1})") == "field 'partition' is not an integer");
  CHECK(read_error(R"({"partition":1.5,"value":1})") == "field 'partition' is not an integer");
  // A string is a Kinesis sequence number's digits (kpipe(7), LOGS).
  for (const char* offset : {R"("x7")", R"("07")", "18446744073709551615", "1.5", "true"}) {
    INFO(offset);
    CHECK(read_error(fmt::format(R"({{"offset":{},"value":1}})", offset)) ==
          "field 'offset' is not an integer or a string of a sequence number's digits");
  }
  CHECK(read_error(R"({"timestamp":"2026-01-01T00:00:00Z","value":1})") ==
        "field 'timestamp' is not an integer");
  CHECK(read_error(R"({"key":5,"value":1})") == "field 'key' is a number, not a string or null");
  CHECK(read_error(R"({"key":{"a":1},"value":1})") ==
        "field 'key' is an object, not a string or null");
  CHECK(read_error(R"({"key":"k"})") == "field 'value' is missing");
  CHECK(read_error(R"({"value_base64":5})") == "field 'value' is missing");
  CHECK(read_error(R"({"value_base64":"/w!="})") ==
        "field 'value_base64': invalid base64: unexpected character");
  CHECK(read_error(R"({"key_base64":"/","value":1})") ==
        "field 'key_base64': invalid base64: bad length");
  CHECK(read_error(R"({"value":1,"headers":{"a":"b"}})") == "field 'headers' is not an array");
  CHECK(read_error(R"({"value":1,"headers":[["a"]]})") ==
        "field 'headers' must hold [name, value] pairs");
  CHECK(read_error(R"({"value":1,"headers":[[1,"a"]]})") ==
        "field 'headers' must hold [name, value] pairs");
  CHECK(read_error(R"({"value":1,"headers":["a"]})") ==
        "field 'headers' must hold [name, value] pairs");
  CHECK(read_error(R"({"value":1,"headers":[["a",5]]})") == "header 'a' has a number value");
  CHECK(read_error(R"({"value":1,"headers":[["a",{"b64":"x"}]]})") ==
        "header 'a' has an object value");
  CHECK(read_error(R"({"value":1,"headers":[["a",{"base64":"!!!!"}]]})") ==
        "header 'a': invalid base64: unexpected character");
  CHECK(read_error(R"([{"value":1}])") == "expected an envelope object, found an array");
  CHECK(read_error(R"("value")") == "expected an envelope object, found a string");
  CHECK(read_error(R"({"value":1)").starts_with("not valid JSON: "));
}

TEST_CASE("EnvelopeReader: a field and its base64 form together are ambiguous", "[envelope]") {
  CHECK(read_error(R"({"value":"a","value_base64":"/wD+"})") ==
        "fields 'value' and 'value_base64' are both present");
  CHECK(read_error(R"({"value":null,"value_base64":"/wD+"})") ==
        "fields 'value' and 'value_base64' are both present");
  CHECK(read_error(R"({"key":"k","key_base64":"/wD+","value":1})") ==
        "fields 'key' and 'key_base64' are both present");
  CHECK(read_error(R"({"key":null,"key_base64":"/wD+","value":1})") ==
        "fields 'key' and 'key_base64' are both present");
}

TEST_CASE("check_producible_timestamp: restored exactly, or refused naming the field",
          "[envelope]") {
  CHECK(check_producible_timestamp(std::nullopt).ok());
  CHECK(check_producible_timestamp(1).ok());
  CHECK(check_producible_timestamp(1764412345123).ok());
  // librdkafka reads 0 as "now": the record would get another timestamp.
  Status zero = check_producible_timestamp(0);
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.error().status == ExitStatus::kDataError);
  CHECK(zero.error().message ==
        "field 'timestamp' is 0, which librdkafka cannot produce (0 is now)");
  Status negative = check_producible_timestamp(-5);
  REQUIRE_FALSE(negative.ok());
  CHECK(negative.error().status == ExitStatus::kDataError);
  CHECK(negative.error().message ==
        "field 'timestamp' is negative (-5): Kafka timestamps count from the epoch");
}

TEST_CASE("EnvelopeReader: a partition outside int32 is refused, not wrapped", "[envelope]") {
  CHECK(read_back(R"({"partition":2147483647,"value":1})").partition == 2147483647);
  CHECK(read_error(R"({"partition":4294967296,"value":1})") == "field 'partition' is out of range");
  CHECK(read_error(R"({"partition":-2147483649,"value":1})") ==
        "field 'partition' is out of range");
}

TEST_CASE("EnvelopeReader: reading again starts from nothing", "[envelope]") {
  EnvelopeReader reader;
  EnvelopeRecord rec;
  Padded full(R"({"topic":"t","partition":1,"offset":2,"timestamp":3,"key":"k",)"
              R"("headers":[["h","v"]],"value":"x"})");
  REQUIRE(reader.read(full, rec).ok());
  CHECK(rec.headers.size() == 1);
  Padded bare(R"({"value":"y"})");
  REQUIRE(reader.read(bare, rec).ok());
  CHECK_FALSE(rec.topic);
  CHECK_FALSE(rec.key);
  CHECK(rec.headers.empty());
  CHECK(rec.value == "y");
}

// --- round trips -------------------------------------------------------------------------

namespace {

// What a payload reads back as: JSON comes back minified, everything else
// exactly. The cases below use JSON without insignificant whitespace, so
// "exactly" holds for every one of them.
struct Case {
  std::string topic;
  int32_t partition;
  int64_t offset;
  int64_t timestamp;
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::vector<std::pair<std::string, std::optional<std::string>>> headers;
};

std::string random_bytes(std::mt19937& rng, size_t max_len) {
  std::string s;
  size_t n = rng() % (max_len + 1);
  for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>(rng() & 0xff));
  return s;
}

std::string random_payload(std::mt19937& rng) {
  static const std::vector<std::string> kSamples = {R"({"user_id":"u1","n":[1,2.5,null]})",
                                                    "42",
                                                    "-0.5e3",
                                                    "true",
                                                    "null",
                                                    R"("a json string")",
                                                    "[]",
                                                    "{}",
                                                    "plain text",
                                                    "",
                                                    "é😀 unicode",
                                                    "{\"unterminated",
                                                    "1 2",
                                                    "line\nbreak",
                                                    "tab\there",
                                                    R"("quoted" then more)",
                                                    "\\",
                                                    "\"",
                                                    "  {\"spaced\":1}"};
  switch (rng() % 3) {
    case 0:
      return random_bytes(rng, 12);
    default:
      return kSamples[rng() % kSamples.size()];
  }
}

std::optional<std::string> maybe(std::mt19937& rng, std::string s) {
  if (rng() % 5 == 0) return std::nullopt;
  return s;
}

}  // namespace

TEST_CASE("EnvelopeWriter then EnvelopeReader restores every record exactly", "[envelope]") {
  std::mt19937 rng(1764412345);
  EnvelopeWriter writer;
  EnvelopeReader reader;
  for (int i = 0; i < 3000; ++i) {
    Case c;
    c.topic = rng() % 2 ? "events" : "t.\"quoted\"";
    c.partition = static_cast<int32_t>(rng() % 64);
    c.offset = static_cast<int64_t>(rng());
    c.timestamp = rng() % 4 == 0 ? -1 : static_cast<int64_t>(rng()) * 1000;
    c.key = maybe(rng, random_payload(rng));
    c.value = maybe(rng, random_payload(rng));
    size_t nh = rng() % 4;
    for (size_t h = 0; h < nh; ++h)
      c.headers.push_back(
          {rng() % 2 ? "h" : "trace-" + std::to_string(h), maybe(rng, random_payload(rng))});

    RecordView r;
    r.topic = c.topic;
    r.partition = c.partition;
    r.offset = c.offset;
    r.timestamp = c.timestamp;
    if (c.key) r.key = *c.key;
    if (c.value) r.value = *c.value;
    for (const auto& [n, v] : c.headers)
      r.headers.push_back({n, v ? std::optional<std::string_view>(*v) : std::nullopt});

    std::string out;
    writer.append(out, r);
    std::string_view line = checked_line(out);
    Padded padded(line);
    EnvelopeRecord rec;
    INFO("case " << i << ": " << line);
    REQUIRE(reader.read(padded, rec).ok());
    CHECK(rec.topic == c.topic);
    CHECK(rec.partition == c.partition);
    CHECK(rec.offset == c.offset);
    if (c.timestamp < 0) {
      CHECK_FALSE(rec.timestamp);
    } else {
      CHECK(rec.timestamp == c.timestamp);
    }
    CHECK(rec.key == c.key);
    std::optional<std::string> expected_value = c.value;
    if (c.value && *c.value == "  {\"spaced\":1}") expected_value = "{\"spaced\":1}";  // minified
    CHECK(rec.value == expected_value);
    REQUIRE(rec.headers.size() == c.headers.size());
    for (size_t h = 0; h < c.headers.size(); ++h) {
      CHECK(rec.headers[h].name == c.headers[h].first);
      CHECK(rec.headers[h].value == c.headers[h].second);
    }
  }
}

// --- source_position -----------------------------------------------------------------------

TEST_CASE("source_position: an envelope's topic, partition and offset", "[envelope]") {
  Padded env(
      R"({"topic":"events","partition":3,"offset":1043,"timestamp":1,"key":null,"value":{"x":1}})");
  auto pos = source_position(env);
  REQUIRE(pos);
  CHECK(pos->topic == "events");
  CHECK(pos->partition == 3);
  CHECK(pos->offset == 1043);
}

TEST_CASE("source_position: nothing for lines that are not envelopes", "[envelope]") {
  for (const char* line :
       {R"({"user_id":"u1"})", R"({"topic":"t","partition":"3","offset":1})",
        R"({"topic":"t","partition":3})", R"({"topic":5,"partition":3,"offset":1})",
        R"({"topic":"t","partition":3,"offset":1.5})",
        R"({"topic":"t","partition":4294967299,"offset":1})",
        R"({"topic":"t","partition":3,"offset":1)", "not json",
        R"([{"topic":"t","partition":3,"offset":1}])", ""}) {
    Padded padded(line);
    INFO(line);
    CHECK_FALSE(source_position(padded));
  }
}

TEST_CASE("EnvelopeWriter: payloads as --key-format and --value-format say", "[envelope]") {
  RecordView r = record("orders", 0, 7, 1764412345123);
  std::string key = "o-7", value = R"({"id":7})";
  r.key = key;
  r.value = value;
  SECTION("decoded with a schema: the JSON as it is, with the schema's id") {
    r.value_as = RecordView::As::kJson;
    r.value_schema_id = 3;
    CHECK(checked_line(envelope(r)) ==
          R"({"topic":"orders","partition":0,"offset":7,"timestamp":1764412345123,)"
          R"("key":"o-7","value":{"id":7},"value_schema_id":3})");
    std::string skey = R"({"k":1})";
    r.key = skey;
    r.key_as = RecordView::As::kJson;
    r.key_schema_id = 4;
    CHECK(checked_line(envelope(r)) ==
          R"({"topic":"orders","partition":0,"offset":7,"timestamp":1764412345123,)"
          R"("key":{"k":1},"key_schema_id":4,"value":{"id":7},"value_schema_id":3})");
  }
  SECTION("string: a JSON string even when the bytes are JSON") {
    r.value_as = RecordView::As::kString;
    CHECK(checked_line(envelope(r)).ends_with(R"("value":"{\"id\":7}"})"));
  }
  SECTION("bytes: always base64") {
    r.value_as = RecordView::As::kBytes;
    r.key_as = RecordView::As::kBytes;
    CHECK(checked_line(envelope(r))
              .ends_with(R"("key_base64":"by03","value_base64":"eyJpZCI6N30="})"));
  }
  SECTION("string, for bytes that are not UTF-8: base64 all the same") {
    std::string bad = test::bytes("\xff\x00");
    r.value = bad;
    r.value_as = RecordView::As::kString;
    CHECK(checked_line(envelope(r)).ends_with(R"("value_base64":"/wA="})"));
  }
  SECTION("--format value") {
    EnvelopeWriter w;
    std::string out;
    r.value_as = RecordView::As::kJson;
    w.append_value(out, r);
    r.value_as = RecordView::As::kString;
    w.append_value(out, r);
    r.value_as = RecordView::As::kBytes;
    w.append_value(out, r);
    CHECK(out == "{\"id\":7}\n\"{\\\"id\\\":7}\"\n{\"value_base64\":\"eyJpZCI6N30=\"}\n");
  }
}

TEST_CASE("EnvelopeReader: schema ids, and the payloads' JSON for an encoder", "[envelope]") {
  EnvelopeRecord rec;
  SECTION("kept when asked") {
    EnvelopeReader reader(true);
    Padded line(R"({"key":{"k": 1},"key_schema_id":4,"value":"abc","value_schema_id":3})");
    REQUIRE(reader.read(line.view(), rec).ok());
    CHECK(rec.key_schema_id == 4);
    CHECK(rec.value_schema_id == 3);
    CHECK(rec.key_json == R"({"k":1})");
    CHECK(rec.value_json == R"("abc")");
    CHECK(rec.value == "abc");
    CHECK_FALSE(rec.value_is_bytes);
  }
  SECTION("bytes stay bytes") {
    EnvelopeReader reader(true);
    Padded line(R"({"key_base64":"AAE=","value_base64":"AAAAAAMC"})");
    REQUIRE(reader.read(line.view(), rec).ok());
    CHECK(rec.value_is_bytes);
    CHECK(rec.key_is_bytes);
    CHECK_FALSE(rec.value_json);
    CHECK_FALSE(rec.value_schema_id);
  }
  SECTION("not kept by default, and a key that is not a string is still refused") {
    EnvelopeReader reader;
    Padded line(R"({"key":"k","value":{"a":1},"value_schema_id":3})");
    REQUIRE(reader.read(line.view(), rec).ok());
    CHECK_FALSE(rec.value_json);
    CHECK(rec.value_schema_id == 3);
    Padded object_key(R"({"key":{"k":1},"value":1})");
    CHECK_FALSE(reader.read(object_key.view(), rec).ok());
  }
  SECTION("a schema id that is not a non-negative int32 is refused, naming the field") {
    EnvelopeReader reader;
    Padded line(R"({"value":1,"value_schema_id":"3"})");
    Status s = reader.read(line.view(), rec);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message == "field 'value_schema_id' is not an integer");
    Padded big(R"({"value":1,"key_schema_id":4294967296})");
    s = reader.read(big.view(), rec);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message == "field 'key_schema_id' is out of range");
  }
}
