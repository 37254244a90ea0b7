#include "kpipe/store/dlq_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <variant>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kpipe {

namespace {

const std::vector<std::string> kMigrations = {
    // v1
    "CREATE TABLE dead_letters ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  at INTEGER NOT NULL,"  // epoch ms
    "  stage TEXT NOT NULL,"
    "  reason TEXT NOT NULL,"
    "  input TEXT,"
    "  line INTEGER,"
    "  source_topic TEXT,"
    "  source_partition INTEGER,"
    "  source_offset INTEGER,"
    "  payload BLOB NOT NULL,"  // the original line, byte for byte
    "  replayed_at INTEGER"
    ");"
    "CREATE UNIQUE INDEX dead_letters_source ON dead_letters"
    "  (stage, source_topic, source_partition, source_offset) WHERE source_topic IS NOT NULL;"
    "CREATE INDEX dead_letters_at ON dead_letters (at);",
    // v2: replay bookkeeping. A line counts its failures, and only pending
    // entries are unique per source position, so that a replayed entry
    // keeps its history when its line fails again. Batches in flight to
    // Kafka are recorded with the target's end offsets before they are
    // sent (see DlqStore::begin_batch).
    "ALTER TABLE dead_letters ADD COLUMN failures INTEGER NOT NULL DEFAULT 1;"
    "ALTER TABLE dead_letters ADD COLUMN replay_batch INTEGER;"
    "DROP INDEX dead_letters_source;"
    "CREATE UNIQUE INDEX dead_letters_pending_source ON dead_letters"
    "  (stage, source_topic, source_partition, source_offset)"
    "  WHERE source_topic IS NOT NULL AND replayed_at IS NULL;"
    "CREATE INDEX dead_letters_replay_batch ON dead_letters (replay_batch) WHERE replay_batch IS "
    "NOT NULL;"
    "CREATE TABLE dead_letter_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "INSERT INTO dead_letter_meta (key, value) VALUES ('store_id', lower(hex(randomblob(8))));"
    "CREATE TABLE dead_letter_replays ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  target TEXT NOT NULL,"
    "  started_at INTEGER NOT NULL,"
    "  mark TEXT NOT NULL"
    ");",
    // v3: a pending entry is unique per source position and payload, not
    // per position alone: two different lines from one position (a topic
    // deleted and made again, two clusters writing one store) are two
    // entries, where the second used to overwrite the first. The payload
    // is identified by its hash (kHashFunction), kept in a column of its
    // own so that the index stays small and sqlite3 needs no function of
    // kpipe's to write the table.
    "ALTER TABLE dead_letters ADD COLUMN payload_hash INTEGER;"
    "UPDATE dead_letters SET payload_hash = kpipe_payload_hash(payload);"
    "DROP INDEX dead_letters_pending_source;"
    "CREATE UNIQUE INDEX dead_letters_pending_payload ON dead_letters"
    "  (stage, source_topic, source_partition, source_offset, payload_hash)"
    "  WHERE source_topic IS NOT NULL AND replayed_at IS NULL;",
};

// The SQL function that hashes a payload: XXH3's 64 bits, stable across
// versions and machines as the stored hashes must be. Two different lines
// from one source position collide with odds of 2^-64: the second would
// then count as a failure of the first.
constexpr const char* kHashFunction = "kpipe_payload_hash";

int64_t payload_hash(std::string_view payload) {
  return static_cast<int64_t>(XXH3_64bits(payload.data(), payload.size()));
}

constexpr size_t kMaxBufferedBytes = 4u << 20;

// Dead letters wait in memory between syncs; the payload views point into
// one arena, fixed up when the batch is written.
class StoreSink final : public DeadLetterSink {
 public:
  explicit StoreSink(std::unique_ptr<DlqStore> store) : store_(std::move(store)) {}
  ~StoreSink() override {
    // An error path that returns before the last sync still keeps what it
    // had: the lines were read, and dropping them would lose them silently.
    (void)sync();
  }

  Status write(const DeadLetter& letter) override {
    letters_.push_back(letter);
    offsets_.push_back(arena_.size());
    arena_.append(letter.payload);
    if (arena_.size() >= kMaxBufferedBytes) return sync();
    return {};
  }

  Status sync() override {
    if (letters_.empty()) return {};
    for (size_t i = 0; i < letters_.size(); ++i)
      letters_[i].payload =
          std::string_view(arena_).substr(offsets_[i], letters_[i].payload.size());
    Status s = store_->add(letters_);
    letters_.clear();
    offsets_.clear();
    arena_.clear();
    return s;
  }

  std::string describe() const override { return store_->path(); }

 private:
  std::unique_ptr<DlqStore> store_;
  std::vector<DeadLetter> letters_;
  std::vector<size_t> offsets_;
  std::string arena_;
};

// A filter as SQL: the WHERE clause and its parameters, in order.
struct Where {
  std::string sql = " WHERE 1";
  std::vector<std::variant<int64_t, std::string>> params;

  void add(std::string_view clause, std::variant<int64_t, std::string> p) {
    sql.append(" AND ");
    sql.append(clause);
    params.push_back(std::move(p));
  }
  void add(std::string_view clause) {
    sql.append(" AND ");
    sql.append(clause);
  }
  void bind(Statement& s, int first = 1) const {
    int i = first;
    for (const auto& p : params) {
      if (std::holds_alternative<int64_t>(p)) {
        s.bind(i++, std::get<int64_t>(p));
      } else {
        s.bind_text(i++, std::get<std::string>(p));
      }
    }
  }
};

// Mirrors DlqFilter::matches, which the Kafka store uses.
Where where_for(const DlqFilter& f) {
  Where w;
  if (!f.reason.empty()) w.add("instr(reason, ?) > 0", f.reason);
  if (!f.stage.empty()) {
    // "kdedup" matches "kdedup" and "kdedup/NAME": the range ["S/", "S0")
    // holds exactly the strings starting with "S/" ('0' follows '/').
    w.add("(stage = ?", f.stage);
    w.sql.append(" OR (stage >= ? AND stage < ?))");
    w.params.emplace_back(f.stage + "/");
    w.params.emplace_back(f.stage + "0");
  }
  if (!f.source_topic.empty()) w.add("source_topic = ?", f.source_topic);
  if (f.since) w.add("at >= ?", *f.since);
  if (f.until) w.add("at < ?", *f.until);
  if (f.pending_only) w.add("replayed_at IS NULL");
  return w;
}

constexpr std::string_view kColumns =
    "id, at, stage, reason, input, line, source_topic, source_partition, source_offset, failures, "
    "replayed_at";

DlqEntry read_entry(const Statement& s, bool with_payload) {
  DlqEntry e;
  e.id = s.column_int(0);
  e.at = s.column_int(1);
  e.stage = s.column_text(2);
  e.reason = s.column_text(3);
  e.input = s.column_optional_text(4).value_or("");
  e.line = s.column_optional_int(5);
  auto topic = s.column_optional_text(6);
  auto partition = s.column_optional_int(7);
  auto offset = s.column_optional_int(8);
  if (topic && partition && offset)
    e.source = SourcePosition{*topic, static_cast<int32_t>(*partition), *offset};
  e.failures = s.column_int(9);
  e.replayed_at = s.column_optional_int(10);
  e.replayed = e.replayed_at.has_value();
  if (with_payload) e.payload = s.column_text(11);
  return e;
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// The statements run for every batch are prepared once, at first use.
Status prepare_once(Database& db, std::optional<Statement>& slot, std::string_view sql) {
  if (slot) return {};
  auto stmt = db.prepare(sql);
  if (!stmt) return stmt.take_error();
  slot.emplace(std::move(*stmt));
  return {};
}

}  // namespace

Expected<std::unique_ptr<DlqStore>> DlqStore::open(const std::string& path, Mode mode) {
  bool memory = path == ":memory:";
  if (mode == Mode::kExisting && !memory && !file_exists(path))
    return failure("dead-letter store '{}' does not exist", path);
  OpenOptions options;
  options.create = mode == Mode::kCreate;
  auto db = Database::open(path, options);
  if (!db) return db.take_error();
  if (mode == Mode::kExisting && !memory) {
    auto stmt = (*db)->prepare(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'dead_letters'");
    if (!stmt) return failure("'{}' is not a dead-letter store: {}", path, stmt.error().message);
    auto row = stmt->step();
    if (!row) return failure("'{}' is not a dead-letter store: {}", path, row.error().message);
    if (stmt->column_int(0) == 0) return failure("'{}' is not a dead-letter store", path);
  }
  KPIPE_TRY((*db)->define_function(kHashFunction, payload_hash));
  KPIPE_TRY((*db)->migrate("dlq", kMigrations));
  return std::unique_ptr<DlqStore>(new DlqStore(std::move(*db)));
}

Status DlqStore::add(const std::vector<DeadLetter>& letters) {
  if (letters.empty()) return {};
  KPIPE_TRY(prepare_once(
      *db_, insert_,
      "INSERT INTO dead_letters (at, stage, reason, input, line, source_topic, source_partition,"
      " source_offset, payload, payload_hash)"
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, kpipe_payload_hash(?9))"
      " ON CONFLICT (stage, source_topic, source_partition, source_offset, payload_hash)"
      "   WHERE source_topic IS NOT NULL AND replayed_at IS NULL"
      " DO UPDATE SET at = excluded.at, reason = excluded.reason, input = excluded.input,"
      "   line = excluded.line, failures = failures + 1"));
  auto tx = Transaction::begin(*db_);
  if (!tx) return tx.take_error();
  Statement& s = *insert_;
  for (const DeadLetter& d : letters) {
    s.bind(1, d.at).bind_text(2, d.stage).bind_text(3, d.reason).bind_text(4, d.input);
    s.bind(5, static_cast<int64_t>(d.line));
    if (d.source) {
      s.bind_text(6, d.source->topic)
          .bind(7, static_cast<int64_t>(d.source->partition))
          .bind(8, d.source->offset);
    } else {
      s.bind_null(6).bind_null(7).bind_null(8);
    }
    s.bind_blob(9, d.payload);
    KPIPE_TRY(s.run());
  }
  return tx->commit();
}

Expected<std::vector<DlqEntry>> DlqStore::fetch(const DlqFilter& filter, const Page& page) {
  Where w = where_for(filter);
  if (page.after_id > 0) w.add("id > ?", page.after_id);
  if (page.max_id > 0) w.add("id <= ?", page.max_id);
  if (page.exclude_in_doubt) w.add("replay_batch IS NULL");
  std::string sql = fmt::format("SELECT {}{} FROM dead_letters{} ORDER BY id LIMIT {}", kColumns,
                                page.with_payload ? ", payload" : "", w.sql, page.limit);
  auto stmt = db_->prepare(sql);
  if (!stmt) return stmt.take_error();
  w.bind(*stmt);
  std::vector<DlqEntry> out;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.take_error();
    if (!*row) break;
    out.push_back(read_entry(*stmt, page.with_payload));
  }
  return out;
}

Status DlqStore::scan(const DlqFilter& filter, size_t limit, bool with_payload,
                      const std::function<Status(const DlqEntry&)>& fn) {
  Page page;
  page.with_payload = with_payload;
  size_t seen = 0;
  for (;;) {
    if (limit > 0) page.limit = std::min<size_t>(1000, limit - seen);
    auto entries = fetch(filter, page);
    if (!entries) return entries.take_error();
    for (const DlqEntry& e : *entries) KPIPE_TRY(fn(e));
    seen += entries->size();
    if (entries->size() < page.limit || (limit > 0 && seen >= limit)) return {};
    page.after_id = entries->back().id;
  }
}

Expected<int64_t> DlqStore::max_id() {
  auto stmt = db_->prepare("SELECT coalesce(max(id), 0) FROM dead_letters");
  if (!stmt) return stmt.take_error();
  auto row = stmt->step();
  if (!row) return row.take_error();
  return stmt->column_int(0);
}

Expected<std::string> DlqStore::store_id() {
  auto stmt = db_->prepare("SELECT value FROM dead_letter_meta WHERE key = 'store_id'");
  if (!stmt) return stmt.take_error();
  auto row = stmt->step();
  if (!row) return row.take_error();
  if (!*row) return failure("{}: the store has no id", path());
  return std::string(stmt->column_text(0));
}

Status DlqStore::mark_replayed(const std::vector<Delivered>& done, Millis now) {
  if (done.empty()) return {};
  // Standard output marks one entry per transaction: the statement is
  // prepared once.
  KPIPE_TRY(prepare_once(
      *db_, mark_,
      "UPDATE dead_letters SET replayed_at = CASE WHEN failures = ? THEN ? ELSE replayed_at END,"
      " replay_batch = NULL WHERE id = ?"));
  auto tx = Transaction::begin(*db_);
  if (!tx) return tx.take_error();
  for (const Delivered& d : done) {
    mark_->bind(1, d.failures).bind(2, now).bind(3, d.id);
    KPIPE_TRY(mark_->run());
  }
  if (has_batches_) {
    KPIPE_TRY(
        db_->exec("DELETE FROM dead_letter_replays WHERE NOT EXISTS"
                  " (SELECT 1 FROM dead_letters WHERE replay_batch = dead_letter_replays.id)"));
  }
  return tx->commit();
}

Expected<int64_t> DlqStore::reset_replayed(const DlqFilter& filter, int64_t max_id, size_t limit) {
  DlqFilter f = filter;
  f.pending_only = false;
  Where w = where_for(f);
  if (max_id > 0) w.add("id <= ?", max_id);
  // OR IGNORE: an entry whose line failed again since it was replayed has
  // a pending successor already, which the replay sends instead.
  std::string sql = fmt::format(
      "UPDATE OR IGNORE dead_letters SET replayed_at = NULL WHERE replayed_at IS NOT NULL AND id IN"
      " (SELECT id FROM dead_letters{} ORDER BY id{})",
      w.sql, limit > 0 ? fmt::format(" LIMIT {}", limit) : "");
  auto tx = Transaction::begin(*db_);
  if (!tx) return tx.take_error();
  auto stmt = db_->prepare(sql);
  if (!stmt) return stmt.take_error();
  w.bind(*stmt);
  KPIPE_TRY(stmt->run());
  int64_t changed = db_->changes();
  KPIPE_TRY(tx->commit());
  return changed;
}

Expected<int64_t> DlqStore::begin_batch(const std::string& target, const std::string& mark,
                                        const std::vector<int64_t>& ids, Millis now) {
  auto tx = Transaction::begin(*db_);
  if (!tx) return tx.take_error();
  has_batches_ = true;
  auto insert =
      db_->prepare("INSERT INTO dead_letter_replays (target, started_at, mark) VALUES (?, ?, ?)");
  if (!insert) return insert.take_error();
  insert->bind_text(1, target).bind(2, now).bind_text(3, mark);
  KPIPE_TRY(insert->run());
  int64_t batch = db_->last_insert_rowid();
  auto update = db_->prepare("UPDATE dead_letters SET replay_batch = ? WHERE id = ?");
  if (!update) return update.take_error();
  for (int64_t id : ids) {
    update->bind(1, batch).bind(2, id);
    KPIPE_TRY(update->run());
  }
  KPIPE_TRY(tx->commit());
  return batch;
}

Expected<std::vector<DlqStore::InDoubt>> DlqStore::in_doubt() {
  auto stmt = db_->prepare(
      "SELECT r.id, r.target, r.mark, d.id FROM dead_letter_replays r"
      " JOIN dead_letters d ON d.replay_batch = r.id ORDER BY r.id, d.id");
  if (!stmt) return stmt.take_error();
  std::vector<InDoubt> out;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.take_error();
    if (!*row) break;
    int64_t batch = stmt->column_int(0);
    if (out.empty() || out.back().batch != batch)
      out.push_back(
          {batch, std::string(stmt->column_text(1)), std::string(stmt->column_text(2)), {}});
    out.back().ids.push_back(stmt->column_int(3));
  }
  return out;
}

Status DlqStore::settle(const InDoubt& batch, const std::set<int64_t>& delivered, Millis now) {
  auto tx = Transaction::begin(*db_);
  if (!tx) return tx.take_error();
  auto stmt = db_->prepare(
      "UPDATE dead_letters SET replayed_at = CASE WHEN ? THEN ? ELSE replayed_at END, replay_batch "
      "= NULL"
      " WHERE id = ? AND replay_batch = ?");
  if (!stmt) return stmt.take_error();
  for (int64_t id : batch.ids) {
    stmt->bind(1, int64_t{delivered.count(id) > 0}).bind(2, now).bind(3, id).bind(4, batch.batch);
    KPIPE_TRY(stmt->run());
  }
  auto drop = db_->prepare("DELETE FROM dead_letter_replays WHERE id = ?");
  if (!drop) return drop.take_error();
  drop->bind(1, batch.batch);
  KPIPE_TRY(drop->run());
  return tx->commit();
}

Expected<int64_t> DlqStore::purge(bool replayed, std::optional<Millis> before, bool dry_run) {
  Where w;
  if (replayed) w.add("replayed_at IS NOT NULL");
  if (before) w.add("at < ?", *before);
  auto tx = Transaction::begin(*db_);
  if (!tx) return tx.take_error();
  auto stmt = db_->prepare(
      (dry_run ? "SELECT count(*) FROM dead_letters" : "DELETE FROM dead_letters") + w.sql);
  if (!stmt) return stmt.take_error();
  w.bind(*stmt);
  int64_t n = 0;
  if (dry_run) {
    auto row = stmt->step();
    if (!row) return row.take_error();
    n = stmt->column_int(0);
    stmt->reset();
  } else {
    KPIPE_TRY(stmt->run());
    n = db_->changes();
  }
  KPIPE_TRY(tx->commit());
  return n;
}

DlqStore::ReplayLock::~ReplayLock() {
  if (fd_ >= 0) ::close(fd_);
}

Expected<DlqStore::ReplayLock> DlqStore::lock_for_replay() {
  if (path() == ":memory:") return ReplayLock();
  std::string lock = path() + ".lock";
  int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return failure("cannot open '{}': {}", lock, std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) return failure("another kdlq replay is running on '{}'", path());
    return failure("cannot lock '{}': {}", lock, std::strerror(err));
  }
  return ReplayLock(fd);
}

std::unique_ptr<DeadLetterSink> make_store_sink(std::unique_ptr<DlqStore> store) {
  return std::make_unique<StoreSink>(std::move(store));
}

// --- the SQLite store as a ledger ------------------------------------------------

namespace {

class StoreLedger final : public ReplayLedger {
 public:
  StoreLedger(DlqStore& store, DlqFilter filter, size_t limit, Clock& clock, std::string store_id,
              int64_t max_id)
      : store_(store),
        filter_(std::move(filter)),
        limit_(limit),
        clock_(clock),
        prefix_(std::move(store_id) + ":"),
        max_id_(max_id) {
    filter_.pending_only = true;
  }

  std::string id_prefix() const override { return prefix_; }

  Expected<std::vector<InDoubt>> in_doubt() override {
    auto batches = store_.in_doubt();
    if (!batches) return batches.take_error();
    batches_ = std::move(*batches);
    std::vector<InDoubt> out;
    for (size_t i = 0; i < batches_.size(); ++i)
      out.push_back({batches_[i].target, batches_[i].mark, batches_[i].ids.size(), i});
    return out;
  }

  Expected<size_t> settle(const InDoubt& d, const std::set<std::string>& delivered) override {
    const DlqStore::InDoubt& batch = batches_.at(d.index);
    std::set<int64_t> ids;
    for (const std::string& text : delivered) {
      std::string_view digits = std::string_view(text).substr(prefix_.size());
      int64_t id = 0;
      auto r = std::from_chars(digits.data(), digits.data() + digits.size(), id);
      if (r.ec == std::errc() && r.ptr == digits.data() + digits.size()) ids.insert(id);
    }
    size_t found = 0;
    for (int64_t id : batch.ids) found += ids.count(id);
    KPIPE_TRY(store_.settle(batch, ids, clock_.now()));
    return found;
  }

  Status reset() override {
    auto n = store_.reset_replayed(filter_, max_id_, limit_);
    if (!n) return n.take_error();
    return {};
  }

  Expected<std::vector<ReplayItem>> next(size_t max) override {
    std::vector<ReplayItem> out;
    if (limit_ > 0 && handed_out_ >= limit_) return out;
    DlqStore::Page page;
    page.after_id = last_id_;
    page.max_id = max_id_;
    page.limit = limit_ > 0 ? std::min(max, limit_ - handed_out_) : max;
    page.exclude_in_doubt = true;
    if (max_id_ == 0) return out;  // the store was empty when the replay began
    auto entries = store_.fetch(filter_, page);
    if (!entries) return entries.take_error();
    for (DlqEntry& e : *entries) {
      std::string id = prefix_ + std::to_string(e.id);
      out.push_back({std::move(e), std::move(id)});
    }
    if (!out.empty()) last_id_ = out.back().entry.id;
    handed_out_ += out.size();
    return out;
  }

  Status begin(const std::vector<ReplayItem>& batch, const std::string& target,
               const std::string& mark) override {
    std::vector<int64_t> ids;
    for (const auto& item : batch) ids.push_back(item.entry.id);
    auto b = store_.begin_batch(target, mark, ids, clock_.now());
    if (!b) return b.take_error();
    return {};
  }

  Status delivered(const std::vector<const ReplayItem*>& items) override {
    std::vector<DlqStore::Delivered> done;
    for (const ReplayItem* item : items)
      done.push_back({item->entry.id, item->entry.failures.value_or(1)});
    return store_.mark_replayed(done, clock_.now());
  }

 private:
  DlqStore& store_;
  DlqFilter filter_;
  size_t limit_;
  Clock& clock_;
  std::string prefix_;
  int64_t max_id_;
  int64_t last_id_ = 0;
  size_t handed_out_ = 0;
  std::vector<DlqStore::InDoubt> batches_;
};

}  // namespace

Expected<std::unique_ptr<ReplayLedger>> make_store_ledger(DlqStore& store, const DlqFilter& filter,
                                                          size_t limit, Clock& clock) {
  auto id = store.store_id();
  if (!id) return id.take_error();
  auto max = store.max_id();
  if (!max) return max.take_error();
  return std::unique_ptr<ReplayLedger>(new StoreLedger(store, filter, limit, clock, *id, *max));
}

}  // namespace kpipe
