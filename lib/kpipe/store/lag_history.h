// klag's --history FILE: one database of lag samples (an SQLite file or
// PostgreSQL, kpipe(7), STORES), appended by
// each run (a cron job builds the history), read back by `klag status` to
// judge the recent samples and by --no-fetch to estimate time lag from the
// log end offsets seen over time. The tables are documented in klag(1), so
// that sqlite3 can query them too.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kpipe/lag.h"
#include "kpipe/partition.h"
#include "kpipe/status.h"
#include "kpipe/store/sqlite.h"

namespace kpipe {

class LagHistory {
 public:
  // Opens and migrates the history. With `must_exist`, a missing file is an
  // error instead of a new history (status reads one that cron wrote).
  static Expected<std::unique_ptr<LagHistory>> open(const std::string& path,
                                                    bool must_exist = false);

  // Appends a sample, and drops samples older than `keep` before it
  // (0: keep everything), in one transaction.
  Status append(const LagSample& sample, Millis keep);

  // The names of the subjects of `kind` with samples here, sorted: the
  // groups `klag status --all-groups` (or a -g pattern) judges.
  Expected<std::vector<std::string>> subjects(LagSubject::Kind kind);

  // The subject's newest `count` samples, oldest first.
  Expected<std::vector<LagSample>> recent(const LagSubject& subject, size_t count);

  // Every sample of the subject, oldest first (klag --plot draws them
  // all): one query, ordered by the samples' index, so that a history of a
  // million partition rows reads in a fraction of a second.
  Expected<std::vector<LagSample>> all(const LagSubject& subject);

  // The log end offsets seen for a partition, by any subject's samples,
  // around `offset`: the highest at or below it and the two lowest above
  // it, enough for estimate_produce_time.
  Expected<std::vector<EndOffsetSeen>> end_offsets_around(const TopicPartition& tp, int64_t offset);

  const std::string& path() const { return db_->path(); }

 private:
  explicit LagHistory(std::unique_ptr<Database> db) : db_(std::move(db)) {}
  std::unique_ptr<Database> db_;
};

}  // namespace kpipe
