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

namespace {

Expected<std::unique_ptr<avro::Compiled>> compile(std::string text) {
  RegisteredSchema s;
  s.id = 5;
  s.type = SchemaType::kAvro;
  s.text = std::move(text);
  return avro::compile(s);
}

}  // namespace

TEST_CASE("avro: a schema compiles to one node per type, names resolved", "[avro]") {
  auto c = compile(R"({"type":"record","name":"R","namespace":"n","fields":[
    {"name":"a","type":{"type":"fixed","name":"F","size":2,"logicalType":"decimal",
                        "precision":4,"scale":2}},
    {"name":"b","type":"F"},
    {"name":"c","type":{"type":"string","logicalType":"date"}},
    {"name":"d","type":["null",{"type":"enum","name":"x.E","symbols":["A","B"]}]}]})");
  REQUIRE(c);
  const std::vector<avro::Node>& nodes = (*c)->nodes;
  const avro::Node& root = nodes[(*c)->root];
  CHECK(root.kind == avro::Kind::kRecord);
  CHECK(root.name == "n.R");
  REQUIRE(root.fields.size() == 4);
  // A named type is one node, however often it is referenced.
  CHECK(root.fields[0].type == root.fields[1].type);
  const avro::Node& fixed = nodes[root.fields[0].type];
  CHECK(fixed.name == "n.F");
  CHECK(fixed.short_name == "F");
  CHECK(fixed.logical == avro::Logical::kDecimal);
  CHECK(fixed.precision == 4);
  CHECK(fixed.scale == 2);
  // A logical type that does not fit its type is ignored.
  CHECK(nodes[root.fields[2].type].logical == avro::Logical::kNone);
  const avro::Node& u = nodes[root.fields[3].type];
  REQUIRE(u.children.size() == 2);
  CHECK(nodes[u.children[0]].branch_name == "null");
  CHECK(nodes[u.children[1]].branch_name == "x.E");
  CHECK(nodes[u.children[1]].symbols == std::vector<std::string>{"A", "B"});
  // The root record's fields have their handles in the reused value.
  REQUIRE((*c)->fixed.size() == 1);
  CHECK((*c)->fixed[0].fields.size() == 4);
}

TEST_CASE("avro: a decimal a fixed cannot hold is read as the fixed beneath", "[avro]") {
  // Two bytes hold 4 digits: floor(log10(2^15 - 1)).
  auto c = compile(R"({"type":"fixed","name":"F","size":2,"logicalType":"decimal",)"
                   R"("precision":5})");
  REQUIRE(c);
  CHECK((*c)->nodes[(*c)->root].logical == avro::Logical::kNone);
}

TEST_CASE("avro: schemas the node table refuses say why", "[avro]") {
  auto nested = compile(R"(["null",["int"]])");
  REQUIRE(!nested);
  CHECK(nested.error().message == "a union directly inside a union");
  auto twice = compile(R"([{"type":"record","name":"R","fields":[]},)"
                       R"({"type":"record","name":"R","fields":[]}])");
  REQUIRE(!twice);
  CHECK(twice.error().message == "type 'R' is defined twice");
  auto bad_json = compile("{");
  REQUIRE(!bad_json);
  CHECK(bad_json.error().status == ExitStatus::kDataError);
}
