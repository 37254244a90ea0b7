// kconsume's checkpoints (--state): the lines it emits, the wait for the
// pipeline's terminal stage to complete them, and their mirror in the
// consumer group; and, at start, the repair of a checkpoint a
// transactional kproduce committed in Kafka but did not complete in the
// store (kpipe(7), CONTROL LINES AND CHECKPOINTS, EXACTLY ONCE INTO KAFKA
// and MANY INSTANCES).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kpipe/latency.h"
#include "kpipe/log.h"
#include "kpipe/partition.h"
#include "kpipe/programs/kconsume.h"
#include "kpipe/programs/kconsume_positions.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

class BadInputHandler;
class StateStore;

class ConsumeCheckpoints {
 public:
  // `instance`: of a consumer group of pipelines sharing `state` (kpipe(7),
  // MANY INSTANCES). `positions` are what the checkpoints save.
  ConsumeCheckpoints(const ConsumeOptions& options, StateStore& state, OpenedReader& reader, Io& io,
                     ConsumePositions& positions, BadInputHandler& bad, Millis interval,
                     bool instance);

  // Reads where the store says the partitions resume, and the next id.
  Status init();
  // A checkpoint a transactional kproduce committed in Kafka and did not
  // complete in the store, completed before the first line is written.
  Status complete_committed();
  // An instance's repair of the same, for the partitions it is assigned,
  // from their committed offsets and commit metadata.
  Status repair(const std::vector<TopicPartition>& tps,
                const std::vector<std::optional<int64_t>>& committed,
                const std::vector<std::string>& metadata);
  // An instance takes `parts` over in the store: each gets its epoch, and
  // its stored position where there is one.
  Status claim(std::vector<PartitionOffset>& parts);
  // Where the state store says a partition resumes, if it knows.
  std::optional<Position> saved_position(const TopicPartition& tp) const;

  // The intervals start now (steady time).
  void start(Millis now) {
    last_checkpoint_ = now;
    last_mirror_ = now;
  }
  // A record was passed on, with its timestamp.
  void record(Millis timestamp) {
    written_since_ = true;
    timestamps_.add(timestamp);
  }
  // Between records: a checkpoint when one is due.
  Status tick(Millis now);
  // While a write is held up: the mirror keeps its interval. Writes nothing.
  Status on_tick(Millis now);

  // Writes a checkpoint line after every record written so far, with the
  // next offset of every partition held.
  Status emit();
  // Before the partitions are taken away: a checkpoint, awaited, to hand
  // them over at.
  Status hand_over();
  // kconsume -g -e: this member's partitions settled at a checkpoint, once
  // per checkpoint, before it looks at the group's end.
  Status settle();
  // At the end of the input: the final checkpoint, and in a group the wait
  // for it.
  Status finish();

  int64_t last_emitted() const { return last_emitted_; }

 private:
  bool grouped() const;
  bool owned() const { return instance_; }
  Status mirror_complete();
  Status mirror_owned();
  Expected<bool> complete(int64_t id);
  Status await_and_mirror(int64_t id, Millis wait);
  Expected<bool> completer_running();

  const ConsumeOptions& options_;
  StateStore& state_;
  OpenedReader& reader_;
  Io& io_;
  ConsumePositions& positions_;
  BadInputHandler& bad_;
  Millis interval_;
  bool instance_;
  TimestampSampler timestamps_;  // of the records since the last checkpoint
  Millis last_checkpoint_ = 0;
  Millis last_mirror_ = 0;
  int64_t next_checkpoint_ = 1;
  int64_t last_emitted_ = 0;
  int64_t mirrored_ = 0;
  int64_t settled_ = 0;  // the checkpoint settle() last awaited
  bool written_since_ = false;
  std::map<TopicPartition, Position> saved_;
};

}  // namespace kpipe
