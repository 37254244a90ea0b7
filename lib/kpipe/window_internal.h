// What window.cpp (the engine) and window_snapshot.cpp (its snapshot
// format) share, private to them: the state of a WindowEngine, which the
// engine changes record by record and the snapshot format writes out at a
// checkpoint and reads back at a restart. An aggregate's own state is
// window_aggregate.h's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kpipe/snapshot.h"
#include "kpipe/status.h"
#include "kpipe/time.h"
#include "kpipe/watermark.h"
#include "kpipe/window.h"
#include "kpipe/window_aggregate.h"

namespace kpipe::window_internal {

inline constexpr Millis kNever = std::numeric_limits<Millis>::max();

inline uint64_t hash_bytes(std::string_view s) {
  return XXH3_64bits(s.data(), s.size());
}

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return hash_bytes(s); }
};

// One window of one key, for tumbling and sliding windows. Its aggregate
// states live in the bucket's pool, where Aggregates::at finds them.
struct Entry {
  uint64_t hash = 0;
  uint64_t seq = 0;  // when it was opened: the order of lines with one end
  uint64_t count = 0;
  uint32_t key_at = 0;  // the key's bytes in the bucket's `keys`
  uint32_t key_size = 0;
};

struct Slot {
  uint32_t index = 0;  // entry index + 1; 0: empty
  uint32_t tag = 0;    // high bits of the hash
};

// All the keys of one aligned window [start, end): windows with one end
// fire together, so they share a bucket, an index, and the text of their
// output lines' beginning.
struct Bucket {
  Millis start = 0;
  Millis end = 0;
  bool fired = false;
  bool dirty = false;          // changed since take_changes() (with track_changes)
  bool saved = false;          // in a snapshot: its removal must be recorded
  std::vector<Entry> entries;  // in the order they were opened
  std::string keys;            // the entries' keys, end to end
  std::vector<AggState> aggs;

  std::string_view key(const Entry& e) const {
    return std::string_view(keys).substr(e.key_at, e.key_size);
  }
  std::vector<Slot> slots;  // open addressing, a power of two
  std::string head;         // {"window_start":...,"window_end":...
};

struct Session {
  Millis start = 0;
  Millis end = 0;
  uint64_t seq = 0;
  uint64_t count = 0;
  std::vector<AggState> aggs;
  bool dirty = false;
  bool saved = false;
};

// The live sessions of one key: sorted by start, disjoint and not touching.
struct KeySessions {
  std::string key;
  std::vector<Session> list;
};

struct Partition {
  std::string topic;
  int64_t id = -1;
  // Its newest time is part of a snapshot; `waiting` and `revoked` come
  // from kconsume's partition events and are not (a restarted kconsume
  // announces its partitions again).
  PartitionProgress progress;
  bool dirty = false;
};

// A window-and-key entry read back from a snapshot.
struct Restored {
  Millis start = 0;
  std::string key;
  Millis end = 0;
  uint64_t seq = 0;
  uint64_t count = 0;
  std::vector<AggState> aggs;
};

using TimerQueue = std::map<std::pair<Millis, uint64_t>, KeySessions*>;

// Everything a WindowEngine holds. The engine (WindowEngine::Impl, in
// window.cpp) adds the code that changes it; the members below that save
// and restore it are the snapshot format (window_snapshot.cpp).
struct WindowState {
  WindowConfig cfg;
  Clock& clock;
  WindowKind kind;
  Millis size, every, delay, lateness, idle;
  bool has_key;
  Aggregates aggs;
  std::string fingerprint;

  Millis watermark = kNoWatermark;
  Millis global_max = kNoWatermark;
  std::vector<Partition> parts;
  size_t last_part = SIZE_MAX;
  uint64_t next_seq = 0;
  uint64_t emitted = 0;
  uint64_t states = 0;
  Millis next_timer = kNever;

  // Tumbling and sliding windows.
  std::map<Millis, Bucket> buckets;
  Bucket* last_bucket = nullptr;
  std::vector<std::map<Millis, Bucket>::node_type> spare;  // freed buckets, reused
  Millis next_fire = kNever;                               // end of the first bucket not fired
  Millis next_free = kNever;                               // when the first bucket is freed

  // Session windows.
  std::unordered_map<std::string, KeySessions, StringHash, std::equal_to<>> sessions;
  TimerQueue fire_queue;  // (end, seq) of sessions not fired
  TimerQueue free_queue;  // (end + lateness, seq) of every session

  // Changes since take_changes().
  bool track;
  std::vector<Millis> dirty_buckets;
  std::vector<std::string> dirty_keys;
  std::unordered_set<std::string> removed;
  bool meta_saved = false;
  Millis saved_watermark = kNoWatermark;
  uint64_t saved_seq = 0;

  // Restore.
  bool restored_meta = false;
  std::vector<Restored> restored;

  WindowState(WindowConfig c, Clock& clk, Reporter* r);

  // --- the snapshot format (window_snapshot.cpp) ---

  // What a snapshot must have been made with: the window, the keys and the
  // aggregates ("meta"'s config).
  std::string make_fingerprint() const;
  // The keys of a snapshot's entries: an aligned window, "b/START"; a
  // session, "w/START/KEY".
  static std::string bucket_key(Millis start);
  static std::string entry_key(Millis start, std::string_view key);
  // One window of one key as a snapshot saves it: [end,seq,count,aggs...].
  void encode_entry(std::string& v, Millis end, uint64_t seq, uint64_t count,
                    const AggState* st) const;
  // Snapshottable::take_changes and restore_entry; what restore_entry reads
  // of windows waits in `restored` for the engine's finish_restore().
  void take_changes(StateChanges& out);
  Status restore_entry(std::string_view key, std::string_view value);
  Status restore_window_entry(std::string_view key, Millis start, std::string_view entry_key_text,
                              std::string_view value);
};

}  // namespace kpipe::window_internal
