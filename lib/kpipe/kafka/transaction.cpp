// The transactional producer (kproduce --transactional, kpipe(7), EXACTLY
// ONCE INTO KAFKA): each call asked again while the cluster calls its
// error retriable, a fenced producer or group member said so, and an
// abortable error aborting the transaction.
#include "kpipe/kafka/client.h"

#include "kpipe/kafka/internal.h"

#include <algorithm>

namespace kpipe {

namespace {

struct ErrorGuard {
  rd_kafka_error_t* error;
  ~ErrorGuard() {
    if (error != nullptr) rd_kafka_error_destroy(error);
  }
};

}  // namespace

Millis transaction_timeout(const KafkaConfig& config) {
  return std::max<Millis>(config.timeout, 60 * kSecond);
}

Status run_transactional(KafkaClient::Handle& handle, Clock& clock, const KafkaConfig& config,
                         const Access& acl, std::string_view what,
                         const std::function<rd_kafka_error_t*(int)>& call, bool* abortable) {
  if (abortable != nullptr) *abortable = false;
  Millis limit = transaction_timeout(config);
  Status result;
  // librdkafka's calls wait inside; one that gave up at once with an error
  // it calls retriable is asked again, after ask_until's pause, not in a
  // tight loop. Each answer leaves what it would mean as the last one.
  ask_until(clock, limit, [&](int left) {
    ErrorGuard e{call(left)};
    result = {};
    if (abortable != nullptr) *abortable = false;
    if (e.error == nullptr) return false;
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
    if (is_fenced(code)) {
      result = fenced_error(config);
      return false;
    }
    // The group's coordinator refuses the offsets of a member it no longer
    // counts at that generation (KIP-447): an instance taken for dead,
    // whose partitions went to others (kpipe(7), MANY INSTANCES).
    if (code == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION ||
        code == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID ||
        code == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID) {
      if (abortable != nullptr) *abortable = rd_kafka_error_txn_requires_abort(e.error);
      result = failure(
          "fenced: the consumer group no longer counts this instance's member as it was when the "
          "checkpoint was taken ({}): the group moved its partitions on",
          reason);
      return false;
    }
    // Before the retries: librdkafka may call a refusal retriable (a
    // coordinator lookup refused), which would be asked again for a minute.
    if (auto refused = authorization_error(code, acl)) {
      if (abortable != nullptr) *abortable = rd_kafka_error_txn_requires_abort(e.error);
      result = *refused;
      return false;
    }
    bool retriable = rd_kafka_error_is_retriable(e.error);
    if (abortable != nullptr) *abortable = rd_kafka_error_txn_requires_abort(e.error);
    if (code == RD_KAFKA_RESP_ERR__TIMED_OUT || retriable) {
      std::string seen = handle.take_error();
      if (!seen.empty()) reason = config.redact(connection_reason(seen));
      result = failure("{} did not finish within {}: {}", what, format_duration(limit), reason);
    } else {
      result = failure("{}: {}", what, reason);
    }
    return retriable;
  });
  return result;
}

Status Producer::init_transactions() {
  return run_transactional(*handle_, clock_, config_, access(), "cannot start transactions",
                           [&](int t) { return rd_kafka_init_transactions(handle_->rk, t); });
}

Status Producer::begin_transaction() {
  return run_transactional(*handle_, clock_, config_, access(), "cannot begin a transaction",
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
        *handle_, clock_, config_, acl,
        fmt::format("cannot add the offsets of group '{}' to the transaction", group),
        [&](int t) { return rd_kafka_send_offsets_to_transaction(handle_->rk, g.list, cg, t); },
        &abortable);
    rd_kafka_consumer_group_metadata_destroy(cg);
  }
  if (s.ok())
    s = run_transactional(
        *handle_, clock_, config_, access(), "cannot commit the transaction",
        [&](int t) { return rd_kafka_commit_transaction(handle_->rk, t); }, &abortable);
  if (s.ok() || !abortable) return s;
  Status aborted = abort_transaction();
  if (!aborted.ok()) return s;
  return failure("{} (the transaction was aborted)", s.error().message);
}

Status Producer::abort_transaction() {
  return run_transactional(*handle_, clock_, config_, access(), "cannot abort the transaction",
                           [&](int t) { return rd_kafka_abort_transaction(handle_->rk, t); });
}

}  // namespace kpipe
