#include "kpipe/schema/avro_codec.h"

#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "kpipe/json.h"
#include "schema/fake_registry.h"

using namespace kpipe;

namespace {

// The payloads below were written by an independent implementation, not by
// this codec: Debian's python3-avro 1.11.1, run by /usr/bin/python3 as
//   s = avro.schema.parse(SCHEMA); buf = io.BytesIO()
//   avro.io.DatumWriter(s).write(DATUM, avro.io.BinaryEncoder(buf))
//   print(buf.getvalue().hex())
// with each SCHEMA as written here and each DATUM the Python value in the
// comment above the payload (utc = datetime.timezone.utc).

const char* const kOrderSchema = R"({"type":"record","name":"Order","namespace":"shop","fields":[
  {"name":"id","type":"long"},
  {"name":"qty","type":"int"},
  {"name":"ok","type":"boolean"},
  {"name":"price","type":"double"},
  {"name":"ratio","type":"float"},
  {"name":"name","type":"string"},
  {"name":"blob","type":"bytes"},
  {"name":"hash","type":{"type":"fixed","name":"Hash","size":4}},
  {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","SHIPPED","DONE"]}},
  {"name":"tags","type":{"type":"array","items":"string"}},
  {"name":"attrs","type":{"type":"map","values":"long"}},
  {"name":"note","type":["null","string"]},
  {"name":"customer","type":{"type":"record","name":"Customer","fields":[
    {"name":"name","type":"string"},{"name":"zip","type":["null","int"],"default":null}]}},
  {"name":"nothing","type":"null"}]})";

// {"id":1234567890123,"qty":-5,"ok":True,"price":12.5,"ratio":0.25,
//  "name":"caf\u00e9 \"q\"","blob":b"\x00\x01\xff","hash":b"abcd","status":"SHIPPED",
//  "tags":["a","b"],"attrs":{"x":1,"y":-2},"note":"hi",
//  "customer":{"name":"Ann","zip":12345},"nothing":None}
const char* const kOrderHex =
    "9693d89fee47090100000000000029400000803e12636166c3a920227122060001ff616263640204026102620004"
    "027802027903000204686906416e6e02f2c001";
const char* const kOrderJson =
    R"({"id":1234567890123,"qty":-5,"ok":true,"price":12.5,"ratio":0.25,"name":"café \"q\"",)"
    R"("blob":"AAH/","hash":"YWJjZA==","status":"SHIPPED","tags":["a","b"],"attrs":{"x":1,"y":-2},)"
    R"("note":"hi","customer":{"name":"Ann","zip":12345},"nothing":null})";
const char* const kOrderStandardJson =
    R"({"id":1234567890123,"qty":-5,"ok":true,"price":12.5,"ratio":0.25,"name":"café \"q\"",)"
    R"("blob":"\u0000\u0001\u00ff","hash":"abcd","status":"SHIPPED","tags":["a","b"],)"
    R"("attrs":{"x":1,"y":-2},"note":{"string":"hi"},"customer":{"name":"Ann","zip":{"int":12345}},)"
    R"("nothing":null})";

// {"id":-1,"qty":0,"ok":False,"price":-0.5,"ratio":3.0,"name":"","blob":b"",
//  "hash":b"\x00\x00\x00\x00","status":"NEW","tags":[],"attrs":{},"note":None,
//  "customer":{"name":"B","zip":None},"nothing":None}
const char* const kEmptyOrderHex = "010000000000000000e0bf0000404000000000000000000000024200";
const char* const kEmptyOrderJson =
    R"({"id":-1,"qty":0,"ok":false,"price":-0.5,"ratio":3,"name":"","blob":"","hash":"AAAAAA==",)"
    R"("status":"NEW","tags":[],"attrs":{},"note":null,"customer":{"name":"B","zip":null},)"
    R"("nothing":null})";

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

const char* const kV1Schema =
    R"({"type":"record","name":"R","fields":[{"name":"a","type":"int"}]})";
const char* const kV2Schema = R"({"type":"record","name":"R","fields":[{"name":"a","type":"int"},)"
                              R"({"name":"b","type":"string","default":"x"}]})";
// {"a":7} with kV1Schema; {"a":7,"b":"y"} with kV2Schema.
const char* const kV1Hex = "0e";
const char* const kV2Hex = "0e0279";

std::string from_hex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return out;
}

std::string to_hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

std::string framed(int32_t id, std::string_view payload_hex) {
  std::string out;
  append_frame(out, id);
  out += from_hex(payload_hex);
  return out;
}

// A codec on a registry that holds one schema.
struct Codec {
  explicit Codec(const char* schema, DecodeOptions options = {}) {
    id = registry.add("subject-value", SchemaType::kAvro, schema);
    codec = make_avro_codec(registry, options);
  }

  std::string decode(std::string_view bytes) {
    std::string out;
    auto r = codec->decode(bytes, out);
    if (!r) FAIL("decode: " << r.error().message);
    CHECK(*r == id);
    return out;
  }
  std::string decode_hex(std::string_view payload_hex) { return decode(framed(id, payload_hex)); }

  // The payload's hex, after the frame (checked).
  std::string encode(std::string_view json) {
    std::string out;
    Status s = codec->encode(json, id, out);
    if (!s.ok()) FAIL("encode: " << s.error().message);
    REQUIRE(out.size() >= 5);
    CHECK(out.substr(0, 5) == framed(id, ""));
    return to_hex(std::string_view(out).substr(5));
  }

  // The message of an encode that must fail, after checking that it is a
  // data_error and that `out` was left as it was.
  std::string encode_error(std::string_view json) {
    std::string out = "kept";
    Status s = codec->encode(json, id, out);
    if (s.ok()) FAIL("encoded " << json << " as " << to_hex(out));
    CHECK(s.error().status == ExitStatus::kDataError);
    CHECK(out == "kept");
    return s.error().message;
  }

  std::string decode_error(std::string_view bytes) {
    std::string out = "kept";
    auto r = codec->decode(bytes, out);
    if (r) FAIL("decoded as " << out);
    CHECK(r.error().status == ExitStatus::kDataError);
    CHECK(out == "kept");
    return r.error().message;
  }

  FakeRegistry registry;
  int32_t id = 0;
  std::unique_ptr<ValueCodec> codec;
};

DecodeOptions standard_json() {
  DecodeOptions o;
  o.avro_standard_json = true;
  return o;
}

DecodeOptions epoch_millis() {
  DecodeOptions o;
  o.epoch_millis = true;
  return o;
}

}  // namespace

TEST_CASE("avro: every type decodes from python3-avro's bytes and encodes back to them", "[avro]") {
  Codec c(kOrderSchema);
  CHECK(c.decode_hex(kOrderHex) == kOrderJson);
  CHECK(c.encode(kOrderJson) == kOrderHex);
  CHECK(c.decode_hex(kEmptyOrderHex) == kEmptyOrderJson);
  CHECK(c.encode(kEmptyOrderJson) == kEmptyOrderHex);
}

TEST_CASE("avro: decode appends to what out holds", "[avro]") {
  Codec c(kV1Schema);
  std::string out = "[";
  REQUIRE(c.codec->decode(framed(c.id, kV1Hex), out));
  REQUIRE(c.codec->decode(framed(c.id, kV1Hex), out));
  CHECK(out == R"([{"a":7}{"a":7})");
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

TEST_CASE("avro: doubles are written as append_double writes them", "[avro]") {
  Codec c(R"("double")");
  std::vector<double> values = {0.5,  -0.25,           1.005,     999.99,  -12.5, 1234567.891,
                                1e11, 99999999999.999, 0.1 + 0.2, 1.0 / 3, 2.675, -1e-7};
  for (int i = -3000; i <= 3000; i += 7) values.push_back(i / 100.0 + 0.001 * (i % 10));
  for (double v : values) {
    std::string json;
    append_double(json, v);
    INFO("value " << json);
    CHECK(c.decode(framed(c.id, c.encode(json))) == json);
  }
}

TEST_CASE("avro: plain JSON picks the union branch by its type", "[avro]") {
  // Payloads by hand: the branch's index as a zigzag varint, then the value.
  Codec c(R"(["null","boolean","int","long","double","string",)"
          R"({"type":"array","items":"int"},{"type":"map","values":"string"}])");
  CHECK(c.encode("null") == "00");
  CHECK(c.encode("true") == "0201");
  CHECK(c.encode("5") == "040a");
  // 3000000000 is too large for the int. (Its long's bytes, 80f882ad16, are
  // python3-avro's.)
  CHECK(c.encode("3000000000") == "0680f882ad16");
  CHECK(c.encode("1.5") == "08000000000000f83f");
  CHECK(c.encode(R"("x")") == "0a0278");
  CHECK(c.encode("[1]") == "0c020200");
  CHECK(c.encode(R"({"k":"v"})") == "0e02026b027600");
  // Avro's own form picks any branch.
  CHECK(c.encode(R"({"long":5})") == "060a");
  CHECK(c.encode(R"({"double":5})") == "080000000000001440");
  CHECK(c.decode(framed(c.id, "060a")) == "5");

  SECTION("strings: a string branch, then a symbol, then types that read strings") {
    Codec s(R"(["null",{"type":"enum","name":"Status","symbols":["NEW","DONE"]},)"
            R"({"type":"long","logicalType":"timestamp-millis"},"bytes"])");
    CHECK(s.encode(R"("DONE")") == "0202");
    CHECK(s.encode(R"("1970-01-01T00:00:01Z")") == "04d00f");
    CHECK(s.encode(R"("AQI=")") == "06040102");
    CHECK(s.encode_error(R"("DONNE")") == "avro: 'DONNE' is not a symbol of enum Status");
    CHECK(s.encode_error("1.5") ==
          "avro: a number fits no branch of the union "
          "[null, Status, long, bytes]");
  }
  SECTION("objects: the first record whose required fields are there, else a map") {
    Codec r(R"([{"type":"record","name":"A","fields":[{"name":"a","type":"int"}]},)"
            R"({"type":"record","name":"B","fields":[{"name":"b","type":"int"},)"
            R"({"name":"c","type":"int","default":0}]},)"
            R"({"type":"map","values":"int"}])");
    CHECK(r.encode(R"({"b":1})") == "020200");
    CHECK(r.encode(R"({"a":1})") == "0002");
    CHECK(r.encode(R"({"z":1})") == "0402027a0200");
    CHECK(r.decode(framed(r.id, "020200")) == R"({"b":1,"c":0})");
  }
}

TEST_CASE("avro: decoding failures are data errors that leave out as it was", "[avro]") {
  Codec c(kOrderSchema);
  const std::string good = framed(c.id, kOrderHex);
  CHECK(c.decode_error("") == "empty: not in the Confluent wire format");
  CHECK(c.decode_error("{\"a\":1}") ==
        "magic byte 0x7b is not 0: not in the Confluent wire format");
  CHECK(c.decode_error(std::string("\0\0\0", 3)) == "5 bytes expected before the payload, found 3");
  CHECK(c.decode_error(framed(42, kOrderHex)) == "schema 42 not found in the registry");
  CHECK(c.decode_error(good.substr(0, good.size() - 1)) ==
        "avro: payload of schema 1 is truncated");
  CHECK(c.decode_error(framed(c.id, "")) == "avro: payload of schema 1 is truncated");
  CHECK(c.decode_error(good + std::string("\1\2\3\4", 4)) ==
        "avro: 4 bytes left after the value of schema 1");

  SECTION("a string that is not UTF-8") {
    Codec s(R"({"type":"record","name":"R","fields":[{"name":"x","type":"int"},)"
            R"({"name":"names","type":{"type":"array","items":"string"}}]})");
    CHECK(s.decode_error(framed(s.id,
                                "02"
                                "04"
                                "0261"
                                "04c328"
                                "00")) ==
          "avro: field 'names[1]' of schema 1: a string that is not valid UTF-8");
    CHECK(s.decode(framed(s.id,
                          "02"
                          "04"
                          "0261"
                          "04c3a9"
                          "00")) == R"({"x":1,"names":["a","é"]})");
  }
  SECTION("a map key that is not UTF-8") {
    Codec m(R"({"type":"map","values":"int"})");
    CHECK(m.decode_error(framed(m.id,
                                "02"
                                "02ff"
                                "02"
                                "00")) == "avro: schema 1: a map key that is not valid UTF-8");
  }
  SECTION("values that are not of the schema") {
    Codec u(R"(["null","int"])");
    CHECK(u.decode_error(framed(u.id, "04")) ==
          "avro: payload of schema 1 cannot be read: Invalid union discriminant value: (2)");
    Codec e(R"({"type":"enum","name":"E","symbols":["A"]})");
    CHECK(e.decode_error(framed(e.id, "02")) == "avro: schema 1: an enum index beyond the symbols");
    Codec i("\"int\"");
    CHECK(i.decode_error(framed(i.id, "80808080808080808080")) ==
          "avro: payload of schema 1 cannot be read: Cannot read int value: Varint too long");
    // A length beyond the payload.
    Codec s("\"string\"");
    CHECK(s.decode_error(framed(s.id, "c8016869")) == "avro: payload of schema 1 is truncated");
    // A negative length: libavro asks for more memory than there is.
    CHECK(s.decode_error(framed(s.id, "01")) ==
          "avro: payload of schema 1 declares a string, bytes or array longer than it can hold");
  }
  SECTION("schemas that cannot be used") {
    FakeRegistry registry;
    int32_t proto = registry.add("p", SchemaType::kProtobuf, "syntax = \"proto3\";");
    int32_t bad = registry.add("b", SchemaType::kAvro, R"({"type":"record","name":"R"})");
    int32_t unknown = registry.add("u", SchemaType::kAvro, R"({"type":"array","items":"Nope"})");
    auto codec = make_avro_codec(registry, {});
    std::string out = "kept";
    auto r = codec->decode(framed(proto, "00"), out);
    REQUIRE(!r);
    CHECK(r.error().message == "avro: schema 1 is a PROTOBUF schema, not an Avro one");
    r = codec->decode(framed(bad, "00"), out);
    REQUIRE(!r);
    CHECK(r.error().message == "avro: schema 2: a record without \"fields\"");
    r = codec->decode(framed(unknown, "00"), out);
    REQUIRE(!r);
    CHECK(r.error().status == ExitStatus::kDataError);
    CHECK(r.error().message == "avro: schema 3: unknown type 'Nope'");
    CHECK(out == "kept");
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

TEST_CASE("avro: encoding errors name the field and say why", "[avro]") {
  Codec c(R"({"type":"record","name":"Order","fields":[
    {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","SHIPPED"]}},
    {"name":"items","type":{"type":"array","items":{"type":"record","name":"Item","fields":[
      {"name":"sku","type":"string"},{"name":"price","type":"double"}]}}},
    {"name":"qty","type":"int","default":1},
    {"name":"hash","type":{"type":"fixed","name":"Hash","size":2},"default":"ab"},
    {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"},"default":0},
    {"name":"day","type":{"type":"int","logicalType":"date"},"default":0},
    {"name":"tags","type":{"type":"map","values":"string"},"default":{}},
    {"name":"customer","type":{"type":"record","name":"Customer","fields":[
      {"name":"name","type":"string"}]}}]})");
  const std::string items = R"("items":[{"sku":"a","price":1},{"sku":"b","price":2})";
  auto order = [&](std::string_view rest) {
    return std::string(R"({"status":"NEW",)") + items + std::string(rest) + "}";
  };
  CHECK(c.encode(order(R"(],"customer":{"name":"Ann"})")).size() > 0);
  CHECK(c.encode_error(order(R"(,{"sku":"c","price":"3"}],"customer":{"name":"Ann"})")) ==
        "avro: field 'items[2].price': expected a number, found the string '3'");
  CHECK(c.encode_error(order(R"(,{"sku":"c","price":null}],"customer":{"name":"Ann"})")) ==
        "avro: field 'items[2].price': expected a number, found null");
  CHECK(c.encode_error(order("]")) == "avro: field 'customer': missing, and it has no default");
  CHECK(c.encode_error(order(R"(],"customer":{"name":"Ann","zip":"1"})")) ==
        "avro: field 'customer.zip': not a field of record Customer");
  CHECK(c.encode_error(order(R"(],"customer":{"name":"Ann"},"customer":{"name":"Bo"})")) ==
        "avro: field 'customer': appears twice");
  CHECK(c.encode_error(order(R"(],"customer":{"name":"Ann"},"qty":3000000000)")) ==
        "avro: field 'qty': 3000000000 does not fit an int");
  CHECK(c.encode_error(order(R"(],"customer":{"name":"Ann"},"qty":1.5)")) ==
        "avro: field 'qty': 1.5 is not an integer");
  CHECK(c.encode_error(order(R"(],"customer":{"name":"Ann"},"hash":"AAAA")")) ==
        "avro: field 'hash': fixed Hash holds 2 bytes, found 3");
  CHECK(c.encode_error(order(R"(],"customer":{"name":"Ann"},"hash":"!!")")) ==
        "avro: field 'hash': '!!' is not base64");
  CHECK(c.encode_error(order(R"(],"customer":{"name":"Ann"},"at":"yesterday")")) ==
        "avro: field 'at': 'yesterday' is not an RFC 3339 time (expected a yyyy-mm-dd date)");
  CHECK(c.encode_error(order(R"(],"customer":{"name":"Ann"},"day":"2026-02-30")")) ==
        "avro: field 'day': '2026-02-30' is not a date (yyyy-mm-dd)");
  CHECK(c.encode_error(order(R"(],"customer":{"name":"Ann"},"tags":{"x":1})")) ==
        "avro: field 'tags.x': expected a string, found a number");
  CHECK(c.encode_error(order(R"(],"customer":{"name":"Ann"},"tags":{"a.b":1})")) ==
        "avro: field 'tags.\"a.b\"': expected a string, found a number");
  CHECK(c.encode_error(R"({"status":"SHIPED"})") ==
        "avro: field 'status': 'SHIPED' is not a symbol of enum Status");
  CHECK(c.encode_error(R"({"status":"NEW","items":{}})") ==
        "avro: field 'items': expected an array, found an object");
  CHECK(c.encode_error("[]") == "avro: expected an object (record Order), found an array");
  CHECK(c.encode_error(R"({"status":"NEW",)") == "avro: not valid JSON: truncated object or array");
  CHECK(c.encode_error("") == "avro: not valid JSON: empty");
}

TEST_CASE("avro: an integer out of range is named as it was written", "[avro]") {
  // Read through a double, 2^63 was 9.223372036854776e+18: not the number
  // the user has in the record.
  Codec l(R"("long")");
  CHECK(l.encode_error("9223372036854775808") == "avro: 9223372036854775808 does not fit a long");
  CHECK(l.encode_error("18446744073709551615") == "avro: 18446744073709551615 does not fit a long");
  CHECK(l.encode_error("-9223372036854775809") ==
        "avro: -9223372036854775809 is an integer beyond 64 bits: no Avro int or long holds it");
  // Beyond 64 bits simdjson's DOM refuses the whole text, which was "not
  // valid JSON".
  CHECK(l.encode_error(R"({"a":"1e999","b":[123456789012345678901234567890]})") ==
        "avro: 123456789012345678901234567890 is an integer beyond 64 bits: no Avro int or long "
        "holds it");
  CHECK(l.encode_error("[1,1e400]") == "avro: 1e400 is beyond the range of a 64-bit float");
  CHECK(l.encode_error("1e19") == "avro: 1e+19 does not fit a long");
  CHECK(l.encode_error("2.5") == "avro: 2.5 is not an integer");
  Codec i(R"("int")");
  CHECK(i.encode_error("9223372036854775808") == "avro: 9223372036854775808 does not fit an int");
  CHECK(i.encode_error("1e16") == "avro: 1e+16 does not fit an int");
  CHECK(i.encode_error("2.5") == "avro: 2.5 is not an integer");
  Codec ts(R"({"type":"long","logicalType":"timestamp-micros"})");
  CHECK(ts.encode_error("9223372036854775808") == "avro: 9223372036854775808 ms is out of range");
}

TEST_CASE("avro: a hostile length or count fails the record, not the process", "[avro]") {
  SECTION("a string said to hold a gigabyte, in a payload of a few bytes") {
    Codec c(R"({"type":"record","name":"R","fields":[{"name":"s","type":"string"}]})");
    // zigzag(1000000000) = 2000000000 as a varint, then three bytes.
    CHECK(c.decode_error(framed(c.id, "80a8d6b90f616263")) ==
          "avro: payload of schema 1 declares a string, bytes or array longer than it can hold");
    // The limit is for the read only: the next record decodes.
    CHECK(c.decode_hex("06616263") == R"({"s":"abc"})");
  }
  SECTION("an array said to hold 2^40 nulls, which take no bytes") {
    Codec c(R"({"type":"array","items":"null"})");
    CHECK(c.decode_error(framed(c.id, "8080808080800400")) ==
          "avro: payload of schema 1 declares a string, bytes or array longer than it can hold");
  }
}
