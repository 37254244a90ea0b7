// Private to the kafka module (kafka*.cpp): the librdkafka handle behind
// KafkaClient. Nothing outside the module includes this file.
#pragma once

#include <librdkafka/rdkafka.h>

#include <functional>
#include <mutex>
#include <string>

#include "kpipe/kafka.h"

namespace kpipe {

struct KafkaClient::Handle {
  rd_kafka_t* rk = nullptr;
  Reporter* reporter = nullptr;
  std::mutex mu;
  std::string last_error;  // the latest connection failure librdkafka logged
  void* owner = nullptr;  // the client's own state, for callbacks
  // Set by Consumer::subscribe; called on the polling thread.
  std::function<void(rd_kafka_resp_err_t, rd_kafka_topic_partition_list_t*)> rebalance;
  ~Handle() {
    if (rk != nullptr) rd_kafka_destroy(rk);
  }
  void note_error(std::string text) {
    std::lock_guard<std::mutex> lock(mu);
    last_error = std::move(text);
  }
  std::string take_error() {
    std::lock_guard<std::mutex> lock(mu);
    return last_error;
  }
};

// Builds a librdkafka configuration from `config` plus the module's
// callbacks. The returned conf is owned by the caller until rd_kafka_new.
Expected<rd_kafka_conf_t*> make_conf(const KafkaConfig& config, KafkaClient::Handle* handle);

// rd_kafka_topic_partition_list_t <-> vectors.
rd_kafka_topic_partition_list_t* to_list(const std::vector<TopicPartition>& parts);
rd_kafka_topic_partition_list_t* to_list(const std::vector<PartitionOffset>& parts);

// "Connect to ipv4#127.0.0.1:9 failed: Connection refused (after 0ms ...)"
// -> "connection refused".
std::string connection_reason(const std::string& librdkafka_text);

}  // namespace kpipe
