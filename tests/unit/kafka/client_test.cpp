#include "kpipe/kafka/client.h"

#include <catch2/catch.hpp>

#include <vector>

#include "fakes.h"
#include "kpipe/kafka/internal.h"

using namespace kpipe;

// ask_until's decisions on a fake clock: its pauses pass at once, so these
// take no time, and what it asked says when it would have asked.

TEST_CASE("ask_until: a final answer is asked once, with the whole timeout", "[kafka_client]") {
  FakeClock clock;
  std::vector<int> asked;
  ask_until(clock, 10 * kSecond, [&](int left) {
    asked.push_back(left);
    return false;
  });
  CHECK(asked == std::vector<int>{10000});
  CHECK(clock.steady() == 0);
}

TEST_CASE("ask_until: asked again every 100ms while away, and gives up after the timeout",
          "[kafka_client]") {
  FakeClock clock;
  std::vector<int> asked;
  ask_until(clock, kSecond, [&](int left) {
    asked.push_back(left);
    return true;
  });
  // The last question, at the deadline, still gets a millisecond (a
  // request given 0 would fail without asking).
  CHECK(asked == std::vector<int>{1000, 900, 800, 700, 600, 500, 400, 300, 200, 100, 1});
  CHECK(clock.steady() == kSecond);
}

TEST_CASE("ask_until: stops at the first answer that is not 'away'", "[kafka_client]") {
  FakeClock clock;
  int calls = 0;
  ask_until(clock, 10 * kSecond, [&](int) { return ++calls < 3; });
  CHECK(calls == 3);
  CHECK(clock.steady() == 200);
}

TEST_CASE("ask_until: the time a question takes counts against the timeout", "[kafka_client]") {
  FakeClock clock;
  std::vector<int> asked;
  ask_until(clock, kSecond, [&](int left) {
    asked.push_back(left);
    clock.advance(600);  // librdkafka waited this long for the answer
    return true;
  });
  CHECK(asked == std::vector<int>{1000, 300});
  CHECK(clock.steady() == 1300);
}

TEST_CASE("ask_until: a timeout of 0 asks once", "[kafka_client]") {
  FakeClock clock;
  std::vector<int> asked;
  ask_until(clock, 0, [&](int left) {
    asked.push_back(left);
    return true;
  });
  CHECK(asked == std::vector<int>{1});
  CHECK(clock.steady() == 0);
}
