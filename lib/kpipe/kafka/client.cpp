#include "kpipe/kafka/client.h"

#include "kpipe/kafka/internal.h"
#include "kpipe/kafka/topic.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

namespace kpipe {

std::string kafka_library_version() {
  return rd_kafka_version_str();
}

// --- configuration ------------------------------------------------------------

void ask_until(Millis timeout, const std::function<bool(int left)>& ask) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (!ask(timeout_ms(left)) || std::chrono::steady_clock::now() >= deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

namespace {

Expected<rd_kafka_conf_t*> make_conf(const KafkaConfig& config, KafkaClient::Handle* handle) {
  if (handle->reporter != nullptr)
    for (const auto& k : config.ignored)
      handle->reporter->warning(fmt::format(
          "kafka: ignoring '{}' of '{}': librdkafka has no such property", k, config.file));
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char err[512];
  for (const auto& [k, v] : config.properties) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      std::string why = config.redact(err);
      // A secret's value is never quoted, however short (redact leaves
      // values under three characters, which would match too much), nor
      // a key that ran into its value ("sasl.passwordhunter2").
      if (is_secret_property(k)) {
        std::string shown = redact_property(k);
        for (size_t at = why.find(k); at != std::string::npos; at = why.find(k, at + shown.size()))
          why.replace(at, k.size(), shown);
        if (!v.empty())
          for (size_t at = why.find(v); at != std::string::npos; at = why.find(v, at + 3))
            why.replace(at, v.size(), "***");
      }
      return usage_error("kafka property '{}': {}", redact_property(k), why);
    }
  }
  rd_kafka_conf_set_opaque(conf, handle);
  rd_kafka_conf_set_log_cb(conf, log_cb);
  rd_kafka_conf_set_error_cb(conf, error_cb);
  return conf;
}

}  // namespace

Status new_handle(rd_kafka_type_t type, const KafkaConfig& config, KafkaClient::Handle& handle,
                  const std::function<void(rd_kafka_conf_t*)>& customize) {
  auto conf = make_conf(config, &handle);
  if (!conf) return conf.take_error();
  if (customize) customize(*conf);
  char err[512];
  handle.rk = rd_kafka_new(type, *conf, err, sizeof err);
  if (handle.rk == nullptr) {
    rd_kafka_conf_destroy(*conf);
    return usage_error("cannot create {}: {}", type == RD_KAFKA_PRODUCER ? "producer" : "consumer",
                       config.redact(err));
  }
  return {};
}

KafkaConfig consumer_config(const KafkaConfig& base, const std::string& group) {
  KafkaConfig config = base;
  set_default(config, "client.id", "kpipe");
  // librdkafka refuses assign() without a group id. Without a group the id
  // is never joined nor committed to: it only satisfies that check.
  config.set("group.id", group.empty() ? "kpipe-unjoined" : group);
  // kpipe decides what is committed, and when: only what was written.
  config.set("enable.auto.commit", "false");
  config.set("enable.auto.offset.store", "false");
  config.set("enable.partition.eof", "true");
  return config;
}

rd_kafka_topic_partition_list_t* to_list(const std::vector<TopicPartition>& parts) {
  auto* list = rd_kafka_topic_partition_list_new(static_cast<int>(parts.size()));
  for (const auto& p : parts) rd_kafka_topic_partition_list_add(list, p.topic.c_str(), p.partition);
  return list;
}

rd_kafka_topic_partition_list_t* to_list(const std::vector<PartitionOffset>& parts) {
  auto* list = rd_kafka_topic_partition_list_new(static_cast<int>(parts.size()));
  for (const auto& p : parts)
    rd_kafka_topic_partition_list_add(list, p.topic.c_str(), p.partition)->offset = p.offset;
  return list;
}

void set_metadata(rd_kafka_topic_partition_list_t* list, const std::string& metadata) {
  if (metadata.empty()) return;
  for (int i = 0; i < list->cnt; ++i) {
    // The list owns it: rd_kafka_topic_partition_list_destroy frees it.
    void* copy = std::malloc(metadata.size());
    std::memcpy(copy, metadata.data(), metadata.size());
    list->elems[i].metadata = copy;
    list->elems[i].metadata_size = metadata.size();
  }
}

// --- KafkaClient ----------------------------------------------------------------

KafkaClient::KafkaClient(const KafkaConfig& config, Reporter& reporter)
    : config_(config), reporter_(reporter), handle_(std::make_unique<Handle>()) {
  handle_->reporter = &reporter;
  handle_->config = &config_;
  handle_->watch = BrokerWatch(config_.timeout);
}

KafkaClient::~KafkaClient() = default;

void KafkaClient::set_access(AclOperation topic, AclOperation group) {
  topic_operation_ = topic;
  group_operation_ = group;
}

namespace {

// What DescribeGroups answers about `group` alone: GROUP_AUTHORIZATION_FAILED
// when this principal may not describe it, at once.
rd_kafka_resp_err_t group_refusal(rd_kafka_t* rk, const std::string& group, int timeout) {
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
  const char* groups[] = {group.c_str()};
  rd_kafka_AdminOptions_t* options =
      rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS);
  char err[512];
  rd_kafka_AdminOptions_set_request_timeout(options, timeout, err, sizeof err);
  rd_kafka_DescribeConsumerGroups(rk, groups, 1, options, queue);
  rd_kafka_AdminOptions_destroy(options);
  rd_kafka_event_t* event = rd_kafka_queue_poll(queue, timeout + 1000);
  rd_kafka_resp_err_t code = RD_KAFKA_RESP_ERR_NO_ERROR;
  if (event != nullptr) {
    const rd_kafka_DescribeConsumerGroups_result_t* result =
        rd_kafka_event_DescribeConsumerGroups_result(event);
    size_t count = 0;
    const rd_kafka_ConsumerGroupDescription_t** found =
        result != nullptr ? rd_kafka_DescribeConsumerGroups_result_groups(result, &count) : nullptr;
    if (count > 0) {
      const rd_kafka_error_t* e = rd_kafka_ConsumerGroupDescription_error(found[0]);
      if (e != nullptr) code = rd_kafka_error_code(e);
    }
    rd_kafka_event_destroy(event);
  }
  rd_kafka_queue_destroy(queue);
  return code;
}

}  // namespace

Status KafkaClient::check_group_access() {
  if (group_checked_ || group_.empty()) return {};
  group_checked_ = true;
  // The mock (kbroker) has no ACLs, and waits out the timeout of a
  // DescribeGroups it lacks.
  if (is_mock_cluster()) return {};
  // Briefly: a refusal comes back in a round trip; a cluster slow to
  // answer (a coordinator moving) is no refusal, and the request the
  // check precedes waits for it as before.
  int wait = std::min(timeout_ms(config_.timeout), 2000);
  if (auto refused = authorization_error(group_refusal(handle_->rk, group_, wait), access()))
    return *refused;
  return {};
}

Access KafkaClient::access(const std::string& topic, const std::string& group) const {
  Access a;
  if (!topic.empty()) a.topic = AclNeed{topic_operation_, AclResourceType::kTopic, topic};
  const std::string& g = group.empty() ? group_ : group;
  if (!g.empty()) a.group = AclNeed{group_operation_, AclResourceType::kGroup, g};
  if (const std::string* id = config_.get("transactional.id"))
    a.transactional_id = AclNeed{AclOperation::kWrite, AclResourceType::kTransactionalId, *id};
  // A producer's id (idempotence is on by default) is refused by the
  // cluster to a principal that may write no topic: from Kafka 2.8 on,
  // Write on a topic allows it (KIP-679), where IdempotentWrite on the
  // cluster was needed before.
  if (topic_operation_ == AclOperation::kWrite) a.cluster = a.topic;
  return a;
}

Error KafkaClient::broker_error(std::string_view what, std::string_view detail) const {
  std::string seen = handle_->take_error();
  if (!seen.empty())
    return failure("cannot reach broker '{}': {}", config_.brokers(),
                   config_.redact(connection_reason(seen)));
  return failure("{}: {}", what, config_.redact(detail));
}

namespace {

// Whether librdkafka has a broker connection up, without waiting for one:
// with none up, a metadata request fails at once (__TRANSPORT) instead of
// being sent; with one, it is sent, and its answer does not matter.
bool broker_up(rd_kafka_t* rk) {
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, nullptr, &md, 1);
  if (md != nullptr) rd_kafka_metadata_destroy(md);
  return err != RD_KAFKA_RESP_ERR__TRANSPORT;
}

}  // namespace

void KafkaClient::watch_brokers() {
  BrokerWatch& watch = handle_->watch;
  if (!watch.down()) return;
  Millis now = steady_millis();
  BrokerWatch::News news = watch.update(now, [this] { return broker_up(handle_->rk); });
  // Whole seconds: "for 10s", not "for 10s3ms".
  std::string down_for = format_duration((now - watch.since()) / kSecond * kSecond);
  if (news == BrokerWatch::News::kUnreachable) {
    std::string seen = handle_->take_error();
    std::string why = seen.empty() ? std::string() : ": " + config_.redact(connection_reason(seen));
    reporter_.warning(fmt::format("cannot reach broker '{}' for {}{}; still trying",
                                  config_.brokers(), down_for, why));
  } else if (news == BrokerWatch::News::kBack) {
    reporter_.warning(
        fmt::format("broker '{}' is reachable again after {}", config_.brokers(), down_for));
  }
}

Status KafkaClient::wait_until_reachable() {
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t err =
      rd_kafka_metadata(handle_->rk, 0, nullptr, &md, timeout_ms(config_.timeout));
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    rd_kafka_metadata_destroy(md);
    return {};
  }
  std::string seen = handle_->take_error();
  if (!seen.empty())
    return failure("cannot reach broker '{}': {}", config_.brokers(),
                   config_.redact(connection_reason(seen)));
  return failure("cannot reach broker '{}': no answer within {}", config_.brokers(),
                 format_duration(config_.timeout));
}

bool KafkaClient::is_mock_cluster() {
  char* id = rd_kafka_clusterid(handle_->rk, timeout_ms(config_.timeout));
  if (id == nullptr) return false;
  bool mock = std::string_view(id).starts_with("mockCluster");
  rd_kafka_mem_free(handle_->rk, id);
  return mock;
}

// --- Producer ---------------------------------------------------------------------

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
  // The producer's ACL needs for a topic (KafkaClient::access).
  std::function<Access(const std::string&)> access;
};

namespace {

// A failed delivery: a data_error when the record itself was refused.
Error delivery_error(rd_kafka_t* rk, const rd_kafka_message_t* m, const Producer::State& state) {
  std::string topic = m->rkt != nullptr ? rd_kafka_topic_name(m->rkt) : "";
  if (auto refused = authorization_error(m->err, state.access(topic))) return *refused;
  // Records queued when the producer failed for good fail with it.
  char fatal[256];
  if (m->err == RD_KAFKA_RESP_ERR__FATAL)
    if (auto refused =
            authorization_error(rd_kafka_fatal_error(rk, fatal, sizeof fatal), state.access(topic)))
      return *refused;
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

Producer::Producer(const KafkaConfig& config, Reporter& reporter)
    : KafkaClient(config, reporter), state_(std::make_unique<State>()) {}

Producer::~Producer() = default;

Expected<std::unique_ptr<Producer>> Producer::create(const KafkaConfig& base, Reporter& reporter) {
  KafkaConfig config = base;
  set_default(config, "client.id", "kpipe");
  set_default(config, "enable.idempotence", "true");
  set_default(config, "acks", "all");
  // Keyed records land where the Java client would put them.
  set_default(config, "partitioner", "murmur2_random");
  set_default(config, "linger.ms", "5");
  set_default(config, "batch.num.messages", "10000");
  std::unique_ptr<Producer> producer(new Producer(config, reporter));
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

Status Producer::produce(const std::string& topic, int32_t partition,
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

namespace {

struct ErrorGuard {
  rd_kafka_error_t* error;
  ~ErrorGuard() {
    if (error != nullptr) rd_kafka_error_destroy(error);
  }
};

// How long a transactional call may take: at least a minute, since the
// first one on a new cluster waits for Kafka to create its transaction
// log, and a commit waits for every record of the transaction.
Millis transaction_timeout(const KafkaConfig& config) {
  return std::max<Millis>(config.timeout, 60 * kSecond);
}

// Runs one transactional call (given the milliseconds it may take) until
// it succeeds, fails for good, or the time is up. `abortable` says whether
// the transaction must now be aborted.
Status run_transactional(KafkaClient::Handle& handle, const KafkaConfig& config, const Access& acl,
                         std::string_view what, const std::function<rd_kafka_error_t*(int)>& call,
                         bool* abortable = nullptr) {
  if (abortable != nullptr) *abortable = false;
  Millis limit = transaction_timeout(config);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(limit);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    ErrorGuard e{call(timeout_ms(left))};
    if (e.error == nullptr) return {};
    rd_kafka_resp_err_t code = rd_kafka_error_code(e.error);
    std::string reason = config.redact(rd_kafka_error_string(e.error));
    if (rd_kafka_error_is_fatal(e.error)) {
      char text[512] = "";
      rd_kafka_resp_err_t fatal = rd_kafka_fatal_error(handle.rk, text, sizeof text);
      if (fatal != RD_KAFKA_RESP_ERR_NO_ERROR) {
        code = fatal;
        reason = config.redact(text);
      }
    }
    if (is_fenced(code)) return fenced_error(config);
    // The group's coordinator refuses the offsets of a member it no longer
    // counts at that generation (KIP-447): an instance taken for dead,
    // whose partitions went to others (kpipe(7), MANY INSTANCES).
    if (code == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION ||
        code == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID ||
        code == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID) {
      if (abortable != nullptr) *abortable = rd_kafka_error_txn_requires_abort(e.error);
      return failure(
          "fenced: the consumer group no longer counts this instance's member as it was when the "
          "checkpoint was taken ({}): the group moved its partitions on",
          reason);
    }
    // Before the retries: librdkafka may call a refusal retriable (a
    // coordinator lookup refused), which would be asked again for a minute.
    if (auto refused = authorization_error(code, acl)) {
      if (abortable != nullptr) *abortable = rd_kafka_error_txn_requires_abort(e.error);
      return *refused;
    }
    if (rd_kafka_error_is_retriable(e.error) && std::chrono::steady_clock::now() < deadline) {
      // librdkafka's calls wait inside; one that gave up at once is not
      // asked again in a tight loop.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (abortable != nullptr) *abortable = rd_kafka_error_txn_requires_abort(e.error);
    if (code == RD_KAFKA_RESP_ERR__TIMED_OUT || rd_kafka_error_is_retriable(e.error)) {
      std::string seen = handle.take_error();
      if (!seen.empty()) reason = config.redact(connection_reason(seen));
      return failure("{} did not finish within {}: {}", what, format_duration(limit), reason);
    }
    return failure("{}: {}", what, reason);
  }
}

}  // namespace

Expected<std::vector<int32_t>> Producer::await_topic(const std::string& topic) {
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
  ask_until(config_.timeout, [&](int left) {
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

Status Producer::init_transactions() {
  return run_transactional(*handle_, config_, access(), "cannot start transactions",
                           [&](int t) { return rd_kafka_init_transactions(handle_->rk, t); });
}

Status Producer::begin_transaction() {
  return run_transactional(*handle_, config_, access(), "cannot begin a transaction",
                           [&](int) { return rd_kafka_begin_transaction(handle_->rk); });
}

Status Producer::commit_transaction(const std::vector<PartitionOffset>& offsets,
                                    const std::string& group, const std::string& metadata,
                                    const std::string& member) {
  bool abortable = false;
  Status s;
  if (!offsets.empty()) {
    ListGuard g{to_list(offsets)};
    set_metadata(g.list, metadata);
    rd_kafka_consumer_group_metadata_t* cg = nullptr;
    if (!member.empty()) {
      rd_kafka_error_t* error =
          rd_kafka_consumer_group_metadata_read(&cg, member.data(), member.size());
      if (error != nullptr) {
        Error e = failure("cannot read the group member of checkpoint offsets: {}",
                          rd_kafka_error_string(error));
        rd_kafka_error_destroy(error);
        return e;
      }
    } else {
      cg = rd_kafka_consumer_group_metadata_new(group.c_str());
    }
    // TxnOffsetCommit asks for Read on the group and on the offsets'
    // topics (the source's, which kproduce itself never reads); a refused
    // topic is not named in librdkafka's error, so the first one is.
    Access acl = access("", group);
    acl.topic = AclNeed{AclOperation::kRead, AclResourceType::kTopic, offsets[0].topic};
    s = run_transactional(
        *handle_, config_, acl,
        fmt::format("cannot add the offsets of group '{}' to the transaction", group),
        [&](int t) { return rd_kafka_send_offsets_to_transaction(handle_->rk, g.list, cg, t); },
        &abortable);
    rd_kafka_consumer_group_metadata_destroy(cg);
  }
  if (s.ok())
    s = run_transactional(
        *handle_, config_, access(), "cannot commit the transaction",
        [&](int t) { return rd_kafka_commit_transaction(handle_->rk, t); }, &abortable);
  if (s.ok() || !abortable) return s;
  Status aborted = abort_transaction();
  if (!aborted.ok()) return s;
  return failure("{} (the transaction was aborted)", s.error().message);
}

Status Producer::abort_transaction() {
  return run_transactional(*handle_, config_, access(), "cannot abort the transaction",
                           [&](int t) { return rd_kafka_abort_transaction(handle_->rk, t); });
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
