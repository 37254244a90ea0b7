#include "kpipe/schema/avro_codec.h"

#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "kpipe/json.h"
#include "schema/avro_fixtures.h"
#include "schema/fake_registry.h"

using namespace kpipe;
using namespace kpipe::avro_test;

namespace {

// More of python3-avro's payloads, written as avro_fixtures.h says.

const char* const kEventSchema = R"({"type":"record","name":"Event","fields":[
  {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"ts_us","type":{"type":"long","logicalType":"timestamp-micros"}},
  {"name":"local_ms","type":{"type":"long","logicalType":"local-timestamp-millis"}},
  {"name":"local_us","type":{"type":"long","logicalType":"local-timestamp-micros"}},
  {"name":"day","type":{"type":"int","logicalType":"date"}},
  {"name":"t_ms","type":{"type":"int","logicalType":"time-millis"}},
  {"name":"t_us","type":{"type":"long","logicalType":"time-micros"}},
  {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
  {"name":"big","type":{"type":"fixed","name":"Big","size":16,"logicalType":"decimal",
                        "precision":38,"scale":4}},
  {"name":"huge","type":{"type":"bytes","logicalType":"decimal","precision":40,"scale":3}},
  {"name":"id","type":{"type":"string","logicalType":"uuid"}},
  {"name":"when","type":["null",{"type":"long","logicalType":"timestamp-millis"}]}]})";

// ts = datetime.datetime(2026,11,29,10,15,30,123000,tzinfo=utc)
// {"ts":ts,"ts_us":ts.replace(microsecond=123456),"local_ms":1795947330123,
//  "local_us":1795947330123456,"day":datetime.date(2026,11,29),
//  "t_ms":datetime.time(10,15,30,123000),"t_us":datetime.time(10,15,30,123456),
//  "amount":Decimal("-12.34"),"big":Decimal("123456789012345678901234.5678"),
//  "huge":Decimal("-1234567890123456789012345678.901"),
//  "id":"0b8a2f8e-6c1d-4f4e-9a57-3f1b2c3d4e5f","when":ts}
// (python3-avro 1.11 has no local-timestamp types: their longs are given.)
const char* const kEventHex =
    "96e9ebecc46880dbadaaf2d9b00696e9ebecc46880dbadaaf2d9b006e4c40296899c2380dba793930204fb2e0000"
    "000003fd35eb6d797a91be38f34e1af06ae5605c5d7936b0f18993cb4830623861326638652d366331642d346634"
    "652d396135372d3366316232633364346535660296e9ebecc468";
const char* const kEventJson =
    R"({"ts":"2026-11-29T10:15:30.123Z","ts_us":"2026-11-29T10:15:30.123456Z",)"
    R"("local_ms":"2026-11-29T10:15:30.123","local_us":"2026-11-29T10:15:30.123456",)"
    R"("day":"2026-11-29","t_ms":"10:15:30.123","t_us":"10:15:30.123456","amount":"-12.34",)"
    R"("big":"123456789012345678901234.5678","huge":"-1234567890123456789012345678.901",)"
    R"("id":"0b8a2f8e-6c1d-4f4e-9a57-3f1b2c3d4e5f","when":"2026-11-29T10:15:30.123Z"})";
const char* const kEventEpochJson =
    R"({"ts":1795947330123,"ts_us":1795947330123.456,"local_ms":1795947330123,)"
    R"("local_us":1795947330123.456,"day":"2026-11-29","t_ms":"10:15:30.123",)"
    R"("t_us":"10:15:30.123456","amount":"-12.34","big":"123456789012345678901234.5678",)"
    R"("huge":"-1234567890123456789012345678.901","id":"0b8a2f8e-6c1d-4f4e-9a57-3f1b2c3d4e5f",)"
    R"("when":1795947330123})";
const char* const kEventStandardJson =
    R"({"ts":1795947330123,"ts_us":1795947330123456,"local_ms":1795947330123,)"
    R"("local_us":1795947330123456,"day":20786,"t_ms":36930123,"t_us":36930123456,)"
    R"("amount":"\u00fb.","big":"\u0000\u0000\u0000\u0000\u0003\u00fd5\u00ebmyz\u0091\u00be8\u00f3N",)"
    R"("huge":"\u00f0j\u00e5`\\]y6\u00b0\u00f1\u0089\u0093\u00cb",)"
    R"("id":"0b8a2f8e-6c1d-4f4e-9a57-3f1b2c3d4e5f","when":{"long":1795947330123}})";

// old = datetime.datetime(1969,7,20,20,17,40,5000,tzinfo=utc)
// {"ts":old,"ts_us":old,"local_ms":0,"local_us":-1,"day":datetime.date(1969,7,20),
//  "t_ms":datetime.time(0,0,0),"t_us":datetime.time(23,59,59,999999),
//  "amount":Decimal("0.05"),"big":Decimal("-0.0001"),
//  "huge":Decimal("99999999999999999999999999999.999"),
//  "id":"00000000-0000-0000-0000-000000000000","when":None}
const char* const kOldEventHex =
    "b5f5f3d569efadcd91c7b9060001c90200feffbadd83050205ffffffffffffffffffffffffffffffff1c04ee2d6d"
    "415b85acef80ffffffff4830303030303030302d303030302d303030302d303030302d303030303030303030303030"
    "00";
const char* const kOldEventJson =
    R"({"ts":"1969-07-20T20:17:40.005Z","ts_us":"1969-07-20T20:17:40.005000Z",)"
    R"("local_ms":"1970-01-01T00:00:00.000","local_us":"1969-12-31T23:59:59.999999",)"
    R"("day":"1969-07-20","t_ms":"00:00:00.000","t_us":"23:59:59.999999","amount":"0.05",)"
    R"("big":"-0.0001","huge":"99999999999999999999999999999.999",)"
    R"("id":"00000000-0000-0000-0000-000000000000","when":null})";

const char* const kDefaultsSchema = R"({"type":"record","name":"D","fields":[
  {"name":"k","type":"string"},
  {"name":"n","type":"int","default":7},
  {"name":"s","type":"string","default":"x"},
  {"name":"b","type":"bytes","default":"\u00ff\u0001"},
  {"name":"u","type":["null","string"],"default":null},
  {"name":"u2","type":["string","null"],"default":"dflt"},
  {"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]},"default":"B"},
  {"name":"a","type":{"type":"array","items":"int"},"default":[1,2]},
  {"name":"m","type":{"type":"map","values":"double"},"default":{"p":1.5}},
  {"name":"r","type":{"type":"record","name":"In","fields":[
    {"name":"x","type":"long"},{"name":"y","type":"long","default":9}]},"default":{"x":3}},
  {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"},"default":0}]})";
// {"k":"key","n":7,"s":"x","b":b"\xff\x01","u":None,"u2":"dflt","e":"B","a":[1,2],
//  "m":{"p":1.5},"r":{"x":3,"y":9},"ts":datetime.datetime(1970,1,1,tzinfo=utc)}
const char* const kDefaultsHex =
    "066b65790e027804ff0100000864666c740204020400020270000000000000f83f00061200";

}  // namespace

TEST_CASE("avro: every type decodes from python3-avro's bytes and encodes back to them", "[avro]") {
  Codec c(kOrderSchema);
  CHECK(c.decode_hex(kOrderHex) == kOrderJson);
  CHECK(c.encode(kOrderJson) == kOrderHex);
  CHECK(c.decode_hex(kEmptyOrderHex) == kEmptyOrderJson);
  CHECK(c.encode(kEmptyOrderJson) == kEmptyOrderHex);
}

TEST_CASE("avro: Avro's own JSON encoding wraps unions and writes bytes as code points", "[avro]") {
  Codec c(kOrderSchema, standard_json());
  CHECK(c.decode_hex(kOrderHex) == kOrderStandardJson);
  CHECK(c.encode(kOrderStandardJson) == kOrderHex);
}

TEST_CASE("avro: logical types as plain JSON", "[avro]") {
  Codec c(kEventSchema);
  CHECK(c.decode_hex(kEventHex) == kEventJson);
  CHECK(c.encode(kEventJson) == kEventHex);
  CHECK(c.decode_hex(kOldEventHex) == kOldEventJson);
  CHECK(c.encode(kOldEventJson) == kOldEventHex);

  SECTION("timestamps with any offset, numbers for decimals") {
    std::string json = kEventJson;
    auto replace = [&](std::string_view from, std::string_view to) {
      auto at = json.find(from);
      REQUIRE(at != std::string::npos);
      json.replace(at, from.size(), to);
    };
    replace(R"("ts":"2026-11-29T10:15:30.123Z")", R"("ts":"2026-11-29T12:15:30.123+02:00")");
    replace(R"("ts_us":"2026-11-29T10:15:30.123456Z")",
            R"("ts_us":"2026-11-29T05:15:30.1234569-05:00")");
    replace(R"("amount":"-12.34")", R"("amount":-12.34)");
    replace(R"("when":"2026-11-29T10:15:30.123Z")", R"("when":1795947330123)");
    CHECK(c.encode(json) == kEventHex);
  }
  SECTION("decimals are rescaled, never rounded") {
    Codec d(R"({"type":"bytes","logicalType":"decimal","precision":6,"scale":2})");
    CHECK(d.decode(framed(d.id, d.encode(R"("1.5")"))) == R"("1.50")");
    CHECK(d.decode(framed(d.id, d.encode(R"("-0.001e1")"))) == R"("-0.01")");
    CHECK(d.decode(framed(d.id, d.encode(R"("0")"))) == R"("0.00")");
    CHECK(d.decode(framed(d.id, d.encode("1200"))) == R"("1200.00")");
    CHECK(d.decode(framed(d.id, d.encode(R"("-9999.99")"))) == R"("-9999.99")");
    // Two's complement, big-endian, in as few bytes as keep the sign.
    CHECK(d.encode(R"("1.27")") == "027f");
    CHECK(d.encode(R"("1.28")") == "040080");
    CHECK(d.encode(R"("-1.28")") == "0280");
    CHECK(d.encode(R"("-1.29")") == "04ff7f");
    CHECK(d.encode_error(R"("1.234")") ==
          "avro: '1.234' is not a decimal(6, 2): more than 2 digits after the point");
    CHECK(d.encode_error(R"("10000.00")") ==
          "avro: '10000.00' is not a decimal(6, 2): more than 6 digits");
    CHECK(d.encode_error(R"("12,5")") == "avro: '12,5' is not a decimal(6, 2): not a number");
  }
  SECTION("times RFC 3339 cannot write stay numbers") {
    Codec d(R"(["null",{"type":"int","logicalType":"date"},)"
            R"({"type":"long","logicalType":"timestamp-millis"}])");
    // Day 7000000, in the year 21135 (the int's bytes, 80bfd606, are python3-avro's).
    CHECK(d.decode(framed(d.id, "0280bfd606")) == "7000000");
    CHECK(d.decode(framed(d.id, d.encode(R"({"int":7000000})"))) == "7000000");
    CHECK(d.decode(framed(d.id, d.encode(R"({"long":-62167219200001})"))) == "-62167219200001");
  }
}

TEST_CASE("avro: logical types with epoch milliseconds", "[avro]") {
  Codec c(kEventSchema, epoch_millis());
  CHECK(c.decode_hex(kEventHex) == kEventEpochJson);
  CHECK(c.encode(kEventEpochJson) == kEventHex);
  // Before the epoch: -1 us is -0.001 ms.
  CHECK(c.decode_hex(kOldEventHex).find(R"("ts_us":-14182939995,"local_ms":0,"local_us":-0.001)") !=
        std::string::npos);
}

TEST_CASE("avro: logical types in Avro's own JSON are their underlying values", "[avro]") {
  Codec c(kEventSchema, standard_json());
  CHECK(c.decode_hex(kEventHex) == kEventStandardJson);
  CHECK(c.encode(kEventStandardJson) == kEventHex);
}

TEST_CASE("avro: missing fields take the schema's defaults", "[avro]") {
  Codec c(kDefaultsSchema);
  CHECK(c.encode(R"({"k":"key"})") == kDefaultsHex);
  CHECK(c.decode_hex(kDefaultsHex) ==
        R"({"k":"key","n":7,"s":"x","b":"/wE=","u":null,"u2":"dflt","e":"B","a":[1,2],)"
        R"("m":{"p":1.5},"r":{"x":3,"y":9},"ts":"1970-01-01T00:00:00.000Z"})");
  // Fields in any order, nested defaults too.
  CHECK(c.encode(R"({"r":{"x":3},"k":"key","n":7})") == kDefaultsHex);
}

TEST_CASE("avro: two versions of a subject decode each with its own schema", "[avro]") {
  FakeRegistry registry;
  int32_t v1 = registry.add("r-value", SchemaType::kAvro, kV1Schema);
  int32_t v2 = registry.add("r-value", SchemaType::kAvro, kV2Schema);
  auto codec = make_avro_codec(registry, {});
  std::string out;
  REQUIRE(codec->decode(framed(v2, kV2Hex), out));
  out.push_back('\n');
  auto r = codec->decode(framed(v1, kV1Hex), out);
  REQUIRE(r);
  CHECK(*r == v1);
  CHECK(out == "{\"a\":7,\"b\":\"y\"}\n{\"a\":7}");
  // The writer schema only: v1's payload is not v2's.
  std::string kept = "kept";
  auto wrong = codec->decode(framed(v2, kV1Hex), kept);
  REQUIRE(!wrong);
  CHECK(wrong.error().message == "avro: payload of schema 2 is truncated");
  std::string encoded;
  REQUIRE(codec->encode(R"({"a":7})", v2, encoded).ok());
  CHECK(to_hex(encoded) ==
        "0000000002"
        "0e0278");
}

TEST_CASE("avro: the cache asks the registry once per id", "[avro]") {
  FakeRegistry registry;
  int32_t v1 = registry.add("r-value", SchemaType::kAvro, kV1Schema);
  int32_t v2 = registry.add("r-value", SchemaType::kAvro, kV2Schema);
  auto codec = make_avro_codec(registry, {});
  std::string out;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(codec->decode(framed(v1, kV1Hex), out));
    REQUIRE(codec->decode(framed(v2, kV2Hex), out));
    REQUIRE(codec->encode(R"({"a":1})", v1, out).ok());
    REQUIRE(codec->encode(R"({"a":1})", v2, out).ok());
  }
  CHECK(registry.id_lookups == 2);
  // An unknown id is asked again: it may be registered since.
  std::string kept;
  CHECK(!codec->decode(framed(9, kV1Hex), kept));
  CHECK(!codec->decode(framed(9, kV1Hex), kept));
  CHECK(registry.id_lookups == 4);
}

TEST_CASE("avro: round trips", "[avro]") {
  struct Case {
    const char* schema;
    const char* json;
  };
  const Case cases[] = {
      {R"("string")", R"("tab\t nl\n quote\" back\\ ctl\u0001 é ☃ 😀")"},
      {R"("string")", R"("")"},
      {R"("long")", "-9223372036854775808"},
      {R"("long")", "9223372036854775807"},
      {R"("int")", "-2147483648"},
      {R"("double")", "0.1"},
      {R"("double")", "-1e+300"},
      {R"("double")", "5e-324"},
      {R"("double")", R"("NaN")"},
      {R"("double")", R"("Infinity")"},
      {R"("double")", R"("-Infinity")"},
      {R"("float")", "0.1"},
      {R"("float")", "3.4028235e+38"},
      {R"("float")", R"("-Infinity")"},
      {R"("boolean")", "false"},
      {R"("null")", "null"},
      {R"("bytes")", R"("")"},
      {R"("bytes")", R"("AAEC/f7/")"},
      {R"({"type":"array","items":{"type":"map","values":["null","double"]}})",
       R"([{},{"a":1.5,"b":null},{"":-2}])"},
      {R"({"type":"map","values":{"type":"array","items":"boolean"}})",
       R"({"x.y":[true,false],"é":[]})"},
      {R"({"type":"record","name":"Node","fields":[{"name":"value","type":"int"},)"
       R"({"name":"next","type":["null","Node"]}]})",
       R"({"value":1,"next":{"value":2,"next":{"value":3,"next":null}}})"},
      {R"({"type":"record","name":"a.b.Outer","fields":[{"name":"in","type":)"
       R"({"type":"record","name":"Inner","fields":[{"name":"e","type":)"
       R"({"type":"enum","name":"E","namespace":"other","symbols":["X","Y"]}}]}},)"
       R"({"name":"again","type":"a.b.Inner"},{"name":"e2","type":"other.E"}]})",
       R"({"in":{"e":"Y"},"again":{"e":"X"},"e2":"X"})"},
      {R"({"type":"string","logicalType":"uuid"})", R"("0b8a2f8e-6c1d-4f4e-9a57-3f1b2c3d4e5f")"},
      {R"({"type":"long","logicalType":"timestamp-micros"})", R"("1969-12-31T23:59:59.999999Z")"},
      {R"({"type":"int","logicalType":"time-millis"})", R"("23:59:59.999")"},
      // A logical type that does not fit its type is ignored.
      {R"({"type":"string","logicalType":"timestamp-millis"})", R"("not a time")"},
      {R"({"type":"bytes","logicalType":"decimal","precision":40,"scale":0})",
       R"("-9999999999999999999999999999999999999999")"},
      {R"({"type":"fixed","name":"D","size":4,"logicalType":"decimal","precision":9,"scale":2})",
       R"("-83886.08")"},
      // Three bytes hold 6 digits, not 7: the logical type is ignored.
      {R"({"type":"fixed","name":"D","size":3,"logicalType":"decimal","precision":7,"scale":7})",
       R"("gAAA")"},
  };
  for (const Case& k : cases) {
    INFO("schema " << k.schema << ", value " << k.json);
    Codec c(k.schema);
    CHECK(c.decode(framed(c.id, c.encode(k.json))) == k.json);
  }
}

TEST_CASE("avro: a registry that cannot be reached is a failure, not the record's fault",
          "[avro]") {
  struct Unreachable : FakeRegistry {
    Expected<RegisteredSchema> by_id(int32_t) override {
      return failure("registry http://localhost:1: connection refused");
    }
  } registry;
  auto codec = make_avro_codec(registry, {});
  std::string out = "kept";
  auto r = codec->decode(framed(1, kV1Hex), out);
  REQUIRE(!r);
  CHECK(r.error().status == ExitStatus::kFailure);
  CHECK(r.error().message == "registry http://localhost:1: connection refused");
  CHECK(out == "kept");
  Status s = codec->encode(R"({"a":1})", 1, out);
  REQUIRE(!s.ok());
  CHECK(s.error().status == ExitStatus::kFailure);
  CHECK(out == "kept");
}
