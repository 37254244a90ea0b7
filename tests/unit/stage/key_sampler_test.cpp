#include "kpipe/stage/key_sampler.h"

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

// A partition's sample of keys for the store's co-partition check
// (kpipe(7), MANY INSTANCES): the smallest hashes, the same wherever the
// keys come from.

namespace kpipe {
namespace {

const TopicPartition kP0{"events", 0};

std::set<uint64_t> hashes(const std::vector<KeySample>& samples) {
  std::set<uint64_t> out;
  for (const KeySample& s : samples) out.insert(s.hash);
  return out;
}

TEST_CASE("key sampler: keeps the smallest hashes offered, each once", "[copartition]") {
  KeySampler sampler;
  CHECK(sampler.empty());
  for (uint64_t h = 100; h > 0; --h) sampler.offer(h, fmt::format("k{}", h));
  sampler.offer(3, "k3");
  CHECK(sampler.size() == kKeySamplesPerPartition);
  std::vector<KeySample> out;
  sampler.take(kP0, out);
  CHECK(sampler.empty());
  REQUIRE(out.size() == kKeySamplesPerPartition);
  std::set<uint64_t> want;
  for (uint64_t h = 1; h <= kKeySamplesPerPartition; ++h) want.insert(h);
  CHECK(hashes(out) == want);
  for (const KeySample& s : out) {
    CHECK(s.partition == kP0);
    CHECK(s.key == fmt::format("k{}", s.hash));
  }
}

TEST_CASE("key sampler: two partitions of the same keys pick the same ones, in any order",
          "[copartition]") {
  std::vector<uint64_t> keys;
  std::mt19937_64 random(7);
  for (int i = 0; i < 5000; ++i) keys.push_back(random());
  KeySampler a, b;
  for (uint64_t k : keys) a.offer(k, "k");
  std::shuffle(keys.begin(), keys.end(), random);
  for (uint64_t k : keys) b.offer(k, "k");
  std::vector<KeySample> from_a, from_b;
  a.take(kP0, from_a);
  b.take({"events", 1}, from_b);
  CHECK(hashes(from_a) == hashes(from_b));
}

TEST_CASE("key sampler: keys handed out are left out of the next samples", "[copartition]") {
  KeySampler sampler;
  for (uint64_t h = 1; h <= 40; ++h) sampler.offer(h, "k");
  std::vector<KeySample> first, second;
  sampler.take(kP0, first);
  for (uint64_t h = 1; h <= 40; ++h) sampler.offer(h, "k");
  sampler.take(kP0, second);
  REQUIRE(second.size() == kKeySamplesPerPartition);
  CHECK(*hashes(second).begin() == kKeySamplesPerPartition + 1);
}

TEST_CASE("key sampler: a long key keeps one byte more than the warning shows", "[copartition]") {
  KeySampler sampler;
  sampler.offer(1, std::string(1000, 'x'));
  std::vector<KeySample> out;
  sampler.take(kP0, out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].key == std::string(kKeySampleKept, 'x'));
}

TEST_CASE("key sampler: the hash of a key is the same in every process", "[copartition]") {
  // XXH3-64 of "u1": a change here would stop old and new instances from
  // sampling the same keys.
  CHECK(key_sample_hash("\"u1\"") == key_sample_hash(std::string("\"u1\"")));
  CHECK(key_sample_hash("\"u1\"") != key_sample_hash("\"u2\""));
  CHECK(key_sample_hash("") == 0x2d06800538d394c2ULL);
}

}  // namespace
}  // namespace kpipe
