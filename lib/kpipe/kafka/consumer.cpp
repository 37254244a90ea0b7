// The consumer: a group's member (either rebalance protocol, kpipe(7),
// MANY INSTANCES) or a reader of partitions assigned by hand, its batched
// polls, and the offsets it commits.
#include "kpipe/kafka/client.h"

#include "kpipe/kafka/internal.h"
#include "kpipe/kafka/topic.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

namespace kpipe {

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

Consumer::Consumer(const KafkaConfig& config, Reporter& reporter, Clock& clock)
    : KafkaClient(config, reporter, clock), state_(std::make_unique<State>()) {}

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
                                                     const std::string& group, Reporter& reporter,
                                                     Clock& clock) {
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
    std::unique_ptr<Consumer> consumer(new Consumer(config, reporter, clock));
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
        parts.push_back({list->elems[i].topic, list->elems[i].partition, LogStart::kUnset});
      Status s = state->on_assign ? state->on_assign(parts) : Status();
      if (!s.ok() && state->pending.ok()) state->pending = s;
      for (int i = 0; i < list->cnt; ++i)
        list->elems[i].offset = parts[static_cast<size_t>(i)].offset.offset();
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
  LogEvent event;
  RecordView& r = event.record;
  for (size_t i = 0; i < n; ++i) {
    rd_kafka_message_t* m = batch[i];
    std::string* name = &state_->topic_names[m->rkt];
    if (name->empty() && m->rkt != nullptr) *name = rd_kafka_topic_name(m->rkt);
    r.topic = *name;
    r.partition = m->partition;
    r.offset = m->offset;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      event.kind = LogEvent::Kind::kCaughtUp;
      event.resume = m->offset;
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
    event.kind = LogEvent::Kind::kRecord;
    event.resume = m->offset + 1;
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
  if (auto refused = authorization_error(err, g.list, offsets[0].topic,
                                         [this](const std::string& t) { return access(t); }))
    return *refused;
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
  if (auto refused = authorization_error(err, g.list, parts[0].topic,
                                         [this](const std::string& t) { return access(t); }))
    return *refused;
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

std::optional<int64_t> Consumer::lag_hint(const std::string& topic, int32_t partition) {
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
      Millis deadline = clock_.steady() + 10 * kSecond;
      for (;;) {
        rd_kafka_topic_partition_list_t* assigned = nullptr;
        bool empty = rd_kafka_assignment(handle_->rk, &assigned) != RD_KAFKA_RESP_ERR_NO_ERROR ||
                     assigned == nullptr || assigned->cnt == 0;
        if (assigned != nullptr) rd_kafka_topic_partition_list_destroy(assigned);
        if (empty || clock_.steady() >= deadline) break;
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

}  // namespace kpipe
