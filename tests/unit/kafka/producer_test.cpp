// Kafka's writer against librdkafka's mock cluster, in process.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "fakes.h"
#include "kpipe/kafka/client.h"
#include "kpipe/kafka/mock_cluster.h"

namespace kpipe {
namespace {

constexpr int kInitProducerId = 22;  // the Kafka protocol's API key

// The records an idempotent producer had queued when the cluster refused
// its producer id are purged by librdkafka (rd_kafka_set_fatal_error0), as
// 'Purged in queue': each is reported with the refusal that ended the
// producer, never with the purge (cluster: acls failed in CI so, a writer
// given Describe but not Write on its topic).
TEST_CASE("Producer: records queued when the cluster refuses the producer id fail with the refusal",
          "[kafka_producer]") {
  RecordingReporter reporter;
  SystemClock clock;
  auto mock = MockCluster::create(1, reporter);
  REQUIRE(mock.ok());
  REQUIRE((*mock)->create_topic("out", 1).ok());
  KafkaOptions o;
  o.brokers = (*mock)->bootstraps();
  auto config = resolve_kafka_config(o, nullptr);
  REQUIRE(config.ok());

  // The producer id is refused with an error to ask again (every half
  // second) until the records are queued, which makes their wait for it
  // certain; then, with the broker down so that no request comes between,
  // the next request is to be refused for good.
  REQUIRE((*mock)->push_request_errors(kInitProducerId, 1000, "COORDINATOR_NOT_AVAILABLE").ok());
  auto producer = Producer::create(*config, reporter, clock);
  REQUIRE(producer.ok());
  std::vector<std::string> errors;
  int acknowledged = 0;
  (*producer)->set_delivery_handler([&](uint64_t, const Error* err) {
    if (err == nullptr)
      ++acknowledged;
    else
      errors.push_back(err->message);
  });
  for (int i = 0; i < 3; ++i) {
    Status written = (*producer)->write("out", 0, std::nullopt, "{}", {}, 0);
    CAPTURE(written.ok() ? std::string() : written.error().message);
    REQUIRE(written.ok());
  }
  (*mock)->set_brokers_up(false);
  (*mock)->clear_request_errors(kInitProducerId);
  REQUIRE((*mock)->push_request_errors(kInitProducerId, 1, "CLUSTER_AUTHORIZATION_FAILED").ok());
  (*mock)->set_brokers_up(true);
  (void)(*producer)->flush(10'000);

  CHECK(acknowledged == 0);
  REQUIRE(errors.size() == 3);
  for (const std::string& e : errors)
    CHECK(e == "not authorized to write topic 'out' (ACL needed: Write on Topic:out)");
}

}  // namespace
}  // namespace kpipe
