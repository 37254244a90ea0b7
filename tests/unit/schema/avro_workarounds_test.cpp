#include "kpipe/schema/avro_internal.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "schema/avro_fixtures.h"
#include "schema/fake_registry.h"

using namespace kpipe;
using namespace kpipe::avro_test;

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
