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
