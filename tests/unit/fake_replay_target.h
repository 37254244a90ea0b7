// A replay target in memory for the replay protocol's tests
// (dlq_replay_test, dlq_log_test): a topic whose records keep their
// replay ids, or a stream's way, found by content.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "kpipe/dlq_replay.h"

namespace kpipe {

// A topic in memory. A "kill" is simulated by limits: after `arrivals`
// sends nothing more reaches the topic, and after `acks` deliveries no more
// are acknowledged; the batch where either runs out fails, as a replay
// killed there would: what it marked is marked, the rest is in doubt.
class FakeTopic final : public ReplayTarget {
 public:
  explicit FakeTopic(bool later = true) : later_(later) {}
  std::vector<std::pair<std::string, std::string>> records;  // replay id, payload
  size_t arrivals = SIZE_MAX;
  size_t acks = SIZE_MAX;
  size_t close_after = SIZE_MAX;  // synchronous target: the pipe closes
  // The send of this index (from 0, over the target's life) never
  // arrives, while those after it may: a record the service refused, its
  // retry cut short by the kill.
  size_t lose = SIZE_MAX;
  std::function<void()> on_send;
  // A Kinesis stream's way: records keep no replay id, and an in-doubt
  // entry is found by its payload.
  bool by_content = false;
  bool finds_by_content() const override { return by_content; }
  std::string name = "kafka:fake";  // "kinesis:fake" for a stream's

  std::string describe() const override { return later_ ? name : "<stdout>"; }
  bool acknowledges_later() const override { return later_; }
  Expected<bool> send(const ReplayItem& item, uint64_t tag) override {
    if (on_send) on_send();
    if (!later_) {
      if (records.size() >= close_after) return false;
      records.emplace_back(item.replay_id, item.entry.payload);
      return true;
    }
    ++sent_in_batch_;
    if (sends_++ == lose || arrivals == 0) return true;
    --arrivals;
    ++arrived_count;
    records.emplace_back(item.replay_id, item.entry.payload);
    arrived_.push_back(tag);
    return true;
  }
  Status flush(std::vector<uint64_t>& delivered) override {
    bool killed = arrived_.size() < sent_in_batch_;
    for (uint64_t tag : arrived_) {
      if (acks == 0) {
        killed = true;
        break;
      }
      --acks;
      ++acked_count;
      delivered.push_back(tag);
    }
    arrived_.clear();
    sent_in_batch_ = 0;
    if (killed) return failure("killed");
    return {};
  }
  Expected<std::string> mark() override { return std::to_string(records.size()); }
  Expected<std::set<std::string>> delivered_since(
      const std::string& mark, const std::string& prefix,
      const std::vector<ReplayItem>& in_doubt) override {
    ++scans;
    std::set<std::string> out;
    if (by_content) {
      std::multimap<std::string, std::string> wanted;  // payload, replay id
      for (const ReplayItem& item : in_doubt) wanted.emplace(item.entry.payload, item.replay_id);
      for (size_t i = std::stoul(mark); i < records.size(); ++i) {
        auto it = wanted.find(records[i].second);
        if (it == wanted.end()) continue;
        out.insert(it->second);
        wanted.erase(it);
      }
      return out;
    }
    for (size_t i = std::stoul(mark); i < records.size(); ++i)
      if (records[i].first.starts_with(prefix)) out.insert(records[i].first);
    return out;
  }
  int scans = 0;
  size_t arrived_count = 0;
  size_t acked_count = 0;

 private:
  bool later_;
  std::vector<uint64_t> arrived_;
  size_t sent_in_batch_ = 0;
  size_t sends_ = 0;
};

// Each entry's payload exactly once, whatever the order.
inline void check_exactly_once(const FakeTopic& topic, size_t entries) {
  std::map<std::string, int> count;
  for (const auto& [id, payload] : topic.records) ++count[payload];
  CHECK(count.size() == entries);
  for (const auto& [payload, n] : count) {
    INFO(payload);
    CHECK(n == 1);
  }
  CHECK(topic.records.size() == entries);
}

}  // namespace kpipe
