// kwindow's snapshot (Snapshottable, snapshot.h): the keys and values its
// state store holds. What is written here must stay readable by every later
// kwindow (a restart after an upgrade restores it).
//
// "meta": {"config":FINGERPRINT,"watermark":W|null,"seq":NEXT}.
// "p/PARTITION/TOPIC": the partition's largest event time.
// Tumbling and sliding windows are snapshotted a window at a time (one
// entry per window, "b/START", holding all its keys): a checkpoint that
// touches 100k keys of a few windows writes a few rows, not 100k. Sessions
// are per key, so they are snapshotted per key ("w/START/KEY").

#include "kpipe/window_internal.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kpipe/json.h"

namespace kpipe::window_internal {

namespace {

void append_length(std::string& out, size_t n) {
  while (n >= 0x80) {
    out.push_back(static_cast<char>((n & 0x7f) | 0x80));
    n >>= 7;
  }
  out.push_back(static_cast<char>(n));
}

bool read_length(std::string_view& in, size_t& n) {
  n = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    auto byte = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    n |= static_cast<size_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

Expected<int64_t> to_int(std::string_view text) {
  int64_t v = 0;
  auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size())
    return failure("'{}' is not an integer", text);
  return v;
}

}  // namespace

std::string WindowState::make_fingerprint() const {
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

std::string WindowState::bucket_key(Millis start) {
  std::string k = "b/";
  append_int(k, start);
  return k;
}

std::string WindowState::entry_key(Millis start, std::string_view key) {
  std::string k = "w/";
  append_int(k, start);
  k.push_back('/');
  k.append(key);
  return k;
}

void WindowState::encode_entry(std::string& v, Millis end, uint64_t seq, uint64_t count,
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

void WindowState::take_changes(StateChanges& out) {
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
    append_int(v, p.progress.newest);
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

Status WindowState::restore_entry(std::string_view key, std::string_view value) {
  auto bad = [&](std::string_view why) { return failure("saved state entry '{}': {}", key, why); };
  if (key == "meta") {
    auto v = parse_json(value);
    if (!v || v->type != JsonType::kObject) return bad("not a JSON object");
    const JsonValue* config = v->find("config");
    const JsonValue* w = v->find("watermark");
    const JsonValue* seq = v->find("seq");
    if (config == nullptr || config->type != JsonType::kString || w == nullptr || seq == nullptr ||
        seq->type != JsonType::kNumber || !seq->is_integer ||
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
    p.progress.newest = *max;
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
Status WindowState::restore_window_entry(std::string_view key, Millis start,
                                         std::string_view entry_key_text, std::string_view value) {
  auto bad = [&](std::string_view why) { return failure("saved state entry '{}': {}", key, why); };
  {
    auto v = parse_json(value);
    if (!v || v->type != JsonType::kArray || v->items.size() != 3 + aggs.size())
      return bad("malformed");
    for (size_t i = 0; i < 3; ++i)
      if (v->items[i].type != JsonType::kNumber || !v->items[i].is_integer) return bad("malformed");
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

}  // namespace kpipe::window_internal
