// kdlq: looks at dead letters, counts them, replays them, purges them, and
// guards a pipeline's door (kpipe(7), BAD INPUT). Each subcommand is one entry
// point; tools/kdlq/main.cpp only declares the options.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kpipe/guard.h"
#include "kpipe/kafka/config.h"
#include "kpipe/kinesis/kinesis_log.h"
#include "kpipe/stage/filter.h"

namespace kpipe {

struct DlqOptions {
  std::string dlq;  // FILE.db (SQLite), postgresql://..., kafka:TOPIC or kinesis:STREAM
  KafkaOptions kafka;
  KinesisOptions kinesis;  // a kinesis:STREAM store or replay target
  // A Kafka dead-letter topic's replay group; a Kinesis dead-letter
  // stream's replay ledger in `state`.
  std::string group;
  std::string state;  // where a Kinesis dead-letter stream's replay position is kept

  // Filters: list, stats and replay.
  std::string reason;
  std::string stage;
  std::string source_topic;
  std::string since;  // a time point (RFC 3339, epoch ms, now, -D)
  std::string until;
  size_t limit = 0;  // 0: no limit

  std::string format;         // table or ndjson; empty: table on a terminal
  std::string by = "reason";  // stats: reason, stage, topic or hour

  // replay
  std::string to;  // empty: standard output; else kafka:TOPIC or kinesis:STREAM
  bool dry_run = false;
  bool again = false;
  size_t batch = 1000;  // entries in flight to Kafka at most

  // purge
  bool replayed = false;
  std::string older_than;

  // guard
  std::vector<std::string> require;
  std::string name;
  bool on_error_given = false;  // guard: without --on-error, --dlq means dlq
  InputOptions input;
  ErrorOptions errors;
  StatsOptions stats;
};

Status run_dlq_list(const DlqOptions& options, Io& io);
Status run_dlq_stats(const DlqOptions& options, Io& io);
Status run_dlq_replay(const DlqOptions& options, Io& io);
Status run_dlq_purge(const DlqOptions& options, Io& io);
Status run_dlq_guard(const DlqOptions& options, Io& io);

// The LineStage around a Guard: good lines are written as read.
class GuardStage final : public LineStage {
 public:
  explicit GuardStage(std::vector<Requirement> requirements) : guard_(std::move(requirements)) {}
  Status on_line(const Line& line, Output& out) override;
  void fill_counters(Counters& c) const override { c.out = passed_; }

 private:
  Guard guard_;
  uint64_t passed_ = 0;
};

}  // namespace kpipe
