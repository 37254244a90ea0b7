// The dedup engine behind kdedup: remembers the keys of the records that
// passed and says whether the next record is the first of its key within
// the horizon. Pure: no I/O; time comes from the records or from an
// injected Clock, so that tests never sleep.
//
// Memory is the design constraint (at most 40 bytes per remembered key at
// 10M keys, peak RSS). A key is remembered as its 128-bit XXH3 hash (or
// its full text with `exact`) in a ring that holds the keys in the order
// they were remembered: the oldest is at the head, so eviction and expiry
// cost no more than popping it, and the ring grows block by block with no
// doubling spike. An open-addressing index of 8-byte slots finds a key's
// ring position; it is split into shards that grow one at a time by a
// quarter, so that growing never holds two copies of the whole index.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kpipe/snapshot.h"
#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

constexpr uint64_t kDefaultMaxKeys = 50'000'000;
// Ring positions are kept in 32 bits in the index.
constexpr uint64_t kMaxMaxKeys = 4'000'000'000;

struct DedupConfig {
  // How long a key is remembered, measured from the time of the record
  // that passed against the largest time seen; nullopt: for as long as the
  // engine lives (bounded by max_keys).
  std::optional<Millis> within;
  // The most keys remembered; the oldest are evicted first.
  uint64_t max_keys = kDefaultMaxKeys;
  // Store the full key rather than its hash: no collision at any odds.
  bool exact = false;
};

class DedupEngine final : public Snapshottable {
 public:
  // `clock` gives processing time to offer(key) with `within`.
  DedupEngine(DedupConfig config, Clock& clock);
  ~DedupEngine() override;
  DedupEngine(const DedupEngine&) = delete;
  DedupEngine& operator=(const DedupEngine&) = delete;

  // A key's hash, computed ahead of offer(): prepare() also starts
  // fetching the key's index slot, so that a caller with other work to do
  // (parsing the next line) hides the cache miss that dominates offer().
  struct Prepared {
    uint64_t lo = 0;
    uint64_t hi = 0;
  };
  Prepared prepare(std::string_view key);

  // True when the record passes: no record of its key is remembered.
  // Without `within` the time does not matter; with it, this form uses the
  // clock's time (processing time).
  bool offer(std::string_view key);
  // The same with the record's event time.
  bool offer(std::string_view key, Millis time);
  // The same for a key prepared by prepare(key).
  bool offer(const Prepared& prepared, std::string_view key);
  bool offer(const Prepared& prepared, std::string_view key, Millis time);
  // With processing time (offer(key)), expires what the clock has moved
  // past while no record arrives. Event time waits for the next record:
  // do not call it then.
  void tick();

  // Whether a record of the key is remembered, changing nothing (how
  // kdedup tells that a key came from two partitions).
  bool remembers(const Prepared& prepared, std::string_view key);

  uint64_t remembered() const;
  uint64_t evicted() const;
  // The largest time seen, if any.
  std::optional<Millis> max_time() const;

  // Snapshottable. The state is the ring, not the keys: a checkpoint
  // writes the positions added since the previous one as segments and
  // removes the segments the head has left, a few entries however many
  // keys came and went. Entries:
  //   "s" + the first position (8 bytes, big-endian) -> 'h' (hashes) or 'x'
  //     (keys, with `exact`), the count of positions covered (at most
  //     65536), then for each position live when it was written: its
  //     distance from the previous (the first's from the first position),
  //     the 16-byte hash (or the key's length and bytes), and its time as
  //     a zigzag delta from the previous entry's (0 without `within`).
  //     Positions no segment holds were dead when written.
  //   "M" -> the ring's head and tail positions and the largest time seen
  //     (zigzag).
  // Numbers are varints. A key at two positions was remembered again
  // after the older was written: the later is the live one. The format
  // before segments ("h" + hash or "x" + key -> position and time, one per
  // key, and "m") still restores; the next take_changes replaces it.
  void take_changes(StateChanges& out) override;
  Status restore_entry(std::string_view key, std::string_view value) override;
  Status finish_restore() override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace kpipe
