// The producer: records queued and their deliveries, a refused batch's
// records sent again alone so that only the one at fault is bad input,
// and the topic it writes to as a producer finds it.
#include "kpipe/kafka/client.h"

#include "kpipe/kafka/internal.h"
#include "kpipe/kafka/topic.h"

#include <algorithm>
#include <atomic>

namespace kpipe {

struct Producer::State {
  DeliveryHandler on_delivery;
  std::atomic<uint64_t> delivered{0};
  std::atomic<uint64_t> failed{0};
  std::string first_failure;
  // The broker judges a batch as a whole: when it refuses one as too large
  // or invalid, each of its records is sent again alone through this
  // handle (one record per batch), so that only the record at fault is
  // refused. Created on the first refusal.
  KafkaConfig solo_config;
  std::unique_ptr<KafkaClient::Handle> solo;
  bool solo_failed = false;  // could not be created: refusals stand
  Reporter* reporter = nullptr;
  Clock* clock = nullptr;  // the producer's, for its solo handle
  // The producer's ACL needs for a topic (KafkaClient::access).
  std::function<Access(const std::string&)> access;
};

namespace {

// A failed delivery: a data_error when the record itself was refused.
Error delivery_error(rd_kafka_t* rk, const rd_kafka_message_t* m, const Producer::State& state) {
  std::string topic = m->rkt != nullptr ? rd_kafka_topic_name(m->rkt) : "";
  if (auto refused = authorization_error(m->err, state.access(topic))) return *refused;
  // Records queued when the producer failed for good fail with it: those
  // written after it as __FATAL; those already queued are purged by
  // librdkafka (rd_kafka_set_fatal_error0), which says only 'Purged in
  // queue'. Either way the reason is the failure's (an idempotent
  // producer's id refused by the cluster's ACLs, say).
  char fatal[256];
  if (m->err == RD_KAFKA_RESP_ERR__FATAL || m->err == RD_KAFKA_RESP_ERR__PURGE_QUEUE ||
      m->err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT) {
    rd_kafka_resp_err_t fatal_code = rd_kafka_fatal_error(rk, fatal, sizeof fatal);
    if (auto refused = authorization_error(fatal_code, state.access(topic))) return *refused;
    if (fatal_code != RD_KAFKA_RESP_ERR_NO_ERROR)
      return failure("producer failed: {}", state.solo_config.redact(fatal));
  }
  if (m->err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION && m->rkt != nullptr)
    return data_error("topic '{}' has no partition {}", rd_kafka_topic_name(m->rkt), m->partition);
  if (is_record_fault(m->err))
    return data_error("the broker refused the record: {}", broker_reason(m->err));
  return failure("{}", rd_kafka_err2str(m->err));
}

void delivery_cb(rd_kafka_t* rk, const rd_kafka_message_t* m, void* opaque);

// Sends a record of a refused batch again, alone (Producer::State::solo).
// False when it is not to be retried, or cannot be.
bool retry_alone(Producer::State& state, const rd_kafka_message_t* m) {
  // An unknown partition is the record's own, found locally.
  if (!is_record_fault(m->err) || m->err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION ||
      m->rkt == nullptr)
    return false;
  if (!state.solo) {
    if (state.solo_failed) return false;
    state.solo = std::make_unique<KafkaClient::Handle>();
    state.solo->owner = &state;
    state.solo->reporter = state.reporter;
    state.solo->clock = state.clock;
    state.solo->config = &state.solo_config;
    Status made =
        new_handle(RD_KAFKA_PRODUCER, state.solo_config, *state.solo,
                   [](rd_kafka_conf_t* conf) { rd_kafka_conf_set_dr_msg_cb(conf, delivery_cb); });
    if (!made.ok()) {
      state.solo.reset();
      state.solo_failed = true;
      return false;
    }
  }
  rd_kafka_headers_t* hdrs = nullptr;
  rd_kafka_headers_t* copy = nullptr;
  if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR)
    copy = rd_kafka_headers_copy(hdrs);
  rd_kafka_timestamp_type_t ts_type;
  int64_t ts = rd_kafka_message_timestamp(m, &ts_type);
  rd_kafka_resp_err_t err = rd_kafka_producev(
      state.solo->rk, RD_KAFKA_V_TOPIC(rd_kafka_topic_name(m->rkt)),
      RD_KAFKA_V_PARTITION(m->partition), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
      RD_KAFKA_V_KEY(m->key, m->key_len), RD_KAFKA_V_VALUE(m->payload, m->len),
      RD_KAFKA_V_HEADERS(copy),
      RD_KAFKA_V_TIMESTAMP(ts_type == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? 0 : ts),
      RD_KAFKA_V_OPAQUE(m->_private), RD_KAFKA_V_END);
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return true;
  if (copy != nullptr) rd_kafka_headers_destroy(copy);
  return false;
}

void delivery_cb(rd_kafka_t* rk, const rd_kafka_message_t* m, void* opaque) {
  auto* handle = static_cast<KafkaClient::Handle*>(opaque);
  auto* state = static_cast<Producer::State*>(handle->owner);
  auto tag = reinterpret_cast<uintptr_t>(m->_private);
  if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR && handle != state->solo.get() && retry_alone(*state, m))
    return;
  if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    ++state->delivered;
    if (state->on_delivery) state->on_delivery(tag, nullptr);
    return;
  }
  ++state->failed;
  Error e = delivery_error(rk, m, *state);
  if (state->first_failure.empty()) state->first_failure = e.message;
  if (state->on_delivery) state->on_delivery(tag, &e);
}

}  // namespace

Producer::Producer(const KafkaConfig& config, Reporter& reporter, Clock& clock)
    : KafkaClient(config, reporter, clock), state_(std::make_unique<State>()) {}

Producer::~Producer() = default;

Expected<std::unique_ptr<Producer>> Producer::create(const KafkaConfig& base, Reporter& reporter,
                                                     Clock& clock) {
  KafkaConfig config = base;
  set_default(config, "client.id", "kpipe");
  set_default(config, "enable.idempotence", "true");
  set_default(config, "acks", "all");
  // Keyed records land where the Java client would put them.
  set_default(config, "partitioner", "murmur2_random");
  set_default(config, "linger.ms", "5");
  set_default(config, "batch.num.messages", "10000");
  std::unique_ptr<Producer> producer(new Producer(config, reporter, clock));
  producer->handle_->owner = producer->state_.get();
  // Writes its topic; under a transaction, commits a group's offsets too
  // (Read on the group, named by commit_transaction).
  producer->set_access(AclOperation::kWrite, AclOperation::kRead);
  Producer* self = producer.get();
  producer->state_->access = [self](const std::string& topic) { return self->access(topic); };
  KafkaConfig solo = config;
  solo.set("batch.num.messages", "1");
  solo.set("linger.ms", "0");
  solo.ignored.clear();  // warned of once, by the main handle
  producer->state_->solo_config = std::move(solo);
  producer->state_->reporter = &reporter;
  producer->state_->clock = &clock;
  // A record sent again alone would be outside the transaction: under one,
  // a refused batch fails it (kproduce(1), --transactional).
  producer->state_->solo_failed = config.get("transactional.id") != nullptr;
  KPIPE_TRY(new_handle(RD_KAFKA_PRODUCER, config, *producer->handle_, [](rd_kafka_conf_t* conf) {
    rd_kafka_conf_set_dr_msg_cb(conf, delivery_cb);
  }));
  KPIPE_TRY(producer->wait_until_reachable());
  return producer;
}

void Producer::set_delivery_handler(DeliveryHandler handler) {
  state_->on_delivery = std::move(handler);
}

Status Producer::write(const std::string& topic, int32_t partition,
                       std::optional<std::string_view> key, std::optional<std::string_view> value,
                       const std::vector<Header>& headers, int64_t timestamp, uint64_t tag) {
  for (;;) {
    rd_kafka_headers_t* hdrs = nullptr;
    if (!headers.empty()) {
      hdrs = rd_kafka_headers_new(headers.size());
      for (const Header& h : headers) {
        rd_kafka_header_add(hdrs, h.name.data(), static_cast<ssize_t>(h.name.size()),
                            h.value ? h.value->data() : nullptr,
                            h.value ? static_cast<ssize_t>(h.value->size()) : 0);
      }
    }
    rd_kafka_resp_err_t err = rd_kafka_producev(
        handle_->rk, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(partition),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_KEY((key ? key->data() : nullptr), (key ? key->size() : 0)),
        RD_KAFKA_V_VALUE((value ? const_cast<char*>(value->data()) : nullptr),
                         (value ? value->size() : 0)),
        RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_TIMESTAMP(timestamp),
        RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(static_cast<uintptr_t>(tag))), RD_KAFKA_V_END);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return {};
    if (hdrs != nullptr) rd_kafka_headers_destroy(hdrs);
    if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
      rd_kafka_poll(handle_->rk, 50);
      continue;
    }
    char fatal[256];
    rd_kafka_resp_err_t fatal_code = rd_kafka_fatal_error(handle_->rk, fatal, sizeof fatal);
    if (is_fenced(fatal_code)) return fenced_error(config_);
    if (auto refused = authorization_error(fatal_code, access(topic))) return *refused;
    if (auto refused = authorization_error(err, access(topic))) return *refused;
    if (fatal_code != RD_KAFKA_RESP_ERR_NO_ERROR)
      return failure("producer failed: {}", config_.redact(fatal));
    // The record's own faults, found before it is queued: bad input.
    if (err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION)
      return data_error("topic '{}' has no partition {}", topic, partition);
    if (err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE) {
      size_t size = (key ? key->size() : 0) + (value ? value->size() : 0);
      for (const Header& h : headers) size += h.name.size() + (h.value ? h.value->size() : 0);
      char limit[32] = "?";
      size_t limit_size = sizeof limit;
      rd_kafka_conf_get(rd_kafka_conf(handle_->rk), "message.max.bytes", limit, &limit_size);
      return data_error("record of {} bytes is larger than message.max.bytes ({})", size, limit);
    }
    return failure("cannot produce to '{}': {}", topic, rd_kafka_err2str(err));
  }
}

void Producer::poll(Millis wait) {
  rd_kafka_poll(handle_->rk, wait <= 0 ? 0 : timeout_ms(wait));
  if (state_->solo) rd_kafka_poll(state_->solo->rk, 0);
  watch_brokers();
}

Status Producer::flush(Millis timeout) {
  rd_kafka_resp_err_t err = rd_kafka_flush(handle_->rk, timeout_ms(timeout));
  // The main handle's reports may have sent records again alone: those
  // are waited for too.
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR && state_->solo)
    err = rd_kafka_flush(state_->solo->rk, timeout_ms(timeout));
  if (err == RD_KAFKA_RESP_ERR__TIMED_OUT) {
    watch_brokers();  // flush() is called again and again while waiting
    int left =
        rd_kafka_outq_len(handle_->rk) + (state_->solo ? rd_kafka_outq_len(state_->solo->rk) : 0);
    std::string seen = handle_->take_error();
    if (!seen.empty())
      return failure("{} records not delivered: cannot reach broker '{}': {}", left,
                     config_.brokers(), config_.redact(connection_reason(seen)));
    return failure("{} records not delivered within {}", left, format_duration(timeout));
  }
  return {};
}

Expected<std::vector<int32_t>> Producer::await_partitions(const std::string& topic) {
  KPIPE_TRY(check_topic_name(topic));
  char allow[8] = "";
  size_t allow_size = sizeof allow;
  rd_kafka_conf_get(rd_kafka_conf(handle_->rk), "allow.auto.create.topics", allow, &allow_size);
  bool may_create = std::string_view(allow) == "true";
  TopicAnswer answer;
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
  // A broker that creates the topic answers the first question before the
  // topic has partitions (KRaft: 'unknown topic'), then without leaders:
  // it is asked again until it is whole, or --timeout has passed.
  bool answered = false;
  ask_until(clock_, config_.timeout, [&](int left) {
    TopicAnswer now;
    rd_kafka_resp_err_t asked = ask_topic(handle_->rk, topic, left, &now);
    // The last question, with little time left, may time out: the answer
    // before it stands.
    if (asked != RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (!answered) err = asked;
      return false;
    }
    answered = true;
    answer = std::move(now);
    return (answer.missing() && may_create) || answer.leaderless;
  });
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return broker_error(fmt::format("cannot read metadata of topic '{}'", topic),
                        rd_kafka_err2str(err));
  // Leaderless partitions are produced to all the same: their records
  // wait in librdkafka's queue for a leader, as they would for one
  // elected later.
  if (auto refused = authorization_error(answer.err, access(topic))) return *refused;
  if (!answer.missing()) return std::move(answer.partitions);
  if (answer.err != RD_KAFKA_RESP_ERR_NO_ERROR &&
      answer.err != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
    return failure("topic '{}': {}", topic, rd_kafka_err2str(answer.err));
  if (!may_create)
    return failure("topic '{}' does not exist (allow.auto.create.topics is false)", topic);
  // The list of all topics never asks for a creation: what it says of
  // the topic is so.
  auto all = topics();
  if (all && std::binary_search(all->begin(), all->end(), topic))
    return failure("topic '{}' exists but has no partitions after {}", topic,
                   format_duration(config_.timeout));
  return failure("topic '{}' does not exist, and the broker did not create it within {}", topic,
                 format_duration(config_.timeout));
}

uint64_t Producer::delivered() const {
  return state_->delivered;
}
uint64_t Producer::failed() const {
  return state_->failed;
}
std::string Producer::first_failure() const {
  return state_->first_failure;
}

}  // namespace kpipe
