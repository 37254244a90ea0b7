// librdkafka's mock cluster, behind kbroker: faults on demand (kbroker(1),
// FAULTS). Apart from the production clients, which never start one.
#include "kpipe/kafka/mock_cluster.h"

#include "kpipe/kafka/internal.h"
#include "kpipe/kafka/topic.h"

#include <librdkafka/rdkafka_mock.h>

#include <optional>
#include <vector>

namespace kpipe {

struct MockCluster::State {
  KafkaClient::Handle handle;
  rd_kafka_mock_cluster_t* cluster = nullptr;
  int brokers = 0;
  ~State() {
    if (cluster != nullptr) rd_kafka_mock_cluster_destroy(cluster);
  }
};

MockCluster::~MockCluster() = default;

Expected<std::unique_ptr<MockCluster>> MockCluster::create(int brokers, Reporter& reporter) {
  std::unique_ptr<MockCluster> mock(new MockCluster());
  mock->state_ = std::make_unique<State>();
  mock->state_->handle.reporter = &reporter;
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set_opaque(conf, &mock->state_->handle);
  rd_kafka_conf_set_log_cb(conf, log_cb);
  char err[512];
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    return failure("cannot start the mock cluster: {}", err);
  }
  mock->state_->handle.rk = rk;
  mock->state_->cluster = rd_kafka_mock_cluster_new(rk, brokers);
  if (mock->state_->cluster == nullptr) return failure("cannot start the mock cluster");
  mock->state_->brokers = brokers;
  // The mock speaks Metadata up to v2, whose requests cannot say "do not
  // create": it created every topic a consumer asked about (a typo with
  // -t read as an empty topic). From v4 on, requests carry
  // AllowAutoTopicCreation, which librdkafka's consumers set to false and
  // its producers to true, as kbroker(1) promises. Its handler reads and
  // writes v3 and v4 correctly (v4 adds only that flag).
  constexpr int16_t kMetadataApi = 3;
  rd_kafka_mock_set_apiversion(mock->state_->cluster, kMetadataApi, 0, 4);
  return mock;
}

std::string MockCluster::bootstraps() const {
  return rd_kafka_mock_cluster_bootstraps(state_->cluster);
}

void MockCluster::set_brokers_up(bool up) {
  // The mock numbers its brokers from 1.
  for (int32_t id = 1; id <= state_->brokers; ++id) {
    if (up) {
      rd_kafka_mock_broker_set_up(state_->cluster, id);
    } else {
      rd_kafka_mock_broker_set_down(state_->cluster, id);
    }
  }
}

namespace {

// A broker's error by Kafka's name, as librdkafka spells it without its
// RD_KAFKA_RESP_ERR_ prefix. librdkafka's own errors (a leading '_') never
// come from a broker, so they are not faults a broker can make.
std::optional<rd_kafka_resp_err_t> broker_error(const std::string& name) {
  // Kafka renamed it in 2.x; librdkafka knows the old name.
  if (name == "NOT_LEADER_OR_FOLLOWER") return RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION;
  const rd_kafka_err_desc* descs = nullptr;
  size_t count = 0;
  rd_kafka_get_err_descs(&descs, &count);
  for (size_t i = 0; i < count; ++i) {
    if (descs[i].name == nullptr || descs[i].code < RD_KAFKA_RESP_ERR_NO_ERROR) continue;
    if (name == descs[i].name) return descs[i].code;
  }
  return std::nullopt;
}

}  // namespace

int MockCluster::broker_count() const {
  return state_->brokers;
}

Status MockCluster::push_request_errors(int api_key, int count, const std::string& error) {
  auto code = broker_error(error);
  if (!code) return failure("unknown Kafka error '{}'", error);
  std::vector<rd_kafka_resp_err_t> errors(static_cast<size_t>(count), *code);
  rd_kafka_mock_push_request_errors_array(state_->cluster, static_cast<int16_t>(api_key),
                                          errors.size(), errors.data());
  return {};
}

void MockCluster::clear_request_errors(int api_key) {
  rd_kafka_mock_clear_request_errors(state_->cluster, static_cast<int16_t>(api_key));
}

namespace {

// The mock answers an unknown broker id in ways of its own (not available,
// unknown, or taken for "none"), so ids are checked here first.
Status check_broker(int broker, int brokers) {
  if (broker >= 1 && broker <= brokers) return {};
  return failure("no broker {}: the cluster has brokers 1 to {}", broker, brokers);
}

Status mock_result(rd_kafka_resp_err_t err) {
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return {};
  return failure("{}", rd_kafka_err2str(err));
}

}  // namespace

Status MockCluster::set_broker_up(int broker, bool up) {
  KPIPE_TRY(check_broker(broker, state_->brokers));
  return mock_result(up ? rd_kafka_mock_broker_set_up(state_->cluster, broker)
                        : rd_kafka_mock_broker_set_down(state_->cluster, broker));
}

Status MockCluster::set_broker_rtt(int broker, Millis rtt) {
  KPIPE_TRY(check_broker(broker, state_->brokers));
  if (rtt < 0 || rtt > INT32_MAX) return failure("a round trip of {} ms is out of range", rtt);
  return mock_result(rd_kafka_mock_broker_set_rtt(state_->cluster, broker, static_cast<int>(rtt)));
}

Status MockCluster::set_coordinator(const std::string& key_type, const std::string& key,
                                    int broker) {
  KPIPE_TRY(check_broker(broker, state_->brokers));
  return mock_result(
      rd_kafka_mock_coordinator_set(state_->cluster, key_type.c_str(), key.c_str(), broker));
}

Status MockCluster::set_partition_leader(const std::string& topic, int partition, int broker) {
  if (broker != -1) KPIPE_TRY(check_broker(broker, state_->brokers));
  rd_kafka_resp_err_t err =
      rd_kafka_mock_partition_set_leader(state_->cluster, topic.c_str(), partition, broker);
  if (err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION || err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
    return failure("topic '{}' has no partition {}", topic, partition);
  return mock_result(err);
}

Status MockCluster::set_topic_error(const std::string& topic, const std::string& error) {
  auto code = broker_error(error);
  if (!code) return failure("unknown Kafka error '{}'", error);
  rd_kafka_mock_topic_set_error(state_->cluster, topic.c_str(), *code);
  return {};
}

Status MockCluster::create_topic(const std::string& name, int partitions) {
  KPIPE_TRY(check_topic_name(name));
  rd_kafka_resp_err_t err =
      rd_kafka_mock_topic_create(state_->cluster, name.c_str(), partitions, 1);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return failure("cannot create topic '{}': {}", name, rd_kafka_err2str(err));
  return {};
}

}  // namespace kpipe
