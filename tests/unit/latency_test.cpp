#include "kpipe/latency.h"

#include <catch2/catch.hpp>

using namespace kpipe;

TEST_CASE("TimestampSampler: exact while the sample holds every record", "[latency]") {
  TimestampSampler s;
  CHECK(s.take() == std::nullopt);
  for (Millis t = 1; t <= 101; ++t) s.add(1000 + t);
  s.add(-1);  // no timestamp: not counted
  auto sum = s.take();
  REQUIRE(sum);
  CHECK(sum->records == 101);
  CHECK(sum->min == 1001);
  CHECK(sum->p50 == 1051);          // rank 50 of 0..100
  CHECK(sum->p01 == 1002);          // rank 1
  CHECK(s.take() == std::nullopt);  // a fresh start
  CHECK(latency_at(*sum, 2000) == Latency{949, 998, 999, 101});
}

TEST_CASE("TimestampSampler: a bounded sample of many, the minimum exact", "[latency]") {
  TimestampSampler s;
  // A million records whose times are uniform over [0, 1000000).
  for (Millis t = 999999; t >= 0; --t) s.add(t);
  auto sum = s.take();
  REQUIRE(sum);
  CHECK(sum->records == 1000000);
  CHECK(sum->min == 0);
  // A sample of 4096: the quantiles within a few percent of the truth.
  CHECK(sum->p50 > 470000);
  CHECK(sum->p50 < 530000);
  CHECK(sum->p01 > 5000);
  CHECK(sum->p01 < 16000);
}
