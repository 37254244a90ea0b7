// The keys a stateful stage samples per partition to find keys split
// between partitions (kpipe(7), MANY INSTANCES): what the stage layer
// hands the state store, and what the store finds. Pure data, so that the
// stage layer needs no database and the store no stage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kpipe/partition.h"

namespace kpipe {

// One sampled key of a partition: its hash (the stage's own, the same in
// every instance, so that all instances sample the same keys) and the
// first kKeySampleKept bytes of its text, for the warning.
struct KeySample {
  TopicPartition partition;
  uint64_t hash = 0;
  std::string key;
};

// A sampled key that the store holds under another partition than the one
// it was just seen in.
struct KeySplit {
  std::string key;          // its first kKeySampleKept bytes
  TopicPartition recorded;  // where the store had it (any instance)
  TopicPartition seen;      // where this instance saw it now
};

// The bytes of a key kept with its sample: one more than the warning
// shows (copartition_warning), so that it can say a key was cut short.
inline constexpr size_t kKeySampleKept = 201;
// The keys a partition keeps between two writes of its samples: the ones
// of smallest hash seen since the last (a bottom-k sample, which two
// partitions holding the same keys pick alike).
inline constexpr size_t kKeySamplesPerPartition = 16;
// The most samples a stage writes at one checkpoint, whatever the number of
// partitions it owns: partitions take turns beyond that.
inline constexpr size_t kKeySamplesPerSave = 64;
// The most samples the store keeps per stage and partition: a ring, the
// oldest replaced.
inline constexpr int64_t kKeySamplesKept = 1024;

}  // namespace kpipe
