#include "kpipe/dedup.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>
#include <vector>

// Inlined: a short key hashes in a few nanoseconds, less than a call
// through the shared library's dispatch.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kpipe {

namespace {

struct Hash128 {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool operator==(const Hash128&) const = default;
  // All zeros marks a dead ring entry; hash_key never returns it.
  bool dead() const { return (lo | hi) == 0; }
};

Hash128 hash_key(std::string_view key) {
  XXH128_hash_t h = XXH3_128bits(key.data(), key.size());
  Hash128 r{h.low64, h.high64};
  if (r.dead()) r.lo = 1;
  return r;
}

constexpr Millis kNoTime = std::numeric_limits<Millis>::min();

// --- the ring: remembered keys, oldest first --------------------------------

// A deque of fixed blocks addressed by a 64-bit position that only grows:
// pushing at the tail and popping at the head never moves an entry, and a
// block is freed as soon as the head leaves it.
class KeyRing {
 public:
  static constexpr int kBlockBits = 14;
  static constexpr uint64_t kBlock = uint64_t{1} << kBlockBits;

  KeyRing(bool times, bool keys) : has_times_(times), has_keys_(keys) {}

  uint64_t head() const { return head_; }
  uint64_t tail() const { return tail_; }
  uint64_t size() const { return tail_ - head_; }

  // Empties the ring; the next push gets position `start`.
  void reset(uint64_t start) {
    blocks_.clear();
    head_ = tail_ = start;
  }

  uint64_t push(const Hash128& h, Millis time, std::string_view key) {
    Block& block = tail_block();
    size_t off = tail_ & (kBlock - 1);
    block.hashes[off] = h;
    if (has_times_) set_time(block, off, time);
    if (has_keys_) {
      block.key_refs[off] = {static_cast<uint32_t>(block.keys.size()),
                             static_cast<uint32_t>(key.size())};
      block.keys.append(key);
    }
    return tail_++;
  }

  // A dead entry (restore fills the positions no saved segment holds).
  // Its time is never read: it takes one the block keeps compactly.
  uint64_t push_dead() {
    Block& block = tail_block();
    size_t off = tail_ & (kBlock - 1);
    block.hashes[off] = Hash128{};
    if (has_times_ && block.first != kBlock) set_time(block, off, block.base);
    if (has_keys_) block.key_refs[off] = {static_cast<uint32_t>(block.keys.size()), 0};
    return tail_++;
  }

  void pop() {
    uint64_t b = head_ >> kBlockBits;
    ++head_;
    if ((head_ >> kBlockBits) != b) {
      blocks_.pop_front();
      ++first_block_;
    }
  }

  Hash128& hash(uint64_t pos) { return block(pos).hashes[pos & (kBlock - 1)]; }
  Millis time(uint64_t pos) {
    if (!has_times_) return 0;
    Block& b = block(pos);
    size_t off = pos & (kBlock - 1);
    return b.wide ? b.wide[off] : b.base + b.deltas[off];
  }
  std::string_view key(uint64_t pos) {
    Block& b = block(pos);
    KeyRef r = b.key_refs[pos & (kBlock - 1)];
    return std::string_view(b.keys).substr(r.begin, r.size);
  }

 private:
  struct KeyRef {
    uint32_t begin;
    uint32_t size;
  };
  struct Block {
    std::unique_ptr<Hash128[]> hashes;
    // A time is kept in 4 bytes, as milliseconds from the block's first
    // (24 days either way); a block whose times spread wider switches to
    // 8 bytes each.
    Millis base = 0;
    size_t first = kBlock;  // the offset of the block's first entry
    std::unique_ptr<int32_t[]> deltas;
    std::unique_ptr<Millis[]> wide;
    std::unique_ptr<KeyRef[]> key_refs;
    std::string keys;
  };

  std::unique_ptr<Block> make_block() const {
    auto b = std::make_unique<Block>();
    b->hashes = std::make_unique_for_overwrite<Hash128[]>(kBlock);
    if (has_times_) b->deltas = std::make_unique_for_overwrite<int32_t[]>(kBlock);
    if (has_keys_) b->key_refs = std::make_unique_for_overwrite<KeyRef[]>(kBlock);
    return b;
  }

  static void set_time(Block& b, size_t off, Millis time) {
    if (b.first == kBlock) {
      b.first = off;
      b.base = time;
    }
    if (b.wide) {
      b.wide[off] = time;
      return;
    }
    Millis d = time - b.base;
    if (d >= std::numeric_limits<int32_t>::min() && d <= std::numeric_limits<int32_t>::max()) {
      b.deltas[off] = static_cast<int32_t>(d);
      return;
    }
    b.wide = std::make_unique_for_overwrite<Millis[]>(kBlock);
    for (size_t i = b.first; i < off; ++i) b.wide[i] = b.base + b.deltas[i];
    b.deltas.reset();
    b.wide[off] = time;
  }

  Block& block(uint64_t pos) { return *blocks_[(pos >> kBlockBits) - first_block_]; }

  Block& tail_block() {
    uint64_t b = tail_ >> kBlockBits;
    if (blocks_.empty()) first_block_ = b;
    if (b - first_block_ == blocks_.size()) blocks_.push_back(make_block());
    return *blocks_.back();
  }

  bool has_times_;
  bool has_keys_;
  std::deque<std::unique_ptr<Block>> blocks_;
  uint64_t first_block_ = 0;  // the number of blocks_.front()
  uint64_t head_ = 0;
  uint64_t tail_ = 0;
};

// --- the index: hash -> ring position ----------------------------------------

// A slot is (fragment << 32 | position & 0xffffffff); 0 is empty, so the
// fragment is never 0. The fragment is 32 bits of the hash: it picks the
// slot (fastrange, so that a capacity need not be a power of two) and
// rejects nearly every other key without reading the ring.
constexpr int kShardBits = 8;
constexpr size_t kShards = size_t{1} << kShardBits;
constexpr uint32_t kFirstCapacity = 16;

struct Shard {
  std::unique_ptr<uint64_t[]> slots;
  uint32_t cap = 0;
  uint32_t count = 0;
};

uint32_t shard_of(const Hash128& h) {
  return static_cast<uint32_t>(h.hi >> (64 - kShardBits));
}

uint32_t fragment_of(const Hash128& h) {
  auto f = static_cast<uint32_t>(h.lo >> 32);
  return f == 0 ? 1 : f;
}

uint32_t home(uint32_t fragment, uint32_t cap) {
  return static_cast<uint32_t>((static_cast<uint64_t>(fragment) * cap) >> 32);
}

uint32_t next(uint32_t i, uint32_t cap) {
  return i + 1 == cap ? 0 : i + 1;
}

uint64_t slot_value(uint32_t fragment, uint64_t pos) {
  return (static_cast<uint64_t>(fragment) << 32) | static_cast<uint32_t>(pos);
}

// Above 80% full, linear probing's unsuccessful searches get long.
bool needs_growth(const Shard& s) {
  return (uint64_t{s.count} + 1) * 5 > uint64_t{s.cap} * 4;
}

void init_shard(Shard& s, uint32_t cap) {
  s.slots = std::make_unique<uint64_t[]>(cap);  // zeroed: empty
  s.cap = cap;
  s.count = 0;
}

uint32_t find_empty(const Shard& s, uint32_t fragment) {
  uint32_t i = home(fragment, s.cap);
  while (s.slots[i] != 0) i = next(i, s.cap);
  return i;
}

// Small shards (below about 1.6M keys in all) double; larger ones grow by
// a quarter, so that the index never holds much more than it needs (10 to
// 12.5 bytes a key; doubling would swing it from 10 to 20) and the old and
// new arrays of one shard (1/256 of the index) are all that growing adds
// at its peak. Growing by a quarter moves each key about five times in
// all instead of two: growing was 8% of kdedup's time at 2M keys when
// doubling stopped at 800K keys, 5% less time in all now.
void grow(Shard& s) {
  uint32_t cap = s.cap < 8192 ? s.cap * 2 : s.cap + s.cap / 4;
  Shard bigger;
  init_shard(bigger, cap);
  for (uint32_t i = 0; i < s.cap; ++i) {
    uint64_t v = s.slots[i];
    if (v == 0) continue;
    bigger.slots[find_empty(bigger, static_cast<uint32_t>(v >> 32))] = v;
  }
  bigger.count = s.count;
  s = std::move(bigger);
}

// Backward-shift deletion: no tombstones, so probe lengths stay those of
// the live keys.
void erase_at(Shard& s, uint32_t i) {
  s.slots[i] = 0;
  uint32_t j = i;
  for (;;) {
    j = next(j, s.cap);
    uint64_t v = s.slots[j];
    if (v == 0) break;
    uint32_t h = home(static_cast<uint32_t>(v >> 32), s.cap);
    // The entry at j stays if its home lies cyclically in (i, j].
    bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
    if (stays) continue;
    s.slots[i] = v;
    s.slots[j] = 0;
    i = j;
  }
  --s.count;
}

// --- snapshot encoding ---------------------------------------------------

// The state is the ring, cut into segments of consecutive positions (see
// dedup.h for the entries). A checkpoint writes the positions added since
// the previous one and removes the segments the head has left, so that it
// costs a few rows however many keys came and went, and nothing is tracked
// per key between checkpoints.
constexpr uint64_t kSegmentPositions = 65536;  // about 1.2 MB of hashes
constexpr char kSegmentHashes = 'h';
constexpr char kSegmentKeys = 'x';

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

char* write_varint(char* out, uint64_t v) {
  while (v >= 0x80) {
    *out++ = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *out++ = static_cast<char>(v);
  return out;
}

std::optional<uint64_t> get_varint(std::string_view& in) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    auto byte = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return v;
  }
  return std::nullopt;
}

uint64_t zigzag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}

int64_t unzigzag(uint64_t v) {
  return static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1));
}

// Little-endian, as the old per-key entries held them.
void put_u64(char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t get_u64(std::string_view in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return v;
}

// Big-endian, so that the store lists segments in ring order.
std::string segment_key(uint64_t start) {
  std::string k(9, 's');
  for (int i = 0; i < 8; ++i) k[1 + i] = static_cast<char>((start >> (8 * (7 - i))) & 0xff);
  return k;
}

uint64_t segment_start(std::string_view key) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(key[1 + i]);
  return v;
}

Status malformed(std::string_view what) {
  return failure("malformed kdedup state entry: {}", what);
}

// Reads a segment's value (kind, count, live entries), calling
// each(position, time, hash, key) in position order: hash is zero for a
// segment of keys, whose key the caller hashes if it needs to.
template <class Each>
Status read_segment(uint64_t start, std::string_view v, uint64_t& count, Each&& each) {
  if (v.empty() || (v[0] != kSegmentHashes && v[0] != kSegmentKeys))
    return malformed("a segment of unknown kind");
  bool keys = v[0] == kSegmentKeys;
  v.remove_prefix(1);
  auto n = get_varint(v);
  if (!n || *n == 0 || *n > std::numeric_limits<uint64_t>::max() - start)
    return malformed("a segment's count of positions");
  count = *n;
  uint64_t end = start + *n;
  uint64_t pos = start;
  uint64_t time = 0;
  bool first = true;
  while (!v.empty()) {
    auto step = get_varint(v);
    if (!step || (!first && *step == 0) || *step >= end - pos)
      return malformed("a segment's positions are out of order or beyond its end");
    pos += *step;
    first = false;
    Hash128 h;
    std::string_view key;
    if (keys) {
      auto size = get_varint(v);
      if (!size || *size > v.size()) return malformed("a segment's key is cut short");
      key = v.substr(0, *size);
      v.remove_prefix(*size);
    } else {
      if (v.size() < 16) return malformed("a segment's hash is cut short");
      h = Hash128{get_u64(v), get_u64(v.substr(8))};
      v.remove_prefix(16);
      if (h.dead()) return malformed("a zero hash");
    }
    auto dt = get_varint(v);
    if (!dt) return malformed("a segment's time is cut short");
    // Wrapping, as the deltas were taken.
    time += static_cast<uint64_t>(unzigzag(*dt));
    each(pos, static_cast<Millis>(time), h, key);
  }
  return {};
}

// The format before segments: one entry per key, "h" + hash or "x" + key
// -> position and time; "m" -> the next position and the largest time.
// Still restored; the next checkpoint rewrites it as segments.
std::optional<std::pair<uint64_t, int64_t>> parse_pair(std::string_view v) {
  auto a = get_varint(v);
  auto b = get_varint(v);
  if (!a || !b || !v.empty()) return std::nullopt;
  return std::pair{*a, unzigzag(*b)};
}

struct Restored {
  uint64_t pos;
  Millis time;
  Hash128 hash;
  std::string key;  // with exact
};

struct SavedSegment {
  uint64_t start;
  uint64_t end;
  std::string value;
};

struct Meta {
  uint64_t head;
  uint64_t tail;
  Millis max_time;
};

}  // namespace

// --- the engine ------------------------------------------------------------

struct DedupEngine::Impl {
  Impl(DedupConfig c, Clock& clk) : config(c), clock(clk), ring(c.within.has_value(), c.exact) {
    config.max_keys = std::clamp<uint64_t>(config.max_keys, 1, kMaxMaxKeys);
    for (Shard& s : shards) init_shard(s, kFirstCapacity);
  }

  DedupConfig config;
  Clock& clock;
  KeyRing ring;
  Shard shards[kShards];
  uint64_t dead = 0;  // entries between head and tail whose key was remembered again
  uint64_t evicted = 0;
  Millis max_time = kNoTime;

  // Ring positions below `mark` are in the saved segments.
  uint64_t mark = 0;
  // The saved segments' [start, end), in ring order: each is removed once
  // the head has left it.
  std::deque<std::pair<uint64_t, uint64_t>> written;

  std::vector<SavedSegment> restoring_segments;
  std::optional<Meta> restoring_meta;
  // A state of the old format: its entries, and their keys, which the
  // next take_changes removes.
  std::vector<Restored> restoring;
  std::optional<std::pair<uint64_t, Millis>> restoring_old_meta;
  std::vector<std::string> old_entries;
  bool migrating = false;

  uint64_t live() const { return ring.size() - dead; }

  bool expired(Millis t) const {
    return config.within && max_time != kNoTime && max_time - t > *config.within;
  }

  uint64_t ring_pos(uint64_t slot) const {
    uint64_t head = ring.head();
    return head + static_cast<uint32_t>(static_cast<uint32_t>(slot) - static_cast<uint32_t>(head));
  }

  // The ring position of a live key, and its slot; nullopt when absent.
  std::optional<std::pair<uint64_t, uint32_t>> find(const Hash128& h, std::string_view key) {
    Shard& s = shards[shard_of(h)];
    uint64_t fragment = uint64_t{fragment_of(h)} << 32;
    for (uint32_t i = home(fragment_of(h), s.cap);; i = next(i, s.cap)) {
      uint64_t v = s.slots[i];
      if (v == 0) return std::nullopt;
      if ((v & 0xffffffff00000000ULL) != fragment) continue;
      uint64_t pos = ring_pos(v);
      if (!(ring.hash(pos) == h)) continue;
      if (config.exact && ring.key(pos) != key) continue;
      return std::pair{pos, i};
    }
  }

  void erase_from_index(const Hash128& h, uint64_t pos) {
    Shard& s = shards[shard_of(h)];
    uint32_t fragment = fragment_of(h);
    uint64_t target = slot_value(fragment, pos);
    uint32_t i = home(fragment, s.cap);
    while (s.slots[i] != target) i = next(i, s.cap);
    erase_at(s, i);
  }

  // Removes the live entry at the head (dead ones are dropped on the way).
  void pop_live_head() {
    for (;;) {
      uint64_t pos = ring.head();
      Hash128 h = ring.hash(pos);
      if (h.dead()) {
        ring.pop();
        --dead;
        continue;
      }
      erase_from_index(h, pos);
      ring.pop();
      return;
    }
  }

  void expire_head() {
    while (ring.size() > 0) {
      uint64_t pos = ring.head();
      if (ring.hash(pos).dead()) {
        ring.pop();
        --dead;
        continue;
      }
      if (!expired(ring.time(pos))) return;
      pop_live_head();
    }
  }

  void advance(Millis t) {
    if (t > max_time) max_time = t;
    expire_head();
  }

  void insert(const Hash128& h, Millis t, std::string_view key) {
    // Positions live in 32 bits in the index: the ring must span less.
    while (live() >= config.max_keys || ring.size() >= (uint64_t{1} << 32) - 1) {
      pop_live_head();
      ++evicted;
    }
    Shard& s = shards[shard_of(h)];
    if (needs_growth(s)) grow(s);
    uint32_t fragment = fragment_of(h);
    uint32_t i = find_empty(s, fragment);
    uint64_t pos = ring.push(h, t, key);
    s.slots[i] = slot_value(fragment, pos);
    ++s.count;
  }

  void prefetch(const Hash128& h) const {
    const Shard& s = shards[shard_of(h)];
    const void* slot = &s.slots[home(fragment_of(h), s.cap)];
    // GCC 12 deletes a prefetch whose address it computed from loads with
    // no other use; the empty asm makes the address opaque to it.
    asm volatile("" : "+r"(slot));
    __builtin_prefetch(slot);
  }

  // With a horizon or at max_keys, the keys at the head are the next to
  // go, each costing a probe of its own. The caller decides one record
  // later, by which time about one more key has gone: fetch the slots of
  // the keys just behind the head.
  void prefetch_head() {
    if (!config.within && live() < config.max_keys) return;
    uint64_t pos = ring.head() + 1;
    if (pos < ring.tail()) prefetch(ring.hash(pos));
    if (pos + 1 < ring.tail()) prefetch(ring.hash(pos + 1));
  }

  bool offer(const Hash128& h, std::string_view key, Millis t) {
    if (config.within) advance(t);
    auto found = find(h, key);
    if (!found) {
      // A record already beyond the horizon passes, and is not remembered:
      // it would be forgotten at once.
      if (!expired(t)) insert(h, t, key);
      return true;
    }
    auto [pos, slot] = *found;
    if (!expired(ring.time(pos))) return false;
    if (expired(t)) return true;
    // Remembered again from this record's time: the old entry dies where
    // it is (the head drops it later) and its slot points to the new one.
    ring.hash(pos) = Hash128{};
    ++dead;
    uint64_t fresh = ring.push(h, t, key);
    shards[shard_of(h)].slots[slot] = slot_value(fragment_of(h), fresh);
    return true;
  }

  // Writes the live entries of [start, end) as a segment's value, at most
  // kSegmentBytes with hashes, and returns its size; 0 when there are
  // none.
  static constexpr size_t kEntryBytes = 10 + 16 + 10;  // with hashes, at most
  static constexpr size_t kSegmentBytes = 1 + 10 + kSegmentPositions * kEntryBytes;

  size_t encode_hashes(uint64_t start, uint64_t end, char* out) {
    char* p = out;
    *p++ = kSegmentHashes;
    p = write_varint(p, end - start);
    char* header = p;
    uint64_t prev = start;
    uint64_t prev_time = 0;
    for (uint64_t pos = start; pos < end; ++pos) {
      const Hash128& h = ring.hash(pos);
      if (h.dead()) continue;
      p = write_varint(p, pos - prev);
      prev = pos;
      put_u64(p, h.lo);
      put_u64(p + 8, h.hi);
      p += 16;
      auto time = static_cast<uint64_t>(ring.time(pos));
      p = write_varint(p, zigzag(static_cast<int64_t>(time - prev_time)));
      prev_time = time;
    }
    return p == header ? 0 : static_cast<size_t>(p - out);
  }

  // The same with keys, whose size has no bound.
  size_t encode_keys(uint64_t start, uint64_t end, std::string& out) {
    out.clear();
    out.push_back(kSegmentKeys);
    put_varint(out, end - start);
    size_t header = out.size();
    uint64_t prev = start;
    uint64_t prev_time = 0;
    for (uint64_t pos = start; pos < end; ++pos) {
      if (ring.hash(pos).dead()) continue;
      put_varint(out, pos - prev);
      prev = pos;
      std::string_view key = ring.key(pos);
      put_varint(out, key.size());
      out.append(key);
      auto time = static_cast<uint64_t>(ring.time(pos));
      put_varint(out, zigzag(static_cast<int64_t>(time - prev_time)));
      prev_time = time;
    }
    return out.size() == header ? 0 : out.size();
  }

  void take_changes(StateChanges& out) {
    if (migrating) {
      for (std::string& k : old_entries) out.removed.push_back(std::move(k));
      old_entries.clear();
      old_entries.shrink_to_fit();
      out.removed.emplace_back("m");
      migrating = false;
    }
    while (!written.empty() && written.front().second <= ring.head()) {
      out.removed.push_back(segment_key(written.front().first));
      written.pop_front();
    }
    uint64_t from = std::max(mark, ring.head());
    std::unique_ptr<char[]> scratch;
    std::string keys;
    if (!config.exact && from < ring.tail())
      scratch = std::make_unique_for_overwrite<char[]>(kSegmentBytes);
    for (uint64_t start = from; start < ring.tail(); start += kSegmentPositions) {
      uint64_t end = std::min(start + kSegmentPositions, ring.tail());
      if (config.exact) {
        if (encode_keys(start, end, keys) == 0) continue;
        out.put.emplace_back(segment_key(start), keys);  // a copy of its own size
      } else {
        size_t size = encode_hashes(start, end, scratch.get());
        if (size == 0) continue;
        out.put.emplace_back(segment_key(start), std::string(scratch.get(), size));
      }
      written.emplace_back(start, end);
    }
    std::string meta;
    put_varint(meta, ring.head());
    put_varint(meta, ring.tail());
    put_varint(meta, zigzag(max_time));
    out.put.emplace_back("M", std::move(meta));
    mark = ring.tail();
  }

  Status restore_entry(std::string_view key, std::string_view value) {
    if (ring.tail() != 0 || ring.size() != 0)
      return failure("cannot restore into a dedup engine in use");
    if (key.size() == 9 && key[0] == 's') {
      if (!value.empty() && value[0] == kSegmentHashes && config.exact)
        return failure(
            "the saved kdedup state holds hashes, not keys (it was saved without --exact)");
      uint64_t start = segment_start(key);
      uint64_t n = 0;
      KPIPE_TRY(
          read_segment(start, value, n, [](uint64_t, Millis, const Hash128&, std::string_view) {}));
      restoring_segments.push_back({start, start + n, std::string(value)});
      return {};
    }
    if (key == "M") {
      auto head = get_varint(value);
      auto tail = get_varint(value);
      auto time = get_varint(value);
      if (!head || !tail || !time || !value.empty() || *head > *tail)
        return malformed("its metadata is not a head, a tail and a time");
      restoring_meta = Meta{*head, *tail, unzigzag(*time)};
      return {};
    }
    return restore_old_entry(key, value);
  }

  Status restore_old_entry(std::string_view key, std::string_view value) {
    auto pair = parse_pair(value);
    if (!pair) return malformed("its value is not a position and a time");
    auto [a, b] = *pair;
    if (key == "m") {
      restoring_old_meta = std::pair{a, b};
      return {};
    }
    if (key.size() == 17 && key[0] == 'h') {
      if (config.exact)
        return failure(
            "the saved kdedup state holds hashes, not keys (it was saved without --exact)");
      Hash128 h{get_u64(key.substr(1)), get_u64(key.substr(9))};
      if (h.dead()) return malformed("a zero hash");
      restoring.push_back({a, b, h, {}});
      old_entries.emplace_back(key);
      return {};
    }
    if (!key.empty() && key[0] == 'x') {
      std::string_view k = key.substr(1);
      restoring.push_back({a, b, hash_key(k), config.exact ? std::string(k) : std::string()});
      old_entries.emplace_back(key);
      return {};
    }
    return failure("unrecognised kdedup state entry ({} bytes)", key.size());
  }

  // Restoring never evicts: max_keys is applied after.
  void insert_restored(const Hash128& h, Millis t, std::string_view key) {
    auto found = find(h, key);
    uint64_t pos = ring.push(h, t, key);
    Shard& s = shards[shard_of(h)];
    if (found) {
      // Remembered again after its older segment was saved: the older
      // entry had died, as offer() left it.
      ring.hash(found->first) = Hash128{};
      ++dead;
      s.slots[found->second] = slot_value(fragment_of(h), pos);
      return;
    }
    if (needs_growth(s)) grow(s);
    uint32_t fragment = fragment_of(h);
    s.slots[find_empty(s, fragment)] = slot_value(fragment, pos);
    ++s.count;
  }

  void push_dead_until(uint64_t pos) {
    while (ring.tail() < pos) {
      ring.push_dead();
      ++dead;
    }
  }

  Status finish_restore() {
    bool segments = restoring_meta || !restoring_segments.empty();
    bool old = restoring_old_meta || !restoring.empty();
    if (segments && old) return failure("the saved kdedup state mixes two formats");
    Status s = segments ? finish_restore_segments() : finish_restore_old();
    restoring_segments.clear();
    restoring_segments.shrink_to_fit();
    restoring_meta.reset();
    restoring.clear();
    restoring.shrink_to_fit();
    restoring_old_meta.reset();
    if (!s.ok()) return s;
    // A smaller --max-keys than the run that saved the state.
    while (live() > config.max_keys) {
      pop_live_head();
      ++evicted;
    }
    return {};
  }

  // Every position from the head to the tail comes back where it was: a
  // live one from its segment, a dead one (no segment holds it) as a
  // placeholder, so that the ring and its order are those that were saved.
  Status finish_restore_segments() {
    if (!restoring_meta) return failure("the saved kdedup state has keys but no metadata entry");
    auto [head, tail, max] = *restoring_meta;
    // Slots keep positions in 32 bits, relative to the head.
    if (tail - head > (uint64_t{1} << 32))
      return failure("the saved kdedup state is inconsistent: its ring is too long");
    std::sort(restoring_segments.begin(), restoring_segments.end(),
              [](const SavedSegment& x, const SavedSegment& y) { return x.start < y.start; });
    for (size_t i = 0; i < restoring_segments.size(); ++i) {
      if (restoring_segments[i].end > tail)
        return failure(
            "the saved kdedup state is inconsistent: a segment beyond the next position");
      if (i > 0 && restoring_segments[i].start < restoring_segments[i - 1].end)
        return failure("the saved kdedup state is inconsistent: segments overlap");
    }
    ring.reset(head);
    max_time = max;
    for (SavedSegment& seg : restoring_segments) {
      written.emplace_back(seg.start, seg.end);
      if (seg.end <= head) continue;  // left by the head: removed at the next checkpoint
      uint64_t n = 0;
      KPIPE_TRY(read_segment(seg.start, seg.value, n,
                             [&](uint64_t pos, Millis t, const Hash128& h, std::string_view key) {
                               if (pos < head) return;  // expired or evicted before the snapshot
                               push_dead_until(pos);
                               insert_restored(h.dead() ? hash_key(key) : h, t, key);
                             }));
      seg.value = std::string();
    }
    push_dead_until(tail);
    mark = tail;
    return {};
  }

  Status finish_restore_old() {
    if (!restoring_old_meta) {
      if (restoring.empty()) return {};
      return failure("the saved kdedup state has keys but no metadata entry");
    }
    auto [tail, max] = *restoring_old_meta;
    std::sort(restoring.begin(), restoring.end(),
              [](const Restored& x, const Restored& y) { return x.pos < y.pos; });
    uint64_t n = restoring.size();
    if (tail < n || (n > 0 && restoring.back().pos >= tail))
      return failure("the saved kdedup state is inconsistent: positions beyond the next position");
    // Positions are renumbered densely below `tail`, keeping their order;
    // new keys still get positions above every saved one.
    ring.reset(tail - n);
    max_time = max;
    for (const Restored& r : restoring) {
      if (find(r.hash, r.key)) return failure("the saved kdedup state holds a key twice");
      insert_restored(r.hash, r.time, r.key);
    }
    // The next checkpoint removes the old entries and saves the whole ring
    // as segments.
    mark = ring.head();
    migrating = true;
    return {};
  }
};

DedupEngine::DedupEngine(DedupConfig config, Clock& clock)
    : impl_(std::make_unique<Impl>(config, clock)) {}
DedupEngine::~DedupEngine() = default;

DedupEngine::Prepared DedupEngine::prepare(std::string_view key) {
  Hash128 h = hash_key(key);
  impl_->prefetch(h);
  impl_->prefetch_head();
  return {h.lo, h.hi};
}

bool DedupEngine::offer(std::string_view key) {
  return impl_->offer(hash_key(key), key, impl_->config.within ? impl_->clock.now() : 0);
}

bool DedupEngine::offer(std::string_view key, Millis time) {
  return impl_->offer(hash_key(key), key, time);
}

bool DedupEngine::offer(const Prepared& p, std::string_view key) {
  return impl_->offer(Hash128{p.lo, p.hi}, key, impl_->config.within ? impl_->clock.now() : 0);
}

bool DedupEngine::offer(const Prepared& p, std::string_view key, Millis time) {
  return impl_->offer(Hash128{p.lo, p.hi}, key, time);
}

void DedupEngine::tick() {
  if (impl_->config.within) impl_->advance(impl_->clock.now());
}

bool DedupEngine::remembers(const Prepared& p, std::string_view key) {
  auto found = impl_->find(Hash128{p.lo, p.hi}, key);
  return found && !impl_->expired(impl_->ring.time(found->first));
}

uint64_t DedupEngine::remembered() const {
  return impl_->live();
}
uint64_t DedupEngine::evicted() const {
  return impl_->evicted;
}

std::optional<Millis> DedupEngine::max_time() const {
  if (impl_->max_time == kNoTime) return std::nullopt;
  return impl_->max_time;
}

void DedupEngine::take_changes(StateChanges& out) {
  impl_->take_changes(out);
}
Status DedupEngine::restore_entry(std::string_view key, std::string_view value) {
  return impl_->restore_entry(key, value);
}
Status DedupEngine::finish_restore() {
  return impl_->finish_restore();
}

}  // namespace kpipe
