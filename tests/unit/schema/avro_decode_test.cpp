#include "kpipe/schema/avro_codec.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "schema/avro_fixtures.h"
#include "schema/fake_registry.h"

using namespace kpipe;
using namespace kpipe::avro_test;

TEST_CASE("avro: decode appends to what out holds", "[avro]") {
  Codec c(kV1Schema);
  std::string out = "[";
  REQUIRE(c.codec->decode(framed(c.id, kV1Hex), out));
  REQUIRE(c.codec->decode(framed(c.id, kV1Hex), out));
  CHECK(out == R"([{"a":7}{"a":7})");
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
}
