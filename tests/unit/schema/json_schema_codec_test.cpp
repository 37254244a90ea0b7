#include "kpipe/schema/json_schema_codec.h"

#include <catch2/catch.hpp>

#include <string>

#include "schema/fake_registry.h"

using namespace kpipe;

namespace {

const char* const kOrderSchema = R"({
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "properties": {
    "id": {"type": "integer", "minimum": 1},
    "status": {"enum": ["new", "paid"]},
    "kind": {"const": "order"},
    "customer": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
    "note": {"type": ["string", "null"]},
    "total": {"type": "number", "exclusiveMinimum": 0, "maximum": 1000},
    "items": {"type": "array", "items": {"$ref": "#/definitions/Item"}, "maxItems": 3},
    "address": {"$ref": "#/$defs/Address"},
    "meta": {"type": "object", "additionalProperties": {"type": "string"}},
    "payment": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/Card"}]}
  },
  "required": ["id"],
  "additionalProperties": false,
  "definitions": {
    "Item": {
      "type": "object",
      "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
      "required": ["sku", "qty"]
    }
  },
  "$defs": {
    "Address": {"type": "object", "properties": {"zip": {"type": "string"}}},
    "Card": {"type": "object", "required": ["number"]}
  }
})";

std::string framed(int32_t id, std::string_view payload) {
  std::string out;
  append_frame(out, id);
  out.append(payload);
  return out;
}

struct Fixture {
  FakeRegistry registry;
  int32_t id = registry.add("orders-value", SchemaType::kJson, kOrderSchema);
  std::unique_ptr<ValueCodec> codec = make_json_schema_codec(registry);

  // The error of encoding `json`, after checking that it is a data_error
  // and that `out` was left as it was.
  std::string refusal(std::string_view json) {
    std::string out = "before";
    auto status = codec->encode(json, id, out);
    REQUIRE_FALSE(status.ok());
    CHECK(status.error().status == ExitStatus::kDataError);
    CHECK(out == "before");
    return status.error().message;
  }

  std::string decode_error(std::string_view bytes) {
    std::string out = "before";
    auto r = codec->decode(bytes, out);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().status == ExitStatus::kDataError);
    CHECK(out == "before");
    return r.error().message;
  }
};

}  // namespace

TEST_CASE("json-schema frames valid JSON unchanged and decodes it back", "[json-schema]") {
  Fixture f;
  std::string json =
      R"({"id": 7, "status": "paid", "kind": "order", "customer": "bob", "note": null,)"
      R"( "total": 12.5, "items": [{"sku": "A-1", "qty": 2}], "address": {"zip": "1000"},)"
      R"( "meta": {"source": "web"}, "payment": {"number": "4111"}})";
  std::string out = "prefix";
  REQUIRE(f.codec->encode(json, f.id, out).ok());
  CHECK(out == "prefix" + framed(f.id, json));
  std::string decoded = "[";
  auto id = f.codec->decode(std::string_view(out).substr(6), decoded);
  REQUIRE(id.ok());
  CHECK(*id == f.id);
  // Whitespace goes, so that the value stays on its envelope's line.
  CHECK(decoded ==
        R"([{"id":7,"status":"paid","kind":"order","customer":"bob","note":null,"total":12.5,)"
        R"("items":[{"sku":"A-1","qty":2}],"address":{"zip":"1000"},"meta":{"source":"web"},)"
        R"("payment":{"number":"4111"}})");
}

TEST_CASE("json-schema accepts what only ignored keywords would refuse", "[json-schema]") {
  Fixture f;
  std::string out;
  // "pattern" is not checked; 1.0 is an integer; null matches oneOf's first.
  CHECK(f.codec->encode(R"({"id": 1.0, "customer": "B0B", "payment": null})", f.id, out).ok());
}

TEST_CASE("json-schema names the field and why it is refused", "[json-schema]") {
  Fixture f;
  CHECK(f.refusal(R"({"status": "new"})") == "json-schema: field 'id': required and missing");
  CHECK(f.refusal(R"({"id": "7"})") == "json-schema: field 'id': expected integer, found string");
  CHECK(f.refusal(R"({"id": 7.5})") == "json-schema: field 'id': expected integer, found number");
  CHECK(f.refusal(R"({"id": 0})") == "json-schema: field 'id': 0 is less than the minimum 1");
  CHECK(f.refusal(R"({"id": 1, "items": [{"sku": "A", "qty": "2"}]})") ==
        "json-schema: field 'items[0].qty': expected integer, found string");
  CHECK(f.refusal(R"({"id": 1, "items": [{"sku": "A", "qty": 1}, {"qty": 1}]})") ==
        "json-schema: field 'items[1].sku': required and missing");
  CHECK(f.refusal(R"({"id": 1, "items": [], "extra": 1})") ==
        "json-schema: field 'extra': not allowed (additionalProperties is false)");
  CHECK(f.refusal(R"({"id": 1, "content-type": 1})") ==
        R"(json-schema: field 'content-type': not allowed (additionalProperties is false))");
  CHECK(f.refusal(R"({"id": 1, "meta": {"a": "x", "b": 2}})") ==
        "json-schema: field 'meta.b': expected string, found number");
  CHECK(f.refusal(R"({"id": 1, "status": "lost"})") ==
        R"(json-schema: field 'status': "lost" is not one of the enum's values ["new","paid"])");
  CHECK(f.refusal(R"({"id": 1, "kind": "refund"})") ==
        R"(json-schema: field 'kind': expected "order" (const), found "refund")");
  CHECK(f.refusal(R"({"id": 1, "customer": "é"})") ==
        "json-schema: field 'customer': 1 characters, fewer than minLength 2");
  CHECK(f.refusal(R"({"id": 1, "customer": "abcdef"})") ==
        "json-schema: field 'customer': 6 characters, more than maxLength 5");
  CHECK(f.refusal(R"({"id": 1, "note": 3})") ==
        "json-schema: field 'note': expected string or null, found number");
  CHECK(f.refusal(R"({"id": 1, "total": 0})") ==
        "json-schema: field 'total': 0 is not greater than the exclusive minimum 0");
  CHECK(f.refusal(R"({"id": 1, "total": 1e4})") ==
        "json-schema: field 'total': 10000 is greater than the maximum 1000");
  CHECK(f.refusal(R"({"id": 1, "items": [{"sku":"a","qty":1},{"sku":"a","qty":1},)"
                  R"({"sku":"a","qty":1},{"sku":"a","qty":1}]})") ==
        "json-schema: field 'items': 4 items, more than maxItems 3");
  CHECK(f.refusal(R"({"id": 1, "address": {"zip": 1000}})") ==
        "json-schema: field 'address.zip': expected string, found number");
  CHECK(f.refusal(R"({"id": 1, "payment": {}})") ==
        "json-schema: field 'payment': matches none of the schemas of oneOf");
  CHECK(f.refusal("[1]") == "json-schema: the value: expected object, found array");
  CHECK(f.refusal(R"({"id": )").rfind("json-schema: not valid JSON", 0) == 0);
}

TEST_CASE("json-schema knows draft 4's boolean exclusiveMaximum", "[json-schema]") {
  FakeRegistry registry;
  int32_t id = registry.add("s", SchemaType::kJson,
                            R"({"type": "number", "maximum": 10, "exclusiveMaximum": true})");
  auto codec = make_json_schema_codec(registry);
  std::string out;
  CHECK(codec->encode("9.5", id, out).ok());
  auto status = codec->encode("10", id, out);
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message ==
        "json-schema: the value: 10 is not less than the exclusive maximum 10");
}

TEST_CASE("json-schema follows a recursive $ref", "[json-schema]") {
  FakeRegistry registry;
  int32_t id = registry.add("s", SchemaType::kJson, R"({
    "type": "object",
    "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}}
  })");
  auto codec = make_json_schema_codec(registry);
  std::string out;
  CHECK(
      codec->encode(R"({"name": "a", "children": [{"name": "b", "children": []}]})", id, out).ok());
  auto status = codec->encode(R"({"children": [{"children": [{"name": 1}]}]})", id, out);
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message ==
        "json-schema: field 'children[0].children[0].name': expected string, found number");
}

TEST_CASE("json-schema refuses a schema it cannot use", "[json-schema]") {
  FakeRegistry registry;
  auto codec = make_json_schema_codec(registry);
  std::string out;
  int32_t dangling = registry.add("s", SchemaType::kJson, R"({"$ref": "#/definitions/Gone"})");
  auto status = codec->encode("{}", dangling, out);
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().status == ExitStatus::kDataError);
  CHECK(status.error().message ==
        "json-schema: schema 1: $ref '#/definitions/Gone' leads nowhere in the schema");
  int32_t loop = registry.add("s", SchemaType::kJson, R"({"$ref": "#/definitions/A",
    "definitions": {"A": {"$ref": "#/definitions/B"}, "B": {"$ref": "#/definitions/A"}}})");
  status = codec->encode("{}", loop, out);
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message ==
        "json-schema: the value: the schema's $ref chain goes round in a loop");
  int32_t avro = registry.add("a", SchemaType::kAvro, R"("string")");
  status = codec->encode("{}", avro, out);
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message == "json-schema: schema 3 is AVRO, not JSON");
  CHECK(out.empty());
}

TEST_CASE("json-schema refuses a payload that is not JSON", "[json-schema]") {
  Fixture f;
  CHECK(f.decode_error(framed(f.id, R"({"id": 1)"))
            .rfind("json-schema: payload of schema 1: not valid JSON", 0) == 0);
  CHECK(f.decode_error(framed(f.id, "")).rfind("json-schema: payload of schema 1: ", 0) == 0);
  CHECK(f.decode_error(R"({"id": 1})") ==
        "json-schema: magic byte 0x7b is not 0: not in the Confluent wire format");
  CHECK(f.decode_error(framed(9, "{}")) == "schema 9 not found in the registry");
}

TEST_CASE("json-schema looks up each schema id once", "[json-schema]") {
  Fixture f;
  std::string out;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(f.codec->decode(framed(f.id, R"({"id": 1})"), out).ok());
    REQUIRE(f.codec->encode(R"({"id": 1})", f.id, out).ok());
  }
  CHECK(f.registry.id_lookups == 1);
  CHECK_FALSE(f.codec->decode(framed(9, "{}"), out).ok());
  CHECK_FALSE(f.codec->encode("{}", 9, out).ok());
  CHECK(f.registry.id_lookups == 2);
}
