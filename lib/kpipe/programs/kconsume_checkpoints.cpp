#include "kpipe/programs/kconsume_checkpoints.h"

#include <chrono>
#include <thread>

#include "kpipe/control.h"
#include "kpipe/stage/bad_input.h"
#include "kpipe/store/state_store.h"

namespace kpipe {

ConsumeCheckpoints::ConsumeCheckpoints(const ConsumeOptions& options, StateStore& state,
                                       OpenedReader& reader, Io& io, ConsumePositions& positions,
                                       BadInputHandler& bad, Millis interval, bool instance)
    : options_(options),
      state_(state),
      reader_(reader),
      io_(io),
      positions_(positions),
      bad_(bad),
      interval_(interval),
      instance_(instance) {}

bool ConsumeCheckpoints::grouped() const {
  return !options_.group.empty();
}

Status ConsumeCheckpoints::init() {
  auto next = state_.next_checkpoint_id();
  if (!next) return next.take_error();
  next_checkpoint_ = *next;
  auto latest = state_.latest_complete();
  if (!latest) return latest.take_error();
  // A checkpoint completed while kconsume was down is mirrored at the
  // first chance; one already seen is not mirrored again.
  mirrored_ = 0;
  auto offsets = state_.offsets();
  if (!offsets) return offsets.take_error();
  for (const auto& o : *offsets) saved_[{o.topic, o.partition}] = o.offset;
  return {};
}

// A transactional kproduce commits a checkpoint in Kafka first (its
// records and the group's offsets, tagged with the checkpoint's id), then
// completes it in the state store; killed between the two, the store lags
// Kafka by that checkpoint. It is completed here, before kconsume resumes
// and before it writes the first line that lets the stages restore
// (kpipe(7), EXACTLY ONCE INTO KAFKA).
Status ConsumeCheckpoints::complete_committed() {
  // An instance repairs per partition, as it claims them (repair()).
  if (!grouped() || owned()) return {};
  auto latest = state_.latest_complete();
  if (!latest) return latest.take_error();
  auto next = state_.next_checkpoint_id();
  if (!next) return next.take_error();
  int64_t complete = latest->value_or(0);
  if (*next - 1 <= complete) return {};  // none emitted since
  std::vector<TopicPartition> tps;
  for (const auto& topic : options_.topics) {
    auto ids = reader_.log->partitions(topic);
    if (!ids) return ids.take_error();
    for (int32_t p : *ids) tps.push_back({topic, p});
  }
  std::vector<std::string> metadata;
  auto committed = reader_.offsets->committed(tps, &metadata);
  if (!committed) return committed.take_error();
  // The checkpoints this store emitted and has not completed.
  auto records = state_.checkpoints();
  if (!records) return records.take_error();
  std::map<int64_t, Millis> open;
  for (const auto& r : *records)
    if (r.id > complete && !r.completed_at) open[r.id] = r.emitted_at;
  std::optional<CheckpointMark> newest;
  for (const auto& m : metadata) {
    auto mark = parse_checkpoint_commit_metadata(m);
    auto it = mark ? open.find(mark->id) : open.end();
    if (it == open.end() || it->second != mark->at) continue;  // not this store's
    if (!newest || mark->id > newest->id) newest = mark;
  }
  if (!newest) return {};
  Checkpoint c;
  c.id = newest->id;
  c.at = newest->at;
  c.group = options_.group;
  for (size_t i = 0; i < tps.size(); ++i)
    if ((*committed)[i] && parse_checkpoint_commit_metadata(metadata[i]) == newest)
      c.offsets.push_back({tps[i].topic, tps[i].partition, *(*committed)[i]});
  KPIPE_TRY(state_.complete(c, kTransactionCompleter, io_.clock.now()));
  io_.reporter.info(
      fmt::format("checkpoint {} was committed in Kafka by group '{}' but not complete in '{}': "
                  "completed now",
                  c.id, options_.group, display_target(options_.state)));
  return {};
}

// A transactional kproduce of the partitions' last owner committed a
// checkpoint in Kafka (its records and these offsets, tagged with its id)
// and died before completing it in the store: completed here for these
// partitions, before the claim keeps their state as of it (kpipe(7),
// EXACTLY ONCE INTO KAFKA and MANY INSTANCES). The offsets' fetch waits
// while a transaction holds them (read_committed): the last owner's
// restart fences its open one at once, another's Kafka aborts at its
// transaction timeout.
Status ConsumeCheckpoints::repair(const std::vector<TopicPartition>& tps,
                                  const std::vector<std::optional<int64_t>>& committed,
                                  const std::vector<std::string>& metadata) {
  std::map<int64_t, Checkpoint> found;
  for (size_t i = 0; i < tps.size(); ++i) {
    if (!committed[i] || i >= metadata.size()) continue;
    auto mark = parse_checkpoint_commit_metadata(metadata[i]);
    if (!mark) continue;
    Checkpoint& c = found[mark->id];
    c.id = mark->id;
    c.at = mark->at;
    c.group = options_.group;
    c.offsets.push_back({tps[i].topic, tps[i].partition, *committed[i]});
  }
  if (found.empty()) return {};
  auto records = state_.checkpoints();
  if (!records) return records.take_error();
  std::map<int64_t, const CheckpointRecord*> by_id;
  for (const auto& r : *records) by_id[r.id] = &r;
  for (auto& [id, c] : found) {
    auto it = by_id.find(id);
    // Not this store's checkpoint (a store deleted and made anew), or
    // already complete for these partitions (complete_committed skips
    // those).
    if (it == by_id.end() || it->second->emitted_at != c.at) continue;
    KPIPE_TRY(state_.complete_committed(c, kTransactionCompleter, io_.clock.now()));
    if (!it->second->completed_at)
      io_.reporter.info(fmt::format(
          "checkpoint {} was committed in Kafka by group '{}' but not complete in '{}': "
          "completed now for {} partitions",
          c.id, options_.group, display_target(options_.state), c.offsets.size()));
  }
  return {};
}

Status ConsumeCheckpoints::claim(std::vector<PartitionOffset>& parts) {
  std::vector<TopicPartition> tps;
  for (const auto& p : parts) tps.push_back({p.topic, p.partition});
  auto claims = state_.claim(tps, io_.clock.now());
  if (!claims) return claims.take_error();
  std::map<TopicPartition, const PartitionClaim*> by_partition;
  for (const auto& c : *claims) by_partition[c.partition] = &c;
  for (auto& p : parts) {
    const PartitionClaim& c = *by_partition.at({p.topic, p.partition});
    p.epoch = c.epoch;
    TopicPartition tp{p.topic, p.partition};
    if (c.offset) {
      saved_[tp] = *c.offset;
    } else {
      saved_.erase(tp);
    }
  }
  return {};
}

std::optional<Position> ConsumeCheckpoints::saved_position(const TopicPartition& tp) const {
  auto it = saved_.find(tp);
  if (it == saved_.end()) return std::nullopt;
  return it->second;
}

Status ConsumeCheckpoints::tick(Millis now) {
  if (now - last_checkpoint_ < interval_) return {};
  KPIPE_TRY(emit());
  if (grouped()) KPIPE_TRY(mirror_complete());
  return {};
}

Status ConsumeCheckpoints::on_tick(Millis now) {
  if (!grouped() || now - last_mirror_ < interval_) return {};
  last_mirror_ = now;
  return mirror_complete();
}

Status ConsumeCheckpoints::emit() {
  last_checkpoint_ = io_.clock.steady();
  // A checkpoint passes no record whose dead letter is not durable.
  KPIPE_TRY(bad_.sync());
  // Before the group assigns anything there is no position to save.
  if (io_.out.closed() || positions_.empty()) return {};
  Checkpoint c;
  c.at = io_.clock.now();
  c.group = options_.group;
  for (const auto& [tp, pos] : positions_)
    c.offsets.push_back({tp.topic, tp.partition, pos.next, pos.epoch});
  // The records since the last barrier are this checkpoint's: their
  // times give its end-to-end latency once it completes.
  std::optional<TimestampSummary> times = timestamps_.take();
  // The member that read these offsets, for a transactional kproduce to
  // commit them as (KIP-447): a zombie's are refused by the group.
  if (owned()) c.member = reader_.group->member();
  if (owned()) {
    auto id = state_.record_emitted(c.at, times);
    if (!id) return id.take_error();
    c.id = *id;
  } else {
    c.id = next_checkpoint_++;
    KPIPE_TRY(state_.record_emitted(c.id, c.at, times));
  }
  append_checkpoint(io_.out.buffer(), c);
  KPIPE_TRY(io_.out.flush());
  last_emitted_ = c.id;
  written_since_ = false;
  return {};
}

Status ConsumeCheckpoints::hand_over() {
  if (written_since_ || last_emitted_ == 0) KPIPE_TRY(emit());
  return await_and_mirror(last_emitted_, owned() ? kHandOverWait : kDrainWait);
}

// Once per checkpoint: a pipeline whose terminal stage never completes one
// would wait each time.
Status ConsumeCheckpoints::settle() {
  if (positions_.empty() || !(written_since_ || last_emitted_ == 0 || last_emitted_ != settled_))
    return {};
  if (written_since_ || last_emitted_ == 0) KPIPE_TRY(emit());
  KPIPE_TRY(await_and_mirror(last_emitted_, kDrainWait));
  settled_ = last_emitted_;
  return {};
}

Status ConsumeCheckpoints::finish() {
  // The final checkpoint follows every record written (kpipe(7), CONTROL LINES AND
  // CHECKPOINTS).
  KPIPE_TRY(emit());
  // (A member the group gave no partition emitted none.) A transactional
  // kproduce's commit may take longer after a broker failed: this member
  // leaves the group only after it.
  if (!grouped() || last_emitted_ == 0) return {};
  auto committing = completer_running();
  if (!committing) return committing.take_error();
  return await_and_mirror(last_emitted_, *committing ? kHandOverWait : kDrainWait);
}

// Mirrors the newest complete checkpoint's offsets into the consumer
// group, so that klag and Kafka's own tools see true progress. Only
// complete offsets are ever committed.
Status ConsumeCheckpoints::mirror_complete() {
  if (owned()) return mirror_owned();
  auto latest = state_.latest_complete();
  if (!latest) return latest.take_error();
  if (!*latest || **latest <= mirrored_) return {};
  // A transactional kproduce committed the group's offsets with the
  // checkpoint itself, tagged with its id: a commit of ours could only
  // set them back.
  auto by = state_.completed_by(**latest);
  if (!by) return by.take_error();
  if (*by == kTransactionCompleter) {
    mirrored_ = **latest;
    return {};
  }
  auto offsets = state_.offsets();
  if (!offsets) return offsets.take_error();
  std::vector<PartitionOffset> commit;
  for (const auto& o : *offsets) {
    if (o.checkpoint > **latest) continue;
    if (!positions_.contains({o.topic, o.partition})) continue;
    commit.push_back({o.topic, o.partition, o.offset});
  }
  // A group that is rebalancing refuses: mirror again next time.
  bool committed = true;
  KPIPE_TRY(reader_.offsets->commit(commit, &committed));
  if (committed) mirrored_ = **latest;
  return {};
}

// An instance mirrors each of its partitions' stored positions, which
// other instances' checkpoints do not move.
Status ConsumeCheckpoints::mirror_owned() {
  auto offsets = state_.offsets();
  if (!offsets) return offsets.take_error();
  std::vector<PartitionOffset> commit;
  std::map<int64_t, bool> by_transaction;  // per checkpoint
  for (const auto& o : *offsets) {
    ConsumePosition* pos = positions_.find(o.topic, o.partition);
    if (pos == nullptr || o.checkpoint == 0 || o.offset <= pos->committed) continue;
    // A transaction committed these with its checkpoint already, tagged
    // with its id: a commit of ours could only set them back.
    auto [known, fresh] = by_transaction.try_emplace(o.checkpoint, false);
    if (fresh) {
      auto by = state_.completed_by(o.checkpoint);
      if (!by) return by.take_error();
      known->second = *by == kTransactionCompleter;
    }
    if (known->second) continue;
    commit.push_back({o.topic, o.partition, o.offset});
  }
  if (commit.empty()) return {};
  bool committed = true;
  KPIPE_TRY(reader_.offsets->commit(commit, &committed));
  if (!committed) return {};
  for (const auto& o : commit) positions_[{o.topic, o.partition}].committed = o.offset;
  return {};
}

// Whether checkpoint `id` is complete.
Expected<bool> ConsumeCheckpoints::complete(int64_t id) {
  if (owned()) {
    auto by = state_.completed_by(id);
    if (!by) return by.take_error();
    return !by->empty();
  }
  auto latest = state_.latest_complete();
  if (!latest) return latest.take_error();
  return *latest && **latest >= id;
}

// Waits (bounded) for the pipeline's terminal stage to complete checkpoint
// `id`, then mirrors it. Downstream stages run in other processes: this is
// waiting on the state file, not on time passing. A reader that has gone
// (SIGTERM stops every stage at once) will not pass `id` on, so the wait
// ends then; but in an instance a transactional kproduce may still be
// committing an earlier checkpoint as this member: until it is done or
// gone, the member stays in the group, which would refuse that commit from
// a member that has left (kpipe(7), MANY INSTANCES).
Status ConsumeCheckpoints::await_and_mirror(int64_t id, Millis wait) {
  Millis deadline = io_.clock.steady() + wait;
  for (;;) {
    auto done = complete(id);
    if (!done) return done.take_error();
    if (*done) break;
    bool waiting = io_.clock.steady() < deadline;
    if (waiting && io_.out.check_closed()) {
      auto committing = completer_running();
      if (!committing) return committing.take_error();
      waiting = *committing;
    }
    if (!waiting) {
      io_.reporter.info(fmt::format(
          "checkpoint {} not complete yet; the group keeps its last complete offsets", id));
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return mirror_complete();
}

// Whether this instance's transactional kproduce runs: it commits the
// checkpoints' offsets as this member of the group.
Expected<bool> ConsumeCheckpoints::completer_running() {
  if (!owned()) return false;
  return state_.stage_running(kTransactionCompleter, state_.pipeline_name());
}

}  // namespace kpipe
