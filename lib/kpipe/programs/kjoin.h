// kjoin: enriches a stream with a table (kjoin(1)). The options of the
// command line, and the stage that puts the join engine (join.h) on the
// NDJSON loop (filter.h) with its table read from Kafka, a file or a
// database.
#pragma once

#include <string>
#include <vector>

#include "kpipe/kafka/config.h"
#include "kpipe/kinesis/kinesis_log.h"
#include "kpipe/stage/filter.h"

namespace kpipe {

struct JoinOptions {
  // kafka:TOPIC, kinesis:STREAM, FILE, sqlite:FILE:TABLE, postgresql://...#TABLE
  std::string table;
  std::vector<std::string> table_keys;  // --table-key: paths (FILE) or columns (SQL)
  std::vector<std::string> keys;        // --key: the stream's paths
  std::string as;                       // --as PATH
  std::string on_miss = "keep";         // keep, drop or dlq
  std::string as_of;                    // --as-of PATH; empty: lookup join
  std::string table_time;               // --table-time PATH or COLUMN
  std::string time_unit = "ms";
  std::string table_watermark = "0s";
  std::string idle_timeout;  // empty: table partitions never go idle
  std::string watermark = "0s";
  std::string refresh;  // SQL tables: read again every D; empty: once
  std::string state;
  std::string name;
  InputOptions input;
  ErrorOptions errors;
  KafkaOptions kafka;      // for --table kafka:TOPIC and --dlq kafka:TOPIC
  KinesisOptions kinesis;  // for --table kinesis:STREAM
  StatsOptions stats;
};

Status run_join(const JoinOptions& options, Io& io);

}  // namespace kpipe
