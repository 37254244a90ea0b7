// kupsert: the idempotent sink. NDJSON objects become rows of a table
// (store/upsert_writer.h), upserted by a natural key. With --state naming
// the same file, the rows since a checkpoint and the checkpoint's
// completion commit in one transaction: each result lands exactly once
// (kpipe(7), CONTROL LINES AND CHECKPOINTS).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kpipe/kafka/config.h"
#include "kpipe/stage/bad_input.h"
#include "kpipe/stage/checkpoint_meter.h"
#include "kpipe/stage/filter.h"
#include "kpipe/stage/io.h"
#include "kpipe/store/state_store.h"
#include "kpipe/store/upsert_writer.h"

namespace kpipe {

struct UpsertOptions {
  std::string db;
  std::string table;
  // One element per --key (--columns) given: COL[,COL]..., split by
  // run_upsert, which refuses an empty name ("a,,b") that a splitting
  // option parser would drop in silence.
  std::vector<std::string> key;
  std::string mode = "upsert";
  std::vector<std::string> columns;
  bool strict = false;
  int64_t batch = 50000;
  std::string state;
  std::string name;
  InputOptions input;
  ErrorOptions errors;
  KafkaOptions kafka;  // for --dlq kafka:TOPIC
  StatsOptions stats;
};

Status run_upsert(const UpsertOptions& options, Io& io);

// --- the stage -----------------------------------------------------------------

// How long a row may wait for its batch (outside checkpoint mode): a slow
// stream still lands within a second.
constexpr Millis kMaxBatchDelay = 500;

// The terminal stage: holds rows, commits them in batches, and completes
// checkpoints. `store` is null without --state; `same_file` when it is the
// database the rows go to (exactly-once: the rows since the last checkpoint
// commit only with the next one, or at the end of the input).
class UpsertStage final : public LineStage {
 public:
  UpsertStage(UpsertWriter& writer, StateStore* store, bool same_file, int64_t batch,
              std::string stage, BadInputHandler& bad, Io& io);

  Status on_line(const Line& line, Output& out) override;
  Status on_control(const Line& line, Output& out) override;
  Status on_idle(Output& out) override;
  Millis idle_interval() const override { return 200; }
  Status on_end(Output& out) override;
  void fill_counters(Counters& c) const override;

  uint64_t checkpoints_completed() const { return completed_; }

 private:
  bool exactly_once() const { return store_ != nullptr && same_file_; }
  // Outside checkpoint mode: commits the held rows, if any.
  Status commit_batch();
  // Checkpoint mode: the held rows and the checkpoint, in one transaction.
  Status commit_checkpoint(const Checkpoint& c);

  UpsertWriter& writer_;
  StateStore* store_;
  bool same_file_;
  size_t batch_;
  std::string stage_;
  BadInputHandler& bad_;
  Io& io_;
  Millis first_held_at_ = 0;
  uint64_t completed_ = 0;
  // An instance's (kpipe(7), MANY INSTANCES): the partitions and epochs of
  // the last checkpoint completed, which the rows after it need still.
  std::vector<PartitionOffset> owned_;
  CheckpointMeter meter_;
  uint64_t rows_ = 0;  // rows accepted
  bool warned_holding_ = false;
};

}  // namespace kpipe
