// kproduce: NDJSON lines in, Kafka records out.
#pragma once

#include <string>

#include "kpipe/stage/filter.h"
#include "kpipe/kafka/config.h"

namespace kpipe {

struct ProduceOptions {
  KafkaOptions kafka;
  std::string topic;
  std::string key;       // a field path; empty: no key
  int partition = -1;    // -1: the partitioner decides
  bool envelope = false;
  bool keep_partition = false;
  InputOptions input;
  ErrorOptions errors;
  StatsOptions stats;
};

Status run_produce(const ProduceOptions& options, Io& io);

}  // namespace kpipe
