// A log, as the programs see one (kpipe(7), LOGS): a stream cut into
// partitions, each an ordered sequence of records at positions that only
// grow. Kafka is one backend (kafka/kafka_log.h), and Amazon Kinesis, whose
// shards are partitions, goes beside it (lib/kpipe/kinesis/). What every
// backend has is here: the partitions and their bounds, a reader, a
// writer. What only Kafka has (consumer groups: membership, committed
// offsets, the group's lag; transactions) are interfaces of their own, so
// that a program asks for them and a backend without them offers none.
//
// Positions (position.h) are Kafka's offsets or Kinesis's sequence
// numbers; a program never computes one from another: the backend says where a partition
// resumes after each record (LogEvent::resume), and where it starts
// (LogStart).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kpipe/envelope.h"
#include "kpipe/partition.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

// The first position of a partition still held and the position the next
// record written will take (Kafka: the low and high watermarks).
struct LogBounds {
  int64_t low = 0;
  int64_t high = 0;
};

// Where reading a partition starts.
struct LogStart {
  // Kafka's special offsets: the first record still held, the next one written.
  static constexpr int64_t kEarliest = -2;
  static constexpr int64_t kLatest = -1;
  // Not yet chosen: a group's assign handler fills it in.
  static constexpr int64_t kUnset = -1001;
};

// What a reader's poll passes on.
struct LogEvent {
  enum class Kind : uint8_t {
    kRecord,    // `record` was read
    kCaughtUp,  // the partition holds nothing more now (`record` names it)
    kClosed,    // the partition will never hold more (a closed Kinesis shard)
    // A partition the log made while it was read (a Kinesis shard a split
    // or a merge made), read from `resume` on once its parents are read to
    // their end: the reader reads it without being assigned it.
    kAdded,
  };
  Kind kind = Kind::kRecord;
  RecordView record;
  // Where reading the partition resumes after this event: the position
  // that a checkpoint, a commit or a restart keeps (Kafka: the next offset).
  Position resume;
};

// A log's partitions, their bounds, and positions by time. Each call is
// bounded by the configuration's timeout: an unreachable log is an error
// naming it and the reason, not a hang.
class LogMetadata {
 public:
  virtual ~LogMetadata() = default;

  // The partitions of `name` (a topic, a stream), ascending; an error if
  // it does not exist.
  virtual Expected<std::vector<int32_t>> partitions(const std::string& name) = 0;
  // The partitions of `name`, or nullopt when there is none, asked in a
  // way that never creates it (a Kafka broker may create a topic that a
  // question names).
  virtual Expected<std::optional<std::vector<int32_t>>> existing_partitions(
      const std::string& name) = 0;
  // Every name's partitions (internal topics left out).
  virtual Expected<std::map<std::string, std::vector<int32_t>>> topic_partitions() = 0;
  virtual Expected<std::vector<LogBounds>> bounds(const std::vector<TopicPartition>& parts) = 0;
  // For each partition, the first position whose record's time is at or
  // after `times[i]`; the upper bound when there is none.
  virtual Expected<std::vector<Position>> positions_at(const std::vector<TopicPartition>& parts,
                                                       const std::vector<Millis>& times) = 0;
  // The time of the record at each position; nullopt where there is none.
  virtual Expected<std::vector<std::optional<Millis>>> timestamps_at(
      const std::vector<PartitionOffset>& at) = 0;
  // The configuration's timeout, for the callers' own waits on the log.
  virtual Millis timeout() const = 0;
  // Whether positions are consecutive numbers (Kafka's offsets): a program
  // may count the records between two, and start N records before the
  // end. A Kinesis shard's sequence numbers are not: they are kept and
  // compared, never counted.
  virtual bool consecutive_positions() const { return true; }
};

// Reads partitions it is given, or (GroupMembership) that a group assigns.
class LogReader : public virtual LogMetadata {
 public:
  // Reads each partition from its position (or LogStart::kEarliest,
  // kLatest).
  virtual Status assign(const std::vector<PartitionOffset>& parts) = 0;
  // Waits up to `timeout` for events, passes each to `handler`, up to
  // `max_events`; stops early when the handler returns an error.
  using EventHandler = std::function<Status(const LogEvent&)>;
  virtual Status poll(Millis timeout, size_t max_events, const EventHandler& handler) = 0;
  // Stops fetching these partitions. Records already fetched may still
  // arrive; an assignment made anew starts unpaused.
  virtual Status pause(const std::vector<TopicPartition>& parts) = 0;
  virtual std::vector<TopicPartition> assignment() = 0;
  // The partition's upper bound as the reader last saw it, asking nothing:
  // a hint for a progress line, nullopt until known.
  virtual std::optional<int64_t> lag_hint(const std::string& name, int32_t partition) = 0;
  // Ends reading (and leaves a group).
  virtual Status close() = 0;
};

// Appends records. Deliveries are reported as they are known.
class LogWriter : public virtual LogMetadata {
 public:
  // err null: written; a data_error: the record itself was refused (bad
  // input); any other error: the log failed.
  using DeliveryHandler = std::function<void(uint64_t tag, const Error* err)>;
  virtual void set_delivery_handler(DeliveryHandler handler) = 0;
  // Queues one record, waiting while the queue is full. partition -1: the
  // backend picks by key. timestamp 0: now.
  virtual Status write(const std::string& name, int32_t partition,
                       std::optional<std::string_view> key, std::optional<std::string_view> value,
                       const std::vector<Header>& headers, int64_t timestamp, uint64_t tag = 0) = 0;
  // Serves delivery reports, waiting up to `wait` for one.
  virtual void poll(Millis wait = 0) = 0;
  // Waits for every queued record's delivery, up to `timeout`.
  virtual Status flush(Millis timeout) = 0;
  // The partitions of `name`, the one this writer writes to; waits for a
  // log that creates it on first use.
  virtual Expected<std::vector<int32_t>> await_partitions(const std::string& name) = 0;
  virtual uint64_t delivered() const = 0;
  virtual uint64_t failed() const = 0;
  // The first delivery error, for the final message.
  virtual std::string first_failure() const = 0;
};

// Kafka's consumer groups, from a member's side.
class GroupMembership {
 public:
  virtual ~GroupMembership() = default;
  // Called inside poll() when the group assigns partitions: fill in the
  // position to start each at (all start as LogStart::kUnset).
  using AssignHandler = std::function<Status(std::vector<PartitionOffset>& parts)>;
  // Called inside poll() before partitions are taken away. `lost`: the
  // group gave them to another member already, so nothing may be
  // committed for them.
  using RevokeHandler = std::function<Status(const std::vector<TopicPartition>& parts, bool lost)>;
  virtual Status subscribe(const std::vector<std::string>& names, AssignHandler on_assign,
                           RevokeHandler on_revoke) = 0;
  // This member as another process commits offsets on its behalf (a
  // transaction, KIP-447); empty without a group.
  virtual std::string member() = 0;
};

// Positions a group keeps in the log (Kafka's committed offsets), each
// with a short text of metadata.
class CommittedOffsets {
 public:
  virtual ~CommittedOffsets() = default;
  // A refusal while the group rebalances (or from a member it no longer
  // counts) is no error; `committed`, when given, says whether they were
  // stored, and makes a coordinator out of reach a refusal too.
  virtual Status commit(const std::vector<PartitionOffset>& offsets, bool* committed = nullptr,
                        const std::string& metadata = {}) = 0;
  // nullopt where the group has none; `metadata`: each one's ("" where
  // none). `wait` 0: the timeout.
  virtual Expected<std::vector<std::optional<int64_t>>> committed(
      const std::vector<TopicPartition>& parts, std::vector<std::string>* metadata = nullptr,
      Millis wait = 0) = 0;
};

// Records and a group's positions made visible together, or not at all
// (Kafka's transactions).
class LogTransactions {
 public:
  virtual ~LogTransactions() = default;
  // Fences every earlier writer of the same id, aborting what it left open.
  virtual Status init_transactions() = 0;
  virtual Status begin_transaction() = 0;
  // Commits what was written since begin_transaction() with `offsets` as
  // `group`'s positions, as `member` (GroupMembership::member) when given.
  virtual Status commit_transaction(const std::vector<PartitionOffset>& offsets,
                                    const std::string& group, const std::string& metadata,
                                    const std::string& member = {}) = 0;
  virtual Status abort_transaction() = 0;
};

// Records placed by a hash the writer is given instead of their key's
// (Kinesis's ExplicitHashKey: each shard holds a range of the hashes
// 0..2^128-1, and a record goes to the shard whose range holds its
// hash). Only Kinesis has it; a Kafka writer offers none.
class HashPlacement {
 public:
  virtual ~HashPlacement() = default;
  // As LogWriter::write, the record placed by `hash_key`, a decimal
  // integer from 0 to 2^128-1 (a data_error for anything else); its key
  // stays its key.
  virtual Status write_hashed(const std::string& name, std::optional<std::string_view> key,
                              std::optional<std::string_view> value,
                              const std::vector<Header>& headers, std::string_view hash_key,
                              uint64_t tag = 0) = 0;
};

// A reader as its backend opens it, with the faces the backend adds on
// the same object: with a Kafka group, its membership and its committed
// offsets (null elsewhere).
struct OpenedReader {
  std::unique_ptr<LogReader> log;
  GroupMembership* group = nullptr;
  CommittedOffsets* offsets = nullptr;
};

// A writer, and its transactions and hash placement where it has them.
struct OpenedWriter {
  std::unique_ptr<LogWriter> log;
  LogTransactions* transactions = nullptr;
  HashPlacement* hashing = nullptr;
};

// What the log says of a consumer group as a whole.
struct GroupDescription {
  // False when the log cannot describe groups (kbroker's mock cluster).
  bool described = false;
  bool exists = false;
  std::string state;  // "Stable", "Empty", "PreparingRebalance", ...
  int64_t members = 0;
};

// What a group's members were assigned.
struct GroupMembers {
  bool described = false;     // as GroupDescription::described
  std::string protocol_type;  // "consumer" for Kafka consumers; "" when unknown
  int64_t members = 0;
  // Sorted and unique; read only from "consumer" groups.
  std::vector<TopicPartition> assigned;
};

// A consumer group read from outside, for its lag (klag): it never joins
// the group nor commits, so asking causes no rebalance.
class GroupLag : public virtual LogMetadata {
 public:
  virtual Expected<std::vector<std::optional<int64_t>>> committed(
      const std::vector<TopicPartition>& parts) = 0;
  virtual Expected<GroupDescription> describe() = 0;
  // For each partition, the time of the first record at or after its
  // position; nullopt where none came within the timeout. With `ends`,
  // where the read found only the partition's end, that end.
  virtual Expected<std::vector<std::optional<Millis>>> record_timestamps(
      const std::vector<PartitionOffset>& parts,
      std::vector<std::optional<int64_t>>* ends = nullptr) = 0;
};

// The consumer groups there are, and what their members were assigned.
class GroupDirectory {
 public:
  virtual ~GroupDirectory() = default;
  // A group that does not exist has no members.
  virtual Expected<GroupMembers> members(const std::string& group) = 0;
  // Sorted; nullopt where the log cannot list groups (kbroker).
  virtual Expected<std::optional<std::vector<std::string>>> group_ids() = 0;
};

}  // namespace kpipe
