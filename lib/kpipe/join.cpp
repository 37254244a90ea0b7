#include "kpipe/join.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kpipe/status.h"

namespace kpipe {

namespace {

constexpr size_t kBlockSize = size_t{1} << 20;
constexpr size_t kEntryHeader = 8;  // two uint32 lengths: key, row
// Compact the arena when this much of it holds replaced or erased rows.
constexpr size_t kCompactAfter = size_t{64} << 20;
constexpr size_t kMinPruneInterval = 1024;

const char kDeletedMarker = 0;

uint64_t hash_key(std::string_view key) {
  return XXH3_64bits(key.data(), key.size());
}

uint32_t read_u32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

size_t entry_size(const char* e) {
  return kEntryHeader + read_u32(e) + read_u32(e + 4);
}

// Entry names in snapshots are text: a key that is not UTF-8 (a binary
// Kafka key) is written in hex under its own prefix.
std::string entry_name(std::string_view prefix, std::string_view key) {
  std::string name;
  if (is_valid_utf8(key)) {
    name.reserve(prefix.size() + 1 + key.size());
    name.append(prefix).append("/").append(key);
    return name;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  name.append(prefix).append("x/");
  for (unsigned char c : key) {
    name.push_back(kHex[c >> 4]);
    name.push_back(kHex[c & 15]);
  }
  return name;
}

Expected<std::string> unhex(std::string_view text) {
  if (text.size() % 2 != 0) return data_error("odd hex key '{}'", text);
  std::string out;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < text.size(); i += 2) {
    int hi = digit(text[i]), lo = digit(text[i + 1]);
    if (hi < 0 || lo < 0) return data_error("bad hex key '{}'", text);
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

// Reads a decimal integer and the separator after it from `text`.
template <class T>
bool take_number(std::string_view& text, T& out, char separator) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || end == text.data() + text.size() || *end != separator) return false;
  text.remove_prefix(static_cast<size_t>(end - text.data()) + 1);
  return true;
}

std::string pending_name(uint64_t seq) {
  return fmt::format("q/{:016x}", seq);
}

}  // namespace

// --- LookupTable -----------------------------------------------------------

const char* const LookupTable::kDeleted = &kDeletedMarker;

LookupTable::LookupTable() = default;
LookupTable::~LookupTable() = default;
LookupTable::LookupTable(LookupTable&&) noexcept = default;
LookupTable& LookupTable::operator=(LookupTable&&) noexcept = default;

std::string_view LookupTable::entry_key(const char* e) {
  return {e + kEntryHeader, read_u32(e)};
}

std::string_view LookupTable::entry_row(const char* e) {
  return {e + kEntryHeader + read_u32(e), read_u32(e + 4)};
}

uint64_t LookupTable::hash(std::string_view key) {
  return hash_key(key);
}

void LookupTable::prefetch_entry(uint64_t hash) const {
  if (slots_.empty()) return;
  const Slot& s = slots_[hash & (slots_.size() - 1)];
  if (s.hash == hash && s.entry != nullptr && s.entry != kDeleted) __builtin_prefetch(s.entry);
}

void LookupTable::reserve(size_t rows) {
  size_t capacity = std::max<size_t>(slots_.size(), 1024);
  // As full as put() lets the index get before it grows.
  while (rows * 10 > capacity * 7) capacity *= 2;
  if (capacity != slots_.size()) rehash(capacity);
}

const char* LookupTable::store(std::string_view key, std::string_view row) {
  size_t size = kEntryHeader + key.size() + row.size();
  if (blocks_.empty() || block_size_ - block_used_ < size) {
    // Not value-initialised: pages are touched only as rows fill them.
    size_t block = std::max(kBlockSize, size);
    blocks_.emplace_back(new char[block]);
    block_size_ = block;
    block_used_ = 0;
    arena_bytes_ += block;
  }
  char* e = blocks_.back().get() + block_used_;
  auto k = static_cast<uint32_t>(key.size());
  auto r = static_cast<uint32_t>(row.size());
  std::memcpy(e, &k, 4);
  std::memcpy(e + 4, &r, 4);
  std::memcpy(e + kEntryHeader, key.data(), key.size());
  std::memcpy(e + kEntryHeader + key.size(), row.data(), row.size());
  block_used_ += size;
  return e;
}

size_t LookupTable::probe(uint64_t hash, std::string_view key, bool& found) const {
  size_t mask = slots_.size() - 1;
  size_t i = hash & mask;
  size_t first_deleted = SIZE_MAX;
  while (true) {
    const Slot& s = slots_[i];
    if (s.entry == nullptr) {
      found = false;
      return first_deleted != SIZE_MAX ? first_deleted : i;
    }
    if (s.entry == kDeleted) {
      if (first_deleted == SIZE_MAX) first_deleted = i;
    } else if (s.hash == hash && entry_key(s.entry) == key) {
      found = true;
      return i;
    }
    i = (i + 1) & mask;
  }
}

void LookupTable::rehash(size_t capacity) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{});
  size_t mask = capacity - 1;
  for (const Slot& s : old) {
    if (s.entry == nullptr || s.entry == kDeleted) continue;
    size_t i = s.hash & mask;
    while (slots_[i].entry != nullptr) i = (i + 1) & mask;
    slots_[i] = s;
  }
  deleted_ = 0;
}

void LookupTable::compact() {
  std::vector<std::unique_ptr<char[]>> old = std::move(blocks_);
  blocks_.clear();
  block_size_ = block_used_ = arena_bytes_ = 0;
  for (Slot& s : slots_)
    if (s.entry != nullptr && s.entry != kDeleted)
      s.entry = store(entry_key(s.entry), entry_row(s.entry));
  dead_bytes_ = 0;
}

bool LookupTable::put(std::string_view key, std::string_view row) {
  if (slots_.empty()) slots_.assign(1024, Slot{});
  if ((live_ + deleted_ + 1) * 10 > slots_.size() * 7) {
    size_t capacity = slots_.size();
    while ((live_ + 1) * 10 > capacity * 5) capacity *= 2;
    rehash(capacity);
  }
  uint64_t h = hash_key(key);
  bool found = false;
  size_t i = probe(h, key, found);
  Slot& s = slots_[i];
  if (found) {
    dead_bytes_ += entry_size(s.entry);
  } else {
    if (s.entry == kDeleted) --deleted_;
    ++live_;
  }
  s.hash = h;
  s.entry = store(key, row);
  if (dead_bytes_ > kCompactAfter && dead_bytes_ > arena_bytes_ / 2) compact();
  return found;
}

bool LookupTable::erase(std::string_view key) {
  if (slots_.empty()) return false;
  bool found = false;
  size_t i = probe(hash_key(key), key, found);
  if (!found) return false;
  dead_bytes_ += entry_size(slots_[i].entry);
  slots_[i].entry = kDeleted;
  --live_;
  ++deleted_;
  return true;
}

std::optional<std::string_view> LookupTable::find(std::string_view key, uint64_t hash) const {
  if (slots_.empty()) return std::nullopt;
  bool found = false;
  size_t i = probe(hash, key, found);
  if (!found) return std::nullopt;
  return entry_row(slots_[i].entry);
}

size_t LookupTable::memory() const {
  return arena_bytes_ + slots_.capacity() * sizeof(Slot);
}

// --- VersionedTable --------------------------------------------------------

bool VersionedTable::put(std::string_view key, Millis time, std::optional<std::string_view> row) {
  auto it = keys_.find(key);
  if (it == keys_.end()) it = keys_.emplace(std::string(key), Entry{}).first;
  auto& v = it->second.versions;
  // At or before a forgotten version: it would answer for times where
  // the forgotten one held (records there are refused as pruned).
  if (it->second.pruned_through && time <= *it->second.pruned_through) return false;
  auto at = std::upper_bound(v.begin(), v.end(), time,
                             [](Millis t, const Version& x) { return t < x.time; });
  std::optional<std::string> owned;
  if (row) owned.emplace(*row);
  if (at != v.begin() && std::prev(at)->time == time) {
    std::prev(at)->row = std::move(owned);
    return true;
  }
  v.insert(at, Version{time, std::move(owned)});
  ++versions_;
  return false;
}

VersionedTable::Found VersionedTable::find(std::string_view key, Millis time) const {
  auto it = keys_.find(key);
  if (it == keys_.end()) return {};
  const auto& v = it->second.versions;
  auto at = std::upper_bound(v.begin(), v.end(), time,
                             [](Millis t, const Version& x) { return t < x.time; });
  if (at == v.begin()) return {std::nullopt, it->second.pruned_through.has_value()};
  const Version& found = *std::prev(at);
  if (!found.row) return {};
  return {std::string_view(*found.row), false};
}

// "P;T,L,ROW;T,-1,": P is the time of the newest version pruned ("-":
// none), then each
// version's time, its row's length (-1: a tombstone) and the row.
std::optional<std::string> VersionedTable::encode(std::string_view key) const {
  auto it = keys_.find(key);
  if (it == keys_.end()) return std::nullopt;
  const auto& through = it->second.pruned_through;
  std::string out = through ? fmt::format("{}", *through) : std::string(1, '-');
  for (const Version& v : it->second.versions) {
    out += fmt::format(";{},{},", v.time, v.row ? static_cast<int64_t>(v.row->size()) : -1);
    if (v.row) out += *v.row;
  }
  return out;
}

Status VersionedTable::decode(std::string_view key, std::string_view text) {
  Entry entry;
  auto bad = [&] { return data_error("malformed versions of key '{}'", key); };
  if (text.empty()) return bad();
  if (text[0] == '-') {
    text.remove_prefix(1);
  } else {
    Millis through = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), through);
    if (ec != std::errc()) return bad();
    entry.pruned_through = through;
    text.remove_prefix(static_cast<size_t>(end - text.data()));
  }
  while (!text.empty()) {
    if (text[0] != ';') return bad();
    text.remove_prefix(1);
    Version v;
    int64_t length = 0;
    if (!take_number(text, v.time, ',') || !take_number(text, length, ',')) return bad();
    // find() searches the versions by time: out of order, it would answer
    // with the wrong row (found by tests/fuzz, join_table).
    if (!entry.versions.empty() && v.time <= entry.versions.back().time) return bad();
    if (length >= 0) {
      if (static_cast<size_t>(length) > text.size()) return bad();
      v.row.emplace(text.substr(0, static_cast<size_t>(length)));
      text.remove_prefix(static_cast<size_t>(length));
    }
    entry.versions.push_back(std::move(v));
  }
  versions_ += entry.versions.size();
  keys_[std::string(key)] = std::move(entry);
  return {};
}

// --- TableWatermark --------------------------------------------------------

void TableWatermark::add_partition(int32_t partition, Millis now) {
  PartitionProgress known;
  known.last_read = now;
  known.waiting = true;
  partitions_.try_emplace(partition, known);
}

void TableWatermark::on_record(int32_t partition, Millis time, Millis now) {
  PartitionProgress& p = partitions_[partition];
  p.newest = std::max(p.newest, time);
  p.last_read = now;
  p.waiting = false;
}

void TableWatermark::restore(int32_t partition, std::optional<Millis> newest, Millis now) {
  PartitionProgress& p = partitions_[partition];
  p.newest = newest.value_or(kNoTime);
  p.last_read = now;
  p.waiting = !newest;
}

std::optional<Millis> TableWatermark::newest(int32_t partition) const {
  auto it = partitions_.find(partition);
  if (it == partitions_.end() || it->second.newest == kNoTime) return std::nullopt;
  return it->second.newest;
}

Millis TableWatermark::value(Millis now) const {
  if (whole_) return kMaxTime;
  auto low = lowest_newest(
      partitions_, [](const auto& entry) -> const PartitionProgress& { return entry.second; },
      idle_timeout_, now);
  switch (low.kind) {
    case LowestNewest::Kind::kHeld:
      return kMinTime;
    case LowestNewest::Kind::kNone:
      return kMaxTime;
    case LowestNewest::Kind::kTime:
      break;
  }
  return low.newest - disorder_;
}

// --- JoinEngine ------------------------------------------------------------

JoinEngine::JoinEngine(JoinMode mode, bool persist_rows, Millis table_disorder, Millis idle_timeout,
                       Clock& clock)
    : mode_(mode),
      persist_rows_(persist_rows),
      clock_(clock),
      watermark_(table_disorder, idle_timeout) {}

void JoinEngine::touch(std::string_view key) {
  if (tracking_ && persist_rows_) dirty_.emplace(key);
}

bool JoinEngine::apply(std::string_view key, Millis time, std::optional<std::string_view> row,
                       int32_t partition, const Position& next) {
  bool replaced = false;
  if (mode_ == JoinMode::kLookup) {
    replaced = row ? lookup_.put(key, *row) : lookup_.erase(key);
  } else {
    replaced = versions_.put(key, time, row);
    ++versions_since_prune_;
  }
  touch(key);
  if (partition < 0) return replaced;
  watermark_.on_record(partition, time, clock_.steady());
  skip(partition, next);
  return replaced;
}

void JoinEngine::skip(int32_t partition, const Position& next) {
  offsets_[partition] = next;
  if (tracking_) offsets_changed_.insert(partition);
}

void JoinEngine::replace_table(JoinEngine& fresh) {
  lookup_ = std::move(fresh.lookup_);
  versions_ = std::move(fresh.versions_);
  fresh.lookup_ = LookupTable();
  fresh.versions_ = VersionedTable();
}

void JoinEngine::set_tracking(bool tracking) {
  tracking_ = tracking;
  pending_.set_tracking(tracking);
  if (tracking) return;
  dirty_.clear();
  offsets_changed_.clear();
}

bool JoinEngine::prune_due() const {
  return mode_ == JoinMode::kAsOf &&
         versions_since_prune_ >= std::max(kMinPruneInterval, versions_.keys());
}

void JoinEngine::maybe_prune(Millis stream_bound) {
  if (!prune_due()) return;
  versions_since_prune_ = 0;
  Millis bound = std::min(stream_bound, pending_.oldest());
  versions_.prune(bound, [&](std::string_view key) { touch(key); });
}

size_t JoinEngine::rows() const {
  return mode_ == JoinMode::kLookup ? lookup_.size() : versions_.keys();
}

void JoinEngine::take_changes(StateChanges& out) {
  std::string_view prefix = mode_ == JoinMode::kLookup ? "r" : "v";
  for (const std::string& key : dirty_) {
    std::string name = entry_name(prefix, key);
    std::optional<std::string> value;
    if (mode_ == JoinMode::kLookup) {
      if (auto row = lookup_.find(key)) value.emplace(*row);
    } else {
      value = versions_.encode(key);
    }
    if (value)
      out.put.emplace_back(std::move(name), std::move(*value));
    else
      out.removed.push_back(std::move(name));
  }
  dirty_.clear();
  for (int32_t p : offsets_changed_) {
    std::optional<Millis> newest = watermark_.newest(p);
    // A Kafka offset's digits as before; a sequence number's digits, or
    // "@" and a time (Position::text).
    out.put.emplace_back(fmt::format("o/{}", p), newest
                                                     ? fmt::format("{},{}", offsets_.at(p), *newest)
                                                     : fmt::format("{},", offsets_.at(p)));
  }
  offsets_changed_.clear();
  pending_.take_changes(out);
}

Status JoinEngine::restore_entry(std::string_view key, std::string_view value) {
  auto bad = [&] { return data_error("malformed entry '{}' of kjoin's saved state", key); };
  size_t slash = key.find('/');
  if (slash == std::string_view::npos) return bad();
  std::string_view prefix = key.substr(0, slash);
  std::string_view rest = key.substr(slash + 1);
  if (prefix == "r" || prefix == "rx" || prefix == "v" || prefix == "vx") {
    bool lookup = prefix[0] == 'r';
    if (lookup != (mode_ == JoinMode::kLookup)) return bad();
    std::string table_key(rest);
    if (prefix.size() == 2) {
      auto raw = unhex(rest);
      if (!raw) return bad();
      table_key = std::move(*raw);
    }
    if (!persist_rows_) return {};  // the table is read again at start
    if (lookup) {
      lookup_.put(table_key, value);
      return {};
    }
    return versions_.decode(table_key, value);
  }
  if (prefix == "o") {
    int32_t partition = 0;
    std::string_view text = value;
    std::string_view id = rest;
    auto [end, ec] = std::from_chars(id.data(), id.data() + id.size(), partition);
    if (ec != std::errc() || end != id.data() + id.size()) return bad();
    size_t comma = text.find(',');
    if (comma == std::string_view::npos) return bad();
    std::optional<Position> offset = Position::from_text(text.substr(0, comma));
    if (!offset) return bad();
    text.remove_prefix(comma + 1);
    std::optional<Millis> newest;
    if (!text.empty()) {
      Millis t = 0;
      auto [e2, ec2] = std::from_chars(text.data(), text.data() + text.size(), t);
      if (ec2 != std::errc() || e2 != text.data() + text.size()) return bad();
      newest = t;
    }
    if (!persist_rows_) return {};
    offsets_[partition] = *offset;
    watermark_.restore(partition, newest, clock_.steady());
    return {};
  }
  if (prefix == "q") return pending_.restore_entry(key, value);
  return bad();
}

Status JoinEngine::finish_restore() {
  return pending_.finish_restore();
}

// --- PendingQueue ----------------------------------------------------------

void PendingQueue::set_tracking(bool tracking) {
  tracking_ = tracking;
  if (tracking) return;
  added_.clear();
  removed_.clear();
}

void PendingQueue::hold(Millis time, uint64_t number, std::string_view input, std::string_view text,
                        uint64_t arrival) {
  uint64_t seq = next_seq_++;
  records_.push_back(
      PendingRecord{seq, time, number, std::string(input), std::string(text), arrival});
  bytes_ += input.size() + text.size();
  if (tracking_) added_.insert(seq);
}

void PendingQueue::pop_front() {
  const PendingRecord& r = records_.front();
  bytes_ -= r.input.size() + r.text.size();
  if (tracking_ && added_.erase(r.seq) == 0) removed_.push_back(r.seq);
  records_.pop_front();
}

Millis PendingQueue::oldest() const {
  Millis oldest = kMaxTime;
  for (const PendingRecord& r : records_) oldest = std::min(oldest, r.time);
  return oldest;
}

Millis PendingQueue::needed_from(Millis disorder) const {
  if (newest_ == kMinTime) return kMinTime;
  return std::min(newest_ - disorder, oldest());
}

void PendingQueue::take_changes(StateChanges& out) {
  if (!added_.empty()) {
    for (const PendingRecord& r : records_) {
      if (!added_.count(r.seq)) continue;
      out.put.emplace_back(pending_name(r.seq), fmt::format("{},{},{},{}{}", r.time, r.number,
                                                            r.input.size(), r.input, r.text));
    }
    added_.clear();
  }
  for (uint64_t seq : removed_) out.removed.push_back(pending_name(seq));
  removed_.clear();
}

Status PendingQueue::restore_entry(std::string_view key, std::string_view value) {
  auto bad = [&] { return data_error("malformed entry '{}' of kjoin's saved state", key); };
  if (!key.starts_with("q/")) return bad();
  std::string_view rest = key.substr(2);
  PendingRecord r;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), r.seq, 16);
  if (ec != std::errc() || end != rest.data() + rest.size()) return bad();
  std::string_view text = value;
  size_t input_size = 0;
  if (!take_number(text, r.time, ',') || !take_number(text, r.number, ',') ||
      !take_number(text, input_size, ',') || input_size > text.size())
    return bad();
  r.input = std::string(text.substr(0, input_size));
  r.text = std::string(text.substr(input_size));
  bytes_ += r.input.size() + r.text.size();
  next_seq_ = std::max(next_seq_, r.seq + 1);
  records_.push_back(std::move(r));
  return {};
}

Status PendingQueue::finish_restore() {
  std::sort(records_.begin(), records_.end(),
            [](const PendingRecord& a, const PendingRecord& b) { return a.seq < b.seq; });
  return {};
}

}  // namespace kpipe
