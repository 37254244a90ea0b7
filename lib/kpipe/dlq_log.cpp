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
    auto v = parse_json(saved_.metadata);
    const JsonValue* target = v ? v->find("target") : nullptr;
    const JsonValue* mark = v ? v->find("mark") : nullptr;
    if (target == nullptr || mark == nullptr || target->type != JsonType::kString ||
        mark->type != JsonType::kString)
      return failure("{} holds unreadable replay metadata '{}'", positions_.describe(),
                     saved_.metadata);
    mark_ = mark->str;
    target_ = target->str;
    out.push_back({target->str, mark->str, 0, 0});
    return out;
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
    mark_.clear();
    saved_.metadata.clear();
    return positions_.save(saved_);
  }

  Expected<std::vector<ReplayItem>> next(size_t max) override {
    if (!started_) {
      KPIPE_TRY(log_.start(saved_.next));
      started_ = true;
    }
    std::vector<ReplayItem> out;
    while (out.size() < max && (limit_ == 0 || handed_out_ < limit_)) {
      auto entries = log_.read(limit_ == 0 ? max - out.size()
                                           : std::min(max - out.size(), limit_ - handed_out_));
      if (!entries) return entries.take_error();
      if (entries->empty()) break;
      for (DlqEntry& e : *entries) {
        const int32_t p = e.position->partition;
        bool pass = found_.count({p, e.position->offset}) > 0 || !filter_.matches(e);
        reads_[p].push_back({e.position->offset, pass});
        if (pass) continue;
        std::string id = prefix_ + e.id_text();
        out.push_back({std::move(e), std::move(id)});
        ++handed_out_;
      }
    }
    // Entries passed over may let the position move on, and the end may
    // leave nothing in doubt.
    bool moved = advance();
    if (out.empty() && !mark_.empty() && settled()) {
      mark_.clear();
      moved = true;
    }
    if (moved) KPIPE_TRY(save());
    return out;
  }

  Status begin(const std::vector<ReplayItem>&, const std::string& target,
               const std::string& mark) override {
    // An older mark still in force covers this batch as well (everything
    // sent now lands after it), so it is kept until it is no longer needed.
    if (mark_.empty() || !pending_found()) {
      mark_ = mark;
      target_ = target;
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
    if (settled()) mark_.clear();
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
