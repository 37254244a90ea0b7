#include "kpipe/window.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "kpipe/choices.h"
#include "kpipe/window_aggregate.h"
#include "kpipe/window_internal.h"

namespace kpipe {

using namespace window_internal;

namespace {

// Event times stay within +-2^53 ms (epoch_to_millis); durations bounded
// the same way keep every start + size + lateness inside an int64.
constexpr Millis kMaxDuration = Millis{1} << 53;
// A sliding record lands in size/every windows: bound the fan-out.
constexpr Millis kMaxWindowsPerRecord = 10000;

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

window_internal::WindowState::WindowState(WindowConfig c, Clock& clk, Reporter* r)
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

struct WindowEngine::Impl : WindowState {
  Impl(WindowConfig c, Clock& clk, Reporter* r) : WindowState(std::move(c), clk, r) {}

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
    p.progress.last_read = idle > 0 ? clock.steady() : 0;
    return last_part = parts.size() - 1;
  }

  // The minimum of the partitions' watermarks, idle ones and those at
  // their end excepted; when all are excepted, nothing holds the watermark
  // back but the delay. An assigned partition that has sent nothing holds
  // it where it is.
  Millis compute_watermark(Millis now) const {
    if (parts.size() == 1 && !parts[0].progress.waiting && parts[0].progress.newest != kNoTime)
      return parts[0].progress.newest - delay;
    auto low = lowest_newest(
        parts, [](const Partition& p) -> const PartitionProgress& { return p.progress; }, idle,
        now);
    if (low.kind == LowestNewest::Kind::kHeld) return kNoWatermark;
    Millis newest = low.kind == LowestNewest::Kind::kTime ? low.newest : global_max;
    if (newest == kNoTime) return kNoWatermark;
    return newest - delay;
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
    PartitionProgress& progress = parts[p].progress;
    if (idle > 0) progress.last_read = now;
    progress.waiting = false;
    progress.revoked = false;
    Placement placed = kind == WindowKind::kSession ? place_session(in, out)
                                                    : place_aligned(in, hash_bytes(in.key), out);
    bool raised = false;
    if (in.time > progress.newest) {
      progress.newest = in.time;
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
    if (idle > 0) p.progress.last_read = clock.steady();
    p.progress.revoked = !assigned;
    p.progress.waiting = assigned && p.progress.newest == kNoTime;
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

  Status finish_restore() {
    if (!restored_meta) {
      if (parts.empty() && restored.empty()) return {};
      return failure("saved state has entries but no 'meta' entry");
    }
    Millis now = idle > 0 ? clock.steady() : 0;
    for (Partition& p : parts) {
      p.progress.last_read = now;
      global_max = std::max(global_max, p.progress.newest);
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
