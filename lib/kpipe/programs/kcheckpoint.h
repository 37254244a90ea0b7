// kcheckpoint: the pipeline's terminal stage (commit) and the tool that
// shows, resets, exports, imports and syncs its offsets.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kpipe/kafka/config.h"
#include "kpipe/kinesis/kinesis_log.h"
#include "kpipe/stage/filter.h"
#include "kpipe/store/state_store.h"

namespace kpipe {

struct CheckpointOptions {
  std::string state;
  std::string name;
  std::string format;  // table|ndjson; empty: table on a terminal
  PlotOptions plot;    // history --plot: a picture instead of the table
  // commit
  bool passthrough = false;
  // Runs through /bin/sh -c once per checkpoint with its lines on standard
  // input; the checkpoint completes when it exits 0.
  std::string each;
  bool each_given = false;                 // --each '' is a usage error
  std::string checkpoint_interval = "5s";  // what kconsume was given
  InputOptions input;
  StatsOptions stats;
  // reset
  bool to_earliest = false, to_latest = false;
  std::string to_datetime, by_duration;
  std::optional<int64_t> shift_by, to_offset;
  std::vector<std::string> topics;  // TOPIC or TOPIC:PARTITIONS
  bool dry_run = false, execute = false;
  // sync
  std::string to_group, from_group;
  KafkaOptions kafka;
  KinesisOptions kinesis;  // reset -t kinesis:NAME
};

Status run_checkpoint_commit(const CheckpointOptions& o, Io& io);
Status run_checkpoint_show(const CheckpointOptions& o, Io& io);
Status run_checkpoint_history(const CheckpointOptions& o, Io& io);
Status run_checkpoint_reset(const CheckpointOptions& o, Io& io);
Status run_checkpoint_export(const CheckpointOptions& o, Io& io);
Status run_checkpoint_import(const CheckpointOptions& o, Io& io);
Status run_checkpoint_sync(const CheckpointOptions& o, Io& io);
Status run_checkpoint_verify(const CheckpointOptions& o, Io& io);

// The reset vocabulary of kafka-consumer-groups --reset-offsets, pure.
struct ResetSpec {
  enum class Kind { kEarliest, kLatest, kTime, kShift, kOffset };
  Kind kind = Kind::kEarliest;
  int64_t value = 0;  // the time (ms), the shift, or the offset
};
// The new offset of a partition: clamped to [low, high], as Kafka's tool
// does. `current` is the stored offset (absent: low); `at_time` the
// broker's offset for the spec's time.
int64_t reset_target(const ResetSpec& spec, std::optional<int64_t> current, int64_t low,
                     int64_t high, int64_t at_time);

}  // namespace kpipe
