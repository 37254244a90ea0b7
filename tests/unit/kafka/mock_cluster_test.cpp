// What kbroker's faults on demand refuse before librdkafka's mock sees
// them (kbroker(1), FAULTS): its own answers to these differ by call.
#include "kpipe/kafka/mock_cluster.h"

#include <catch2/catch.hpp>

#include <string>

#include "fakes.h"

using namespace kpipe;

namespace {

std::string error_of(const Status& s) {
  return s.ok() ? std::string("(ok)") : s.error().message;
}

}  // namespace

TEST_CASE("MockCluster: brokers numbered from 1, an unknown one named with the range",
          "[kafka_mock_cluster]") {
  RecordingReporter reporter;
  auto mock = MockCluster::create(2, reporter);
  REQUIRE(mock.ok());
  MockCluster& cluster = **mock;
  CHECK(cluster.broker_count() == 2);
  CHECK_FALSE(cluster.bootstraps().empty());
  CHECK(cluster.set_broker_up(2, false).ok());
  CHECK(cluster.set_broker_up(2, true).ok());
  CHECK(error_of(cluster.set_broker_up(3, false)) == "no broker 3: the cluster has brokers 1 to 2");
  CHECK(error_of(cluster.set_broker_rtt(0, 10)) == "no broker 0: the cluster has brokers 1 to 2");
  CHECK(error_of(cluster.set_broker_rtt(1, -1)) == "a round trip of -1 ms is out of range");
  CHECK(error_of(cluster.set_coordinator("group", "g", 5)) ==
        "no broker 5: the cluster has brokers 1 to 2");
}

TEST_CASE("MockCluster: errors by Kafka's names, never librdkafka's own", "[kafka_mock_cluster]") {
  RecordingReporter reporter;
  auto mock = MockCluster::create(1, reporter);
  REQUIRE(mock.ok());
  MockCluster& cluster = **mock;
  REQUIRE(cluster.create_topic("orders", 1).ok());
  CHECK(cluster.push_request_errors(0, 2, "NOT_LEADER_FOR_PARTITION").ok());
  // Kafka's newer name for it.
  CHECK(cluster.push_request_errors(0, 1, "NOT_LEADER_OR_FOLLOWER").ok());
  cluster.clear_request_errors(0);
  CHECK(cluster.set_topic_error("orders", "TOPIC_AUTHORIZATION_FAILED").ok());
  CHECK(cluster.set_topic_error("orders", "NO_ERROR").ok());
  CHECK(error_of(cluster.push_request_errors(0, 1, "NO_SUCH_ERROR")) ==
        "unknown Kafka error 'NO_SUCH_ERROR'");
  CHECK(error_of(cluster.set_topic_error("orders", "_TRANSPORT")) ==
        "unknown Kafka error '_TRANSPORT'");
}
