// A log in memory (kpipe/log.h), for the tests of the programs that read
// one (kconsume, kjoin's topic tables) without a broker: it keeps what the
// interface promises and nothing Kafka adds. Its positions need not be
// consecutive (`step`, as Kinesis's sequence numbers are not, or a
// compacted Kafka topic's offsets): a reader resumes where the log says
// (LogEvent::resume, the record's position + 1), never where a program
// would compute the next record to be. A copy reads the same partitions
// (a second reader of one log, or a run after another) with positions of
// its own.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kpipe/log.h"

namespace kpipe {

class FakeLog final : public LogReader {
 public:
  struct Record {
    int64_t position = 0;
    std::optional<std::string> key;
    std::optional<std::string> value;
    Millis timestamp = 0;
  };
  struct Partition {
    std::vector<Record> records;
    int64_t next_position = 0;  // the position the next record appended takes
    bool closed = false;
    // Made by a split of this one (a Kinesis child shard): not listed, and
    // read as added once its parent is closed and read to its end.
    std::optional<int32_t> parent;
  };

  // Positions start at `first` and grow by `step`.
  explicit FakeLog(int64_t first = 0, int64_t step = 1)
      : first_(first), step_(step), shared_(std::make_shared<Shared>()) {}
  FakeLog(const FakeLog& other)
      : first_(other.first_), step_(other.step_), shared_(other.shared_) {}

  void add(const std::string& name, int32_t partitions) {
    for (int32_t p = 0; p < partitions; ++p) shared_->parts[{name, p}].next_position = first_;
  }
  int64_t append(const std::string& name, int32_t partition, std::optional<std::string> key,
                 std::optional<std::string> value, Millis timestamp) {
    Partition& p = parts_.at({name, partition});
    p.records.push_back({p.next_position, std::move(key), std::move(value), timestamp});
    p.next_position += step_;
    return p.records.back().position;
  }
  // A partition that `parent`'s closing makes (a Kinesis split's child).
  void add_child(const std::string& name, int32_t partition, int32_t parent) {
    Partition& p = shared_->parts[{name, partition}];
    p.next_position = first_;
    p.parent = parent;
  }
  // No record will come after the last (a closed Kinesis shard).
  void close_partition(const std::string& name, int32_t partition) {
    parts_.at({name, partition}).closed = true;
  }
  // Whether a reader of the log was closed.
  bool closed_by_reader() const { return shared_->closed; }

  // LogMetadata
  Expected<std::vector<int32_t>> partitions(const std::string& name) override {
    std::vector<int32_t> out;
    for (const auto& [tp, p] : parts_)
      if (tp.topic == name && !p.parent) out.push_back(tp.partition);
    if (out.empty()) return failure("topic '{}' does not exist", name);
    return out;
  }
  Expected<std::optional<std::vector<int32_t>>> existing_partitions(
      const std::string& name) override {
    auto found = partitions(name);
    if (!found) return std::optional<std::vector<int32_t>>();
    return std::optional<std::vector<int32_t>>(std::move(*found));
  }
  Expected<std::map<std::string, std::vector<int32_t>>> topic_partitions() override {
    std::map<std::string, std::vector<int32_t>> out;
    for (const auto& [tp, p] : parts_) out[tp.topic].push_back(tp.partition);
    return out;
  }
  Expected<std::vector<LogBounds>> bounds(const std::vector<TopicPartition>& parts) override {
    std::vector<LogBounds> out;
    for (const auto& tp : parts) {
      const Partition& p = parts_.at(tp);
      out.push_back(
          {p.records.empty() ? p.next_position : p.records.front().position, p.next_position});
    }
    return out;
  }
  Expected<std::vector<Position>> positions_at(const std::vector<TopicPartition>& parts,
                                               const std::vector<Millis>& times) override {
    std::vector<Position> out;
    for (size_t i = 0; i < parts.size(); ++i) {
      const Partition& p = parts_.at(parts[i]);
      auto it = std::find_if(p.records.begin(), p.records.end(),
                             [&](const Record& r) { return r.timestamp >= times[i]; });
      out.push_back(it == p.records.end() ? p.next_position : it->position);
    }
    return out;
  }
  Expected<std::vector<std::optional<Millis>>> timestamps_at(
      const std::vector<PartitionOffset>& at) override {
    std::vector<std::optional<Millis>> out;
    for (const auto& a : at) {
      const Partition& p = parts_.at({a.topic, a.partition});
      std::optional<Millis> t;
      for (const auto& r : p.records)
        if (r.position == a.offset) t = r.timestamp;
      out.push_back(t);
    }
    return out;
  }
  Millis timeout() const override { return 10 * kSecond; }

  // LogReader
  Status assign(const std::vector<PartitionOffset>& parts) override {
    reading_.clear();
    paused_.clear();
    for (const auto& a : parts) {
      TopicPartition tp{a.topic, a.partition};
      const Partition& p = parts_.at(tp);
      int64_t from = a.offset.offset();
      if (from == LogStart::kEarliest)
        from = p.records.empty() ? p.next_position : p.records.front().position;
      if (from == LogStart::kLatest) from = p.next_position;
      reading_[tp] = Cursor{from, false, false};
    }
    return {};
  }
  Status poll(Millis timeout, size_t max_events, const EventHandler& handler) override {
    (void)timeout;
    size_t sent = 0;
    LogEvent e;
    for (auto& [tp, cursor] : reading_) {
      if (paused_.count(tp) != 0) continue;
      const Partition& p = parts_.at(tp);
      e.record = RecordView();
      e.record.topic = tp.topic;
      e.record.partition = tp.partition;
      if (cursor.added) {
        cursor.added = false;
        e.kind = LogEvent::Kind::kAdded;
        e.resume = LogStart::kEarliest;
        ++sent;
        KPIPE_TRY(handler(e));
      }
      for (const auto& r : p.records) {
        if (sent >= max_events) return {};
        if (r.position < cursor.from) continue;
        e.kind = LogEvent::Kind::kRecord;
        e.record.offset = r.position;
        e.record.timestamp = r.timestamp;
        e.record.key = r.key ? std::optional<std::string_view>(*r.key) : std::nullopt;
        e.record.value = r.value ? std::optional<std::string_view>(*r.value) : std::nullopt;
        e.resume = r.position + 1;
        cursor.from = r.position + 1;
        cursor.caught_up = false;
        ++sent;
        KPIPE_TRY(handler(e));
      }
      if (sent >= max_events) return {};
      e.record.key.reset();
      e.record.value.reset();
      // Caught up (or closed): at the upper bound, as bounds() says it.
      e.record.offset = p.next_position;
      e.resume = p.next_position;
      if (p.closed && !cursor.closed) {
        cursor.closed = true;
        e.kind = LogEvent::Kind::kClosed;
        ++sent;
        KPIPE_TRY(handler(e));
        // Its children are read now, from their start.
        for (const auto& [child, c] : parts_)
          if (child.topic == tp.topic && c.parent == tp.partition && !reading_.count(child))
            reading_[child] =
                Cursor{c.records.empty() ? c.next_position : c.records.front().position, false,
                       false, true};
      } else if (!p.closed && !cursor.caught_up) {
        cursor.caught_up = true;
        e.kind = LogEvent::Kind::kCaughtUp;
        ++sent;
        KPIPE_TRY(handler(e));
      }
    }
    return {};
  }
  Status pause(const std::vector<TopicPartition>& parts) override {
    for (const auto& tp : parts) paused_.insert(tp);
    return {};
  }
  std::vector<TopicPartition> assignment() override {
    std::vector<TopicPartition> out;
    for (const auto& [tp, c] : reading_) out.push_back(tp);
    return out;
  }
  std::optional<int64_t> lag_hint(const std::string& name, int32_t partition) override {
    auto it = parts_.find({name, partition});
    if (it == parts_.end()) return std::nullopt;
    return it->second.next_position;
  }
  Status close() override {
    shared_->closed = true;
    return {};
  }

 private:
  struct Cursor {
    int64_t from = 0;
    bool caught_up = false;
    bool closed = false;
    bool added = false;  // to announce before its first record
  };
  struct Shared {
    std::map<TopicPartition, Partition> parts;
    bool closed = false;
  };
  int64_t first_;
  int64_t step_;
  std::shared_ptr<Shared> shared_;
  std::map<TopicPartition, Partition>& parts_ = shared_->parts;
  std::map<TopicPartition, Cursor> reading_;
  std::set<TopicPartition> paused_;
};

}  // namespace kpipe
