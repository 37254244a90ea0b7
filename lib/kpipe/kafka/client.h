// Kafka clients: the one module that uses librdkafka (kafka/). Handles
// are opaque here, so no other file sees librdkafka's headers.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kpipe/envelope.h"
#include "kpipe/kafka/acl.h"
#include "kpipe/kafka/config.h"
#include "kpipe/log.h"
#include "kpipe/partition.h"
#include "kpipe/report.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

// What both clients can ask the cluster. Every call is bounded by the
// configuration's timeout; an unreachable cluster is an error naming the
// brokers and the reason, not a hang. Its metadata is a log's (log.h).
class KafkaClient : public virtual LogMetadata {
 public:
  ~KafkaClient() override;

  Expected<std::vector<std::string>> topics();
  // The partitions of `topic`, ascending; an error if it does not exist.
  Expected<std::vector<int32_t>> partitions(const std::string& topic) override;
  // Looked up in the list of all topics: a metadata request naming the
  // topic would have the broker create it where the client allows
  // auto-creation (-X allow.auto.create.topics=true).
  Expected<std::optional<std::vector<int32_t>>> existing_partitions(
      const std::string& topic) override;
  // Every topic's partitions from one metadata request, internal topics
  // (__consumer_offsets, ...) left out.
  Expected<std::map<std::string, std::vector<int32_t>>> topic_partitions() override;
  // Low and high watermarks of many partitions, one request per leader.
  Expected<std::vector<LogBounds>> bounds(const std::vector<TopicPartition>& parts) override;
  // For each partition, the first offset whose timestamp is at or after the
  // given time; the high watermark when there is none. Brokers that cannot
  // look offsets up by time (librdkafka's mock, kbroker) are searched by
  // reading record timestamps: a binary search, which assumes timestamps
  // grow with offsets as they do for CreateTime from one producer.
  Expected<std::vector<Position>> positions_at(const std::vector<TopicPartition>& parts,
                                               const std::vector<Millis>& times) override;

  // The timestamp of the record at each offset (nullopt where there is no
  // record: past the end, or deleted), read with one small fetch per
  // partition through a short-lived consumer of its own.
  Expected<std::vector<std::optional<Millis>>> timestamps_at(
      const std::vector<PartitionOffset>& at) override;
  Millis timeout() const override { return config_.timeout; }
  // Deletes each partition's records before the given offset (Kafka's
  // DeleteRecords, what kafka-delete-records.sh does); kbroker's mock
  // cluster does not support it and says so.
  Status delete_records(const std::vector<PartitionOffset>& before);

  const KafkaConfig& config() const { return config_; }
  // Whether the cluster is librdkafka's mock (kbroker).
  bool is_mock_cluster();

  // What the caller means to do with topics and the group, named when the
  // cluster's ACLs refuse a request (kpipe(7), SECURITY). Each create()
  // sets it for what its client is for: a consumer reads (Read on its
  // topics and its group), a producer writes, klag's readers describe. A
  // caller that needs less says so: kcheckpoint sync --from-group only
  // describes the group, and the message then asks for no more than that.
  void set_access(AclOperation topic, AclOperation group);

  struct Handle;  // librdkafka's, behind the module's private header

 protected:
  KafkaClient(const KafkaConfig& config, Reporter& reporter, Clock& clock);
  // The ACLs a request about `topic` (and `group`, when it is not the
  // client's own) needs, for authorization_error (internal.h).
  Access access(const std::string& topic = {}, const std::string& group = {}) const;
  // Once, before the first request on the client's group: whether the
  // cluster refuses this principal the group. librdkafka looks up a
  // group's coordinator before OffsetFetch or OffsetCommit and, refused
  // (FindCoordinator: GROUP_AUTHORIZATION_FAILED), asks again until the
  // request times out, saying nothing: the refusal is said at once here.
  Status check_group_access();
  // An error saying why the cluster could not be reached, or `what` failed.
  Error broker_error(std::string_view what, std::string_view detail) const;
  Status wait_until_reachable();
  // Says (through the reporter) when the cluster has been out of reach for
  // the configuration's timeout, and when it is back: librdkafka itself
  // retries in silence. Called by each poll.
  void watch_brokers();
  // ListOffsets for `parts` at `times` (or the special -1 and -2), asked
  // again while a partition's leader is away, up to the timeout. A failure
  // is `what` failing (or the cluster out of reach, or a refusal).
  Expected<std::vector<Millis>> ask_offsets(const std::vector<TopicPartition>& parts,
                                            const std::vector<Millis>& times,
                                            std::string_view what);

  KafkaConfig config_;
  Reporter& reporter_;
  // kpipe's own waits and deadlines (asking again, the broker watch);
  // librdkafka's timeouts are its own.
  Clock& clock_;
  std::unique_ptr<Handle> handle_;
  AclOperation topic_operation_ = AclOperation::kDescribe;
  std::string group_;  // the consumer group the client uses; empty: none
  AclOperation group_operation_ = AclOperation::kDescribe;
  bool group_checked_ = false;
};

// A reader (log.h) of partitions assigned by hand, or a consumer group's
// member, committing the group's offsets.
class Consumer final : public KafkaClient,
                       public LogReader,
                       public GroupMembership,
                       public CommittedOffsets {
 public:
  // `group` empty: no consumer group (partitions are assigned by the
  // caller). Offsets are never committed automatically.
  static Expected<std::unique_ptr<Consumer>> create(const KafkaConfig& config,
                                                    const std::string& group, Reporter& reporter,
                                                    Clock& clock);
  ~Consumer() override;

  // Each partition from its offset, or LogStart::kEarliest or kLatest.
  Status assign(const std::vector<PartitionOffset>& parts) override;

  // With the cooperative-sticky assignor (partition.assignment.strategy),
  // the handlers see only the partitions that move, and the others are
  // read on through a rebalance. `lost` (RevokeHandler): no heartbeat
  // reached the coordinator in time.
  Status subscribe(const std::vector<std::string>& topics, AssignHandler on_assign,
                   RevokeHandler on_revoke) override;

  // A record's `resume` is its offset + 1; caught up, the partition's end
  // (past transaction markers). Kafka's partitions never close.
  Status poll(Millis timeout, size_t max_events, const EventHandler& handler) override;

  // The group refuses commits while it rebalances, and from a consumer it
  // no longer counts as a member: that is no error, since those partitions'
  // next owner reads the records again (at least once). `committed`, when
  // given, says whether the offsets were stored; a caller that gives it
  // also takes a coordinator out of reach for now (a broker crashed or
  // restarting) as a refusal, to commit again later, not as an error. `metadata` travels with
  // each offset (Kafka keeps up to offset.metadata.max.bytes, 4096 by
  // default) and comes back from committed().
  Status commit(const std::vector<PartitionOffset>& offsets, bool* committed = nullptr,
                const std::string& metadata = {}) override;
  // The group's committed offsets; nullopt where there is none. With
  // `metadata`, also each offset's metadata ("" where none).
  // `wait`: how long to wait for the answer (0: --timeout); a read_committed
  // consumer's answer waits while a transaction holds the offsets.
  Expected<std::vector<std::optional<int64_t>>> committed(
      const std::vector<TopicPartition>& parts, std::vector<std::string>* metadata = nullptr,
      Millis wait = 0) override;
  std::vector<TopicPartition> assignment() override;
  // Stops fetching these partitions (kconsume --until: a partition at its
  // end). Records already fetched may still arrive. An assignment made
  // anew starts unpaused.
  Status pause(const std::vector<TopicPartition>& parts) override;
  // The end (high watermark) of a partition as the last fetch saw it,
  // asking no broker: for a progress line. nullopt until it is known.
  std::optional<int64_t> lag_hint(const std::string& topic, int32_t partition) override;
  // This member of the group as librdkafka serializes it
  // (rd_kafka_consumer_group_metadata_write): the group, its generation,
  // the member id and group.instance.id, for a transactional producer in
  // another process to commit offsets as this member (KIP-447). Empty
  // without a group.
  std::string member() override;
  // Leaves the group (revoking first), so that the rest rebalance at once:
  // a static member (group.instance.id) too, which librdkafka's close
  // alone keeps in the group until its session times out.
  Status close() override;

  struct State;

 private:
  Consumer(const KafkaConfig& config, Reporter& reporter, Clock& clock);
  std::unique_ptr<State> state_;
};

// A writer (log.h), and Kafka's transactions.
class Producer final : public KafkaClient, public LogWriter, public LogTransactions {
 public:
  static Expected<std::unique_ptr<Producer>> create(const KafkaConfig& config, Reporter& reporter,
                                                    Clock& clock);
  ~Producer() override;

  // Called from flush()/poll()/write() once a record's fate is known: err
  // is null when the broker acknowledged it; a data_error when the record
  // itself was refused (too large, a partition the topic lacks, invalid),
  // which makes it bad input; a failure otherwise (the broker out of
  // reach, a timeout, authorization).
  void set_delivery_handler(DeliveryHandler handler) override;

  // Queues one record; waits (serving deliveries) while the local queue is
  // full. partition -1: the partitioner (murmur2, as the Java client) picks.
  // timestamp 0: now (librdkafka cannot produce a timestamp of 0). A
  // data_error when the record itself cannot be produced: too large for
  // message.max.bytes, or a partition the topic lacks.
  Status write(const std::string& topic, int32_t partition, std::optional<std::string_view> key,
               std::optional<std::string_view> value, const std::vector<Header>& headers,
               int64_t timestamp, uint64_t tag = 0) override;
  // Serves delivery reports, waiting up to `wait` for one.
  void poll(Millis wait = 0) override;
  // Waits for every queued record's delivery, up to `timeout`.
  Status flush(Millis timeout) override;

  // The partitions of `topic`, the topic this producer writes to, as
  // Kafka's producers find it: asked about a missing topic, the broker
  // creates it if its auto.create.topics.enable says so (and the
  // producer's allow.auto.create.topics, true by default, lets it be
  // asked), which is waited for, up to the configuration's timeout.
  // Otherwise an error that the topic does not exist, which is then so:
  // nothing created it.
  Expected<std::vector<int32_t>> await_partitions(const std::string& topic) override;

  // Transactions (kproduce --transactional), for a producer created with
  // a transactional.id. init_transactions() fences every earlier producer
  // of that id, aborting what it left open; a fenced producer's calls fail
  // from then on, naming the id. Each call waits at least a minute (or the
  // configuration's timeout) while the cluster calls its error retriable.
  Status init_transactions() override;
  Status begin_transaction() override;
  // Adds `offsets` (the next offsets to read) to the open transaction as
  // `group`'s committed offsets, each with `metadata`, and commits it with
  // every record produced since begin_transaction(). An error the cluster
  // calls abortable aborts the transaction first: none of its records is
  // ever visible to a read_committed consumer. `member`, when not empty,
  // is the consumer's Consumer::member(): the group's coordinator then
  // refuses the offsets when that member is no longer the group's at that
  // generation (a zombie instance, kpipe(7), MANY INSTANCES), and the error
  // says "fenced".
  Status commit_transaction(const std::vector<PartitionOffset>& offsets, const std::string& group,
                            const std::string& metadata, const std::string& member = {}) override;
  Status abort_transaction() override;

  uint64_t delivered() const override;
  uint64_t failed() const override;
  // The first delivery error, for the final message.
  std::string first_failure() const override;

  struct State;

 private:
  Producer(const KafkaConfig& config, Reporter& reporter, Clock& clock);
  std::unique_ptr<State> state_;
};

// Reads a consumer group from outside (admin.cpp): its committed offsets,
// its members, and the records its offsets point at. It never joins the
// group nor commits, so it causes no rebalance.
class GroupReader final : public KafkaClient, public GroupLag {
 public:
  // `group` empty: only the record timestamps and watermarks are read.
  static Expected<std::unique_ptr<GroupReader>> create(const KafkaConfig& config,
                                                       const std::string& group, Reporter& reporter,
                                                       Clock& clock);
  ~GroupReader() override;

  // The group's committed offsets, in one OffsetFetch; nullopt where
  // there is none (a group that does not exist has none anywhere).
  Expected<std::vector<std::optional<int64_t>>> committed(
      const std::vector<TopicPartition>& parts) override;
  Expected<GroupDescription> describe() override;
  // For each partition, the timestamp of the first record at or after its
  // offset: the partitions are read together, a small fetch each, and each
  // is paused once its first record has arrived. nullopt where none came
  // within the timeout. With `ends`, where the read found no record but
  // the partition's end, that end's offset (for a read_committed reader,
  // past transaction markers and aborted records); nullopt elsewhere.
  Expected<std::vector<std::optional<Millis>>> record_timestamps(
      const std::vector<PartitionOffset>& parts,
      std::vector<std::optional<int64_t>>* ends = nullptr) override;

 private:
  GroupReader(const KafkaConfig& config, Reporter& reporter, Clock& clock);
};

}  // namespace kpipe
