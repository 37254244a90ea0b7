// What every client shares: its librdkafka handle made from the
// configuration, the lists librdkafka takes, the ACLs a request needs,
// whether the cluster can be reached, and asking again while a
// coordinator or a leader is away. The clients themselves are in
// consumer.cpp, producer.cpp (transaction.cpp) and admin.cpp (GroupReader,
// GroupAdmin); what they ask of topics is in metadata.cpp, and what
// librdkafka's errors mean in errors.cpp.
#include "kpipe/kafka/client.h"
#include "kpipe/kafka/kafka_log.h"

#include "kpipe/kafka/internal.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace kpipe {

std::string kafka_library_version() {
  return rd_kafka_version_str();
}

// --- configuration ------------------------------------------------------------

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
    rd_kafka_topic_partition_list_add(list, p.topic.c_str(), p.partition)->offset =
        p.offset.offset();
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

KafkaClient::KafkaClient(const KafkaConfig& config, Reporter& reporter, Clock& clock)
    : config_(config), reporter_(reporter), clock_(clock), handle_(std::make_unique<Handle>()) {
  handle_->reporter = &reporter;
  handle_->clock = &clock;
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
  Millis now = clock_.steady();
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

void ask_until(Clock& clock, Millis timeout, const std::function<bool(int left)>& ask) {
  Millis deadline = clock.steady() + timeout;
  for (;;) {
    if (!ask(timeout_ms(deadline - clock.steady())) || clock.steady() >= deadline) return;
    clock.sleep_for(100);
  }
}

}  // namespace kpipe
