#include "kpipe/stage/key_sampler.h"

#include <algorithm>

#include <xxhash.h>

namespace kpipe {

uint64_t key_sample_hash(std::string_view key) {
  return XXH3_64bits(key.data(), key.size());
}

void KeySampler::keep(uint64_t hash, std::string_view key) {
  for (const Kept& k : pending_)
    if (k.hash == hash) return;
  if (taken_.contains(hash)) return;
  std::string_view shown = key.substr(0, kKeySampleKept);
  if (pending_.size() < kKeySamplesPerPartition) {
    pending_.push_back({hash, std::string(shown)});
  } else {
    auto largest = std::max_element(pending_.begin(), pending_.end(),
                                    [](const Kept& a, const Kept& b) { return a.hash < b.hash; });
    largest->hash = hash;
    largest->key.assign(shown);
  }
  if (pending_.size() < kKeySamplesPerPartition) return;
  largest_ = std::max_element(pending_.begin(), pending_.end(), [](const Kept& a, const Kept& b) {
               return a.hash < b.hash;
             })->hash;
}

void KeySampler::take(const TopicPartition& partition, std::vector<KeySample>& out) {
  // The memory of what was handed out stays as small as the store's ring.
  if (taken_.size() + pending_.size() > static_cast<size_t>(kKeySamplesKept)) taken_.clear();
  for (Kept& k : pending_) {
    taken_.insert(k.hash);
    out.push_back({partition, k.hash, std::move(k.key)});
  }
  pending_.clear();
  largest_ = 0;
}

}  // namespace kpipe
