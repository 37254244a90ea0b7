// librdkafka's mock cluster, for kbroker and tests only: no production
// program starts one (tests/layers/check_includes.sh keeps it so).
#pragma once

#include <memory>
#include <string>

#include "kpipe/report.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

// librdkafka's mock cluster (kbroker): in-memory Kafka-protocol brokers on
// loopback. Keeps about 5 MiB and 100,000 batches per partition and drops
// older records silently: not a Kafka for production.
class MockCluster {
 public:
  static Expected<std::unique_ptr<MockCluster>> create(int brokers, Reporter& reporter);
  ~MockCluster();
  std::string bootstraps() const;
  Status create_topic(const std::string& name, int partitions);
  // Takes every broker down (connections closed, new ones refused) or
  // brings them back: an outage on demand, for testing clients.
  void set_brokers_up(bool up);

  // Faults on demand (kbroker(1), FAULTS). Brokers are numbered from 1;
  // each call is applied when it returns. Errors are Kafka's names
  // ("NOT_LEADER_FOR_PARTITION"), upper case.
  int broker_count() const;
  // The next `count` requests of that API key, to any broker, fail with
  // `error` (a broker's error, not one of librdkafka's own).
  Status push_request_errors(int api_key, int count, const std::string& error);
  void clear_request_errors(int api_key);
  Status set_broker_up(int broker, bool up);
  Status set_broker_rtt(int broker, Millis rtt);
  // key_type "group" or "transaction".
  Status set_coordinator(const std::string& key_type, const std::string& key, int broker);
  // broker -1: the partition has no leader.
  Status set_partition_leader(const std::string& topic, int partition, int broker);
  // Metadata answers `error` for the topic ("NO_ERROR" clears it).
  Status set_topic_error(const std::string& topic, const std::string& error);

 private:
  MockCluster() = default;
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kpipe
