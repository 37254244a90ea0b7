// Control lines (kpipe(7), CONTROL LINES AND CHECKPOINTS): lines whose object begins with "$kpipe".
// Checkpoint barriers are the one kind programs act on; every other kind is
// forwarded unchanged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/partition.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

struct Checkpoint {
  int64_t id = 0;
  Millis at = 0;
  // The next offset to read for each partition (Kafka's commit convention).
  std::vector<PartitionOffset> offsets;
  // kconsume's consumer group; empty without -g.
  std::string group;
  // An instance's membership of that group as librdkafka serializes it
  // (rd_kafka_consumer_group_metadata_write: group, generation, member id,
  // group.instance.id), so that a transactional kproduce commits the
  // checkpoint's offsets as that member: the group's coordinator refuses
  // a zombie's (kpipe(7), MANY INSTANCES). Opaque bytes, base64 in the
  // line ("member"); empty in a single pipeline's.
  std::string member;
};

// The checkpoint a control line carries; nullopt for other control kinds.
// A line that claims to be a checkpoint but is malformed is a data_error.
Expected<std::optional<Checkpoint>> parse_checkpoint(std::string_view line);

// {"$kpipe":"checkpoint","id":7,"at":...,"group":"g","offsets":[...]} and
// '\n' ("group" only when there is one).
void append_checkpoint(std::string& out, const Checkpoint& c);

// The name checkpoints are completed by when a transaction committed them.
inline constexpr std::string_view kTransactionCompleter = "kproduce";

// The metadata of the offsets a transaction commits for a checkpoint
// (kproduce --transactional), by which kconsume tells, after a crash,
// that Kafka committed a checkpoint the state store did not complete
// (kpipe(7), EXACTLY ONCE INTO KAFKA): "kpipe:checkpoint:ID:AT". The time
// it was emitted tells this store's checkpoint from one of the same id in
// a store that was deleted and made anew.
struct CheckpointMark {
  int64_t id = 0;
  Millis at = 0;
  bool operator==(const CheckpointMark&) const = default;
};
std::string checkpoint_commit_metadata(const CheckpointMark& mark);
// The checkpoint such metadata names; nullopt for any other text.
std::optional<CheckpointMark> parse_checkpoint_commit_metadata(std::string_view metadata);

// The first line an instance's kconsume writes (kpipe(7), MANY INSTANCES),
// before it joins the group, so that the stages know the instance they
// belong to before anything else: they lock their stage names per
// instance, and kproduce --transactional takes the instance's
// transactional id from it and fences the instance's previous run before
// kconsume asks the group for offsets that run's open transaction holds.
//   {"$kpipe":"instance","name":"hostA","group":"clicks","pipeline":"5f0c2e9a1b7d4c33"}
// `pipeline` names this run of the instance (its kconsume's): the stages
// of a killed run may still drain their input while the instance starts
// again.
struct InstanceLine {
  std::string name;
  std::string group;
  std::string pipeline;
};
// The instance a control line names; nullopt for other lines (data lines
// too). A malformed instance line is a data_error.
Expected<std::optional<InstanceLine>> parse_instance_line(std::string_view line);
void append_instance_line(std::string& out, const InstanceLine& i);

// What kconsume --announce says about its partitions, so that event-time
// stages know which partitions to wait for: an assigned partition holds
// the watermark back from the start, not only from its first record; a
// revoked one no longer holds it.
//   {"$kpipe":"partitions","event":"assigned","partitions":[{"topic":"events","partition":0}]}
// In a consumer group whose instances share one state store (kpipe(7),
// MANY INSTANCES), an assigned partition carries the epoch its owner
// claimed it at, and the stages keep their state per partition:
//   {"$kpipe":"partitions","event":"assigned","partitions":[{"topic":"events","partition":0,"epoch":3}]}
struct PartitionEvent {
  enum class Kind { kAssigned, kRevoked };
  Kind kind = Kind::kAssigned;
  std::vector<TopicPartition> partitions;
  // Parallel to `partitions` when the partitions are owned (assigned only);
  // empty otherwise.
  std::vector<int64_t> epochs;
  bool owned() const { return !epochs.empty(); }
};

// The event a control line carries; nullopt for other control kinds.
Expected<std::optional<PartitionEvent>> parse_partition_event(std::string_view line);
void append_partition_event(std::string& out, const PartitionEvent& e);

}  // namespace kpipe
