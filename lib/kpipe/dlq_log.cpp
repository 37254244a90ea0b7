#include "kpipe/dlq_log.h"

#include <charconv>
#include <deque>
#include <set>
#include <utility>

#include "kpipe/json.h"

namespace kpipe {

std::string default_replay_ledger(std::string_view log_name) {
  return "kdlq-replay." + std::string(log_name);
}

bool passed(const DeadLetterLog& log, const ReplayPositions::Saved& saved, int32_t partition,
            const Position& at) {
  auto it = saved.next.find(partition);
  return it != saved.next.end() && log.after(at) <= it->second;
}

Status scan_dead_letter_log(DeadLetterLog& log, const ReplayPositions::Saved* saved,
                            const DlqFilter& filter, size_t limit, const DeadLetters::Visit& fn) {
  KPIPE_TRY(log.start({}));
  size_t seen = 0;
  for (;;) {
    auto entries = log.read(1000);
    if (!entries) return entries.take_error();
    if (entries->empty()) return {};
    for (DlqEntry& e : *entries) {
      e.replayed =
          saved != nullptr && passed(log, *saved, e.position->partition, e.position->offset);
      if (!filter.matches(e)) continue;
      auto go = fn(e);
      if (!go) return go.take_error();
      if (!*go || (limit > 0 && ++seen >= limit)) return {};
    }
  }
}

namespace {

// How many bytes the "through" of a replay's metadata may take: with the
// target and its mark, it stays within what Kafka lets a commit carry
// (offset.metadata.max.bytes, 4096 by default), and a batch that would
// reach more partitions ends early.
constexpr size_t kThroughBudget = 2048;

class LogLedger final : public ReplayLedger {
 public:
  LogLedger(DeadLetterLog& log, ReplayPositions& positions, ReplayPositions::Saved saved,
            DlqFilter filter, size_t limit)
      : log_(log),
        positions_(positions),
        filter_(std::move(filter)),
        limit_(limit),
        saved_(std::move(saved)) {
    filter_.pending_only = false;  // the position says what is pending
    prefix_ = log_.name() + ":";
  }

  std::string id_prefix() const override { return prefix_; }

  Expected<std::vector<InDoubt>> in_doubt() override {
    std::vector<InDoubt> out;
    if (saved_.metadata.empty()) return out;
    auto unreadable = [&] {
      return failure("{} holds unreadable replay metadata '{}'", positions_.describe(),
                     saved_.metadata);
    };
    auto v = parse_json(saved_.metadata);
    const JsonValue* target = v ? v->find("target") : nullptr;
    const JsonValue* mark = v ? v->find("mark") : nullptr;
    if (target == nullptr || mark == nullptr || target->type != JsonType::kString ||
        mark->type != JsonType::kString)
      return unreadable();
    mark_ = mark->str;
    target_ = target->str;
    // Metadata an older kdlq wrote holds no "through": which entries it
    // had handed out is unknown (in_doubt_entries).
    through_.clear();
    through_known_ = false;
    if (const JsonValue* through = v->find("through"); through != nullptr) {
      if (!parse_through(*through)) return unreadable();
      through_known_ = true;
    }
    out.push_back({target->str, mark->str, 0, 0});
    return out;
  }

  // Every entry the filter matches from the position up to `through` in
  // each partition: what was handed out while the mark was in force, not
  // yet passed, found delivered at a settling or not. Each was sent after
  // the mark, if at all.
  Expected<std::optional<std::vector<ReplayItem>>> in_doubt_entries(const InDoubt&) override {
    if (!through_known_) return std::optional<std::vector<ReplayItem>>();
    std::vector<ReplayItem> out;
    std::set<int32_t> open;
    for (const auto& [p, at] : through_)
      if (!passed(log_, saved_, p, at)) open.insert(p);
    if (open.empty()) return std::optional<std::vector<ReplayItem>>(std::move(out));
    started_ = false;  // next() reads from the position again
    unread_.clear();
    KPIPE_TRY(log_.start(saved_.next));
    while (!open.empty()) {
      auto entries = log_.read(1000);
      if (!entries) return entries.take_error();
      if (entries->empty()) break;
      for (DlqEntry& e : *entries) {
        const int32_t p = e.position->partition;
        auto it = through_.find(p);
        if (it == through_.end() || !open.count(p)) continue;
        if (e.position->offset >= it->second) open.erase(p);
        if (e.position->offset > it->second || !filter_.matches(e)) continue;
        std::string id = prefix_ + e.id_text();
        out.push_back({std::move(e), std::move(id)});
      }
    }
    return std::optional<std::vector<ReplayItem>>(std::move(out));
  }

  Expected<size_t> settle(const InDoubt&, const std::set<std::string>& delivered) override {
    size_t found = 0;
    for (const std::string& id : delivered) {
      // PREFIX "PARTITION:POSITION"
      std::string_view rest = std::string_view(id).substr(prefix_.size());
      size_t colon = rest.find(':');
      if (colon == std::string_view::npos) continue;
      int32_t p = 0;
      auto rp = std::from_chars(rest.data(), rest.data() + colon, p);
      auto at = log_.parse_position(rest.substr(colon + 1));
      if (rp.ec != std::errc() || rp.ptr != rest.data() + colon || !at) continue;
      if (passed(log_, saved_, p, *at)) continue;
      found_.insert({p, std::move(*at)});
      ++found;
    }
    // The mark stays kept until the position has passed every entry
    // found delivered: a replay killed before that settles again from
    // the same mark and finds the same.
    return found;
  }

  Status reset() override {
    found_.clear();
    saved_.next = log_.origin();
    clear_mark();
    saved_.metadata.clear();
    return positions_.save(saved_);
  }

  Expected<std::vector<ReplayItem>> next(size_t max) override {
    if (!started_) {
      unread_.clear();
      KPIPE_TRY(log_.start(saved_.next));
      started_ = true;
    }
    // The partitions this batch may reach, as begin() will keep them: a
    // mark kept covers what was handed out before.
    const bool keeps = !mark_.empty() && pending_found();
    std::set<int32_t> reached;
    size_t bytes = 0;
    if (keeps)
      for (const auto& [p, at] : through_) bytes += through_bytes(at);
    std::vector<ReplayItem> out;
    while (out.size() < max && (limit_ == 0 || handed_out_ < limit_)) {
      if (unread_.empty()) {
        auto entries = log_.read(limit_ == 0 ? max - out.size()
                                             : std::min(max - out.size(), limit_ - handed_out_));
        if (!entries) return entries.take_error();
        if (entries->empty()) break;
        for (DlqEntry& e : *entries) unread_.push_back(std::move(e));
      }
      DlqEntry& e = unread_.front();
      const int32_t p = e.position->partition;
      bool pass = found_.count({p, e.position->offset}) > 0 || !filter_.matches(e);
      if (!pass && !(keeps && through_.count(p)) && !reached.count(p)) {
        // A partition more in "through": the batch ends before the
        // metadata outgrows what a Kafka commit may carry.
        size_t more = through_bytes(e.position->offset);
        if (!out.empty() && bytes + more > kThroughBudget) break;
        bytes += more;
        reached.insert(p);
      }
      reads_[p].push_back({e.position->offset, pass});
      if (!pass) {
        std::string id = prefix_ + e.id_text();
        out.push_back({std::move(e), std::move(id)});
        ++handed_out_;
      }
      unread_.pop_front();
    }
    // Entries passed over may let the position move on, and the end may
    // leave nothing in doubt.
    bool moved = advance();
    if (out.empty() && !mark_.empty() && settled()) {
      clear_mark();
      moved = true;
    }
    if (moved) KPIPE_TRY(save());
    return out;
  }

  Status begin(const std::vector<ReplayItem>& batch, const std::string& target,
               const std::string& mark) override {
    // An older mark still in force covers this batch as well (everything
    // sent now lands after it), so it is kept until it is no longer needed,
    // and how far entries were handed out grows with it.
    if (mark_.empty() || !pending_found()) {
      clear_mark();
      mark_ = mark;
      target_ = target;
    }
    for (const ReplayItem& item : batch) {
      const PartitionOffset& at = *item.entry.position;
      auto it = through_.find(at.partition);
      if (it == through_.end()) {
        through_.emplace(at.partition, at.offset);
      } else if (it->second < at.offset) {
        it->second = at.offset;
      }
    }
    return save();
  }

  Status delivered(const std::vector<const ReplayItem*>& items) override {
    for (const ReplayItem* item : items) {
      auto& reads = reads_[item->entry.position->partition];
      for (auto& r : reads)
        if (r.at == item->entry.position->offset) r.done = true;
    }
    advance();
    if (settled()) clear_mark();
    return save();
  }

 private:
  struct Read {
    Position at;
    bool done;
  };

  // Moves each partition's position over the entries read and done.
  bool advance() {
    bool moved = false;
    for (auto& [p, reads] : reads_) {
      while (!reads.empty() && reads.front().done) {
        saved_.next[p] = log_.after(reads.front().at);
        reads.pop_front();
        moved = true;
      }
    }
    return moved;
  }

  // Nothing read is undelivered, and the position has passed every entry
  // found delivered: no mark is needed any more.
  bool settled() const {
    for (const auto& [p, reads] : reads_)
      if (!reads.empty()) return false;
    return !pending_found();
  }

  void clear_mark() {
    mark_.clear();
    target_.clear();
    through_.clear();
    through_known_ = true;
  }

  // What a partition's "through" costs in the metadata: [P,"POSITION"],
  // its partition number counted at its longest.
  static size_t through_bytes(const Position& at) { return at.text().size() + 16; }

  // "through": [[PARTITION,"POSITION"],...], as save() writes it.
  bool parse_through(const JsonValue& v) {
    if (v.type != JsonType::kArray) return false;
    for (const JsonValue& pair : v.items) {
      if (pair.type != JsonType::kArray || pair.items.size() != 2 || !pair.items[0].is_integer ||
          pair.items[1].type != JsonType::kString)
        return false;
      auto at = log_.parse_position(pair.items[1].str);
      if (!at) return false;
      through_[static_cast<int32_t>(pair.items[0].integer)] = std::move(*at);
    }
    return true;
  }

  bool pending_found() const {
    for (const auto& [p, at] : found_)
      if (!passed(log_, saved_, p, at)) return true;
    return false;
  }

  Status save() {
    saved_.metadata.clear();
    if (!mark_.empty()) {
      saved_.metadata = "{\"target\":";
      append_json_string(saved_.metadata, target_);
      saved_.metadata.append(",\"mark\":");
      append_json_string(saved_.metadata, mark_);
      if (through_known_) {
        // Partitions the position has passed hold nothing in doubt.
        saved_.metadata.append(",\"through\":[");
        bool first = true;
        for (const auto& [p, at] : through_) {
          if (passed(log_, saved_, p, at)) continue;
          if (!first) saved_.metadata.push_back(',');
          first = false;
          saved_.metadata.append(fmt::format("[{},", p));
          append_json_string(saved_.metadata, at.text());
          saved_.metadata.push_back(']');
        }
        saved_.metadata.push_back(']');
      }
      saved_.metadata.push_back('}');
    }
    return positions_.save(saved_);
  }

  DeadLetterLog& log_;
  ReplayPositions& positions_;
  DlqFilter filter_;
  size_t limit_;
  ReplayPositions::Saved saved_;
  std::string prefix_;
  std::string mark_;
  std::string target_;
  std::set<std::pair<int32_t, Position>> found_;
  std::map<int32_t, std::deque<Read>> reads_;
  // Read from the log and not yet handed out: a batch ended early.
  std::deque<DlqEntry> unread_;
  // The newest entry handed out in each partition while the mark is in
  // force; unknown when the mark came from an older kdlq's metadata.
  std::map<int32_t, Position> through_;
  bool through_known_ = true;
  size_t handed_out_ = 0;
  bool started_ = false;
};

}  // namespace

std::unique_ptr<ReplayLedger> make_log_ledger(DeadLetterLog& log, ReplayPositions& positions,
                                              ReplayPositions::Saved saved, const DlqFilter& filter,
                                              size_t limit) {
  return std::make_unique<LogLedger>(log, positions, std::move(saved), filter, limit);
}

}  // namespace kpipe
