#include "kpipe/kafka/internal.h"

#include <catch2/catch.hpp>

#include <string>

#include "fakes.h"

using namespace kpipe;

TEST_CASE("connection_reason: librdkafka's cause, without thread, broker and timing",
          "[kafka_errors]") {
  CHECK(connection_reason(
            "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection refused "
            "(after 0ms in state CONNECT)") == "connection refused");
  // Log lines (what is seen while a request waits) start with the thread.
  CHECK(connection_reason(
            "[thrd:nohost.invalid:9092/bootstrap]: nohost.invalid:9092/bootstrap: Failed to "
            "resolve 'nohost.invalid:9092': Name or service not known (after 7ms in state "
            "CONNECT)") == "failed to resolve 'nohost.invalid:9092': Name or service not known");
  CHECK(connection_reason("sasl_plaintext://127.0.0.1:9092/bootstrap: SASL authentication error: "
                          "Authentication failed: Invalid username or password (after 5ms in state "
                          "AUTH_REQ, 4 identical error(s) suppressed)") ==
        "SASL authentication error: Authentication failed: Invalid username or password");
  CHECK(connection_reason(
            "[thrd:ssl://h:9093/bootstrap]: ssl://h:9093/bootstrap: SSL handshake failed: "
            "Disconnected: connecting to a PLAINTEXT broker listener? (after 0ms in state "
            "SSL_HANDSHAKE)") ==
        "SSL handshake failed: Disconnected: connecting to a PLAINTEXT broker listener?");
  // A certificate refused as the connection is made: OpenSSL's words
  // alone, said as the handshake's failure (tests/cluster/client_files,
  // once under load).
  CHECK(connection_reason("ssl://127.0.0.1:9093/bootstrap: Connect to ipv4#127.0.0.1:9093 failed: "
                          "error:0A000086:SSL routines::certificate verify failed (after 2ms in "
                          "state CONNECT)") ==
        "SSL handshake failed: error:0A000086:SSL routines::certificate verify failed");
  CHECK(connection_reason(
            "[thrd:sasl_plaintext://h:9092/bootstrap]: sasl_plaintext://h:9092/bootstrap: SASL "
            "PLAIN mechanism handshake failed: Broker: Request not valid in current SASL state: "
            "broker's supported mechanisms:  (after 1ms in state AUTH_HANDSHAKE)") ==
        "SASL PLAIN mechanism handshake failed: Broker: Request not valid in current SASL state: "
        "broker's supported mechanisms");
  // A SCRAM login refused by Kafka 4 may be librdkafka's nonce, not the
  // password: said with a librdkafka before 2.6.1, not after.
  constexpr std::string_view scram =
      "sasl_ssl://127.0.0.1:9/bootstrap: SASL authentication error: Authentication failed "
      "during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after "
      "313ms in state AUTH_REQ)";
  CHECK(connection_reason(scram, 0x020002ff) ==
        "SASL authentication error: Authentication failed during authentication due to invalid "
        "credentials with SASL mechanism SCRAM-SHA-512 (if the password is right: librdkafka "
        "2.0.2 cannot log in with SCRAM to Kafka 4 brokers, fixed in librdkafka 2.6.1; use Kafka "
        "3.9 or earlier, or SASL PLAIN or OAUTHBEARER)");
  CHECK(connection_reason(scram, 0x020601ff) ==
        "SASL authentication error: Authentication failed during authentication due to invalid "
        "credentials with SASL mechanism SCRAM-SHA-512");
  CHECK(connection_reason("h:9/1: Disconnected (after 10ms in state UP)") == "disconnected");
  CHECK(connection_reason("1/1 brokers are down") == "1/1 brokers are down");
}

TEST_CASE("is_record_fault: what the broker refuses for the record's own sake", "[kafka_errors]") {
  for (auto err : {RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION,
                   RD_KAFKA_RESP_ERR_INVALID_RECORD, RD_KAFKA_RESP_ERR_INVALID_TIMESTAMP,
                   RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE,
                   // Larger than the topic's segment.bytes (issue 33, item 10).
                   RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE})
    CHECK(is_record_fault(err));
  // Not the record's fault: every record would fail alike.
  for (auto err :
       {RD_KAFKA_RESP_ERR__MSG_TIMED_OUT, RD_KAFKA_RESP_ERR__TRANSPORT,
        RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART,
        RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS})
    CHECK_FALSE(is_record_fault(err));
}

TEST_CASE("broker_reason: a broker's error as it follows a colon", "[kafka_errors]") {
  CHECK(broker_reason(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE) == "message size too large");
  CHECK(broker_reason(RD_KAFKA_RESP_ERR_INVALID_TIMESTAMP) == "invalid timestamp");
  CHECK(broker_reason(RD_KAFKA_RESP_ERR_INVALID_RECORD) == "broker failed to validate record");
}

TEST_CASE("is_fenced: another producer of the transactional id, and nothing else",
          "[kafka_errors]") {
  for (auto err : {RD_KAFKA_RESP_ERR__FENCED, RD_KAFKA_RESP_ERR_PRODUCER_FENCED,
                   RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH})
    CHECK(is_fenced(err));
  for (auto err : {RD_KAFKA_RESP_ERR_NO_ERROR, RD_KAFKA_RESP_ERR__TIMED_OUT,
                   RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
    CHECK_FALSE(is_fenced(err));
}

TEST_CASE("fenced_error: names the transactional id", "[kafka_errors]") {
  KafkaConfig config;
  config.set("transactional.id", "orders-out");
  CHECK(fenced_error(config).message ==
        "fenced: another producer with transactional id 'orders-out' has started; what this one "
        "wrote since its last commit is aborted");
}

TEST_CASE("error_cb: all brokers down starts the watch at the client's clock's time",
          "[kafka_errors]") {
  FakeClock clock;
  clock.advance(7 * kSecond);
  KafkaClient::Handle handle;
  handle.clock = &clock;
  error_cb(nullptr, RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, "1/1 brokers are down", &handle);
  CHECK(handle.watch.down());
  CHECK(handle.watch.since() == 7 * kSecond);
  // The mock cluster's handle has no clock, and no watch to feed.
  KafkaClient::Handle mock;
  error_cb(nullptr, RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, "1/1 brokers are down", &mock);
  CHECK_FALSE(mock.watch.down());
}

TEST_CASE("is_broken_handshake: a handshake cut by a disconnect is no refusal", "[kafka_errors]") {
  CHECK(is_broken_handshake(
      "sasl_ssl://127.0.0.1:9/1: SASL SCRAM-SHA-512 mechanism handshake failed: Local: Broker "
      "transport failure: broker's supported mechanisms: (n/a) (after 0ms in state DOWN)"));
  CHECK_FALSE(is_broken_handshake(
      "sasl_ssl://127.0.0.1:9/1: SASL authentication error: Authentication failed during "
      "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"));
  CHECK_FALSE(is_broken_handshake(
      "ssl://h:9093/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate "
      "verify failed"));
}
