#include "kpipe/window.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kpipe/choices.h"
#include "kpipe/window_aggregate.h"

namespace kpipe {

using namespace window_internal;

namespace {

constexpr Millis kNever = std::numeric_limits<Millis>::max();
// Event times stay within +-2^53 ms (epoch_to_millis); durations bounded
// the same way keep every start + size + lateness inside an int64.
constexpr Millis kMaxDuration = Millis{1} << 53;
// A sliding record lands in size/every windows: bound the fan-out.
constexpr Millis kMaxWindowsPerRecord = 10000;

uint64_t hash_bytes(std::string_view s) {
  return XXH3_64bits(s.data(), s.size());
}

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return hash_bytes(s); }
};

}  // namespace

// --- options -------------------------------------------------------------------

Expected<AggSpec> parse_agg_spec(std::string_view text) {
  AggSpec spec;
  std::string_view rest = text;
  size_t eq = text.find('=');
  size_t colon = text.find(':');
  bool named = eq != std::string_view::npos && (colon == std::string_view::npos || eq < colon);
  if (named) {
    spec.name = std::string(text.substr(0, eq));
    rest = text.substr(eq + 1);
    if (spec.name.empty()) return usage_error("--agg '{}': the name before '=' is empty", text);
  }
  colon = rest.find(':');
  std::string_view fn_text = rest.substr(0, colon);
  auto fn = parse_choice("aggregate function", fn_text,
                         {"count", "sum", "min", "max", "avg", "distinct"});
  if (!fn) return fn.take_error();
  spec.fn = static_cast<AggFn>(*fn);
  if (spec.fn == AggFn::kCount) {
    if (colon != std::string_view::npos)
      return usage_error("--agg '{}': count takes no field path", text);
    if (spec.name.empty()) spec.name = "count";
    return spec;
  }
  if (colon == std::string_view::npos || colon + 1 == rest.size())
    return usage_error("--agg '{}': {} needs a field path, e.g. {}:.value.amount", text, fn_text,
                       fn_text);
  spec.path = std::string(rest.substr(colon + 1));
  auto path = FieldPath::parse(spec.path);
  if (!path) return path.take_error();
  if (spec.name.empty()) {
    std::string last = path->last_key();
    if (last.empty())
      return usage_error("--agg '{}': the path ends without a field name; name the output: NAME={}",
                         text, rest);
    spec.name = fmt::format("{}_{}", fn_text, last);
  }
  return spec;
}

Status validate_window_config(const WindowConfig& c) {
  const WindowShape& s = c.shape;
  auto check = [](const char* what, Millis d, bool positive) -> Status {
    if (positive && d <= 0) return usage_error("{}: the duration must be positive", what);
    if (d < 0) return usage_error("{}: the duration must not be negative", what);
    if (d > kMaxDuration) return usage_error("{}: the duration is too long", what);
    return {};
  };
  switch (s.kind) {
    case WindowKind::kTumble:
      KPIPE_TRY(check("--tumble", s.size, true));
      break;
    case WindowKind::kSession:
      KPIPE_TRY(check("--session", s.size, true));
      break;
    case WindowKind::kSlide:
      KPIPE_TRY(check("--slide", s.size, true));
      KPIPE_TRY(check("--every", s.every, true));
      if (s.every > s.size)
        return usage_error(
            "--every {} is longer than --slide {}: some records would be in no window",
            format_duration(s.every), format_duration(s.size));
      if ((s.size + s.every - 1) / s.every > kMaxWindowsPerRecord)
        return usage_error("--slide {} --every {} puts each record in more than {} windows",
                           format_duration(s.size), format_duration(s.every), kMaxWindowsPerRecord);
      break;
  }
  KPIPE_TRY(check("--watermark", c.watermark_delay, false));
  KPIPE_TRY(check("--allowed-lateness", c.allowed_lateness, false));
  KPIPE_TRY(check("--idle-timeout", c.idle_timeout, false));
  if (c.aggs.empty()) return usage_error("no aggregate: give --agg");
  for (size_t i = 0; i < c.aggs.size(); ++i) {
    const std::string& name = c.aggs[i].name;
    if (name == "window_start" || name == "window_end" || name == "key" || name == "emit")
      return usage_error(
          "--agg: '{}' is a field of every output line; name the aggregate with NAME=SPEC", name);
    for (size_t j = 0; j < i; ++j)
      if (c.aggs[j].name == name)
        return usage_error("--agg: two aggregates are named '{}'; name one with NAME=SPEC", name);
  }
  return {};
}

// --- the engine ----------------------------------------------------------------

namespace {

// One window of one key, for tumbling and sliding windows. Its aggregate
// states live in the bucket's pool, at index * (stateful aggregates).
struct Entry {
  uint64_t hash = 0;
  uint64_t seq = 0;  // when it was opened: the order of lines with one end
  uint64_t count = 0;
  uint32_t key_at = 0;  // the key's bytes in the bucket's `keys`
  uint32_t key_size = 0;
};

// Tumbling and sliding windows are snapshotted a window at a time (one
// entry per window, "b/START", holding all its keys): a checkpoint that
// touches 100k keys of a few windows writes a few rows, not 100k. Sessions
// are per key, so they are snapshotted per key ("w/START/KEY").

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
  Millis max = kNoWatermark;
  Millis last_seen = 0;  // processing time (steady clock)
  bool dirty = false;
  // From kconsume's partition events; neither is part of a snapshot (a
  // restarted kconsume announces its partitions again).
  bool waiting = false;  // assigned, nothing read yet: holds the watermark
  bool revoked = false;  // no longer ours: does not hold it
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

}  // namespace

struct WindowEngine::Impl {
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

  Impl(WindowConfig c, Clock& clk, Reporter* r)
      : cfg(std::move(c)), clock(clk), aggs(cfg.aggs, cfg.time_format, !cfg.keys.empty(), r) {
    kind = cfg.shape.kind;
    size = cfg.shape.size;
    every = kind == WindowKind::kSlide ? cfg.shape.every : size;
    delay = cfg.watermark_delay;
    lateness = cfg.allowed_lateness;
    idle = cfg.idle_timeout;
    has_key = !cfg.keys.empty();
    track = cfg.track_changes;
    fingerprint = make_fingerprint();
  }

  std::string make_fingerprint() const {
    std::string f;
    switch (kind) {
      case WindowKind::kTumble:
        f = "tumble " + format_duration(size);
        break;
      case WindowKind::kSlide:
        f = "slide " + format_duration(size) + " every " + format_duration(every);
        break;
      case WindowKind::kSession:
        f = "session " + format_duration(size);
        break;
    }
    f += "; key";
    for (const std::string& k : cfg.keys) f += " " + k;
    f += "; agg";
    aggs.describe(f);
    return f;
  }

  // --- output ---

  void append_time(std::string& out, Millis t) const {
    if (cfg.time_format == TimeFormat::kMillis) {
      append_int(out, t);
      return;
    }
    out.push_back('"');
    append_rfc3339(out, t);
    out.push_back('"');
  }

  void append_head(std::string& out, Millis start, Millis end) const {
    out += "{\"window_start\":";
    append_time(out, start);
    out += ",\"window_end\":";
    append_time(out, end);
  }

  void append_tail(std::string& out, Millis start, std::string_view key, uint64_t count,
                   const AggState* st, bool late) {
    if (has_key) {
      out += ",\"key\":";
      out += key;
    }
    aggs.append(out, start, key, count, st);
    out += late ? ",\"emit\":\"late\"}\n" : ",\"emit\":\"on_time\"}\n";
    ++emitted;
  }

  void emit_entry(Bucket& b, size_t index, bool late, std::string& out) {
    if (b.head.empty()) append_head(b.head, b.start, b.end);
    out += b.head;
    const Entry& e = b.entries[index];
    append_tail(out, b.start, b.key(e), e.count, aggs.at(b.aggs, index), late);
  }

  void emit_session(const KeySessions& ks, const Session& s, bool late, std::string& out) {
    append_head(out, s.start, s.end);
    append_tail(out, s.start, ks.key, s.count, s.aggs.data(), late);
  }

  // --- tumbling and sliding windows ---

  Bucket& bucket(Millis start) {
    if (last_bucket != nullptr && last_bucket->start == start) return *last_bucket;
    auto it = buckets.find(start);
    if (it == buckets.end()) {
      if (!spare.empty()) {
        auto node = std::move(spare.back());
        spare.pop_back();
        node.key() = start;
        it = buckets.insert(std::move(node)).position;
      } else {
        it = buckets.try_emplace(start).first;
        it->second.slots.resize(16);
      }
      Bucket& b = it->second;
      b.start = start;
      b.end = start + size;
      b.fired = b.end <= watermark;
      if (!b.fired) next_fire = std::min(next_fire, b.end);
      next_free = std::min(next_free, b.end + lateness);
      next_timer = std::min(next_fire, next_free);
    }
    last_bucket = &it->second;
    return it->second;
  }

  void grow(Bucket& b) {
    size_t n = std::max<size_t>(16, b.slots.size() * 2);
    b.slots.assign(n, Slot{});
    size_t mask = n - 1;
    for (size_t i = 0; i < b.entries.size(); ++i) {
      uint64_t h = b.entries[i].hash;
      size_t at = h & mask;
      while (b.slots[at].index != 0) at = (at + 1) & mask;
      b.slots[at] = Slot{static_cast<uint32_t>(i + 1), static_cast<uint32_t>(h >> 32)};
    }
  }

  size_t find_or_add(Bucket& b, uint64_t hash, std::string_view key) {
    if ((b.entries.size() + 1) * 2 > b.slots.size()) grow(b);
    size_t mask = b.slots.size() - 1;
    uint32_t tag = static_cast<uint32_t>(hash >> 32);
    for (size_t at = hash & mask;; at = (at + 1) & mask) {
      Slot& slot = b.slots[at];
      if (slot.index == 0) {
        size_t index = b.entries.size();
        Entry& e = b.entries.emplace_back();
        e.hash = hash;
        e.seq = next_seq++;
        e.key_at = static_cast<uint32_t>(b.keys.size());
        e.key_size = static_cast<uint32_t>(key.size());
        b.keys.append(key);
        aggs.open(b.aggs);
        slot = Slot{static_cast<uint32_t>(index + 1), tag};
        ++states;
        return index;
      }
      if (slot.tag != tag) continue;
      const Entry& e = b.entries[slot.index - 1];
      if (e.hash == hash && b.key(e) == key) return slot.index - 1;
    }
  }

  void mark_dirty(Bucket& b) {
    if (!track || b.dirty) return;
    b.dirty = true;
    dirty_buckets.push_back(b.start);
  }

  Placement place_aligned(const WindowInput& in, uint64_t hash, std::string& out) {
    Millis t = in.time;
    Millis last = t - floor_mod(t, every);
    Millis first = last - ((size - 1 - (t - last)) / every) * every;
    Placement result = Placement::kTooLate;
    for (Millis start = first; start <= last; start += every) {
      if (start + size + lateness <= watermark) continue;
      Bucket& b = bucket(start);
      size_t index = find_or_add(b, hash, in.key);
      ++b.entries[index].count;
      aggs.add(aggs.at(b.aggs, index), in.aggs);
      mark_dirty(b);
      if (!b.fired) {
        result = Placement::kOnTime;
        continue;
      }
      emit_entry(b, index, true, out);
      if (result == Placement::kTooLate) result = Placement::kLate;
    }
    return result;
  }

  void free_bucket(std::map<Millis, Bucket>::iterator it) {
    Bucket& b = it->second;
    if (track && b.saved) removed.insert(bucket_key(b.start));
    b.saved = false;
    b.dirty = false;
    states -= b.entries.size();
    if (last_bucket == &b) last_bucket = nullptr;
    b.entries.clear();
    b.keys.clear();
    b.aggs.clear();
    std::fill(b.slots.begin(), b.slots.end(), Slot{});
    b.head.clear();
    b.fired = false;
    spare.push_back(buckets.extract(it));
    // One spare per live window is enough to reuse; more is memory held.
    if (spare.size() > 4) spare.erase(spare.begin());
  }

  void run_aligned_timers(std::string& out) {
    if (watermark >= next_fire) {
      auto it = buckets.lower_bound(next_fire - size);
      for (; it != buckets.end() && it->second.end <= watermark; ++it) {
        Bucket& b = it->second;
        if (b.fired) continue;
        b.fired = true;
        for (size_t i = 0; i < b.entries.size(); ++i) emit_entry(b, i, false, out);
      }
      next_fire = it == buckets.end() ? kNever : it->second.end;
    }
    while (!buckets.empty() && buckets.begin()->second.end + lateness <= watermark)
      free_bucket(buckets.begin());
    next_free = buckets.empty() ? kNever : buckets.begin()->second.end + lateness;
  }

  // --- session windows ---

  void mark_dirty(KeySessions& ks, Session& s) {
    if (!track || s.dirty) return;
    s.dirty = true;
    dirty_keys.push_back(ks.key);
  }

  void drop_session(KeySessions& ks, const Session& s) {
    if (s.end > watermark) fire_queue.erase({s.end, s.seq});
    free_queue.erase({s.end + lateness, s.seq});
    if (track && s.saved) removed.insert(entry_key(s.start, ks.key));
    --states;
  }

  void queue_session(KeySessions& ks, const Session& s) {
    if (s.end > watermark) fire_queue.emplace(std::make_pair(s.end, s.seq), &ks);
    free_queue.emplace(std::make_pair(s.end + lateness, s.seq), &ks);
    ++states;
  }

  Placement place_session(const WindowInput& in, std::string& out) {
    Millis t = in.time;
    Millis end = t + size;
    auto it = sessions.find(in.key);
    // The sessions this record's [t, t + gap) overlaps or touches.
    size_t lo = 0, hi = 0;
    if (it != sessions.end()) {
      const auto& list = it->second.list;
      while (lo < list.size() && list[lo].end < t) ++lo;
      hi = lo;
      while (hi < list.size() && list[hi].start <= end) ++hi;
    }
    if (lo == hi && end + lateness <= watermark) return Placement::kTooLate;
    if (it == sessions.end()) {
      it = sessions.try_emplace(std::string(in.key)).first;
      it->second.key = std::string(in.key);
    }
    KeySessions& ks = it->second;
    Session merged;
    if (lo == hi) {
      merged.start = t;
      merged.end = end;
      merged.seq = next_seq++;
      aggs.open(merged.aggs);
    } else {
      // A record may bridge several sessions, fired ones included.
      merged = std::move(ks.list[lo]);
      drop_session(ks, merged);
      merged.start = std::min(merged.start, t);
      for (size_t i = lo + 1; i < hi; ++i) {
        Session& s = ks.list[i];
        drop_session(ks, s);
        merged.end = std::max(merged.end, s.end);
        merged.seq = std::min(merged.seq, s.seq);
        merged.count += s.count;
        aggs.merge(merged.aggs.data(), s.aggs.data());
      }
      merged.end = std::max(merged.end, end);
      merged.dirty = false;
      merged.saved = false;
      ks.list.erase(ks.list.begin() + static_cast<ptrdiff_t>(lo),
                    ks.list.begin() + static_cast<ptrdiff_t>(hi));
    }
    ++merged.count;
    aggs.add(merged.aggs.data(), in.aggs);
    Session& s = *ks.list.insert(ks.list.begin() + static_cast<ptrdiff_t>(lo), std::move(merged));
    queue_session(ks, s);
    mark_dirty(ks, s);
    next_timer =
        std::min(next_timer, std::min(s.end + lateness, s.end > watermark ? s.end : kNever));
    if (s.end > watermark) return Placement::kOnTime;
    emit_session(ks, s, true, out);
    return Placement::kLate;
  }

  static Session* find_session(KeySessions& ks, uint64_t seq) {
    for (Session& s : ks.list)
      if (s.seq == seq) return &s;
    return nullptr;
  }

  void run_session_timers(std::string& out) {
    while (!fire_queue.empty() && fire_queue.begin()->first.first <= watermark) {
      auto it = fire_queue.begin();
      KeySessions& ks = *it->second;
      Session* s = find_session(ks, it->first.second);
      fire_queue.erase(it);
      if (s != nullptr) emit_session(ks, *s, false, out);
    }
    while (!free_queue.empty() && free_queue.begin()->first.first <= watermark) {
      auto it = free_queue.begin();
      KeySessions& ks = *it->second;
      uint64_t seq = it->first.second;
      free_queue.erase(it);
      auto pos = std::find_if(ks.list.begin(), ks.list.end(),
                              [&](const Session& s) { return s.seq == seq; });
      if (pos == ks.list.end()) continue;
      if (track && pos->saved) removed.insert(entry_key(pos->start, ks.key));
      --states;
      ks.list.erase(pos);
      if (ks.list.empty()) sessions.erase(sessions.find(ks.key));
    }
  }

  // --- watermark ---

  size_t partition(std::string_view topic, int64_t id) {
    if (last_part < parts.size() && parts[last_part].id == id && parts[last_part].topic == topic)
      return last_part;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].id == id && parts[i].topic == topic) return last_part = i;
    }
    Partition& p = parts.emplace_back();
    p.topic = std::string(topic);
    p.id = id;
    p.last_seen = idle > 0 ? clock.steady() : 0;
    return last_part = parts.size() - 1;
  }

  // The minimum of the partitions' watermarks, idle ones and those at
  // their end excepted; when all are excepted, nothing holds the watermark
  // back but the delay. An assigned partition that has sent nothing holds
  // it where it is.
  Millis compute_watermark(Millis now) const {
    if (parts.size() == 1 && !parts[0].waiting && parts[0].max != kNoWatermark)
      return parts[0].max - delay;
    Millis low = kNever;
    for (const Partition& p : parts) {
      if (idle > 0 && now - p.last_seen >= idle) continue;
      if (p.revoked) continue;
      if (p.waiting) return kNoWatermark;
      if (p.max == kNoWatermark) continue;
      low = std::min(low, p.max);
    }
    if (low == kNever) low = global_max;
    if (low == kNoWatermark) return kNoWatermark;
    return low - delay;
  }

  void advance(Millis w, std::string& out) {
    if (w <= watermark) return;
    watermark = w;
    if (watermark < next_timer) return;
    if (kind == WindowKind::kSession) {
      run_session_timers(out);
    } else {
      run_aligned_timers(out);
    }
    update_next_timer();
  }

  void update_next_timer() {
    if (kind == WindowKind::kSession) {
      next_timer = kNever;
      if (!fire_queue.empty()) next_timer = fire_queue.begin()->first.first;
      if (!free_queue.empty()) next_timer = std::min(next_timer, free_queue.begin()->first.first);
      return;
    }
    next_timer = std::min(next_fire, next_free);
  }

  // Every window of a record must start and end within the times RFC 3339
  // can write, or its line could not be read back (kpipe(7), TIMES AND
  // DURATIONS): a record of the last window before year 10000 is refused,
  // since that window ends at 10000-01-01.
  Status check_time(Millis t) const {
    Millis first = t, end = t + size;
    if (t >= kMinTime && t <= kMaxTime && kind != WindowKind::kSession) {
      Millis last = t - floor_mod(t, every);
      first = last - ((size - 1 - (t - last)) / every) * every;
      end = last + size;
    }
    if (t >= kMinTime && t <= kMaxTime && first >= kMinTime && end <= kMaxTime) return {};
    return window_range_error(t, end);
  }

  [[gnu::cold]] Error window_range_error(Millis t, Millis end) const {
    std::string path = cfg.time_path.empty() ? std::string("the event time")
                                             : fmt::format("field '{}'", cfg.time_path);
    if (t < kMinTime || t > kMaxTime)
      return data_error(
          "{}: time {} ms is outside RFC 3339's range, 0000-01-01T00:00:00Z to "
          "9999-12-31T23:59:59.999Z",
          path, t);
    const char* which = end > kMaxTime
                            ? "ends after 9999-12-31T23:59:59.999Z, RFC 3339's last time"
                            : "starts before 0000-01-01T00:00:00Z, RFC 3339's first time";
    return data_error("{}: time {} falls in a window that {}", path, format_rfc3339(t), which);
  }

  Status check(const WindowInput& in) const {
    KPIPE_TRY(check_time(in.time));
    return aggs.check(in.aggs);
  }

  // Where place_aligned() would put the record, from the watermark alone
  // (the window that starts last ends last); and a prefetch of the slot
  // its key will probe in that window, when it is the current one (for
  // another, a map lookup would cost what the prefetch saves).
  Placement aligned_placement(const WindowInput& in) const {
    Millis last = in.time - floor_mod(in.time, every);
    Millis end = last + size;
    if (end + lateness <= watermark) return Placement::kTooLate;
    const Bucket* b = last_bucket;
    if (b != nullptr && b->start == last)
      __builtin_prefetch(&b->slots[hash_bytes(in.key) & (b->slots.size() - 1)]);
    return end > watermark ? Placement::kOnTime : Placement::kLate;
  }

  // Whether a window the record falls into holds its key already (the
  // last such window, for tumbling and sliding; any session of the key).
  bool holds_key(const WindowInput& in) const {
    if (kind == WindowKind::kSession) return sessions.find(in.key) != sessions.end();
    Millis last = in.time - floor_mod(in.time, every);
    auto it = buckets.find(last);
    if (it == buckets.end()) return false;
    const Bucket& b = it->second;
    if (b.slots.empty()) return false;
    uint64_t hash = hash_bytes(in.key);
    size_t mask = b.slots.size() - 1;
    uint32_t tag = static_cast<uint32_t>(hash >> 32);
    for (size_t at = hash & mask;; at = (at + 1) & mask) {
      const Slot& slot = b.slots[at];
      if (slot.index == 0) return false;
      if (slot.tag != tag) continue;
      const Entry& e = b.entries[slot.index - 1];
      if (e.hash == hash && b.key(e) == in.key) return true;
    }
  }

  Expected<Placement> add(const WindowInput& in, std::string& out) {
    KPIPE_TRY(check(in));
    Millis now = idle > 0 ? clock.steady() : 0;
    size_t p = partition(in.topic, in.partition);
    if (idle > 0) parts[p].last_seen = now;
    parts[p].waiting = false;
    parts[p].revoked = false;
    Placement placed = kind == WindowKind::kSession ? place_session(in, out)
                                                    : place_aligned(in, hash_bytes(in.key), out);
    bool raised = false;
    if (in.time > parts[p].max) {
      parts[p].max = in.time;
      parts[p].dirty = track;
      raised = true;
    }
    global_max = std::max(global_max, in.time);
    if (raised || (idle > 0 && parts.size() > 1)) advance(compute_watermark(now), out);
    return placed;
  }

  void on_idle(std::string& out) {
    if (idle <= 0 || parts.size() < 2) return;
    advance(compute_watermark(clock.steady()), out);
  }

  void partition_event(std::string_view topic, int64_t id, bool assigned, std::string& out) {
    Partition& p = parts[partition(topic, id)];
    if (idle > 0) p.last_seen = clock.steady();
    p.revoked = !assigned;
    p.waiting = assigned && p.max == kNoWatermark;
    // An assignment can only hold the watermark back, never move it. (Moving
    // it here, after the first partition of an announcement and before the
    // others, once let a restored partition run the watermark ahead alone:
    // found by kupsert's crash test.)
    if (!assigned) advance(compute_watermark(idle > 0 ? clock.steady() : 0), out);
  }

  void flush(std::string& out) {
    if (kind == WindowKind::kSession) {
      for (auto& [when, ks] : fire_queue) {
        Session* s = find_session(*ks, when.second);
        if (s != nullptr) emit_session(*ks, *s, false, out);
      }
      fire_queue.clear();
    } else {
      for (auto& [start, b] : buckets) {
        if (b.fired) continue;
        b.fired = true;
        for (size_t i = 0; i < b.entries.size(); ++i) emit_entry(b, i, false, out);
      }
      next_fire = kNever;
    }
    update_next_timer();
  }

  // --- snapshots ---

  static std::string bucket_key(Millis start) {
    std::string k = "b/";
    append_int(k, start);
    return k;
  }

  static void append_length(std::string& out, size_t n) {
    while (n >= 0x80) {
      out.push_back(static_cast<char>((n & 0x7f) | 0x80));
      n >>= 7;
    }
    out.push_back(static_cast<char>(n));
  }

  static bool read_length(std::string_view& in, size_t& n) {
    n = 0;
    for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
      auto byte = static_cast<uint8_t>(in.front());
      in.remove_prefix(1);
      n |= static_cast<size_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  static std::string entry_key(Millis start, std::string_view key) {
    std::string k = "w/";
    append_int(k, start);
    k.push_back('/');
    k.append(key);
    return k;
  }

  void encode_entry(std::string& v, Millis end, uint64_t seq, uint64_t count,
                    const AggState* st) const {
    v.clear();
    v.push_back('[');
    append_int(v, end);
    v.push_back(',');
    append_uint(v, seq);
    v.push_back(',');
    append_uint(v, count);
    aggs.save(v, st);
    v.push_back(']');
  }

  void take_changes(StateChanges& out) {
    if (!meta_saved || watermark != saved_watermark || next_seq != saved_seq) {
      std::string v = "{\"config\":";
      append_json_string(v, fingerprint);
      v += ",\"watermark\":";
      if (watermark == kNoWatermark) {
        v += "null";
      } else {
        append_int(v, watermark);
      }
      v += ",\"seq\":";
      append_uint(v, next_seq);
      v += "}";
      out.put.emplace_back("meta", std::move(v));
      meta_saved = true;
      saved_watermark = watermark;
      saved_seq = next_seq;
    }
    for (Partition& p : parts) {
      if (!p.dirty) continue;
      p.dirty = false;
      std::string k = "p/";
      append_int(k, p.id);
      k.push_back('/');
      k += p.topic;
      std::string v;
      append_int(v, p.max);
      out.put.emplace_back(std::move(k), std::move(v));
    }
    std::string value;
    for (Millis start : dirty_buckets) {
      auto it = buckets.find(start);
      if (it == buckets.end() || !it->second.dirty) continue;
      Bucket& b = it->second;
      b.dirty = false;
      b.saved = true;
      // The whole window, its entries in the order they were opened:
      // [key length, key, value length, value] each.
      std::string blob;
      for (size_t index = 0; index < b.entries.size(); ++index) {
        const Entry& e = b.entries[index];
        encode_entry(value, b.end, e.seq, e.count, aggs.at(b.aggs, index));
        append_length(blob, e.key_size);
        blob.append(b.key(e));
        append_length(blob, value.size());
        blob.append(value);
      }
      std::string k = bucket_key(start);
      removed.erase(k);
      out.put.emplace_back(std::move(k), std::move(blob));
    }
    dirty_buckets.clear();
    for (const std::string& key : dirty_keys) {
      auto it = sessions.find(key);
      if (it == sessions.end()) continue;
      for (Session& s : it->second.list) {
        if (!s.dirty) continue;
        s.dirty = false;
        s.saved = true;
        std::string k = entry_key(s.start, key);
        removed.erase(k);
        encode_entry(value, s.end, s.seq, s.count, s.aggs.data());
        out.put.emplace_back(std::move(k), value);
      }
    }
    dirty_keys.clear();
    for (const std::string& k : removed) out.removed.push_back(k);
    removed.clear();
  }

  static Expected<int64_t> to_int(std::string_view text) {
    int64_t v = 0;
    auto r = std::from_chars(text.data(), text.data() + text.size(), v);
    if (r.ec != std::errc() || r.ptr != text.data() + text.size())
      return failure("'{}' is not an integer", text);
    return v;
  }

  Status restore_entry(std::string_view key, std::string_view value) {
    auto bad = [&](std::string_view why) {
      return failure("saved state entry '{}': {}", key, why);
    };
    if (key == "meta") {
      auto v = parse_json(value);
      if (!v || v->type != JsonType::kObject) return bad("not a JSON object");
      const JsonValue* config = v->find("config");
      const JsonValue* w = v->find("watermark");
      const JsonValue* seq = v->find("seq");
      if (config == nullptr || config->type != JsonType::kString || w == nullptr ||
          seq == nullptr || seq->type != JsonType::kNumber || !seq->is_integer ||
          !(w->type == JsonType::kNull || (w->type == JsonType::kNumber && w->is_integer)))
        return bad("malformed");
      if (config->str != fingerprint)
        return failure(
            "the saved state was made with other options ({}), not these ({}): give another --name "
            "or state file",
            config->str, fingerprint);
      watermark = w->type == JsonType::kNull ? kNoWatermark : w->integer;
      next_seq = static_cast<uint64_t>(seq->integer);
      restored_meta = true;
      return {};
    }
    if (key.starts_with("p/")) {
      std::string_view rest = key.substr(2);
      size_t slash = rest.find('/');
      if (slash == std::string_view::npos) return bad("malformed key");
      auto id = to_int(rest.substr(0, slash));
      auto max = to_int(value);
      if (!id || !max) return bad("malformed");
      Partition& p = parts.emplace_back();
      p.id = *id;
      p.topic = std::string(rest.substr(slash + 1));
      p.max = *max;
      return {};
    }
    if (key.starts_with("b/")) {
      auto start = to_int(key.substr(2));
      if (!start) return bad("malformed key");
      std::string_view in = value;
      while (!in.empty()) {
        size_t n = 0;
        if (!read_length(in, n) || n > in.size()) return bad("truncated");
        std::string_view entry_key_text = in.substr(0, n);
        in.remove_prefix(n);
        if (!read_length(in, n) || n > in.size()) return bad("truncated");
        std::string_view entry_value = in.substr(0, n);
        in.remove_prefix(n);
        KPIPE_TRY(restore_window_entry(key, *start, entry_key_text, entry_value));
      }
      return {};
    }
    if (key.starts_with("w/")) {
      std::string_view rest = key.substr(2);
      size_t slash = rest.find('/');
      if (slash == std::string_view::npos) return bad("malformed key");
      auto start = to_int(rest.substr(0, slash));
      if (!start) return bad("malformed key");
      return restore_window_entry(key, *start, rest.substr(slash + 1), value);
    }
    return bad("unknown kind of entry");
  }

  // One window-and-key entry of a snapshot.
  Status restore_window_entry(std::string_view key, Millis start, std::string_view entry_key_text,
                              std::string_view value) {
    auto bad = [&](std::string_view why) {
      return failure("saved state entry '{}': {}", key, why);
    };
    {
      auto v = parse_json(value);
      if (!v || v->type != JsonType::kArray || v->items.size() != 3 + aggs.size())
        return bad("malformed");
      for (size_t i = 0; i < 3; ++i)
        if (v->items[i].type != JsonType::kNumber || !v->items[i].is_integer)
          return bad("malformed");
      Restored& r = restored.emplace_back();
      r.start = start;
      r.key = std::string(entry_key_text);
      r.end = v->items[0].integer;
      r.seq = static_cast<uint64_t>(v->items[1].integer);
      r.count = static_cast<uint64_t>(v->items[2].integer);
      aggs.open(r.aggs);
      Status s = aggs.load(v->items.data() + 3, r.aggs.data());
      if (!s.ok()) return bad(s.error().message);
      return {};
    }
  }

  Status finish_restore() {
    if (!restored_meta) {
      if (parts.empty() && restored.empty()) return {};
      return failure("saved state has entries but no 'meta' entry");
    }
    Millis now = idle > 0 ? clock.steady() : 0;
    for (Partition& p : parts) {
      p.last_seen = now;
      global_max = std::max(global_max, p.max);
    }
    // find_or_add numbers the entries it makes; they keep their saved numbers.
    uint64_t seq = next_seq;
    std::sort(restored.begin(), restored.end(), [](const Restored& a, const Restored& b) {
      return a.start != b.start ? a.start < b.start : a.seq < b.seq;
    });
    for (Restored& r : restored) {
      if (kind == WindowKind::kSession) {
        auto it = sessions.try_emplace(r.key).first;
        KeySessions& ks = it->second;
        ks.key = r.key;
        Session& s = ks.list.emplace_back();
        s.start = r.start;
        s.end = r.end;
        s.seq = r.seq;
        s.count = r.count;
        s.aggs = std::move(r.aggs);
        s.saved = true;
        continue;
      }
      if (r.end != r.start + size || floor_mod(r.start, every) != 0)
        return failure("saved state entry for window {} does not fit the window options", r.start);
      Bucket& b = bucket(r.start);
      size_t index = find_or_add(b, hash_bytes(r.key), r.key);
      Entry& e = b.entries[index];
      e.seq = r.seq;
      e.count = r.count;
      b.saved = true;
      std::move(r.aggs.begin(), r.aggs.end(), aggs.at(b.aggs, index));
    }
    // The sessions were added in order of start: queue them now that each
    // key's list is complete (queue_session takes pointers to the lists).
    for (auto& [key, ks] : sessions)
      for (const Session& s : ks.list) queue_session(ks, s);
    next_seq = seq;
    restored.clear();
    restored.shrink_to_fit();
    meta_saved = true;
    saved_watermark = watermark;
    saved_seq = next_seq;
    if (kind != WindowKind::kSession) {
      // The first window that has not fired. With no watermark yet, none
      // has (and watermark - size would overflow: the restored windows
      // were then freed unfired, found by kupsert's crash test).
      auto it = watermark == kNoWatermark ? buckets.begin() : buckets.upper_bound(watermark - size);
      next_fire = it == buckets.end() ? kNever : it->second.end;
      next_free = buckets.empty() ? kNever : buckets.begin()->second.end + lateness;
    }
    update_next_timer();
    // Lines cannot come out of this: windows behind the watermark have
    // fired, and only freeing is due if the lateness was shortened.
    std::string none;
    if (watermark >= next_timer) {
      if (kind == WindowKind::kSession) {
        run_session_timers(none);
      } else {
        run_aligned_timers(none);
      }
      update_next_timer();
    }
    return {};
  }
};

WindowEngine::WindowEngine(WindowConfig config, Clock& clock, Reporter* reporter)
    : impl_(std::make_unique<Impl>(std::move(config), clock, reporter)) {}
WindowEngine::~WindowEngine() = default;

Expected<Placement> WindowEngine::add(const WindowInput& in, std::string& out) {
  return impl_->add(in, out);
}
Status WindowEngine::check(const WindowInput& in) const {
  return impl_->check(in);
}
bool WindowEngine::holds_key(const WindowInput& in) const {
  return impl_->holds_key(in);
}
std::optional<Placement> WindowEngine::placement(const WindowInput& in) const {
  if (impl_->kind == WindowKind::kSession) return std::nullopt;
  return impl_->aligned_placement(in);
}
void WindowEngine::on_idle(std::string& out) {
  impl_->on_idle(out);
}

void WindowEngine::partition_assigned(std::string_view topic, int64_t partition, std::string& out) {
  impl_->partition_event(topic, partition, true, out);
}

void WindowEngine::partition_revoked(std::string_view topic, int64_t partition, std::string& out) {
  impl_->partition_event(topic, partition, false, out);
}
void WindowEngine::flush(std::string& out) {
  impl_->flush(out);
}
Millis WindowEngine::watermark() const {
  return impl_->watermark;
}
uint64_t WindowEngine::states() const {
  return impl_->states;
}
uint64_t WindowEngine::emitted() const {
  return impl_->emitted;
}
void WindowEngine::take_changes(StateChanges& out) {
  impl_->take_changes(out);
}
Status WindowEngine::restore_entry(std::string_view key, std::string_view value) {
  return impl_->restore_entry(key, value);
}
Status WindowEngine::finish_restore() {
  return impl_->finish_restore();
}

}  // namespace kpipe
