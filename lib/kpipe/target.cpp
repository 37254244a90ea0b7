#include "kpipe/target.h"

#include <algorithm>
#include <iterator>

namespace kpipe {

namespace {

constexpr std::string_view kPostgresSchemes[] = {"postgresql://", "postgres://"};
constexpr std::string_view kPostgresPrefixes[] = {"postgresql:", "postgres:"};
constexpr std::string_view kSqlitePrefix = "sqlite:";

bool starts_with_any(std::string_view text, const std::string_view (&prefixes)[2]) {
  return std::any_of(std::begin(prefixes), std::end(prefixes),
                     [&](std::string_view p) { return text.starts_with(p); });
}

}  // namespace

bool is_postgres_target(std::string_view target) {
  return starts_with_any(target, kPostgresPrefixes);
}

bool is_postgres_uri(std::string_view target) {
  return starts_with_any(target, kPostgresSchemes);
}

std::string_view postgres_conninfo(std::string_view target) {
  if (is_postgres_uri(target)) return target;
  for (std::string_view p : kPostgresPrefixes)
    if (target.starts_with(p)) return target.substr(p.size());
  return target;
}

bool is_kafka_target(std::string_view target) {
  return target.starts_with(kKafkaTargetPrefix);
}

Target parse_target(std::string_view text) {
  Target t;
  if (is_kafka_target(text)) {
    t.kind = TargetKind::kKafka;
    t.location = text.substr(kKafkaTargetPrefix.size());
    return t;
  }
  t.kind = is_postgres_target(text) ? TargetKind::kPostgres : TargetKind::kFile;
  t.location = text;
  return t;
}

Expected<Target> parse_table_target(std::string_view text, std::string_view shown) {
  if (text.empty()) return usage_error("--table: empty");
  if (text.starts_with(kKinesisTargetPrefix)) {
    // The stream as written: the Kinesis layer reads a name or an ARN.
    if (text.size() == kKinesisTargetPrefix.size())
      return usage_error("--table kinesis:STREAM: the stream is missing");
    return Target{TargetKind::kKinesis, std::string(text), ""};
  }
  Target t = parse_target(text);
  switch (t.kind) {
    case TargetKind::kKafka:
      if (t.location.empty()) return usage_error("--table kafka:TOPIC: the topic is missing");
      return t;
    case TargetKind::kPostgres: {
      // A PostgreSQL target of either form (kpipe(7), STORES), then #TABLE.
      size_t hash = text.rfind('#');
      if (hash == std::string_view::npos || hash + 1 == text.size())
        return usage_error("--table '{}': name the table after '#': postgresql://...#TABLE", shown);
      t.location = text.substr(0, hash);
      t.table = text.substr(hash + 1);
      return t;
    }
    case TargetKind::kFile:
    case TargetKind::kSqlite:
    case TargetKind::kKinesis:
      break;
  }
  if (!text.starts_with(kSqlitePrefix)) return t;
  std::string_view rest = text.substr(kSqlitePrefix.size());
  size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == rest.size())
    return usage_error("--table '{}': write sqlite:FILE:TABLE", text);
  t.kind = TargetKind::kSqlite;
  t.location = rest.substr(0, colon);
  t.table = rest.substr(colon + 1);
  return t;
}

}  // namespace kpipe
