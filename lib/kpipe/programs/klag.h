// klag: consumer lag per partition, in records and in seconds, for Kafka
// consumer groups or a kpipe pipeline's state file, with a history, health
// verdicts by Burrow's rules, and alerts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kpipe/kafka/config.h"
#include "kpipe/kinesis/kinesis_log.h"
#include "kpipe/stage/io.h"

namespace kpipe {

struct LagOptions {
  KafkaOptions kafka;
  KinesisOptions kinesis;  // -t kinesis:NAME with --state (klag(1), Kinesis)
  // -g, repeatable: a group's name, or a pattern its names must match
  // (GroupSelector, kpipe/lag.h).
  std::vector<std::string> groups;
  bool all_groups = false;          // --all-groups: every group the cluster lists
  std::vector<std::string> topics;  // -t; none: every topic the group consumes
  std::string state;                // --state FILE: a pipeline's offsets instead of a group's
  std::string history;              // --history FILE (SQLite)
  std::string keep = "7d";          // drop samples older than this from the history
  std::string format;  // table|ndjson|prometheus; empty: table on a terminal, else ndjson
  // partition|topic: what a row stands for; empty: not given, a row per
  // partition, and with --plot a series per group.
  std::string granularity;
  std::string metric_names = "kpipe";  // kpipe|kafka_exporter: --format prometheus's names
  bool no_fetch = false;  // estimate lag seconds from the history instead of reading records
  std::string watch;      // repeat every D
  int window = 10;        // samples judged by the rules
  int64_t allowed_lag = 0;
  // What a partition of a consumed topic without a committed offset
  // counts as: earliest (from its log start offset), latest (no lag) or
  // ignore (no lag, shown as -).
  std::string uncommitted = "earliest";
  std::optional<int64_t> max_lag;
  std::optional<double> max_lag_seconds;
  std::string fail_on;       // WARN|STALL|STOP|REWIND
  bool status_only = false;  // `klag status`: judge the history, ask no broker
  PlotOptions plot;          // --plot: the history drawn instead of the report
};

// Samples (or, with status_only, reads the history), writes the report
// (with --plot, the picture of the subjects' whole history instead), and
// returns an alert error (exit 3) when a threshold is breached.
Status run_lag(const LagOptions& options, Io& io);

}  // namespace kpipe
