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
    uint64_t b = tail_ >> kBlockBits;
    if (blocks_.empty()) first_block_ = b;
    if (b - first_block_ == blocks_.size()) blocks_.push_back(make_block());
    Block& block = *blocks_.back();
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

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_u64(std::string_view in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return v;
}

std::string hash_entry_key(const Hash128& h) {
  std::string k = "h";
  put_u64(k, h.lo);
  put_u64(k, h.hi);
  return k;
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
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

// A value is a position and a time as varints (zigzag for the time): at
// most 15 bytes in practice, so that it fits a std::string without an
// allocation of its own when a checkpoint carries millions of them.
std::string pair_value(uint64_t a, int64_t b) {
  std::string v;
  put_varint(v, a);
  put_varint(v, (static_cast<uint64_t>(b) << 1) ^ static_cast<uint64_t>(b >> 63));
  return v;
}

std::optional<std::pair<uint64_t, int64_t>> parse_pair(std::string_view v) {
  auto a = get_varint(v);
  auto b = get_varint(v);
  if (!a || !b || !v.empty()) return std::nullopt;
  return std::pair{*a, static_cast<int64_t>((*b >> 1) ^ (~(*b & 1) + 1))};
}

struct Restored {
  uint64_t pos;
  Millis time;
  Hash128 hash;
  std::string key;  // with exact
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

  // Ring positions below `mark` were in the previous snapshot: removing
  // one of those must be reported; anything newer is reported by
  // take_changes scanning the ring from `mark`.
  uint64_t mark = 0;
  std::vector<Hash128> removed_hashes;
  std::vector<std::string> removed_keys;  // with exact

  std::vector<Restored> restoring;
  std::optional<std::pair<uint64_t, Millis>> restoring_meta;

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

  void record_removal(uint64_t pos) {
    if (pos >= mark) return;
    if (config.exact) {
      removed_keys.emplace_back(ring.key(pos));
    } else {
      removed_hashes.push_back(ring.hash(pos));
    }
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
      record_removal(pos);
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
    record_removal(pos);
    ring.hash(pos) = Hash128{};
    ++dead;
    uint64_t fresh = ring.push(h, t, key);
    shards[shard_of(h)].slots[slot] = slot_value(fragment_of(h), fresh);
    return true;
  }

  std::string entry_key(uint64_t pos) {
    if (!config.exact) return hash_entry_key(ring.hash(pos));
    std::string k = "x";
    k.append(ring.key(pos));
    return k;
  }

  void take_changes(StateChanges& out) {
    // A removed key that was remembered again since is reported as put.
    auto put_since_mark = [&](const Hash128& h, std::string_view key) {
      auto f = find(h, key);
      return f && f->first >= mark;
    };
    for (const Hash128& h : removed_hashes)
      if (!put_since_mark(h, {})) out.removed.push_back(hash_entry_key(h));
    for (const std::string& k : removed_keys)
      if (!put_since_mark(hash_key(k), k)) out.removed.push_back("x" + k);
    removed_hashes.clear();
    removed_hashes.shrink_to_fit();
    removed_keys.clear();
    removed_keys.shrink_to_fit();
    for (uint64_t pos = std::max(mark, ring.head()); pos < ring.tail(); ++pos) {
      if (ring.hash(pos).dead()) continue;
      out.put.emplace_back(entry_key(pos), pair_value(pos, ring.time(pos)));
    }
    out.put.emplace_back("m", pair_value(ring.tail(), max_time));
    mark = ring.tail();
  }

  Status restore_entry(std::string_view key, std::string_view value) {
    if (ring.tail() != 0 || ring.size() != 0)
      return failure("cannot restore into a dedup engine in use");
    auto pair = parse_pair(value);
    if (!pair)
      return failure("malformed kdedup state entry: its value is not a position and a time");
    auto [a, b] = *pair;
    if (key == "m") {
      restoring_meta = std::pair{a, b};
      return {};
    }
    if (key.size() == 17 && key[0] == 'h') {
      if (config.exact)
        return failure(
            "the saved kdedup state holds hashes, not keys (it was saved without --exact)");
      Hash128 h{get_u64(key.substr(1)), get_u64(key.substr(9))};
      if (h.dead()) return failure("malformed kdedup state entry: a zero hash");
      restoring.push_back({a, b, h, {}});
      return {};
    }
    if (!key.empty() && key[0] == 'x') {
      std::string_view k = key.substr(1);
      restoring.push_back({a, b, hash_key(k), config.exact ? std::string(k) : std::string()});
      return {};
    }
    return failure("unrecognised kdedup state entry ({} bytes)", key.size());
  }

  Status finish_restore() {
    if (!restoring_meta) {
      if (restoring.empty()) return {};
      return failure("the saved kdedup state has keys but no metadata entry");
    }
    auto [tail, max] = *restoring_meta;
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
      // Restoring never evicts: max_keys is applied below, oldest first.
      Shard& s = shards[shard_of(r.hash)];
      if (needs_growth(s)) grow(s);
      uint32_t fragment = fragment_of(r.hash);
      uint32_t i = find_empty(s, fragment);
      s.slots[i] = slot_value(fragment, ring.push(r.hash, r.time, r.key));
      ++s.count;
    }
    restoring.clear();
    restoring.shrink_to_fit();
    restoring_meta.reset();
    mark = ring.tail();
    // A smaller --max-keys than the run that saved the state.
    while (live() > config.max_keys) {
      pop_live_head();
      ++evicted;
    }
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
