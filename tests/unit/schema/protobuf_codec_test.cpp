#include "kpipe/schema/protobuf_codec.h"

#include <unistd.h>

#include <catch2/catch.hpp>

#include <string>

#include "helpers.h"
#include "kpipe/json.h"
#include "schema/fake_registry.h"

using namespace kpipe;
using kpipe::test::TempDir;

namespace {

// Sends stderr to a file while it lives: what the library printed there.
class StderrCapture {
 public:
  StderrCapture() : path_(dir_.write("stderr", "")) {
    fflush(stderr);
    saved_ = ::dup(2);
    int fd = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~StderrCapture() { restore(); }
  std::string text() {
    restore();
    std::string out;
    char buf[4096];
    int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return out;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  TempDir dir_;
  std::string path_;
  int saved_ = -1;
};

const char* const kCommonProto = R"(syntax = "proto3";
package common;

message Money {
  string currency = 1;
  int64 units = 2;
}
)";

const char* const kOrdersProto = R"(syntax = "proto3";
package orders;

import "google/protobuf/timestamp.proto";
import "common.proto";

enum Status {
  STATUS_UNKNOWN = 0;
  STATUS_NEW = 1;
  STATUS_PAID = 2;
}

message Order {
  message Line {
    string sku = 1;
    int32 qty = 2;
  }
  int64 id = 1;
  string customer_name = 2;
  repeated Line lines = 3;
  map<string, int32> counts = 4;
  Status status = 5;
  bytes signature = 6;
  google.protobuf.Timestamp created_at = 7;
  oneof payment {
    string card = 8;
    int64 voucher_id = 9;
  }
  common.Money total = 10;
}

message Refund {
  message Detail {
    string note = 1;
  }
  int64 order_id = 1;
  string reason = 2;
}
)";

// The payloads below were made by protoc 3.21.12, not by the codec: with
// kCommonProto and kOrdersProto saved as common.proto and orders.proto,
//   protoc -I. -I/usr/include --deterministic_output --encode=orders.Order
//     orders.proto < order.txt | od -An -v -tx1
// (one command line)
// where order.txt is the text format written above each one.

// id: 9007199254740993
// customer_name: "Zo\303\253"
// lines { sku: "A-1" qty: 2 }
// lines { sku: "B-2" qty: -1 }
// counts { key: "pears" value: 5 }
// counts { key: "apples" value: 3 }
// status: STATUS_PAID
// signature: "\001\002\377"
// created_at { seconds: 1700000000 nanos: 123000000 }
// voucher_id: 42
// total { currency: "EUR" units: 1250 }
const char* const kOrderHex =
    "08818080808080801012045a6fc3ab1a070a03412d3110021a100a03422d3210ffffffffffffffffff01220a0a"
    "066170706c6573100322090a0570656172731005280232030102ff3a0b0880e2cfaa0610c0a9d33a482a52080a"
    "0345555210e209";
// In the proto3 JSON mapping: 64-bit integers as strings, bytes in base64,
// the enum by name, the Timestamp in RFC 3339; members in libprotobuf's
// order.
const char* const kOrderJson =
    R"({"id":"9007199254740993","customerName":"Zoë","lines":[{"sku":"A-1","qty":2},)"
    R"({"sku":"B-2","qty":-1}],"counts":{"apples":3,"pears":5},"status":"STATUS_PAID",)"
    R"("signature":"AQL/","total":{"currency":"EUR","units":"1250"},)"
    R"("createdAt":"2023-11-14T22:13:20.123Z","voucherId":"42"})";

// id: 5
const char* const kSmallOrderHex = "0805";

// --encode=orders.Refund: order_id: 7 reason: "damaged"
const char* const kRefundHex = "0807120764616d61676564";

// --encode=orders.Refund.Detail: note: "late"
const char* const kDetailHex = "0a046c617465";

std::string from_hex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return out;
}

std::string framed(int32_t id, std::string_view indexes, std::string_view payload) {
  std::string out;
  append_frame(out, id);
  out.append(indexes);
  out.append(payload);
  return out;
}

// A registry holding common.proto (subject "common") and orders.proto,
// which imports it by reference, under "orders-value".
struct Fixture {
  FakeRegistry registry;
  int32_t common_id = registry.add("common", SchemaType::kProtobuf, kCommonProto);
  int32_t orders_id = registry.add("orders-value", SchemaType::kProtobuf, kOrdersProto,
                                   {{"common.proto", "common", 1}});
  std::unique_ptr<ValueCodec> codec = make_protobuf_codec(registry, DecodeOptions{});

  std::string decoded(std::string_view bytes) {
    std::string out;
    auto id = codec->decode(bytes, out);
    INFO((id ? "" : id.error().message));
    REQUIRE(id.ok());
    CHECK(*id == orders_id);
    return out;
  }

  // The error, after checking that it is a data_error and that `out` was
  // left as it was.
  std::string decode_error(std::string_view bytes) {
    std::string out = "before";
    auto id = codec->decode(bytes, out);
    REQUIRE_FALSE(id.ok());
    CHECK(id.error().status == ExitStatus::kDataError);
    CHECK(out == "before");
    return id.error().message;
  }

  std::string encode_error(std::string_view json, int32_t id) {
    std::string out = "before";
    auto status = codec->encode(json, id, out);
    REQUIRE_FALSE(status.ok());
    CHECK(status.error().status == ExitStatus::kDataError);
    CHECK(out == "before");
    return status.error().message;
  }
};

}  // namespace

TEST_CASE(
    "protobuf decodes protoc's bytes with nested, oneof, map, enum, repeated, int64, bytes, "
    "Timestamp and a referenced import",
    "[protobuf]") {
  Fixture f;
  std::string json = f.decoded(framed(f.orders_id, std::string(1, '\0'), from_hex(kOrderHex)));
  CHECK(json == kOrderJson);
  CHECK(parse_json(json).ok());
}

TEST_CASE("protobuf encodes the decoded JSON back to protoc's bytes", "[protobuf]") {
  Fixture f;
  std::string out = "prefix";
  REQUIRE(f.codec->encode(kOrderJson, f.orders_id, out).ok());
  // Message index [0] is the single byte 0.
  CHECK(out == "prefix" + framed(f.orders_id, std::string(1, '\0'), from_hex(kOrderHex)));
}

TEST_CASE("protobuf writes every scalar field of a proto3 message, set or not", "[protobuf]") {
  Fixture f;
  std::string json = f.decoded(framed(f.orders_id, std::string(1, '\0'), from_hex(kSmallOrderHex)));
  // Message fields and oneof members have presence: absent ones stay out.
  CHECK(json == R"({"id":"5","customerName":"","lines":[],"counts":{},"status":"STATUS_UNKNOWN",)"
                R"("signature":""})");
}

TEST_CASE("protobuf message indexes choose the type", "[protobuf]") {
  Fixture f;
  SECTION("an empty list of indexes means [0]") {
    // The count 0 (zigzag 0) alone.
    CHECK(f.decoded(framed(f.orders_id, std::string(1, '\0'), from_hex(kSmallOrderHex)))
              .rfind(R"({"id":"5",)", 0) == 0);
  }
  SECTION("[0] written in full") {
    // Count 1, index 0, in zigzag varints: 02 00.
    CHECK(f.decoded(framed(f.orders_id, from_hex("0200"), from_hex(kSmallOrderHex)))
              .rfind(R"({"id":"5",)", 0) == 0);
  }
  SECTION("[1], the second message") {
    CHECK(f.decoded(framed(f.orders_id, from_hex("0202"), from_hex(kRefundHex))) ==
          R"({"orderId":"7","reason":"damaged"})");
  }
  SECTION("[1,0], a type nested in the second message") {
    CHECK(f.decoded(framed(f.orders_id, from_hex("040200"), from_hex(kDetailHex))) ==
          R"({"note":"late"})");
  }
}

TEST_CASE("protobuf encodes a chosen message with its indexes", "[protobuf]") {
  FakeRegistry registry;
  registry.add("common", SchemaType::kProtobuf, kCommonProto);
  int32_t id = registry.add("orders-value", SchemaType::kProtobuf, kOrdersProto,
                            {{"common.proto", "common", 1}});
  SECTION("nested") {
    auto codec = make_protobuf_codec(registry, DecodeOptions{}, "orders.Refund.Detail");
    std::string out;
    REQUIRE(codec->encode(R"({"note":"late"})", id, out).ok());
    CHECK(out == framed(id, from_hex("040200"), from_hex(kDetailHex)));
  }
  SECTION("top level") {
    auto codec = make_protobuf_codec(registry, DecodeOptions{}, "orders.Refund");
    std::string out;
    // The field's proto name is accepted as well as its JSON name.
    REQUIRE(codec->encode(R"({"order_id":7,"reason":"damaged"})", id, out).ok());
    CHECK(out == framed(id, from_hex("0202"), from_hex(kRefundHex)));
  }
  SECTION("not in the schema") {
    auto codec = make_protobuf_codec(registry, DecodeOptions{}, "common.Money");
    std::string out;
    auto status = codec->encode("{}", id, out);
    REQUIRE_FALSE(status.ok());
    CHECK(status.error().status == ExitStatus::kDataError);
    CHECK(status.error().message == "protobuf: schema 2 defines no message 'common.Money'");
    CHECK(out.empty());
  }
}

TEST_CASE("protobuf refuses bytes it cannot decode, as data errors that leave out unchanged",
          "[protobuf]") {
  Fixture f;
  std::string zero(1, '\0');
  SECTION("not framed") {
    CHECK(f.decode_error(R"({"id":1})") ==
          "protobuf: magic byte 0x7b is not 0: not in the Confluent wire format");
  }
  SECTION("unknown id") {
    CHECK(f.decode_error(framed(9, zero, "")) == "schema 9 not found in the registry");
  }
  SECTION("index out of range") {
    CHECK(f.decode_error(framed(f.orders_id, from_hex("0206"), "")) ==
          "protobuf: message index [3] is out of range for schema 2");
  }
  SECTION("nested index out of range") {
    CHECK(f.decode_error(framed(f.orders_id, from_hex("04020a"), "")) ==
          "protobuf: message index [1,5] is out of range for schema 2");
  }
  SECTION("negative index") {
    CHECK(f.decode_error(framed(f.orders_id, from_hex("0201"), "")) ==
          "protobuf: message index [-1] is out of range for schema 2");
  }
  SECTION("index list cut short") {
    // Two indexes announced, one present.
    CHECK(f.decode_error(framed(f.orders_id, from_hex("0402"), "")) ==
          "protobuf: message indexes of schema 2 are truncated (2 announced)");
  }
  SECTION("index varint cut short") {
    CHECK(f.decode_error(framed(f.orders_id, from_hex("0282"), "")) ==
          "protobuf: message indexes of schema 2 are truncated");
  }
  SECTION("no indexes at all") {
    CHECK(f.decode_error(framed(f.orders_id, "", "")) ==
          "protobuf: message indexes of schema 2 are truncated");
  }
  SECTION("payload cut short") {
    std::string payload = from_hex(kOrderHex);
    payload.resize(payload.size() - 3);
    CHECK(f.decode_error(framed(f.orders_id, zero, payload)) ==
          "protobuf: payload of schema 2 does not parse as orders.Order");
  }
  SECTION("a string that is not UTF-8") {
    // customer_name (field 2, length 2): ff fe.
    CHECK(f.decode_error(framed(f.orders_id, zero, from_hex("1202fffe"))) ==
          "protobuf: payload of schema 2 does not parse as orders.Order");
  }
  SECTION("a Timestamp beyond year 9999 has no JSON form") {
    // created_at { seconds: 253402300800 } (10000-01-01T00:00:00Z), by protoc.
    CHECK(f.decode_error(framed(f.orders_id, zero, from_hex("3a07088083d1ffaf07")))
              .rfind("protobuf: payload of schema 2 has no JSON form as orders.Order: ", 0) == 0);
  }
}

TEST_CASE("protobuf refuses JSON that does not fit the message", "[protobuf]") {
  Fixture f;
  CHECK(f.encode_error(R"({"id":"5","totl":3})", f.orders_id) ==
        "protobuf: invalid JSON for orders.Order: totl: Cannot find field");
  CHECK(
      f.encode_error(R"({"id":"five"})", f.orders_id) ==
      R"(protobuf: invalid JSON for orders.Order: (id): invalid value "five" for type TYPE_INT64)");
  CHECK(
      f.encode_error(R"({"lines":[{"qty":"x"}]})", f.orders_id) ==
      R"(protobuf: invalid JSON for orders.Order: (lines[0].qty): invalid value "x" for type TYPE_INT32)");
  CHECK(f.encode_error(R"({"id":)", f.orders_id)
            .rfind("protobuf: invalid JSON for orders.Order: ", 0) == 0);
  CHECK(f.encode_error("{}", 9) == "schema 9 not found in the registry");
}

TEST_CASE("protobuf names the line and column of a schema that does not parse or build",
          "[protobuf]") {
  FakeRegistry registry;
  auto codec = make_protobuf_codec(registry, DecodeOptions{});
  std::string out = "before";
  auto error_of = [&](int32_t id) {
    auto r = codec->decode(framed(id, std::string(1, '\0'), ""), out);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().status == ExitStatus::kDataError);
    CHECK(out == "before");
    return r.error().message;
  };
  SECTION("syntax") {
    int32_t id = registry.add("s", SchemaType::kProtobuf,
                              "syntax = \"proto3\";\nmessage A {\n  int32 x = 1\n}\n");
    CHECK(error_of(id) == "protobuf: schema 1 does not parse: line 4:1: Expected \";\"");
  }
  SECTION("an undefined type") {
    int32_t id = registry.add("s", SchemaType::kProtobuf,
                              "syntax = \"proto3\";\nmessage A {\n  Missing x = 1;\n}\n");
    CHECK(error_of(id) ==
          "protobuf: schema 1 does not build: line 3:3: \"Missing\" is not defined");
  }
  SECTION("an import neither referenced nor well known") {
    int32_t id = registry.add("s", SchemaType::kProtobuf,
                              "syntax = \"proto3\";\nimport \"other.proto\";\nmessage A {}\n");
    CHECK(error_of(id).rfind("protobuf: schema 1 does not build: ", 0) == 0);
  }
  SECTION("a referenced import that does not parse") {
    registry.add("bad", SchemaType::kProtobuf, "syntax = \"proto3\";\nmessage {}\n");
    int32_t id = registry.add("s", SchemaType::kProtobuf,
                              "syntax = \"proto3\";\nimport \"bad.proto\";\nmessage A {}\n",
                              {{"bad.proto", "bad", 1}});
    CHECK(error_of(id) ==
          "protobuf: schema 2: import 'bad.proto' (subject 'bad' version 1) does not parse: "
          "line 2:9: Expected message name");
  }
  SECTION("a schema of another type") {
    int32_t id = registry.add("s", SchemaType::kAvro, R"("string")");
    CHECK(error_of(id) == "protobuf: schema 1 is AVRO, not PROTOBUF");
  }
}

TEST_CASE("protobuf passes on the registry's failure to find a reference", "[protobuf]") {
  FakeRegistry registry;
  int32_t id = registry.add("s", SchemaType::kProtobuf,
                            "syntax = \"proto3\";\nimport \"gone.proto\";\nmessage A {}\n",
                            {{"gone.proto", "gone", 1}});
  auto codec = make_protobuf_codec(registry, DecodeOptions{});
  std::string out;
  auto r = codec->decode(framed(id, std::string(1, '\0'), ""), out);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().status == ExitStatus::kFailure);
  CHECK(r.error().message == "protobuf: schema 1: import 'gone.proto': subject 'gone' not found");
}

TEST_CASE("protobuf looks up each schema id once", "[protobuf]") {
  Fixture f;
  std::string record = framed(f.orders_id, std::string(1, '\0'), from_hex(kSmallOrderHex));
  std::string refund = framed(f.orders_id, from_hex("0202"), from_hex(kRefundHex));
  std::string out;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(f.codec->decode(record, out).ok());
    REQUIRE(f.codec->decode(refund, out).ok());
    REQUIRE(f.codec->encode(R"({"id":"5"})", f.orders_id, out).ok());
  }
  CHECK(f.registry.id_lookups == 1);
  // A schema that is not there is not asked for again either.
  std::string unknown = framed(9, std::string(1, '\0'), "");
  CHECK_FALSE(f.codec->decode(unknown, out).ok());
  CHECK_FALSE(f.codec->decode(unknown, out).ok());
  CHECK(f.registry.id_lookups == 2);
}

TEST_CASE("protobuf keeps schema versions that define the same names apart", "[protobuf]") {
  FakeRegistry registry;
  int32_t v1 = registry.add("s", SchemaType::kProtobuf,
                            "syntax = \"proto3\";\npackage p;\nmessage A { int32 x = 1; }\n");
  int32_t v2 =
      registry.add("s", SchemaType::kProtobuf,
                   "syntax = \"proto3\";\npackage p;\nmessage A { int32 x = 1; string y = 2; }\n");
  auto codec = make_protobuf_codec(registry, DecodeOptions{});
  std::string out;
  // x: 1 and y: "z".
  std::string payload = from_hex("080112017a");
  REQUIRE(codec->decode(framed(v2, std::string(1, '\0'), payload), out).ok());
  CHECK(out == R"({"x":1,"y":"z"})");
  out.clear();
  // Version 1 does not know y: it is left out.
  REQUIRE(codec->decode(framed(v1, std::string(1, '\0'), payload), out).ok());
  CHECK(out == R"({"x":1})");
}

TEST_CASE("protobuf reads a message over again from nothing", "[protobuf]") {
  Fixture f;
  std::string out;
  REQUIRE(
      f.codec->decode(framed(f.orders_id, std::string(1, '\0'), from_hex(kOrderHex)), out).ok());
  out.clear();
  // Nothing of the first record (its lines, its oneof) stays in the second.
  CHECK(f.decoded(framed(f.orders_id, std::string(1, '\0'), from_hex(kSmallOrderHex))) ==
        R"({"id":"5","customerName":"","lines":[],"counts":{},"status":"STATUS_UNKNOWN",)"
        R"("signature":""})");
}

TEST_CASE("protobuf keeps proto2's required fields", "[protobuf]") {
  FakeRegistry registry;
  int32_t id = registry.add(
      "s", SchemaType::kProtobuf,
      "syntax = \"proto2\";\nmessage A { optional string s = 1; required int32 r = 2; }\n");
  auto codec = make_protobuf_codec(registry, DecodeOptions{});
  std::string out;
  auto status = codec->encode(R"({"s":"x"})", id, out);
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().status == ExitStatus::kDataError);
  CHECK(status.error().message == "protobuf: invalid JSON for A: missing field r");
  CHECK(out.empty());
  // s: "x" without r.
  auto r = codec->decode(framed(id, std::string(1, '\0'), from_hex("0a0178")), out);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "protobuf: payload of schema 1 does not parse as A");
  REQUIRE(codec->encode(R"({"s":"x","r":3})", id, out).ok());
  CHECK(out == framed(id, std::string(1, '\0'), from_hex("0a01781003")));
}

TEST_CASE("protobuf prints nothing of libprotobuf's warnings and errors", "[protobuf]") {
  FakeRegistry registry;
  // No syntax line: the parser warns, and takes proto2.
  int32_t bare =
      registry.add("bare", SchemaType::kProtobuf, "message A { optional string s = 1; }");
  int32_t proto3 = registry.add("s", SchemaType::kProtobuf,
                                "syntax = \"proto3\";\nmessage B { string s = 1; }\n");
  auto codec = make_protobuf_codec(registry, DecodeOptions{});
  std::string out;
  StderrCapture capture;
  REQUIRE(codec->decode(framed(bare, std::string(1, '\0'), from_hex("0a0178")), out).ok());
  CHECK(out == R"({"s":"x"})");
  // A proto3 string that is not UTF-8: refused, and libprotobuf logs it.
  CHECK_FALSE(codec->decode(framed(proto3, std::string(1, '\0'), from_hex("0a01ff")), out).ok());
  CHECK(capture.text().empty());
}
