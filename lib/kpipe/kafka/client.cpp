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

// --- Consumer ---------------------------------------------------------------------

namespace {

// librdkafka before 2.2 stops fetching while the consumer queue holds
// queued.max.messages.kbytes and looks again only when its broker thread
// next wakes: a second later unless a request or a response wakes it
// sooner. A pipeline slower than the broker drains the queue in a fraction
// of that second and then waits, so the queue had to hold a second of
// records (64 MiB, about 200 MB of memory) to keep kconsume fast. Instead,
// once a queue that was at least half full is half drained, a small
// request to the partitions' leaders (ListOffsets for their end offsets)
// wakes their broker threads, which fetch again at once: the queue stays
// small and kconsume as fast. A consumer keeping up with its partitions
// never fills the queue and sends none. 2.2 has fetch.queue.backoff.ms.
class FetchNudger {
 public:
  // At most one nudge per interval; one always follows the last wanted.
  static constexpr std::chrono::milliseconds kInterval{10};

  FetchNudger(rd_kafka_t* rk, rd_kafka_queue_t* queue, int64_t queue_bytes)
      : rk_(rk),
        queue_(queue),
        half_bytes_(static_cast<double>(queue_bytes) / 2),
        thread_([this] { run(); }) {}
  ~FetchNudger() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }

  // After a batch of `records` records of `bytes` bytes in all.
  void consumed(size_t records, size_t bytes) {
    if (records == 0) return;
    double mean = static_cast<double>(bytes) / static_cast<double>(records);
    mean_bytes_ = mean_bytes_ == 0 ? mean : mean_bytes_ + (mean - mean_bytes_) / 8;
    auto left = static_cast<double>(rd_kafka_queue_length(queue_));
    if ((left + static_cast<double>(records)) * mean_bytes_ >= half_bytes_) armed_ = true;
    if (!armed_ || left * mean_bytes_ >= half_bytes_) return;
    armed_ = false;
    {
      std::lock_guard lock(mutex_);
      wanted_ = true;
    }
    wake_.notify_one();
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      wake_.wait(lock, [this] { return wanted_ || stop_; });
      if (stop_) break;
      wanted_ = false;
      lock.unlock();
      // The request wakes the leaders' broker threads as it is sent; its
      // answer (or its failure) does not matter.
      rd_kafka_topic_partition_list_t* list = nullptr;
      if (rd_kafka_assignment(rk_, &list) == RD_KAFKA_RESP_ERR_NO_ERROR && list != nullptr) {
        for (int i = 0; i < list->cnt; ++i) list->elems[i].offset = RD_KAFKA_OFFSET_END;
        if (list->cnt > 0) rd_kafka_offsets_for_times(rk_, list, 500);
        rd_kafka_topic_partition_list_destroy(list);
      }
      lock.lock();
      wake_.wait_for(lock, kInterval, [this] { return stop_; });
    }
  }

  rd_kafka_t* rk_;
  rd_kafka_queue_t* queue_;
  double half_bytes_;
  double mean_bytes_ = 0;  // per record, a moving mean
  bool armed_ = false;     // the queue was half full since the last nudge
  std::mutex mutex_;
  std::condition_variable wake_;
  bool wanted_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: it starts once the rest is made
};

// librdkafka 2.2 and later back off a full queue for fetch.queue.backoff.ms.
constexpr int kFetchQueueBackoffVersion = 0x020200ff;

}  // namespace

struct Consumer::State {
  Consumer* self = nullptr;
  AssignHandler on_assign;
  RevokeHandler on_revoke;
  Status pending;  // an error from a rebalance callback, returned by poll()
  bool subscribed = false;
  std::map<rd_kafka_topic_t*, std::string> topic_names;
  rd_kafka_queue_t* queue = nullptr;  // the consumer queue, for batch reads
  std::vector<rd_kafka_message_t*> batch;
  std::unique_ptr<FetchNudger> nudger;  // before librdkafka 2.2
  ~State() {
    nudger.reset();
    if (queue != nullptr) rd_kafka_queue_destroy(queue);
  }
};

namespace {

void rebalance_cb(rd_kafka_t* rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* list,
                  void* opaque) {
  auto* handle = static_cast<KafkaClient::Handle*>(opaque);
  if (handle->rebalance) {
    handle->rebalance(err, list);
    return;
  }
  rd_kafka_assign(rk, err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS ? list : nullptr);
}

}  // namespace

Consumer::Consumer(const KafkaConfig& config, Reporter& reporter)
    : KafkaClient(config, reporter), state_(std::make_unique<State>()) {}

Consumer::~Consumer() {
  state_->nudger.reset();
  if (state_->queue != nullptr) {
    rd_kafka_queue_destroy(state_->queue);
    state_->queue = nullptr;
  }
  // Leaving the group cleanly lets the others take over at once instead of
  // after session.timeout.ms.
  if (handle_->rk != nullptr) rd_kafka_consumer_close(handle_->rk);
}

Expected<std::unique_ptr<Consumer>> Consumer::create(const KafkaConfig& base,
                                                     const std::string& group, Reporter& reporter) {
  KafkaConfig config = consumer_config(base, group);
  set_default(config, "auto.offset.reset", "earliest");
  // With the consumer queue shared by every partition, librdkafka counts
  // queued.min.messages over all of them; the bound that matters is
  // queued.max.messages.kbytes: 16 MiB of payload, about 60 MB of memory
  // for records of 150 bytes, refilled at once (FetchNudger).
  set_default(config, "queued.min.messages", "1000000");
  set_default(config, "queued.max.messages.kbytes", "16384");
  if (rd_kafka_version() >= kFetchQueueBackoffVersion)
    set_default(config, "fetch.queue.backoff.ms", "10");
  set_default(config, "fetch.wait.max.ms", "100");
  // Larger fetches per partition: fewer round trips for a backlog.
  set_default(config, "fetch.message.max.bytes", "4194304");
  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<Consumer> consumer(new Consumer(config, reporter));
    // Reads its topics; in a group, joins it and commits to it (Read).
    consumer->group_ = group;
    consumer->set_access(AclOperation::kRead, AclOperation::kRead);
    KPIPE_TRY(new_handle(RD_KAFKA_CONSUMER, config, *consumer->handle_, [](rd_kafka_conf_t* conf) {
      rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
    }));
    KPIPE_TRY(consumer->wait_until_reachable());
    // librdkafka's mock (kbroker) holds a group's next rebalance for the
    // session timeout after its last member leaves, so a group restarted
    // at once would wait 45 s. Against the mock only, and unless the user
    // chose, the shortest session the mock's 3 s join delay allows makes
    // that wait a few seconds.
    // The mock also takes a member's leaving for every other member's
    // session lost when the cooperative protocol is used (librdkafka
    // 2.0.2): its members rebalance the eager way, all partitions at once.
    const std::string* assignor = config.get("partition.assignment.strategy");
    bool cooperative = assignor != nullptr && assignor->find("cooperative") != std::string::npos;
    bool session = base.get("session.timeout.ms") == nullptr;
    if (attempt == 0 && !group.empty() && (session || cooperative) && consumer->is_mock_cluster()) {
      if (session) {
        config.set("session.timeout.ms", "6000");
        config.set("heartbeat.interval.ms", "1000");
      }
      if (cooperative) config.set("partition.assignment.strategy", "range,roundrobin");
      continue;
    }
    rd_kafka_poll_set_consumer(consumer->handle_->rk);
    consumer->state_->queue = rd_kafka_queue_get_consumer(consumer->handle_->rk);
    if (rd_kafka_version() < kFetchQueueBackoffVersion) {
      int64_t kbytes = std::strtoll(config.get("queued.max.messages.kbytes")->c_str(), nullptr, 10);
      consumer->state_->nudger = std::make_unique<FetchNudger>(
          consumer->handle_->rk, consumer->state_->queue, kbytes * 1024);
    }
    return consumer;
  }
}

bool KafkaClient::is_mock_cluster() {
  char* id = rd_kafka_clusterid(handle_->rk, timeout_ms(config_.timeout));
  if (id == nullptr) return false;
  bool mock = std::string_view(id).starts_with("mockCluster");
  rd_kafka_mem_free(handle_->rk, id);
  return mock;
}

Status Consumer::assign(const std::vector<PartitionOffset>& parts) {
  ListGuard g{to_list(parts)};
  rd_kafka_resp_err_t err = rd_kafka_assign(handle_->rk, g.list);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return failure("cannot assign partitions: {}", rd_kafka_err2str(err));
  return {};
}

Status Consumer::subscribe(const std::vector<std::string>& topics, AssignHandler on_assign,
                           RevokeHandler on_revoke) {
  for (const auto& t : topics) KPIPE_TRY(check_topic_name(t));
  state_->on_assign = std::move(on_assign);
  state_->on_revoke = std::move(on_revoke);
  State* state = state_.get();
  rd_kafka_t* rk = handle_->rk;
  handle_->rebalance = [state, rk](rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* list) {
    // The cooperative protocol hands over only what moves: the list is
    // added to, or taken from, the assignment.
    bool cooperative = std::string_view(rd_kafka_rebalance_protocol(rk)) == "COOPERATIVE";
    auto keep = [&](rd_kafka_error_t* error) {
      if (error == nullptr) return;
      if (state->pending.ok())
        state->pending = failure("cannot change the assignment: {}", rd_kafka_error_string(error));
      rd_kafka_error_destroy(error);
    };
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
      std::vector<PartitionOffset> parts;
      for (int i = 0; i < list->cnt; ++i)
        parts.push_back({list->elems[i].topic, list->elems[i].partition, kOffsetInvalid});
      Status s = state->on_assign ? state->on_assign(parts) : Status();
      if (!s.ok() && state->pending.ok()) state->pending = s;
      for (int i = 0; i < list->cnt; ++i)
        list->elems[i].offset = parts[static_cast<size_t>(i)].offset;
      if (cooperative) {
        keep(rd_kafka_incremental_assign(rk, list));
      } else {
        rd_kafka_assign(rk, list);
      }
      return;
    }
    if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
      std::vector<TopicPartition> parts;
      for (int i = 0; i < list->cnt; ++i)
        parts.push_back({list->elems[i].topic, list->elems[i].partition});
      bool lost = rd_kafka_assignment_lost(rk) != 0;
      Status s = state->on_revoke ? state->on_revoke(parts, lost) : Status();
      if (!s.ok() && state->pending.ok()) state->pending = s;
      if (cooperative) {
        keep(rd_kafka_incremental_unassign(rk, list));
        return;
      }
    }
    if (cooperative) return;  // an error: librdkafka rejoins by itself
    rd_kafka_assign(rk, nullptr);
  };
  ListGuard g{rd_kafka_topic_partition_list_new(static_cast<int>(topics.size()))};
  for (const auto& t : topics)
    rd_kafka_topic_partition_list_add(g.list, t.c_str(), RD_KAFKA_PARTITION_UA);
  rd_kafka_resp_err_t err = rd_kafka_subscribe(handle_->rk, g.list);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return failure("cannot subscribe: {}", rd_kafka_err2str(err));
  state_->subscribed = true;
  return {};
}

Status Consumer::poll(Millis timeout, size_t max_events, const EventHandler& handler) {
  // Batches: one queue lock per batch instead of one per record.
  // A batch read waits until the batch is full or the timeout passes:
  // wait for one message only, then take what else is there at once.
  auto& batch = state_->batch;
  batch.resize(std::max<size_t>(1, std::min<size_t>(max_events, 4096)));
  size_t n = 0;
  // A zero timeout takes what has arrived without waiting (kconsume, while
  // its output is buffered); reading the queue asks no broker, so 0 is safe.
  int wait = timeout <= 0 ? 0 : timeout_ms(timeout);
  if (rd_kafka_message_t* first = rd_kafka_consume_queue(state_->queue, wait)) {
    batch[0] = first;
    n = 1;
    if (batch.size() > 1) {
      ssize_t more =
          rd_kafka_consume_batch_queue(state_->queue, 0, batch.data() + 1, batch.size() - 1);
      if (more > 0) n += static_cast<size_t>(more);
    }
  }
  struct BatchGuard {
    std::vector<rd_kafka_message_t*>& batch;
    size_t n;
    ~BatchGuard() {
      for (size_t i = 0; i < n; ++i) rd_kafka_message_destroy(batch[i]);
    }
  } guard{batch, n};
  if (state_->nudger != nullptr && n > 0) {
    size_t bytes = 0;
    for (size_t i = 0; i < n; ++i) bytes += batch[i]->len + batch[i]->key_len;
    state_->nudger->consumed(n, bytes);
  }
  if (!state_->pending.ok()) {
    Status s = state_->pending;
    state_->pending = Status();
    return s;
  }
  watch_brokers();
  ConsumerEvent event;
  RecordView& r = event.record;
  for (size_t i = 0; i < n; ++i) {
    rd_kafka_message_t* m = batch[i];
    std::string* name = &state_->topic_names[m->rkt];
    if (name->empty() && m->rkt != nullptr) *name = rd_kafka_topic_name(m->rkt);
    r.topic = *name;
    r.partition = m->partition;
    r.offset = m->offset;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      event.kind = ConsumerEvent::Kind::kEndOfPartition;
      KPIPE_TRY(handler(event));
      continue;
    }
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      // Without a group, librdkafka still looks up the coordinator of the
      // group id it was given only to allow assign() (consumer_config):
      // a refusal of that group is no refusal of anything kpipe does.
      if (m->err == RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED && group_.empty()) continue;
      if (auto refused = authorization_error(m->err, access(m->rkt != nullptr ? *name : "")))
        return *refused;
      std::string text = rd_kafka_message_errstr(m);
      if (m->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
          m->err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
          m->err == RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED ||
          m->err == RD_KAFKA_RESP_ERR__FATAL)
        return failure(
            "{}",
            config_.redact(m->rkt != nullptr ? fmt::format("topic '{}': {}", *name, text) : text));
      reporter_.warning(fmt::format("kafka: {}", config_.redact(text)));
      continue;
    }
    event.kind = ConsumerEvent::Kind::kRecord;
    rd_kafka_timestamp_type_t ts_type;
    int64_t ts = rd_kafka_message_timestamp(m, &ts_type);
    r.timestamp = ts_type == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? -1 : ts;
    if (m->key != nullptr) {
      r.key = std::string_view(static_cast<const char*>(m->key), m->key_len);
    } else {
      r.key.reset();
    }
    if (m->payload != nullptr) {
      r.value = std::string_view(static_cast<const char*>(m->payload), m->len);
    } else {
      r.value.reset();
    }
    r.headers.clear();
    rd_kafka_headers_t* hdrs = nullptr;
    if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      const char* hname;
      const void* hval;
      size_t hsize;
      for (size_t h = 0;
           rd_kafka_header_get_all(hdrs, h, &hname, &hval, &hsize) == RD_KAFKA_RESP_ERR_NO_ERROR;
           ++h) {
        Header header;
        header.name = hname;
        if (hval != nullptr) header.value = std::string_view(static_cast<const char*>(hval), hsize);
        r.headers.push_back(header);
      }
    }
    KPIPE_TRY(handler(event));
  }
  return {};
}

namespace {

// The group's answers to a member whose generation is over or about to be.
bool is_group_change(rd_kafka_resp_err_t err) {
  return err == RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS ||
         err == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION ||
         err == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID || err == RD_KAFKA_RESP_ERR__STATE;
}

// A caller that cannot try again later (no `committed` to be told) is
// told the coordinator's error.
bool is_commit_refused(rd_kafka_resp_err_t err, bool retried_later) {
  return is_group_change(err) || (retried_later && is_coordinator_away(err));
}

// Gives every offset of `list` the same metadata; none when empty.
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

}  // namespace

Status Consumer::commit(const std::vector<PartitionOffset>& offsets, bool* committed,
                        const std::string& metadata) {
  if (committed != nullptr) *committed = true;
  if (offsets.empty()) return {};
  KPIPE_TRY(check_group_access());
  ListGuard g{to_list(offsets)};
  set_metadata(g.list, metadata);
  rd_kafka_resp_err_t err = rd_kafka_commit(handle_->rk, g.list, 0);
  if (err == RD_KAFKA_RESP_ERR__NO_OFFSET) return {};
  // A partition's refusal names its topic; the call's, the first's.
  for (int i = 0; i < g.list->cnt; ++i)
    if (auto refused = authorization_error(g.list->elems[i].err, access(g.list->elems[i].topic)))
      return *refused;
  if (auto refused = authorization_error(err, access(offsets[0].topic))) return *refused;
  bool refused = is_commit_refused(err, committed != nullptr);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR && !refused)
    return failure("cannot commit offsets: {}", rd_kafka_err2str(err));
  for (int i = 0; i < g.list->cnt; ++i) {
    rd_kafka_resp_err_t e = g.list->elems[i].err;
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR) continue;
    if (is_commit_refused(e, committed != nullptr)) {
      refused = true;
      continue;
    }
    return failure("cannot commit offset of {} [{}]: {}", g.list->elems[i].topic,
                   g.list->elems[i].partition, rd_kafka_err2str(e));
  }
  if (refused && committed != nullptr) *committed = false;
  return {};
}

Expected<std::vector<std::optional<int64_t>>> Consumer::committed(
    const std::vector<TopicPartition>& parts, std::vector<std::string>* metadata, Millis wait) {
  std::vector<std::optional<int64_t>> out(parts.size());
  if (metadata != nullptr) metadata->assign(parts.size(), std::string());
  if (parts.empty()) return out;
  KPIPE_TRY(check_group_access());
  ListGuard g{to_list(parts)};
  rd_kafka_resp_err_t err =
      rd_kafka_committed(handle_->rk, g.list, timeout_ms(wait > 0 ? wait : config_.timeout));
  // The group's offsets of a topic it may not describe would read as none.
  for (int i = 0; i < g.list->cnt; ++i)
    if (auto refused = authorization_error(g.list->elems[i].err, access(g.list->elems[i].topic)))
      return *refused;
  if (auto refused = authorization_error(err, access(parts[0].topic))) return *refused;
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return broker_error("cannot fetch committed offsets", rd_kafka_err2str(err));
  for (size_t i = 0; i < parts.size(); ++i) {
    // By name, as in list_offsets: the answer's order is not promised.
    const rd_kafka_topic_partition_t* e =
        rd_kafka_topic_partition_list_find(g.list, parts[i].topic.c_str(), parts[i].partition);
    if (e == nullptr) continue;
    if (e->offset >= 0) out[i] = e->offset;
    if (metadata != nullptr && e->metadata != nullptr)
      (*metadata)[i].assign(static_cast<const char*>(e->metadata), e->metadata_size);
  }
  return out;
}

std::vector<TopicPartition> Consumer::assignment() {
  std::vector<TopicPartition> out;
  rd_kafka_topic_partition_list_t* list = nullptr;
  if (rd_kafka_assignment(handle_->rk, &list) != RD_KAFKA_RESP_ERR_NO_ERROR) return out;
  ListGuard g{list};
  for (int i = 0; i < list->cnt; ++i)
    out.push_back({list->elems[i].topic, list->elems[i].partition});
  return out;
}

std::optional<int64_t> Consumer::cached_end(const std::string& topic, int32_t partition) {
  int64_t low = 0, high = 0;
  if (rd_kafka_get_watermark_offsets(handle_->rk, topic.c_str(), partition, &low, &high) !=
          RD_KAFKA_RESP_ERR_NO_ERROR ||
      high < 0)
    return std::nullopt;
  return high;
}

Status Consumer::pause(const std::vector<TopicPartition>& parts) {
  if (parts.empty()) return {};
  ListGuard g{to_list(parts)};
  // A partition no longer assigned gets an error of its own in the list:
  // there is nothing to stop, so only the call's own error counts.
  rd_kafka_resp_err_t err = rd_kafka_pause_partitions(handle_->rk, g.list);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return failure("cannot pause partitions: {}", rd_kafka_err2str(err));
  return {};
}

std::string Consumer::member() {
  if (group_.empty()) return {};
  rd_kafka_consumer_group_metadata_t* cg = rd_kafka_consumer_group_metadata(handle_->rk);
  if (cg == nullptr) return {};
  void* buffer = nullptr;
  size_t size = 0;
  rd_kafka_error_t* error = rd_kafka_consumer_group_metadata_write(cg, &buffer, &size);
  rd_kafka_consumer_group_metadata_destroy(cg);
  std::string out;
  if (error != nullptr) {
    rd_kafka_error_destroy(error);
    return out;
  }
  out.assign(static_cast<const char*>(buffer), size);
  rd_kafka_mem_free(handle_->rk, buffer);
  return out;
}

Status Consumer::close() {
  // librdkafka's close keeps a static member (group.instance.id) in the
  // group, so that a restart within the session timeout gets its
  // partitions back without a rebalance (KIP-345); a member that ends its
  // work leaves, so that the others take its partitions at once: an
  // unsubscribe leaves the group as a static member too, once the
  // revocation it starts is served.
  if (!group_.empty() && config_.get("group.instance.id") != nullptr) {
    if (rd_kafka_unsubscribe(handle_->rk) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      for (;;) {
        rd_kafka_topic_partition_list_t* assigned = nullptr;
        bool empty = rd_kafka_assignment(handle_->rk, &assigned) != RD_KAFKA_RESP_ERR_NO_ERROR ||
                     assigned == nullptr || assigned->cnt == 0;
        if (assigned != nullptr) rd_kafka_topic_partition_list_destroy(assigned);
        if (empty || std::chrono::steady_clock::now() >= deadline) break;
        // Records that arrive now are left for the next owner.
        if (rd_kafka_message_t* m = rd_kafka_consumer_poll(handle_->rk, 100))
          rd_kafka_message_destroy(m);
      }
    }
  }
  rd_kafka_resp_err_t err = rd_kafka_consumer_close(handle_->rk);
  Status s = state_->pending;
  state_->pending = Status();
  if (!s.ok()) return s;
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return failure("cannot leave the group: {}", rd_kafka_err2str(err));
  return {};
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
