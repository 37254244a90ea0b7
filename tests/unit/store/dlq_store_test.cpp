#include "kpipe/store/dlq_store.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <random>
#include <set>
#include <string>

#include "dead_letter_rows.h"
#include "helpers.h"

using namespace kpipe;
using kpipe::test::dead_letter_rows;
using kpipe::test::TempDir;

namespace {

DeadLetter letter(std::string_view payload, std::string stage = "kdedup") {
  DeadLetter d;
  d.at = 1795947330123;
  d.stage = std::move(stage);
  d.reason = "line 3: field '.value.ts' is missing";
  d.input = "<stdin>";
  d.line = 3;
  d.payload = payload;
  return d;
}

}  // namespace

TEST_CASE("DlqStore: a new store is a 0600 file at the newest schema version", "[dlq]") {
  TempDir dir;
  std::string path = dir.file("dlq.db");
  mode_t old = ::umask(0);
  auto store = DlqStore::open(path);
  ::umask(old);
  REQUIRE(store.ok());
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(*(*store)->db().schema_version("dlq") == 4);
  CHECK((*store)->path() == path);
  CHECK(dead_letter_rows(path).empty());
}

TEST_CASE("DlqStore: rows are durable when add returns, payload bytes exact", "[dlq]") {
  TempDir dir;
  std::string path = dir.file("dlq.db");
  auto store = DlqStore::open(path);
  REQUIRE(store.ok());
  std::string binary = test::bytes("not \xff UTF-8 \x00 with a NUL\r");
  REQUIRE((*store)->add(letter(binary)).ok());
  auto r = dead_letter_rows(path);
  REQUIRE(r.size() == 1);
  CHECK(r[0].payload == binary);
  CHECK(r[0].payload_type == Statement::Type::kBlob);
  CHECK(r[0].at == 1795947330123);
  CHECK(r[0].stage == "kdedup");
  CHECK(r[0].reason == "line 3: field '.value.ts' is missing");
  CHECK(r[0].input == "<stdin>");
  CHECK(r[0].line == 3);
  CHECK_FALSE(r[0].topic);
  CHECK_FALSE(r[0].partition);
  CHECK_FALSE(r[0].offset);
}

TEST_CASE("DlqStore: a line from the same stage and source position is stored once", "[dlq]") {
  TempDir dir;
  std::string path = dir.file("dlq.db");
  auto store = DlqStore::open(path);
  REQUIRE(store.ok());
  DeadLetter d = letter("{\"topic\":\"events\",\"partition\":2,\"offset\":9,\"value\":1}");
  d.source = SourcePosition{"events", 2, 9};
  REQUIRE((*store)->add(d).ok());
  REQUIRE((*store)->add(d).ok());  // a replay after a crash
  DeadLetter other_stage = d;
  other_stage.stage = "kwindow";
  REQUIRE((*store)->add(other_stage).ok());
  DeadLetter other_offset = d;
  other_offset.source->offset = 10;
  REQUIRE((*store)->add(other_offset).ok());
  DeadLetter plain = letter("not an envelope");
  REQUIRE((*store)->add(plain).ok());
  REQUIRE((*store)->add(plain).ok());  // without a position there is nothing to match on
  auto r = dead_letter_rows(path);
  REQUIRE(r.size() == 5);
  CHECK(r[0].topic == "events");
  CHECK(r[0].partition == 2);
  CHECK(r[0].offset == 9);
  CHECK(r[1].stage == "kwindow");
  CHECK(r[2].offset == 10);
  CHECK(r[3].payload == "not an envelope");
  CHECK(r[4].payload == "not an envelope");
}

TEST_CASE("DlqStore: the store survives reopening", "[dlq]") {
  TempDir dir;
  std::string path = dir.file("dlq.db");
  {
    auto store = DlqStore::open(path);
    REQUIRE(store.ok());
    REQUIRE((*store)->add(letter("a")).ok());
  }
  auto again = DlqStore::open(path, DlqStore::Mode::kExisting);
  REQUIRE(again.ok());
  REQUIRE((*again)->add(letter("b")).ok());
  auto r = dead_letter_rows(path);
  REQUIRE(r.size() == 2);
  CHECK(r[0].payload == "a");
  CHECK(r[1].payload == "b");
}

TEST_CASE("DlqStore: kdlq's opening needs an existing store", "[dlq]") {
  TempDir dir;
  std::string path = dir.file("none.db");
  auto store = DlqStore::open(path, DlqStore::Mode::kExisting);
  REQUIRE_FALSE(store.ok());
  CHECK(store.error().message == "dead-letter store '" + path + "' does not exist");
  struct stat st;
  CHECK(::stat(path.c_str(), &st) != 0);  // and does not create it
}

TEST_CASE("DlqStore: a file that is not a database is named as no dead-letter store", "[dlq]") {
  TempDir dir;
  std::string path = dir.write("notes.db", "meeting notes\n");
  for (auto mode : {DlqStore::Mode::kCreate, DlqStore::Mode::kExisting}) {
    auto store = DlqStore::open(path, mode);
    REQUIRE_FALSE(store.ok());
    CHECK(store.error().message == "'" + path + "' is not a dead-letter store");
  }
  CHECK(kpipe::test::read_file(path) == "meeting notes\n");
}

TEST_CASE("make_store_sink writes, syncs and names the store", "[dlq]") {
  TempDir dir;
  std::string path = dir.file("dlq.db");
  auto store = DlqStore::open(path);
  REQUIRE(store.ok());
  auto sink = make_store_sink(std::move(*store));
  CHECK(sink->describe() == path);
  REQUIRE(sink->write(letter("x")).ok());
  CHECK(dead_letter_rows(path).empty());
  REQUIRE(sink->sync().ok());
  CHECK(dead_letter_rows(path).size() == 1);
}

namespace kpipe {
namespace {

using namespace std::string_literals;
using kpipe::test::TempDir;

std::unique_ptr<DlqStore> open_store(const std::string& path,
                                     DlqStore::Mode mode = DlqStore::Mode::kCreate) {
  auto s = DlqStore::open(path, mode);
  if (!s) FAIL(s.error().message);
  return std::move(*s);
}

DeadLetter letter(std::string_view payload, Millis at = 1000, std::string stage = "kdedup",
                  std::optional<SourcePosition> source = std::nullopt) {
  DeadLetter d;
  d.at = at;
  d.stage = std::move(stage);
  d.reason = "line 1: field '.ts' is missing";
  d.input = "<stdin>";
  d.line = 1;
  d.source = std::move(source);
  d.payload = payload;
  return d;
}

std::vector<DlqEntry> all(DlqStore& store, DlqFilter filter = {}) {
  std::vector<DlqEntry> out;
  Status s = store.scan(filter, 0, true, [&](const DlqEntry& e) -> Status {
    out.push_back(e);
    return {};
  });
  if (!s.ok()) FAIL(s.error().message);
  return out;
}

TEST_CASE("the store keeps each line byte for byte with its context", "[dlq_store]") {
  auto store = open_store(":memory:");
  std::vector<std::string> payloads = {"{\"a\":", "\xff\xfe binary", "nul\0inside\0"s,
                                       std::string(100000, 'x')};
  std::vector<DeadLetter> letters;
  for (const auto& p : payloads) letters.push_back(letter(p));
  letters[1].source = SourcePosition{"events", 2, 40};
  REQUIRE(store->add(letters).ok());
  auto got = all(*store);
  REQUIRE(got.size() == payloads.size());
  for (size_t i = 0; i < payloads.size(); ++i) {
    CHECK(got[i].payload == payloads[i]);
    CHECK(got[i].id == static_cast<int64_t>(i + 1));
    CHECK(got[i].stage == "kdedup");
    CHECK(got[i].reason == "line 1: field '.ts' is missing");
    CHECK(got[i].input == "<stdin>");
    CHECK(got[i].line == 1);
    CHECK(got[i].failures == 1);
    CHECK_FALSE(got[i].replayed);
  }
  REQUIRE(got[1].source);
  CHECK(got[1].source->topic == "events");
  CHECK(got[1].source->partition == 2);
  CHECK(got[1].source->offset == 40);
  CHECK_FALSE(got[0].source);
}

TEST_CASE(
    "a pending line from the same source and stage is one entry; a replayed one gets a successor",
    "[dlq_store]") {
  auto store = open_store(":memory:");
  SourcePosition at{"events", 0, 7};
  REQUIRE(store->add(letter("v1", 1000, "kdedup", at)).ok());
  DeadLetter again = letter("v1", 2000, "kdedup", at);
  again.reason = "line 9: not valid JSON: empty";
  REQUIRE(store->add(again).ok());
  // The same line in another stage is another entry; lines without a
  // source are never merged.
  REQUIRE(store->add(letter("v1", 1000, "kwindow", at)).ok());
  REQUIRE(store->add(letter("plain")).ok());
  REQUIRE(store->add(letter("plain")).ok());
  auto got = all(*store);
  REQUIRE(got.size() == 4);
  CHECK(got[0].payload == "v1");
  CHECK(got[0].failures == 2);
  CHECK(got[0].at == 2000);
  CHECK(got[0].reason == "line 9: not valid JSON: empty");

  REQUIRE(store->mark_replayed({{got[0].id, 2}}, 3000).ok());
  REQUIRE(store->add(letter("v1", 4000, "kdedup", at)).ok());
  got = all(*store);
  REQUIRE(got.size() == 5);
  CHECK(got[0].replayed_at == 3000);
  CHECK(got[4].payload == "v1");
  CHECK(got[4].failures == 1);
  CHECK_FALSE(got[4].replayed);
}

TEST_CASE("two different dead letters from one source position are two entries, each kept whole",
          "[dlq_store]") {
  // A topic deleted and made again, or two clusters writing one store:
  // the same topic, partition and offset, another record. Merging them
  // overwrote the first payload.
  auto store = open_store(":memory:");
  SourcePosition at{"ev", 0, 5};
  REQUIRE(store->add(letter(R"({"a":"first"})", 1000, "kdlq", at)).ok());
  REQUIRE(store->add(letter(R"({"a":"second"})", 2000, "kdlq", at)).ok());
  // The first, failing again.
  REQUIRE(store->add(letter(R"({"a":"first"})", 3000, "kdlq", at)).ok());
  // Both in one batch, as a sink writes them.
  REQUIRE(store
              ->add({letter("x", 4000, "kdlq", SourcePosition{"ev", 1, 5}),
                     letter("y", 4000, "kdlq", SourcePosition{"ev", 1, 5})})
              .ok());
  auto got = all(*store);
  REQUIRE(got.size() == 4);
  CHECK(got[0].payload == R"({"a":"first"})");
  CHECK(got[0].failures == 2);
  CHECK(got[0].at == 3000);
  CHECK(got[1].payload == R"({"a":"second"})");
  CHECK(got[1].failures == 1);
  CHECK(got[2].payload == "x");
  CHECK(got[3].payload == "y");
}

TEST_CASE("an entry whose line failed again while its replay was acknowledged stays pending",
          "[dlq_store]") {
  // kdlq replay | kdedup --dlq same.db: the line may fail again before
  // kdlq marks it. The mark carries the failure count kdlq read.
  auto store = open_store(":memory:");
  SourcePosition at{"events", 0, 7};
  REQUIRE(store->add(letter("v1", 1000, "kdedup", at)).ok());
  auto read = all(*store);
  REQUIRE(store->add(letter("v1", 1500, "kdedup", at)).ok());  // fails again
  REQUIRE(store->mark_replayed({{read[0].id, *read[0].failures}}, 2000).ok());
  auto got = all(*store);
  REQUIRE(got.size() == 1);
  CHECK_FALSE(got[0].replayed);
  CHECK(got[0].failures == 2);
}

// Random entries and random filters: the SQL the store runs selects what
// DlqFilter::matches (the Kafka store's filter) selects.
TEST_CASE("the store's SQL filters agree with DlqFilter::matches", "[dlq_store]") {
  auto store = open_store(":memory:");
  std::mt19937 rng(7);
  const std::vector<std::string> stages = {"kdedup",  "kdedup/a", "kdedup/b",
                                           "kdedupx", "kwindow",  "kdedup/"};
  const std::vector<std::string> reasons = {"line 1: field '.ts' is missing",
                                            "line 2: not valid JSON: empty", "late by 5s",
                                            "caf\xc3\xa9 %_ like"};
  const std::vector<std::string> topics = {"", "events", "events2"};
  std::vector<DeadLetter> letters;
  std::vector<std::string> payloads(300);
  for (size_t i = 0; i < payloads.size(); ++i) {
    payloads[i] = "p" + std::to_string(i);
    DeadLetter d =
        letter(payloads[i], static_cast<Millis>(rng() % 100), stages[rng() % stages.size()]);
    d.reason = reasons[rng() % reasons.size()];
    const std::string& t = topics[rng() % topics.size()];
    if (!t.empty()) d.source = SourcePosition{t, 0, static_cast<int64_t>(i)};
    letters.push_back(d);
  }
  REQUIRE(store->add(letters).ok());
  auto everything = all(*store);
  std::vector<DlqStore::Delivered> replay;
  for (const auto& e : everything)
    if (rng() % 3 == 0) replay.push_back({e.id, 1});
  REQUIRE(store->mark_replayed(replay, 50).ok());
  everything = all(*store);

  for (int round = 0; round < 300; ++round) {
    DlqFilter f;
    if (rng() % 2)
      f.stage = std::vector<std::string>{"kdedup", "kdedup/a", "kdedu", "kwindow", "x"}[rng() % 5];
    if (rng() % 2)
      f.reason =
          std::vector<std::string>{"'.ts'", "empty", "%", "_", "\xc3\xa9", "LATE"}[rng() % 6];
    if (rng() % 3 == 0)
      f.source_topic = std::vector<std::string>{"events", "events2", "event"}[rng() % 3];
    if (rng() % 3 == 0) f.since = static_cast<Millis>(rng() % 100);
    if (rng() % 3 == 0) f.until = static_cast<Millis>(rng() % 100);
    f.pending_only = rng() % 2;
    std::vector<int64_t> want, got;
    for (const auto& e : everything)
      if (f.matches(e)) want.push_back(e.id);
    for (const auto& e : all(*store, f)) got.push_back(e.id);
    INFO("round " << round << " stage '" << f.stage << "' reason '" << f.reason << "' topic '"
                  << f.source_topic << "'");
    REQUIRE(got == want);
  }
}

TEST_CASE("scan reads in pages and stops at the limit", "[dlq_store]") {
  auto store = open_store(":memory:");
  std::vector<std::string> payloads(2500);
  std::vector<DeadLetter> letters;
  for (size_t i = 0; i < payloads.size(); ++i) {
    payloads[i] = std::to_string(i);
    letters.push_back(letter(payloads[i]));
  }
  REQUIRE(store->add(letters).ok());
  CHECK(all(*store).size() == 2500);
  std::vector<int64_t> ids;
  REQUIRE(store
              ->scan({}, 1234, false,
                     [&](const DlqEntry& e) -> Status {
                       ids.push_back(e.id);
                       CHECK(e.payload.empty());  // not read when not asked for
                       return {};
                     })
              .ok());
  REQUIRE(ids.size() == 1234);
  CHECK(ids.front() == 1);
  CHECK(ids.back() == 1234);
  CHECK(*store->max_id() == 2500);
}

TEST_CASE("purge deletes replayed entries, old ones, or entries both replayed and old",
          "[dlq_store]") {
  auto store = open_store(":memory:");
  for (Millis at : {100, 200, 300, 400}) REQUIRE(store->add(letter("x", at)).ok());
  REQUIRE(store->mark_replayed({{1, 1}, {3, 1}}, 500).ok());
  CHECK(*store->purge(true, std::nullopt, true) == 2);
  CHECK(*store->purge(false, Millis{250}, true) == 2);
  CHECK(*store->purge(true, Millis{250}, true) == 1);
  CHECK(all(*store).size() == 4);  // dry runs delete nothing
  CHECK(*store->purge(true, Millis{250}, false) == 1);
  auto left = all(*store);
  REQUIRE(left.size() == 3);
  CHECK(left[0].id == 2);
  CHECK(*store->purge(true, std::nullopt, false) == 1);
  CHECK(*store->purge(false, Millis{1000}, false) == 2);
  CHECK(all(*store).empty());
}

TEST_CASE("reset for --again makes replayed entries pending, within the filter and the limit",
          "[dlq_store]") {
  auto store = open_store(":memory:");
  for (int i = 0; i < 5; ++i) REQUIRE(store->add(letter("x", 100 + i)).ok());
  REQUIRE(store->mark_replayed({{1, 1}, {2, 1}, {3, 1}, {5, 1}}, 500).ok());
  DlqFilter f;
  f.since = 101;
  // The first two entries matching are 2 and 3 (4 is pending already).
  CHECK(*store->reset_replayed(f, 5, 2) == 2);
  auto got = all(*store);
  CHECK(got[0].replayed);
  CHECK_FALSE(got[1].replayed);
  CHECK_FALSE(got[2].replayed);
  CHECK(got[4].replayed);
  CHECK(*store->reset_replayed({}, 4, 0) == 1);  // 5 lies beyond the largest id given
  got = all(*store);
  CHECK_FALSE(got[0].replayed);
  CHECK(got[4].replayed);

  SECTION("an entry with a pending successor stays replayed") {
    auto s = open_store(":memory:");
    SourcePosition at{"events", 0, 1};
    REQUIRE(s->add(letter("old", 1, "kdedup", at)).ok());
    REQUIRE(s->mark_replayed({{1, 1}}, 2).ok());
    REQUIRE(s->add(letter("old", 3, "kdedup", at)).ok());
    CHECK(*s->reset_replayed({}, 0, 0) == 0);
    auto entries = all(*s);
    CHECK(entries[0].replayed);
    CHECK_FALSE(entries[1].replayed);
  }

  SECTION("another line from the same position is no successor") {
    auto s = open_store(":memory:");
    SourcePosition at{"events", 0, 1};
    REQUIRE(s->add(letter("old", 1, "kdedup", at)).ok());
    REQUIRE(s->mark_replayed({{1, 1}}, 2).ok());
    REQUIRE(s->add(letter("new", 3, "kdedup", at)).ok());
    CHECK(*s->reset_replayed({}, 0, 0) == 1);
    auto entries = all(*s);
    CHECK_FALSE(entries[0].replayed);
    CHECK_FALSE(entries[1].replayed);
  }
}

TEST_CASE("a batch in flight is in doubt until settled", "[dlq_store]") {
  auto store = open_store(":memory:");
  for (int i = 0; i < 4; ++i) REQUIRE(store->add(letter("x")).ok());
  auto batch = store->begin_batch("kafka:fixed", "[[0,5]]", {1, 2, 3}, 900);
  REQUIRE(batch.ok());
  auto doubts = store->in_doubt();
  REQUIRE(doubts.ok());
  REQUIRE(doubts->size() == 1);
  CHECK((*doubts)[0].target == "kafka:fixed");
  CHECK((*doubts)[0].mark == "[[0,5]]");
  CHECK((*doubts)[0].ids == std::vector<int64_t>{1, 2, 3});
  DlqStore::Page page;
  page.exclude_in_doubt = true;
  auto free = store->fetch({}, page);
  REQUIRE(free->size() == 1);
  CHECK((*free)[0].id == 4);

  REQUIRE(store->settle((*doubts)[0], {1, 3}, 1000).ok());
  auto got = all(*store);
  CHECK(got[0].replayed_at == 1000);
  CHECK_FALSE(got[1].replayed);
  CHECK(got[2].replayed_at == 1000);
  CHECK(store->in_doubt()->empty());
  CHECK(store->fetch({}, page)->size() == 4);
}

TEST_CASE("a store written by schema v1 is migrated with its entries", "[dlq_store]") {
  TempDir dir;
  std::string path = dir.file("old.db");
  {
    auto db = Database::open(path);
    REQUIRE(db.ok());
    // v1 exactly as it shipped, with an entry.
    REQUIRE(
        (*db)
            ->exec(
                "CREATE TABLE kpipe_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL);"
                "INSERT INTO kpipe_schema VALUES ('dlq', 1);"
                "CREATE TABLE dead_letters (id INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT "
                "NULL,"
                " stage TEXT NOT NULL, reason TEXT NOT NULL, input TEXT, line INTEGER, "
                "source_topic TEXT,"
                " source_partition INTEGER, source_offset INTEGER, payload BLOB NOT NULL, "
                "replayed_at INTEGER);"
                "CREATE UNIQUE INDEX dead_letters_source ON dead_letters"
                " (stage, source_topic, source_partition, source_offset) WHERE source_topic IS NOT "
                "NULL;"
                "CREATE INDEX dead_letters_at ON dead_letters (at);"
                "INSERT INTO dead_letters (at, stage, reason, payload, source_topic, "
                "source_partition,"
                " source_offset, replayed_at) VALUES (5, 'kdedup', 'line 1: r', x'00ff', 'events', "
                "0, 1, 6);")
            .ok());
  }
  auto store = open_store(path, DlqStore::Mode::kExisting);
  CHECK(*store->db().schema_version("dlq") == 4);
  auto got = all(*store);
  REQUIRE(got.size() == 1);
  CHECK(got[0].payload == "\x00\xff"s);
  CHECK(got[0].failures == 1);
  CHECK(got[0].replayed_at == 6);
  auto id = store->store_id();
  REQUIRE(id.ok());
  CHECK(id->size() == 16);
  // v2's rule: the replayed entry's line failing again is a new entry.
  REQUIRE(store->add(letter("again", 7, "kdedup", SourcePosition{"events", 0, 1})).ok());
  CHECK(all(*store).size() == 2);
}

TEST_CASE("a store written by schema v2 is migrated: pending entries merge by line",
          "[dlq_store]") {
  TempDir dir;
  std::string path = dir.file("v2.db");
  {
    auto db = Database::open(path);
    REQUIRE(db.ok());
    // v1 then v2 exactly as they shipped, with a pending entry from a
    // source position, a replayed one from the same position, and one
    // without a position.
    REQUIRE((*db)
                ->exec(R"sql(
      CREATE TABLE kpipe_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL);
      INSERT INTO kpipe_schema VALUES ('dlq', 2);
      CREATE TABLE dead_letters (id INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL,
        stage TEXT NOT NULL, reason TEXT NOT NULL, input TEXT, line INTEGER, source_topic TEXT,
        source_partition INTEGER, source_offset INTEGER, payload BLOB NOT NULL,
        replayed_at INTEGER, failures INTEGER NOT NULL DEFAULT 1, replay_batch INTEGER);
      CREATE INDEX dead_letters_at ON dead_letters (at);
      CREATE UNIQUE INDEX dead_letters_pending_source ON dead_letters
        (stage, source_topic, source_partition, source_offset)
        WHERE source_topic IS NOT NULL AND replayed_at IS NULL;
      CREATE INDEX dead_letters_replay_batch ON dead_letters (replay_batch)
        WHERE replay_batch IS NOT NULL;
      CREATE TABLE dead_letter_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      INSERT INTO dead_letter_meta (key, value) VALUES ('store_id', '00112233445566ff');
      CREATE TABLE dead_letter_replays (id INTEGER PRIMARY KEY AUTOINCREMENT,
        target TEXT NOT NULL, started_at INTEGER NOT NULL, mark TEXT NOT NULL);
      INSERT INTO dead_letters (at, stage, reason, payload, source_topic, source_partition,
        source_offset, replayed_at) VALUES (5, 'kdlq', 'line 1: r', 'old', 'ev', 0, 5, 6);
      INSERT INTO dead_letters (at, stage, reason, payload, source_topic, source_partition,
        source_offset, failures) VALUES (7, 'kdlq', 'line 2: r', x'00ff', 'ev', 0, 5, 3);
      INSERT INTO dead_letters (at, stage, reason, payload) VALUES (8, 'kdlq', 'line 3: r', 'p');
    )sql")
                .ok());
  }
  auto store = open_store(path, DlqStore::Mode::kExisting);
  CHECK(*store->db().schema_version("dlq") == 4);
  CHECK(*store->store_id() == "00112233445566ff");
  auto got = all(*store);
  REQUIRE(got.size() == 3);
  CHECK(got[1].payload == "\x00\xff"s);
  CHECK(got[1].failures == 3);
  // The pending entry's line failing again is still that entry: its hash
  // was filled in by the migration.
  SourcePosition at{"ev", 0, 5};
  REQUIRE(store->add(letter("\x00\xff"s, 9, "kdlq", at)).ok());
  got = all(*store);
  REQUIRE(got.size() == 3);
  CHECK(got[1].failures == 4);
  CHECK(got[1].at == 9);
  // Another line from that position is an entry of its own.
  REQUIRE(store->add(letter("other", 10, "kdlq", at)).ok());
  got = all(*store);
  REQUIRE(got.size() == 4);
  CHECK(got[1].payload == "\x00\xff"s);
  CHECK(got[3].payload == "other");
  // The replayed entry made pending again meets its line's pending entry:
  // it stays replayed, as under v2.
  REQUIRE(store->add(letter("old", 11, "kdlq", at)).ok());
  CHECK(*store->reset_replayed({}, 0, 0) == 0);
}

TEST_CASE("kdlq opens only a store that exists", "[dlq_store]") {
  TempDir dir;
  auto missing = DlqStore::open(dir.file("nope.db"), DlqStore::Mode::kExisting);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message ==
        "dead-letter store '" + dir.file("nope.db") + "' does not exist");
  CHECK_FALSE(std::filesystem::exists(dir.file("nope.db")));

  std::string other = dir.file("state.db");
  REQUIRE(Database::open(other).ok());
  REQUIRE((*Database::open(other))->exec("CREATE TABLE t (x)").ok());
  auto wrong = DlqStore::open(other, DlqStore::Mode::kExisting);
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().message == "'" + other + "' is not a dead-letter store");
}

TEST_CASE("the sink keeps dead letters in memory until sync, holding no lock", "[dlq_store]") {
  TempDir dir;
  std::string path = dir.file("bad.db");
  auto reader = open_store(path);
  auto sink = make_store_sink(open_store(path));
  std::string line = "{\"broken\":";
  REQUIRE(sink->write(letter(line)).ok());
  CHECK(all(*reader).empty());
  // Another process writes meanwhile: the store is not locked between syncs.
  REQUIRE(reader->add(letter("from another stage")).ok());
  REQUIRE(sink->sync().ok());
  auto got = all(*reader);
  REQUIRE(got.size() == 2);
  CHECK(got[1].payload == line);

  SECTION("a sink dropped on an error path still writes what it holds") {
    REQUIRE(sink->write(letter("last words")).ok());
    sink.reset();
    CHECK(all(*reader).back().payload == "last words");
  }
}

TEST_CASE("one replay at a time per store", "[dlq_store]") {
  TempDir dir;
  auto store = open_store(dir.file("bad.db"));
  auto first = store->lock_for_replay();
  REQUIRE(first.ok());
  auto second = open_store(dir.file("bad.db"))->lock_for_replay();
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().message == "another kdlq replay is running on '" + dir.file("bad.db") + "'");
  { auto released = std::move(*first); }
  CHECK(store->lock_for_replay().ok());
}

}  // namespace
}  // namespace kpipe
