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

TEST_CASE("avro: the memory reader tells how much of each payload it has read", "[avro]") {
  avro::MemoryReader reader;
  const std::string first("\x01\x02\x03\x04\x05", 5);
  reader.set_source(first);
  char got[4];
  REQUIRE(avro_read(reader.get(), got, 3) == 0);
  CHECK(reader.bytes_read() == 3);
  const std::string second("\x06\x07", 2);
  reader.set_source(second);
  CHECK(reader.bytes_read() == 0);
  REQUIRE(avro_read(reader.get(), got, 2) == 0);
  CHECK(reader.bytes_read() == 2);
}

TEST_CASE("avro: libavro may have no larger block than a read limit allows", "[avro]") {
  avro::use_block_allocator();
  {
    avro::ReadLimit limit(64);
    void* small = avro_malloc(64);
    CHECK(small != nullptr);
    avro_free(small, 64);
    CHECK(avro_malloc(65) == nullptr);
  }
  // The limit ends with its scope.
  void* large = avro_malloc(1 << 20);
  CHECK(large != nullptr);
  avro_free(large, 1 << 20);
}
