#include "kpipe/schema/avro_internal.h"

#include <catch2/catch.hpp>

#include <limits>
#include <string>
#include <vector>

#include "kpipe/json.h"
#include "schema/avro_fixtures.h"
#include "schema/fake_registry.h"

using namespace kpipe;
using namespace kpipe::avro_test;

TEST_CASE("avro: doubles are written as append_double writes them", "[avro]") {
  Codec c(R"("double")");
  std::vector<double> values = {0.5,  -0.25,           1.005,     999.99,  -12.5, 1234567.891,
                                1e11, 99999999999.999, 0.1 + 0.2, 1.0 / 3, 2.675, -1e-7};
  for (int i = -3000; i <= 3000; i += 7) values.push_back(i / 100.0 + 0.001 * (i % 10));
  for (double v : values) {
    std::string json;
    append_double(json, v);
    INFO("value " << json);
    CHECK(c.decode(framed(c.id, c.encode(json))) == json);
  }
}

namespace {

// What `write` writes through a JsonOut into a string that holds "[".
template <class Write>
std::string written(Write write) {
  std::string s = "[";
  avro::JsonOut out(s);
  write(out);
  out.finish();
  return s;
}

}  // namespace

TEST_CASE("avro: strings are written as append_json_string writes them, if UTF-8", "[avro]") {
  const std::vector<std::string> texts = {"",
                                          "plain",
                                          "quote \" and \\ back",
                                          "tab\tand\nline",
                                          std::string("nul \0 and \x1f", 11),
                                          "caf\xc3\xa9",
                                          std::string(5000, 'x') + "\x01"};
  for (const std::string& t : texts) {
    std::string want = "[";
    append_json_string(want, t);
    CHECK(written([&](avro::JsonOut& out) {
            REQUIRE(avro::put_json_string(out, t.data(), t.size()));
          }) == want);
  }
  for (const std::string& bad : {std::string("bad \xc3("), std::string(5000, 'x') + "\xff"}) {
    CHECK(written([&](avro::JsonOut& out) {
            CHECK(!avro::put_json_string(out, bad.data(), bad.size()));
          }) == "[");
  }
}

TEST_CASE("avro: bytes in Avro's JSON encoding are code points", "[avro]") {
  const unsigned char bytes[] = {0x00, 0x1f, 'a', '"', '\\', 0x7f, 0x80, 0xff};
  CHECK(written([&](avro::JsonOut& out) { avro::put_code_points(out, bytes, sizeof bytes); }) ==
        R"(["\u0000\u001fa\"\\\u007f\u0080\u00ff")");
}

TEST_CASE("avro: numbers and times as the JSON writers write them", "[avro]") {
  CHECK(written([](avro::JsonOut& out) { avro::put_scaled_millis(out, -1, 1000, 3); }) ==
        "[-0.001");
  CHECK(written([](avro::JsonOut& out) { avro::put_scaled_millis(out, 1500, 1000, 3); }) ==
        "[1.500");
  CHECK(written([](avro::JsonOut& out) { avro::put_time_of_day(out, 3'723'004, 4, 3); }) ==
        R"(["01:02:03.004")");
  CHECK(written([](avro::JsonOut& out) { avro::put_float(out, 0.1f); }) == "[0.1");
  CHECK(written([](avro::JsonOut& out) { avro::put_float(out, -3.0f); }) == "[-3");
  CHECK(written([](avro::JsonOut& out) {
          CHECK(avro::put_non_finite(out, -std::numeric_limits<double>::infinity()));
        }) == R"(["-Infinity")");
  CHECK(written([](avro::JsonOut& out) { CHECK(avro::put_short_decimal(out, -12.25)); }) ==
        "[-12.25");
  // Integers and doubles of many digits are left to append_double.
  CHECK(written([](avro::JsonOut& out) { CHECK(!avro::put_short_decimal(out, 12)); }) == "[");
  CHECK(written([](avro::JsonOut& out) { CHECK(!avro::put_short_decimal(out, 0.1 + 0.2)); }) ==
        "[");
}
