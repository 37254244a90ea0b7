// kconsume's partitions: where each is read to, and where --until ends it.
// The broker's answers come in from the loop (a lookup by time, the
// records and ends it fetched), so that the rules are tested without one.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "kpipe/partition.h"
#include "kpipe/programs/kconsume.h"
#include "kpipe/programs/kconsume_internal.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

class ConsumePositions {
 public:
  using Map = std::map<TopicPartition, ConsumePosition>;
  // Each partition's first offset at or after `at`, or its high watermark
  // when there is none (LogMetadata::positions_at).
  using OffsetsForTime =
      std::function<Expected<std::vector<Position>>(const std::vector<TopicPartition>&, Millis at)>;

  explicit ConsumePositions(EndPosition until) : until_(until) {}
  ConsumePositions(const ConsumePositions&) = delete;
  ConsumePositions& operator=(const ConsumePositions&) = delete;

  // Called when a position moves on past offsets that hold no record
  // written (transaction markers, --until's end), with the position moved.
  void on_skipped(std::function<void(ConsumePosition&)> f) { skipped_ = std::move(f); }
  // Called before a partition's position goes away.
  void on_forgotten(std::function<void(const ConsumePosition&)> f) { forgotten_ = std::move(f); }

  bool has_until() const { return until_.kind != EndPosition::Kind::kNone; }
  // --until: each partition's end, resolved once, at its first assignment.
  Status resolve_ends(const std::vector<PartitionOffset>& parts, const OffsetsForTime& lookup);
  // The end resolve_ends() gave `tp`.
  const Position& end_of(const TopicPartition& tp) const { return ends_.at(tp); }

  // Reads `p` from its offset on, at its epoch (anew, if it is held).
  void track(const PartitionOffset& p);
  // A partition taken away: none of its offsets may be committed any more.
  void forget(const TopicPartition& tp);

  // The partition's position, if it is held. Records arrive in runs from
  // one partition: the last lookup is remembered, and no key string is
  // built per record.
  ConsumePosition* find(std::string_view topic, int32_t partition) {
    if (last_ != positions_.end() && last_->first.partition == partition &&
        last_->first.topic == topic)
      return &last_->second;
    key_.topic.assign(topic);
    key_.partition = partition;
    last_ = positions_.find(key_);
    return last_ == positions_.end() ? nullptr : &last_->second;
  }

  // A record at `offset` of `pos`'s partition, written at `timestamp`, was
  // fetched, after which the partition resumes at `resume` (LogEvent):
  // false if it is past --until's end, and so never written.
  bool read(ConsumePosition& pos, const Position& offset, const Position& resume,
            int64_t timestamp = -1) {
    // A Kinesis shard's end is a time (its records' sequence numbers say
    // nothing of it): the first record that arrived at or after it.
    if (pos.end.is_time() ? timestamp >= pos.end.time() : offset >= pos.end) {
      reach_end(pos);
      return false;
    }
    pos.at_end = false;
    pos.next = resume;
    // The last record before the end: the partition is done without
    // waiting for one past it, which may never come.
    if (reached(pos.next, pos.end)) reach_end(pos);
    return true;
  }
  // Whether a partition that resumes at `at` is at its --until `end`: a
  // Kinesis shard's time end is reached only by a record's time (read()),
  // or by a start at or past it.
  static bool reached(const Position& at, const Position& end) {
    if (end.is_time()) return at.is_time() && at >= end;
    return at >= end;
  }
  // The fetcher reached the end of `pos`'s partition, at `offset`.
  void at_partition_end(ConsumePosition& pos, const Position& offset);
  // A partition at its --until end.
  void reach_end(ConsumePosition& pos);
  // The partitions to pause since the last call, marked paused; nothing if
  // none reached its end since.
  std::optional<std::vector<TopicPartition>> take_ended();
  // Whether every partition is at its --until end, or, with -e, at its
  // end or its --until end.
  bool finished(bool exit_at_end) const;

  bool empty() const { return positions_.empty(); }
  size_t size() const { return positions_.size(); }
  bool contains(const TopicPartition& tp) const { return positions_.count(tp) != 0; }
  // The position of a held partition (a map's operator[]).
  ConsumePosition& operator[](const TopicPartition& tp) { return positions_[tp]; }
  Map::iterator begin() { return positions_.begin(); }
  Map::iterator end() { return positions_.end(); }
  Map::const_iterator begin() const { return positions_.begin(); }
  Map::const_iterator end() const { return positions_.end(); }

 private:
  EndPosition until_;
  // --until: where each partition ends, resolved at its first assignment.
  std::map<TopicPartition, Position> ends_;
  bool ended_since_pause_ = false;  // a partition reached its end since take_ended()
  Map positions_;
  Map::iterator last_ = positions_.end();
  TopicPartition key_;
  std::function<void(ConsumePosition&)> skipped_;
  std::function<void(const ConsumePosition&)> forgotten_;
};

}  // namespace kpipe
