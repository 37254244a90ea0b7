#include "kpipe/kafka/internal.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>

using namespace kpipe;

TEST_CASE("timeout_ms: a timeout librdkafka takes, never 0 nor negative", "[kafka_internal]") {
  CHECK(timeout_ms(10 * kSecond) == 10000);
  CHECK(timeout_ms(1) == 1);
  // 0 would fail a request without asking the broker (--timeout 0), and
  // librdkafka reads a negative timeout as "wait forever".
  CHECK(timeout_ms(0) == 1);
  CHECK(timeout_ms(-1) == 1);
  CHECK(timeout_ms(std::numeric_limits<Millis>::min()) == 1);
  // Beyond an int, the longest wait an int holds.
  CHECK(timeout_ms(Millis{INT32_MAX}) == INT32_MAX);
  CHECK(timeout_ms(Millis{INT32_MAX} + 1) == INT32_MAX);
  CHECK(timeout_ms(std::numeric_limits<Millis>::max()) == INT32_MAX);
}

TEST_CASE("Handle::note_error: a bare disconnect never hides the failure before it",
          "[kafka_internal]") {
  KafkaClient::Handle h;
  h.note_error(
      "ssl://h:9093/bootstrap: SSL handshake failed: Disconnected (after 0ms in state "
      "SSL_HANDSHAKE)");
  h.note_error("ssl://h:9093/bootstrap: Disconnected (after 0ms in state SSL_HANDSHAKE)");
  CHECK(connection_reason(h.take_error()) == "SSL handshake failed: Disconnected");
  KafkaClient::Handle fresh;
  fresh.note_error("h:9/1: Disconnected (after 10ms in state UP)");
  CHECK(connection_reason(fresh.take_error()) == "disconnected");
}
