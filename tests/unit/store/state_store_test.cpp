#include "kpipe/store/state_store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <map>

#include "helpers.h"

using namespace kpipe;

namespace {

// The smallest Snapshottable: a map that records what changed.
class MapEngine final : public Snapshottable {
 public:
  void put(const std::string& k, const std::string& v) {
    map_[k] = v;
    dirty_[k] = true;
  }
  void erase(const std::string& k) {
    map_.erase(k);
    dirty_[k] = false;
  }
  void take_changes(StateChanges& out) override {
    for (auto& [k, present] : dirty_) {
      if (present) {
        out.put.emplace_back(k, map_[k]);
      } else {
        out.removed.push_back(k);
      }
    }
    dirty_.clear();
  }
  Status restore_entry(std::string_view k, std::string_view v) override {
    map_[std::string(k)] = std::string(v);
    return {};
  }
  std::map<std::string, std::string> map_;
  std::map<std::string, bool> dirty_;
};

std::unique_ptr<StateStore> memory_store() {
  auto db = Database::open(":memory:");
  REQUIRE(db.ok());
  static std::vector<std::unique_ptr<Database>> keep;
  keep.push_back(std::move(*db));
  auto store = StateStore::attach(*keep.back());
  REQUIRE(store.ok());
  return std::move(*store);
}

void snapshot(StateStore& store, MapEngine& e, int64_t id) {
  StateChanges changes;
  e.take_changes(changes);
  REQUIRE(store.save_snapshot("dedup", id, changes, 1000 + id).ok());
}

void complete(StateStore& store, int64_t id, int64_t offset) {
  Checkpoint c{id, 500 + id, {{"events", 0, offset}}, ""};
  REQUIRE(store.complete(c, "kcheckpoint", 2000 + id).ok());
}

std::map<std::string, std::string> restored(StateStore& store,
                                            std::optional<int64_t>* at = nullptr) {
  MapEngine fresh;
  auto r = store.restore("dedup", fresh);
  REQUIRE(r.ok());
  if (at != nullptr) *at = *r;
  return fresh.map_;
}

}  // namespace

TEST_CASE("a stage restores the state of the newest complete checkpoint") {
  auto store = memory_store();
  MapEngine e;
  e.put("a", "1");
  e.put("b", "2");
  snapshot(*store, e, 1);
  complete(*store, 1, 10);
  e.put("a", "3");  // changed
  e.erase("b");     // removed
  e.put("c", "4");  // added
  snapshot(*store, e, 2);
  // Checkpoint 2 never completes: a restart restores checkpoint 1.
  std::optional<int64_t> at;
  CHECK(restored(*store, &at) == std::map<std::string, std::string>{{"a", "1"}, {"b", "2"}});
  CHECK(at == 1);
}

TEST_CASE("incremental snapshots add up to the whole state") {
  auto store = memory_store();
  MapEngine e;
  e.put("a", "1");
  snapshot(*store, e, 1);
  complete(*store, 1, 1);
  e.put("b", "2");
  snapshot(*store, e, 2);
  complete(*store, 2, 2);
  e.put("a", "9");
  e.erase("b");
  e.put("c", "3");
  snapshot(*store, e, 3);
  complete(*store, 3, 3);
  CHECK(restored(*store) == e.map_);
  auto snaps = store->snapshots();
  REQUIRE(snaps.ok());
  REQUIRE(snaps->size() == 3);
  CHECK((*snaps)[2].entries == 3);  // only what changed in checkpoint 3
}

TEST_CASE("restoring drops snapshots after the complete checkpoint and prunes history") {
  auto store = memory_store();
  MapEngine e;
  e.put("a", "1");
  snapshot(*store, e, 1);
  complete(*store, 1, 1);
  e.put("a", "2");
  snapshot(*store, e, 2);
  complete(*store, 2, 2);
  e.put("z", "never complete");
  snapshot(*store, e, 3);
  CHECK(restored(*store) == std::map<std::string, std::string>{{"a", "2"}});
  // What was dropped stays dropped; the old version of "a" is gone too.
  auto count = store->db().prepare("SELECT COUNT(*) FROM stage_state");
  REQUIRE(count.ok());
  REQUIRE(*count->step());
  CHECK(count->column_int(0) == 1);
  auto problems = store->verify();
  REQUIRE(problems.ok());
  CHECK(problems->empty());
}

TEST_CASE("completing a checkpoint stores its offsets as the pipeline's positions") {
  auto store = memory_store();
  auto next = store->next_checkpoint_id();
  REQUIRE(next.ok());
  CHECK(*next == 1);
  REQUIRE(store->record_emitted(1, 100).ok());
  REQUIRE(store->record_emitted(2, 200).ok());
  CHECK(*store->next_checkpoint_id() == 3);  // ids grow even past incomplete ones
  Checkpoint c{2, 200, {{"events", 0, 10}, {"events", 1, 20}}, ""};
  REQUIRE(store->complete(c, "kcheckpoint", 300).ok());
  Checkpoint later{3, 300, {{"events", 1, 25}}, ""};
  REQUIRE(store->complete(later, "kcheckpoint", 400).ok());
  auto offsets = store->offsets();
  REQUIRE(offsets.ok());
  REQUIRE(offsets->size() == 2);
  CHECK((*offsets)[0].offset == 10);
  CHECK((*offsets)[0].checkpoint == 2);
  CHECK((*offsets)[1].offset == 25);
  CHECK((*offsets)[1].committed_at == 400);
  CHECK(*store->latest_complete() == 3);
  // The same checkpoint again (a replay after a crash) changes nothing; an
  // older one is a protocol error.
  CHECK(store->complete(later, "kcheckpoint", 500).ok());
  CHECK(!store->complete(c, "kcheckpoint", 500).ok());
  auto history = store->checkpoints();
  REQUIRE(history.ok());
  REQUIRE(history->size() == 3);
  CHECK(!(*history)[0].completed_at);
  CHECK((*history)[2].partitions == 1);
}

TEST_CASE("offsets set by hand replace the positions") {
  auto store = memory_store();
  REQUIRE(store->set_offsets({{"events", 0, 5}}, 10).ok());
  auto offsets = store->offsets();
  REQUIRE(offsets.ok());
  REQUIRE(offsets->size() == 1);
  CHECK((*offsets)[0].offset == 5);
  CHECK((*offsets)[0].checkpoint == 0);
}

// --- who wrote what (kpipe(7), CONTROL LINES AND CHECKPOINTS) ---------------

namespace {

// Two handles on one file stand for two processes: verify tells runs
// apart by the handle, and locks are not taken here.
std::unique_ptr<StateStore> file_store(const std::string& path) {
  auto store = StateStore::open(path);
  REQUIRE(store.ok());
  return std::move(*store);
}

void save(StateStore& store, const std::string& stage, int64_t id) {
  StateChanges changes;
  changes.put.emplace_back(fmt::format("k{}", id), "v");
  REQUIRE(store.save_snapshot(stage, id, changes, 1000 + id).ok());
}

std::vector<std::string> problems(StateStore& store) {
  auto found = store.verify();
  REQUIRE(found.ok());
  return *found;
}

bool mentions(const std::vector<std::string>& lines, const std::string& part) {
  for (const auto& l : lines)
    if (l.find(part) != std::string::npos) return true;
  return false;
}

// Changes the file as another program would: plain SQL on a connection
// of its own, without kpipe's functions.
void foreign_sql(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* msg = nullptr;
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, &msg);
  INFO((msg != nullptr ? msg : ""));
  sqlite3_free(msg);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

// A healthy pipeline's file: kconsume emitted 1..4, the stage saved them,
// the terminal stage completed them; offsets also set by hand once.
void run_healthy(StateStore& consume, StateStore& stage, StateStore& commit) {
  REQUIRE(commit.set_offsets({{"events", 1, 3}}, 5).ok());
  for (int64_t id = 1; id <= 4; ++id) {
    REQUIRE(consume.record_emitted(id, 500 + id).ok());
    save(stage, "kdedup", id);
    complete(commit, id, 10 * id);
  }
}

}  // namespace

TEST_CASE("verify finds nothing wrong in a healthy pipeline's file, restarts included") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  {
    auto consume = file_store(path), stage = file_store(path), commit = file_store(path);
    run_healthy(*consume, *stage, *commit);
  }
  // The whole pipeline again: new runs, later checkpoints.
  auto consume = file_store(path), stage = file_store(path), commit = file_store(path);
  MapEngine e;
  REQUIRE(stage->restore("kdedup", e).ok());
  for (int64_t id = 5; id <= 6; ++id) {
    REQUIRE(consume->record_emitted(id, 500 + id).ok());
    save(*stage, "kdedup", id);
    complete(*commit, id, 10 * id);
  }
  CHECK(problems(*commit).empty());
}

TEST_CASE("verify reports two stages of one name that wrote at the same time") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  auto a = file_store(path), b = file_store(path), other = file_store(path);
  for (int64_t id = 1; id <= 4; ++id) {
    save(*a, "kdedup", id);
    save(*b, "kdedup", id);
    save(*other, "kwindow", id);
    complete(*other, id, id);
  }
  auto found = problems(*a);
  REQUIRE(found.size() == 1);
  CHECK(found[0] == fmt::format("stage 'kdedup': processes {0} and {0} wrote checkpoints 1 to 4 at "
                                "the same time (two stages under one name)",
                                ::getpid()));
}

TEST_CASE("verify reports two pipelines' kconsume emitting on one state file") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  auto a = file_store(path), b = file_store(path);
  REQUIRE(a->record_emitted(1, 10).ok());
  REQUIRE(a->record_emitted(2, 20).ok());
  // The second pipeline starts while the first runs: both emit 3 and on.
  for (int64_t id = 3; id <= 5; ++id) {
    REQUIRE(b->record_emitted(id, 30).ok());
    REQUIRE(a->record_emitted(id, 30).ok());
  }
  auto found = problems(*a);
  REQUIRE(found.size() == 1);
  CHECK(found[0].starts_with("kconsume: processes "));
  CHECK(found[0].ends_with(
      " wrote checkpoints 3 to 5 at the same time (two pipelines on one state file)"));
}

TEST_CASE("verify reports rows of kpipe's tables changed by another program") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  {
    auto consume = file_store(path), stage = file_store(path), commit = file_store(path);
    run_healthy(*consume, *stage, *commit);
    REQUIRE(problems(*commit).empty());
  }
  foreign_sql(path, "UPDATE offsets SET offset = 0 WHERE partition = 0");
  foreign_sql(path, "UPDATE checkpoint_offsets SET offset = 7 WHERE checkpoint = 3");
  foreign_sql(path,
              "INSERT INTO offsets (topic, partition, offset, checkpoint, committed_at) "
              "VALUES ('events', 2, 9, 0, 1)");
  foreign_sql(path, "UPDATE stage_snapshots SET entries = 0 WHERE checkpoint = 2");
  foreign_sql(path, "UPDATE checkpoints SET completed_at = NULL WHERE id = 1");
  foreign_sql(path, "UPDATE kpipe_runs SET last_checkpoint = 1 WHERE role = 'kconsume'");
  auto store = StateStore::open_existing(path);
  REQUIRE(store.ok());
  auto found = problems(**store);
  CHECK(mentions(found, "offsets: row events/0 changed outside kpipe"));
  CHECK(mentions(found, "offsets: row events/2 changed outside kpipe"));
  CHECK_FALSE(mentions(found, "offsets: row events/1 changed"));
  CHECK(mentions(found, "checkpoint_offsets: row 3 events/0 changed outside kpipe"));
  CHECK(mentions(found, "stage_snapshots: row kdedup 2 changed outside kpipe"));
  CHECK(mentions(found, "checkpoints: row 1 changed outside kpipe"));
  CHECK(mentions(found, "kpipe_runs: row kconsume "));
  CHECK(mentions(found, "offsets: row events/0 disagrees with checkpoint 4, which stored it"));
}

TEST_CASE("verify reports offsets that disagree with the checkpoint that stored them") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  auto store = file_store(path);
  complete(*store, 1, 10);
  complete(*store, 2, 20);
  foreign_sql(path, "DELETE FROM checkpoint_offsets WHERE checkpoint = 2");
  auto found = problems(*store);
  REQUIRE(found.size() == 1);
  CHECK(found[0] == "offsets: row events/0 disagrees with checkpoint 2, which stored it");
}

TEST_CASE("a state file of schema version 2 is upgraded, its rows sealed as they were") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  // What kpipe wrote before version 3: the v1 and v2 migrations verbatim.
  foreign_sql(path,
              "CREATE TABLE kpipe_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL);"
              "CREATE TABLE checkpoints (id INTEGER PRIMARY KEY, emitted_at INTEGER NOT NULL,"
              "  completed_at INTEGER, completed_by TEXT);"
              "CREATE TABLE checkpoint_offsets ("
              "  checkpoint INTEGER NOT NULL REFERENCES checkpoints(id) ON DELETE CASCADE,"
              "  topic TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL,"
              "  PRIMARY KEY (checkpoint, topic, partition));"
              "CREATE TABLE offsets (topic TEXT NOT NULL, partition INTEGER NOT NULL,"
              "  offset INTEGER NOT NULL, checkpoint INTEGER NOT NULL,"
              "  committed_at INTEGER NOT NULL, PRIMARY KEY (topic, partition));"
              "CREATE TABLE stage_state (stage TEXT NOT NULL, key BLOB NOT NULL,"
              "  value BLOB NOT NULL, added INTEGER NOT NULL, removed INTEGER,"
              "  PRIMARY KEY (stage, key, added)) WITHOUT ROWID;"
              "CREATE INDEX stage_state_live ON stage_state (stage, key) WHERE removed IS NULL;"
              "CREATE TABLE stage_snapshots (stage TEXT NOT NULL, checkpoint INTEGER NOT NULL,"
              "  saved_at INTEGER NOT NULL, entries INTEGER NOT NULL, bytes INTEGER NOT NULL,"
              "  PRIMARY KEY (stage, checkpoint));"
              "DROP INDEX stage_state_live;"
              "INSERT INTO kpipe_schema VALUES ('state', 2);"
              "INSERT INTO checkpoints VALUES (1, 100, 200, 'kcheckpoint');"
              "INSERT INTO checkpoint_offsets VALUES (1, 'events', 0, 42);"
              "INSERT INTO offsets VALUES ('events', 0, 42, 1, 200);"
              "INSERT INTO stage_state VALUES ('kdedup', 'k', 'v', 1, NULL);"
              "INSERT INTO stage_snapshots VALUES ('kdedup', 1, 150, 1, 2);");
  auto old = StateStore::open_existing(path);
  REQUIRE_FALSE(old.ok());
  CHECK(old.error().message ==
        path +
            ": the 'state' tables are at schema version 2, older than this program's (4); run the "
            "pipeline or kcheckpoint commit on it once to upgrade them");
  {
    auto upgraded = file_store(path);
    CHECK(problems(*upgraded).empty());
    MapEngine e;
    auto restored = upgraded->restore("kdedup", e);
    REQUIRE(restored.ok());
    CHECK(*restored == std::optional<int64_t>(1));
    CHECK(e.map_ == std::map<std::string, std::string>{{"k", "v"}});
    REQUIRE(upgraded->record_emitted(2, 300).ok());
    save(*upgraded, "kdedup", 2);
    complete(*upgraded, 2, 50);
  }
  auto reread = StateStore::open_existing(path);
  REQUIRE(reread.ok());
  CHECK(problems(**reread).empty());
}

TEST_CASE("a stage's lock refuses a second holder, naming the state file and the pid") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  auto a = file_store(path), b = file_store(path);
  REQUIRE(a->lock_stage("kdedup").ok());
  Status second = b->lock_stage("kdedup");
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().message ==
        fmt::format("stage 'kdedup' of state database '{}' is in use by process {}: two stages of "
                    "a pipeline need distinct --name; one pipeline per state file",
                    path, ::getpid()));
  CHECK(b->lock_stage("kdedup/other").ok());
  REQUIRE(a->lock_pipeline().ok());
  Status offsets = b->lock_offsets();
  REQUIRE_FALSE(offsets.ok());
  CHECK(offsets.error().message ==
        fmt::format("state database '{}' is in use by process {} (the pipeline's kconsume, or "
                    "another kcheckpoint): stop the pipeline before rewriting its offsets",
                    path, ::getpid()));
  a.reset();
  CHECK(b->lock_stage("kdedup").ok());
  CHECK(b->lock_pipeline().ok());
}
