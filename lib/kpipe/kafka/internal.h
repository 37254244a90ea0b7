// Private to the kafka module (kafka/): the librdkafka handle behind
// KafkaClient, and what the module's files share (client.cpp, errors.cpp,
// metadata.cpp, consumer.cpp, producer.cpp, transaction.cpp, admin.cpp,
// mock_cluster.cpp). Nothing outside the module includes this file but
// its tests.
#pragma once

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "kpipe/kafka/acl.h"
#include "kpipe/kafka/broker_watch.h"
#include "kpipe/kafka/client.h"

namespace kpipe {

// Why librdkafka could not reach a broker, from its log line or error
// text, without the thread, the broker's name and the timing:
// "[thrd:b:9/bootstrap]: b:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed:
// Connection refused (after 0ms in state CONNECT)" -> "connection refused";
// "... Failed to resolve 'nohost:9092': Name or service not known (...)"
// -> "failed to resolve 'nohost:9092': Name or service not known".
// A SCRAM login refused as "invalid credentials" by a librdkafka before
// 2.6.1 (`librdkafka_version` as rd_kafka_version() gives it) also says
// that such a librdkafka cannot log in with SCRAM to Kafka 4: it repeats the
// client's nonce, which Kafka 4 refuses as a wrong password
// (confluentinc/librdkafka#4895; Debian 12 has 2.0.2).
std::string connection_reason(std::string_view librdkafka_text,
                              int librdkafka_version = rd_kafka_version());

struct KafkaClient::Handle {
  rd_kafka_t* rk = nullptr;
  Reporter* reporter = nullptr;
  // The client's configuration, whose secrets no message may quote; null
  // for the mock cluster's handle.
  const KafkaConfig* config = nullptr;
  std::mutex mu;
  // The latest reason librdkafka gave for failing to reach a broker
  // (refused, unresolvable, authentication, TLS): logged on its own
  // threads, read when a request gives up.
  std::string last_error;
  void* owner = nullptr;  // the client's own state, for callbacks
  // The client's clock (KafkaClient::clock_), for the time error_cb gives
  // the watch; null for the mock cluster's handle, which has no watch.
  Clock* clock = nullptr;
  // Fed by the error callback, which runs inside the client's polls.
  BrokerWatch watch{0};
  // Set by Consumer::subscribe; called on the polling thread.
  std::function<void(rd_kafka_resp_err_t, rd_kafka_topic_partition_list_t*)> rebalance;
  ~Handle() {
    if (rk != nullptr) rd_kafka_destroy(rk);
  }
  // A bare "Disconnected" says less than the failure before it (a TLS
  // handshake that failed ends so too): it never hides one.
  void note_error(std::string text) {
    std::lock_guard<std::mutex> lock(mu);
    if (!last_error.empty() && connection_reason(text) == "disconnected") return;
    last_error = std::move(text);
  }
  std::string take_error() {
    std::lock_guard<std::mutex> lock(mu);
    return last_error;
  }
  std::string redact(std::string_view text) const {
    return config != nullptr ? config->redact(text) : std::string(text);
  }
};

// The log callback of every handle, the mock cluster's too: a broker
// connection's failure is noted in the handle (Handle::note_error), and
// each line is a debug message.
void log_cb(const rd_kafka_t* rk, int level, const char* fac, const char* buf);

// The error callback of every client's handle. Runs inside the client's
// polls (rd_kafka_poll, the consumer's queue): brokers all down start the
// handle's BrokerWatch, a connection's failure is noted, an ACL's refusal
// is left to the call it fails; anything else is a warning.
void error_cb(rd_kafka_t* rk, int err, const char* reason, void* opaque);

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
inline int timeout_ms(Millis t) {
  return static_cast<int>(std::clamp<Millis>(t, 1, INT32_MAX));
}

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

// Gives every offset of `list` the same metadata (kept by the list, which
// frees it); none when empty.
void set_metadata(rd_kafka_topic_partition_list_t* list, const std::string& metadata);

// Whether a failed delivery or produce call is the record's own fault
// (too large, a partition the topic lacks, refused by the broker as
// invalid), so that the record is bad input, not a broken connection.
bool is_record_fault(rd_kafka_resp_err_t err);

// An authentication error that is no refusal: the connection went down in
// the middle of the handshake (a closing client's, or a broker's restart),
// which librdkafka reports as an authentication error all the same.
bool is_broken_handshake(std::string_view reason);

// What one metadata request says of one topic.
struct TopicAnswer {
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
  std::vector<int32_t> partitions;  // ascending
  bool leaderless = false;          // some partition has no leader yet

  // Not there, or only its name so far: a topic the broker creates
  // answers so until its partitions are made.
  bool missing() const {
    return err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
           err == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE ||
           (err == RD_KAFKA_RESP_ERR_NO_ERROR && partitions.empty());
  }
};

// Asks the cluster about `topic` alone. A producer's question asks the
// broker to create a missing topic, unless allow.auto.create.topics is
// false (a consumer's never does): the broker then creates it if its
// auto.create.topics.enable says so.
rd_kafka_resp_err_t ask_topic(rd_kafka_t* rk, const std::string& topic, int timeout,
                              TopicAnswer* out);

// Whether a partition's answer says only that its leader is away for now:
// an election after a broker crashed or stopped, a broker still loading
// its logs (kpipe(7), BROKER FAULTS). Asked again, the new leader answers.
bool is_leader_away(rd_kafka_resp_err_t err);

// Whether the error says that another producer of the transactional id
// has fenced this one; fenced_error() says so, naming the id.
bool is_fenced(rd_kafka_resp_err_t code);
Error fenced_error(const KafkaConfig& config);

// A broker's error as it follows a colon: "Broker: Message size too large"
// -> "message size too large".
std::string broker_reason(rd_kafka_resp_err_t err);

// Whether an answer about a group says only that its coordinator is out of
// reach for now: a broker that crashed, restarts, or moves the group
// (kpipe(7), BROKER FAULTS). Asked again later, the group answers.
bool is_coordinator_away(rd_kafka_resp_err_t err);

// Calls ask(left), `left` being the milliseconds until `timeout` has
// passed on `clock` (at least 1), again every 100 ms for as long as it
// returns true (its answer was a coordinator or a leader away) and time
// is left. librdkafka 2.0 gives up at once on a coordinator or leader
// that moves, where the same question asked again finds the new one.
void ask_until(Clock& clock, Millis timeout, const std::function<bool(int left)>& ask);

// How long a transactional call may take: at least a minute, since the
// first one on a new cluster waits for Kafka to create its transaction
// log, and a commit waits for every record of the transaction.
Millis transaction_timeout(const KafkaConfig& config);

// Runs one transactional call (given the milliseconds it may take) until
// it succeeds, fails for good, or transaction_timeout has passed on
// `clock` (transaction.cpp). `abortable` says whether the transaction
// must now be aborted.
Status run_transactional(KafkaClient::Handle& handle, Clock& clock, const KafkaConfig& config,
                         const Access& acl, std::string_view what,
                         const std::function<rd_kafka_error_t*(int)>& call,
                         bool* abortable = nullptr);

// The kind of resource an authorization error refuses (the broker's
// TOPIC_, GROUP_, TRANSACTIONAL_ID_ and CLUSTER_AUTHORIZATION_FAILED);
// nullopt for any other error.
std::optional<AclResourceType> refused_resource(rd_kafka_resp_err_t err);

// For an authorization error, the one line naming what `access` needed of
// the resource refused (acl.h); nullopt for any other error. Every place
// that meets a broker's error asks this first: a refusal is final, never
// retried until --timeout.
std::optional<Error> authorization_error(rd_kafka_resp_err_t err, const Access& access);

// The same for a request about the partitions of `list`, whose call
// answered `err`: a partition's refusal first, naming its topic (the
// call's own error is the first partition's refusal, and says no topic),
// then the call's, naming `topic`. `access` gives the needs for a topic.
std::optional<Error> authorization_error(rd_kafka_resp_err_t err,
                                         const rd_kafka_topic_partition_list_t* list,
                                         const std::string& topic,
                                         const std::function<Access(const std::string&)>& access);

}  // namespace kpipe
