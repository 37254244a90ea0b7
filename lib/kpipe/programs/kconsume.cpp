#include "kpipe/programs/kconsume.h"

#include <algorithm>
#include <charconv>
#include <deque>
#include <map>
#include <optional>

#include <xxhash.h>

#include "kpipe/choices.h"
#include "kpipe/control.h"
#include "kpipe/envelope.h"
#include "kpipe/kafka/kafka_log.h"
#include "kpipe/kafka/topic.h"
#include "kpipe/programs/dlq_targets.h"
#include "kpipe/programs/kconsume_checkpoints.h"
#include "kpipe/programs/kconsume_internal.h"
#include "kpipe/programs/kconsume_positions.h"
#include "kpipe/programs/payloads.h"
#include "kpipe/stats.h"
#include "kpipe/store/state_store.h"

namespace kpipe {

Expected<StartPosition> parse_start_position(std::string_view text, Millis now) {
  StartPosition p;
  if (text == "earliest" || text == "beginning") return p;
  if (text == "latest" || text == "end") {
    p.kind = StartPosition::Kind::kLatest;
    return p;
  }
  if (!text.empty() && text[0] == '@') {
    auto t = parse_time_point(text.substr(1), now);
    if (!t) return usage_error("--from '{}': {}", text, t.error().message);
    p.kind = StartPosition::Kind::kTime;
    p.value = *t;
    return p;
  }
  bool negative = !text.empty() && text[0] == '-';
  std::string_view digits = negative ? text.substr(1) : text;
  int64_t n = 0;
  auto r = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  // from_chars takes a sign of its own: "--5" must not count back -5.
  if (digits.empty() || digits[0] == '-' || r.ec != std::errc() ||
      r.ptr != digits.data() + digits.size()) {
    std::string best = closest_choice(text, {"earliest", "latest"});
    if (!best.empty()) return usage_error("--from '{}': did you mean '{}'?", text, best);
    return usage_error("--from '{}': expected earliest, latest, an offset, -N or @TIME", text);
  }
  p.kind = negative ? StartPosition::Kind::kFromEnd : StartPosition::Kind::kOffset;
  p.value = n;
  return p;
}

Expected<EndPosition> parse_end_position(std::string_view text, Millis now) {
  EndPosition p;
  if (text.empty()) return p;
  if (text[0] == '@') {
    auto t = parse_time_point(text.substr(1), now);
    if (!t) return usage_error("--until '{}': {}", text, t.error().message);
    p.kind = EndPosition::Kind::kTime;
    p.value = *t;
    return p;
  }
  int64_t n = 0;
  auto r = std::from_chars(text.data(), text.data() + text.size(), n);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size() || n < 0)
    return usage_error("--until '{}': expected an offset or @TIME", text);
  p.kind = EndPosition::Kind::kOffset;
  p.value = n;
  return p;
}

Position resolve_end(const EndPosition& until, const Position& position_for_time) {
  switch (until.kind) {
    case EndPosition::Kind::kNone:
      return kNoEnd;
    case EndPosition::Kind::kOffset:
      return until.value;
    case EndPosition::Kind::kTime:
      return std::max(position_for_time, Position(0));
  }
  return kNoEnd;
}

Expected<std::vector<int32_t>> parse_partition_list(std::string_view text) {
  std::vector<int32_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string_view item =
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    pos = comma == std::string_view::npos ? text.size() + 1 : comma + 1;
    size_t dash = item.find('-');
    std::string_view a = item.substr(0, dash);
    std::string_view b = dash == std::string_view::npos ? a : item.substr(dash + 1);
    int32_t lo = 0, hi = 0;
    auto ra = std::from_chars(a.data(), a.data() + a.size(), lo);
    auto rb = std::from_chars(b.data(), b.data() + b.size(), hi);
    if (a.empty() || b.empty() || ra.ec != std::errc() || rb.ec != std::errc() ||
        ra.ptr != a.data() + a.size() || rb.ptr != b.data() + b.size() || lo < 0 || hi < lo)
      return usage_error("--partitions '{}': expected a list like 0,2-5", text);
    // A typo like 0-99999999 would otherwise take gigabytes (and a range up
    // to INT32_MAX overflowed the counter and never ended).
    constexpr int64_t kMaxListed = int64_t{1} << 20;
    if (int64_t{hi} - lo + 1 + static_cast<int64_t>(out.size()) > kMaxListed)
      return usage_error("--partitions '{}': too many partitions", text);
    for (int64_t p = lo; p <= hi; ++p) out.push_back(static_cast<int32_t>(p));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

int64_t resolve_start(const StartPosition& from, int64_t low, int64_t high,
                      int64_t offset_for_time) {
  switch (from.kind) {
    case StartPosition::Kind::kEarliest:
      return low;
    case StartPosition::Kind::kLatest:
      return high;
    case StartPosition::Kind::kOffset:
      return std::clamp(from.value, low, high);
    case StartPosition::Kind::kFromEnd:
      return std::max(low, high - from.value);
    case StartPosition::Kind::kTime:
      return std::clamp(offset_for_time, low, high);
  }
  return low;
}

namespace {

// How often (in records) the records the reader has passed are folded
// into the offsets to commit. Records not yet read are at most what the
// pipe and the output buffer hold, since writes block once the pipe is full.
constexpr size_t kFoldEvery = 4096;
// How often a member at the end of its partitions looks at the group's
// end (kconsume -g -e).
constexpr Millis kGroupEndPoll = kSecond;

class ConsumeLoop {
 public:
  ConsumeLoop(const ConsumeOptions& options, OpenedReader& reader, Io& io, StartPosition from,
              EndPosition until, std::vector<int32_t> only, Millis commit_interval,
              StatsSettings stats, StateStore* state, Millis checkpoint_interval, bool instance,
              PayloadDecoder& decoder, BadInputHandler& bad)
      : options_(options),
        reader_(reader),
        log_(*reader.log),
        io_(io),
        from_(from),
        until_(until),
        positions_(until),
        only_(std::move(only)),
        commit_interval_(commit_interval),
        value_only_(options.format == "value"),
        ticker_(io.program, std::move(stats), io.reporter, io.clock),
        state_(state),
        instance_(instance),
        decoder_(decoder.active() ? &decoder : nullptr),
        bad_(bad) {
    if (state != nullptr)
      checkpoints_.emplace(options, *state, reader, io, positions_, bad, checkpoint_interval,
                           instance);
    // A position that moves on without a record written, or goes away:
    // what -g without --state commits follows it.
    positions_.on_skipped([this](ConsumePosition& pos) {
      if (grouped() && !checkpoints_) unread_.push_back({io_.out.end_position(), &pos, pos.next});
    });
    positions_.on_forgotten([this](const ConsumePosition& gone) {
      std::erase_if(unread_, [&gone](const Written& w) { return w.position == &gone; });
    });
  }

  Status init_state() {
    if (!checkpoints_) return {};
    return checkpoints_->init();
  }

  Status complete_committed() {
    if (!checkpoints_) return {};
    return checkpoints_->complete_committed();
  }

  // Where the state file says a partition resumes, if it knows.
  std::optional<Position> saved_position(const TopicPartition& tp) const {
    if (!checkpoints_) return std::nullopt;
    return checkpoints_->saved_position(tp);
  }

  // Start offsets for partitions, by --from.
  Status resolve(std::vector<PartitionOffset>& parts) {
    // A Kinesis shard starts at its trim horizon, or at a time: the time
    // --from names, or for latest the time it was started, so that a
    // restart before its first record reads from there (kpipe(7), LOGS).
    if (!log_.consecutive_positions()) {
      for (auto& p : parts) {
        switch (from_.kind) {
          case StartPosition::Kind::kEarliest:
            p.offset = LogStart::kEarliest;
            break;
          case StartPosition::Kind::kLatest:
            p.offset = Position::arrived_at(io_.clock.now());
            break;
          case StartPosition::Kind::kTime:
            p.offset = Position::arrived_at(from_.value);
            break;
          default:  // refused by run_consume
            return usage_error("--from: a Kinesis shard has no offsets");
        }
      }
      return {};
    }
    std::vector<TopicPartition> tps;
    for (const auto& p : parts) tps.push_back({p.topic, p.partition});
    auto marks = log_.bounds(tps);
    if (!marks) return marks.take_error();
    std::vector<Position> by_time(parts.size(), 0);
    if (from_.kind == StartPosition::Kind::kTime) {
      auto found = log_.positions_at(tps, std::vector<Millis>(tps.size(), from_.value));
      if (!found) return found.take_error();
      by_time = *found;
    }
    for (size_t i = 0; i < parts.size(); ++i)
      parts[i].offset =
          resolve_start(from_, (*marks)[i].low, (*marks)[i].high, by_time[i].offset());
    return {};
  }

  // --until: each partition's end, by the broker's offsets for its time.
  Status resolve_ends(const std::vector<PartitionOffset>& parts) {
    return positions_.resolve_ends(
        parts, [this](const std::vector<TopicPartition>& tps, Millis at) {
          return log_.positions_at(tps, std::vector<Millis>(tps.size(), at));
        });
  }

  Status start_assigned() {
    std::vector<PartitionOffset> parts;
    for (const auto& topic : options_.topics) {
      auto ids = log_.partitions(topic);
      if (!ids) return ids.take_error();
      for (int32_t p : *ids) {
        if (!only_.empty() && !std::binary_search(only_.begin(), only_.end(), p)) continue;
        parts.push_back({topic, p, 0});
      }
      if (!only_.empty()) {
        for (int32_t p : only_)
          if (!std::binary_search(ids->begin(), ids->end(), p))
            return usage_error("topic '{}' has no partition {}", topic, p);
      }
    }
    KPIPE_TRY(resolve(parts));
    KPIPE_TRY(resolve_ends(parts));
    for (auto& p : parts) {
      if (auto saved = saved_position({p.topic, p.partition})) p.offset = *saved;
      positions_.track(p);
      if (until_.kind != EndPosition::Kind::kNone)
        io_.reporter.info(fmt::format("{} [{}] from offset {} until offset {}", p.topic,
                                      p.partition, p.offset,
                                      positions_.end_of({p.topic, p.partition})));
    }
    announce(PartitionEvent::Kind::kAssigned, parts);
    return log_.assign(parts);
  }

  Status start_group() {
    for (const auto& topic : options_.topics) {
      auto ids = log_.partitions(topic);
      if (!ids) return ids.take_error();
    }
    return reader_.group->subscribe(
        options_.topics,
        [this](std::vector<PartitionOffset>& parts) -> Status {
          // A rebalance while close() leaves the group (another member
          // left too): what is assigned now is revoked at once, unread.
          // An instance must not claim it from its next owner, and the
          // group's coordinator may not answer a closing member.
          if (closing_) return {};
          joined_ = true;
          std::vector<TopicPartition> tps;
          for (const auto& p : parts) tps.push_back({p.topic, p.partition});
          std::vector<std::string> metadata;
          auto committed = reader_.offsets->committed(tps, owned() ? &metadata : nullptr,
                                                      owned() ? kTransactionHoldWait : 0);
          if (!committed) return committed.take_error();
          // An instance takes its partitions over in the state store
          // first (kpipe(7), MANY INSTANCES): from now on what their last
          // owner still writes for them is refused, and they resume from
          // the checkpoint that last completed each.
          if (owned()) {
            KPIPE_TRY(checkpoints_->repair(tps, *committed, metadata));
            KPIPE_TRY(checkpoints_->claim(parts));
          }
          std::vector<PartitionOffset> fresh;
          std::vector<size_t> fresh_index;
          for (size_t i = 0; i < parts.size(); ++i) {
            // The newest complete checkpoint wins over the group's offset:
            // the group only mirrors it, and may lag behind.
            if (auto saved = saved_position(tps[i])) {
              parts[i].offset = *saved;
            } else if ((*committed)[i]) {
              parts[i].offset = *(*committed)[i];
            } else {
              fresh.push_back(parts[i]);
              fresh_index.push_back(i);
            }
          }
          if (!fresh.empty()) {
            KPIPE_TRY(resolve(fresh));
            for (size_t k = 0; k < fresh.size(); ++k)
              parts[fresh_index[k]].offset = fresh[k].offset;
          }
          KPIPE_TRY(resolve_ends(parts));
          for (const auto& p : parts) {
            positions_.track(p);
            std::string until;
            if (until_.kind != EndPosition::Kind::kNone)
              until = fmt::format(" until offset {}", positions_.end_of({p.topic, p.partition}));
            if (p.epoch > 0) {
              io_.reporter.info(fmt::format("assigned {} [{}] from offset {}{} (epoch {})", p.topic,
                                            p.partition, p.offset, until, p.epoch));
            } else {
              io_.reporter.info(fmt::format("assigned {} [{}] from offset {}{}", p.topic,
                                            p.partition, p.offset, until));
            }
          }
          announce(PartitionEvent::Kind::kAssigned, parts);
          return {};
        },
        [this](const std::vector<TopicPartition>& parts, bool lost) -> Status {
          if (owned() && lost) {
            // Another member owns them already: a checkpoint for them
            // would be refused, and the stages drop their state.
            io_.reporter.warning(fmt::format(
                "{} partitions were lost (no heartbeat reached the group's coordinator within "
                "the session timeout: this instance paused, the network failed or the broker "
                "went away): their records since the last complete checkpoint are read again "
                "by their new owner",
                parts.size()));
          } else if (checkpoints_ && closing_) {
            // close() revokes after the final checkpoint, awaited already.
          } else if (checkpoints_) {
            // Hand the partitions over at a checkpoint, so that the next
            // owner resumes where this pipeline's output ends.
            Millis began = io_.clock.steady();
            KPIPE_TRY(checkpoints_->hand_over());
            // What a move costs the partitions that move (kpipe(7), MANY
            // INSTANCES): the time they wait for their last checkpoint.
            if (owned() && !closing_)
              io_.reporter.info(fmt::format(
                  "handing {} partitions over at checkpoint {} took {} ms", parts.size(),
                  checkpoints_->last_emitted(), io_.clock.steady() - began));
          } else {
            // After the final commit (close() revokes too), what is
            // unread now stays so: the final commit waited already.
            KPIPE_TRY(finished_ ? commit_delivered(/*revoking=*/true)
                                : commit_delivered_at_end(/*revoking=*/true));
          }
          for (const auto& tp : parts) positions_.forget(tp);
          // Until the group assigns again (an eager rebalance revokes
          // everything first), having no partition is not being done.
          joined_ = false;
          // An instance's output ends here: its stages keep what they hold
          // to the end of their input (kwindow --flush-at-end fires it).
          if (owned() && closing_) return {};
          std::vector<PartitionOffset> gone;
          for (const auto& tp : parts) gone.push_back({tp.topic, tp.partition, 0});
          announce(PartitionEvent::Kind::kRevoked, gone);
          io_.reporter.info(fmt::format("{} partitions revoked", parts.size()));
          return {};
        });
  }

  Status run() {
    Output& out = io_.out;
    last_commit_ = io_.clock.steady();
    if (checkpoints_) checkpoints_->start(last_commit_);
    // Timers fire while a slow reader holds a write up (kpipe(7), CONTROL
    // LINES AND CHECKPOINTS): commits and --stats keep their pace.
    out.set_tick_hook([this] { return on_tick(); });
    struct Unhook {
      Output& out;
      ~Unhook() { out.set_tick_hook(nullptr); }
    } unhook{out};
    auto handler = [this, &out](const LogEvent& e) -> Status {
      if (done_) return {};
      ConsumePosition* pos = positions_.find(e.record.topic, e.record.partition);
      // A closed partition (a Kinesis shard after a split or a merge) is
      // at its end for good; Kafka's never close.
      if (e.kind == LogEvent::Kind::kAdded) return added(e);
      if (e.kind != LogEvent::Kind::kRecord) {
        if (pos == nullptr || pos->ended) return {};
        positions_.at_partition_end(*pos, e.resume);
        // Read to its end for good, it holds no event time back any more.
        if (e.kind == LogEvent::Kind::kClosed)
          announce(PartitionEvent::Kind::kRevoked,
                   {{std::string(e.record.topic), e.record.partition, e.resume}});
        return {};
      }
      // A record from a partition no longer ours (a rebalance raced the
      // prefetch queue) is left for its new owner; one past --until's end
      // (fetched before the partition was paused) is never written.
      if (pos == nullptr || pos->ended) return {};
      if (!positions_.read(*pos, e.record.offset, e.resume, e.record.timestamp)) return {};
      const RecordView* record = &e.record;
      bool written = true;
      if (decoder_ != nullptr) {
        decoded_ = e.record;
        Status s = decoder_->decode(decoded_);
        if (s.ok()) {
          record = &decoded_;
        } else {
          KPIPE_TRY(undecodable(e.record, s));
          written = false;
        }
      }
      if (!written) {
        // Its offset is passed all the same: the record is in the
        // dead-letter store, or counted as skipped.
      } else if (value_only_) {
        writer_.append_value(out.buffer(), *record);
      } else {
        writer_.append(out.buffer(), *record);
      }
      if (grouped() && !checkpoints_) {
        unread_.push_back({out.end_position(), pos, pos->next});
        if (unread_.size() % kFoldEvery == 0) fold_read();
      }
      if (checkpoints_) checkpoints_->record(e.record.timestamp);
      ++counters_.in;
      if (!written) return {};
      ++counters_.out;
      uint64_t flushed = out.bytes_written();
      KPIPE_TRY(out.end_record());
      // A flush may have waited for a slow reader: timers are due now, not
      // after a batch of 4096 records.
      if (out.bytes_written() != flushed) KPIPE_TRY(timers());
      if (options_.count > 0 && counters_.out >= static_cast<uint64_t>(options_.count))
        done_ = true;
      return {};
    };
    while (!done_) {
      if (io_.stop != nullptr && io_.stop->load(std::memory_order_relaxed)) break;
      if (out.closed()) break;
      // Do not wait while output is buffered: flush first (kpipe(7), LINES).
      Millis wait = out.buffer().empty() ? 100 : 0;
      uint64_t before = counters_.in;
      size_t batch =
          options_.count > 0 ? static_cast<size_t>(std::min<int64_t>(options_.count, 4096)) : 4096;
      KPIPE_TRY(log_.poll(wait, batch, handler));
      KPIPE_TRY(pause_ended());
      if (counters_.in == before) {
        KPIPE_TRY(out.flush());
        if (out.check_closed()) break;
      }
      if (all_finished()) {
        auto done = group_done();
        if (!done) return done.take_error();
        if (*done) break;
      } else {
        group_waiting_since_ = 0;  // reading again: the wait starts over
      }
      KPIPE_TRY(timers());
    }
    KPIPE_TRY(out.flush());
    if (checkpoints_) {
      KPIPE_TRY(checkpoints_->finish());
      closing_ = true;
    } else if (grouped()) {
      KPIPE_TRY(commit_delivered_at_end());
      finished_ = true;
    }
    KPIPE_TRY(bad_.sync());
    ticker_.finish(counters_);
    io_.reporter.info(fmt::format("consumed {} records", counters_.out));
    if (std::string summary = bad_.summary("record"); !summary.empty())
      io_.reporter.warning(summary);
    return {};
  }

 private:
  // A record --key-format or --value-format cannot decode: bad input
  // (kpipe(7), SCHEMA REGISTRY), kept as its envelope with the raw bytes.
  Status undecodable(const RecordView& r, Status& why) {
    if (why.error().status != ExitStatus::kDataError) return why.take_error();
    raw_.clear();
    writer_.append(raw_, r);
    raw_.pop_back();  // the '\n'
    size_t size = raw_.size();
    raw_.append(kJsonPadding, '\0');
    Line line;
    line.text = std::string_view(raw_).substr(0, size);
    where_.clear();
    fmt::format_to(std::back_inserter(where_), "{}[{}]@{}", r.topic, r.partition, r.offset);
    return bad_.handle_record(where_, line, why.error().message);
  }

  // A record written: where it ends in the output, and the offset after
  // it. It counts as read once the reader has read up to `end`
  // (Output::bytes_delivered), never before.
  struct Written {
    uint64_t end;
    ConsumePosition* position;
    Position next;
  };

  // Checkpoints, commits and --stats, between records.
  Status timers() {
    Millis now = io_.clock.steady();
    KPIPE_TRY(bad_.tick());
    if (checkpoints_) {
      KPIPE_TRY(checkpoints_->tick(now));
    } else if (grouped() && now - last_commit_ >= commit_interval_) {
      KPIPE_TRY(commit_delivered());
    }
    if (ticker_active()) {
      fill_counters();
      ticker_.tick_now(counters_);
    }
    return {};
  }

  // Called while a write or a wait for the reader is held up: commits and
  // --stats keep their intervals. It must not write (Output's rule).
  Status on_tick() {
    Millis now = io_.clock.steady();
    if (!checkpoints_) {
      if (grouped() && !committing_ && now - last_commit_ >= commit_interval_)
        KPIPE_TRY(commit_delivered());
    } else {
      KPIPE_TRY(checkpoints_->on_tick(now));
    }
    if (ticker_active()) {
      fill_counters();
      ticker_.tick_now(counters_);
    }
    return {};
  }

  // A partition the log made while it was read (a Kinesis shard a split or
  // a merge made): read from its start on, announced, and checkpointed as
  // the others.
  Status added(const LogEvent& e) {
    PartitionOffset p{std::string(e.record.topic), e.record.partition, e.resume};
    if (positions_.contains({p.topic, p.partition})) return {};
    // Not one of --partitions: not read.
    if (!only_.empty() && !std::binary_search(only_.begin(), only_.end(), p.partition))
      return log_.pause({{p.topic, p.partition}});
    KPIPE_TRY(resolve_ends({p}));
    positions_.track(p);
    io_.reporter.info(
        fmt::format("{} [{}]: a new shard, read after its parents", p.topic, p.partition));
    announce(PartitionEvent::Kind::kAssigned, {p});
    return {};
  }

  // Tells event-time stages downstream which partitions to wait for.
  void announce(PartitionEvent::Kind kind, const std::vector<PartitionOffset>& parts) {
    if (!options_.announce && !checkpoints_) return;
    // The cooperative protocol calls with nothing that moves.
    if (parts.empty()) return;
    PartitionEvent e;
    e.kind = kind;
    for (const auto& p : parts) {
      e.partitions.push_back({p.topic, p.partition});
      if (kind == PartitionEvent::Kind::kAssigned && p.epoch > 0) e.epochs.push_back(p.epoch);
    }
    append_partition_event(io_.out.buffer(), e);
  }

  // Stops fetching the partitions at their --until end (ConsumePositions::take_ended).
  Status pause_ended() {
    auto tps = positions_.take_ended();
    if (!tps) return {};
    return log_.pause(*tps);
  }

  bool grouped() const { return !options_.group.empty(); }
  // An instance of a consumer group of pipelines sharing the state store
  // (kpipe(7), MANY INSTANCES).
  bool owned() const { return instance_; }
  bool ticker_active() const { return true; }

  void fill_counters() {
    counters_.state_size = positions_.size();
    // With -e on a terminal: what is left to the ends the last fetches saw.
    if (!options_.exit_at_end || !io_.reporter.wants_progress()) return;
    uint64_t left = 0;
    for (const auto& [tp, pos] : positions_) {
      if (pos.ended) continue;
      auto end = log_.lag_hint(tp.topic, tp.partition);
      if (!end) return;  // not known for every partition yet: say nothing
      // Records are counted between offsets only: a Kinesis shard's sequence
      // numbers are not consecutive.
      if (!pos.next.is_offset()) return;
      int64_t stop = std::min(*end, pos.end.offset());
      if (stop > pos.next.offset()) left += static_cast<uint64_t>(stop - pos.next.offset());
    }
    counters_.left = left;
  }

  // Whether every partition is done: -e, at its end; --until, at that
  // end; both, at whichever came first.
  bool all_finished() const {
    bool until = until_.kind != EndPosition::Kind::kNone;
    if (!options_.exit_at_end && !until) return false;
    // A member the group gave nothing is done when the group is
    // (group_done()).
    if (positions_.empty()) return !grouped() || (options_.exit_at_end && !until && joined_);
    return positions_.finished(options_.exit_at_end);
  }

  // -e in a consumer group is the group's end (kpipe(7), MANY INSTANCES):
  // this member's partitions at their end are not enough, since another
  // member may hold partitions it has not read to theirs (a member killed
  // keeps its partitions until its session times out, a static member's
  // until then too). Once this member's own offsets are in the group, it
  // exits when every partition of its topics has its end committed, by
  // whichever member; until then it says which have not, reads on
  // whatever the group gives it, and gives up after --timeout.
  Expected<bool> group_done() {
    if (!grouped() || !options_.exit_at_end || until_.kind != EndPosition::Kind::kNone) return true;
    Millis now = io_.clock.steady();
    if (group_checked_ != 0 && now - group_checked_ < kGroupEndPoll) return false;
    group_checked_ = now;
    if (checkpoints_) {
      KPIPE_TRY(checkpoints_->settle());
    } else {
      KPIPE_TRY(io_.out.flush());
      auto drained = io_.out.wait_delivered(io_.out.end_position(), kDrainWait);
      if (!drained) return drained.take_error();
      KPIPE_TRY(commit_delivered());
    }
    std::vector<TopicPartition> tps;
    for (const auto& topic : options_.topics) {
      auto ids = log_.partitions(topic);
      if (!ids) return ids.take_error();
      for (int32_t p : *ids) tps.push_back({topic, p});
    }
    auto committed = reader_.offsets->committed(tps);
    if (!committed) return committed.take_error();
    auto marks = log_.bounds(tps);
    if (!marks) return marks.take_error();
    // With a state store, its positions are the truth the group mirrors
    // (kbroker's mock keeps no offsets a transaction commits).
    std::map<TopicPartition, Position> stored;
    if (state_ != nullptr) {
      auto offsets = state_->offsets();
      if (!offsets) return offsets.take_error();
      for (const auto& o : *offsets) stored[{o.topic, o.partition}] = o.offset;
    }
    std::vector<std::string> behind;
    for (size_t i = 0; i < tps.size(); ++i) {
      // This member's own partitions are at their end (all_finished()):
      // what its pipeline commits of them is its own business.
      if (positions_.contains(tps[i])) continue;
      int64_t at = (*committed)[i].value_or((*marks)[i].low);
      // A consumer group's (Kafka's): its positions are offsets.
      if (auto it = stored.find(tps[i]); it != stored.end()) at = std::max(at, it->second.offset());
      if (at < (*marks)[i].high)
        behind.push_back(fmt::format("{} [{}] at offset {} of {}", tps[i].topic, tps[i].partition,
                                     at, (*marks)[i].high));
    }
    if (behind.empty()) return true;
    std::string list = fmt::format("{}", fmt::join(behind, ", "));
    if (behind.size() > 5)
      list = fmt::format("{} and {} more", fmt::join(behind.begin(), behind.begin() + 5, ", "),
                         behind.size() - 5);
    Millis limit = log_.timeout();
    if (group_waiting_since_ == 0) {
      group_waiting_since_ = now;
      io_.reporter.info(fmt::format(
          "at the end of its partitions; group '{}' is not at its end yet: {}: waiting up to {} "
          "for the members that hold them",
          options_.group, list, format_duration(limit)));
      return false;
    }
    if (now - group_waiting_since_ < limit) return false;
    return failure(
        "group '{}' is not at its end after {}: {} (their members are behind, or were stopped and "
        "keep them until their session times out); give a longer --timeout to wait for them",
        options_.group, format_duration(limit), list);
  }

  // Moves what the reader has read (in output order) into the offsets to
  // commit.
  void fold_read() {
    if (unread_.empty()) return;
    uint64_t delivered = io_.out.bytes_delivered();
    while (!unread_.empty() && unread_.front().end <= delivered) {
      unread_.front().position->read = unread_.front().next;
      unread_.pop_front();
    }
  }

  // Commits the offsets after the records the reader has read, and only
  // those: a record that only reached the pipe is not delivered, since a
  // reader that dies takes the pipe's contents with it (kpipe(7), CONTROL
  // LINES AND CHECKPOINTS). Nothing waits here: what the reader has read
  // by now is committed, the rest at later ticks.
  // A group in the middle of a rebalance may refuse: the offsets are tried
  // again next time, or, when the partitions are being taken away, their
  // next owner reads those records again (at least once).
  Status commit_delivered(bool revoking = false) {
    last_commit_ = io_.clock.steady();
    KPIPE_TRY(bad_.sync());
    fold_read();
    std::vector<PartitionOffset> offsets;
    for (const auto& [tp, pos] : positions_)
      if (pos.read > pos.committed) offsets.push_back({tp.topic, tp.partition, pos.read});
    if (offsets.empty()) return {};
    bool committed = true;
    committing_ = true;
    Status s = reader_.offsets->commit(offsets, &committed);
    committing_ = false;
    KPIPE_TRY(s);
    if (committed) {
      for (const auto& o : offsets) positions_[{o.topic, o.partition}].committed = o.offset;
      return {};
    }
    if (revoking) {
      io_.reporter.warning(
          fmt::format("the group refused the offsets of {} partitions (rebalancing, or its "
                      "coordinator out of reach): their next owner reads their last records again",
                      offsets.size()));
      return {};
    }
    io_.reporter.info(
        "the group refused the offsets for now (rebalancing, or its coordinator out of reach): "
        "they are committed later");
    return {};
  }

  // At exit, or before partitions are taken away: waits (bounded) for the
  // reader to read what was written, then commits what it has read.
  Status commit_delivered_at_end(bool revoking = false) {
    committing_ = true;
    auto drained = io_.out.wait_delivered(io_.out.end_position(), kDrainWait);
    committing_ = false;
    if (!drained) return drained.take_error();
    Status s = commit_delivered(revoking);
    if (s.ok() && !revoking) {
      size_t left = 0;
      for (const auto& [tp, pos] : positions_) left += pos.read > pos.committed ? 1 : 0;
      if (left > 0)
        io_.reporter.warning(fmt::format(
            "the group refused the offsets of {} partitions at exit (rebalancing, or its "
            "coordinator out of reach): their last records are read again next time",
            left));
    }
    if (*drained == Output::Drain::kTimedOut)
      io_.reporter.info(fmt::format(
          "the reader did not read the last {} bytes within {}: their records are not committed",
          io_.out.bytes_written() - io_.out.bytes_delivered(), format_duration(kDrainWait)));
    return s;
  }

  const ConsumeOptions& options_;
  OpenedReader& reader_;
  LogReader& log_;
  Io& io_;
  StartPosition from_;
  EndPosition until_;
  ConsumePositions positions_;
  std::vector<int32_t> only_;
  Millis commit_interval_;
  bool value_only_;
  StatsTicker ticker_;
  EnvelopeWriter writer_;
  Counters counters_;
  Millis last_commit_ = 0;
  // Records written that the reader has not read yet, oldest first (with
  // -g and without --state: what commits wait for).
  std::deque<Written> unread_;
  bool committing_ = false;
  bool finished_ = false;  // the final commit is done
  bool closing_ = false;   // the final checkpoint is written
  bool done_ = false;
  bool joined_ = false;             // the group has assigned this member (maybe nothing)
  Millis group_checked_ = 0;        // group_done()'s last look at the group
  Millis group_waiting_since_ = 0;  // since when it waits for other members
  StateStore* state_;
  std::optional<ConsumeCheckpoints> checkpoints_;  // with --state
  bool instance_;                                  // of a consumer group of pipelines (owned())
  PayloadDecoder* decoder_;                        // null: payloads as they are
  BadInputHandler& bad_;
  RecordView decoded_;
  std::string raw_;
  std::string where_;
};

}  // namespace

Status run_consume(const ConsumeOptions& options, Io& io) {
  return run_consume(options, io,
                     [](const KafkaLog& log, const KafkaLog::ReaderSettings& settings) {
                       return log.reader(settings);
                     });
}

namespace {

// What a Kinesis stream cannot do that a Kafka topic can (kpipe(7), LOGS).
Status check_kinesis_options(const ConsumeOptions& options, const StartPosition& from,
                             const EndPosition& until) {
  if (options.topics.size() != 1)
    return usage_error("-t kinesis:NAME: kconsume reads one Kinesis stream, not {} topics",
                       options.topics.size());
  if (!options.group.empty())
    return usage_error(
        "-g: a Kinesis stream has no consumer groups: one kconsume reads every shard, and "
        "--state keeps where each is");
  if (!options.isolation.empty())
    return usage_error("--isolation: a Kinesis stream has no transactions");
  if (from.kind == StartPosition::Kind::kOffset || from.kind == StartPosition::Kind::kFromEnd)
    return usage_error("--from {}: a Kinesis shard has no offsets: use earliest, latest or @TIME",
                       options.from);
  if (until.kind == EndPosition::Kind::kOffset)
    return usage_error("--until {}: a Kinesis shard has no offsets: use @TIME", options.until);
  return {};
}

Status consume_from(const ConsumeOptions& options, Io& io, OpenedReader& reader,
                    const StartPosition& from, const EndPosition& until, std::vector<int32_t> only,
                    Millis commit_interval, StatsSettings stats, StateStore* state,
                    Millis checkpoint_interval, bool instance, const KafkaConfig& config,
                    const KafkaLog* kafka);

}  // namespace

Status run_consume(const ConsumeOptions& given, Io& io, const ReaderOpener& open) {
  if (given.topics.empty()) return usage_error("at least one topic is required: -t TOPIC");
  // -t kinesis:NAME: the stream's name is the records' topic.
  bool kinesis = std::any_of(given.topics.begin(), given.topics.end(),
                             [](const std::string& t) { return is_kinesis_target(t); });
  ConsumeOptions kinesis_options;
  if (kinesis) {
    kinesis_options = given;
    auto name = parse_kinesis_target(given.topics.front());
    if (!name) return name.take_error();
    kinesis_options.topics.front() = name->name;
  } else {
    for (const auto& topic : given.topics) KPIPE_TRY(check_topic_name(topic));
  }
  const ConsumeOptions& options = kinesis ? kinesis_options : given;
  if (options.count < 0 || (options.count_given && options.count == 0))
    return usage_error("-c: the count must be at least 1");
  auto format = parse_choice("--format", options.format, {"envelope", "value"});
  if (!format) return format.take_error();
  if (options.count < 0) return usage_error("-c must not be negative");
  auto from = parse_start_position(options.from, io.clock.now());
  if (!from) return from.take_error();
  auto until = parse_end_position(options.until, io.clock.now());
  if (!until) return until.take_error();
  if (kinesis) KPIPE_TRY(check_kinesis_options(given, *from, *until));
  if (!options.efo.empty() && !kinesis)
    return usage_error(
        "--efo: enhanced fan-out is a Kinesis stream's: it needs -t kinesis:STREAM, not a Kafka "
        "topic");
  if (!options.efo.empty()) KPIPE_TRY(check_consumer_name(options.efo));
  std::vector<int32_t> only;
  if (!options.partitions.empty()) {
    if (!options.group.empty())
      return usage_error("--partitions cannot be combined with -g (the group assigns)");
    auto parsed = parse_partition_list(options.partitions);
    if (!parsed) return parsed.take_error();
    only = std::move(*parsed);
  }
  auto commit_interval = parse_duration(options.commit_interval);
  if (!commit_interval)
    return usage_error("--commit-interval: {}", commit_interval.error().message);
  auto stats = parse_stats(options.stats, io.program);
  if (!stats) return stats.take_error();
  auto checkpoint_interval = parse_duration(options.checkpoint_interval);
  if (!checkpoint_interval)
    return usage_error("--checkpoint-interval: {}", checkpoint_interval.error().message);
  if (*checkpoint_interval <= 0) return usage_error("--checkpoint-interval must be positive");
  std::unique_ptr<StateStore> state;
  bool instance = false;  // kpipe(7), MANY INSTANCES
  if (!options.state.empty()) {
    auto opened = StateStore::open(options.state);
    if (!opened) return opened.take_error();
    // One pipeline per state file (kpipe(7), CONTROL LINES AND CHECKPOINTS):
    // a second would emit the same checkpoint ids as the first. The
    // instances of a consumer group share it (MANY INSTANCES): their ids
    // come from the store, and each partition has one owner.
    auto grouped = (*opened)->owned_by_group();
    if (!grouped) return grouped.take_error();
    if (options.group.empty() && *grouped)
      return failure(
          "state database '{}' keeps the state of a consumer group's instances by partition: "
          "run kconsume with their -g GROUP",
          display_target(options.state));
    // A store whose checkpoints a single pipeline completed (one that ran
    // with -g before instances, whose state no partition can take) goes on
    // as that pipeline: an upgrade does not strand it.
    instance = !options.group.empty();
    if (instance && !*grouped) {
      auto latest = (*opened)->latest_complete();
      if (!latest) return latest.take_error();
      if (*latest) {
        instance = false;
        io.reporter.warning(fmt::format(
            "state database '{}' holds the state of a single pipeline (it began before kpipe ran "
            "instances): it runs on as one pipeline, not an instance; to run instances, start "
            "them with a new state database",
            display_target(options.state)));
      }
    }
    KPIPE_TRY((*opened)->lock_pipeline(instance));
    state = std::move(*opened);
  }
  if (!options.instance.empty() && !instance)
    return usage_error(
        "--instance names an instance of a consumer group of pipelines: it needs -g GROUP and "
        "--state STORE (kpipe(7), MANY INSTANCES)");
  std::string instance_name;
  if (instance) {
    auto name = state->register_instance(options.instance, options.group, io.clock.now());
    if (!name) return name.take_error();
    instance_name = std::move(*name);
    io.reporter.info(fmt::format("instance '{}' of group '{}'", instance_name, options.group));
    // First, before anything that may wait on the group (kpipe(7), MANY
    // INSTANCES): a transactional kproduce fences the instance's previous
    // run by it, whose open transaction holds the offsets kconsume asks
    // the group for.
    append_instance_line(io.out.buffer(), {instance_name, options.group, state->pipeline_name()});
    KPIPE_TRY(io.out.flush());
  }
  if (kinesis) {
    auto stream = KinesisLog::open(options.kinesis, given.topics.front(), options.kafka.timeout,
                                   io.reporter, io.clock);
    if (!stream) return stream.take_error();
    auto reader = stream->reader(options.efo);
    if (!reader) return reader.take_error();
    return consume_from(options, io, *reader, *from, *until, std::move(only), *commit_interval,
                        std::move(*stats), state.get(), *checkpoint_interval, instance,
                        KafkaConfig{}, nullptr);
  }
  auto log = KafkaLog::open(options.kafka, io.env_brokers, io.reporter, io.clock);
  if (!log) return log.take_error();
  const KafkaConfig& config = log->config();
  // A default file is read without a word on the command line: -v says so.
  if (!config.file.empty())
    io.reporter.info(fmt::format("client properties from '{}'", config.file));
  KafkaLog::ReaderSettings settings;
  settings.group = options.group;
  if (!options.isolation.empty()) {
    auto level =
        parse_choice("--isolation", options.isolation, {"read_committed", "read_uncommitted"});
    if (!level) return level.take_error();
    settings.isolation = options.isolation;
  }
  // An instance is a static member of its group (kafka_log.h), under an
  // id unique per store, should two pipelines share a group by mistake.
  if (instance)
    settings.instance_id =
        fmt::format("{}-{:08x}", instance_name,
                    static_cast<uint32_t>(XXH3_64bits(display_target(options.state).data(),
                                                      display_target(options.state).size())));
  auto reader = open(*log, settings);
  if (!reader) return reader.take_error();
  return consume_from(options, io, *reader, *from, *until, std::move(only), *commit_interval,
                      std::move(*stats), state.get(), *checkpoint_interval, instance, config,
                      &*log);
}

namespace {

// The loop over an opened reader: Kafka's or Kinesis's.
Status consume_from(const ConsumeOptions& options, Io& io, OpenedReader& reader,
                    const StartPosition& from, const EndPosition& until, std::vector<int32_t> only,
                    Millis commit_interval, StatsSettings stats, StateStore* state,
                    Millis checkpoint_interval, bool instance, const KafkaConfig& config,
                    const KafkaLog* kafka) {
  auto decoder = PayloadDecoder::open(options.schema, config);
  if (!decoder) return decoder.take_error();
  auto bad =
      kafka != nullptr
          ? make_bad_input_handler(options.errors, "kconsume", io, kafka, &options.kinesis)
          : make_bad_input_handler(options.errors, "kconsume", io, options.kafka, &options.kinesis);
  if (!bad) return bad.take_error();
  ConsumeLoop loop(options, reader, io, from, until, std::move(only), commit_interval,
                   std::move(stats), state, checkpoint_interval, instance, **decoder, **bad);
  KPIPE_TRY(loop.complete_committed());
  KPIPE_TRY(loop.init_state());
  if (options.group.empty()) {
    KPIPE_TRY(loop.start_assigned());
  } else {
    KPIPE_TRY(loop.start_group());
  }
  Status s = loop.run();
  Status closed = reader.log->close();
  KPIPE_TRY(s);
  return closed;
}

}  // namespace

}  // namespace kpipe
