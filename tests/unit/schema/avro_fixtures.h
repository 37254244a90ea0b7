// What the Avro codec's tests share (tests/unit/schema/avro_*_test.cpp):
// payloads written by python3-avro, and a codec on a registry that holds
// one schema.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <string_view>

#include "kpipe/schema/avro_codec.h"
#include "schema/fake_registry.h"

namespace kpipe::avro_test {

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

const char* const kV1Schema =
    R"({"type":"record","name":"R","fields":[{"name":"a","type":"int"}]})";
const char* const kV2Schema = R"({"type":"record","name":"R","fields":[{"name":"a","type":"int"},)"
                              R"({"name":"b","type":"string","default":"x"}]})";
// {"a":7} with kV1Schema; {"a":7,"b":"y"} with kV2Schema.
const char* const kV1Hex = "0e";
const char* const kV2Hex = "0e0279";

inline std::string from_hex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return out;
}

inline std::string to_hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

inline std::string framed(int32_t id, std::string_view payload_hex) {
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

inline DecodeOptions standard_json() {
  DecodeOptions o;
  o.avro_standard_json = true;
  return o;
}

inline DecodeOptions epoch_millis() {
  DecodeOptions o;
  o.epoch_millis = true;
  return o;
}

}  // namespace kpipe::avro_test
