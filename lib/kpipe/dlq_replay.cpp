#include "kpipe/dlq_replay.h"

#include <charconv>

#include "kpipe/line.h"

namespace kpipe {

namespace {

bool stop_requested(const ReplaySettings& s) {
  return s.stop != nullptr && s.stop->load(std::memory_order_relaxed);
}

}  // namespace

OwnedRecord replay_record(const DlqEntry& entry, EnvelopeReader& reader) {
  if (entry.record) return *entry.record;
  OwnedRecord r;
  if (entry.source) {
    std::string padded = entry.payload;
    padded.append(kJsonPadding, '\0');
    EnvelopeRecord env;
    if (reader.read(std::string_view(padded.data(), entry.payload.size()), env).ok()) {
      r.key = std::move(env.key);
      r.value = std::move(env.value);
      r.headers = std::move(env.headers);
      r.timestamp = env.timestamp.value_or(0);
      return r;
    }
  }
  r.value = entry.payload;
  return r;
}

Expected<ReplayReport> run_replay(ReplayLedger& ledger, ReplayTarget& target,
                                  const ReplaySettings& settings) {
  ReplayReport report;
  const std::string where = target.describe();
  auto doubts = ledger.in_doubt();
  if (!doubts) return doubts.take_error();
  for (const auto& d : *doubts) {
    if (d.target != where)
      return failure(
          "a replay to '{}' was interrupted before its deliveries were acknowledged: replay to "
          "'{}' again "
          "first, so that it can tell what arrived and send nothing twice",
          d.target, d.target);
  }
  for (const auto& d : *doubts) {
    std::vector<ReplayItem> entries;
    if (target.finds_by_content()) {
      auto known = ledger.in_doubt_entries(d);
      if (!known) return known.take_error();
      if (!*known)
        return failure(
            "'{}' is searched for an interrupted replay's records by their content, and this "
            "store keeps no list of the entries it left in doubt",
            where);
      entries = std::move(**known);
    }
    auto found = target.delivered_since(d.mark, ledger.id_prefix(), entries);
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
  std::optional<uint64_t> total;
  if (settings.on_progress) {
    auto pending = ledger.pending();
    if (!pending) return pending.take_error();
    total = *pending;
  }
  while (!stop_requested(settings)) {
    if (settings.on_progress) settings.on_progress(report.replayed, total);
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
      return failure(
          "{} of {} entries not acknowledged by '{}'; the next replay will check which arrived",
          batch->size() - done.size(), batch->size(), where);
  }
  report.stopped = stop_requested(settings);
  return report;
}

}  // namespace kpipe
