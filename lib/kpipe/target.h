// What a user names where a program keeps or sends data outside its pipes
// (--state, --dlq, kupsert's --db, klag's --history, kdlq replay's --to,
// kjoin's --table): a file, a PostgreSQL database or a Kafka topic, told
// apart by the prefix it starts with (kpipe(7), STORES). Read here once, so
// that every program splits a name the same way; opening what it names is
// the store's or Kafka's job.
#pragma once

#include <string>
#include <string_view>

#include "kpipe/status.h"

namespace kpipe {

enum class TargetKind {
  kFile,      // no prefix: a path (an SQLite file, or kjoin's NDJSON file)
  kSqlite,    // kjoin's sqlite:FILE:TABLE
  kPostgres,  // postgresql:// or postgres:// (a URI), postgresql: or postgres: (a conninfo)
  kKafka,     // kafka:TOPIC
  kKinesis,   // kjoin's kinesis:STREAM (or a stream's ARN after kinesis:)
};

struct Target {
  TargetKind kind = TargetKind::kFile;
  // The file; the PostgreSQL target as written, prefix kept (what the
  // store opens); or the topic, empty when only "kafka:" was written.
  std::string location;
  // A table within the database (kjoin's --table), else empty.
  std::string table;
};

inline constexpr std::string_view kKafkaTargetPrefix = "kafka:";
// As the Kinesis layer names a stream (kinesis/kinesis_log.h).
inline constexpr std::string_view kKinesisTargetPrefix = "kinesis:";

// Whether a target names a PostgreSQL database rather than a file.
bool is_postgres_target(std::string_view target);
// Whether a PostgreSQL target is a URI (postgresql://, postgres://) rather
// than a conninfo.
bool is_postgres_uri(std::string_view target);
// What libpq reads as its dbname: a URI whole, a conninfo without the
// "postgresql:" that marks it as one; any other text as it is.
std::string_view postgres_conninfo(std::string_view target);
bool is_kafka_target(std::string_view target);

// A store or sink (--state, --dlq, --db, --to): a Kafka topic, a PostgreSQL
// database, or else a file. Never fails: each option refuses what it cannot
// take (an empty text, a missing topic) in its own words.
Target parse_target(std::string_view text);

// kjoin's --table: FILE, kafka:TOPIC, kinesis:STREAM, sqlite:FILE:TABLE or
// a PostgreSQL target then #TABLE. `shown` is the text as a message may show it (a
// PostgreSQL password left out: the store layer's display_target).
Expected<Target> parse_table_target(std::string_view text, std::string_view shown);

}  // namespace kpipe
