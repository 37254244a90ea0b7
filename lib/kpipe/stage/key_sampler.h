// One partition's sample of the keys an instance's stage saw, for the
// co-partition check in the shared state store (kpipe(7), MANY INSTANCES).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "kpipe/key_sample.h"

namespace kpipe {

// A stage's hash of a key for its samples where it has none of its own:
// XXH3's, the same in every process.
uint64_t key_sample_hash(std::string_view key);

// Keeps, between two take()s, the kKeySamplesPerPartition distinct keys of
// smallest hash offered, leaving out those it handed out lately. Sampling
// by the hash, not by the records' turn, makes the instances that hold a
// key's records in two partitions pick that key in both, so that the
// store sees it twice; the smallest hashes, not a fixed share of them,
// keep the sample's size fixed whatever the number of keys. A record costs
// one comparison once the sample is full.
class KeySampler {
 public:
  void offer(uint64_t hash, std::string_view key) {
    if (pending_.size() == kKeySamplesPerPartition && hash >= largest_) return;
    keep(hash, key);
  }

  bool empty() const { return pending_.empty(); }
  size_t size() const { return pending_.size(); }

  // Appends the keys kept, as samples of `partition`, and starts over;
  // their hashes are left out of the next samples (a key is handed out
  // again once kKeySamplesKept others were).
  void take(const TopicPartition& partition, std::vector<KeySample>& out);

 private:
  struct Kept {
    uint64_t hash;
    std::string key;
  };
  void keep(uint64_t hash, std::string_view key);

  std::vector<Kept> pending_;
  uint64_t largest_ = 0;  // the largest hash in pending_ once it is full
  std::unordered_set<uint64_t> taken_;
};

}  // namespace kpipe
