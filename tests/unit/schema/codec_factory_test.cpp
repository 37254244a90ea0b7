#include "kpipe/schema/codec_factory.h"

#include <catch2/catch.hpp>

#include "fake_registry.h"

using namespace kpipe;

TEST_CASE("make_codec: a codec for each schema format, none for the others", "[codec]") {
  FakeRegistry registry;
  int32_t avro = registry.add("a-value", SchemaType::kAvro, R"("long")");
  int32_t json = registry.add("j-value", SchemaType::kJson, R"({"type":"integer"})");
  for (PayloadFormat f : {PayloadFormat::kJson, PayloadFormat::kString, PayloadFormat::kBytes})
    CHECK(make_codec(f, registry, {}) == nullptr);
  CHECK(make_codec(PayloadFormat::kProtobuf, registry, {}) != nullptr);
  // Each is the codec of its format: Avro writes 42 as a zigzag varint,
  // JSON Schema as its text.
  std::string out;
  REQUIRE(make_codec(PayloadFormat::kAvro, registry, {})->encode("42", avro, out).ok());
  CHECK(out == std::string("\0\0\0\0\1\x54", 6));
  out.clear();
  REQUIRE(make_codec(PayloadFormat::kJsonSchema, registry, {})->encode("42", json, out).ok());
  CHECK(out == std::string("\0\0\0\0\2"
                           "42",
                           7));
}
