// kproduce: NDJSON lines in, Kafka records out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kpipe/kafka/config.h"
#include "kpipe/stage/filter.h"

namespace kpipe {

struct ProduceOptions {
  KafkaOptions kafka;
  std::string topic;
  std::string key;                   // a field path; empty: no key
  std::optional<int64_t> partition;  // -p; none: the partitioner decides
  bool envelope = false;
  bool keep_partition = false;
  InputOptions input;
  ErrorOptions errors;
  StatsOptions stats;
};

// Past this many bytes of lines kept for --on-error dlq while their
// records are in flight, kproduce waits for deliveries before it sends
// more (kproduce(1), BAD INPUT).
constexpr size_t kMaxInFlightLineBytes = 64u << 20;

Status run_produce(const ProduceOptions& options, Io& io);

}  // namespace kpipe
