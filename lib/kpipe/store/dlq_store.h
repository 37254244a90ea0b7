// The dead-letter store in a database (--dlq FILE.db or postgresql://...,
// kpipe(7), STORES): one row per bad line, the line kept byte for byte. Every program writes it
// through DeadLetterSink; kdlq reads it, marks what it replayed and purges it. Several processes
// may share one store (the stages of a pipeline, and kdlq): writes are
// short transactions, so none holds the lock for long.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kpipe/dead_letters.h"
#include "kpipe/dlq_entry.h"
#include "kpipe/dlq_replay.h"
#include "kpipe/store/sqlite.h"

namespace kpipe {

class DlqStore {
 public:
  enum class Mode {
    kCreate,    // a program's --dlq: create the file if needed
    kExisting,  // kdlq: the store must exist already
    // kdlq list and stats, which only read: an existing store opened
    // read-only, never created or migrated, so that a user who may only
    // read it can (kdlq(1)); one at another schema version is refused.
    kRead,
  };
  static Expected<std::unique_ptr<DlqStore>> open(const std::string& path,
                                                  Mode mode = Mode::kCreate);

  // --- writing -------------------------------------------------------------
  // Stores dead letters in one transaction, durable when this returns. A
  // line from an envelope that the same stage has pending already, the
  // same bytes from the same source position (a pipeline re-reading after
  // a crash, or a replayed line failing again), updates that entry
  // (reason, time, input and line number, one more failure) instead of
  // adding a second. A different line from that position (a recreated
  // topic, two clusters sharing the store) is an entry of its own; once
  // an entry is replayed, a new failure of its line is a new entry.
  Status add(const std::vector<DeadLetter>& letters);
  Status add(const DeadLetter& letter) { return add(std::vector<DeadLetter>{letter}); }

  // --- reading -------------------------------------------------------------
  struct Page {
    int64_t after_id = 0;  // ids greater than this
    int64_t max_id = 0;    // and at most this (0: no bound)
    size_t limit = 1000;
    bool with_payload = true;
    bool exclude_in_doubt = false;  // leave out entries a replay has in flight
  };
  Expected<std::vector<DlqEntry>> fetch(const DlqFilter& filter, const Page& page);
  // Every matching entry in id order, read in pages (no read transaction
  // stays open while `fn` runs). `limit` 0: all.
  Status scan(const DlqFilter& filter, size_t limit, bool with_payload,
              const std::function<Status(const DlqEntry&)>& fn);
  // The largest id now (0 when empty): a replay stops there, so that lines
  // failing again while it runs wait for the next one.
  Expected<int64_t> max_id();
  // How many entries match `filter` with an id up to `max_id`.
  Expected<uint64_t> count(const DlqFilter& filter, int64_t max_id);
  // A random id given to the store when it was created: replayed records
  // carry "STORE_ID:ENTRY_ID" (dlq_header::kReplayId).
  Expected<std::string> store_id();

  // --- replay bookkeeping --------------------------------------------------
  // Marks entries replayed, each only if it has not failed again since it
  // was read (`failures` as read): a line that fails again while its
  // replay is being acknowledged stays pending.
  struct Delivered {
    int64_t id = 0;
    int64_t failures = 1;
  };
  Status mark_replayed(const std::vector<Delivered>& done, Millis now);
  // --again: the first `limit` (0: all) entries matching `filter` with ids
  // up to `max_id` become pending again. Returns how many changed.
  Expected<int64_t> reset_replayed(const DlqFilter& filter, int64_t max_id, size_t limit);

  // A batch sent to a target that acknowledges later (Kafka), recorded
  // before it is sent with the target's end offsets (`mark`), so that a
  // replay killed before the acknowledgements can tell afterwards which of
  // its entries reached the target.
  Expected<int64_t> begin_batch(const std::string& target, const std::string& mark,
                                const std::vector<int64_t>& ids, Millis now);
  struct InDoubt {
    int64_t batch = 0;
    std::string target;
    std::string mark;
    std::vector<int64_t> ids;
  };
  Expected<std::vector<InDoubt>> in_doubt();
  // Ends a batch: the entries in `delivered` are replayed, the others
  // pending again.
  Status settle(const InDoubt& batch, const std::set<int64_t>& delivered, Millis now);

  // --- purging -------------------------------------------------------------
  // Deletes (or with `dry_run` counts) the entries that are replayed (when
  // `replayed`) and older than `before` (when given).
  Expected<int64_t> purge(bool replayed, std::optional<Millis> before, bool dry_run);

  // Only one replay at a time per store: an advisory lock on FILE.db.lock,
  // released when the process ends however it ends. Holds it while alive.
  class ReplayLock {
   public:
    explicit ReplayLock(int fd = -1) : fd_(fd) {}
    ReplayLock(ReplayLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    ReplayLock& operator=(ReplayLock&&) = delete;
    ~ReplayLock();

   private:
    int fd_;
  };
  Expected<ReplayLock> lock_for_replay();

  Database& db() { return *db_; }
  const std::string& path() const { return db_->path(); }

 private:
  explicit DlqStore(std::unique_ptr<Database> db) : db_(std::move(db)) {}
  std::unique_ptr<Database> db_;
  std::optional<Statement> insert_;
  std::optional<Statement> mark_;
  bool has_batches_ = false;  // this process began batches: drop them once marked
};

// The sink behind --dlq FILE.db: keeps dead letters in memory until sync()
// writes them in one transaction, so that no process holds the store's
// write lock between syncs (a crash loses the same either way).
std::unique_ptr<DeadLetterSink> make_store_sink(std::unique_ptr<DlqStore> store);

// The store as kdlq reads, replays and purges it.
std::unique_ptr<DeadLetters> make_store_dead_letters(std::unique_ptr<DlqStore> store);

// The SQLite store as a ledger: entries matching `filter` (pending ones,
// up to the largest id when the replay starts), at most `limit` (0: all).
Expected<std::unique_ptr<ReplayLedger>> make_store_ledger(DlqStore& store, const DlqFilter& filter,
                                                          size_t limit, Clock& clock);

}  // namespace kpipe
