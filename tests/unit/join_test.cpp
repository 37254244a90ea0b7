#include "kpipe/join.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "fakes.h"

// kjoin's engine (kjoin(1)): the lookup table, the versioned table, the
// table's watermark, and the engine's waiting records and snapshots.

namespace kpipe {
namespace {

std::string big_row(size_t key, size_t round, size_t size) {
  std::string row = fmt::format("{{\"k\":{},\"round\":{},\"pad\":\"", key, round);
  row.append(size - row.size() - 2, static_cast<char>('a' + key % 26));
  row += "\"}";
  return row;
}

// A state store's live entries: what the snapshots add up to.
struct Store {
  std::map<std::string, std::string> live;

  // Applies one take_changes(), checking that it names each entry once.
  StateChanges take(Snapshottable& engine) {
    StateChanges changes;
    engine.take_changes(changes);
    std::set<std::string> named;
    for (const auto& [key, value] : changes.put) CHECK(named.insert(key).second);
    for (const auto& key : changes.removed) CHECK(named.insert(key).second);
    for (const auto& key : changes.removed) live.erase(key);
    for (const auto& [key, value] : changes.put) live[key] = value;
    return changes;
  }

  // Restores `engine` from the entries, in an order other than the
  // store's (restore_entry's order is unspecified).
  void restore(Snapshottable& engine, unsigned seed = 7) const {
    std::vector<std::pair<std::string, std::string>> entries(live.begin(), live.end());
    std::shuffle(entries.begin(), entries.end(), std::mt19937(seed));
    for (const auto& [key, value] : entries) REQUIRE(engine.restore_entry(key, value).ok());
    REQUIRE(engine.finish_restore().ok());
  }
};

std::map<std::string, std::string> puts_of(const StateChanges& c) {
  return {c.put.begin(), c.put.end()};
}

std::set<std::string> removed_of(const StateChanges& c) {
  return {c.removed.begin(), c.removed.end()};
}

std::string row_of(const VersionedTable::Found& f) {
  return f.row ? std::string(*f.row) : "<none>";
}

// --- LookupTable -------------------------------------------------------------

TEST_CASE("LookupTable: put, replace, erase, find", "[join]") {
  LookupTable t;
  CHECK(t.size() == 0);
  CHECK_FALSE(t.find("a"));
  CHECK_FALSE(t.erase("a"));

  t.put("a", R"({"n":1})");
  t.put("b", R"({"n":2})");
  CHECK(t.size() == 2);
  CHECK(t.find("a") == std::optional<std::string_view>(R"({"n":1})"));
  CHECK(t.find("b") == std::optional<std::string_view>(R"({"n":2})"));
  CHECK_FALSE(t.find("c"));

  // Replaced: the newest row, the count unchanged.
  t.put("a", R"({"n":10,"longer":true})");
  CHECK(t.size() == 2);
  CHECK(*t.find("a") == R"({"n":10,"longer":true})");
  t.put("a", "");  // an empty row is a row
  REQUIRE(t.find("a"));
  CHECK(t.find("a")->empty());

  CHECK(t.erase("a"));
  CHECK_FALSE(t.erase("a"));
  CHECK(t.size() == 1);
  CHECK_FALSE(t.find("a"));
  CHECK(*t.find("b") == R"({"n":2})");

  // Keys are bytes: empty, binary, prefixes of each other.
  t.put("", "empty");
  t.put(std::string_view("\0\xff", 2), "binary");
  t.put("ab", "ab");
  t.put("abc", "abc");
  CHECK(*t.find("") == "empty");
  CHECK(*t.find(std::string_view("\0\xff", 2)) == "binary");
  CHECK_FALSE(t.find(std::string_view("\0", 1)));
  CHECK(*t.find("ab") == "ab");
  CHECK(*t.find("abc") == "abc");
  CHECK(t.size() == 5);

  std::map<std::string, std::string> seen;
  t.for_each([&](std::string_view k, std::string_view r) { seen[std::string(k)] = r; });
  CHECK(seen == std::map<std::string, std::string>{{"", "empty"},
                                                   {std::string("\0\xff", 2), "binary"},
                                                   {"ab", "ab"},
                                                   {"abc", "abc"},
                                                   {"b", R"({"n":2})"}});
}

// A table read whole calls a replaced row a duplicate key (kjoin(1),
// Table problems): put says so, a key put for the first time (also again
// after an erase) is not one.
TEST_CASE("LookupTable: put says whether it replaced the key's row", "[join]") {
  LookupTable t;
  CHECK_FALSE(t.put("a", "first"));
  CHECK_FALSE(t.put("b", "other"));
  CHECK(t.put("a", "second"));
  CHECK(t.put("a", "third"));
  CHECK(*t.find("a") == "third");
  CHECK(t.size() == 2);
  CHECK(t.erase("a"));
  CHECK_FALSE(t.put("a", "back"));
  // Keys that are prefixes of each other are other keys.
  CHECK_FALSE(t.put("ab", "ab"));
  CHECK_FALSE(t.put(std::string_view("a\0", 2), "a nul"));
  // Through growth and compaction: every first put new, every second a
  // replacement.
  for (int i = 0; i < 5000; ++i) CHECK_FALSE(t.put(fmt::format("k{}", i), big_row(i, 0, 200)));
  for (int i = 0; i < 5000; ++i) CHECK(t.put(fmt::format("k{}", i), big_row(i, 1, 200)));
  CHECK(t.size() == 5004);
}

TEST_CASE("LookupTable: a row from the table itself can be put again", "[join]") {
  LookupTable t;
  t.put("a", "row of a");
  std::string_view same = *t.find("a");
  t.put("b", same);
  t.put("a", *t.find("a"));
  CHECK(*t.find("a") == "row of a");
  CHECK(*t.find("b") == "row of a");
}

TEST_CASE("LookupTable: many keys, through growth", "[join]") {
  LookupTable t;
  constexpr int kKeys = 200'000;
  for (int i = 0; i < kKeys; ++i) t.put(fmt::format("key-{}", i), fmt::format("{{\"i\":{}}}", i));
  REQUIRE(t.size() == kKeys);
  for (int i = 0; i < kKeys; ++i) {
    auto row = t.find(fmt::format("key-{}", i));
    REQUIRE(row);
    REQUIRE(*row == fmt::format("{{\"i\":{}}}", i));
  }
  CHECK_FALSE(t.find("key-200000"));
  CHECK_FALSE(t.find("key-"));

  size_t counted = 0;
  t.for_each([&](std::string_view, std::string_view) { ++counted; });
  CHECK(counted == kKeys);

  // Erase the odd ones, then put them back with other rows; deleted slots
  // are reused or cleaned away, and every key is found again.
  for (int i = 1; i < kKeys; i += 2) REQUIRE(t.erase(fmt::format("key-{}", i)));
  CHECK(t.size() == kKeys / 2);
  for (int i = 0; i < kKeys; ++i) {
    auto row = t.find(fmt::format("key-{}", i));
    REQUIRE(row.has_value() == (i % 2 == 0));
  }
  for (int i = 1; i < kKeys; i += 2) t.put(fmt::format("key-{}", i), fmt::format("again {}", i));
  CHECK(t.size() == kKeys);
  for (int i = 0; i < kKeys; ++i) {
    auto row = t.find(fmt::format("key-{}", i));
    REQUIRE(row);
    REQUIRE(*row == (i % 2 ? fmt::format("again {}", i) : fmt::format("{{\"i\":{}}}", i)));
  }
}

TEST_CASE("LookupTable: erase then put again, over and over", "[join]") {
  // Churn of deleted slots: the table must neither lose keys nor fill up
  // with tombstones (a probe that never ends).
  LookupTable t;
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 5000; ++i) t.put(fmt::format("r{}-{}", round, i), "x");
    for (int i = 0; i < 5000; ++i) REQUIRE(t.erase(fmt::format("r{}-{}", round, i)));
    REQUIRE(t.size() == 0);
  }
  t.put("k", "v1");
  CHECK(t.erase("k"));
  CHECK_FALSE(t.find("k"));
  t.put("k", "v2");
  CHECK(*t.find("k") == "v2");
  CHECK(t.size() == 1);
  CHECK_FALSE(t.find("r0-0"));
  CHECK_FALSE(t.find("r49-4999"));
}

TEST_CASE("LookupTable: a row larger than a block", "[join]") {
  LookupTable t;
  t.put("small", "s");
  std::string huge(3 << 20, 'h');
  huge.front() = '<';
  huge.back() = '>';
  t.put("huge", huge);
  t.put("after", "a");
  CHECK(*t.find("small") == "s");
  CHECK(*t.find("huge") == huge);
  CHECK(*t.find("after") == "a");
}

TEST_CASE("LookupTable: replaced rows are compacted away", "[join]") {
  LookupTable t;
  constexpr size_t kRow = 100 << 10;
  constexpr size_t kKeys = 5;
  constexpr size_t kRounds = 400;  // 5 * 400 * 100 KiB: about 200 MiB put
  t.put("steady", "never replaced");
  t.put("gone", "erased before compaction");
  CHECK(t.erase("gone"));
  size_t highest = 0;
  bool dropped = false;
  for (size_t round = 0; round < kRounds; ++round) {
    for (size_t k = 0; k < kKeys; ++k) {
      t.put(fmt::format("big-{}", k), big_row(k, round, kRow));
      size_t m = t.memory();
      if (m < highest) dropped = true;
      highest = std::max(highest, m);
    }
  }
  // The arena shrank at least once (compaction), and never held all of
  // what was put.
  CHECK(dropped);
  CHECK(highest < size_t{100} << 20);
  CHECK(t.memory() < size_t{100} << 20);
  // The rows are still right.
  CHECK(t.size() == kKeys + 1);
  for (size_t k = 0; k < kKeys; ++k) {
    auto row = t.find(fmt::format("big-{}", k));
    REQUIRE(row);
    CHECK(*row == big_row(k, kRounds - 1, kRow));
  }
  CHECK(*t.find("steady") == "never replaced");
  CHECK_FALSE(t.find("gone"));
  // And the table still works after it.
  t.put("later", "l");
  t.put("big-0", "small now");
  CHECK(*t.find("later") == "l");
  CHECK(*t.find("big-0") == "small now");
}

TEST_CASE("LookupTable: erased rows are compacted away too", "[join]") {
  LookupTable t;
  constexpr size_t kRow = 64 << 10;
  for (size_t round = 0; round < 1500; ++round) {  // about 94 MiB put and erased
    t.put(fmt::format("tmp-{}", round), big_row(round, round, kRow));
    if (round % 100 != 0) REQUIRE(t.erase(fmt::format("tmp-{}", round)));
  }
  CHECK(t.memory() < size_t{64} << 20);
  CHECK(t.size() == 15);
  for (size_t round = 0; round < 1500; round += 100)
    CHECK(*t.find(fmt::format("tmp-{}", round)) == big_row(round, round, kRow));
}

TEST_CASE("LookupTable: memory is about the text held", "[join]") {
  LookupTable t;
  CHECK(t.memory() < 4096);  // nothing allocated yet beyond the object
  constexpr size_t kRows = 1'000'000;
  size_t bytes = 0;
  for (size_t i = 0; i < kRows; ++i) {
    std::string key = fmt::format("user-{}", i);
    std::string row = fmt::format(R"({{"id":{},"tier":"gold"}})", i);
    bytes += key.size() + row.size();
    t.put(key, row);
  }
  REQUIRE(t.size() == kRows);
  INFO("memory " << t.memory() << " for " << bytes << " bytes in " << kRows << " rows");
  CHECK(t.memory() >= bytes);
  CHECK(t.memory() < 2 * bytes + 40 * kRows);
  CHECK(*t.find("user-999999") == R"({"id":999999,"tier":"gold"})");
}

TEST_CASE("LookupTable: moved, the rows go along", "[join]") {
  LookupTable a;
  for (int i = 0; i < 3000; ++i) a.put(fmt::format("k{}", i), fmt::format("r{}", i));
  LookupTable b(std::move(a));
  CHECK(b.size() == 3000);
  CHECK(*b.find("k2999") == "r2999");
  LookupTable c;
  c.put("other", "x");
  c = std::move(b);
  CHECK(c.size() == 3000);
  CHECK(*c.find("k0") == "r0");
  CHECK_FALSE(c.find("other"));
}

// --- VersionedTable ----------------------------------------------------------

TEST_CASE("VersionedTable: the newest version at or before the time", "[join]") {
  VersionedTable t;
  // Read out of order.
  t.put("a", 30, "v30");
  t.put("a", 10, "v10");
  t.put("a", 20, "v20");
  CHECK(t.keys() == 1);
  CHECK(t.versions() == 3);

  CHECK(row_of(t.find("a", 9)) == "<none>");
  CHECK_FALSE(t.find("a", 9).pruned);
  CHECK(row_of(t.find("a", 10)) == "v10");
  CHECK(row_of(t.find("a", 19)) == "v10");
  CHECK(row_of(t.find("a", 20)) == "v20");
  CHECK(row_of(t.find("a", 29)) == "v20");
  CHECK(row_of(t.find("a", 30)) == "v30");
  CHECK(row_of(t.find("a", kMaxTime)) == "v30");
  CHECK(row_of(t.find("a", kMinTime)) == "<none>");
  CHECK(row_of(t.find("b", 30)) == "<none>");
  CHECK_FALSE(t.find("b", 30).pruned);

  // Negative times are times.
  t.put("neg", -5, "minus five");
  CHECK(row_of(t.find("neg", -6)) == "<none>");
  CHECK(row_of(t.find("neg", -5)) == "minus five");
  CHECK(row_of(t.find("neg", 0)) == "minus five");
}

TEST_CASE("VersionedTable: a version of the same time replaces the earlier", "[join]") {
  VersionedTable t;
  t.put("a", 10, "first");
  t.put("a", 20, "twenty");
  t.put("a", 10, "second");
  CHECK(t.versions() == 2);
  CHECK(row_of(t.find("a", 15)) == "second");
  // A tombstone of the same time replaces the row, and a row the tombstone.
  t.put("a", 10, std::nullopt);
  CHECK(t.versions() == 2);
  CHECK(row_of(t.find("a", 15)) == "<none>");
  t.put("a", 10, "third");
  CHECK(row_of(t.find("a", 15)) == "third");
  CHECK(row_of(t.find("a", 20)) == "twenty");
}

// As of, a key has many rows, one per time: only a version of the same
// key and time is a replacement (a duplicate in a table read whole).
TEST_CASE("VersionedTable: put says whether it replaced a version of the same key and time",
          "[join]") {
  VersionedTable t;
  CHECK_FALSE(t.put("a", 10, "a10"));
  CHECK_FALSE(t.put("a", 20, "a20"));
  CHECK_FALSE(t.put("a", 5, "a5"));  // before the others, read late
  CHECK_FALSE(t.put("b", 10, "b10"));
  CHECK(t.put("a", 10, "a10 again"));
  CHECK(t.put("a", 20, std::nullopt));  // a tombstone replaces a row
  CHECK(t.put("a", 20, "a20 back"));    // and a row a tombstone
  CHECK_FALSE(t.put("a", 21, std::nullopt));
  CHECK(t.versions() == 5);
  CHECK(row_of(t.find("a", 15)) == "a10 again");
  CHECK(row_of(t.find("a", 20)) == "a20 back");
  // Pruned at 15, the version at 5 is forgotten: one at or before it is
  // dropped and replaces none; the kept one at 10 is still replaced.
  t.prune(15, [](std::string_view) {});
  CHECK_FALSE(t.put("a", 5, "forgotten"));
  CHECK_FALSE(t.put("a", 3, "forgotten"));
  CHECK(t.put("a", 10, "a10 third"));
  CHECK(row_of(t.find("a", 15)) == "a10 third");
}

TEST_CASE("VersionedTable: a tombstone means no row from its time on", "[join]") {
  VersionedTable t;
  t.put("a", 10, "row");
  t.put("a", 20, std::nullopt);
  t.put("a", 30, "back");
  CHECK(t.versions() == 3);
  CHECK(row_of(t.find("a", 19)) == "row");
  auto at20 = t.find("a", 20);
  CHECK_FALSE(at20.row);
  CHECK_FALSE(at20.pruned);
  CHECK_FALSE(t.find("a", 29).row);
  CHECK(row_of(t.find("a", 30)) == "back");
  // A key whose only version is a tombstone.
  t.put("t", 5, std::nullopt);
  CHECK(t.keys() == 2);
  CHECK_FALSE(t.find("t", 100).row);
  CHECK_FALSE(t.find("t", 100).pruned);
}

TEST_CASE("VersionedTable: prune keeps the newest version at or before the bound", "[join]") {
  VersionedTable t;
  t.put("a", 10, "a10");
  t.put("a", 20, "a20");
  t.put("a", 30, "a30");
  t.put("b", 30, "b30");  // nothing at or before the bound
  t.put("c", 5, "c5");    // only one: nothing older to forget
  t.put("d", 10, std::nullopt);
  t.put("d", 20, "d20");  // the newest at or before 25 is d20
  t.put("e", 10, "e10");
  t.put("e", 20, std::nullopt);
  t.put("e", 30, "e30");
  t.put("f", 10, "f10");
  t.put("f", 25, "f25");  // exactly at the bound
  REQUIRE(t.versions() == 12);

  std::set<std::string> changed;
  t.prune(25, [&](std::string_view k) { CHECK(changed.emplace(k).second); });
  CHECK(changed == std::set<std::string>{"a", "d", "e", "f"});
  CHECK(t.versions() == 8);
  CHECK(t.keys() == 6);

  // What a record at or after the bound needs is all there.
  CHECK(row_of(t.find("a", 25)) == "a20");
  CHECK(row_of(t.find("a", 30)) == "a30");
  CHECK(row_of(t.find("b", 25)) == "<none>");
  CHECK_FALSE(t.find("b", 25).pruned);
  CHECK(row_of(t.find("c", 25)) == "c5");
  CHECK(row_of(t.find("d", 25)) == "d20");
  CHECK(row_of(t.find("e", 25)) == "<none>");
  CHECK_FALSE(t.find("e", 25).pruned);
  CHECK(row_of(t.find("e", 30)) == "e30");
  CHECK(row_of(t.find("f", 25)) == "f25");

  // The newest kept still answers back to its own time.
  CHECK(row_of(t.find("a", 20)) == "a20");
  CHECK_FALSE(t.find("a", 20).pruned);
  // Older than what was kept: unknown, and said so.
  auto a15 = t.find("a", 15);
  CHECK_FALSE(a15.row);
  CHECK(a15.pruned);
  CHECK(t.find("a", 9).pruned);
  CHECK(t.find("d", 15).pruned);
  CHECK(t.find("e", 15).pruned);
  CHECK(t.find("f", 24).pruned);
  // Keys not pruned still answer "no row" without doubt.
  CHECK_FALSE(t.find("b", 10).pruned);
  CHECK_FALSE(t.find("c", 1).pruned);

  // Pruning again at the same bound changes nothing.
  changed.clear();
  t.prune(25, [&](std::string_view k) { changed.emplace(k); });
  CHECK(changed.empty());
  CHECK(t.versions() == 8);

  // A later bound goes on.
  t.prune(kMaxTime, [&](std::string_view k) { changed.emplace(k); });
  CHECK(changed == std::set<std::string>{"a", "e"});
  CHECK(t.versions() == 6);
  CHECK(row_of(t.find("a", 100)) == "a30");
  CHECK(t.find("a", 29).pruned);
}

TEST_CASE("VersionedTable: a version newer than the pruned ones, read late", "[join]") {
  // Table records may arrive out of order (--table-watermark): one read
  // after a prune, older than what was kept but newer than what was
  // forgotten, is the answer for its own times.
  VersionedTable t;
  t.put("k", 10, "k10");
  t.put("k", 30, "k30");
  t.put("k", 40, "k40");
  t.prune(35, [](std::string_view) {});
  t.put("k", 20, "k20 late");
  CHECK(row_of(t.find("k", 25)) == "k20 late");
  CHECK_FALSE(t.find("k", 25).pruned);
  CHECK(row_of(t.find("k", 35)) == "k30");
  CHECK(t.find("k", 15).pruned);
}

// After a prune, a version read late that is older than a forgotten one
// must not answer for the times the forgotten version held: the answer
// there is unknown (kjoin(1), --as-of: "older than the table versions kept").
TEST_CASE("VersionedTable: a version older than the pruned ones, read late", "[join]") {
  VersionedTable t;
  t.put("k", 10, "k10");
  t.put("k", 30, "k30");
  t.put("k", 40, "k40");
  std::set<std::string> changed;
  t.prune(35, [&](std::string_view k) { changed.emplace(k); });
  REQUIRE(changed == std::set<std::string>{"k"});  // k10 forgotten
  t.put("k", 5, "k5 late");
  auto at12 = t.find("k", 12);  // k10 held at 12, and it was forgotten
  CHECK(at12.pruned);
  CHECK_FALSE(at12.row);
  // What is known stays right.
  CHECK(row_of(t.find("k", 35)) == "k30");
}

TEST_CASE("VersionedTable: encode and decode", "[join]") {
  VersionedTable t;
  t.put("k", 20, std::nullopt);
  t.put("k", 10, R"({"a":"x;y,z"})");
  t.put("k", 30, ";,;,");
  t.put("k", 40, "");
  t.put("k", -7, "before 1970");
  CHECK(*t.encode("k") == R"(-;-7,11,before 1970;10,13,{"a":"x;y,z"};20,-1,;30,4,;,;,;40,0,)");
  CHECK_FALSE(t.encode("missing"));

  VersionedTable u;
  REQUIRE(u.decode("k", *t.encode("k")).ok());
  CHECK(u.keys() == 1);
  CHECK(u.versions() == 5);
  CHECK(*u.encode("k") == *t.encode("k"));
  for (Millis at : {-8, -7, 0, 10, 15, 20, 25, 30, 35, 40, 1000}) {
    INFO("at " << at);
    CHECK(row_of(u.find("k", at)) == row_of(t.find("k", at)));
    CHECK(u.find("k", at).pruned == t.find("k", at).pruned);
  }
  CHECK(row_of(u.find("k", 10)) == R"({"a":"x;y,z"})");
  CHECK(row_of(u.find("k", 30)) == ";,;,");
  CHECK(row_of(u.find("k", 40)).empty());
  CHECK(row_of(u.find("k", 20)) == "<none>");

  // The pruned mark goes along.
  t.prune(25, [](std::string_view) {});
  std::string pruned = *t.encode("k");
  CHECK(pruned == R"(10;20,-1,;30,4,;,;,;40,0,)");  // 10: the newest forgotten
  VersionedTable w;
  REQUIRE(w.decode("k", pruned).ok());
  CHECK(w.find("k", 19).pruned);
  CHECK(w.versions() == 3);
  CHECK(*w.encode("k") == pruned);

  // A key with no versions left.
  VersionedTable e;
  REQUIRE(e.decode("empty", "0").ok());
  CHECK(e.keys() == 1);
  CHECK(e.versions() == 0);
  CHECK(*e.encode("empty") == "0");
}

TEST_CASE("VersionedTable: malformed versions are refused", "[join]") {
  for (std::string_view text : {"", "x;1,1,a", "-;", "-;10", "-;10,", "-;10,5,abc", "-;x,1,a",
                                "-;10,1,ab", "-,10,1,a", "-;10;1,a", "5x;1,1,a",
                                // Found by tests/fuzz (join_table): versions out of
                                // time order, or two of one time, were taken, and
                                // the row found at a time was then the wrong one.
                                "-;5,1,a;2,1,b", "-;5,1,a;5,-1,"}) {
    VersionedTable t;
    INFO("text '" << text << "'");
    Status s = t.decode("k", text);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().status == ExitStatus::kDataError);
    CHECK(s.error().message == "malformed versions of key 'k'");
  }
}

// --- TableWatermark ----------------------------------------------------------

TEST_CASE("TableWatermark: the lowest partition less the disorder", "[join]") {
  TableWatermark w(100, 0);
  CHECK(w.value(0) == kMaxTime);  // nothing holds it back
  w.add_partition(0, 0);
  w.add_partition(1, 0);
  CHECK(w.value(0) == kMinTime);
  CHECK_FALSE(w.newest(0));
  CHECK_FALSE(w.newest(7));
  w.on_record(0, 1000, 0);
  CHECK(w.value(0) == kMinTime);  // partition 1 has read nothing
  w.on_record(1, 500, 0);
  CHECK(w.value(0) == 400);
  // An older record does not move it back.
  w.on_record(1, 300, 0);
  CHECK(*w.newest(1) == 500);
  CHECK(w.value(0) == 400);
  w.on_record(1, 2000, 0);
  CHECK(w.value(0) == 900);
  CHECK(*w.newest(0) == 1000);
  CHECK(*w.newest(1) == 2000);
  // No idle timeout: never idle however long.
  CHECK(w.value(kSecond * 1'000'000) == 900);
  // Adding a known partition again changes nothing.
  w.add_partition(0, 0);
  CHECK(*w.newest(0) == 1000);
  // A partition first seen in a record.
  w.on_record(5, 50, 0);
  CHECK(w.value(0) == -50);
}

TEST_CASE("TableWatermark: idle partitions stop holding it back", "[join]") {
  FakeClock clock;
  TableWatermark w(0, 5000);
  w.add_partition(0, clock.steady());
  w.add_partition(1, clock.steady());
  w.on_record(0, 1000, clock.steady());
  CHECK(w.value(clock.steady()) == kMinTime);
  clock.advance(4000);
  w.on_record(0, 1500, clock.steady());
  CHECK(w.value(clock.steady()) == kMinTime);
  clock.advance(999);
  CHECK(w.value(clock.steady()) == kMinTime);
  clock.advance(1);  // partition 1 silent for 5s
  CHECK(w.value(clock.steady()) == 1500);
  clock.advance(4000);  // both silent
  CHECK(w.value(clock.steady()) == kMaxTime);
  // A record wakes its partition.
  w.on_record(1, 700, clock.steady());
  CHECK(w.value(clock.steady()) == 700);
  w.on_record(0, 2000, clock.steady());
  CHECK(w.value(clock.steady()) == 700);
  clock.advance(5000);
  CHECK(w.value(clock.steady()) == kMaxTime);
}

TEST_CASE("TableWatermark: a whole table holds nothing back", "[join]") {
  TableWatermark w(0, 0);
  w.add_partition(0, 0);
  CHECK(w.value(0) == kMinTime);
  w.set_whole(true);
  CHECK(w.value(0) == kMaxTime);
  w.set_whole(false);
  CHECK(w.value(0) == kMinTime);
}

TEST_CASE("TableWatermark: restored partitions", "[join]") {
  TableWatermark w(10, 1000);
  w.restore(0, 500, 0);
  w.restore(1, std::nullopt, 0);
  CHECK(*w.newest(0) == 500);
  CHECK_FALSE(w.newest(1));
  CHECK(w.value(0) == kMinTime);
  CHECK(w.value(1000) == kMaxTime);  // both idle since restored
  w.restore(1, 300, 1000);
  CHECK(w.value(1000) == 290);
}

TEST_CASE("TableWatermark: a record at the watermark still waits", "[join]") {
  // Two users' versions from 35000 read in order: after the first, the
  // second user's row of the same time may still come, so an event of that
  // user at 35000 must wait for the watermark to move beyond it.
  FakeClock clock;
  JoinEngine e(JoinMode::kAsOf, true, 0, 0, clock);
  e.add_partition(0);
  e.apply("u1", 15000, "u1v1", 0, 1);
  e.apply("u2", 15000, "u2v1", 0, 2);
  e.apply("u1", 35000, "u1v2", 0, 3);
  CHECK(e.table_watermark() == 35000);
  CHECK_FALSE(e.table_passed(35000));
  CHECK(e.table_passed(34999));
  e.apply("u2", 35000, "u2v2", 0, 4);
  CHECK_FALSE(e.table_passed(35000));
  e.apply("u1", 55000, "u1v3", 0, 5);
  CHECK(e.table_passed(35000));
  CHECK(*e.find_as_of("u2", 35000).row == "u2v2");
  // Nothing holds a whole table back, whatever the time.
  CHECK(JoinEngine::passed(kMaxTime, kMaxTime));
  CHECK_FALSE(JoinEngine::passed(kMinTime, kMinTime));
}

// --- JoinEngine --------------------------------------------------------------

TEST_CASE("JoinEngine: waiting records in arrival order", "[join]") {
  FakeClock clock;
  JoinEngine e(JoinMode::kAsOf, true, 0, 0, clock);
  CHECK_FALSE(e.has_pending());
  CHECK(e.pending() == 0);
  e.hold(300, 1, "in.ndjson", "first");
  e.hold(100, 2, "in.ndjson", "second");
  e.hold(200, 7, "-", "third");
  CHECK(e.has_pending());
  CHECK(e.pending() == 3);
  CHECK(e.pending_bytes() == 9 + 5 + 9 + 6 + 1 + 5);
  CHECK(e.front().text == "first");
  CHECK(e.front().time == 300);
  CHECK(e.front().number == 1);
  CHECK(e.front().input == "in.ndjson");
  e.pop_front();
  CHECK(e.front().text == "second");
  CHECK(e.front().time == 100);
  e.pop_front();
  CHECK(e.front().text == "third");
  CHECK(e.front().number == 7);
  CHECK(e.front().input == "-");
  e.pop_front();
  CHECK_FALSE(e.has_pending());
  CHECK(e.pending_bytes() == 0);
}

TEST_CASE("JoinEngine: lookup rows, tombstones and the table's watermark", "[join]") {
  FakeClock clock;
  JoinEngine e(JoinMode::kLookup, true, 100, 0, clock);
  CHECK(e.mode() == JoinMode::kLookup);
  e.add_partition(0);
  CHECK(e.table_watermark() == kMinTime);
  e.apply("a", 1000, "rowA", 0, 1);
  e.apply("b", 1200, "rowB", 0, 2);
  CHECK(e.rows() == 2);
  CHECK(*e.find("a") == "rowA");
  CHECK(e.table_watermark() == 1100);
  e.apply("a", 1300, std::nullopt, 0, 3);
  CHECK_FALSE(e.find("a"));
  CHECK(e.rows() == 1);
  e.skip(0, 10);
  CHECK(e.offsets() == std::map<int32_t, Position>{{0, 10}});
  // A table read whole has no partitions: no offsets, no watermark.
  e.apply("c", 0, "rowC", -1, 0);
  CHECK(*e.find("c") == "rowC");
  CHECK(e.offsets().size() == 1);
  CHECK(e.table_watermark() == 1200);
  e.set_whole(true);
  CHECK(e.table_watermark() == kMaxTime);
}

TEST_CASE("JoinEngine: idle table partitions by the steady clock", "[join]") {
  FakeClock clock(1'700'000'000'000);
  JoinEngine e(JoinMode::kAsOf, true, 0, 2000, clock);
  e.add_partition(0);
  e.add_partition(1);
  e.apply("k", 500, "r", 0, 1);
  CHECK(e.table_watermark() == kMinTime);
  clock.advance(2000);
  CHECK(e.table_watermark() == kMaxTime);
  e.apply("k", 600, "r", 1, 1);
  CHECK(e.table_watermark() == 600);
}

TEST_CASE("JoinEngine: as-of rows", "[join]") {
  FakeClock clock;
  JoinEngine e(JoinMode::kAsOf, true, 0, 0, clock);
  e.apply("k", 20, "k20", -1, 0);
  e.apply("k", 10, "k10", -1, 0);
  e.apply("k", 30, std::nullopt, -1, 0);
  e.apply("j", 5, "j5", -1, 0);
  CHECK(e.rows() == 2);
  CHECK(row_of(e.find_as_of("k", 9)) == "<none>");
  CHECK(row_of(e.find_as_of("k", 10)) == "k10");
  CHECK(row_of(e.find_as_of("k", 25)) == "k20");
  CHECK(row_of(e.find_as_of("k", 30)) == "<none>");
  CHECK(row_of(e.find_as_of("j", 5)) == "j5");
  CHECK_FALSE(e.find("k"));  // lookup finds nothing in an as-of table
}

// What kjoin counts as duplicates of a table read whole (kjoin(1), Table
// problems): apply says whether the row replaced one.
TEST_CASE("JoinEngine: apply says whether it replaced a row", "[join]") {
  FakeClock clock;
  SECTION("lookup: the same key") {
    JoinEngine e(JoinMode::kLookup, true, 0, 0, clock);
    e.set_whole(true);
    CHECK_FALSE(e.apply("k", 10, "first", -1, 0));
    CHECK_FALSE(e.apply("j", 10, "j", -1, 0));
    CHECK(e.apply("k", 20, "second", -1, 0));  // another time is the same key
    CHECK(e.apply("k", 10, "third", -1, 0));
    CHECK(*e.find("k") == "third");
    CHECK(e.rows() == 2);
    // A tombstone replaces the key's row; of a key not there, none.
    CHECK(e.apply("k", 30, std::nullopt, -1, 0));
    CHECK_FALSE(e.apply("gone", 30, std::nullopt, -1, 0));
    CHECK_FALSE(e.apply("k", 40, "back", -1, 0));
  }
  SECTION("lookup: a topic's updates are replacements too") {
    JoinEngine e(JoinMode::kLookup, true, 0, 0, clock);
    e.add_partition(0);
    CHECK_FALSE(e.apply("k", 10, "v1", 0, 1));
    CHECK(e.apply("k", 20, "v2", 0, 2));
    CHECK(e.offsets() == std::map<int32_t, Position>{{0, 2}});
  }
  SECTION("as of: the same key and time") {
    JoinEngine e(JoinMode::kAsOf, true, 0, 0, clock);
    e.set_whole(true);
    CHECK_FALSE(e.apply("k", 10, "k10", -1, 0));
    CHECK_FALSE(e.apply("k", 20, "k20", -1, 0));
    CHECK_FALSE(e.apply("j", 10, "j10", -1, 0));
    CHECK(e.apply("k", 10, "k10 again", -1, 0));
    CHECK(e.apply("k", 20, std::nullopt, -1, 0));
    CHECK(row_of(e.find_as_of("k", 15)) == "k10 again");
    CHECK(row_of(e.find_as_of("k", 25)) == "<none>");
  }
}

TEST_CASE("JoinEngine: take_changes gives rows, offsets and waiting records", "[join]") {
  FakeClock clock;
  JoinEngine e(JoinMode::kLookup, true, 0, 0, clock);
  e.set_tracking(true);
  e.apply("a", 100, R"({"a":1})", 0, 11);
  e.apply("b", 150, R"({"b":1})", 1, 5);
  std::string binary("\xff\x00k", 3);
  e.apply(binary, 120, "bin", 0, 12);
  e.apply("dir/é", 130, "slash", 0, 13);
  e.skip(2, 7);  // read past records without keys, no time yet
  e.hold(90, 3, "in.ndjson", R"({"k":1})");
  e.hold(95, 4, "in.ndjson", R"({"k":2})");

  StateChanges c;
  e.take_changes(c);
  CHECK(puts_of(c) == std::map<std::string, std::string>{
                          {"r/a", R"({"a":1})"},
                          {"r/b", R"({"b":1})"},
                          {"rx/ff006b", "bin"},
                          {"r/dir/é", "slash"},
                          {"o/0", "13,130"},
                          {"o/1", "5,150"},
                          {"o/2", "7,"},
                          {"q/0000000000000001", R"(90,3,9,in.ndjson{"k":1})"},
                          {"q/0000000000000002", R"(95,4,9,in.ndjson{"k":2})"},
                      });
  CHECK(c.put.size() == 9);
  CHECK(c.removed.empty());

  // Nothing changed since: nothing to save.
  StateChanges none;
  e.take_changes(none);
  CHECK(none.empty());

  // A row deleted is an entry removed; a waiting record joined is too.
  e.apply("a", 200, std::nullopt, 0, 14);
  e.apply(binary, 210, "bin2", 0, 15);
  e.pop_front();
  StateChanges d;
  e.take_changes(d);
  CHECK(puts_of(d) == std::map<std::string, std::string>{{"rx/ff006b", "bin2"}, {"o/0", "15,210"}});
  CHECK(removed_of(d) == std::set<std::string>{"r/a", "q/0000000000000001"});

  // A record held and joined between checkpoints never reaches the store.
  e.hold(300, 9, "x", "y");
  e.pop_front();  // the second record
  e.pop_front();  // the one just held
  StateChanges p;
  e.take_changes(p);
  CHECK(p.put.empty());
  CHECK(removed_of(p) == std::set<std::string>{"q/0000000000000002"});
}

TEST_CASE("JoinEngine: as-of rows are saved as their versions", "[join]") {
  FakeClock clock;
  JoinEngine e(JoinMode::kAsOf, true, 0, 0, clock);
  e.set_tracking(true);
  e.apply("k", 20, "k20", 3, 1);
  e.apply("k", 10, "k,10", 3, 2);
  e.apply("k", 30, std::nullopt, 3, 3);
  e.apply(std::string("\x80", 1), 5, "x", 3, 4);
  StateChanges c;
  e.take_changes(c);
  // The partition's newest time is the newest read, not the last.
  CHECK(puts_of(c) == std::map<std::string, std::string>{{"v/k", "-;10,4,k,10;20,3,k20;30,-1,"},
                                                         {"vx/80", "-;5,1,x"},
                                                         {"o/3", "4,30"}});
}

TEST_CASE("JoinEngine: without tracking or without persisted rows, less is kept", "[join]") {
  FakeClock clock;
  SECTION("not tracking: nothing") {
    JoinEngine e(JoinMode::kLookup, true, 0, 0, clock);
    e.apply("a", 1, "r", 0, 1);
    e.hold(1, 1, "i", "t");
    StateChanges c;
    e.take_changes(c);
    CHECK(c.empty());
  }
  SECTION("rows not persisted: only offsets and waiting records") {
    JoinEngine e(JoinMode::kLookup, false, 0, 0, clock);
    e.set_tracking(true);
    e.apply("a", 1, "r", -1, 0);
    e.apply("b", 2, "r", 0, 8);
    e.hold(1, 1, "i", "t");
    StateChanges c;
    e.take_changes(c);
    CHECK(puts_of(c) ==
          std::map<std::string, std::string>{{"o/0", "8,2"}, {"q/0000000000000001", "1,1,1,it"}});
    CHECK(c.removed.empty());
  }
}

// A lookup engine with rows, offsets and waiting records, its snapshots
// taken along the way into `store`.
void fill_lookup(JoinEngine& e, Store& store) {
  e.add_partition(0);
  e.add_partition(1);
  e.add_partition(2);
  for (int i = 0; i < 500; ++i)
    e.apply(fmt::format("k{}", i), 1000 + i, fmt::format("r{}", i), i % 2, i);
  e.apply(std::string("\xfe\xff", 2), 1600, "binary", 0, 500);
  e.apply("semi;colon,comma/slash", 1601, "odd;row,", 1, 501);
  e.hold(10, 1, "a.ndjson", "line one");
  e.hold(11, 2, "a.ndjson", "line two");
  store.take(e);
  for (int i = 0; i < 500; i += 5) e.apply(fmt::format("k{}", i), 2000, std::nullopt, 0, 1000 + i);
  for (int i = 1; i < 500; i += 5) e.apply(fmt::format("k{}", i), 2100, "replaced", 1, 2000 + i);
  e.pop_front();
  for (int i = 3; i <= 40; ++i) e.hold(20 + i, i, "b.ndjson", fmt::format("line {}", i));
  e.pop_front();
  e.hold(99, 41, "", "");  // an empty line from an unnamed input
  store.take(e);
}

TEST_CASE("JoinEngine: a snapshot restores the same engine", "[join]") {
  FakeClock clock;
  JoinEngine a(JoinMode::kLookup, true, 50, 0, clock);
  a.set_tracking(true);
  Store store;
  fill_lookup(a, store);
  CHECK(store.live.count("rx/feff") == 1);
  CHECK(store.live.count("r/k0") == 0);
  CHECK(store.live.count("q/0000000000000001") == 0);

  JoinEngine b(JoinMode::kLookup, true, 50, 0, clock);
  b.set_tracking(true);
  store.restore(b);
  CHECK(b.rows() == a.rows());
  for (int i = 0; i < 500; ++i) {
    std::string k = fmt::format("k{}", i);
    INFO(k);
    REQUIRE(b.find(k) == a.find(k));
  }
  CHECK(*b.find(std::string("\xfe\xff", 2)) == "binary");
  CHECK(*b.find("semi;colon,comma/slash") == "odd;row,");
  CHECK_FALSE(b.find("k0"));
  CHECK(*b.find("k1") == "replaced");
  CHECK(b.offsets() == a.offsets());
  // Partitions 0 and 1 hold at their newest times; partition 2 read
  // nothing and was not saved: once known again it holds, as in `a`.
  CHECK(b.table_watermark() == 2000 - 50);
  CHECK(a.table_watermark() == kMinTime);
  b.add_partition(2);
  CHECK(b.table_watermark() == kMinTime);

  REQUIRE(b.pending() == a.pending());
  CHECK(b.pending_bytes() == a.pending_bytes());
  // Restoring saves nothing: the store has it already.
  StateChanges none;
  b.take_changes(none);
  CHECK(none.empty());
  // New records wait after the restored ones, under new names.
  b.hold(500, 42, "c.ndjson", "new");
  StateChanges added = Store{}.take(b);
  REQUIRE(added.put.size() == 1);
  // After the 41 records held before the snapshot.
  CHECK(added.put[0].first == "q/000000000000002a");
  CHECK(store.live.count("q/0000000000000029") == 1);
  // The same records in the same order.
  while (a.has_pending()) {
    REQUIRE(b.has_pending());
    CHECK(b.front().time == a.front().time);
    CHECK(b.front().number == a.front().number);
    CHECK(b.front().input == a.front().input);
    CHECK(b.front().text == a.front().text);
    a.pop_front();
    b.pop_front();
  }
  REQUIRE(b.has_pending());
  CHECK(b.front().text == "new");
  b.pop_front();
  // Joined, the restored records are removed from the store.
  StateChanges removed = Store{}.take(b);
  CHECK(removed.put.empty());
  CHECK(removed.removed.size() == 40);
  size_t saved = 0;
  for (const auto& name : removed.removed) saved += store.live.count(name);
  CHECK(saved == 39);
}

TEST_CASE("JoinEngine: an as-of snapshot restores the same versions", "[join]") {
  FakeClock clock;
  JoinEngine a(JoinMode::kAsOf, true, 0, 0, clock);
  a.set_tracking(true);
  Store store;
  for (int i = 0; i < 100; ++i)
    for (int v = 0; v < 5; ++v)
      a.apply(fmt::format("k{}", i), v * 100 + i,
              v == 3 ? std::nullopt : std::optional<std::string_view>(fmt::format("r{};{}", i, v)),
              v % 3, v * 1000 + i);
  a.apply(std::string("\xc0", 1), 7, "bad utf-8 key", 1, 9999);
  a.hold(250, 1, "s", "waiting");
  store.take(a);
  a.apply("k0", 50, "late", 0, 10'000);
  store.take(a);

  JoinEngine b(JoinMode::kAsOf, true, 0, 0, clock);
  store.restore(b);
  CHECK(b.rows() == 101);
  for (int i = 0; i < 100; ++i)
    for (Millis t : {0, 49, 50, 99, 100, 150, 300, 350, 400, 500}) {
      std::string k = fmt::format("k{}", i);
      INFO(k << " at " << t);
      REQUIRE(row_of(b.find_as_of(k, t + i)) == row_of(a.find_as_of(k, t + i)));
    }
  CHECK(row_of(b.find_as_of("k0", 60)) == "late");
  CHECK(row_of(b.find_as_of("k0", 350)) == "<none>");
  CHECK(row_of(b.find_as_of(std::string("\xc0", 1), 7)) == "bad utf-8 key");
  CHECK(b.offsets() == a.offsets());
  CHECK(b.table_watermark() == a.table_watermark());
  REQUIRE(b.pending() == 1);
  CHECK(b.front().text == "waiting");
}

TEST_CASE("JoinEngine: restored without persisted rows, rows and offsets are ignored", "[join]") {
  FakeClock clock;
  JoinEngine a(JoinMode::kLookup, true, 50, 0, clock);
  a.set_tracking(true);
  Store store;
  fill_lookup(a, store);

  JoinEngine b(JoinMode::kLookup, false, 50, 0, clock);
  store.restore(b);
  CHECK(b.rows() == 0);
  CHECK_FALSE(b.find("k1"));
  CHECK(b.offsets().empty());
  CHECK(b.table_watermark() == kMaxTime);  // no partition restored
  REQUIRE(b.pending() == a.pending());
  while (a.has_pending()) {
    CHECK(b.front().text == a.front().text);
    CHECK(b.front().number == a.front().number);
    a.pop_front();
    b.pop_front();
  }
}

TEST_CASE("JoinEngine: malformed saved state is refused", "[join]") {
  FakeClock clock;
  JoinEngine lookup(JoinMode::kLookup, true, 0, 0, clock);
  JoinEngine asof(JoinMode::kAsOf, true, 0, 0, clock);
  auto refused = [](JoinEngine& e, std::string_view key, std::string_view value) {
    Status s = e.restore_entry(key, value);
    INFO("entry '" << key << "' = '" << value << "'");
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().status == ExitStatus::kDataError);
  };
  refused(lookup, "nokey", "x");
  refused(lookup, "z/a", "x");
  refused(lookup, "v/a", "-;1,1,x");  // another mode's rows
  refused(asof, "r/a", "x");
  refused(lookup, "rx/abc", "x");  // odd hex
  refused(lookup, "rx/zz", "x");
  refused(asof, "v/a", "2;");
  refused(lookup, "o/x", "1,");
  refused(lookup, "o/1", "5");
  refused(lookup, "o/1", "5,x");
  refused(lookup, "q/zz", "1,1,0,");
  refused(lookup, "q/1", "1,1,5,abc");
  refused(lookup, "q/1", "1,1");
  CHECK(lookup.restore_entry("q/1", "1,1,0,").ok());
  CHECK(lookup.restore_entry("o/-1", "3,").ok());
}

TEST_CASE("JoinEngine: the table replaced whole", "[join]") {
  FakeClock clock;
  JoinEngine e(JoinMode::kLookup, false, 0, 0, clock);
  e.set_whole(true);
  e.apply("old", 0, "o", -1, 0);
  e.apply("both", 0, "b1", -1, 0);
  JoinEngine fresh(JoinMode::kLookup, false, 0, 0, clock);
  fresh.apply("new", 0, "n", -1, 0);
  fresh.apply("both", 0, "b2", -1, 0);
  e.replace_table(fresh);
  CHECK_FALSE(e.find("old"));
  CHECK(*e.find("new") == "n");
  CHECK(*e.find("both") == "b2");
  CHECK(e.rows() == 2);
  CHECK(fresh.rows() == 0);
}

TEST_CASE("JoinEngine: maybe_prune forgets what no record can need", "[join]") {
  FakeClock clock;
  SECTION("after enough versions, up to the stream's bound") {
    JoinEngine e(JoinMode::kAsOf, true, 0, 0, clock);
    e.set_tracking(true);
    for (Millis t = 0; t < 1100; ++t) e.apply("k", t, fmt::format("r{}", t), -1, 0);
    e.apply("other", 10, "o", -1, 0);
    Store store;
    store.take(e);
    e.maybe_prune(500);
    CHECK(e.find_as_of("k", 499).pruned);
    CHECK_FALSE(e.find_as_of("k", 499).row);
    CHECK(row_of(e.find_as_of("k", 500)) == "r500");
    CHECK_FALSE(e.find_as_of("k", 500).pruned);
    CHECK(row_of(e.find_as_of("k", 2000)) == "r1099");
    CHECK(row_of(e.find_as_of("other", 10)) == "o");  // one version: kept
    // The pruned key is saved again; the other is not.
    StateChanges c = store.take(e);
    REQUIRE(c.put.size() == 1);
    CHECK(c.put[0].first == "v/k");
    CHECK(c.put[0].second.substr(0, 15) == "499;500,4,r500;");
    // Right after, too few versions were added to prune again.
    e.maybe_prune(900);
    CHECK_FALSE(e.find_as_of("k", 600).pruned);
    CHECK(row_of(e.find_as_of("k", 600)) == "r600");
  }
  SECTION("too few versions: nothing yet") {
    JoinEngine e(JoinMode::kAsOf, true, 0, 0, clock);
    for (Millis t = 0; t < 1000; ++t) e.apply("k", t, "r", -1, 0);
    e.maybe_prune(kMaxTime);
    CHECK_FALSE(e.find_as_of("k", 0).pruned);
    CHECK(row_of(e.find_as_of("k", 0)) == "r");
  }
  SECTION("waiting records keep what they need") {
    JoinEngine e(JoinMode::kAsOf, true, 0, 0, clock);
    for (Millis t = 0; t < 1100; ++t) e.apply("k", t, fmt::format("r{}", t), -1, 0);
    e.hold(300, 1, "in", "waits");
    e.hold(200, 2, "in", "waits too");
    e.maybe_prune(500);
    CHECK(e.find_as_of("k", 199).pruned);
    CHECK(row_of(e.find_as_of("k", 200)) == "r200");
    CHECK(row_of(e.find_as_of("k", 300)) == "r300");
  }
  SECTION("a lookup table has nothing to prune") {
    JoinEngine e(JoinMode::kLookup, true, 0, 0, clock);
    for (int i = 0; i < 2000; ++i) e.apply("k", i, fmt::format("r{}", i), -1, 0);
    e.maybe_prune(kMaxTime);
    CHECK(*e.find("k") == "r1999");
  }
}

// An instance's queue of one source partition (kpipe(7), MANY INSTANCES):
// saved and restored as a JoinEngine's waiting records are, under the same
// names, and holding only "q/" entries.
TEST_CASE("PendingQueue: an instance's queue of a partition is saved and restored alone",
          "[join]") {
  PendingQueue a;
  a.set_tracking(true);
  a.hold(300, 1, "-", "first", 1);
  a.hold(100, 2, "-", "second", 5);
  CHECK(a.oldest() == 100);
  CHECK(a.front().arrival == 1);
  Store store;
  store.take(a);
  a.pop_front();
  a.hold(200, 3, "-", "third", 9);
  store.take(a);
  CHECK(store.live.count("q/0000000000000001") == 0);
  CHECK(store.live.count("q/0000000000000002") == 1);
  CHECK(store.live.count("q/0000000000000003") == 1);

  PendingQueue b;
  b.set_tracking(true);
  store.restore(b);
  REQUIRE(b.size() == 2);
  CHECK(b.bytes() == a.bytes());
  // Restored records came before all the run reads.
  CHECK(b.front().arrival == 0);
  CHECK(b.front().text == "second");
  b.pop_front();
  CHECK(b.front().text == "third");
  CHECK(PendingQueue().oldest() == kMaxTime);
  // A table's entry is no queue's.
  CHECK_FALSE(b.restore_entry("r/k1", "row").ok());
}

TEST_CASE("JoinEngine: tracking turned off forgets what changed (an instance saves no table)",
          "[join]") {
  FakeClock clock;
  JoinEngine e(JoinMode::kLookup, true, 0, 0, clock);
  e.set_tracking(true);
  e.add_partition(0);
  e.apply("k", 1, "row", 0, 1);
  e.hold(1, 1, "-", "line");
  e.set_tracking(false);
  e.apply("j", 2, "row", 0, 2);
  StateChanges none;
  e.take_changes(none);
  CHECK(none.empty());
  CHECK(e.rows() == 2);
}

// A Kinesis stream as the table (kjoin(1), Tables): each shard's position is
// a sequence number, kept digit for digit (or "@" and a time, before the
// shard gives a record); an offset saved by an older kjoin reads back as
// one.
TEST_CASE("JoinEngine: a table shard's sequence number is saved and restored whole", "[join]") {
  FakeClock clock;
  const std::string seq = "49590338271490256608559692538361571095921575989136588898";
  JoinEngine e(JoinMode::kLookup, true, 0, 0, clock);
  e.set_tracking(true);
  e.apply("a", 100, R"({"a":1})", 3, *Position::sequence(seq));
  e.skip(4, Position::arrived_at(1764412345123));
  Store store;
  StateChanges c = store.take(e);
  CHECK(puts_of(c).at("o/3") == seq + ",100");
  CHECK(puts_of(c).at("o/4") == "@1764412345123,");
  JoinEngine back(JoinMode::kLookup, true, 0, 0, clock);
  store.restore(back);
  CHECK(back.offsets() == std::map<int32_t, Position>{{3, *Position::sequence(seq)},
                                                      {4, Position::arrived_at(1764412345123)}});
  JoinEngine old(JoinMode::kLookup, true, 0, 0, clock);
  REQUIRE(old.restore_entry("o/0", "13,130").ok());
  CHECK(old.offsets() == std::map<int32_t, Position>{{0, 13}});
  CHECK_FALSE(old.restore_entry("o/0", "x13,130").ok());
  CHECK_FALSE(old.restore_entry("o/0", "13").ok());
}

// A shard closed and read to its end holds the table's watermark no
// longer; the others still do.
TEST_CASE("JoinEngine: a closed table partition holds the watermark no longer", "[join]") {
  FakeClock clock;
  JoinEngine e(JoinMode::kAsOf, true, 0, 0, clock);
  e.add_partition(0);
  e.add_partition(1);
  e.apply("a", 100, "a", 0, 1);
  e.apply("b", 500, "b", 1, 1);
  CHECK(e.table_watermark() == 100);
  e.close_partition(0);
  CHECK(e.table_watermark() == 500);
}

}  // namespace
}  // namespace kpipe
