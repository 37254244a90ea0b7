// The keys the instances' stages sampled per partition, in the shared
// state store (kpipe(7), MANY INSTANCES): each instance holds only its own
// partitions' state, so a key split between the partitions of two
// instances shows only where all of them write. A table of its own
// (kpipe_key_samples, component "key_samples"), bounded per stage and
// partition, beside the state tables.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kpipe/key_sample.h"
#include "kpipe/status.h"
#include "kpipe/store/sql.h"

namespace kpipe {

class KeySamples {
 public:
  // Over `db`, which must outlive it; its table is made on first use.
  explicit KeySamples(Database& db) : db_(db) {}

  // In one transaction: looks for each of `samples` (hashes of `stage`'s
  // keys) among those recorded under another partition of one of
  // `topics` (the topics the stage reads now: a topic read before and
  // since re-keyed says nothing), by any instance, then records them in
  // each partition's ring of kKeySamplesKept, the oldest replaced. Returns
  // the first key found split. A cost of three statements, whatever the
  // samples' number (at most kKeySamplesPerSave) and the partitions'.
  Expected<std::optional<KeySplit>> record(std::string_view stage,
                                           const std::vector<KeySample>& samples,
                                           const std::vector<std::string>& topics,
                                           int64_t checkpoint);

 private:
  Status ensure_table();
  // The sequence number of `partition`'s next sample: read from the table
  // the first time, then counted here.
  Expected<int64_t> next_seq(std::string_view stage, const TopicPartition& partition);

  Database& db_;
  bool ready_ = false;
  std::map<std::pair<std::string, TopicPartition>, int64_t> next_;
};

}  // namespace kpipe
