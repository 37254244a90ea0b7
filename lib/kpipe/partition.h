// Topic/partition pairs and positions, shared by the Kafka clients, the
// checkpoint protocol and lag (no librdkafka here).
#pragma once

#include <compare>
#include <cstdint>
#include <string>

#include "kpipe/position.h"

namespace kpipe {

struct TopicPartition {
  std::string topic;
  int32_t partition = 0;
  auto operator<=>(const TopicPartition&) const = default;
};

struct PartitionOffset {
  std::string topic;
  int32_t partition = 0;
  Position offset;
  // The owner's epoch when the pipeline runs as a consumer group sharing
  // one state store (kpipe(7), MANY INSTANCES): the store refuses what an
  // older owner of the partition writes. 0: no owner (one pipeline).
  int64_t epoch = 0;
  auto operator<=>(const PartitionOffset&) const = default;
};

}  // namespace kpipe
