// kconsume: Kafka records in, NDJSON envelopes out.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kpipe/kafka/config.h"
#include "kpipe/kinesis/kinesis_log.h"
#include "kpipe/position.h"
#include "kpipe/schema_options.h"
#include "kpipe/stage/io.h"
#include "kpipe/time.h"

namespace kpipe {

struct ConsumeOptions {
  KafkaOptions kafka;
  KinesisOptions kinesis;  // for -t kinesis:NAME
  // --efo CONSUMER: a Kinesis stream read by enhanced fan-out as this
  // consumer; empty: polled.
  std::string efo;
  std::vector<std::string> topics;
  std::string group;
  std::string from = "earliest";  // earliest|latest|OFFSET|-N|@TIME
  std::string until;              // OFFSET|@TIME; empty: no end
  std::string partitions;         // "0,2-5"; empty: all
  int64_t count = 0;              // -c; 0: no limit
  bool count_given = false;       // -c 0 is refused, not taken for no limit
  bool exit_at_end = false;       // -e
  std::string format = "envelope";
  std::string commit_interval = "1s";
  // read_committed or read_uncommitted; empty: read_committed, unless -X
  // isolation.level says otherwise.
  std::string isolation;
  // Write partition events (control lines) for event-time stages; implied
  // by --state.
  bool announce = false;
  // Checkpoints (--state): see the checkpoint protocol.
  std::string state;
  std::string checkpoint_interval = "5s";
  // An instance's name (kpipe(7), MANY INSTANCES); empty: the host's, or
  // the first of HOST-2, HOST-3, ... free in the store.
  std::string instance;
  StatsOptions stats;
  // --key-format, --value-format and the registry (kpipe(7), SCHEMA
  // REGISTRY); a record they cannot decode is bad input (`errors`).
  SchemaOptions schema;
  ErrorOptions errors;
};

// Where --from starts a partition.
struct StartPosition {
  enum class Kind { kEarliest, kLatest, kOffset, kFromEnd, kTime };
  Kind kind = Kind::kEarliest;
  int64_t value = 0;  // the offset, the count back from the end, or the time
};
Expected<StartPosition> parse_start_position(std::string_view text, Millis now);

// Where --until ends each partition: before an offset, or before its first
// record at or after a time. Exclusive, so that --from @10:00 --until
// @11:00 is the hour.
struct EndPosition {
  enum class Kind { kNone, kOffset, kTime };
  Kind kind = Kind::kNone;
  int64_t value = 0;  // the offset or the time
};
// The end of a partition without --until.
constexpr int64_t kNoEnd = Position::kMax;
// Empty: no end. The times are --from's.
Expected<EndPosition> parse_end_position(std::string_view text, Millis now);

// The offset a partition ends before, by --until: the offset given, or for
// a time the broker's first offset at or after it (its high watermark at
// the time of asking when there is none).
Position resolve_end(const EndPosition& until, const Position& position_for_time);

// "0,2-5" -> {0, 2, 3, 4, 5}, sorted and unique.
Expected<std::vector<int32_t>> parse_partition_list(std::string_view text);

// The offset --from gives one partition, from its watermarks (and, for a
// time, the broker's answer): pure, so the rules are tested without Kafka.
int64_t resolve_start(const StartPosition& from, int64_t low, int64_t high,
                      int64_t offset_for_time);

Status run_consume(const ConsumeOptions& options, Io& io);

}  // namespace kpipe
