// kjoin's engine (kjoin(1)): a table of rows by key, either the newest row
// per key (lookup joins) or every version of a key's row by time (event-time
// temporal joins), the table's watermark, and the stream records that wait
// for it. Pure: the program feeds it table records from Kafka, a file or a
// database, and takes the time from an injected clock.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kpipe/json.h"
#include "kpipe/position.h"
#include "kpipe/snapshot.h"
#include "kpipe/status.h"
#include "kpipe/time.h"
#include "kpipe/watermark.h"

namespace kpipe {

// The newest row per key, compactly: keys and rows in an arena of large
// blocks, found through an open-addressing index of hashes, so that a table
// of a million rows costs little more than its text.
class LookupTable {
 public:
  LookupTable();
  ~LookupTable();
  LookupTable(LookupTable&&) noexcept;
  LookupTable& operator=(LookupTable&&) noexcept;

  // Whether it replaced the key's row (a table read whole calls that a
  // duplicate key, kjoin(1), Tables).
  bool put(std::string_view key, std::string_view row);
  // Whether the key was there.
  bool erase(std::string_view key);
  std::optional<std::string_view> find(std::string_view key) const { return find(key, hash(key)); }
  // A lookup in steps, for a caller that works on several records at once
  // so that their cache misses overlap: the key's hash, then a prefetch of
  // its index slot, then (once that is in cache) of its entry, then find.
  static uint64_t hash(std::string_view key);
  void prefetch_slot(uint64_t hash) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[hash & (slots_.size() - 1)]);
  }
  void prefetch_entry(uint64_t hash) const;
  std::optional<std::string_view> find(std::string_view key, uint64_t hash) const;
  // Room for `rows` keys without growing the index.
  void reserve(size_t rows);
  size_t size() const { return live_; }
  // Bytes held: the arena and the index.
  size_t memory() const;
  template <class F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.entry != nullptr && s.entry != kDeleted) f(entry_key(s.entry), entry_row(s.entry));
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    const char* entry = nullptr;  // null: never used; kDeleted: erased
  };
  static const char* const kDeleted;
  static std::string_view entry_key(const char* e);
  static std::string_view entry_row(const char* e);

  const char* store(std::string_view key, std::string_view row);
  // The slot holding `key`, or the free slot where it would go.
  size_t probe(uint64_t hash, std::string_view key, bool& found) const;
  void rehash(size_t capacity);
  void compact();

  std::vector<Slot> slots_;
  size_t live_ = 0;     // slots holding an entry
  size_t deleted_ = 0;  // slots marked kDeleted
  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t block_size_ = 0;
  size_t block_used_ = 0;
  size_t arena_bytes_ = 0;  // blocks allocated
  size_t dead_bytes_ = 0;   // entries replaced or erased
};

// Every version of each key's row, by the time it became valid; a version
// without a row is a tombstone (the key had no row from then on).
class VersionedTable {
 public:
  struct Version {
    Millis time = 0;
    std::optional<std::string> row;
  };
  struct Found {
    std::optional<std::string_view> row;
    // The versions that held at the time asked about were pruned: the
    // answer is unknown.
    bool pruned = false;
  };

  // A version read later replaces one of the same time read earlier:
  // then it returns true.
  bool put(std::string_view key, Millis time, std::optional<std::string_view> row);
  // The row valid at `time`: the newest version at or before it.
  Found find(std::string_view key, Millis time) const;
  // Forgets the versions no record at or after `bound` can need: those
  // older than the newest at or before it. Returns the keys it changed.
  template <class F>
  void prune(Millis bound, F&& changed);
  size_t keys() const { return keys_.size(); }
  size_t versions() const { return versions_; }

  // A key's versions in one text, for snapshots.
  std::optional<std::string> encode(std::string_view key) const;
  Status decode(std::string_view key, std::string_view text);

 private:
  struct Entry {
    std::vector<Version> versions;  // ascending time
    // The newest version forgotten by prune(): the answer for times from
    // the first forgotten one up to the first kept one is unknown.
    std::optional<Millis> pruned_through;
  };
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  std::unordered_map<std::string, Entry, KeyHash, std::equal_to<>> keys_;
  size_t versions_ = 0;
};

template <class F>
void VersionedTable::prune(Millis bound, F&& changed) {
  for (auto& [key, entry] : keys_) {
    auto& v = entry.versions;
    size_t newest_at_or_before = 0;
    bool any = false;
    for (size_t i = 0; i < v.size() && v[i].time <= bound; ++i) {
      newest_at_or_before = i;
      any = true;
    }
    if (!any || newest_at_or_before == 0) continue;
    entry.pruned_through = v[newest_at_or_before - 1].time;
    v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(newest_at_or_before));
    versions_ -= newest_at_or_before;
    changed(std::string_view(key));
  }
}

// How far the table has been read in event time (kjoin(1), --as-of): the
// lowest over its partitions of the newest time read less the allowed
// disorder. A partition silent for the idle timeout stops holding it back;
// a table read whole (a file, a database) holds nothing back.
class TableWatermark {
 public:
  TableWatermark(Millis disorder, Millis idle_timeout)
      : disorder_(disorder), idle_timeout_(idle_timeout) {}

  void set_whole(bool whole) { whole_ = whole; }
  // A partition holds the watermark from when it is known.
  void add_partition(int32_t partition, Millis now);
  void on_record(int32_t partition, Millis time, Millis now);
  // For a restored partition: its newest time, as if just read.
  void restore(int32_t partition, std::optional<Millis> newest, Millis now);
  // A partition that will give nothing more (a Kinesis shard read to its
  // end, closed by a split or a merge) holds the watermark no longer.
  void remove_partition(int32_t partition) { partitions_.erase(partition); }
  std::optional<Millis> newest(int32_t partition) const;
  // kMaxTime when nothing holds it back; kMinTime while a partition has
  // read nothing.
  Millis value(Millis now) const;

 private:
  Millis disorder_;
  Millis idle_timeout_;  // 0: never idle
  bool whole_ = false;
  std::map<int32_t, PartitionProgress> partitions_;
};

// A stream record waiting for the table's watermark, as the line read.
struct PendingRecord {
  uint64_t seq = 0;
  Millis time = 0;
  uint64_t number = 0;  // the line's number in its input
  std::string input;
  std::string text;
  // When it came, among all the stage's queues (an instance's, one per
  // source partition): a control line held behind records goes out once
  // every record that came before it has. Not saved: a restored record
  // came before everything the run reads (0).
  uint64_t arrival = 0;
};

// Stream records waiting for the table's watermark, in the order they came,
// saved as entries of their own ("q/SEQ"): a single pipeline's within its
// JoinEngine, an instance's one queue per source partition, which moves
// with the partition (kpipe(7), MANY INSTANCES).
class PendingQueue final : public Snapshottable {
 public:
  // Whether take_changes() is ever called: else nothing is kept for it
  // (and, turned off, what was kept is forgotten).
  void set_tracking(bool tracking);
  void hold(Millis time, uint64_t number, std::string_view input, std::string_view text,
            uint64_t arrival = 0);
  bool empty() const { return records_.empty(); }
  const PendingRecord& front() const { return records_.front(); }
  void pop_front();
  size_t size() const { return records_.size(); }
  size_t bytes() const { return bytes_; }
  // The oldest event time waiting (kMaxTime when none): versions it may
  // need are not pruned.
  Millis oldest() const;
  // A record of the queue's partition was read at `time`, waiting or not.
  void read(Millis time) { newest_ = std::max(newest_, time); }
  // The oldest event time the partition's records may still need a
  // version for: its newest time read less the stream's disorder, or a
  // record waiting; kMinTime until it has read one, for a partition just
  // taken over may be far behind the others (kpipe(7), MANY INSTANCES).
  Millis needed_from(Millis disorder) const;

  void take_changes(StateChanges& out) override;
  // Takes "q/" entries only: a data_error for any other.
  Status restore_entry(std::string_view key, std::string_view value) override;
  Status finish_restore() override;

 private:
  bool tracking_ = false;
  std::deque<PendingRecord> records_;
  size_t bytes_ = 0;
  uint64_t next_seq_ = 1;
  Millis newest_ = kMinTime;            // not saved: a restored queue waits for its first record
  std::unordered_set<uint64_t> added_;  // since take_changes
  std::vector<uint64_t> removed_;
};

enum class JoinMode { kLookup, kAsOf };

// The table, where the table's reading stands, and the records waiting: the
// state kjoin saves at checkpoints. `persist_rows` false: the table is read
// again at every start (a file, a database), so only the offsets and the
// waiting records are saved.
class JoinEngine final : public Snapshottable {
 public:
  // `clock`: its steady time tells when a table partition has been silent
  // for the idle timeout.
  JoinEngine(JoinMode mode, bool persist_rows, Millis table_disorder, Millis idle_timeout,
             Clock& clock);

  JoinMode mode() const { return mode_; }
  // A table record; `row` nullopt: a tombstone. `partition`: the table's
  // partition, for the watermark and the positions (-1 for a table read
  // whole); `next` the position to read the partition from after it (a
  // Kafka offset, or a Kinesis sequence number: kpipe(7), LOGS).
  // Returns whether it replaced a row of the same key (lookup) or of the
  // same key and time (as of): an update in a topic, a duplicate in a
  // table read whole.
  bool apply(std::string_view key, Millis time, std::optional<std::string_view> row,
             int32_t partition, const Position& next);
  // A table record that is no row (it has no key): only the position moves.
  void skip(int32_t partition, const Position& next);
  // Whether take_changes() is ever called (the stage has --state): else
  // nothing is kept for it. Turned off, what it kept is forgotten: an
  // instance saves no table (kpipe(7), MANY INSTANCES).
  void set_tracking(bool tracking);
  // Replaces the whole table (a file read again): `fresh` was filled by
  // apply() on an engine of the same mode.
  void replace_table(JoinEngine& fresh);
  void add_partition(int32_t partition) { watermark_.add_partition(partition, clock_.steady()); }
  // A table partition read to its end for good (TableWatermark).
  void close_partition(int32_t partition) { watermark_.remove_partition(partition); }
  // Where to read each table partition from, as saved (partitions never
  // read are missing).
  const std::map<int32_t, Position>& offsets() const { return offsets_; }
  void set_whole(bool whole) { watermark_.set_whole(whole); }

  // Lookup: the newest row of `key`.
  std::optional<std::string_view> find(std::string_view key) const { return lookup_.find(key); }
  const LookupTable& lookup_table() const { return lookup_; }
  // Lookup: room for `rows` keys without growing the index.
  void reserve(size_t rows) { lookup_.reserve(rows); }
  // As of: the row of `key` valid at `time`.
  VersionedTable::Found find_as_of(std::string_view key, Millis time) const {
    return versions_.find(key, time);
  }
  Millis table_watermark() const { return watermark_.value(clock_.steady()); }
  // Whether the table has been read past `time` (kjoin(1)). The watermark
  // must be beyond it, not at it: a row as new as the newest read may still
  // come, and it may be the version that holds from `time`.
  static bool passed(Millis watermark, Millis time) {
    return watermark == kMaxTime || time < watermark;
  }
  bool table_passed(Millis time) const { return passed(table_watermark(), time); }

  // Waiting records, oldest first.
  void hold(Millis time, uint64_t number, std::string_view input, std::string_view text) {
    pending_.hold(time, number, input, text);
  }
  bool has_pending() const { return !pending_.empty(); }
  const PendingRecord& front() const { return pending_.front(); }
  void pop_front() { pending_.pop_front(); }
  size_t pending() const { return pending_.size(); }
  size_t pending_bytes() const { return pending_.bytes(); }

  // As of: now and then (when enough versions were added since the last
  // time), forgets the versions that neither a waiting record nor a record
  // at or after `stream_bound` can need. An instance's records wait in
  // queues of their own: it passes the oldest time among them as
  // `stream_bound` when prune_due().
  void maybe_prune(Millis stream_bound);
  bool prune_due() const;

  size_t rows() const;

  void take_changes(StateChanges& out) override;
  Status restore_entry(std::string_view key, std::string_view value) override;
  Status finish_restore() override;

 private:
  void touch(std::string_view key);

  JoinMode mode_;
  bool persist_rows_;
  Clock& clock_;
  bool tracking_ = false;
  LookupTable lookup_;
  VersionedTable versions_;
  TableWatermark watermark_;
  std::map<int32_t, Position> offsets_;
  std::set<int32_t> offsets_changed_;
  PendingQueue pending_;
  std::unordered_set<std::string> dirty_;  // table keys changed since take_changes
  size_t versions_since_prune_ = 0;
};

}  // namespace kpipe
