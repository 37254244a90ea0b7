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
#include "kpipe/partition.h"
#include "kpipe/report.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

// librdkafka's special offsets, for the few callers that speak of them.
constexpr int64_t kOffsetBeginning = -2;
constexpr int64_t kOffsetEnd = -1;

struct Watermarks {
  int64_t low = 0;
  int64_t high = 0;
};

std::string kafka_library_version();

// What both clients can ask the cluster. Every call is bounded by the
// configuration's timeout; an unreachable cluster is an error naming the
// brokers and the reason, not a hang.
class KafkaClient {
 public:
  virtual ~KafkaClient();

  Expected<std::vector<std::string>> topics();
  // The partitions of `topic`, ascending; an error if it does not exist.
  Expected<std::vector<int32_t>> partitions(const std::string& topic);
  // Every topic's partitions from one metadata request, internal topics
  // (__consumer_offsets, ...) left out.
  Expected<std::map<std::string, std::vector<int32_t>>> topic_partitions();
  // Low and high watermarks of many partitions, one request per leader.
  Expected<std::vector<Watermarks>> watermarks(const std::vector<TopicPartition>& parts);
  // For each partition, the first offset whose timestamp is at or after the
  // given time; the high watermark when there is none. Brokers that cannot
  // look offsets up by time (librdkafka's mock, kbroker) are searched by
  // reading record timestamps: a binary search, which assumes timestamps
  // grow with offsets as they do for CreateTime from one producer.
  Expected<std::vector<int64_t>> offsets_for_times(const std::vector<TopicPartition>& parts,
                                                   const std::vector<Millis>& times);

  // The timestamp of the record at each offset (nullopt where there is no
  // record: past the end, or deleted), read with one small fetch per
  // partition through a short-lived consumer of its own.
  Expected<std::vector<std::optional<Millis>>> timestamps_at(
      const std::vector<PartitionOffset>& at);
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

struct ConsumerEvent {
  enum class Kind { kRecord, kEndOfPartition };
  Kind kind = Kind::kRecord;
  RecordView record;  // kRecord: the record; kEndOfPartition: topic, partition and offset
};

class Consumer final : public KafkaClient {
 public:
  // `group` empty: no consumer group (partitions are assigned by the
  // caller). Offsets are never committed automatically.
  static Expected<std::unique_ptr<Consumer>> create(const KafkaConfig& config,
                                                    const std::string& group, Reporter& reporter,
                                                    Clock& clock);
  ~Consumer() override;

  Status assign(const std::vector<PartitionOffset>& parts);

  // Called inside poll() when the group assigns partitions: fill in the
  // offset to start each at (all start as kOffsetInvalid).
  using AssignHandler = std::function<Status(std::vector<PartitionOffset>& parts)>;
  // Called inside poll() before partitions are taken away: the last moment
  // to commit what was processed. `lost`: the group gave them to another
  // member already (no heartbeat reached the coordinator in time), so nothing may
  // be committed for them any more.
  using RevokeHandler = std::function<Status(const std::vector<TopicPartition>& parts, bool lost)>;
  // With the cooperative-sticky assignor (partition.assignment.strategy),
  // the handlers see only the partitions that move, and the others are
  // read on through a rebalance.
  Status subscribe(const std::vector<std::string>& topics, AssignHandler on_assign,
                   RevokeHandler on_revoke);

  // Waits up to `timeout` for records; passes each record, and each
  // partition reaching its end, to `handler`, up to `max_events`. Stops
  // early when the handler returns an error.
  using EventHandler = std::function<Status(const ConsumerEvent&)>;
  Status poll(Millis timeout, size_t max_events, const EventHandler& handler);

  // The group refuses commits while it rebalances, and from a consumer it
  // no longer counts as a member: that is no error, since those partitions'
  // next owner reads the records again (at least once). `committed`, when
  // given, says whether the offsets were stored; a caller that gives it
  // also takes a coordinator out of reach for now (a broker crashed or
  // restarting) as a refusal, to commit again later, not as an error. `metadata` travels with
  // each offset (Kafka keeps up to offset.metadata.max.bytes, 4096 by
  // default) and comes back from committed().
  Status commit(const std::vector<PartitionOffset>& offsets, bool* committed = nullptr,
                const std::string& metadata = {});
  // The group's committed offsets; nullopt where there is none. With
  // `metadata`, also each offset's metadata ("" where none).
  // `wait`: how long to wait for the answer (0: --timeout); a read_committed
  // consumer's answer waits while a transaction holds the offsets.
  Expected<std::vector<std::optional<int64_t>>> committed(
      const std::vector<TopicPartition>& parts, std::vector<std::string>* metadata = nullptr,
      Millis wait = 0);
  std::vector<TopicPartition> assignment();
  // Stops fetching these partitions (kconsume --until: a partition at its
  // end). Records already fetched may still arrive. An assignment made
  // anew starts unpaused.
  Status pause(const std::vector<TopicPartition>& parts);
  // The end (high watermark) of a partition as the last fetch saw it,
  // asking no broker: for a progress line. nullopt until it is known.
  std::optional<int64_t> cached_end(const std::string& topic, int32_t partition);
  // This member of the group as librdkafka serializes it
  // (rd_kafka_consumer_group_metadata_write): the group, its generation,
  // the member id and group.instance.id, for a transactional producer in
  // another process to commit offsets as this member (KIP-447). Empty
  // without a group.
  std::string member();
  // Leaves the group (revoking first), so that the rest rebalance at once:
  // a static member (group.instance.id) too, which librdkafka's close
  // alone keeps in the group until its session times out.
  Status close();

  static constexpr int64_t kOffsetInvalid = -1001;

  struct State;

 private:
  Consumer(const KafkaConfig& config, Reporter& reporter, Clock& clock);
  std::unique_ptr<State> state_;
};

class Producer final : public KafkaClient {
 public:
  static Expected<std::unique_ptr<Producer>> create(const KafkaConfig& config, Reporter& reporter,
                                                    Clock& clock);
  ~Producer() override;

  // Called from flush()/poll()/produce() once a record's fate is known: err
  // is null when the broker acknowledged it; a data_error when the record
  // itself was refused (too large, a partition the topic lacks, invalid),
  // which makes it bad input; a failure otherwise (the broker out of
  // reach, a timeout, authorization).
  using DeliveryHandler = std::function<void(uint64_t tag, const Error* err)>;
  void set_delivery_handler(DeliveryHandler handler);

  // Queues one record; waits (serving deliveries) while the local queue is
  // full. partition -1: the partitioner (murmur2, as the Java client) picks.
  // timestamp 0: now (librdkafka cannot produce a timestamp of 0). A
  // data_error when the record itself cannot be produced: too large for
  // message.max.bytes, or a partition the topic lacks.
  Status produce(const std::string& topic, int32_t partition, std::optional<std::string_view> key,
                 std::optional<std::string_view> value, const std::vector<Header>& headers,
                 int64_t timestamp, uint64_t tag = 0);
  // Serves delivery reports, waiting up to `wait` for one.
  void poll(Millis wait = 0);
  // Waits for every queued record's delivery, up to `timeout`.
  Status flush(Millis timeout);

  // The partitions of `topic`, the topic this producer writes to, as
  // Kafka's producers find it: asked about a missing topic, the broker
  // creates it if its auto.create.topics.enable says so (and the
  // producer's allow.auto.create.topics, true by default, lets it be
  // asked), which is waited for, up to the configuration's timeout.
  // Otherwise an error that the topic does not exist, which is then so:
  // nothing created it.
  Expected<std::vector<int32_t>> await_topic(const std::string& topic);

  // Transactions (kproduce --transactional), for a producer created with
  // a transactional.id. init_transactions() fences every earlier producer
  // of that id, aborting what it left open; a fenced producer's calls fail
  // from then on, naming the id. Each call waits at least a minute (or the
  // configuration's timeout) while the cluster calls its error retriable.
  Status init_transactions();
  Status begin_transaction();
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
                            const std::string& metadata, const std::string& member = {});
  Status abort_transaction();

  uint64_t delivered() const;
  uint64_t failed() const;
  // The first delivery error, for the final message.
  std::string first_failure() const;

  struct State;

 private:
  Producer(const KafkaConfig& config, Reporter& reporter, Clock& clock);
  std::unique_ptr<State> state_;
};

// What the cluster says of a consumer group (DescribeGroups).
struct GroupDescription {
  // False when the broker cannot describe groups: librdkafka's mock
  // cluster (kbroker) answers neither ListGroups nor DescribeGroups.
  bool described = false;
  bool exists = false;
  std::string state;  // "Stable", "Empty", "PreparingRebalance", ...
  int64_t members = 0;
};

// Reads a consumer group from outside (kafka_admin.cpp): its committed
// offsets, its members, and the records its offsets point at. It never
// joins the group nor commits, so it causes no rebalance.
class GroupReader final : public KafkaClient {
 public:
  // `group` empty: only the record timestamps and watermarks are read.
  static Expected<std::unique_ptr<GroupReader>> create(const KafkaConfig& config,
                                                       const std::string& group, Reporter& reporter,
                                                       Clock& clock);
  ~GroupReader() override;

  // The group's committed offsets, in one OffsetFetch; nullopt where
  // there is none (a group that does not exist has none anywhere).
  Expected<std::vector<std::optional<int64_t>>> committed(const std::vector<TopicPartition>& parts);
  Expected<GroupDescription> describe();
  // For each partition, the timestamp of the first record at or after its
  // offset: the partitions are read together, a small fetch each, and each
  // is paused once its first record has arrived. nullopt where none came
  // within the timeout. With `ends`, where the read found no record but
  // the partition's end, that end's offset (for a read_committed reader,
  // past transaction markers and aborted records); nullopt elsewhere.
  Expected<std::vector<std::optional<Millis>>> record_timestamps(
      const std::vector<PartitionOffset>& parts,
      std::vector<std::optional<int64_t>>* ends = nullptr);

 private:
  GroupReader(const KafkaConfig& config, Reporter& reporter, Clock& clock);
};

}  // namespace kpipe
