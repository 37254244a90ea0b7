#include "kpipe/programs/kconsume_positions.h"

#include <algorithm>

namespace kpipe {

// Resolved once, at a partition's first assignment (for a time, the first
// offset at or after it, or the partition's end then), so that a partition
// assigned again ends where it first would.
Status ConsumePositions::resolve_ends(const std::vector<PartitionOffset>& parts,
                                      const OffsetsForTime& lookup) {
  if (until_.kind == EndPosition::Kind::kNone) return {};
  std::vector<TopicPartition> fresh;
  for (const auto& p : parts)
    if (ends_.count({p.topic, p.partition}) == 0) fresh.push_back({p.topic, p.partition});
  if (fresh.empty()) return {};
  std::vector<Position> by_time(fresh.size(), 0);
  if (until_.kind == EndPosition::Kind::kTime) {
    auto found = lookup(fresh, until_.value);
    if (!found) return found.take_error();
    by_time = *found;
  }
  for (size_t i = 0; i < fresh.size(); ++i) ends_[fresh[i]] = resolve_end(until_, by_time[i]);
  return {};
}

void ConsumePositions::track(const PartitionOffset& p) {
  TopicPartition tp{p.topic, p.partition};
  if (auto it = positions_.find(tp); it != positions_.end()) forget(tp);
  ConsumePosition& pos = positions_[tp];
  pos.next = p.offset;
  pos.epoch = p.epoch;
  if (auto end = ends_.find(tp); end != ends_.end()) pos.end = end->second;
  // A partition that starts at or past its end contributes nothing.
  if (reached(pos.next, pos.end)) reach_end(pos);
  last_ = positions_.end();
}

void ConsumePositions::forget(const TopicPartition& tp) {
  auto it = positions_.find(tp);
  if (it == positions_.end()) return;
  if (forgotten_) forgotten_(it->second);
  positions_.erase(it);
  last_ = positions_.end();
}

void ConsumePositions::at_partition_end(ConsumePosition& pos, const Position& offset) {
  pos.at_end = true;
  // Past the last record of a transactional topic come its commit
  // markers, and aborted records a read_committed consumer skips: the
  // end's offset is past them all, so that what is committed (and
  // checkpointed) leaves no lag of markers behind. Not past --until's end,
  // though: the next run goes on from there.
  const Position& at = std::min(offset, pos.end);
  if (at > pos.next) {
    pos.next = at;
    if (skipped_) skipped_(pos);
  }
  if (reached(offset, pos.end)) reach_end(pos);
}

// Everything before the end has been read, so the position is the end
// (past offsets below it that hold no record: compacted ones, transaction
// markers), which is what -g commits and checkpoints hold. The partition
// is paused after the poll (take_ended()).
void ConsumePositions::reach_end(ConsumePosition& pos) {
  pos.ended = true;
  ended_since_pause_ = true;
  // A Kinesis shard resumes after its last record: its time end is no
  // position to move to.
  if (pos.end.is_time() || pos.next >= pos.end) return;
  pos.next = pos.end;
  if (skipped_) skipped_(pos);
}

// Stops fetching the partitions at their --until end: what the fetcher
// would bring is never written.
std::optional<std::vector<TopicPartition>> ConsumePositions::take_ended() {
  if (!ended_since_pause_) return std::nullopt;
  ended_since_pause_ = false;
  std::vector<TopicPartition> tps;
  for (auto& [tp, pos] : positions_) {
    if (!pos.ended || pos.paused) continue;
    tps.push_back(tp);
    pos.paused = true;
  }
  return tps;
}

bool ConsumePositions::finished(bool exit_at_end) const {
  return std::all_of(positions_.begin(), positions_.end(), [exit_at_end](const auto& kv) {
    return kv.second.ended || (exit_at_end && kv.second.at_end);
  });
}

}  // namespace kpipe
