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
