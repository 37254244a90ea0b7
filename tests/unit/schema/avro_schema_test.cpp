#include "kpipe/schema/avro_internal.h"

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "schema/avro_fixtures.h"
#include "schema/fake_registry.h"

using namespace kpipe;
using namespace kpipe::avro_test;

TEST_CASE("avro: schemas that cannot be used are data errors that leave out as it was", "[avro]") {
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
