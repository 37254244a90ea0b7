// kproduce: NDJSON lines in, Kafka records out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kpipe/kafka/config.h"
#include "kpipe/kinesis/kinesis_log.h"
#include "kpipe/schema_options.h"
#include "kpipe/stage/filter.h"

namespace kpipe {

struct ProduceOptions {
  KafkaOptions kafka;
  KinesisOptions kinesis;  // for -t kinesis:NAME
  std::string topic;
  std::string key;                   // a field path; empty: no key
  std::optional<int64_t> partition;  // -p; none: the partitioner decides
  bool envelope = false;
  bool keep_partition = false;
  // --explicit-hash-key: a field path whose value places each record in a
  // Kinesis stream instead of its key's hash; empty: none.
  std::string explicit_hash_key;
  // --transactional: records go out in one Kafka transaction per
  // checkpoint, which commits the checkpoint's offsets for kconsume's
  // group; the checkpoint is then complete in `state` (kpipe(7), EXACTLY
  // ONCE INTO KAFKA).
  bool transactional = false;
  std::string transactional_id;  // empty: derived from the topic and `state`
  std::string state;
  InputOptions input;
  ErrorOptions errors;
  StatsOptions stats;
  // --key-format, --value-format and the registry (kpipe(7), SCHEMA
  // REGISTRY): a value that does not fit the schema is bad input.
  SchemaOptions schema;
};

// Past this many bytes of lines kept for --on-error dlq while their
// records are in flight, kproduce waits for deliveries before it sends
// more (kproduce(1), BAD INPUT).
constexpr size_t kMaxInFlightLineBytes = 64u << 20;

// The transactional id --transactional takes by default: stable across
// restarts of the pipeline that produces to `topic` and keeps its state
// in `store` (a canonical path, or a target without its password), so that
// a restart fences the producer it replaces. One pipeline runs per state
// store (kpipe(7), CONTROL LINES AND CHECKPOINTS). Not kconsume's group,
// which kproduce learns only from the first checkpoint line: a restart
// must fence at once (Transactions::start).
std::string default_transactional_id(std::string_view topic, std::string_view store);

Status run_produce(const ProduceOptions& options, Io& io);

}  // namespace kpipe
