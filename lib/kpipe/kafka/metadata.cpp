// What a client asks the cluster about topics and partitions: metadata,
// offsets (ListOffsets: watermarks, offsets by time) and DeleteRecords.
#include "kpipe/kafka/client.h"

#include "kpipe/kafka/internal.h"
#include "kpipe/kafka/topic.h"

#include <algorithm>
#include <cstring>

namespace kpipe {

namespace {

// One metadata request about every topic: `each` sees each topic's answer.
rd_kafka_resp_err_t each_topic(rd_kafka_t* rk, int timeout,
                               const std::function<void(const rd_kafka_metadata_topic_t&)>& each) {
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 1, nullptr, &md, timeout);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return err;
  for (int i = 0; i < md->topic_cnt; ++i) each(md->topics[i]);
  rd_kafka_metadata_destroy(md);
  return RD_KAFKA_RESP_ERR_NO_ERROR;
}

}  // namespace

Expected<std::vector<std::string>> KafkaClient::topics() {
  std::vector<std::string> out;
  rd_kafka_resp_err_t err =
      each_topic(handle_->rk, timeout_ms(config_.timeout),
                 [&](const rd_kafka_metadata_topic_t& t) { out.emplace_back(t.topic); });
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return broker_error("cannot list topics", rd_kafka_err2str(err));
  std::sort(out.begin(), out.end());
  return out;
}

Expected<std::map<std::string, std::vector<int32_t>>> KafkaClient::topic_partitions() {
  std::map<std::string, std::vector<int32_t>> out;
  rd_kafka_resp_err_t err =
      each_topic(handle_->rk, timeout_ms(config_.timeout), [&](const rd_kafka_metadata_topic_t& t) {
        if (std::strncmp(t.topic, "__", 2) == 0 || t.partition_cnt == 0) return;
        auto& ids = out[t.topic];
        for (int p = 0; p < t.partition_cnt; ++p) ids.push_back(t.partitions[p].id);
        std::sort(ids.begin(), ids.end());
      });
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return broker_error("cannot list topics", rd_kafka_err2str(err));
  return out;
}

rd_kafka_resp_err_t ask_topic(rd_kafka_t* rk, const std::string& topic, int timeout,
                              TopicAnswer* out) {
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, rkt, &md, timeout);
  rd_kafka_topic_destroy(rkt);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return err;
  *out = TopicAnswer();
  for (int i = 0; i < md->topic_cnt; ++i) {
    if (topic != md->topics[i].topic) continue;
    out->err = md->topics[i].err;
    for (int p = 0; p < md->topics[i].partition_cnt; ++p) {
      out->partitions.push_back(md->topics[i].partitions[p].id);
      if (md->topics[i].partitions[p].leader < 0) out->leaderless = true;
    }
  }
  rd_kafka_metadata_destroy(md);
  std::sort(out->partitions.begin(), out->partitions.end());
  return RD_KAFKA_RESP_ERR_NO_ERROR;
}

Expected<std::vector<int32_t>> KafkaClient::partitions(const std::string& topic) {
  // Asked about a name it would refuse, Kafka answers with an error of its
  // own, and kbroker's mock creates the topic (for producers).
  KPIPE_TRY(check_topic_name(topic));
  TopicAnswer answer;
  rd_kafka_resp_err_t err = ask_topic(handle_->rk, topic, timeout_ms(config_.timeout), &answer);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return broker_error(fmt::format("cannot read metadata of topic '{}'", topic),
                        rd_kafka_err2str(err));
  if (auto refused = authorization_error(answer.err, access(topic))) return *refused;
  if (answer.err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
      (answer.err == RD_KAFKA_RESP_ERR_NO_ERROR && answer.partitions.empty()))
    return failure("topic '{}' does not exist", topic);
  if (answer.err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return failure("topic '{}': {}", topic, rd_kafka_err2str(answer.err));
  return std::move(answer.partitions);
}

Expected<std::optional<std::vector<int32_t>>> KafkaClient::existing_partitions(
    const std::string& topic) {
  KPIPE_TRY(check_topic_name(topic));
  auto all = topics();
  if (!all) return all.take_error();
  if (!std::binary_search(all->begin(), all->end(), topic)) {
    // The list leaves out the topics this principal may not describe:
    // asked by name, the cluster refuses such a topic, and the refusal
    // names the ACL (kpipe(7), SECURITY). Not asked when the question
    // would have the broker create the topic.
    const std::string* create = config_.get("allow.auto.create.topics");
    if (create == nullptr || *create != "true") {
      auto asked = partitions(topic);
      if (!asked && is_not_authorized(asked.error())) return asked.take_error();
    }
    return std::optional<std::vector<int32_t>>();
  }
  auto found = partitions(topic);
  if (!found) return found.take_error();
  return std::optional<std::vector<int32_t>>(std::move(*found));
}

namespace {

// One ListOffsets question; `away` says whether a failure was a leader
// away, worth asking again; `refused`, whether it was the cluster's ACLs
// (the error is then the final one); `timed_out`, whether no answer came
// within `timeout`.
Expected<std::vector<Millis>> list_offsets(rd_kafka_t* rk, const std::vector<TopicPartition>& parts,
                                           const std::vector<Millis>& times, int timeout,
                                           bool& away, bool& refused, bool& timed_out,
                                           const std::function<Access(const std::string&)>& acl) {
  ListGuard g{to_list(parts)};
  for (size_t i = 0; i < parts.size(); ++i) g.list->elems[i].offset = times[i];
  rd_kafka_resp_err_t err = rd_kafka_offsets_for_times(rk, g.list, timeout);
  away = is_leader_away(err);
  timed_out = err == RD_KAFKA_RESP_ERR__TIMED_OUT;
  refused = false;
  if (auto e =
          authorization_error(err, g.list, parts.empty() ? std::string() : parts[0].topic, acl)) {
    refused = true;
    return *e;
  }
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return failure("{}", rd_kafka_err2str(err));
  std::vector<Millis> out(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    // Found by name, not by index: nothing promises that the answer keeps
    // the list's order, and an offset read from the wrong partition would
    // make a reader stop short of the end or skip a partition.
    const rd_kafka_topic_partition_t* e =
        rd_kafka_topic_partition_list_find(g.list, parts[i].topic.c_str(), parts[i].partition);
    if (e == nullptr)
      return failure("{} [{}]: no offset in the broker's answer", parts[i].topic,
                     parts[i].partition);
    if (e->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      away = is_leader_away(e->err);
      return failure("{} [{}]: {}", parts[i].topic, parts[i].partition, rd_kafka_err2str(e->err));
    }
    out[i] = e->offset;
  }
  return out;
}

}  // namespace

Expected<std::vector<Millis>> KafkaClient::ask_offsets(const std::vector<TopicPartition>& parts,
                                                       const std::vector<Millis>& times,
                                                       std::string_view what) {
  Expected<std::vector<Millis>> found = std::vector<Millis>();
  bool waited = false;
  bool refused = false;
  ask_until(clock_, config_.timeout, [&](int left) {
    if (waited) {
      // librdkafka asks the leader its metadata cache names, and does not
      // look again on its own for minutes: refresh it (the topics it knows).
      // Briefly, so that the question after it still ends by --timeout.
      const rd_kafka_metadata_t* md = nullptr;
      if (rd_kafka_metadata(handle_->rk, 0, nullptr, &md, std::min(left, 500)) ==
          RD_KAFKA_RESP_ERR_NO_ERROR)
        rd_kafka_metadata_destroy(md);
    }
    bool away = false;
    bool timed_out = false;
    auto answer = list_offsets(handle_->rk, parts, times, left, away, refused, timed_out,
                               [this](const std::string& topic) { return access(topic); });
    // The question waits at most the time left: timed out after a leader
    // was away, it says only that the time is up, and the leader away is
    // still the cause to name.
    if (waited && timed_out) return false;
    found = std::move(answer);
    if (away && !waited)
      reporter_.info(fmt::format("{}: asking again for up to {}", found.error().message,
                                 format_duration(config_.timeout)));
    waited = waited || away;
    return away;
  });
  if (found || refused) return found;
  if (waited)
    return broker_error(what, fmt::format("{}, still after {}", found.error().message,
                                          format_duration(config_.timeout)));
  return broker_error(what, found.error().message);
}

Expected<std::vector<LogBounds>> KafkaClient::bounds(const std::vector<TopicPartition>& parts) {
  std::vector<LogBounds> out(parts.size());
  if (parts.empty()) return out;
  // ListOffsets with the special times -2 (earliest) and -1 (latest): one
  // request per leader for all partitions, where querying watermarks one
  // partition at a time would cost a round trip each.
  auto low = ask_offsets(parts, std::vector<Millis>(parts.size(), LogStart::kEarliest),
                         "cannot list offsets");
  if (!low) return low.take_error();
  auto high = ask_offsets(parts, std::vector<Millis>(parts.size(), LogStart::kLatest),
                          "cannot list offsets");
  if (!high) return high.take_error();
  for (size_t i = 0; i < parts.size(); ++i) {
    // A broker that answers without an offset (-1) would make a reader
    // take the partition for empty and skip it: say so instead.
    if ((*low)[i] < 0 || (*high)[i] < (*low)[i])
      return broker_error(
          "cannot list offsets",
          fmt::format("{} [{}]: the broker gave no usable offsets (earliest {}, latest {})",
                      parts[i].topic, parts[i].partition, (*low)[i], (*high)[i]));
    out[i] = {(*low)[i], (*high)[i]};
  }
  return out;
}

Expected<std::vector<Position>> KafkaClient::positions_at(const std::vector<TopicPartition>& parts,
                                                          const std::vector<Millis>& times) {
  auto found = ask_offsets(parts, times, "cannot look up offsets by time");
  if (!found) return found.take_error();
  std::vector<int64_t> out = *found;
  if (std::none_of(out.begin(), out.end(), [](int64_t o) { return o < 0; }))
    return std::vector<Position>(out.begin(), out.end());
  auto marks = bounds(parts);
  if (!marks) return marks.take_error();
  // "No record at or after T" is the broker's answer only if the last
  // record is older than T; otherwise it could not tell, and we search.
  std::vector<size_t> unsure;
  std::vector<PartitionOffset> last;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] >= 0) continue;
    out[i] = (*marks)[i].high;
    if ((*marks)[i].high > (*marks)[i].low) {
      unsure.push_back(i);
      last.push_back({parts[i].topic, parts[i].partition, (*marks)[i].high - 1});
    }
  }
  if (unsure.empty()) return std::vector<Position>(out.begin(), out.end());
  auto last_ts = timestamps_at(last);
  if (!last_ts) return last_ts.take_error();
  for (size_t k = 0; k < unsure.size(); ++k) {
    size_t i = unsure[k];
    if (!(*last_ts)[k] || *(*last_ts)[k] < times[i]) continue;
    int64_t lo = (*marks)[i].low, hi = (*marks)[i].high - 1;  // ts(hi) >= T
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      auto ts = timestamps_at({{parts[i].topic, parts[i].partition, mid}});
      if (!ts) return ts.take_error();
      if ((*ts)[0] && *(*ts)[0] >= times[i]) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    out[i] = lo;
  }
  return std::vector<Position>(out.begin(), out.end());
}

Expected<std::vector<std::optional<Millis>>> KafkaClient::timestamps_at(
    const std::vector<PartitionOffset>& at) {
  // A reader of its own: this client's assignment (if it consumes) stays
  // untouched.
  auto reader = GroupReader::create(config_, "", reporter_, clock_);
  if (!reader) return reader.take_error();
  return (*reader)->record_timestamps(at);
}

Status KafkaClient::delete_records(const std::vector<PartitionOffset>& before) {
  if (before.empty()) return {};
  rd_kafka_queue_t* queue = rd_kafka_queue_new(handle_->rk);
  struct QueueGuard {
    rd_kafka_queue_t* q;
    ~QueueGuard() { rd_kafka_queue_destroy(q); }
  } queue_guard{queue};
  ListGuard g{to_list(before)};
  rd_kafka_DeleteRecords_t* request = rd_kafka_DeleteRecords_new(g.list);
  rd_kafka_AdminOptions_t* options =
      rd_kafka_AdminOptions_new(handle_->rk, RD_KAFKA_ADMIN_OP_DELETERECORDS);
  char err[512];
  rd_kafka_AdminOptions_set_request_timeout(options, timeout_ms(config_.timeout), err, sizeof err);
  rd_kafka_AdminOptions_set_operation_timeout(options, timeout_ms(config_.timeout), err,
                                              sizeof err);
  rd_kafka_DeleteRecords(handle_->rk, &request, 1, options, queue);
  rd_kafka_DeleteRecords_destroy(request);
  rd_kafka_AdminOptions_destroy(options);
  rd_kafka_event_t* event = rd_kafka_queue_poll(queue, timeout_ms(config_.timeout) + 1000);
  if (event == nullptr) return broker_error("cannot delete records", "no answer in time");
  struct EventGuard {
    rd_kafka_event_t* e;
    ~EventGuard() { rd_kafka_event_destroy(e); }
  } event_guard{event};
  if (rd_kafka_event_error(event) != RD_KAFKA_RESP_ERR_NO_ERROR)
    return broker_error("cannot delete records", rd_kafka_event_error_string(event));
  const rd_kafka_DeleteRecords_result_t* result = rd_kafka_event_DeleteRecords_result(event);
  const rd_kafka_topic_partition_list_t* offsets =
      result != nullptr ? rd_kafka_DeleteRecords_result_offsets(result) : nullptr;
  if (offsets == nullptr) return failure("cannot delete records: no result");
  for (int i = 0; i < offsets->cnt; ++i) {
    const rd_kafka_topic_partition_t& e = offsets->elems[i];
    if (e.err == RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE)
      return failure("cannot delete records of '{}': the broker does not support DeleteRecords",
                     e.topic);
    if (refused_resource(e.err) == AclResourceType::kTopic)
      return not_authorized(AclNeed{AclOperation::kDelete, AclResourceType::kTopic, e.topic});
    if (e.err != RD_KAFKA_RESP_ERR_NO_ERROR)
      return failure("cannot delete records of {} [{}]: {}", e.topic, e.partition,
                     rd_kafka_err2str(e.err));
  }
  return {};
}

}  // namespace kpipe
