#include "kpipe/dedup.h"
#include "fakes.h"

#include <catch2/catch.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <list>
#include <map>
#include <random>
#include <set>
#include <unordered_map>

using namespace kpipe;

namespace {

DedupConfig config(std::optional<Millis> within = std::nullopt, uint64_t max_keys = kDefaultMaxKeys,
                   bool exact = false) {
  DedupConfig c;
  c.within = within;
  c.max_keys = max_keys;
  c.exact = exact;
  return c;
}

// The rules of the engine written the obvious way, with standard
// containers: keys in the order they were remembered, a key's entry dying
// in place when it is remembered again, the head dropped once dead or
// beyond the horizon, the oldest live key evicted at max_keys.
class Model {
 public:
  explicit Model(DedupConfig c) : c_(c) {}

  bool offer(const std::string& key, Millis t) {
    if (c_.within) {
      max_ = std::max(max_, t);
      while (!order_.empty() && (!order_.front().alive || expired(order_.front().t0))) pop_front();
    }
    auto it = where_.find(key);
    if (it != where_.end() && !expired(it->second->t0)) return false;
    if (expired(t)) return true;
    if (it != where_.end()) {
      it->second->alive = false;
      where_.erase(it);
    } else {
      while (live() >= c_.max_keys) {
        while (!order_.front().alive) pop_front();
        pop_front();
        ++evicted_;
      }
    }
    order_.push_back({key, t, true, pushed_++});
    where_[key] = std::prev(order_.end());
    return true;
  }

  uint64_t live() const { return where_.size(); }
  uint64_t evicted() const { return evicted_; }

  // The state as kdedup saved it before segments: "h" + the key's hash
  // (or "x" + the key) -> its ring position and time, one entry per live
  // key, and "m" -> the next position and the largest time.
  std::map<std::string, std::string> old_format(bool keys) const {
    auto pair = [](uint64_t a, int64_t b) {
      std::string v;
      put_varint(v, a);
      put_varint(v, (static_cast<uint64_t>(b) << 1) ^ static_cast<uint64_t>(b >> 63));
      return v;
    };
    std::map<std::string, std::string> out;
    for (const Entry& e : order_) {
      if (!e.alive) continue;
      std::string k = keys ? "x" + e.key : old_hash_key(e.key);
      out[k] = pair(e.pos, c_.within ? e.t0 : 0);
    }
    out["m"] = pair(pushed_, max_);
    return out;
  }

 private:
  struct Entry {
    std::string key;
    Millis t0;
    bool alive;
    uint64_t pos;
  };
  static void put_varint(std::string& out, uint64_t v) {
    while (v >= 0x80) {
      out.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out.push_back(static_cast<char>(v));
  }
  static std::string old_hash_key(const std::string& key) {
    XXH128_hash_t h = XXH3_128bits(key.data(), key.size());
    if ((h.low64 | h.high64) == 0) h.low64 = 1;
    std::string k = "h";
    for (uint64_t v : {h.low64, h.high64})
      for (int i = 0; i < 8; ++i) k.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return k;
  }
  bool expired(Millis t0) const { return c_.within && max_ - t0 > *c_.within; }
  void pop_front() {
    if (order_.front().alive) where_.erase(order_.front().key);
    order_.pop_front();
  }
  DedupConfig c_;
  Millis max_ = std::numeric_limits<Millis>::min();
  std::list<Entry> order_;
  std::unordered_map<std::string, std::list<Entry>::iterator> where_;
  uint64_t evicted_ = 0;
  uint64_t pushed_ = 0;
};

// Appended, not added: GCC 12 warns falsely (-Wrestrict) on "k" + s.
std::string numbered(std::string prefix, long i) {
  return prefix.append(std::to_string(i));
}

struct Event {
  std::string key;
  Millis t;
};

// Keys drawn from `keys` distinct ones, times rising by 0-3 ms with up to
// `jitter` ms of disorder.
std::vector<Event> random_stream(uint32_t seed, size_t n, uint32_t keys, Millis jitter) {
  std::mt19937 rng(seed);
  std::vector<Event> out;
  Millis t = 1'000'000;
  for (size_t i = 0; i < n; ++i) {
    t += rng() % 4;
    Millis jittered =
        jitter > 0 ? t - static_cast<Millis>(rng() % static_cast<uint32_t>(jitter)) : t;
    std::string key = numbered("{\"id\":", rng() % keys);
    key.push_back('}');
    out.push_back({std::move(key), jittered});
  }
  return out;
}

std::vector<bool> run(DedupEngine& e, const std::vector<Event>& events, size_t from = 0,
                      size_t to = SIZE_MAX) {
  std::vector<bool> out;
  for (size_t i = from; i < std::min(to, events.size()); ++i)
    out.push_back(e.offer(events[i].key, events[i].t));
  return out;
}

// A state store reduced to its meaning: the live entries.
using Store = std::map<std::string, std::string>;

void save(DedupEngine& e, Store& store) {
  StateChanges changes;
  e.take_changes(changes);
  std::set<std::string> seen;
  for (const auto& [k, v] : changes.put) {
    REQUIRE(seen.insert(k).second);  // each key once
    store[k] = v;
  }
  for (const auto& k : changes.removed) {
    REQUIRE(seen.insert(k).second);
    store.erase(k);
  }
}

void restore(DedupEngine& e, const Store& store, uint32_t seed) {
  std::vector<std::pair<std::string, std::string>> entries(store.begin(), store.end());
  std::shuffle(entries.begin(), entries.end(), std::mt19937(seed));  // "in no particular order"
  for (const auto& [k, v] : entries) REQUIRE(e.restore_entry(k, v).ok());
  REQUIRE(e.finish_restore().ok());
}

}  // namespace

TEST_CASE("dedup: the first record of a key passes, later ones are dropped") {
  FakeClock clock;
  DedupEngine e(config(), clock);
  CHECK(e.offer("a", 0));
  CHECK(e.offer("b", 0));
  CHECK_FALSE(e.offer("a", 0));
  CHECK_FALSE(e.offer("b", 99));
  CHECK(e.offer("a ", 0));  // keys are bytes
  CHECK(e.offer("", 0));
  CHECK_FALSE(e.offer("", 0));
  CHECK(e.remembered() == 4);
  CHECK(e.evicted() == 0);
  CHECK_FALSE(e.max_time());  // without a horizon, times are not kept
}

TEST_CASE("dedup: horizon edges") {
  FakeClock clock;
  DedupEngine e(config(100), clock);
  CHECK(e.offer("k", 1000));
  CHECK_FALSE(e.offer("k", 1100));  // 1000 + 100 is not exceeded yet
  CHECK(e.max_time() == 1100);
  CHECK(e.offer("k", 1101));  // exceeded: passes, remembered from 1101
  CHECK_FALSE(e.offer("k", 1150));
  CHECK_FALSE(e.offer("k", 1201));  // 1101 + 100
  CHECK(e.offer("k", 1202));
  CHECK(e.remembered() == 1);
}

TEST_CASE("dedup: within 0 drops only records of the same time") {
  FakeClock clock;
  DedupEngine e(config(0), clock);
  CHECK(e.offer("k", 5));
  CHECK_FALSE(e.offer("k", 5));
  CHECK(e.offer("k", 6));
  CHECK_FALSE(e.offer("k", 6));
}

TEST_CASE("dedup: the largest time seen moves the horizon, not the record's own") {
  FakeClock clock;
  DedupEngine e(config(100), clock);
  CHECK(e.offer("k", 1000));
  CHECK(e.offer("other", 1200));  // k's horizon (1100) is now passed
  CHECK(e.remembered() == 1);     // and k is forgotten
  // An old record passes but is not remembered: it is beyond the horizon.
  CHECK(e.offer("k", 1050));
  CHECK(e.offer("k", 1060));
  CHECK(e.remembered() == 1);
  // Within the horizon again: remembered.
  CHECK(e.offer("k", 1150));
  CHECK_FALSE(e.offer("k", 1160));
  CHECK(e.offer("k", 1300));  // 1150 + 100 is passed
}

TEST_CASE("dedup: a late duplicate of a remembered key is dropped") {
  FakeClock clock;
  DedupEngine e(config(100), clock);
  CHECK(e.offer("k", 1000));
  CHECK(e.offer("x", 1090));
  CHECK_FALSE(e.offer("k", 950));  // older than k's own record, still within k's horizon
}

TEST_CASE("dedup: out-of-order keys expire by their own time") {
  FakeClock clock;
  DedupEngine e(config(100), clock);
  CHECK(e.offer("late", 1000));
  CHECK(e.offer("early", 900));  // remembered: 1000 - 900 is within the horizon
  CHECK(e.offer("tick", 1001));  // early's horizon (1000) is passed, late's (1100) is not
  CHECK(e.offer("early", 1001));
  CHECK_FALSE(e.offer("late", 1001));
  CHECK(e.remembered() == 3);  // early's first entry died when it was remembered again
}

TEST_CASE("dedup: expiry forgets keys and they are remembered again") {
  FakeClock clock;
  DedupEngine e(config(10), clock);
  for (int i = 0; i < 100; ++i) CHECK(e.offer(numbered("k", i), i));
  CHECK(e.remembered() == 11);  // 89..99
  CHECK(e.offer("k0", 100));
  CHECK_FALSE(e.offer("k95", 100));
  CHECK(e.offer("k89", 100));
  CHECK(e.remembered() == 12);  // 90..99, k0, k89
}

TEST_CASE("dedup: processing time from the clock") {
  FakeClock clock(5000);
  DedupEngine e(config(1000), clock);
  CHECK(e.offer("k"));
  clock.advance(1000);
  CHECK_FALSE(e.offer("k"));
  CHECK(e.remembered() == 1);
  clock.advance(1);
  e.tick();  // an idle input still forgets
  CHECK(e.remembered() == 0);
  CHECK(e.offer("k"));
  CHECK(e.max_time() == 6001);
}

TEST_CASE("dedup: max-keys evicts the oldest first") {
  FakeClock clock;
  DedupEngine e(config(std::nullopt, 3), clock);
  CHECK(e.offer("a", 0));
  CHECK(e.offer("b", 0));
  CHECK(e.offer("c", 0));
  CHECK_FALSE(e.offer("a", 0));  // a duplicate evicts nothing, even of the oldest key
  CHECK(e.evicted() == 0);
  CHECK(e.offer("d", 0));  // evicts a
  CHECK(e.evicted() == 1);
  CHECK(e.remembered() == 3);
  CHECK_FALSE(e.offer("b", 0));
  CHECK_FALSE(e.offer("c", 0));
  CHECK_FALSE(e.offer("d", 0));
  CHECK(e.offer("a", 0));  // forgotten; evicts b
  CHECK(e.offer("b", 0));  // evicts c
  CHECK_FALSE(e.offer("d", 0));
  CHECK(e.evicted() == 3);
}

TEST_CASE("dedup: eviction skips keys that died when remembered again") {
  FakeClock clock;
  DedupEngine e(config(10, 2), clock);
  CHECK(e.offer("h", 10));
  CHECK(e.offer("a", 2));   // out of order, within the horizon
  CHECK(e.offer("a", 13));  // a's first entry is past it: it dies in place, behind h
  CHECK(e.remembered() == 2);
  CHECK(e.offer("c", 13));  // evicts h
  CHECK(e.evicted() == 1);
  CHECK(e.offer("h", 13));  // evicts a (its second entry), skipping the dead one
  CHECK(e.evicted() == 2);
  CHECK(e.offer("a", 13));
  CHECK_FALSE(e.offer("h", 13));
}

TEST_CASE("dedup: exact keys") {
  FakeClock clock;
  DedupEngine e(config(std::nullopt, kDefaultMaxKeys, true), clock);
  CHECK(e.offer("{\"id\":1}", 0));
  CHECK_FALSE(e.offer("{\"id\":1}", 0));
  CHECK(e.offer("{\"id\":2}", 0));
  std::string big(100'000, 'x');
  CHECK(e.offer(big, 0));
  CHECK_FALSE(e.offer(big, 0));
  big.back() = 'y';
  CHECK(e.offer(big, 0));
}

TEST_CASE("dedup: the engine agrees with the model, hashed and exact") {
  struct Case {
    std::optional<Millis> within;
    uint64_t max_keys;
    uint32_t keys;
    Millis jitter;
  };
  auto c = GENERATE(Case{std::nullopt, kDefaultMaxKeys, 5000, 0}, Case{std::nullopt, 700, 3000, 0},
                    Case{300, kDefaultMaxKeys, 3000, 0}, Case{300, kDefaultMaxKeys, 3000, 200},
                    Case{50, 400, 2000, 80}, Case{0, 100, 50, 3},
                    // Times that spread beyond 4-byte offsets within a block.
                    Case{3'000'000'000, 5000, 3000, 4'000'000'000});
  for (bool exact : {false, true}) {
    FakeClock clock;
    DedupConfig cfg = config(c.within, c.max_keys, exact);
    DedupEngine e(cfg, clock);
    Model m(cfg);
    auto events =
        random_stream(static_cast<uint32_t>(c.keys + c.max_keys), 60'000, c.keys, c.jitter);
    size_t passed = 0;
    for (size_t i = 0; i < events.size(); ++i) {
      bool want = m.offer(events[i].key, events[i].t);
      // Every other key prepared ahead, as kdedup does.
      bool got = i % 2 == 0 ? e.offer(events[i].key, events[i].t)
                            : e.offer(e.prepare(events[i].key), events[i].key, events[i].t);
      REQUIRE(got == want);
      passed += want;
    }
    CHECK(e.remembered() == m.live());
    CHECK(e.evicted() == m.evicted());
    CHECK(passed > 0);
    CHECK(passed < events.size());
  }
}

TEST_CASE("dedup: many keys, growth and eviction across shards") {
  FakeClock clock;
  DedupEngine e(config(std::nullopt, 150'000), clock);
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < 200'000; ++i) e.offer(numbered("key-", i), 0);
  // Round two evicted and re-remembered every key in turn; the last
  // 150000 are remembered.
  CHECK(e.remembered() == 150'000);
  CHECK(e.evicted() == 250'000);
  for (int i = 50'000; i < 200'000; ++i) REQUIRE_FALSE(e.offer(numbered("key-", i), 0));
  CHECK(e.offer("key-49999", 0));
}

bool is_segment(const std::string& key) {
  return key.size() == 9 && key[0] == 's';
}

TEST_CASE("dedup: snapshots are incremental, by segments of the ring, not by keys") {
  FakeClock clock;
  DedupEngine e(config(std::nullopt, 3), clock);
  e.offer("a", 0);
  e.offer("b", 0);
  StateChanges first;
  e.take_changes(first);
  REQUIRE(first.put.size() == 2);  // one segment for a and b, and the metadata entry
  CHECK(is_segment(first.put[0].first));
  CHECK(first.put[1].first == "M");
  CHECK(first.removed.empty());

  StateChanges idle;
  e.take_changes(idle);
  REQUIRE(idle.put.size() == 1);
  CHECK(idle.put[0].first == "M");
  CHECK(idle.removed.empty());

  e.offer("a", 0);  // a duplicate changes nothing
  e.offer("c", 0);
  e.offer("d", 0);  // evicts a
  e.offer("e", 0);  // evicts b: the head leaves the first segment
  e.offer("f", 0);  // evicts c, which no segment holds
  StateChanges next;
  e.take_changes(next);
  CHECK(next.removed == std::vector<std::string>{first.put[0].first});
  REQUIRE(next.put.size() == 2);  // d, e and f in one segment; metadata
  CHECK(is_segment(next.put[0].first));
}

TEST_CASE("dedup: a checkpoint of many keys writes one segment per 65536 of them") {
  FakeClock clock;
  DedupEngine e(config(), clock);
  for (int i = 0; i < 150'000; ++i) e.offer(numbered("key-", i), 0);
  StateChanges changes;
  e.take_changes(changes);
  CHECK(changes.removed.empty());
  REQUIRE(changes.put.size() == 3 + 1);  // ceil(150000 / 65536) segments and the metadata
  size_t bytes = 0;
  for (const auto& [k, v] : changes.put) bytes += v.size();
  CHECK(bytes < 150'000 * 19);  // a hash, a position step and a time step a key

  for (int i = 150'000; i < 150'010; ++i) e.offer(numbered("key-", i), 0);
  StateChanges few;
  e.take_changes(few);
  CHECK(few.put.size() == 2);
  CHECK(few.removed.empty());
}

TEST_CASE("dedup: a segment is removed when the whole of it has expired") {
  FakeClock clock;
  DedupEngine e(config(10), clock);
  for (int i = 0; i < 100; ++i) e.offer(numbered("k", i), 0);
  StateChanges first;
  e.take_changes(first);
  REQUIRE(first.put.size() == 2);
  e.offer("k0", 5);  // a duplicate
  for (int i = 100; i < 200; ++i) e.offer(numbered("k", i), 5);
  StateChanges second;
  e.take_changes(second);
  REQUIRE(second.put.size() == 2);
  CHECK(second.removed.empty());

  e.offer("x", 12);  // expires the first hundred: the head is inside the second segment
  StateChanges third;
  e.take_changes(third);
  CHECK(third.removed == std::vector<std::string>{first.put[0].first});
  CHECK(third.put.size() == 2);  // x's segment, metadata

  e.offer("y", 100);  // expires all the rest
  StateChanges fourth;
  e.take_changes(fourth);
  CHECK(fourth.removed.size() == 2);
  CHECK(fourth.put.size() == 2);
  CHECK(e.remembered() == 1);
}

TEST_CASE("dedup: a key remembered again after its segment was saved is restored once, live") {
  FakeClock clock;
  DedupConfig cfg = config(10);
  DedupEngine e(cfg, clock);
  CHECK(e.offer("h", 10));
  CHECK(e.offer("a", 2));  // out of order, within the horizon
  Store store;
  save(e, store);
  CHECK(e.offer("a", 13));  // a's first entry dies in place, behind h; its segment stays
  StateChanges changes;
  e.take_changes(changes);
  CHECK(changes.removed.empty());
  CHECK(changes.put.size() == 2);
  for (const auto& [k, v] : changes.put) store[k] = v;

  DedupEngine back(cfg, clock);
  restore(back, store, 4);
  CHECK(back.remembered() == 2);
  CHECK_FALSE(back.offer("a", 14));
  CHECK_FALSE(back.offer("h", 20));
  CHECK(back.offer("h", 21));  // 10 + 10 is passed
  CHECK_FALSE(back.offer("a", 23));
  CHECK(back.offer("a", 24));
}

TEST_CASE("dedup: snapshot, restore and the rest of the stream give the uninterrupted output") {
  struct Case {
    std::optional<Millis> within;
    uint64_t max_keys;
    uint32_t keys;
    Millis jitter;
    bool exact;
  };
  auto c = GENERATE(Case{std::nullopt, kDefaultMaxKeys, 4000, 0, false},
                    Case{std::nullopt, 500, 3000, 0, false},
                    Case{200, kDefaultMaxKeys, 3000, 150, false}, Case{60, 300, 1000, 100, false},
                    Case{60, 300, 1000, 100, true}, Case{std::nullopt, 800, 2000, 0, true},
                    Case{3'000'000'000, 700, 1000, 4'000'000'000, false});
  auto events =
      random_stream(static_cast<uint32_t>(c.keys * 7 + c.max_keys), 40'000, c.keys, c.jitter);
  FakeClock clock;
  DedupConfig cfg = config(c.within, c.max_keys, c.exact);
  DedupEngine whole(cfg, clock);
  auto expected = run(whole, events);

  std::mt19937 rng(c.keys);
  for (int trial = 0; trial < 5; ++trial) {
    // Snapshots at random points; the process "dies" after the last one
    // and a new one restores it, possibly more than once.
    Store store;
    auto engine = std::make_unique<DedupEngine>(cfg, clock);
    std::vector<bool> got;
    size_t at = 0;
    while (at < events.size()) {
      size_t step = 1 + rng() % 6000;
      auto part = run(*engine, events, at, at + step);
      got.insert(got.end(), part.begin(), part.end());
      at += step;
      save(*engine, store);
      if (rng() % 2 == 0) {
        engine = std::make_unique<DedupEngine>(cfg, clock);
        restore(*engine, store, static_cast<uint32_t>(rng()));
      }
    }
    REQUIRE(got == expected);
    CHECK(engine->remembered() == whole.remembered());
  }
}

TEST_CASE("dedup: times far from the epoch survive a snapshot") {
  FakeClock clock;
  DedupConfig cfg = config(10);
  DedupEngine e(cfg, clock);
  const Millis far = Millis{1} << 53;
  CHECK(e.offer("past", -far));
  CHECK(e.offer("future", far));  // "past" expires
  CHECK(e.offer("future-ish", far - 5));
  Store store;
  save(e, store);
  DedupEngine back(cfg, clock);
  restore(back, store, 9);
  CHECK(back.max_time() == far);
  CHECK(back.remembered() == 2);
  CHECK_FALSE(back.offer("future-ish", far));
  CHECK(back.offer("future-ish", far + 6));  // its own time was far - 5
}

TEST_CASE("dedup: restoring into a smaller max-keys evicts the oldest") {
  FakeClock clock;
  DedupEngine e(config(), clock);
  for (const char* k : {"a", "b", "c", "d"}) e.offer(k, 0);
  Store store;
  save(e, store);
  DedupEngine small(config(std::nullopt, 2), clock);
  restore(small, store, 1);
  CHECK(small.remembered() == 2);
  CHECK(small.evicted() == 2);
  CHECK(small.offer("a", 0));
  CHECK_FALSE(small.offer("d", 0));
}

TEST_CASE("dedup: restore refuses what it cannot use") {
  FakeClock clock;
  DedupEngine hashed(config(), clock);
  hashed.offer("a", 0);
  Store store;
  save(hashed, store);

  DedupEngine exact(config(std::nullopt, kDefaultMaxKeys, true), clock);
  Status s = Status();
  for (const auto& [k, v] : store) {
    s = exact.restore_entry(k, v);
    if (!s.ok()) break;
  }
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message ==
        "the saved kdedup state holds hashes, not keys (it was saved without --exact)");

  DedupEngine other(config(), clock);
  CHECK(other.restore_entry("zz", std::string(2, '\0')).error().message ==
        "unrecognised kdedup state entry (2 bytes)");
  CHECK(other.restore_entry("m", "\x80").error().message ==
        "malformed kdedup state entry: its value is not a position and a time");
  CHECK(other.restore_entry("m", std::string(3, '\0')).error().message ==
        "malformed kdedup state entry: its value is not a position and a time");
  CHECK(other.restore_entry("M", "\x80").error().message ==
        "malformed kdedup state entry: its metadata is not a head, a tail and a time");
  CHECK(other.restore_entry("M", std::string("\x05\x04\x00", 3)).error().message ==
        "malformed kdedup state entry: its metadata is not a head, a tail and a time");
  const std::string seg0 = std::string("s") + std::string(8, '\0');
  auto segment_error = [&](std::string_view value) {
    DedupEngine fresh(config(), clock);
    return fresh.restore_entry(seg0, value).error().message;
  };
  CHECK(segment_error("") == "malformed kdedup state entry: a segment of unknown kind");
  CHECK(segment_error("q\x01") == "malformed kdedup state entry: a segment of unknown kind");
  CHECK(segment_error(std::string("h\x00", 2)) ==
        "malformed kdedup state entry: a segment's count of positions");
  CHECK(segment_error("h\x02\x02") ==
        "malformed kdedup state entry: a segment's positions are out of order or beyond its end");
  CHECK(segment_error(std::string("h\x02\x01") + "abc") ==
        "malformed kdedup state entry: a segment's hash is cut short");
  CHECK(segment_error(std::string("h\x02\x00", 3) + std::string(16, '\0') + '\0') ==
        "malformed kdedup state entry: a zero hash");
  CHECK(segment_error(std::string("h\x02\x00", 3) + std::string(16, '\1')) ==
        "malformed kdedup state entry: a segment's time is cut short");
  CHECK(segment_error(std::string("h\x02\x00", 3) + std::string(16, '\1') + '\0' + '\0') ==
        "malformed kdedup state entry: a segment's positions are out of order or beyond its end");
  CHECK(segment_error(std::string("x\x02\x00\x05", 4) + "ab") ==
        "malformed kdedup state entry: a segment's key is cut short");

  DedupEngine no_meta(config(), clock);
  for (const auto& [k, v] : store)
    if (k != "M") REQUIRE(no_meta.restore_entry(k, v).ok());
  CHECK(no_meta.finish_restore().error().message ==
        "the saved kdedup state has keys but no metadata entry");

  // Segments must lie between the head and the tail, one after the other.
  auto finish_error = [&](const Store& entries) {
    DedupEngine fresh(config(), clock);
    for (const auto& [k, v] : entries) REQUIRE(fresh.restore_entry(k, v).ok());
    return fresh.finish_restore().error().message;
  };
  REQUIRE(store.size() == 2);
  std::string segment = store.rbegin()->second;  // a at position 0, of one position
  REQUIRE(is_segment(store.rbegin()->first));
  CHECK(finish_error({{seg0, segment}, {"M", std::string("\x00\x00\x00", 3)}}) ==
        "the saved kdedup state is inconsistent: a segment beyond the next position");
  std::string two = std::string("h\x02\x01") + std::string(16, '\2') + '\0';
  CHECK(finish_error({{seg0, two},
                      {std::string("s") + std::string(7, '\0') + '\1', segment},
                      {"M", std::string("\x00\x05\x00", 3)}}) ==
        "the saved kdedup state is inconsistent: segments overlap");
  CHECK(finish_error({{seg0, segment},
                      {"m", std::string("\x01\x00", 2)},
                      {"M", std::string("\x00\x01\x00", 3)}}) ==
        "the saved kdedup state mixes two formats");
}

TEST_CASE("dedup: an exact state restores into a hashed engine") {
  FakeClock clock;
  DedupEngine exact(config(std::nullopt, kDefaultMaxKeys, true), clock);
  exact.offer("a", 0);
  exact.offer("b", 0);
  Store store;
  save(exact, store);
  DedupEngine hashed(config(), clock);
  restore(hashed, store, 3);
  CHECK_FALSE(hashed.offer("a", 0));
  CHECK_FALSE(hashed.offer("b", 0));
  CHECK(hashed.offer("c", 0));
}

TEST_CASE("dedup: a state of the old format restores and is rewritten as segments") {
  struct Case {
    std::optional<Millis> within;
    uint64_t max_keys;
    uint32_t keys;
    Millis jitter;
    bool saved_exact;
    bool exact;
  };
  auto c = GENERATE(Case{std::nullopt, kDefaultMaxKeys, 3000, 0, false, false},
                    Case{std::nullopt, 500, 2000, 0, false, false},
                    Case{60, 300, 1000, 100, false, false}, Case{60, 300, 1000, 100, true, true},
                    Case{200, kDefaultMaxKeys, 3000, 150, true, false},
                    Case{std::nullopt, 800, 2000, 0, true, true});
  auto events = random_stream(c.keys * 3 + 1, 30'000, c.keys, c.jitter);
  FakeClock clock;
  DedupConfig cfg = config(c.within, c.max_keys, c.exact);
  DedupEngine whole(cfg, clock);
  auto expected = run(whole, events);

  for (size_t cut : {size_t{1}, size_t{777}, size_t{12'345}, size_t{29'999}}) {
    // The old kdedup ran the stream up to `cut` and saved its state there.
    Model old(config(c.within, c.max_keys, c.saved_exact));
    std::vector<bool> got;
    for (size_t i = 0; i < cut; ++i) got.push_back(old.offer(events[i].key, events[i].t));
    Store store = old.old_format(c.saved_exact);

    DedupEngine migrated(cfg, clock);
    restore(migrated, store, static_cast<uint32_t>(cut));
    auto part = run(migrated, events, cut, cut + 500);
    got.insert(got.end(), part.begin(), part.end());
    save(migrated, store);  // the first checkpoint after the restore
    for (const auto& [k, v] : store) REQUIRE((is_segment(k) || k == "M"));

    DedupEngine back(cfg, clock);
    restore(back, store, static_cast<uint32_t>(cut) + 1);
    part = run(back, events, cut + 500);
    got.insert(got.end(), part.begin(), part.end());
    REQUIRE(got == expected);
    CHECK(back.remembered() == whole.remembered());
  }
}

TEST_CASE("dedup: many checkpoints and keys remembered again across segments") {
  // A short horizon and disorder: keys expire and are remembered again
  // while their older entries die in place, in segments saved long ago.
  auto exact = GENERATE(false, true);
  auto events = random_stream(77, 30'000, 400, 90);
  FakeClock clock;
  DedupConfig cfg = config(40, 250, exact);
  DedupEngine whole(cfg, clock);
  auto expected = run(whole, events);

  std::mt19937 rng(5);
  Store store;
  auto engine = std::make_unique<DedupEngine>(cfg, clock);
  std::vector<bool> got;
  size_t at = 0;
  size_t restores = 0;
  while (at < events.size()) {
    size_t step = 1 + rng() % 40;
    auto part = run(*engine, events, at, at + step);
    got.insert(got.end(), part.begin(), part.end());
    at += step;
    save(*engine, store);
    if (rng() % 4 == 0) {
      engine = std::make_unique<DedupEngine>(cfg, clock);
      restore(*engine, store, static_cast<uint32_t>(rng()));
      ++restores;
    }
  }
  CHECK(restores > 100);
  REQUIRE(got == expected);
  CHECK(engine->remembered() == whole.remembered());
  CHECK(store.size() < 100);  // segments, not keys
}

TEST_CASE("dedup: more than 65536 keys in one checkpoint, remembered again across segments") {
  // 250000 records of 300000 keys, 1.5 ms apart on average, with a
  // horizon of 200000 ms and up to 30000 ms of disorder: the ring spans
  // more than 65536 positions, and many keys are remembered again, some
  // after their older entries were saved in another segment.
  auto exact = GENERATE(false, true);
  auto events = random_stream(11, 250'000, 300'000, 30'000);
  FakeClock clock;
  DedupConfig cfg = config(200'000, kDefaultMaxKeys, exact);
  DedupEngine whole(cfg, clock);
  auto expected = run(whole, events);

  Store store;
  DedupEngine first(cfg, clock);
  auto got = run(first, events, 0, 150'000);
  StateChanges changes;
  first.take_changes(changes);
  CHECK(changes.put.size() >= 3);  // segments and the metadata
  for (const auto& [k, v] : changes.put) store[k] = v;
  DedupEngine second(cfg, clock);
  restore(second, store, 8);
  CHECK(second.remembered() == first.remembered());
  auto part = run(second, events, 150'000, 200'000);
  got.insert(got.end(), part.begin(), part.end());
  save(second, store);
  DedupEngine third(cfg, clock);
  restore(third, store, 9);
  part = run(third, events, 200'000);
  got.insert(got.end(), part.begin(), part.end());
  REQUIRE(got == expected);
  CHECK(third.remembered() == whole.remembered());
}
