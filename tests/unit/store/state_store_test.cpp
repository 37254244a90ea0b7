#include "kpipe/store/state_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
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
  Checkpoint c{id, 500 + id, {{"events", 0, offset}}, "", ""};
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
  Checkpoint c{2, 200, {{"events", 0, 10}, {"events", 1, 20}}, "", ""};
  REQUIRE(store->complete(c, "kcheckpoint", 300).ok());
  Checkpoint later{3, 300, {{"events", 1, 25}}, "", ""};
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
            ": the 'state' tables are at schema version 2, older than this program's (7); run the "
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

// Kinesis positions (kpipe(7), LOGS): digits no integer column holds, and
// the time a shard was started at, kept exactly and sealed like offsets.
TEST_CASE("a Kinesis shard's position is kept digit for digit, sealed, and claimed") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  const std::string digits = "49590338271490256608559692538361571095921575989136588898";
  const Position seq = *Position::sequence(digits);
  {
    auto store = file_store(path);
    REQUIRE(store->record_emitted(1, 100).ok());
    Checkpoint c{1, 100, {{"s", 7, seq}, {"s", 8, Position::arrived_at(1764412345123)}}, "", ""};
    REQUIRE(store->complete(c, "kcheckpoint", 200).ok());
    auto offsets = store->offsets();
    REQUIRE(offsets.ok());
    REQUIRE(offsets->size() == 2);
    CHECK((*offsets)[0].offset == seq);
    CHECK((*offsets)[0].offset.digits() == digits);
    CHECK((*offsets)[1].offset == Position::arrived_at(1764412345123));
    CHECK(problems(*store).empty());
    auto claims = store->claim({{"s", 7}}, 300);
    REQUIRE(claims.ok());
    REQUIRE(claims->size() == 1);
    CHECK((*claims)[0].offset == std::optional<Position>(seq));
  }
  // One digit changed by another program is a row changed outside kpipe.
  foreign_sql(path,
              "UPDATE checkpoint_offsets SET sequence = replace(sequence, '98', '99') "
              "WHERE partition = 7");
  auto store = StateStore::open_existing(path);
  REQUIRE(store.ok());
  auto found = problems(**store);
  CHECK(mentions(found, "checkpoint_offsets: row 1 s/7 changed outside kpipe"));
  CHECK(mentions(found, "offsets: row s/7 disagrees with checkpoint 1, which stored it"));
  // A sequence that is no position is an error, never a silent 0.
  foreign_sql(path, "UPDATE offsets SET sequence = 'x' WHERE partition = 7");
  auto offsets = (*store)->offsets();
  REQUIRE_FALSE(offsets.ok());
  CHECK(offsets.error().message ==
        "offsets: sequence 'x' is not a Kinesis position (changed outside kpipe?)");
}

TEST_CASE(
    "a state file of schema version 6 is upgraded: its sealed rows sealed anew, a changed "
    "one still reported") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  {
    auto store = file_store(path);
    complete(*store, 1, 10);
    // Back to version 6: no sequence column, and the seals of then (the
    // store's own connection has kpipe_seal), one row then changed.
    REQUIRE(store->db()
                .exec("ALTER TABLE offsets DROP COLUMN sequence;"
                      "ALTER TABLE checkpoint_offsets DROP COLUMN sequence;"
                      "UPDATE offsets SET seal = kpipe_seal(topic, partition, offset, "
                      "checkpoint, committed_at);"
                      "UPDATE checkpoint_offsets SET seal = kpipe_seal(checkpoint, topic, "
                      "partition, offset);"
                      "UPDATE kpipe_schema SET version = 6 WHERE component = 'state'")
                .ok());
  }
  foreign_sql(path, "UPDATE checkpoint_offsets SET offset = 11");
  auto upgraded = file_store(path);
  auto found = problems(*upgraded);
  CHECK_FALSE(mentions(found, "offsets: row events/0 changed"));
  CHECK(mentions(found, "checkpoint_offsets: row 1 events/0 changed outside kpipe"));
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

// --- many instances (kpipe(7), MANY INSTANCES) --------------------------------

namespace {

const TopicPartition kP0{"events", 0};
const TopicPartition kP1{"events", 1};

std::vector<PartitionClaim> claim(StateStore& store, std::vector<TopicPartition> partitions) {
  auto claims = store.claim(std::move(partitions), 100);
  REQUIRE(claims.ok());
  return *claims;
}

StateChanges changes(std::vector<std::pair<std::string, std::string>> put,
                     std::vector<std::string> removed = {}) {
  StateChanges c;
  c.put = std::move(put);
  c.removed = std::move(removed);
  return c;
}

// One partition's changes at `checkpoint`, saved as its owner at `epoch`.
Status save_slice(StateStore& store, const std::string& stage, int64_t checkpoint,
                  const TopicPartition& p, int64_t epoch, const StateChanges& c) {
  return store.save_slices(stage, checkpoint, {{p, epoch, &c}}, 1000 + checkpoint);
}

// An instance's terminal stage completing `id` with its offsets (epochs
// on them).
Status complete_owned(StateStore& store, int64_t id, std::vector<PartitionOffset> offsets) {
  Checkpoint c{id, 500 + id, std::move(offsets), "g", ""};
  return store.complete(c, "kcheckpoint", 2000 + id);
}

std::map<std::string, std::string> slice(StateStore& store, const std::string& stage,
                                         const TopicPartition& p,
                                         std::optional<int64_t>* at = nullptr) {
  MapEngine fresh;
  auto r = store.restore_slice(stage, p, fresh);
  REQUIRE(r.ok());
  if (at != nullptr) *at = *r;
  return fresh.map_;
}

// The first column of each row of `sql`, as text ("-" for NULL).
std::vector<std::string> column(StateStore& store, const std::string& sql) {
  auto stmt = store.db().prepare(sql);
  REQUIRE(stmt.ok());
  std::vector<std::string> out;
  for (;;) {
    auto row = stmt->step();
    REQUIRE(row.ok());
    if (!*row) break;
    out.emplace_back(stmt->column_type(0) == Statement::Type::kNull ? "-" : stmt->column_text(0));
  }
  return out;
}

std::optional<Position> stored_offset(StateStore& store, const TopicPartition& p) {
  auto offsets = store.offsets();
  REQUIRE(offsets.ok());
  for (const auto& o : *offsets)
    if (o.topic == p.topic && o.partition == p.partition) return o.offset;
  return std::nullopt;
}

}  // namespace

TEST_CASE("claim: each take-over bumps the partition's epoch and says where it resumes",
          "[group]") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  auto a = file_store(path), b = file_store(path);
  CHECK_FALSE(*a->owned_by_group());
  auto first = claim(*a, {kP1, kP0});
  REQUIRE(first.size() == 2);
  CHECK(first[0].partition == kP0);
  CHECK(first[0].epoch == 1);
  CHECK_FALSE(first[0].offset);
  CHECK(first[0].checkpoint == 0);
  CHECK(first[1].partition == kP1);
  CHECK(first[1].epoch == 1);
  CHECK(*b->owned_by_group());

  StateChanges kept = changes({{"k", "v"}});
  REQUIRE(save_slice(*a, "kdedup", 3, kP0, 1, kept).ok());
  REQUIRE(complete_owned(*a, 3, {{"events", 0, 42, 1}, {"events", 1, 7, 1}}).ok());
  auto taken = claim(*b, {kP0});
  REQUIRE(taken.size() == 1);
  CHECK(taken[0].epoch == 2);
  CHECK(taken[0].offset == 42);
  CHECK(taken[0].checkpoint == 3);
  // Partition 1 is still a's, at its epoch.
  CHECK(a->check_owners({{"events", 1, 0, 1}}, "x").ok());
  CHECK(b->check_owners({{"events", 0, 0, 2}}, "x").ok());

  // A position set by hand moves where the partition resumes, not the
  // checkpoint its state is restored from.
  REQUIRE(b->set_offsets({{"events", 0, 5}}, 50).ok());
  auto reset = claim(*a, {kP0});
  CHECK(reset[0].epoch == 3);
  CHECK(reset[0].offset == 5);
  CHECK(reset[0].checkpoint == 3);
  std::optional<int64_t> at;
  CHECK(slice(*a, "kdedup", kP0, &at) == std::map<std::string, std::string>{{"k", "v"}});
  CHECK(at == 3);
  CHECK(column(*a, "SELECT pid FROM partition_owners WHERE partition = 0") ==
        std::vector<std::string>{std::to_string(::getpid())});
}

TEST_CASE("record_emitted: instances take checkpoint ids from one sequence, never twice",
          "[group]") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  auto a = file_store(path), b = file_store(path);
  // A single pipeline's ids, recorded by number, come before the sequence's.
  REQUIRE(a->record_emitted(5, 100).ok());
  auto six = b->record_emitted(200);
  REQUIRE(six.ok());
  CHECK(*six == 6);
  auto seven = a->record_emitted(300);
  REQUIRE(seven.ok());
  CHECK(*seven == 7);
  // An older id recorded by number does not take the sequence back.
  REQUIRE(a->record_emitted(3, 400).ok());
  CHECK(*b->record_emitted(500) == 8);
  CHECK(*a->next_checkpoint_id() == 9);
  auto history = a->checkpoints();
  REQUIRE(history.ok());
  std::vector<std::pair<int64_t, Millis>> emitted;
  for (const auto& c : *history) {
    CHECK_FALSE(c.completed_at);
    emitted.emplace_back(c.id, c.emitted_at);
  }
  CHECK(emitted ==
        std::vector<std::pair<int64_t, Millis>>{{3, 400}, {5, 100}, {6, 200}, {7, 300}, {8, 500}});
  // The sequence is in the file: a later process goes on from it.
  a.reset();
  b.reset();
  CHECK(*file_store(path)->record_emitted(600) == 9);
}

TEST_CASE("a state file of schema version 3 starts the sequence past its checkpoints", "[group]") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  {
    auto old = file_store(path);
    REQUIRE(old->record_emitted(41, 1).ok());
  }
  // Back to what version 3 had: no owners, no sequence, no records' times.
  foreign_sql(path,
              "DROP TABLE partition_owners; DROP TABLE kpipe_sequences;"
              "ALTER TABLE checkpoints DROP COLUMN records;"
              "ALTER TABLE checkpoints DROP COLUMN ts_p50;"
              "ALTER TABLE checkpoints DROP COLUMN ts_p01;"
              "ALTER TABLE checkpoints DROP COLUMN ts_min;"
              "DROP TABLE kpipe_instances;"
              "ALTER TABLE offsets DROP COLUMN sequence;"
              "ALTER TABLE checkpoint_offsets DROP COLUMN sequence;"
              "UPDATE kpipe_schema SET version = 3 WHERE component = 'state'");
  auto upgraded = file_store(path);
  auto id = upgraded->record_emitted(2);
  REQUIRE(id.ok());
  CHECK(*id == 42);
  CHECK_FALSE(*upgraded->owned_by_group());
}

TEST_CASE("save_slices and restore_slice keep each partition's entries apart", "[group]") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  auto store = file_store(path);
  // Partitions 1 and 10: one's prefix begins the other's.
  const TopicPartition p10{"events", 10};
  claim(*store, {kP1, p10});
  StateChanges one = changes({{"a", "1"}, {"b", "2"}}), ten = changes({{"a", "10"}});
  REQUIRE(store->save_slices("kdedup", 1, {{p10, 1, &ten}, {kP1, 1, &one}}, 1001).ok());
  REQUIRE(complete_owned(*store, 1, {{"events", 1, 5, 1}, {"events", 10, 6, 1}}).ok());

  std::optional<int64_t> at;
  CHECK(slice(*store, "kdedup", kP1, &at) ==
        std::map<std::string, std::string>{{"a", "1"}, {"b", "2"}});
  CHECK(at == 1);
  CHECK(slice(*store, "kdedup", p10) == std::map<std::string, std::string>{{"a", "10"}});
  // Nothing saved: no entries and no checkpoint.
  CHECK(slice(*store, "kdedup", kP0, &at).empty());
  CHECK_FALSE(at);
  CHECK(slice(*store, "kwindow", kP1).empty());
  // The store keeps them under the partition's prefix, which the engine
  // never sees.
  CHECK(column(*store, "SELECT key FROM stage_state ORDER BY key") ==
        std::vector<std::string>{"@events/1/a", "@events/1/b", "@events/10/a"});
  auto snaps = store->snapshots();
  REQUIRE(snaps.ok());
  REQUIRE(snaps->size() == 1);
  CHECK((*snaps)[0].entries == 3);

  // The next checkpoint's changes: removed, changed and added entries.
  StateChanges next = changes({{"a", "9"}, {"c", "3"}}, {"b"});
  REQUIRE(save_slice(*store, "kdedup", 2, kP1, 1, next).ok());
  REQUIRE(complete_owned(*store, 2, {{"events", 1, 8, 1}}).ok());
  CHECK(slice(*store, "kdedup", kP1, &at) ==
        std::map<std::string, std::string>{{"a", "9"}, {"c", "3"}});
  CHECK(at == 2);
  CHECK(slice(*store, "kdedup", p10) == std::map<std::string, std::string>{{"a", "10"}});

  // A single pipeline's restore finds nothing of a stage kept by partition.
  MapEngine e;
  auto restored = store->restore("kdedup", e);
  REQUIRE(restored.ok());
  CHECK_FALSE(*restored);
  CHECK(e.map_.empty());
  CHECK(problems(*store).empty());
}

TEST_CASE("save_slices is refused whole once another instance took a partition over", "[group]") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  auto a = file_store(path), b = file_store(path);
  claim(*a, {kP0, kP1});
  claim(*b, {kP1});
  StateChanges zero = changes({{"x", "0"}}), one = changes({{"y", "1"}});
  Status stale = a->save_slices("kdedup", 1, {{kP0, 1, &zero}, {kP1, 1, &one}}, 1001);
  REQUIRE_FALSE(stale.ok());
  CHECK(stale.error().message.starts_with(
      fmt::format("the snapshot of 'kdedup' for checkpoint 1: fenced: partition events [1] was "
                  "taken over by another instance (process {} on ",
                  ::getpid())));
  CHECK(stale.error().message.ends_with(
      "epoch 2; this one's is 1): this instance lost it and stops"));
  // Partition 0's slice, still a's, was not saved either.
  CHECK(column(*a, "SELECT COUNT(*) FROM stage_state") == std::vector<std::string>{"0"});
  CHECK(column(*a, "SELECT COUNT(*) FROM stage_snapshots") == std::vector<std::string>{"0"});

  REQUIRE(save_slice(*b, "kdedup", 2, kP1, 2, one).ok());
  REQUIRE(save_slice(*a, "kdedup", 2, kP0, 1, zero).ok());
  CHECK(slice(*a, "kdedup", kP1) == std::map<std::string, std::string>{{"y", "1"}});

  // A partition no instance claimed: the store is not the one it was.
  Status unowned = save_slice(*b, "kdedup", 3, {"events", 5}, 1, one);
  REQUIRE_FALSE(unowned.ok());
  CHECK(unowned.error().message ==
        fmt::format("the snapshot of 'kdedup' for checkpoint 3: partition events [5] has no owner "
                    "in '{}': was the state database replaced?",
                    path));
}

TEST_CASE("complete with epochs: per partition, a replay changes nothing, a stale owner is fenced",
          "[group]") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  auto a = file_store(path), b = file_store(path);
  claim(*a, {kP0});
  claim(*b, {kP1});
  CHECK(*a->record_emitted(10) == 1);
  CHECK(*b->record_emitted(20) == 2);
  // Instance b completes its checkpoint first; a's earlier one still
  // completes: ids grow per partition, not across the store.
  REQUIRE(complete_owned(*b, 2, {{"events", 1, 20, 1}}).ok());
  REQUIRE(complete_owned(*a, 1, {{"events", 0, 10, 1}}).ok());
  CHECK(stored_offset(*a, kP0) == 10);
  CHECK(stored_offset(*a, kP1) == 20);
  CHECK(*a->completed_by(1) == "kcheckpoint");

  // The terminal stage restarted and saw checkpoint 1 again.
  REQUIRE(complete_owned(*a, 1, {{"events", 0, 11, 1}}).ok());
  CHECK(stored_offset(*a, kP0) == 10);

  CHECK(*a->record_emitted(30) == 3);
  CHECK(*a->record_emitted(40) == 4);
  REQUIRE(complete_owned(*a, 4, {{"events", 0, 40, 1}}).ok());
  Status older = complete_owned(*a, 3, {{"events", 0, 30, 1}});
  REQUIRE_FALSE(older.ok());
  CHECK(older.error().message ==
        "checkpoint 3 arrived after checkpoint 4 completed partition events [0]: ids must grow");
  CHECK(a->completed_by(3)->empty());
  CHECK(stored_offset(*a, kP0) == 40);

  // b takes partition 0 over: a's next checkpoint, which also holds a
  // partition a still owns, is refused whole.
  claim(*a, {{"events", 2}});
  claim(*b, {kP0});
  CHECK(*a->record_emitted(50) == 5);
  Status fenced = complete_owned(*a, 5, {{"events", 2, 3, 1}, {"events", 0, 50, 1}});
  REQUIRE_FALSE(fenced.ok());
  CHECK(fenced.error().message.starts_with(
      "checkpoint 5: fenced: partition events [0] was taken over by another instance"));
  CHECK(a->completed_by(5)->empty());
  CHECK(stored_offset(*a, kP0) == 40);
  CHECK_FALSE(stored_offset(*a, {"events", 2}));
  // What the owner checks in its own transactions says the same.
  Status check = a->check_owners({{"events", 2, 0, 1}, {"events", 0, 0, 1}}, "rows");
  REQUIRE_FALSE(check.ok());
  CHECK(check.error().message.starts_with("rows: fenced: partition events [0] "));
  CHECK(b->check_owners({{"events", 0, 0, 2}}, "rows").ok());

  // The new owner completes from where a left it.
  CHECK(*b->record_emitted(60) == 6);
  REQUIRE(complete_owned(*b, 6, {{"events", 0, 45, 2}}).ok());
  CHECK(stored_offset(*b, kP0) == 45);
  CHECK(problems(*b).empty());
}

TEST_CASE("claim drops what a partition's last owner saved after its last complete checkpoint",
          "[group]") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  auto a = file_store(path), b = file_store(path);
  claim(*a, {kP0, kP1});
  StateChanges four = changes({{"x", "0"}});
  REQUIRE(save_slice(*a, "kdedup", 4, kP0, 1, four).ok());
  REQUIRE(complete_owned(*a, 4, {{"events", 0, 40, 1}, {"events", 1, 4, 1}}).ok());
  StateChanges five0 = changes({{"a", "1"}, {"b", "2"}}, {"x"}), five1 = changes({{"q", "1"}});
  REQUIRE(a->save_slices("kdedup", 5, {{kP0, 1, &five0}, {kP1, 1, &five1}}, 1005).ok());
  REQUIRE(complete_owned(*a, 5, {{"events", 0, 50, 1}, {"events", 1, 5, 1}}).ok());
  // Checkpoint 6 is saved but never completes: a died before.
  StateChanges six0 = changes({{"a", "2"}, {"c", "3"}}, {"b"}), six1 = changes({{"q", "2"}});
  REQUIRE(a->save_slices("kdedup", 6, {{kP0, 1, &six0}, {kP1, 1, &six1}}, 1006).ok());
  CHECK(slice(*a, "kdedup", kP0) == std::map<std::string, std::string>{{"a", "2"}, {"c", "3"}});

  auto taken = claim(*b, {kP0});
  CHECK(taken[0].epoch == 2);
  CHECK(taken[0].offset == 50);
  CHECK(taken[0].checkpoint == 5);
  std::optional<int64_t> at;
  CHECK(slice(*b, "kdedup", kP0, &at) ==
        std::map<std::string, std::string>{{"a", "1"}, {"b", "2"}});
  CHECK(at == 5);
  // Only the partition taken over: partition 1's owner is still writing.
  CHECK(slice(*b, "kdedup", kP1) == std::map<std::string, std::string>{{"q", "2"}});
  // And history up to checkpoint 5 is pruned: x, removed at 5, is gone.
  CHECK(column(*b,
               "SELECT key || ' ' || added || ' ' || COALESCE(removed, '-') FROM stage_state "
               "WHERE CAST(key AS TEXT) LIKE '@events/0/%' ORDER BY key") ==
        std::vector<std::string>{"@events/0/a 5 -", "@events/0/b 5 -"});
}

TEST_CASE("restore in a store kept by partition refuses a single pipeline's saved state",
          "[group]") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  auto store = file_store(path);
  MapEngine e;
  e.put("k", "v");
  snapshot(*store, e, 1);
  complete(*store, 1, 10);
  claim(*store, {kP0});
  MapEngine fresh;
  auto refused = store->restore("dedup", fresh);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message ==
        fmt::format("the saved state of 'dedup' in '{}' was saved by a single pipeline, not by "
                    "partition, and cannot follow the partitions of a consumer group: give the "
                    "instances a new state database",
                    path));
  CHECK(fresh.map_.empty());
  // Refusing drops nothing: the single pipeline's state is still there.
  CHECK(column(*store, "SELECT key FROM stage_state WHERE stage = 'dedup'") ==
        std::vector<std::string>{"k"});

  // A stage kept by partition, or with nothing saved, restores nothing here.
  StateChanges c = changes({{"w", "1"}});
  REQUIRE(save_slice(*store, "kwindow", 2, kP0, 1, c).ok());
  for (const char* stage : {"kwindow", "kjoin"}) {
    MapEngine none;
    auto restored = store->restore(stage, none);
    INFO(stage);
    REQUIRE(restored.ok());
    CHECK_FALSE(*restored);
    CHECK(none.map_.empty());
  }
}

namespace {

// Another process holding one of the store's locks ("stage:NAME" or
// "kconsume", state_lock.h's names) until the test ends: POSIX locks never
// conflict within one process. The child takes it with StateLock alone: a
// child of fork() may not use SQLite on a file its parent has open.
class ChildLock {
 public:
  ChildLock(const std::string& path, const std::string& name, bool shared) {
    int said[2], told[2];
    REQUIRE(::pipe(said) == 0);
    REQUIRE(::pipe(told) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::close(said[0]);
      ::close(told[1]);
      auto lock = StateLock::take(
          path, name, [](const std::string& holder) { return "busy " + holder; }, shared);
      std::string answer = lock ? "held" : lock.error().message;
      (void)!::write(said[1], answer.data(), answer.size());
      ::close(said[1]);
      char c;
      (void)!::read(told[0], &c, 1);  // until the parent closes its end
      ::_exit(0);
    }
    ::close(said[1]);
    ::close(told[0]);
    release_fd_ = told[1];
    char buf[256];
    ssize_t n = 0;
    for (ssize_t got; (got = ::read(said[0], buf + n, sizeof buf - n)) > 0;) n += got;
    ::close(said[0]);
    answer_.assign(buf, static_cast<size_t>(n));
  }
  ~ChildLock() {
    ::close(release_fd_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  ChildLock(const ChildLock&) = delete;
  ChildLock& operator=(const ChildLock&) = delete;
  const std::string& answer() const { return answer_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int release_fd_ = -1;
  std::string answer_;
};

}  // namespace

TEST_CASE("instances share the stage and pipeline locks that a single pipeline holds alone",
          "[group][lock]") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  auto store = file_store(path);

  // Another instance's stage: this one shares it, a single pipeline's is
  // refused.
  ChildLock instance(path, "stage:kdedup", true);
  REQUIRE(instance.answer() == "held");
  Status alone = store->lock_stage("kdedup");
  REQUIRE_FALSE(alone.ok());
  CHECK(alone.error().message ==
        fmt::format("stage 'kdedup' of state database '{}' is in use by process {}: two stages of "
                    "a pipeline need distinct --name; one pipeline per state file",
                    path, instance.pid()));
  CHECK(store->lock_stage("kdedup", true).ok());

  // A single pipeline's stage refuses an instance's.
  ChildLock single(path, "stage:kwindow", false);
  REQUIRE(single.answer() == "held");
  Status shared = store->lock_stage("kwindow", true);
  REQUIRE_FALSE(shared.ok());
  CHECK(shared.error().message ==
        fmt::format("stage 'kwindow' of state database '{}' is in use by process {}, a pipeline "
                    "that is not an instance of a consumer group: one pipeline per state file",
                    path, single.pid()));

  // kconsume: instances share it; kcheckpoint reset, or a single
  // pipeline's kconsume, waits for all of them to stop.
  ChildLock consume(path, "kconsume", true);
  REQUIRE(consume.answer() == "held");
  Status offsets = store->lock_offsets();
  REQUIRE_FALSE(offsets.ok());
  CHECK(offsets.error().message ==
        fmt::format("state database '{}' is in use by process {} (the pipeline's kconsume, or "
                    "another kcheckpoint): stop the pipeline before rewriting its offsets",
                    path, consume.pid()));
  Status pipeline = store->lock_pipeline();
  REQUIRE_FALSE(pipeline.ok());
  CHECK(pipeline.error().message.ends_with("): one pipeline per state file"));
  CHECK(store->lock_pipeline(true).ok());
  ChildLock third(path, "kconsume", true);
  CHECK(third.answer() == "held");
}

TEST_CASE("a single pipeline's kconsume refuses an instance's", "[group][lock]") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  auto store = file_store(path);
  ChildLock single(path, "kconsume", false);
  REQUIRE(single.answer() == "held");
  Status instance = store->lock_pipeline(true);
  REQUIRE_FALSE(instance.ok());
  CHECK(instance.error().message ==
        fmt::format("state database '{}' is in use by process {} (the kconsume of a pipeline that "
                    "is not an instance of a consumer group, or kcheckpoint rewriting its offsets)",
                    path, single.pid()));
}

TEST_CASE("a stage's lock is shared once an instance has claimed a partition", "[group][lock]") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  ChildLock instance(path, "stage:kdedup", true);
  REQUIRE(instance.answer() == "held");
  {
    // A store no instance claimed from: the stage is a single pipeline's.
    auto single = file_store(path);
    Status refused = single->lock_stage_as_kept("kdedup");
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message.starts_with("stage 'kdedup' of state database '" + path +
                                              "' is in use by process " +
                                              std::to_string(instance.pid()) + ": "));
  }
  auto store = file_store(path);
  claim(*store, {kP0});
  CHECK(store->lock_stage_as_kept("kdedup").ok());
}

TEST_CASE("a checkpoint's end-to-end latency: its completion less its records' times") {
  auto store = memory_store();
  TimestampSummary ts{1000, 9000, 8500, 8000};
  REQUIRE(store->record_emitted(1, 9500, ts).ok());
  REQUIRE(store->record_emitted(2, 10500).ok());  // no records with times
  CHECK(*store->latency(1) == std::nullopt);      // not complete yet
  REQUIRE(
      store->complete(Checkpoint{1, 9500, {{"events", 0, 5}}, "", ""}, "kcheckpoint", 9700).ok());
  REQUIRE(
      store->complete(Checkpoint{2, 10500, {{"events", 0, 6}}, "", ""}, "kcheckpoint", 10600).ok());
  CHECK(*store->latency(1) == Latency{700, 1200, 1700, 1000});
  CHECK(*store->latency(2) == std::nullopt);
  // The newest complete checkpoint that had records' times: 1, not 2.
  auto latest = store->latest_latency();
  REQUIRE(latest.ok());
  REQUIRE(*latest);
  CHECK((*latest)->checkpoint == 1);
  CHECK((*latest)->latency == Latency{700, 1200, 1700, 1000});
  auto history = store->checkpoints();
  REQUIRE(history.ok());
  REQUIRE(history->size() == 2);
  CHECK((*history)[0].latency == Latency{700, 1200, 1700, 1000});
  CHECK((*history)[1].latency == std::nullopt);
}

TEST_CASE("a file that is not a state database is named, and left as it was") {
  kpipe::test::TempDir dir;
  std::string text = "meeting notes, not a database\n";
  std::string path = dir.write("notes.db", text);
  auto store = StateStore::open(path);
  REQUIRE_FALSE(store.ok());
  CHECK(store.error().status == ExitStatus::kFailure);
  CHECK(store.error().message == "'" + path + "' is not a kpipe state database");
  auto existing = StateStore::open_existing(path);
  REQUIRE_FALSE(existing.ok());
  CHECK(existing.error().message == "'" + path + "' is not a kpipe state database");
  CHECK(StateStore::check_file(path).empty());
  CHECK(kpipe::test::read_file(path) == text);
}

TEST_CASE("a damaged state file is named as damaged, and check_file says where") {
  kpipe::test::TempDir dir;
  std::string path = dir.file("state.db");
  {
    auto store = StateStore::open(path);
    REQUIRE(store.ok());
    MapEngine e;
    for (int i = 0; i < 200; ++i) e.put("key" + std::to_string(i), std::string(100, 'v'));
    snapshot(**store, e, 1);
    complete(**store, 1, 10);
  }
  // Every page after the first (the schema) overwritten with noise.
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  std::string noise(static_cast<size_t>(st.st_size) - 4096, '\xa5');
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::pwrite(fd, noise.data(), noise.size(), 4096) == static_cast<ssize_t>(noise.size()));
  ::close(fd);
  std::string damaged =
      "state database '" + path + "': the file is damaged (database disk image is malformed)";
  auto store = StateStore::open(path);
  REQUIRE_FALSE(store.ok());
  CHECK(store.error().message == damaged);
  auto existing = StateStore::open_existing(path);
  REQUIRE_FALSE(existing.ok());
  CHECK(existing.error().message == damaged);
  auto problems = StateStore::check_file(path);
  CHECK_FALSE(problems.empty());
  CHECK(problems.size() <= 11);
}

// --- an instance's identity (kpipe(7), MANY INSTANCES) ----------------------

TEST_CASE("register_instance: the host's name, the next free one, or the name given",
          "[group][lock]") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  auto store = file_store(path);
  char host[256] = {};
  REQUIRE(::gethostname(host, sizeof host - 1) == 0);
  std::string base(host);
  base = base.substr(0, base.find('.'));
  CHECK_FALSE(*store->owned_by_group());

  // Another live process holds the host's name: the next is taken.
  ChildLock first(path, "instance:" + base, false);
  REQUIRE(first.answer() == "held");
  auto name = store->register_instance("", "clicks", 1000);
  REQUIRE(name.ok());
  CHECK(*name == base + "-2");
  // A registered instance keeps the store by partition before any claim.
  CHECK(*store->owned_by_group());

  // A name given that another holds is refused, naming the holder.
  ChildLock named(path, "instance:east", false);
  REQUIRE(named.answer() == "held");
  auto refused = file_store(path)->register_instance("east", "clicks", 1000);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message ==
        fmt::format("instance 'east' of state database '{}' is in use by process {}: give each "
                    "instance its own --instance NAME",
                    path, named.pid()));
  auto west = file_store(path)->register_instance("west", "clicks", 1000);
  REQUIRE(west.ok());
  CHECK(*west == "west");
}

TEST_CASE("an instance's stage name is locked alone within its pipeline", "[group][lock]") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  auto store = file_store(path);
  REQUIRE(store->register_instance("a", "g", 1).ok());
  // Another pipeline's stage of the same name: both run.
  ChildLock other(path, "stage:kdedup@00000000000000bb", false);
  REQUIRE(other.answer() == "held");
  CHECK(store->lock_stage_as_kept("kdedup", "00000000000000aa").ok());
  // The same name twice in one pipeline: refused.
  ChildLock twin(path, "stage:kwindow@00000000000000aa", false);
  REQUIRE(twin.answer() == "held");
  Status s = file_store(path)->lock_stage_as_kept("kwindow", "00000000000000aa");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message ==
        fmt::format("stage 'kwindow' of state database '{}' is in use by process {} in the same "
                    "instance: two stages of a pipeline need distinct --name",
                    path, twin.pid()));
}

TEST_CASE("stage_running says whether a stage of one instance's pipeline still runs",
          "[group][lock]") {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  auto store = file_store(path);
  REQUIRE(store->register_instance("a", "g", 1).ok());
  std::string mine = store->pipeline_name();
  CHECK(mine.size() == 16);
  CHECK(*store->stage_running("kproduce", mine) == false);
  {
    // Another instance's kproduce does not commit as this instance's member.
    ChildLock other(path, "stage:kproduce@00000000000000bb", false);
    REQUIRE(other.answer() == "held");
    CHECK(*store->stage_running("kproduce", mine) == false);
    ChildLock ours(path, "stage:kproduce@" + mine, false);
    REQUIRE(ours.answer() == "held");
    CHECK(*store->stage_running("kproduce", mine) == true);
    CHECK(*store->stage_running("kdedup", mine) == false);
  }
  // Gone (the child has exited): its lock went with it.
  CHECK(*store->stage_running("kproduce", mine) == false);
  // This process's own stage counts too.
  REQUIRE(store->lock_stage_as_kept("kproduce", mine).ok());
  CHECK(*store->stage_running("kproduce", mine) == true);
}

TEST_CASE("complete_committed completes a transaction's checkpoint for the partitions given",
          "[group]") {
  test::TempDir dir;
  auto store = file_store(dir.file("p.db"));
  auto claims = store->claim({{"events", 0}, {"events", 1}}, 100);
  REQUIRE(claims.ok());
  auto id = store->record_emitted(200);
  REQUIRE(id.ok());
  // The partitions went to two new owners: each completes its share.
  Checkpoint c;
  c.id = *id;
  c.at = 200;
  c.offsets = {{"events", 0, 17}};
  REQUIRE(store->complete_committed(c, kTransactionCompleter, 300).ok());
  CHECK(*store->completed_by(*id) == kTransactionCompleter);
  c.offsets = {{"events", 1, 23}};
  REQUIRE(store->complete_committed(c, kTransactionCompleter, 310).ok());
  auto offsets = store->offsets();
  REQUIRE(offsets.ok());
  REQUIRE(offsets->size() == 2);
  CHECK((*offsets)[0].offset == 17);
  CHECK((*offsets)[1].offset == 23);
  CHECK((*offsets)[1].checkpoint == *id);
  // Again (another restart): nothing moves back.
  c.offsets = {{"events", 1, 5}};
  REQUIRE(store->complete_committed(c, kTransactionCompleter, 320).ok());
  CHECK((*store->offsets())[1].offset == 23);
}
