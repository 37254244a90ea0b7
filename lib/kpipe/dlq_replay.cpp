#include "kpipe/dlq_replay.h"

#include <charconv>

#include "kpipe/store/dlq_store.h"

namespace kpipe {

namespace {

bool stop_requested(const ReplaySettings& s) { return s.stop != nullptr && s.stop->load(std::memory_order_relaxed); }

}  // namespace

Expected<ReplayReport> run_replay(ReplayLedger& ledger, ReplayTarget& target, const ReplaySettings& settings) {
  ReplayReport report;
  const std::string where = target.describe();
  auto doubts = ledger.in_doubt();
  if (!doubts) return doubts.take_error();
  for (const auto& d : *doubts) {
    if (d.target != where)
      return failure(
          "a replay to '{}' was interrupted before its deliveries were acknowledged: replay to '{}' again "
          "first, so that it can tell what arrived and send nothing twice",
          d.target, d.target);
  }
  for (const auto& d : *doubts) {
    auto found = target.delivered_since(d.mark, ledger.id_prefix());
    if (!found) return found.take_error();
    auto settled = ledger.settle(d, *found);
    if (!settled) return settled.take_error();
    ++report.batches_in_doubt;
    report.in_doubt += d.entries;
    report.found_delivered += *settled;
  }
  if (settings.again) KPIPE_TRY(ledger.reset());

  const bool later = target.acknowledges_later();
  std::vector<uint64_t> acked;
  std::vector<const ReplayItem*> done;
  while (!stop_requested(settings)) {
    auto batch = ledger.next(std::max<size_t>(settings.batch, 1));
    if (!batch) return batch.take_error();
    if (batch->empty()) break;
    if (!later) {
      // Standard output: each entry is marked as soon as its write
      // returned, so a kill can repeat at most the line being marked.
      for (const ReplayItem& item : *batch) {
        if (stop_requested(settings)) break;
        auto sent = target.send(item, 0);
        if (!sent) return sent.take_error();
        if (!*sent) {
          report.target_closed = true;
          return report;
        }
        KPIPE_TRY(ledger.delivered({&item}));
        ++report.replayed;
      }
      continue;
    }
    auto mark = target.mark();
    if (!mark) return mark.take_error();
    KPIPE_TRY(ledger.begin(*batch, where, *mark));
    Status sending;
    size_t queued = 0;
    for (; queued < batch->size(); ++queued) {
      auto sent = target.send((*batch)[queued], queued);
      if (!sent) {
        sending = sent.take_error();
        break;
      }
    }
    // Whatever happened, learn the fate of what was queued and mark it:
    // the rest stays in doubt, for the next replay to settle.
    acked.clear();
    Status flushed = target.flush(acked);
    done.clear();
    for (uint64_t tag : acked)
      if (tag < batch->size()) done.push_back(&(*batch)[tag]);
    KPIPE_TRY(ledger.delivered(done));
    report.replayed += done.size();
    KPIPE_TRY(sending);
    KPIPE_TRY(flushed);
    if (done.size() < batch->size())
      return failure("{} of {} entries not acknowledged by '{}'; the next replay will check which arrived",
                     batch->size() - done.size(), batch->size(), where);
  }
  report.stopped = stop_requested(settings);
  return report;
}

// --- the SQLite store as a ledger ------------------------------------------------

namespace {

class StoreLedger final : public ReplayLedger {
 public:
  StoreLedger(DlqStore& store, DlqFilter filter, size_t limit, Clock& clock, std::string store_id, int64_t max_id)
      : store_(store),
        filter_(std::move(filter)),
        limit_(limit),
        clock_(clock),
        prefix_(std::move(store_id) + ":"),
        max_id_(max_id) {
    filter_.pending_only = true;
  }

  std::string id_prefix() const override { return prefix_; }

  Expected<std::vector<InDoubt>> in_doubt() override {
    auto batches = store_.in_doubt();
    if (!batches) return batches.take_error();
    batches_ = std::move(*batches);
    std::vector<InDoubt> out;
    for (size_t i = 0; i < batches_.size(); ++i)
      out.push_back({batches_[i].target, batches_[i].mark, batches_[i].ids.size(), i});
    return out;
  }

  Expected<size_t> settle(const InDoubt& d, const std::set<std::string>& delivered) override {
    const DlqStore::InDoubt& batch = batches_.at(d.index);
    std::set<int64_t> ids;
    for (const std::string& text : delivered) {
      std::string_view digits = std::string_view(text).substr(prefix_.size());
      int64_t id = 0;
      auto r = std::from_chars(digits.data(), digits.data() + digits.size(), id);
      if (r.ec == std::errc() && r.ptr == digits.data() + digits.size()) ids.insert(id);
    }
    size_t found = 0;
    for (int64_t id : batch.ids) found += ids.count(id);
    KPIPE_TRY(store_.settle(batch, ids, clock_.now()));
    return found;
  }

  Status reset() override {
    auto n = store_.reset_replayed(filter_, max_id_, limit_);
    if (!n) return n.take_error();
    return {};
  }

  Expected<std::vector<ReplayItem>> next(size_t max) override {
    std::vector<ReplayItem> out;
    if (limit_ > 0 && handed_out_ >= limit_) return out;
    DlqStore::Page page;
    page.after_id = last_id_;
    page.max_id = max_id_;
    page.limit = limit_ > 0 ? std::min(max, limit_ - handed_out_) : max;
    page.exclude_in_doubt = true;
    if (max_id_ == 0) return out;  // the store was empty when the replay began
    auto entries = store_.fetch(filter_, page);
    if (!entries) return entries.take_error();
    for (DlqEntry& e : *entries) {
      std::string id = prefix_ + std::to_string(e.id);
      out.push_back({std::move(e), std::move(id)});
    }
    if (!out.empty()) last_id_ = out.back().entry.id;
    handed_out_ += out.size();
    return out;
  }

  Status begin(const std::vector<ReplayItem>& batch, const std::string& target, const std::string& mark) override {
    std::vector<int64_t> ids;
    for (const auto& item : batch) ids.push_back(item.entry.id);
    auto b = store_.begin_batch(target, mark, ids, clock_.now());
    if (!b) return b.take_error();
    return {};
  }

  Status delivered(const std::vector<const ReplayItem*>& items) override {
    std::vector<DlqStore::Delivered> done;
    for (const ReplayItem* item : items) done.push_back({item->entry.id, item->entry.failures.value_or(1)});
    return store_.mark_replayed(done, clock_.now());
  }

 private:
  DlqStore& store_;
  DlqFilter filter_;
  size_t limit_;
  Clock& clock_;
  std::string prefix_;
  int64_t max_id_;
  int64_t last_id_ = 0;
  size_t handed_out_ = 0;
  std::vector<DlqStore::InDoubt> batches_;
};

}  // namespace

Expected<std::unique_ptr<ReplayLedger>> make_store_ledger(DlqStore& store, const DlqFilter& filter, size_t limit,
                                                          Clock& clock) {
  auto id = store.store_id();
  if (!id) return id.take_error();
  auto max = store.max_id();
  if (!max) return max.take_error();
  return std::unique_ptr<ReplayLedger>(new StoreLedger(store, filter, limit, clock, *id, *max));
}

}  // namespace kpipe
