#include "kpipe/store/state_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "kpipe/store/postgres_state_lock.h"
#include "kpipe/target.h"

namespace kpipe {

namespace {

// Written once for both dialects: {int} and {blob} are each dialect's
// types, {without_rowid} SQLite's clustered table, {seal_*} the seal as
// each computes it (migrations()). "offset" is quoted: PostgreSQL reserves
// the word.
const std::vector<const char*> kMigrationTexts = {
    // v1
    "CREATE TABLE checkpoints ("
    "  id {id},"
    "  emitted_at {int} NOT NULL,"
    "  completed_at {int},"
    "  completed_by TEXT"
    ");"
    "CREATE TABLE checkpoint_offsets ("
    "  checkpoint {int} NOT NULL REFERENCES checkpoints(id) ON DELETE CASCADE,"
    "  topic TEXT NOT NULL,"
    "  partition {int} NOT NULL,"
    "  \"offset\" {int} NOT NULL,"
    "  PRIMARY KEY (checkpoint, topic, partition)"
    ");"
    // The pipeline's positions: what kconsume resumes from.
    "CREATE TABLE offsets ("
    "  topic TEXT NOT NULL,"
    "  partition {int} NOT NULL,"
    "  \"offset\" {int} NOT NULL,"
    "  checkpoint {int} NOT NULL,"
    "  committed_at {int} NOT NULL,"
    "  PRIMARY KEY (topic, partition)"
    ");"
    // Stage state, versioned by checkpoint: an entry lives from the
    // checkpoint that added it until the one that removed (or replaced) it.
    "CREATE TABLE stage_state ("
    "  stage TEXT NOT NULL,"
    "  key {blob} NOT NULL,"
    "  value {blob} NOT NULL,"
    "  added {int} NOT NULL,"
    "  removed {int},"
    "  PRIMARY KEY (stage, key, added)"
    "){without_rowid};"
    "CREATE INDEX stage_state_live ON stage_state (stage, key) WHERE removed IS NULL;"
    "CREATE TABLE stage_snapshots ("
    "  stage TEXT NOT NULL,"
    "  checkpoint {int} NOT NULL,"
    "  saved_at {int} NOT NULL,"
    "  entries {int} NOT NULL,"
    "  bytes {int} NOT NULL,"
    "  PRIMARY KEY (stage, checkpoint)"
    ");",
    // v2: the primary key's (stage, key) prefix finds a key's live entry;
    // a second index only made every snapshot write slower.
    "DROP INDEX stage_state_live;",
    // v3 (kpipe(7), CONTROL LINES AND CHECKPOINTS): a seal on each row of
    // the tables that decide where the pipeline resumes, so that verify
    // tells rows kpipe wrote from rows another program changed; and each
    // process's run, the checkpoints it wrote as kconsume or as a stage,
    // so that verify sees two processes that wrote as one at once. Rows
    // already there are sealed as they are.
    "ALTER TABLE offsets ADD COLUMN seal {int};"
    "ALTER TABLE checkpoints ADD COLUMN seal {int};"
    "ALTER TABLE checkpoint_offsets ADD COLUMN seal {int};"
    "ALTER TABLE stage_snapshots ADD COLUMN seal {int};"
    "{seal_function}"
    "UPDATE offsets SET seal = {seal_offsets_v3};"
    "UPDATE checkpoints SET seal = {seal_checkpoints};"
    "UPDATE checkpoint_offsets SET seal = {seal_checkpoint_offsets_v3};"
    "UPDATE stage_snapshots SET seal = {seal_stage_snapshots};"
    // role: 'kconsume' or 'stage:NAME'; run: random per process.
    "CREATE TABLE kpipe_runs ("
    "  role TEXT NOT NULL,"
    "  run {int} NOT NULL,"
    "  pid {int} NOT NULL,"
    "  first_checkpoint {int} NOT NULL,"
    "  last_checkpoint {int} NOT NULL,"
    "  seal {int},"
    "  PRIMARY KEY (role, run)"
    ");",
    // v4 (kpipe(7), MANY INSTANCES): the instances of a consumer group of
    // pipelines share the store; each partition has one owner at a time,
    // whose epoch grows with every take-over, and checkpoint ids come from
    // one sequence so that no two instances emit the same.
    "CREATE TABLE partition_owners ("
    "  topic TEXT NOT NULL,"
    "  partition {int} NOT NULL,"
    "  epoch {int} NOT NULL,"
    "  run {int} NOT NULL,"
    "  pid {int} NOT NULL,"
    "  host TEXT NOT NULL,"
    "  claimed_at {int} NOT NULL,"
    "  PRIMARY KEY (topic, partition)"
    ");"
    "CREATE TABLE kpipe_sequences (name TEXT PRIMARY KEY, value {int} NOT NULL);"
    "INSERT INTO kpipe_sequences (name, value) "
    "SELECT 'checkpoint', COALESCE(MAX(id), 0) FROM checkpoints;",
    // v5: the timestamps of the records each checkpoint covers (how many,
    // their median, 1st percentile and minimum), so that its end-to-end
    // latency follows from its completion time (kcheckpoint history).
    "ALTER TABLE checkpoints ADD COLUMN records {int};"
    "ALTER TABLE checkpoints ADD COLUMN ts_p50 {int};"
    "ALTER TABLE checkpoints ADD COLUMN ts_p01 {int};"
    "ALTER TABLE checkpoints ADD COLUMN ts_min {int};",
    // v6 (kpipe(7), MANY INSTANCES): each instance's name, stable across
    // its restarts, and who holds it now; a row marks the store as kept by
    // a consumer group's instances before any partition is claimed.
    "CREATE TABLE kpipe_instances ("
    "  name TEXT PRIMARY KEY,"
    "  group_id TEXT NOT NULL,"
    "  run {int} NOT NULL,"
    "  pid {int} NOT NULL,"
    "  host TEXT NOT NULL,"
    "  started_at {int} NOT NULL"
    ");",
    // v7 (kpipe(7), LOGS): a Kinesis sequence number, a decimal beyond any
    // integer column, kept as text beside "offset" (0 then). The seals now
    // cover it: rows sealed as they were are sealed anew, and a row changed
    // outside kpipe before stays unsealed.
    "ALTER TABLE offsets ADD COLUMN sequence TEXT;"
    "ALTER TABLE checkpoint_offsets ADD COLUMN sequence TEXT;"
    "UPDATE offsets SET seal = {seal_offsets} WHERE seal = {seal_offsets_v3};"
    "UPDATE checkpoint_offsets SET seal = {seal_checkpoint_offsets} "
    "WHERE seal = {seal_checkpoint_offsets_v3};",
};

// What each table's seal covers, in verify's words; every statement that
// writes one of these rows computes the same kpipe_seal of the same
// columns, in this order.
struct SealedTable {
  const char* table;
  const char* columns;  // sealed, in order
  const char* row;      // how verify names a row: an SQL expression
};
const SealedTable kSealedTables[] = {
    {"offsets", "topic, partition, \"offset\", checkpoint, committed_at, sequence",
     "topic || '/' || partition"},
    {"checkpoints", "id, emitted_at, completed_at, completed_by", "id"},
    {"checkpoint_offsets", "checkpoint, topic, partition, \"offset\", sequence",
     "checkpoint || ' ' || topic || '/' || partition"},
    {"stage_snapshots", "stage, checkpoint, saved_at, entries, bytes",
     "stage || ' ' || checkpoint"},
    {"kpipe_runs", "role, run, pid, first_checkpoint, last_checkpoint", "role || ' ' || pid"},
};

// kpipe_seal on PostgreSQL: each value as text, NULL as \x1e, joined by
// \x1f, and the first 64 bits of their MD5. SQLite's is a C function
// (sqlite.cpp); the seals of one database are all of one kind.
constexpr const char* kPostgresSealFunction =
    "CREATE OR REPLACE FUNCTION kpipe_seal(VARIADIC v text[]) RETURNS bigint"
    " LANGUAGE sql IMMUTABLE PARALLEL SAFE AS"
    " $$ SELECT ('x' || left(md5(array_to_string(v, E'\\x1f', E'\\x1e')), 16))::bit(64)::bigint "
    "$$;";

// The seal of a row of `columns` ("a, b, c").
std::string seal_of(Dialect dialect, std::string_view columns) {
  std::vector<std::string_view> args;
  for (;;) {
    size_t comma = columns.find(", ");
    args.push_back(columns.substr(0, comma));
    if (comma == std::string_view::npos) break;
    columns.remove_prefix(comma + 2);
  }
  return seal_call(dialect, args);
}

// The seal of a table's row, of its own columns (a migration's UPDATE).
std::string seal_columns(Dialect dialect, const char* table) {
  for (const auto& t : kSealedTables) {
    if (std::string_view(t.table) == table) return seal_of(dialect, t.columns);
  }
  return {};
}

std::vector<std::string> migrations(Dialect dialect) {
  bool pg = dialect == Dialect::kPostgres;
  return dialect_migrations(
      dialect, kMigrationTexts,
      {{"id", pg ? "BIGINT PRIMARY KEY" : "INTEGER PRIMARY KEY"},
       {"without_rowid", pg ? "" : " WITHOUT ROWID"},
       {"seal_function", pg ? kPostgresSealFunction : ""},
       {"seal_offsets", seal_columns(dialect, "offsets")},
       // The seals before v7's sequence column.
       {"seal_offsets_v3",
        seal_of(dialect, "topic, partition, \"offset\", checkpoint, committed_at")},
       {"seal_checkpoint_offsets_v3", seal_of(dialect, "checkpoint, topic, partition, \"offset\"")},
       {"seal_checkpoints", seal_columns(dialect, "checkpoints")},
       {"seal_checkpoint_offsets", seal_columns(dialect, "checkpoint_offsets")},
       {"seal_stage_snapshots", seal_columns(dialect, "stage_snapshots")}});
}

// At most this many lines per kind of problem: a table rewritten by hand
// would otherwise print one line per row.
constexpr int kMaxLinesPerCheck = 10;

int64_t random_run() {
  std::random_device device;
  uint64_t r = (static_cast<uint64_t>(device()) << 32) ^ device();
  return static_cast<int64_t>(r >> 1);
}

// A partition's entries in stage_state are the engine's keys after a
// prefix of the partition (kpipe(7), MANY INSTANCES): "@TOPIC/PARTITION/".
// Engines' own keys never begin with '@', and topic names hold no '/', so
// a partition's entries are the keys in [prefix, prefix with its last '/'
// made '0'), one range of the primary key.
constexpr char kSliceMark = '@';
std::string slice_prefix(const TopicPartition& p) {
  return fmt::format("{}{}/{}/", kSliceMark, p.topic, p.partition);
}
std::string slice_end(std::string prefix) {
  prefix.back() = '0';  // '/' + 1
  return prefix;
}

// Brings a stage's entries of one partition back to a checkpoint: drops
// what was saved after it, and revives what was removed after it.
class SliceRewind {
 public:
  static Expected<SliceRewind> prepare(Database& db) {
    auto drop = db.prepare(
        "DELETE FROM stage_state WHERE stage = ?1 AND key >= ?2 AND key < ?3 AND added > ?4");
    if (!drop) return drop.take_error();
    auto revive = db.prepare(
        "UPDATE stage_state SET removed = NULL WHERE stage = ?1 AND key >= ?2 AND key < ?3 AND "
        "removed > ?4");
    if (!revive) return revive.take_error();
    return SliceRewind(std::move(*drop), std::move(*revive));
  }

  // The partition's entries are the keys in [lo, hi) (slice_prefix).
  Status run(std::string_view stage, const std::string& lo, const std::string& hi,
             int64_t checkpoint) {
    for (Statement* stmt : {&drop_, &revive_}) {
      stmt->bind_text(1, stage).bind_blob(2, lo).bind_blob(3, hi).bind(4, checkpoint);
      KPIPE_TRY(stmt->run());
    }
    return {};
  }

 private:
  SliceRewind(Statement drop, Statement revive)
      : drop_(std::move(drop)), revive_(std::move(revive)) {}
  Statement drop_;
  Statement revive_;
};

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

// Runs `sql`, whose parameters are a stage and a checkpoint id.
Status run_for_stage(Database& db, std::string_view sql, std::string_view stage,
                     int64_t checkpoint) {
  auto stmt = db.prepare(sql);
  if (!stmt) return stmt.take_error();
  stmt->bind_text(1, stage).bind(2, checkpoint);
  return stmt->run();
}

}  // namespace

StateStore::StateStore(std::unique_ptr<Database> owned, Database* db)
    : owned_(std::move(owned)), db_(db), run_(random_run()) {}

namespace {

// A stage's lock within one instance's pipeline (lock_stage_as_kept).
std::string instance_stage_lock(std::string_view stage, std::string_view pipeline) {
  return fmt::format("stage:{}@{}", stage, pipeline);
}

}  // namespace

StateStore::~StateStore() {
  // A clean exit lets its locks go at once, not when the server notices
  // the connection closed (a stage started right after would be refused).
  if (session_locks_) release_postgres_state_locks(*db_);
}

Status StateStore::lock(const std::string& name, bool shared, StateLock::BusyMessage busy) {
  if (db_->path() == ":memory:") return {};
  if (db_->postgres()) {
    KPIPE_TRY(take_postgres_state_lock(*db_, name, shared, busy));
    session_locks_ = true;
    return {};
  }
  auto held = StateLock::take(db_->path(), name, busy, shared);
  if (!held) return held.take_error();
  locks_.push_back(std::move(*held));
  return {};
}

Status StateStore::lock_stage(std::string_view stage, bool shared) {
  std::string name(stage);
  const std::string& path = db_->path();
  return lock("stage:" + name, shared, [&](const std::string& holder) {
    if (shared)
      return fmt::format(
          "stage '{}' of state database '{}' is in use by {}, a pipeline that is not an instance "
          "of a consumer group: one pipeline per state file",
          name, path, holder);
    return fmt::format(
        "stage '{}' of state database '{}' is in use by {}: two stages of a pipeline need "
        "distinct --name; one pipeline per state file",
        name, path, holder);
  });
}

Status StateStore::lock_pipeline(bool shared) {
  const std::string& path = db_->path();
  return lock("kconsume", shared, [&](const std::string& holder) {
    if (shared)
      return fmt::format(
          "state database '{}' is in use by {} (the kconsume of a pipeline that is not an "
          "instance of a consumer group, or kcheckpoint rewriting its offsets)",
          path, holder);
    return fmt::format(
        "state database '{}' is in use by {} (the kconsume of a pipeline, or kcheckpoint "
        "rewriting its offsets): one pipeline per state file",
        path, holder);
  });
}

Expected<bool> StateStore::held(const std::string& name) {
  if (db_->path() == ":memory:") return false;
  if (db_->postgres()) return postgres_state_lock_held(*db_, name);
  auto pid = StateLock::holder(db_->path(), name);
  if (!pid) return pid.take_error();
  return *pid != 0;
}

std::string StateStore::pipeline_name() const {
  return fmt::format("{:016x}", static_cast<uint64_t>(run_));
}

Expected<bool> StateStore::stage_running(std::string_view stage, std::string_view pipeline) {
  return held(instance_stage_lock(stage, pipeline));
}

Status StateStore::lock_stage_as_kept(std::string_view stage, std::string_view pipeline) {
  if (pipeline.empty()) {
    auto grouped = owned_by_group();
    if (!grouped) return grouped.take_error();
    return lock_stage(stage, *grouped);
  }
  KPIPE_TRY(lock_stage(stage, /*shared=*/true));
  // Keyed by the instance's kconsume run, not by the instance's name: the
  // stages of a killed run may still drain their input while the same
  // instance starts again.
  std::string name(stage);
  const std::string& path = db_->path();
  return lock(instance_stage_lock(name, pipeline), false, [&](const std::string& holder) {
    return fmt::format(
        "stage '{}' of state database '{}' is in use by {} in the same instance: two stages of a "
        "pipeline need distinct --name",
        name, path, holder);
  });
}

Expected<std::string> StateStore::register_instance(std::string_view name, std::string_view group,
                                                    Millis now) {
  std::string host = this_host();
  // The short name: a host's domain says nothing an instance needs.
  std::string base = host.substr(0, host.find('.'));
  const std::string& path = db_->path();
  std::string taken;
  for (int slot = 1;; ++slot) {
    std::string candidate = !name.empty() ? std::string(name)
                            : slot == 1   ? base
                                          : fmt::format("{}-{}", base, slot);
    bool busy = false;
    std::string holder;
    Status s = lock("instance:" + candidate, false, [&](const std::string& h) {
      busy = true;
      holder = h;
      return fmt::format("instance '{}' of state database '{}' is in use by {}", candidate, path,
                         h);
    });
    if (s.ok()) {
      taken = candidate;
      break;
    }
    if (!busy) return s.take_error();
    if (!name.empty()) {
      // Where the holder runs, as it recorded itself: a lock on SQLite
      // knows only its pid.
      auto who = db_->prepare("SELECT pid, host FROM kpipe_instances WHERE name = ?");
      if (!who) return who.take_error();
      who->bind_text(1, candidate);
      auto row = who->step();
      if (!row) return row.take_error();
      if (*row && holder.find(" on ") == std::string::npos)
        holder = fmt::format("process {} on {}", who->column_int(0), who->column_text(1));
      return failure(
          "instance '{}' of state database '{}' is in use by {}: give each instance its own "
          "--instance NAME",
          candidate, path, holder);
    }
    if (slot >= 1000)
      return failure("state database '{}': no free instance name from '{}' to '{}-{}'", path, base,
                     base, slot);
  }
  auto stmt = db_->prepare(
      "INSERT INTO kpipe_instances (name, group_id, run, pid, host, started_at) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (name) DO UPDATE SET group_id = "
      "excluded.group_id, run = excluded.run, pid = excluded.pid, host = excluded.host, "
      "started_at = excluded.started_at");
  if (!stmt) return stmt.take_error();
  stmt->bind_text(1, taken)
      .bind_text(2, group)
      .bind(3, run_)
      .bind(4, static_cast<int64_t>(::getpid()))
      .bind_text(5, host)
      .bind(6, now);
  KPIPE_TRY(stmt->run());
  return taken;
}

Status StateStore::lock_offsets() {
  const std::string& path = db_->path();
  return lock("kconsume", false, [&](const std::string& holder) {
    return fmt::format(
        "state database '{}' is in use by {} (the pipeline's kconsume, or another "
        "kcheckpoint): stop the pipeline before rewriting its offsets",
        path, holder);
  });
}

Status StateStore::note_run(std::string_view role, int64_t checkpoint) {
  Dialect d = db_->dialect();
  // SQLite's MIN(a, b) is PostgreSQL's LEAST(a, b): CASE is both's.
  constexpr std::string_view kFirst =
      "CASE WHEN kpipe_runs.first_checkpoint < excluded.first_checkpoint THEN "
      "kpipe_runs.first_checkpoint ELSE excluded.first_checkpoint END";
  constexpr std::string_view kLast =
      "CASE WHEN kpipe_runs.last_checkpoint > excluded.last_checkpoint THEN "
      "kpipe_runs.last_checkpoint ELSE excluded.last_checkpoint END";
  auto stmt = db_->prepare(fmt::format(
      "INSERT INTO kpipe_runs (role, run, pid, first_checkpoint, last_checkpoint, seal) "
      "VALUES (?1, ?2, ?3, ?4, ?4, {}) "
      "ON CONFLICT(role, run) DO UPDATE SET first_checkpoint = {}, last_checkpoint = {}, seal = {}",
      seal_call(d, {"?1", "?2", "?3", "?4", "?4"}), kFirst, kLast,
      seal_call(d, {"kpipe_runs.role", "kpipe_runs.run", "kpipe_runs.pid", kFirst, kLast})));
  if (!stmt) return stmt.take_error();
  stmt->bind_text(1, role)
      .bind(2, run_)
      .bind(3, static_cast<int64_t>(::getpid()))
      .bind(4, checkpoint);
  return stmt->run();
}

OpenOptions state_options() {
  OpenOptions options;
  options.kind = "state database";
  options.not_kind = "a kpipe state database";
  return options;
}

Expected<std::unique_ptr<StateStore>> StateStore::open(const std::string& path) {
  auto db = Database::open(path, state_options());
  if (!db) return db.take_error();
  Database* raw = db->get();
  std::unique_ptr<StateStore> store(new StateStore(std::move(*db), raw));
  KPIPE_TRY(store->migrate());
  return store;
}

Expected<std::unique_ptr<StateStore>> StateStore::open_existing(const std::string& path) {
  if (is_postgres_target(path)) {
    auto db = Database::open(path);
    if (!db) return db.take_error();
    // Only reads: a role that may only read the tables is enough, and
    // nothing is created by mistake.
    KPIPE_TRY((*db)->exec("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY"));
    auto marked = (*db)->has_table("kpipe_schema");
    if (!marked) return marked.take_error();
    if (!*marked) return failure("'{}' is not a kpipe state database", (*db)->path());
    return check_version(std::move(*db));
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return failure("state database '{}' does not exist", path);
    return failure("cannot open state database '{}': {}", path, std::strerror(errno));
  }
  OpenOptions options = state_options();
  options.create = false;
  options.read_only = true;
  options.wal = false;
  auto db = Database::open(path, options);
  if (!db) return db.take_error();
  return check_version(std::move(*db));
}

Expected<std::unique_ptr<StateStore>> StateStore::check_version(std::unique_ptr<Database> db) {
  const std::string path = db->path();
  // In a scope of its own: the statement's read transaction ends with it.
  Expected<int64_t> version = [&]() -> Expected<int64_t> {
    auto stmt = db->prepare("SELECT version FROM kpipe_schema WHERE component = 'state'");
    if (!stmt) {
      const std::string& why = stmt.error().message;
      if (why.find("no such table") == std::string::npos &&
          why.find("not a database") == std::string::npos)
        return stmt.take_error();
      return failure("'{}' is not a kpipe state database", path);
    }
    // A failure here is the file's (damaged, say): its message says so.
    auto row = stmt->step();
    if (!row) return row.take_error();
    if (!*row) return failure("'{}' is not a kpipe state database", path);
    return stmt->column_int(0);
  }();
  if (!version) return version.take_error();
  auto known = static_cast<int64_t>(kMigrationTexts.size());
  if (*version > known)
    return failure(
        "{}: the 'state' tables are at schema version {}, newer than this program knows ({}); "
        "upgrade kpipe",
        path, *version, known);
  if (*version < known)
    return failure(
        "{}: the 'state' tables are at schema version {}, older than this program's ({}); run the "
        "pipeline or kcheckpoint commit on it once to upgrade them",
        path, *version, known);
  Database* raw = db.get();
  return std::unique_ptr<StateStore>(new StateStore(std::move(db), raw));
}

Expected<std::unique_ptr<StateStore>> StateStore::attach(Database& db) {
  std::unique_ptr<StateStore> store(new StateStore(nullptr, &db));
  KPIPE_TRY(store->migrate());
  return store;
}

Status StateStore::migrate() {
  // Snapshots touch many pages at once: a larger page cache than SQLite's
  // 2 MiB default keeps a checkpoint's writes from thrashing it.
  if (!db_->postgres()) KPIPE_TRY(db_->exec("PRAGMA cache_size=-65536"));
  return db_->migrate("state", migrations(db_->dialect()));
}

Expected<int64_t> StateStore::next_checkpoint_id() {
  auto stmt = db_->prepare("SELECT COALESCE(MAX(id), 0) FROM checkpoints");
  if (!stmt) return stmt.take_error();
  auto row = stmt->step();
  if (!row) return row.take_error();
  return stmt->column_int(0) + 1;
}

namespace {

void bind_timestamps(Statement& stmt, const std::optional<TimestampSummary>& ts) {
  if (!ts) {
    for (int i = 3; i <= 6; ++i) stmt.bind_null(i);
    return;
  }
  stmt.bind(3, static_cast<int64_t>(ts->records))
      .bind(4, ts->p50)
      .bind(5, ts->p01)
      .bind(6, ts->min);
}

}  // namespace

Status StateStore::record_emitted(int64_t id, Millis at,
                                  const std::optional<TimestampSummary>& ts) {
  auto tx = Transaction::begin(*db_);
  if (!tx) return tx.take_error();
  auto stmt = db_->prepare(
      fmt::format("INSERT INTO checkpoints (id, emitted_at, seal, records, ts_p50, ts_p01, ts_min) "
                  "VALUES (?1, ?2, {}, ?3, ?4, ?5, ?6) ON CONFLICT (id) DO NOTHING",
                  seal_call(db_->dialect(), {"?1", "?2", "NULL", "NULL"})));
  if (!stmt) return stmt.take_error();
  stmt->bind(1, id).bind(2, at);
  bind_timestamps(*stmt, ts);
  KPIPE_TRY(stmt->run());
  // Instances of a consumer group later on this store take ids past it.
  auto bump = db_->prepare(
      "UPDATE kpipe_sequences SET value = ?1 WHERE name = 'checkpoint' AND value < ?1");
  if (!bump) return bump.take_error();
  bump->bind(1, id);
  KPIPE_TRY(bump->run());
  KPIPE_TRY(note_run("kconsume", id));
  return tx->commit();
}

Expected<int64_t> StateStore::record_emitted(Millis at, const std::optional<TimestampSummary>& ts) {
  auto tx = Transaction::begin(*db_);
  if (!tx) return tx.take_error();
  // The row lock (PostgreSQL) or the write lock (SQLite) makes the
  // instances take ids one after the other.
  auto next = db_->prepare(
      "UPDATE kpipe_sequences SET value = value + 1 WHERE name = 'checkpoint' RETURNING value");
  if (!next) return next.take_error();
  auto row = next->step();
  if (!row) return row.take_error();
  if (!*row) return failure("{}: the checkpoint sequence is missing", db_->path());
  int64_t id = next->column_int(0);
  next->reset();
  auto stmt = db_->prepare(
      fmt::format("INSERT INTO checkpoints (id, emitted_at, seal, records, ts_p50, ts_p01, ts_min) "
                  "VALUES (?1, ?2, {}, ?3, ?4, ?5, ?6)",
                  seal_call(db_->dialect(), {"?1", "?2", "NULL", "NULL"})));
  if (!stmt) return stmt.take_error();
  stmt->bind(1, id).bind(2, at);
  bind_timestamps(*stmt, ts);
  KPIPE_TRY(stmt->run());
  // Each instance writes as a role of its own: many at once is the design.
  KPIPE_TRY(note_run(fmt::format("member:kconsume:{}", run_), id));
  KPIPE_TRY(tx->commit());
  return id;
}

Expected<bool> StateStore::owned_by_group() {
  auto stmt = db_->prepare(
      "SELECT (SELECT COUNT(*) FROM partition_owners) + (SELECT COUNT(*) FROM kpipe_instances)");
  if (!stmt) return stmt.take_error();
  auto row = stmt->step();
  if (!row) return row.take_error();
  return stmt->column_int(0) > 0;
}

Expected<std::vector<PartitionClaim>> StateStore::claim(std::vector<TopicPartition> partitions,
                                                        Millis now) {
  // One order for every writer of owners' rows: no two transactions wait
  // on each other's (PostgreSQL).
  std::sort(partitions.begin(), partitions.end());
  auto tx = Transaction::begin(*db_);
  if (!tx) return tx.take_error();
  auto take = db_->prepare(
      "INSERT INTO partition_owners (topic, partition, epoch, run, pid, host, claimed_at) "
      "VALUES (?1, ?2, 1, ?3, ?4, ?5, ?6) ON CONFLICT (topic, partition) DO UPDATE SET "
      "epoch = partition_owners.epoch + 1, run = excluded.run, pid = excluded.pid, "
      "host = excluded.host, claimed_at = excluded.claimed_at RETURNING epoch");
  if (!take) return take.take_error();
  auto position = db_->prepare(
      "SELECT \"offset\", sequence, checkpoint FROM offsets WHERE topic = ? AND "
      "partition = ?");
  if (!position) return position.take_error();
  // The stages whose entries may hold the partition's.
  std::vector<std::string> stages;
  {
    auto names = db_->prepare("SELECT DISTINCT stage FROM stage_snapshots");
    if (!names) return names.take_error();
    for (;;) {
      auto row = names->step();
      if (!row) return row.take_error();
      if (!*row) break;
      stages.emplace_back(names->column_text(0));
    }
  }
  auto rewind = SliceRewind::prepare(*db_);
  if (!rewind) return rewind.take_error();
  auto prune = db_->prepare(
      "DELETE FROM stage_state WHERE stage = ?1 AND key >= ?2 AND key < ?3 AND removed <= ?4");
  if (!prune) return prune.take_error();
  std::string host = this_host();
  std::vector<PartitionClaim> out;
  for (const TopicPartition& p : partitions) {
    PartitionClaim c;
    c.partition = p;
    take->bind_text(1, p.topic)
        .bind(2, static_cast<int64_t>(p.partition))
        .bind(3, run_)
        .bind(4, static_cast<int64_t>(::getpid()))
        .bind_text(5, host)
        .bind(6, now);
    auto row = take->step();
    if (!row) return row.take_error();
    c.epoch = take->column_int(0);
    take->reset();
    position->bind_text(1, p.topic).bind(2, static_cast<int64_t>(p.partition));
    auto found = position->step();
    if (!found) return found.take_error();
    if (*found) {
      auto at = column_position(*position, 0, "offsets");
      if (!at) return at.take_error();
      c.offset = std::move(*at);
      c.checkpoint = position->column_int(2);
    }
    position->reset();
    // A position set by hand (kcheckpoint reset) moves where the partition
    // resumes, not its state: that stays the last complete checkpoint's.
    if (c.checkpoint == 0) {
      auto last = last_completed(p);
      if (!last) return last.take_error();
      c.checkpoint = *last;
    }
    // What the last owner saved past its last complete checkpoint belongs
    // to records that will be read again; what it removed before it is
    // history.
    std::string lo = slice_prefix(p);
    std::string hi = slice_end(lo);
    for (const std::string& stage : stages) {
      KPIPE_TRY(rewind->run(stage, lo, hi, c.checkpoint));
      prune->bind_text(1, stage).bind_blob(2, lo).bind_blob(3, hi).bind(4, c.checkpoint);
      KPIPE_TRY(prune->run());
    }
    out.push_back(std::move(c));
  }
  KPIPE_TRY(tx->commit());
  return out;
}

// Stores checkpoint `id`'s offsets and makes them the partitions'
// positions, inside the caller's transaction. `stale` says what to do with
// a partition the store holds at checkpoint `id` or later already.
Status StateStore::store_offsets(int64_t id, const std::vector<PartitionOffset>& offsets,
                                 Millis now, Stale stale) {
  auto off = db_->prepare(fmt::format(
      "INSERT INTO checkpoint_offsets (checkpoint, topic, partition, \"offset\", sequence, seal) "
      "VALUES (?1, ?2, ?3, ?4, ?5, {}) ON CONFLICT (checkpoint, topic, partition) DO UPDATE SET "
      "\"offset\" = excluded.\"offset\", sequence = excluded.sequence, seal = excluded.seal",
      seal_call(db_->dialect(), {"?1", "?2", "?3", "?4", "?5"})));
  if (!off) return off.take_error();
  auto pos = prepare_position();
  if (!pos) return pos.take_error();
  auto stored = db_->prepare("SELECT checkpoint FROM offsets WHERE topic = ? AND partition = ?");
  if (!stored) return stored.take_error();
  for (const auto& o : offsets) {
    if (stale != Stale::kUnchecked) {
      stored->bind_text(1, o.topic).bind(2, static_cast<int64_t>(o.partition));
      auto row = stored->step();
      if (!row) return row.take_error();
      int64_t before = *row ? stored->column_int(0) : 0;
      stored->reset();
      if (before >= id && stale == Stale::kSkip) continue;
      if (before >= id)
        return failure(
            "checkpoint {} arrived after checkpoint {} completed partition {} [{}]: ids must grow",
            id, before, o.topic, o.partition);
    }
    off->bind(1, id).bind_text(2, o.topic).bind(3, static_cast<int64_t>(o.partition));
    bind_position(*off, 4, 5, o.offset);
    KPIPE_TRY(off->run());
    KPIPE_TRY(put_position(*pos, o, id, now));
  }
  return {};
}

Status StateStore::complete_committed(const Checkpoint& c, std::string_view by, Millis now) {
  auto tx = Transaction::begin(*db_);
  if (!tx) return tx.take_error();
  auto mark = db_->prepare(fmt::format(
      "UPDATE checkpoints SET completed_at = ?2, completed_by = ?3, seal = {} WHERE id = ?1 AND "
      "completed_at IS NULL",
      seal_call(db_->dialect(), {"id", "emitted_at", "?2", "?3"})));
  if (!mark) return mark.take_error();
  mark->bind(1, c.id).bind(2, now).bind_text(3, by);
  KPIPE_TRY(mark->run());
  KPIPE_TRY(store_offsets(c.id, c.offsets, now, Stale::kSkip));
  return tx->commit();
}

Expected<int64_t> StateStore::last_completed(const TopicPartition& p) {
  auto stmt = db_->prepare(
      "SELECT COALESCE(MAX(o.checkpoint), 0) FROM checkpoint_offsets o JOIN checkpoints c ON c.id "
      "= o.checkpoint WHERE o.topic = ? AND o.partition = ? AND c.completed_at IS NOT NULL");
  if (!stmt) return stmt.take_error();
  stmt->bind_text(1, p.topic).bind(2, static_cast<int64_t>(p.partition));
  auto row = stmt->step();
  if (!row) return row.take_error();
  return stmt->column_int(0);
}

Status StateStore::check_owners(std::vector<PartitionOffset> owned, std::string_view what) {
  std::sort(owned.begin(), owned.end());
  for (const auto& o : owned) KPIPE_TRY(check_owner({o.topic, o.partition}, o.epoch, what));
  return {};
}

Status StateStore::check_owner(const TopicPartition& p, int64_t epoch, std::string_view what) {
  // FOR SHARE holds a take-over (claim's update) until this transaction
  // ends; SQLite's write lock does the same.
  auto stmt = db_->prepare(
      fmt::format("SELECT epoch, pid, host FROM partition_owners WHERE topic = ? AND partition = "
                  "?{}",
                  db_->postgres() ? " FOR SHARE" : ""));
  if (!stmt) return stmt.take_error();
  stmt->bind_text(1, p.topic).bind(2, static_cast<int64_t>(p.partition));
  auto row = stmt->step();
  if (!row) return row.take_error();
  if (!*row)
    return failure("{}: partition {} [{}] has no owner in '{}': was the state database replaced?",
                   what, p.topic, p.partition, db_->path());
  int64_t owner = stmt->column_int(0);
  if (owner == epoch) return {};
  return failure(
      "{}: fenced: partition {} [{}] was taken over by another instance (process {} on {}, "
      "epoch {}; this one's is {}): this instance lost it and stops",
      what, p.topic, p.partition, stmt->column_int(1), stmt->column_text(2), owner, epoch);
}

Expected<std::optional<int64_t>> StateStore::latest_complete() {
  auto stmt = db_->prepare("SELECT MAX(id) FROM checkpoints WHERE completed_at IS NOT NULL");
  if (!stmt) return stmt.take_error();
  auto row = stmt->step();
  if (!row) return row.take_error();
  return stmt->column_optional_int(0);
}

Expected<std::string> StateStore::completed_by(int64_t id) {
  auto stmt = db_->prepare(
      "SELECT COALESCE(completed_by, '') FROM checkpoints WHERE id = ? AND completed_at IS NOT "
      "NULL");
  if (!stmt) return stmt.take_error();
  stmt->bind(1, id);
  auto row = stmt->step();
  if (!row) return row.take_error();
  if (!*row) return std::string();
  return std::string(stmt->column_text(0));
}

Status StateStore::complete(const Checkpoint& c, std::string_view by, Millis now) {
  auto tx = Transaction::begin(*db_);
  if (!tx) return tx.take_error();
  KPIPE_TRY(complete_in_transaction(c, by, now));
  return tx->commit();
}

Status StateStore::complete_in_transaction(const Checkpoint& c, std::string_view by, Millis now) {
  // An instance's checkpoint (kpipe(7), MANY INSTANCES): its partitions'
  // owners decide, and ids grow per partition, since other instances
  // complete theirs in between.
  bool owned = std::any_of(c.offsets.begin(), c.offsets.end(),
                           [](const PartitionOffset& o) { return o.epoch > 0; });
  std::vector<PartitionOffset> offsets = c.offsets;
  if (owned) {
    auto done = completed_by(c.id);
    if (!done) return done.take_error();
    // A replayed checkpoint line (the terminal stage restarted and saw it
    // again): already complete, nothing to do.
    if (!done->empty()) return {};
    std::sort(offsets.begin(), offsets.end());
    KPIPE_TRY(check_owners(offsets, fmt::format("checkpoint {}", c.id)));
  } else {
    auto latest = latest_complete();
    if (!latest) return latest.take_error();
    if (*latest && **latest >= c.id) {
      if (**latest == c.id) return {};  // replayed, as above
      return failure("checkpoint {} arrived after checkpoint {} was complete: ids must grow", c.id,
                     **latest);
    }
  }
  Dialect d = db_->dialect();
  auto put = db_->prepare(fmt::format(
      "INSERT INTO checkpoints (id, emitted_at, completed_at, completed_by, seal) VALUES (?1, ?2, "
      "?3, ?4, {}) ON CONFLICT(id) DO UPDATE SET completed_at = excluded.completed_at, "
      "completed_by = excluded.completed_by, seal = {}",
      seal_call(d, {"?1", "?2", "?3", "?4"}),
      seal_call(d, {"checkpoints.id", "checkpoints.emitted_at", "excluded.completed_at",
                    "excluded.completed_by"})));
  if (!put) return put.take_error();
  put->bind(1, c.id).bind(2, c.at).bind(3, now).bind_text(4, by);
  KPIPE_TRY(put->run());
  KPIPE_TRY(store_offsets(c.id, offsets, now, owned ? Stale::kRefuse : Stale::kUnchecked));
  // Each instance writes as a role of its own: many at once is the design.
  KPIPE_TRY(note_run(
      owned ? fmt::format("member:stage:{}:{}", by, run_) : fmt::format("stage:{}", by), c.id));
  // Older checkpoints' offsets are history only: keep a bounded tail, the
  // checkpoints that stored a partition's position (an instance's partition
  // may not move for a long time), and the runs that wrote them.
  auto prune = db_->prepare(
      "DELETE FROM checkpoints WHERE id < ? - 1000 AND id NOT IN (SELECT checkpoint FROM offsets)");
  if (!prune) return prune.take_error();
  prune->bind(1, c.id);
  KPIPE_TRY(prune->run());
  auto prune_runs = db_->prepare("DELETE FROM kpipe_runs WHERE last_checkpoint < ? - 1000");
  if (!prune_runs) return prune_runs.take_error();
  prune_runs->bind(1, c.id);
  return prune_runs->run();
}

Expected<std::vector<StoredOffset>> StateStore::offsets() {
  auto stmt = db_->prepare(
      "SELECT topic, partition, \"offset\", sequence, checkpoint, committed_at FROM offsets "
      "ORDER BY topic, partition");
  if (!stmt) return stmt.take_error();
  std::vector<StoredOffset> out;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.take_error();
    if (!*row) break;
    auto at = column_position(*stmt, 2, "offsets");
    if (!at) return at.take_error();
    out.push_back({std::string(stmt->column_text(0)), static_cast<int32_t>(stmt->column_int(1)),
                   std::move(*at), stmt->column_int(4), stmt->column_int(5)});
  }
  return out;
}

Expected<Statement> StateStore::prepare_position() {
  return db_->prepare(fmt::format(
      "INSERT INTO offsets (topic, partition, \"offset\", checkpoint, committed_at, sequence, "
      "seal) "
      "VALUES "
      "(?1, ?2, ?3, ?4, ?5, ?6, {}) ON CONFLICT(topic, partition) DO UPDATE SET \"offset\" = "
      "excluded.\"offset\", checkpoint = excluded.checkpoint, committed_at = "
      "excluded.committed_at, sequence = excluded.sequence, seal = excluded.seal",
      seal_call(db_->dialect(), {"?1", "?2", "?3", "?4", "?5", "?6"})));
}

Status StateStore::put_position(Statement& pos, const PartitionOffset& o, int64_t checkpoint,
                                Millis now) {
  pos.bind_text(1, o.topic).bind(2, static_cast<int64_t>(o.partition));
  pos.bind(4, checkpoint).bind(5, now);
  bind_position(pos, 3, 6, o.offset);
  return pos.run();
}

Status StateStore::set_offsets(const std::vector<PartitionOffset>& offsets, Millis now) {
  auto tx = Transaction::begin(*db_);
  if (!tx) return tx.take_error();
  auto pos = prepare_position();
  if (!pos) return pos.take_error();
  for (const auto& o : offsets) KPIPE_TRY(put_position(*pos, o, 0, now));
  return tx->commit();
}

Expected<std::vector<CheckpointRecord>> StateStore::checkpoints() {
  auto stmt = db_->prepare(
      "SELECT c.id, c.emitted_at, c.completed_at, COALESCE(c.completed_by, ''), "
      "(SELECT COUNT(*) FROM checkpoint_offsets o WHERE o.checkpoint = c.id), c.records, "
      "c.ts_p50, c.ts_p01, c.ts_min FROM checkpoints c ORDER BY c.id");
  if (!stmt) return stmt.take_error();
  std::vector<CheckpointRecord> out;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.take_error();
    if (!*row) break;
    CheckpointRecord r;
    r.id = stmt->column_int(0);
    r.emitted_at = stmt->column_int(1);
    r.completed_at = stmt->column_optional_int(2);
    r.completed_by = std::string(stmt->column_text(3));
    r.partitions = stmt->column_int(4);
    if (auto records = stmt->column_optional_int(5); records && r.completed_at)
      r.latency = latency_at({static_cast<uint64_t>(*records), stmt->column_int(6),
                              stmt->column_int(7), stmt->column_int(8)},
                             *r.completed_at);
    out.push_back(std::move(r));
  }
  return out;
}

Expected<std::optional<CheckpointLatency>> StateStore::latency_of(std::optional<int64_t> id) {
  auto stmt = db_->prepare(
      fmt::format("SELECT id, completed_at, records, ts_p50, ts_p01, ts_min FROM checkpoints WHERE "
                  "completed_at IS NOT NULL AND records IS NOT NULL{} ORDER BY id DESC LIMIT 1",
                  id ? " AND id = ?1" : ""));
  if (!stmt) return stmt.take_error();
  if (id) stmt->bind(1, *id);
  auto row = stmt->step();
  if (!row) return row.take_error();
  if (!*row) return std::optional<CheckpointLatency>();
  return std::optional<CheckpointLatency>(
      {stmt->column_int(0),
       latency_at({static_cast<uint64_t>(stmt->column_int(2)), stmt->column_int(3),
                   stmt->column_int(4), stmt->column_int(5)},
                  stmt->column_int(1))});
}

Expected<std::optional<Latency>> StateStore::latency(int64_t id) {
  auto found = latency_of(id);
  if (!found) return found.take_error();
  if (!*found) return std::optional<Latency>();
  return std::optional<Latency>((*found)->latency);
}

Expected<std::optional<CheckpointLatency>> StateStore::latest_latency() {
  return latency_of(std::nullopt);
}

Expected<std::vector<SnapshotRecord>> StateStore::snapshots() {
  auto stmt = db_->prepare(
      "SELECT stage, checkpoint, saved_at, entries, bytes FROM stage_snapshots ORDER BY "
      "checkpoint, stage");
  if (!stmt) return stmt.take_error();
  std::vector<SnapshotRecord> out;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.take_error();
    if (!*row) break;
    out.push_back({std::string(stmt->column_text(0)), stmt->column_int(1), stmt->column_int(2),
                   stmt->column_int(3), stmt->column_int(4)});
  }
  return out;
}

Status StateStore::save_snapshot(std::string_view stage, int64_t checkpoint,
                                 const StateChanges& changes, Millis now) {
  auto tx = Transaction::begin(*db_);
  if (!tx) return tx.take_error();
  // A snapshot for this checkpoint may exist from a run that crashed before
  // the checkpoint completed and was then replayed: replace it.
  KPIPE_TRY(run_for_stage(*db_, "DELETE FROM stage_state WHERE stage = ? AND added >= ?", stage,
                          checkpoint));
  KPIPE_TRY(run_for_stage(*db_,
                          "UPDATE stage_state SET removed = NULL WHERE stage = ? AND removed >= ?",
                          stage, checkpoint));

  auto retire = db_->prepare(
      "UPDATE stage_state SET removed = ? WHERE stage = ? AND key = ? AND removed IS NULL");
  if (!retire) return retire.take_error();
  auto insert =
      db_->prepare("INSERT INTO stage_state (stage, key, value, added) VALUES (?, ?, ?, ?)");
  if (!insert) return insert.take_error();
  int64_t bytes = 0;
  for (const auto& key : changes.removed) {
    retire->bind(1, checkpoint).bind_text(2, stage).bind_blob(3, key);
    KPIPE_TRY(retire->run());
  }
  for (const auto& [key, value] : changes.put) {
    retire->bind(1, checkpoint).bind_text(2, stage).bind_blob(3, key);
    KPIPE_TRY(retire->run());
    insert->bind_text(1, stage).bind_blob(2, key).bind_blob(3, value).bind(4, checkpoint);
    KPIPE_TRY(insert->run());
    bytes += static_cast<int64_t>(key.size() + value.size());
  }
  auto record = db_->prepare(fmt::format(
      "INSERT INTO stage_snapshots (stage, checkpoint, saved_at, entries, bytes, seal) "
      "VALUES (?1, ?2, ?3, ?4, ?5, {}) ON CONFLICT (stage, checkpoint) DO UPDATE SET saved_at = "
      "excluded.saved_at, entries = excluded.entries, bytes = excluded.bytes, seal = "
      "excluded.seal",
      seal_call(db_->dialect(), {"?1", "?2", "?3", "?4", "?5"})));
  if (!record) return record.take_error();
  record->bind_text(1, stage).bind(2, checkpoint).bind(3, now);
  record->bind(4, static_cast<int64_t>(changes.put.size() + changes.removed.size())).bind(5, bytes);
  KPIPE_TRY(record->run());
  KPIPE_TRY(note_run(fmt::format("stage:{}", stage), checkpoint));
  return tx->commit();
}

Status StateStore::save_slices(std::string_view stage, int64_t checkpoint,
                               const std::vector<SliceChanges>& slices, Millis now) {
  auto tx = Transaction::begin(*db_);
  if (!tx) return tx.take_error();
  std::vector<const SliceChanges*> sorted;
  for (const auto& slice : slices) sorted.push_back(&slice);
  std::sort(sorted.begin(), sorted.end(), [](const SliceChanges* a, const SliceChanges* b) {
    return a->partition < b->partition;
  });
  std::string what = fmt::format("the snapshot of '{}' for checkpoint {}", stage, checkpoint);
  for (const SliceChanges* slice : sorted)
    KPIPE_TRY(check_owner(slice->partition, slice->epoch, what));
  // A snapshot for this checkpoint may exist from a run that crashed before
  // the checkpoint completed and was then replayed: replace it.
  auto rewind = SliceRewind::prepare(*db_);
  if (!rewind) return rewind.take_error();
  auto retire = db_->prepare(
      "UPDATE stage_state SET removed = ? WHERE stage = ? AND key = ? AND removed IS NULL");
  if (!retire) return retire.take_error();
  auto insert =
      db_->prepare("INSERT INTO stage_state (stage, key, value, added) VALUES (?, ?, ?, ?)");
  if (!insert) return insert.take_error();
  int64_t bytes = 0;
  int64_t entries = 0;
  std::string key;
  for (const SliceChanges* slice : sorted) {
    std::string lo = slice_prefix(slice->partition);
    std::string hi = slice_end(lo);
    KPIPE_TRY(rewind->run(stage, lo, hi, checkpoint - 1));
    const StateChanges& changes = *slice->changes;
    for (const auto& removed : changes.removed) {
      key = lo + removed;
      retire->bind(1, checkpoint).bind_text(2, stage).bind_blob(3, key);
      KPIPE_TRY(retire->run());
    }
    for (const auto& [k, value] : changes.put) {
      key = lo + k;
      retire->bind(1, checkpoint).bind_text(2, stage).bind_blob(3, key);
      KPIPE_TRY(retire->run());
      insert->bind_text(1, stage).bind_blob(2, key).bind_blob(3, value).bind(4, checkpoint);
      KPIPE_TRY(insert->run());
      bytes += static_cast<int64_t>(k.size() + value.size());
    }
    entries += static_cast<int64_t>(changes.put.size() + changes.removed.size());
  }
  auto record = db_->prepare(fmt::format(
      "INSERT INTO stage_snapshots (stage, checkpoint, saved_at, entries, bytes, seal) "
      "VALUES (?1, ?2, ?3, ?4, ?5, {}) ON CONFLICT (stage, checkpoint) DO UPDATE SET saved_at = "
      "excluded.saved_at, entries = excluded.entries, bytes = excluded.bytes, seal = "
      "excluded.seal",
      seal_call(db_->dialect(), {"?1", "?2", "?3", "?4", "?5"})));
  if (!record) return record.take_error();
  record->bind_text(1, stage).bind(2, checkpoint).bind(3, now).bind(4, entries).bind(5, bytes);
  KPIPE_TRY(record->run());
  KPIPE_TRY(note_run(fmt::format("member:stage:{}:{}", stage, run_), checkpoint));
  return tx->commit();
}

Expected<std::optional<int64_t>> StateStore::restore_slice(std::string_view stage,
                                                           const TopicPartition& partition,
                                                           Snapshottable& engine) {
  // One read of a consistent state (a transaction), while the owner may
  // not write yet: it restores before it saves.
  auto tx = Transaction::begin(*db_);
  if (!tx) return tx.take_error();
  std::string lo = slice_prefix(partition);
  std::string hi = slice_end(lo);
  auto live = db_->prepare(
      "SELECT key, value FROM stage_state WHERE stage = ? AND key >= ? AND key < ? AND removed "
      "IS NULL");
  if (!live) return live.take_error();
  live->bind_text(1, stage).bind_blob(2, lo).bind_blob(3, hi);
  bool any = false;
  for (;;) {
    auto row = live->step();
    if (!row) return row.take_error();
    if (!*row) break;
    any = true;
    std::string_view key = live->column_text(0);
    KPIPE_TRY(engine.restore_entry(key.substr(lo.size()), live->column_text(1)));
  }
  live->reset();
  KPIPE_TRY(engine.finish_restore());
  auto checkpoint = last_completed(partition);
  if (!checkpoint) return checkpoint.take_error();
  KPIPE_TRY(tx->commit());
  if (!any) return std::optional<int64_t>{};
  return std::optional<int64_t>(*checkpoint);
}

Expected<std::string> StateStore::keep_entry(std::string_view stage, std::string_view key,
                                             std::string_view value) {
  auto tx = Transaction::begin(*db_);
  if (!tx) return tx.take_error();
  // ON CONFLICT: on PostgreSQL, a second process's insert waits for the
  // first's to commit, then leaves it, and the SELECT after it sees it.
  auto put = db_->prepare(
      "INSERT INTO stage_state (stage, key, value, added) SELECT ?1, ?2, ?3, 0 WHERE NOT EXISTS "
      "(SELECT 1 FROM stage_state WHERE stage = ?1 AND key = ?2 AND removed IS NULL) ON CONFLICT "
      "DO NOTHING");
  if (!put) return put.take_error();
  put->bind_text(1, stage).bind_blob(2, key).bind_blob(3, value);
  KPIPE_TRY(put->run());
  auto live =
      db_->prepare("SELECT value FROM stage_state WHERE stage = ? AND key = ? AND removed IS NULL");
  if (!live) return live.take_error();
  live->bind_text(1, stage).bind_blob(2, key);
  auto row = live->step();
  if (!row) return row.take_error();
  std::string kept = *row ? std::string(live->column_text(0)) : std::string(value);
  live->reset();
  KPIPE_TRY(tx->commit());
  return kept;
}

// A stage of an instance restores per partition (restore_slice); entries
// of no partition are a single pipeline's, which no partition can take.
Expected<std::optional<int64_t>> StateStore::restore_unowned(std::string_view stage,
                                                             Snapshottable& engine) {
  auto single = db_->prepare(
      "SELECT COUNT(*) FROM stage_state WHERE stage = ? AND removed IS NULL AND (key < ? OR key "
      ">= ?)");
  if (!single) return single.take_error();
  single->bind_text(1, stage).bind_blob(2, "@").bind_blob(3, "A");
  auto row = single->step();
  if (!row) return row.take_error();
  int64_t n = single->column_int(0);
  single->reset();
  if (n > 0)
    return failure(
        "the saved state of '{}' in '{}' was saved by a single pipeline, not by partition, and "
        "cannot follow the partitions of a consumer group: give the instances a new state "
        "database",
        stage, db_->path());
  KPIPE_TRY(engine.finish_restore());
  return std::optional<int64_t>{};
}

Expected<std::optional<int64_t>> StateStore::restore(std::string_view stage,
                                                     Snapshottable& engine) {
  auto grouped = owned_by_group();
  if (!grouped) return grouped.take_error();
  if (*grouped) return restore_unowned(stage, engine);
  auto tx = Transaction::begin(*db_);
  if (!tx) return tx.take_error();
  auto latest = latest_complete();
  if (!latest) return latest.take_error();
  int64_t c = latest->value_or(0);
  // Snapshots saved for checkpoints that never completed are dropped: the
  // records behind them will be replayed.
  KPIPE_TRY(run_for_stage(*db_, "DELETE FROM stage_state WHERE stage = ? AND added > ?", stage, c));
  KPIPE_TRY(run_for_stage(
      *db_, "UPDATE stage_state SET removed = NULL WHERE stage = ? AND removed > ?", stage, c));
  // History before the restored checkpoint will never be restored again.
  KPIPE_TRY(run_for_stage(
      *db_, "DELETE FROM stage_state WHERE stage = ? AND removed IS NOT NULL AND removed <= ?",
      stage, c));
  KPIPE_TRY(run_for_stage(*db_, "DELETE FROM stage_snapshots WHERE stage = ? AND checkpoint > ?",
                          stage, c));

  auto live =
      db_->prepare("SELECT key, value FROM stage_state WHERE stage = ? AND removed IS NULL");
  if (!live) return live.take_error();
  live->bind_text(1, stage);
  bool any = false;
  for (;;) {
    auto row = live->step();
    if (!row) return row.take_error();
    if (!*row) break;
    any = true;
    KPIPE_TRY(engine.restore_entry(live->column_text(0), live->column_text(1)));
  }
  live->reset();
  KPIPE_TRY(engine.finish_restore());
  KPIPE_TRY(tx->commit());
  if (!*latest && !any) return std::optional<int64_t>{};
  return *latest;
}

std::vector<std::string> StateStore::check_file(const std::string& path) {
  if (is_postgres_target(path)) return {};
  OpenOptions options = state_options();
  options.create = false;
  options.read_only = true;
  options.wal = false;
  auto db = Database::open(path, options);
  if (!db) return {};
  auto problems = (*db)->integrity_check();
  if (!problems) return {};
  std::vector<std::string> out = std::move(*problems);
  if (out.size() > static_cast<size_t>(kMaxLinesPerCheck)) {
    size_t more = out.size() - kMaxLinesPerCheck;
    out.resize(kMaxLinesPerCheck);
    out.push_back(fmt::format("integrity check: {} more", more));
  }
  return out;
}

Expected<std::vector<std::string>> StateStore::verify() {
  auto problems = db_->integrity_check();
  if (!problems) return problems.take_error();
  std::vector<std::string> out = *problems;
  // In a damaged file the checks below would stop at the first damaged
  // page they read, and the damage is what the operator must know of.
  if (!out.empty()) {
    if (out.size() > static_cast<size_t>(kMaxLinesPerCheck)) {
      size_t more = out.size() - kMaxLinesPerCheck;
      out.resize(kMaxLinesPerCheck);
      out.push_back(fmt::format("integrity check: {} more", more));
    }
    return out;
  }
  auto check = [&](const char* sql, const char* what) -> Status {
    auto stmt = db_->prepare(sql);
    if (!stmt) return stmt.take_error();
    auto row = stmt->step();
    if (!row) return row.take_error();
    if (*row && stmt->column_int(0) > 0)
      out.push_back(fmt::format("{}: {}", what, stmt->column_int(0)));
    return {};
  };
  // -2 is the log's start (LogStart::kEarliest): where a Kinesis shard
  // started at its trim horizon is kept until it gives a record.
  KPIPE_TRY(check("SELECT COUNT(*) FROM offsets WHERE \"offset\" < 0 AND \"offset\" <> -2",
                  "negative offsets"));
  KPIPE_TRY(
      check("SELECT COUNT(*) FROM offsets o WHERE o.checkpoint > 0 AND o.checkpoint > "
            "(SELECT COALESCE(MAX(id), 0) FROM checkpoints WHERE completed_at IS NOT NULL)",
            "offsets stored by a checkpoint that is not complete"));
  KPIPE_TRY(
      check("SELECT COUNT(*) FROM (SELECT stage, key FROM stage_state WHERE removed IS NULL "
            "GROUP BY stage, key HAVING COUNT(*) > 1) AS live",
            "state keys with more than one live value"));
  KPIPE_TRY(check("SELECT COUNT(*) FROM stage_state WHERE removed IS NOT NULL AND removed < added",
                  "state entries removed before they were added"));
  KPIPE_TRY(
      check("SELECT COUNT(*) FROM checkpoint_offsets o JOIN checkpoints c ON c.id = o.checkpoint "
            "WHERE c.completed_at IS NULL",
            "offsets of checkpoints that never completed"));
  // Each row as one line, up to kMaxLinesPerCheck, then how many more.
  auto rows = [&](const std::string& sql, const std::string& what,
                  const std::function<std::string(Statement&)>& line) -> Status {
    auto stmt = db_->prepare(sql);
    if (!stmt) return stmt.take_error();
    int64_t n = 0;
    for (;; ++n) {
      auto row = stmt->step();
      if (!row) return row.take_error();
      if (!*row) break;
      if (n < kMaxLinesPerCheck) out.push_back(line(*stmt));
    }
    if (n > kMaxLinesPerCheck)
      out.push_back(fmt::format("{}: {} more", what, n - kMaxLinesPerCheck));
    return {};
  };
  // A seal that does not match: a row kpipe did not write as it is.
  for (const auto& t : kSealedTables) {
    std::string what = fmt::format("{}: rows changed outside kpipe", t.table);
    KPIPE_TRY(rows(fmt::format("SELECT {} FROM {} WHERE seal IS DISTINCT FROM {}", t.row, t.table,
                               seal_columns(db_->dialect(), t.table)),
                   what, [&](Statement& stmt) {
                     return fmt::format("{}: row {} changed outside kpipe", t.table,
                                        stmt.column_text(0));
                   }));
  }
  // A position stored by a checkpoint is that checkpoint's offset, as long
  // as the checkpoint is kept.
  KPIPE_TRY(
      rows("SELECT o.topic || '/' || o.partition, o.checkpoint FROM offsets o "
           "JOIN checkpoints c ON c.id = o.checkpoint "
           "LEFT JOIN checkpoint_offsets k ON k.checkpoint = o.checkpoint AND k.topic = o.topic "
           "AND k.partition = o.partition "
           "WHERE o.checkpoint > 0 AND (k.\"offset\" IS DISTINCT FROM o.\"offset\" "
           "OR k.sequence IS DISTINCT FROM o.sequence) "
           "ORDER BY o.topic, o.partition",
           "offsets: rows that disagree with their checkpoint", [](Statement& stmt) {
             return fmt::format("offsets: row {} disagrees with checkpoint {}, which stored it",
                                stmt.column_text(0), stmt.column_int(1));
           }));
  // Runs of one role whose checkpoints overlap wrote at the same time: a
  // restart's checkpoints all come after its predecessor's.
  auto runs = db_->prepare(
      "SELECT role, pid, first_checkpoint, last_checkpoint FROM kpipe_runs "
      "ORDER BY role, first_checkpoint, last_checkpoint");
  if (!runs) return runs.take_error();
  std::string role;
  int64_t reach = 0;  // the last checkpoint of the role's runs so far
  int64_t reach_pid = 0;
  for (;;) {
    auto row = runs->step();
    if (!row) return row.take_error();
    if (!*row) break;
    std::string r(runs->column_text(0));
    int64_t pid = runs->column_int(1), first = runs->column_int(2), last = runs->column_int(3);
    if (r != role) {
      role = std::move(r);
      reach = last;
      reach_pid = pid;
      continue;
    }
    if (first <= reach) {
      bool consume = role == "kconsume";
      std::string who = consume ? role : fmt::format("stage '{}'", role.substr(6));
      out.push_back(
          fmt::format("{}: processes {} and {} wrote checkpoints {} to {} at the same time ({})",
                      who, reach_pid, pid, first, std::min(reach, last),
                      consume ? "two pipelines on one state file" : "two stages under one name"));
    }
    if (last > reach) {
      reach = last;
      reach_pid = pid;
    }
  }
  return out;
}

}  // namespace kpipe
