#include "kpipe/dlq_entry.h"
#include "kpipe/line.h"

#include <catch2/catch.hpp>

#include <string>

#include "kpipe/json.h"

namespace kpipe {
namespace {

using namespace std::string_literals;

DlqEntry entry(int64_t id, std::string stage, std::string reason, Millis at) {
  DlqEntry e;
  e.id = id;
  e.stage = std::move(stage);
  e.reason = std::move(reason);
  e.at = at;
  return e;
}

std::string padded(std::string_view s) {
  std::string p(s);
  p.append(kJsonPadding, '\0');
  return p;
}

// The payload an NDJSON entry holds, decoded back to bytes.
std::string payload_of(const std::string& line) {
  auto v = parse_json(line);
  REQUIRE(v.ok());
  if (const JsonValue* p = v->find("payload")) return p->str;
  const JsonValue* b = v->find("payload_base64");
  REQUIRE(b != nullptr);
  auto bytes = decode_base64(b->str);
  REQUIRE(bytes.ok());
  return *bytes;
}

TEST_CASE("reason_cause drops the line number, and only a well-formed one", "[dlq_entry]") {
  CHECK(reason_cause("line 17: field '.ts' is missing") == "field '.ts' is missing");
  CHECK(reason_cause("line 1: not valid JSON: empty") == "not valid JSON: empty");
  CHECK(reason_cause("line is longer than 10 bytes (--max-line-bytes)") ==
        "line is longer than 10 bytes (--max-line-bytes)");
  CHECK(reason_cause("line x: y") == "line x: y");
  CHECK(reason_cause("line 3 without colon") == "line 3 without colon");
  CHECK(reason_cause("late by 5s") == "late by 5s");
}

TEST_CASE("filters: reason substring, stage and its named instances, topic, time range, pending",
          "[dlq_entry]") {
  DlqEntry e = entry(1, "kdedup/orders", "line 3: field '.ts' is missing", 1000);
  e.source = SourcePosition{"events", 2, 40};
  DlqFilter f;
  CHECK(f.matches(e));
  CHECK_FALSE(f.narrows());

  f.reason = "'.ts'";
  CHECK(f.matches(e));
  f.reason = "'.TS'";  // case-sensitive, as SQLite's instr()
  CHECK_FALSE(f.matches(e));
  f = {};

  f.stage = "kdedup";
  CHECK(f.matches(e));
  f.stage = "kdedup/orders";
  CHECK(f.matches(e));
  f.stage = "kdedu";
  CHECK_FALSE(f.matches(e));
  f.stage = "kdedup/order";
  CHECK_FALSE(f.matches(e));
  DlqEntry other = entry(2, "kdedupx", "r", 1000);
  f.stage = "kdedup";
  CHECK_FALSE(f.matches(other));
  f = {};

  f.source_topic = "events";
  CHECK(f.matches(e));
  CHECK_FALSE(f.matches(other));  // no source at all
  f.source_topic = "event";
  CHECK_FALSE(f.matches(e));
  f = {};

  f.since = 1000;
  CHECK(f.matches(e));
  f.since = 1001;
  CHECK_FALSE(f.matches(e));
  f = {};
  f.until = 1001;
  CHECK(f.matches(e));
  f.until = 1000;  // until is exclusive
  CHECK_FALSE(f.matches(e));
  CHECK(f.narrows());
  f = {};

  f.pending_only = true;
  CHECK(f.matches(e));
  e.replayed = true;
  CHECK_FALSE(f.matches(e));
  CHECK_FALSE(f.narrows());
}

TEST_CASE("an NDJSON entry holds every field and the payload byte for byte", "[dlq_entry]") {
  DlqEntry e = entry(7, "kproduce", "line 3: not valid JSON: unclosed string", 1795946400010);
  e.input = "<stdin>";
  e.line = 3;
  e.failures = 1;
  e.payload = "{\"a\":\"b";
  std::string out;
  append_entry_ndjson(out, e);
  CHECK(out ==
        "{\"id\":7,\"at\":\"2026-11-29T10:00:00.010Z\",\"stage\":\"kproduce\","
        "\"reason\":\"line 3: not valid JSON: unclosed string\",\"input\":\"<stdin>\",\"line\":3,"
        "\"source_topic\":null,\"source_partition\":null,\"source_offset\":null,\"failures\":1,"
        "\"replayed\":false,\"replayed_at\":null,\"payload\":\"{\\\"a\\\":\\\"b\"}\n");

  SECTION("binary payloads and NUL bytes") {
    for (std::string bytes :
         {"\xff\xfe{\"x\":1}"s, "a\0b\0"s, "tab\there\x01"s, "caf\xc3\xa9"s, "\xc3"s}) {
      e.payload = bytes;
      out.clear();
      append_entry_ndjson(out, e);
      INFO("payload: " << preview(bytes, 100));
      CHECK(out.back() == '\n');
      CHECK(out.find('\n') == out.size() - 1);
      CHECK(payload_of(out.substr(0, out.size() - 1)) == bytes);
      CHECK((out.find("\"payload_base64\"") != std::string::npos) == !is_valid_utf8(bytes));
    }
  }

  SECTION("a Kafka entry: id as partition:offset, source, replayed without a time") {
    e.position = PartitionOffset{"dlq", 1, 42};
    e.source = SourcePosition{"events", 0, 9};
    e.failures.reset();
    e.replayed = true;
    e.stage = "bad\xff";  // a header from a foreign producer
    out.clear();
    append_entry_ndjson(out, e);
    auto v = parse_json(out.substr(0, out.size() - 1));
    REQUIRE(v.ok());
    CHECK(v->find("id")->str == "1:42");
    CHECK(v->find("source_topic")->str == "events");
    CHECK(v->find("source_offset")->integer == 9);
    CHECK(v->find("failures")->type == JsonType::kNull);
    CHECK(v->find("replayed")->boolean);
    CHECK(v->find("stage")->str == "bad\xef\xbf\xbd");
  }
}

TEST_CASE("preview escapes what a terminal should not see and cuts long text", "[dlq_entry]") {
  CHECK(preview("plain", 10) == "plain");
  CHECK(preview("a\tb\nc", 10) == "a\\x09b\\x0ac");
  CHECK(preview("\xff\xc3\xa9", 10) == "\\xff\xc3\xa9");
  CHECK(preview(std::string("a\0b", 3), 10) == "a\\x00b");
  CHECK(preview("abcdefgh", 5) == "abcde...");
  CHECK(preview("abcde", 5) == "abcde");
}

TEST_CASE("stats group by the reason without its line number, by stage, topic and hour",
          "[dlq_entry]") {
  std::vector<DlqEntry> entries = {
      entry(1, "kdedup", "line 1: field '.ts' is missing", 3 * kHour + 5),
      entry(2, "kdedup", "line 9: field '.ts' is missing", 3 * kHour + 7),
      entry(3, "kwindow", "line 4: not valid JSON: empty", 5 * kHour),
  };
  entries[1].replayed = true;
  entries[2].source = SourcePosition{"events", 0, 1};

  DlqStats by_reason(DlqStats::By::kReason);
  for (const auto& e : entries) by_reason.add(e);
  std::string out;
  by_reason.render_ndjson(out);
  CHECK(out ==
        "{\"reason\":\"field '.ts' is missing\",\"count\":2,\"pending\":1,"
        "\"first\":\"1970-01-01T03:00:00.005Z\",\"last\":\"1970-01-01T03:00:00.007Z\"}\n"
        "{\"reason\":\"not valid JSON: empty\",\"count\":1,\"pending\":1,"
        "\"first\":\"1970-01-01T05:00:00.000Z\",\"last\":\"1970-01-01T05:00:00.000Z\"}\n");
  out.clear();
  by_reason.render_table(out);
  CHECK(
      out ==
      "REASON                  COUNT  PENDING  FIRST                     LAST\n"
      "field '.ts' is missing      2        1  1970-01-01T03:00:00.005Z  1970-01-01T03:00:00.007Z\n"
      "not valid JSON: empty       1        1  1970-01-01T05:00:00.000Z  1970-01-01T05:00:00.000Z\n"
      "total                       3        2\n");

  DlqStats by_topic(DlqStats::By::kTopic);
  for (const auto& e : entries) by_topic.add(e);
  out.clear();
  by_topic.render_ndjson(out);
  CHECK(out.find("{\"topic\":null,\"count\":2,\"pending\":1,") == 0);
  CHECK(out.find("{\"topic\":\"events\",\"count\":1,\"pending\":1,") != std::string::npos);

  DlqStats by_hour(DlqStats::By::kHour);
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) by_hour.add(*it);
  out.clear();
  by_hour.render_ndjson(out);
  // A timeline: in time order, whatever the counts.
  CHECK(out.find("\"hour\":\"1970-01-01T03:00:00.000Z\",\"count\":2") <
        out.find("\"hour\":\"1970-01-01T05:00"));

  DlqStats by_stage(DlqStats::By::kStage);
  for (const auto& e : entries) by_stage.add(e);
  CHECK(by_stage.total() == 3);

  auto bad = DlqStats::parse_by("reasn");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "unknown --by key 'reasn', did you mean 'reason'?");
}

// --- Kafka records -------------------------------------------------------------------------

RecordView view_of(const OwnedRecord& r, std::string_view topic, int32_t partition,
                   int64_t offset) {
  RecordView v;
  v.topic = topic;
  v.partition = partition;
  v.offset = offset;
  v.timestamp = r.timestamp > 0 ? r.timestamp : 1;  // the broker stamps records sent without one
  if (r.key) v.key = *r.key;
  if (r.value) v.value = *r.value;
  for (const auto& h : r.headers)
    v.headers.push_back(
        {h.name, h.value ? std::optional<std::string_view>(*h.value) : std::nullopt});
  return v;
}

const std::string* header(const OwnedRecord& r, std::string_view name) {
  for (const auto& h : r.headers)
    if (h.name == name && h.value) return &*h.value;
  return nullptr;
}

// An entry read back holds the dead letter's line and context.
void check_context(const DlqEntry& e, const DeadLetter& d) {
  CHECK(e.payload == d.payload);
  CHECK(e.stage == d.stage);
  CHECK(e.reason == d.reason);
  CHECK(e.at == d.at);
  CHECK(e.input == d.input);
  CHECK(e.line == static_cast<int64_t>(d.line));
}

DeadLetter letter(std::string_view payload) {
  DeadLetter d;
  d.at = 1795946400010;
  d.stage = "kdedup/orders";
  d.reason = "line 5: field '.value.ts' is missing";
  d.input = "<stdin>";
  d.line = 5;
  d.payload = payload;
  std::string p = padded(payload);
  d.source = source_position(std::string_view(p.data(), payload.size()));
  return d;
}

TEST_CASE("a plain line becomes the record's value, with the context headers", "[dlq_entry]") {
  std::string line = "{\"user_id\":\"u1\"";  // truncated: no source position
  DeadLetter d = letter(line);
  EnvelopeReader reader;
  OwnedRecord r = encode_dead_letter(d, reader);
  CHECK_FALSE(r.key);
  CHECK(r.value == line);
  REQUIRE(r.headers.size() >= 3);
  CHECK(r.headers[0].name == "kpipe.error.reason");
  CHECK(r.headers[0].value == d.reason);
  CHECK(r.headers[1].name == "kpipe.error.stage");
  CHECK(r.headers[1].value == "kdedup/orders");
  CHECK(r.headers[2].name == "kpipe.error.at");
  CHECK(r.headers[2].value == "2026-11-29T10:00:00.010Z");
  CHECK(header(r, "kpipe.source.topic") == nullptr);
  CHECK(*header(r, "kpipe.dlq.value") == "line");

  DlqEntry e = decode_dead_letter(view_of(r, "dlq", 0, 3));
  check_context(e, d);
  CHECK_FALSE(e.source);
  CHECK_FALSE(e.record);
  CHECK(e.id_text() == "0:3");
}

TEST_CASE("an envelope goes back as its record, and its line is rebuilt byte for byte",
          "[dlq_entry]") {
  // What kconsume writes: rebuilding gives the same bytes, so the line does
  // not travel along.
  OwnedRecord original;
  original.key = "k1";
  original.value = "{\"ts\":\"late\"}";
  original.timestamp = 1764412345123;
  original.headers = {
      {"trace", "a1"}, {"trace", "a2"}, {"empty", std::nullopt}, {"bin", "\xff\x00"s}};
  std::string line = envelope_line(original, SourcePosition{"events", 3, 42});
  DeadLetter d = letter(line);
  REQUIRE(d.source);
  EnvelopeReader reader;
  OwnedRecord r = encode_dead_letter(d, reader);
  CHECK(r.key == "k1");
  CHECK(r.value == original.value);
  CHECK(r.timestamp == original.timestamp);
  REQUIRE(r.headers.size() > 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(r.headers[i].name == original.headers[i].name);
    CHECK(r.headers[i].value == original.headers[i].value);
  }
  CHECK(*header(r, "kpipe.source.topic") == "events");
  CHECK(*header(r, "kpipe.source.partition") == "3");
  CHECK(*header(r, "kpipe.source.offset") == "42");
  CHECK(*header(r, "kpipe.dlq.value") == "record");
  CHECK(header(r, "kpipe.source.line") == nullptr);

  DlqEntry e = decode_dead_letter(view_of(r, "dlq", 1, 7));
  CHECK(e.payload == line);
  REQUIRE(e.source);
  CHECK(e.source->topic == "events");
  CHECK(e.source->partition == 3);
  CHECK(e.source->offset == 42);
  REQUIRE(e.record);
  CHECK(e.record->key == "k1");
  CHECK(e.record->headers.size() == 4);  // the context headers are not the record's
  CHECK(e.record->timestamp == original.timestamp);
}

TEST_CASE("an envelope kconsume did not write keeps its exact line in a header", "[dlq_entry]") {
  EnvelopeReader reader;
  for (
      std::string line : {
          // pretty-printed value, extra field, no timestamp, key as base64
          "{\"topic\":\"events\",\"partition\":0,\"offset\":1,\"timestamp\":1764412345123,\"key\":"
          "null,"
          "\"value\":{ \"ts\" : 1 }}"s,
          "{\"topic\":\"events\",\"partition\":0,\"offset\":1,\"timestamp\":1764412345123,\"key\":"
          "null,"
          "\"value\":1,\"note\":\"added by jq\"}"s,
          "{\"topic\":\"events\",\"partition\":0,\"offset\":1,\"key\":\"k\",\"value\":\"v\"}"s,
          "{\"offset\":1,\"partition\":0,\"topic\":\"events\",\"timestamp\":5,\"key\":\"k\",\"value\":\"v\"}"s,
      }) {
    INFO(line);
    DeadLetter d = letter(line);
    REQUIRE(d.source);
    OwnedRecord r = encode_dead_letter(d, reader);
    REQUIRE(header(r, "kpipe.source.line") != nullptr);
    CHECK(*header(r, "kpipe.source.line") == line);
    CHECK(decode_dead_letter(view_of(r, "dlq", 0, 0)).payload == line);
  }
}

TEST_CASE("an envelope that cannot be read goes as its line, with its source position",
          "[dlq_entry]") {
  std::string line =
      "{\"topic\":\"events\",\"partition\":0,\"offset\":1,\"headers\":7,\"value\":1}";
  DeadLetter d = letter(line);
  REQUIRE(d.source);
  EnvelopeReader reader;
  OwnedRecord r = encode_dead_letter(d, reader);
  CHECK(r.value == line);
  CHECK(*header(r, "kpipe.dlq.value") == "line");
  DlqEntry e = decode_dead_letter(view_of(r, "dlq", 0, 0));
  CHECK(e.payload == line);
  CHECK(e.source);
  CHECK_FALSE(e.record);
}

TEST_CASE("a record kpipe did not write reads as an entry with its value", "[dlq_entry]") {
  OwnedRecord r;
  r.value = "someone else's";
  r.headers = {{"trace", "x"}};
  DlqEntry e = decode_dead_letter(view_of(r, "dlq", 0, 5));
  CHECK(e.payload == "someone else's");
  CHECK(e.stage.empty());
  CHECK(e.reason.empty());
  CHECK_FALSE(e.record);
}

// --- dead letters as JSON records (a Kinesis stream's) ----------------------------

TEST_CASE("a dead letter as a JSON record reads back whole, its line byte for byte",
          "[dlq_entry]") {
  const std::string line = "{\"n\":1,\"text\":\"\xc3\xa9 \\u0000 tab\there\"}";
  DeadLetter d = letter(line);
  d.at = 1764412345123;
  d.reason = "line 17: field '.ts' is missing";
  d.line = 17;
  d.source = SourcePosition{
      "events", 3, *Position::sequence("49590338271490256608559692538361571095921575989136588898")};
  d.payload = line;
  std::string json = dead_letter_json(d);
  CHECK(json.starts_with("{\"kpipe_dead_letter\":1,\"at\":\"2025-11-29T10:32:25.123Z\","));
  CHECK(json.find('\n') == std::string::npos);
  // kdlq list's line, but for the id and the replay state.
  DlqEntry listed;
  listed.at = d.at;
  listed.stage = d.stage;
  listed.reason = d.reason;
  listed.input = d.input;
  listed.line = 17;
  listed.source = d.source;
  listed.payload = line;
  std::string ndjson;
  append_entry_ndjson(ndjson, listed);
  CHECK(ndjson.substr(ndjson.find(",\"at\""),
                      ndjson.find(",\"failures\"") - ndjson.find(",\"at\"")) ==
        json.substr(json.find(",\"at\""), json.find(",\"payload\"") - json.find(",\"at\"")));

  DlqEntry e = parse_dead_letter_json(json);
  check_context(e, d);
  REQUIRE(e.source);
  CHECK(e.source->topic == "events");
  CHECK(e.source->partition == 3);
  CHECK(e.source->offset == d.source->offset);
  CHECK_FALSE(e.position);
  CHECK_FALSE(e.replayed);
}

TEST_CASE("a dead letter that is not UTF-8 travels as payload_base64 and reads back exact",
          "[dlq_entry]") {
  const std::string line = "{\"bytes\":\"\xff\xfe\x00\x80\"}"s;
  DeadLetter d;
  d.at = 1000;
  d.stage = "kdlq-guard";
  d.reason = "line 2: not valid JSON: invalid UTF-8";
  d.payload = line;
  std::string json = dead_letter_json(d);
  CHECK(json.find("\"payload_base64\":") != std::string::npos);
  CHECK(json.find("\"input\":null,\"line\":null,\"source_topic\":null") != std::string::npos);
  DlqEntry e = parse_dead_letter_json(json);
  CHECK(e.payload == line);
  CHECK(e.stage == "kdlq-guard");
  CHECK(e.input.empty());
  CHECK_FALSE(e.line);
  CHECK_FALSE(e.source);
  CHECK(e.at == 1000);
}

TEST_CASE("a record kpipe did not write comes back with its bytes as the payload", "[dlq_entry]") {
  for (std::string foreign :
       {"plain text"s, "{\"payload\":\"not ours\",\"stage\":\"x\"}"s, "[1,2]"s, "\xff\x00"s,
        "{\"kpipe_dead_letter\":1,\"stage\":\"no payload\"}"s, ""s}) {
    INFO(foreign);
    DlqEntry e = parse_dead_letter_json(foreign);
    CHECK(e.payload == foreign);
    CHECK(e.stage.empty());
    CHECK(e.reason.empty());
    CHECK(e.at == 0);
    CHECK_FALSE(e.source);
  }
}

}  // namespace
}  // namespace kpipe
