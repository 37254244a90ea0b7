#include "kpipe/store/lag_history.h"

#include <sys/stat.h>

#include <algorithm>
#include <unordered_map>

#include "kpipe/target.h"

namespace kpipe {

namespace {

const std::vector<std::string> kMigrations = {
    // v1
    "CREATE TABLE lag_samples ("
    "  id INTEGER PRIMARY KEY,"
    "  subject_kind TEXT NOT NULL CHECK (subject_kind IN ('group', 'state')),"
    "  subject TEXT NOT NULL,"  // the group id, or the state file's path
    "  at INTEGER NOT NULL,"    // epoch ms
    "  members INTEGER,"        // NULL: the broker cannot tell
    "  group_state TEXT"
    ");"
    "CREATE INDEX lag_samples_subject ON lag_samples (subject_kind, subject, at);"
    "CREATE INDEX lag_samples_at ON lag_samples (at);"
    "CREATE TABLE lag_partitions ("
    "  sample INTEGER NOT NULL REFERENCES lag_samples(id) ON DELETE CASCADE,"
    "  topic TEXT NOT NULL,"
    "  partition INTEGER NOT NULL,"
    "  committed INTEGER,"  // NULL: nothing committed
    "  end_offset INTEGER NOT NULL,"
    "  lag_seconds REAL,"
    "  committed_at INTEGER,"  // state files: when the offset was committed
    "  at INTEGER NOT NULL,"   // the sample's time again, for the index below
    "  PRIMARY KEY (sample, topic, partition)"
    ") WITHOUT ROWID;"
    // --no-fetch looks up, per partition, the end offsets around one offset.
    "CREATE INDEX lag_partitions_end ON lag_partitions (topic, partition, end_offset, at);",
    // v2: partitions without a committed offset that --uncommitted counted
    // (committed stays NULL: nothing was), and the log start offset that
    // --uncommitted earliest counts from.
    "ALTER TABLE lag_partitions ADD COLUMN assumed TEXT"
    "  CHECK (assumed IN ('earliest', 'latest'));"
    "ALTER TABLE lag_partitions ADD COLUMN log_start INTEGER;",
    // v3: Kinesis shards (PartitionSample::by_time), whose positions are
    // no integers: `position` holds one as Position::text() writes it
    // (committed stays NULL), and end_offset is 0.
    "ALTER TABLE lag_partitions ADD COLUMN by_time INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE lag_partitions ADD COLUMN position TEXT;",
};

const char* kind_text(LagSubject::Kind k) {
  return k == LagSubject::Kind::kGroup ? "group" : "state";
}

// The assumed column: NULL unless the lag counted from an assumed offset.
Uncommitted assumed_of(std::optional<std::string> text) {
  if (!text) return Uncommitted::kIgnore;
  auto u = parse_uncommitted(*text);
  return u ? *u : Uncommitted::kIgnore;
}

// What recent() and all() read of a sample and of its partitions: the
// columns, then a row of them into its struct.
constexpr const char* kSampleColumns = "id, at, members, group_state";
constexpr const char* kPartitionColumns =
    "topic, partition, committed, end_offset, lag_seconds, committed_at, assumed, log_start, "
    "by_time, position";

// A row of kSampleColumns; returns its id.
int64_t read_sample(Statement& row, const LagSubject& subject, LagSample& s) {
  s.subject = subject;
  s.at = row.column_int(1);
  s.members = row.column_optional_int(2);
  s.group_state = row.column_optional_text(3).value_or("");
  return row.column_int(0);
}

// A row whose columns from `first` on are kPartitionColumns.
void read_partition(Statement& row, int first, PartitionSample& p) {
  p.topic = row.column_text(first);
  p.partition = static_cast<int32_t>(row.column_int(first + 1));
  p.by_time = row.column_int(first + 8) != 0;
  if (p.by_time) {
    if (auto text = row.column_optional_text(first + 9)) p.committed = Position::from_text(*text);
  } else if (auto offset = row.column_optional_int(first + 2)) {
    p.committed = *offset;
  }
  p.end = row.column_int(first + 3);
  if (row.column_type(first + 4) != Statement::Type::kNull)
    p.lag_seconds = row.column_double(first + 4);
  p.committed_at = row.column_optional_int(first + 5);
  if (!p.committed) p.assumed = assumed_of(row.column_optional_text(first + 6));
  p.start = row.column_optional_int(first + 7);
}

}  // namespace

Expected<std::unique_ptr<LagHistory>> LagHistory::open(const std::string& path, bool must_exist) {
  struct stat st;
  if (must_exist && path != ":memory:" && ::stat(path.c_str(), &st) != 0)
    return failure("history file '{}' does not exist", path);
  // An SQLite file only (klag(1), FILES): its tables are written in
  // SQLite's words.
  if (is_postgres_target(path))
    return usage_error("--history takes an SQLite file, not a PostgreSQL target");
  auto db = open_sqlite(path, {});
  if (!db) return db.take_error();
  KPIPE_TRY((*db)->migrate("lag", kMigrations));
  return std::unique_ptr<LagHistory>(new LagHistory(std::move(*db)));
}

Status LagHistory::append(const LagSample& s, Millis keep) {
  auto tx = Transaction::begin(*db_);
  if (!tx) return tx.take_error();
  auto head = db_->prepare(
      "INSERT INTO lag_samples (subject_kind, subject, at, members, group_state) VALUES (?, ?, ?, "
      "?, ?) RETURNING id");
  if (!head) return head.take_error();
  head->bind_text(1, kind_text(s.subject.kind))
      .bind_text(2, s.subject.name)
      .bind(3, s.at)
      .bind(4, s.members);
  if (s.group_state.empty()) {
    head->bind_null(5);
  } else {
    head->bind_text(5, s.group_state);
  }
  auto inserted = head->step();
  if (!inserted) return inserted.take_error();
  int64_t id = head->column_int(0);
  head->reset();
  auto row = db_->prepare(
      "INSERT INTO lag_partitions (sample, topic, partition, committed, end_offset, lag_seconds, "
      "committed_at, at, assumed, log_start, by_time, position)"
      " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!row) return row.take_error();
  for (const auto& p : s.partitions) {
    row->bind(1, id).bind_text(2, p.topic).bind(3, static_cast<int64_t>(p.partition));
    if (p.committed && !p.by_time) {
      row->bind(4, p.committed->offset());
    } else {
      row->bind_null(4);
    }
    row->bind(5, p.end);
    if (p.lag_seconds) {
      row->bind(6, *p.lag_seconds);
    } else {
      row->bind_null(6);
    }
    row->bind(7, p.committed_at).bind(8, s.at);
    if (p.is_assumed()) {
      row->bind_text(9, uncommitted_name(p.assumed));
    } else {
      row->bind_null(9);
    }
    row->bind(10, p.start).bind(11, static_cast<int64_t>(p.by_time ? 1 : 0));
    if (p.committed && p.by_time) {
      row->bind_text(12, p.committed->text());
    } else {
      row->bind_null(12);
    }
    KPIPE_TRY(row->run());
  }
  if (keep > 0) {
    // The partitions' rows go with their sample (ON DELETE CASCADE).
    auto prune = db_->prepare("DELETE FROM lag_samples WHERE at < ?");
    if (!prune) return prune.take_error();
    prune->bind(1, s.at - keep);
    KPIPE_TRY(prune->run());
  }
  return tx->commit();
}

Expected<std::vector<std::string>> LagHistory::subjects(LagSubject::Kind kind) {
  auto q = db_->prepare(
      "SELECT DISTINCT subject FROM lag_samples WHERE subject_kind = ? ORDER BY subject");
  if (!q) return q.take_error();
  q->bind_text(1, kind_text(kind));
  std::vector<std::string> out;
  for (;;) {
    auto more = q->step();
    if (!more) return more.take_error();
    if (!*more) return out;
    out.emplace_back(q->column_text(0));
  }
}

Expected<std::vector<LagSample>> LagHistory::recent(const LagSubject& subject, size_t count) {
  auto heads =
      db_->prepare(fmt::format("SELECT {} FROM lag_samples WHERE subject_kind = ? AND subject = ?"
                               " ORDER BY at DESC, id DESC LIMIT ?",
                               kSampleColumns));
  if (!heads) return heads.take_error();
  heads->bind_text(1, kind_text(subject.kind))
      .bind_text(2, subject.name)
      .bind(3, static_cast<int64_t>(count));
  std::vector<std::pair<int64_t, LagSample>> found;
  for (;;) {
    auto more = heads->step();
    if (!more) return more.take_error();
    if (!*more) break;
    LagSample s;
    int64_t id = read_sample(*heads, subject, s);
    found.emplace_back(id, std::move(s));
  }
  auto rows = db_->prepare(
      fmt::format("SELECT {} FROM lag_partitions WHERE sample = ? ORDER BY topic, partition",
                  kPartitionColumns));
  if (!rows) return rows.take_error();
  std::vector<LagSample> out;
  out.reserve(found.size());
  for (auto it = found.rbegin(); it != found.rend(); ++it) {
    rows->reset();
    rows->bind(1, it->first);
    LagSample& s = it->second;
    for (;;) {
      auto more = rows->step();
      if (!more) return more.take_error();
      if (!*more) break;
      read_partition(*rows, 0, s.partitions.emplace_back());
    }
    out.push_back(std::move(s));
  }
  return out;
}

Expected<std::vector<LagSample>> LagHistory::all(const LagSubject& subject) {
  // The samples by time, then their partitions in the order of their
  // primary key (sample, topic, partition), which SQLite reads without a
  // sort and faster than a join that repeats each sample's columns on
  // every partition's row: a million rows in a few hundred milliseconds.
  auto heads = db_->prepare(fmt::format(
      "SELECT {} FROM lag_samples WHERE subject_kind = ? AND subject = ? ORDER BY at, id",
      kSampleColumns));
  if (!heads) return heads.take_error();
  heads->bind_text(1, kind_text(subject.kind)).bind_text(2, subject.name);
  std::vector<LagSample> out;
  std::unordered_map<int64_t, size_t> index;  // a sample's id to its place in `out`
  for (;;) {
    auto more = heads->step();
    if (!more) return more.take_error();
    if (!*more) break;
    int64_t id = read_sample(*heads, subject, out.emplace_back());
    index.emplace(id, out.size() - 1);
  }
  auto rows = db_->prepare(fmt::format(
      "SELECT sample, {} FROM lag_partitions"
      " WHERE sample IN (SELECT id FROM lag_samples WHERE subject_kind = ? AND subject = ?)"
      " ORDER BY sample, topic, partition",
      kPartitionColumns));
  if (!rows) return rows.take_error();
  rows->bind_text(1, kind_text(subject.kind)).bind_text(2, subject.name);
  std::optional<int64_t> current;
  std::vector<PartitionSample>* parts = nullptr;
  size_t expected = 0;  // partitions of the sample before: most samples have as many
  for (;;) {
    auto more = rows->step();
    if (!more) return more.take_error();
    if (!*more) return out;
    int64_t id = rows->column_int(0);
    if (id != current) {
      if (parts != nullptr) expected = parts->size();
      current = id;
      auto found = index.find(id);
      // Not found: appended since the samples were read.
      parts = found == index.end() ? nullptr : &out[found->second].partitions;
      if (parts != nullptr) parts->reserve(expected);
    }
    if (parts == nullptr) continue;
    read_partition(*rows, 1, parts->emplace_back());
  }
}

Expected<std::vector<EndOffsetSeen>> LagHistory::end_offsets_around(const TopicPartition& tp,
                                                                    int64_t offset) {
  std::vector<EndOffsetSeen> out;
  auto read = [&](Statement& stmt) -> Status {
    for (;;) {
      auto more = stmt.step();
      if (!more) return more.take_error();
      if (!*more) return {};
      if (stmt.column_type(0) == Statement::Type::kNull) continue;  // an aggregate over no rows
      out.push_back({stmt.column_int(0), stmt.column_int(1), stmt.column_int(2)});
    }
  };
  auto below = db_->prepare(
      "SELECT end_offset, MIN(at), MAX(at) FROM lag_partitions WHERE topic = ?1 AND partition = ?2 "
      "AND end_offset ="
      " (SELECT MAX(end_offset) FROM lag_partitions WHERE topic = ?1 AND partition = ?2 AND "
      "end_offset <= ?3)");
  if (!below) return below.take_error();
  below->bind_text(1, tp.topic).bind(2, static_cast<int64_t>(tp.partition)).bind(3, offset);
  KPIPE_TRY(read(*below));
  auto above = db_->prepare(
      "SELECT end_offset, MIN(at), MAX(at) FROM lag_partitions WHERE topic = ? AND partition = ? "
      "AND end_offset > ?"
      " GROUP BY end_offset ORDER BY end_offset LIMIT 2");
  if (!above) return above.take_error();
  above->bind_text(1, tp.topic).bind(2, static_cast<int64_t>(tp.partition)).bind(3, offset);
  KPIPE_TRY(read(*above));
  return out;
}

}  // namespace kpipe
