// Private to the kafka module (kafka/): the librdkafka handle behind
// KafkaClient. Nothing outside the module includes this file but its tests.
#pragma once

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "kpipe/kafka/client.h"

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

// Creates handle.rk from `config` plus the module's log and error
// callbacks; `customize` adds a client's own (rebalance, delivery).
Status new_handle(rd_kafka_type_t type, const KafkaConfig& config, KafkaClient::Handle& handle,
                  const std::function<void(rd_kafka_conf_t*)>& customize = {});

// `base` with what every consumer handle of kpipe's needs: a group id even
// when no group is joined, no automatic commit or offset store (kpipe
// commits only what it has written), and partition ends as events.
KafkaConfig consumer_config(const KafkaConfig& base, const std::string& group);

// A timeout as librdkafka takes it: an int of milliseconds, at least 1,
// since a request given 0 fails at once without asking the broker
// (--timeout 0) and a negative one would wait forever.
inline int timeout_ms(Millis t) { return static_cast<int>(std::clamp<Millis>(t, 1, INT32_MAX)); }

// Sets a default unless the user gave the property.
inline void set_default(KafkaConfig& config, const char* key, const char* value) {
  if (config.get(key) == nullptr) config.set(key, value);
}

struct ListGuard {
  rd_kafka_topic_partition_list_t* list;
  ~ListGuard() { rd_kafka_topic_partition_list_destroy(list); }
};

// rd_kafka_topic_partition_list_t <-> vectors.
rd_kafka_topic_partition_list_t* to_list(const std::vector<TopicPartition>& parts);
rd_kafka_topic_partition_list_t* to_list(const std::vector<PartitionOffset>& parts);

// "Connect to ipv4#127.0.0.1:9 failed: Connection refused (after 0ms ...)"
// -> "connection refused".
std::string connection_reason(const std::string& librdkafka_text);

}  // namespace kpipe
