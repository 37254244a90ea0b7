#include "kpipe/kafka/client.h"

#include <catch2/catch.hpp>

#include <string>

#include "fakes.h"
#include "kpipe/kafka/internal.h"

using namespace kpipe;

// run_transactional without a broker: the calls answer what librdkafka
// would, on a fake clock. (librdkafka makes no retriable error outside a
// client, so asking again is ask_until's, tested in client_test.cpp.)

namespace {

struct Txn {
  KafkaClient::Handle handle;  // no librdkafka handle: no fatal error to look up
  FakeClock clock{1795946400000};
  KafkaConfig config;
  Access acl;
  int calls = 0;
  std::vector<int> lefts;

  Txn() {
    config.timeout = 5 * kSecond;
    config.set("transactional.id", "tx-1");
    acl.transactional_id = AclNeed{AclOperation::kWrite, AclResourceType::kTransactionalId, "tx-1"};
  }

  // Each call answers `err` (none: success) with `text`.
  Status run(rd_kafka_resp_err_t err, const char* text, bool* abortable = nullptr) {
    return run_transactional(
        handle, clock, config, acl, "cannot commit the transaction",
        [&](int left) -> rd_kafka_error_t* {
          ++calls;
          lefts.push_back(left);
          if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return nullptr;
          return rd_kafka_error_new(err, "%s", text);
        },
        abortable);
  }
};

}  // namespace

TEST_CASE("transaction_timeout: at least a minute, or the configuration's timeout",
          "[kafka_transaction]") {
  KafkaConfig config;
  config.timeout = 5 * kSecond;
  CHECK(transaction_timeout(config) == kMinute);
  config.timeout = 2 * kMinute;
  CHECK(transaction_timeout(config) == 2 * kMinute);
}

TEST_CASE("run_transactional: a call that succeeds is made once, given the whole minute",
          "[kafka_transaction]") {
  Txn t;
  bool abortable = true;
  CHECK(t.run(RD_KAFKA_RESP_ERR_NO_ERROR, "", &abortable).ok());
  CHECK(t.lefts == std::vector<int>{60000});
  CHECK_FALSE(abortable);
  CHECK(t.clock.steady() == 0);
}

TEST_CASE("run_transactional: an error that is not retriable ends at once", "[kafka_transaction]") {
  Txn t;
  bool abortable = true;
  Status s = t.run(RD_KAFKA_RESP_ERR__STATE, "Operation not valid in state Ready", &abortable);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message == "cannot commit the transaction: Operation not valid in state Ready");
  CHECK(t.calls == 1);
  CHECK_FALSE(abortable);
  CHECK(t.clock.steady() == 0);
}

TEST_CASE("run_transactional: a timeout names the limit and why the cluster was out of reach",
          "[kafka_transaction]") {
  Txn t;
  Status s = t.run(RD_KAFKA_RESP_ERR__TIMED_OUT, "Transactional operation timed out");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message ==
        "cannot commit the transaction did not finish within 1m: Transactional operation timed "
        "out");
  t.handle.note_error(
      "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection refused (after 0ms "
      "in state CONNECT)");
  s = t.run(RD_KAFKA_RESP_ERR__TIMED_OUT, "Transactional operation timed out");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message ==
        "cannot commit the transaction did not finish within 1m: connection refused");
  CHECK(t.calls == 2);
}

TEST_CASE("run_transactional: fenced and refused are final, never asked again",
          "[kafka_transaction]") {
  Txn t;
  Status fenced = t.run(RD_KAFKA_RESP_ERR__FENCED, "Producer fenced by newer instance");
  REQUIRE_FALSE(fenced.ok());
  CHECK(fenced.error().message == fenced_error(t.config).message);
  Status member = t.run(RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID, "Broker: Unknown member");
  REQUIRE_FALSE(member.ok());
  CHECK(member.error().message ==
        "fenced: the consumer group no longer counts this instance's member as it was when the "
        "checkpoint was taken (Broker: Unknown member): the group moved its partitions on");
  Status refused = t.run(RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                         "Broker: Transactional Id authorization failed");
  REQUIRE_FALSE(refused.ok());
  CHECK(
      refused.error().message ==
      authorization_error(RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED, t.acl)->message);
  CHECK(t.calls == 3);
  CHECK(t.clock.steady() == 0);
}
