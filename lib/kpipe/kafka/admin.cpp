// Reading consumer groups from outside, for klag: committed offsets
// (OffsetFetch), members (DescribeGroups, where the broker answers it) and
// the timestamps of the records the offsets point at.
#include "kpipe/kafka/client.h"

#include "kpipe/kafka/admin.h"
#include "kpipe/kafka/internal.h"

#include <algorithm>
#include <set>

namespace kpipe {

GroupReader::GroupReader(const KafkaConfig& config, Reporter& reporter, Clock& clock)
    : KafkaClient(config, reporter, clock) {}

GroupReader::~GroupReader() {
  // Never subscribed: closing leaves no group, it only stops the fetcher.
  if (handle_->rk != nullptr) rd_kafka_consumer_close(handle_->rk);
}

Expected<std::unique_ptr<GroupReader>> GroupReader::create(const KafkaConfig& base,
                                                           const std::string& group,
                                                           Reporter& reporter, Clock& clock) {
  // The group id only names whose offsets OffsetFetch returns: without
  // subscribe() the reader never joins, and it never commits.
  KafkaConfig config = consumer_config(base, group);
  // A committed offset already deleted by retention: the oldest record left.
  config.set("auto.offset.reset", "earliest");
  // Only the first record of each partition is wanted: small fetches, and
  // each partition is paused once its record is in. (queued.min.messages=1
  // would bound prefetching too, but with librdkafka 2.0.2 it sometimes
  // delays the first fetch by a second.)
  set_default(config, "fetch.message.max.bytes", "8192");
  set_default(config, "fetch.wait.max.ms", "10");
  std::unique_ptr<GroupReader> reader(new GroupReader(config, reporter, clock));
  reader->group_ = group;
  // Looks at the group and the topics from outside (klag): describes
  // them; the records it reads ask Read of their topic.
  reader->set_access(AclOperation::kDescribe, AclOperation::kDescribe);
  KPIPE_TRY(new_handle(RD_KAFKA_CONSUMER, config, *reader->handle_));
  KPIPE_TRY(reader->wait_until_reachable());
  rd_kafka_poll_set_consumer(reader->handle_->rk);
  return reader;
}

Expected<std::vector<std::optional<int64_t>>> GroupReader::committed(
    const std::vector<TopicPartition>& parts) {
  std::vector<std::optional<int64_t>> out(parts.size());
  if (parts.empty()) return out;
  KPIPE_TRY(check_group_access());
  ListGuard g{to_list(parts)};
  // A coordinator that moved or still loads (a broker just back from a
  // crash or a pause) is asked again until --timeout.
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
  ask_until(clock_, config_.timeout, [&](int left) {
    err = rd_kafka_committed(handle_->rk, g.list, left);
    bool away = is_coordinator_away(err);
    for (int i = 0; err == RD_KAFKA_RESP_ERR_NO_ERROR && i < g.list->cnt; ++i)
      away = away || is_coordinator_away(g.list->elems[i].err);
    return away;
  });
  if (auto refused = authorization_error(err, g.list, parts[0].topic,
                                         [this](const std::string& t) { return access(t); }))
    return *refused;
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return broker_error(fmt::format("cannot fetch the committed offsets of group '{}'", group_),
                        rd_kafka_err2str(err));
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto& e = g.list->elems[i];
    if (e.err != RD_KAFKA_RESP_ERR_NO_ERROR)
      return failure("cannot fetch the committed offset of group '{}' for {} [{}]: {}", group_,
                     e.topic, e.partition, rd_kafka_err2str(e.err));
    if (e.offset >= 0) out[i] = e.offset;
  }
  return out;
}

Expected<GroupDescription> GroupReader::describe() {
  GroupDescription d;
  const struct rd_kafka_group_list* list = nullptr;
  // The legacy call: it answers at once that a broker lacks ListGroups
  // (the mock cluster), where the admin API's DescribeConsumerGroups waits
  // out its whole timeout.
  rd_kafka_resp_err_t err =
      rd_kafka_list_groups(handle_->rk, group_.c_str(), &list, timeout_ms(config_.timeout));
  if (err == RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE) return d;
  if (auto refused = authorization_error(err, access())) return *refused;
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR__PARTIAL)
    return broker_error(fmt::format("cannot describe group '{}'", group_), rd_kafka_err2str(err));
  d.described = true;
  Status problem;
  bool listed = false;
  for (int i = 0; i < list->group_cnt; ++i) {
    const auto& g = list->groups[i];
    if (group_ != g.group) continue;
    listed = true;
    if (auto refused = authorization_error(g.err, access())) {
      problem = *refused;
      break;
    }
    if (g.err != RD_KAFKA_RESP_ERR_NO_ERROR && g.err != RD_KAFKA_RESP_ERR_GROUP_ID_NOT_FOUND) {
      problem = failure("cannot describe group '{}': {}", group_, rd_kafka_err2str(g.err));
      break;
    }
    d.state = g.state != nullptr ? g.state : "";
    d.members = g.member_cnt;
    d.exists = g.err == RD_KAFKA_RESP_ERR_NO_ERROR && d.state != "Dead";
  }
  rd_kafka_group_list_destroy(list);
  KPIPE_TRY(problem);
  // ListGroups leaves out the groups this principal may not describe.
  if (!listed) KPIPE_TRY(check_group_access());
  return d;
}

Expected<std::vector<std::optional<Millis>>> GroupReader::record_timestamps(
    const std::vector<PartitionOffset>& parts, std::vector<std::optional<int64_t>>* ends) {
  std::vector<std::optional<Millis>> out(parts.size());
  if (ends != nullptr) ends->assign(parts.size(), std::nullopt);
  if (parts.empty()) return out;
  std::map<TopicPartition, size_t> index;
  for (size_t i = 0; i < parts.size(); ++i) index[{parts[i].topic, parts[i].partition}] = i;
  ListGuard all{to_list(parts)};
  rd_kafka_t* rk = handle_->rk;
  // The pause of an earlier call (--watch) outlives its assignment.
  rd_kafka_resume_partitions(rk, all.list);
  rd_kafka_resp_err_t err = rd_kafka_assign(rk, all.list);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return failure("cannot assign partitions: {}", rd_kafka_err2str(err));
  rd_kafka_queue_t* queue = rd_kafka_queue_get_consumer(rk);
  std::vector<bool> done(parts.size(), false);
  size_t left = parts.size();
  std::vector<rd_kafka_message_t*> batch(1024);
  Millis deadline = clock_.steady() + config_.timeout;
  Status problem;
  TopicPartition key;
  while (left > 0 && problem.ok()) {
    Millis wait = deadline - clock_.steady();
    if (wait <= 0) break;
    // A batch read waits until the batch is full or the time is out: wait
    // for one record, then take whatever else has arrived without waiting.
    rd_kafka_message_t* first =
        rd_kafka_consume_queue(queue, timeout_ms(std::min<Millis>(wait, 100)));
    if (first == nullptr) continue;
    batch[0] = first;
    ssize_t more = rd_kafka_consume_batch_queue(queue, 0, batch.data() + 1, batch.size() - 1);
    ssize_t got = 1 + std::max<ssize_t>(more, 0);
    ListGuard finished{rd_kafka_topic_partition_list_new(static_cast<int>(got))};
    for (ssize_t k = 0; k < got; ++k) {
      rd_kafka_message_t* m = batch[static_cast<size_t>(k)];
      if (m->rkt != nullptr) {
        key.topic = rd_kafka_topic_name(m->rkt);
        key.partition = m->partition;
        auto it = index.find(key);
        if (it != index.end() && !done[it->second]) {
          size_t i = it->second;
          if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            rd_kafka_timestamp_type_t type;
            int64_t ts = rd_kafka_message_timestamp(m, &type);
            if (type != RD_KAFKA_TIMESTAMP_NOT_AVAILABLE) out[i] = ts;
          } else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            if (ends != nullptr) (*ends)[i] = m->offset;
          } else if (refused_resource(m->err) == AclResourceType::kTopic) {
            // The records' timestamps (a lag in seconds) are read: Read,
            // where the rest of a GroupReader's questions only describe.
            problem =
                not_authorized(AclNeed{AclOperation::kRead, AclResourceType::kTopic, key.topic});
          } else {
            reporter_.warning(
                fmt::format("{} [{}]: {}", key.topic, key.partition, rd_kafka_message_errstr(m)));
          }
          done[i] = true;
          --left;
          rd_kafka_topic_partition_list_add(finished.list, key.topic.c_str(), key.partition);
        }
      }
      rd_kafka_message_destroy(m);
    }
    // Stop fetching what is already known.
    if (finished.list->cnt > 0) rd_kafka_pause_partitions(rk, finished.list);
  }
  rd_kafka_queue_destroy(queue);
  rd_kafka_assign(rk, nullptr);
  KPIPE_TRY(problem);
  if (left > 0)
    reporter_.warning(fmt::format(
        "no record arrived within {} from {} partition{}: their lag in seconds is unknown",
        format_duration(config_.timeout), left, left == 1 ? "" : "s"));
  return out;
}

// --- GroupAdmin ------------------------------------------------------------

namespace {

// Kafka's protocol types, big-endian.
class WireReader {
 public:
  explicit WireReader(std::string_view bytes) : bytes_(bytes) {}
  bool int16(int16_t& v) { return fixed(v); }
  bool int32(int32_t& v) { return fixed(v); }
  bool string(std::string& v) {
    int16_t n = 0;
    if (!int16(n) || n < 0 || static_cast<size_t>(n) > bytes_.size() - at_) return false;
    v.assign(bytes_.substr(at_, static_cast<size_t>(n)));
    at_ += static_cast<size_t>(n);
    return true;
  }

 private:
  template <typename T>
  bool fixed(T& v) {
    if (bytes_.size() - at_ < sizeof(T)) return false;
    uint64_t u = 0;
    for (size_t i = 0; i < sizeof(T); ++i)
      u = (u << 8) | static_cast<unsigned char>(bytes_[at_ + i]);
    at_ += sizeof(T);
    v = static_cast<T>(u);
    return true;
  }
  std::string_view bytes_;
  size_t at_ = 0;
};

}  // namespace

std::optional<std::vector<TopicPartition>> parse_consumer_assignment(std::string_view bytes) {
  // Version, [Topic Partitions], UserData: the user data is the assignor's
  // own (the sticky assignors' generation) and says nothing of partitions.
  WireReader in(bytes);
  int16_t version = 0;
  int32_t topics = 0;
  if (!in.int16(version) || version < 0 || !in.int32(topics)) return std::nullopt;
  std::vector<TopicPartition> out;
  for (int32_t t = 0; t < topics; ++t) {
    std::string topic;
    int32_t count = 0;
    if (!in.string(topic) || !in.int32(count)) return std::nullopt;
    for (int32_t k = 0; k < count; ++k) {
      int32_t p = 0;
      if (!in.int32(p)) return std::nullopt;
      out.push_back({topic, p});
    }
  }
  return out;
}

GroupAdmin::GroupAdmin(const KafkaConfig& config, Reporter& reporter, Clock& clock)
    : KafkaClient(config, reporter, clock) {}

GroupAdmin::~GroupAdmin() {
  // Never subscribed: closing leaves no group.
  if (handle_->rk != nullptr) rd_kafka_consumer_close(handle_->rk);
}

Expected<std::unique_ptr<GroupAdmin>> GroupAdmin::create(const KafkaConfig& base,
                                                         Reporter& reporter, Clock& clock) {
  // A consumer handle, as GroupReader's: the properties users give klag
  // for its readers then apply without a producer's warnings.
  KafkaConfig config = consumer_config(base, "");
  std::unique_ptr<GroupAdmin> admin(new GroupAdmin(config, reporter, clock));
  admin->set_access(AclOperation::kDescribe, AclOperation::kDescribe);
  KPIPE_TRY(new_handle(RD_KAFKA_CONSUMER, config, *admin->handle_));
  KPIPE_TRY(admin->wait_until_reachable());
  return admin;
}

Expected<GroupMembers> GroupAdmin::members(const std::string& group) {
  GroupMembers m;
  const struct rd_kafka_group_list* list = nullptr;
  // The legacy call, as GroupReader::describe(): librdkafka 2.0.2's
  // DescribeConsumerGroups waits out its whole timeout on a broker that
  // lacks it, where this one answers at once.
  rd_kafka_resp_err_t err =
      rd_kafka_list_groups(handle_->rk, group.c_str(), &list, timeout_ms(config_.timeout));
  if (err == RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE) return m;
  if (auto refused = authorization_error(err, access("", group))) return *refused;
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR__PARTIAL)
    return broker_error(fmt::format("cannot describe group '{}'", group), rd_kafka_err2str(err));
  m.described = true;
  std::set<TopicPartition> assigned;
  Status problem;
  for (int i = 0; i < list->group_cnt && problem.ok(); ++i) {
    const auto& g = list->groups[i];
    if (group != g.group || g.err == RD_KAFKA_RESP_ERR_GROUP_ID_NOT_FOUND) continue;
    if (auto refused = authorization_error(g.err, access("", group))) {
      problem = *refused;
      break;
    }
    if (g.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      problem = failure("cannot describe group '{}': {}", group, rd_kafka_err2str(g.err));
      break;
    }
    m.protocol_type = g.protocol_type != nullptr ? g.protocol_type : "";
    m.members = g.member_cnt;
    if (m.protocol_type != "consumer") continue;
    for (int k = 0; k < g.member_cnt; ++k) {
      const auto& member = g.members[k];
      if (member.member_assignment == nullptr || member.member_assignment_size <= 0) continue;
      auto parts = parse_consumer_assignment({static_cast<const char*>(member.member_assignment),
                                              static_cast<size_t>(member.member_assignment_size)});
      // A member mid-rebalance may hold none yet; one that is not
      // readable is left out rather than failing the whole answer.
      if (!parts) {
        reporter_.warning(fmt::format("group '{}': the assignment of member '{}' is unreadable",
                                      group, member.member_id));
        continue;
      }
      assigned.insert(parts->begin(), parts->end());
    }
  }
  rd_kafka_group_list_destroy(list);
  KPIPE_TRY(problem);
  m.assigned.assign(assigned.begin(), assigned.end());
  return m;
}

Expected<std::optional<std::vector<std::string>>> GroupAdmin::group_ids() {
  const struct rd_kafka_group_list* list = nullptr;
  rd_kafka_resp_err_t err =
      rd_kafka_list_groups(handle_->rk, nullptr, &list, timeout_ms(config_.timeout));
  if (err == RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE)
    return std::optional<std::vector<std::string>>();
  // Partial: some broker did not answer in time; its groups would be
  // missing without a word, so that is an error too.
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return broker_error("cannot list the consumer groups", rd_kafka_err2str(err));
  std::set<std::string> ids;
  for (int i = 0; i < list->group_cnt; ++i)
    if (list->groups[i].group != nullptr) ids.insert(list->groups[i].group);
  rd_kafka_group_list_destroy(list);
  return std::optional<std::vector<std::string>>(std::vector<std::string>(ids.begin(), ids.end()));
}

}  // namespace kpipe
