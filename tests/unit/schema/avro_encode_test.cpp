#include "kpipe/schema/avro_codec.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "schema/avro_fixtures.h"
#include "schema/fake_registry.h"

using namespace kpipe;
using namespace kpipe::avro_test;

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
