#include "kpipe/store/replay_positions.h"

#include "kpipe/store/postgres_state_lock.h"
#include "kpipe/store/state_store.h"
#include "kpipe/target.h"

namespace kpipe {

namespace {

// "offset" is quoted: PostgreSQL reserves the word.
const std::vector<const char*> kMigrationTexts = {
    // v1: a position in two columns, as the state tables keep one
    // (bind_position); the batch in flight as the ledger writes it.
    "CREATE TABLE replay_positions ("
    "  ledger TEXT NOT NULL,"
    "  log TEXT NOT NULL,"
    "  partition {int} NOT NULL,"
    "  \"offset\" {int} NOT NULL,"
    "  sequence TEXT,"
    "  PRIMARY KEY (ledger, log, partition)"
    ");"
    "CREATE TABLE replay_batches ("
    "  ledger TEXT NOT NULL,"
    "  log TEXT NOT NULL,"
    "  metadata TEXT NOT NULL,"
    "  PRIMARY KEY (ledger, log)"
    ");",
};

constexpr std::string_view kComponent = "replay";

}  // namespace

Expected<std::unique_ptr<StoredReplayPositions>> StoredReplayPositions::open(
    const std::string& target, std::string ledger, std::string log, bool read_only) {
  OpenOptions options = state_options();
  if (read_only && !is_postgres_target(target)) {
    options.create = false;
    options.read_only = true;
    options.wal = false;
  }
  auto db = Database::open(target, options);
  if (!db) return db.take_error();
  if (!read_only) {
    auto out = attach(std::move(*db), std::move(ledger), std::move(log));
    if (!out) return out.take_error();
    KPIPE_TRY((*out)->lock());
    return out;
  }
  auto version = (*db)->schema_version(kComponent);
  if (!version) return version.take_error();
  std::unique_ptr<StoredReplayPositions> out(
      new StoredReplayPositions(std::move(*db), std::move(ledger), std::move(log)));
  out->empty_ = *version == 0;
  return out;
}

Expected<std::unique_ptr<StoredReplayPositions>> StoredReplayPositions::attach(
    std::unique_ptr<Database> db, std::string ledger, std::string log) {
  KPIPE_TRY(db->migrate(kComponent, dialect_migrations(db->dialect(), kMigrationTexts, {})));
  return std::unique_ptr<StoredReplayPositions>(
      new StoredReplayPositions(std::move(db), std::move(ledger), std::move(log)));
}

// Two replays of one ledger would each move its position over what the
// other sent, and settle each other's batches: as a dead-letter database
// lets one replay run at a time (DlqStore::lock_for_replay), so does a
// ledger. The state store's own locks (StateLock, or a session lock in
// PostgreSQL) die with their process, SIGKILL too.
Status StoredReplayPositions::lock() {
  if (db_->path() == ":memory:") return {};
  std::string name = "replay:" + ledger_ + ":" + log_;
  auto busy = [&](const std::string& holder) {
    return fmt::format("{} is in use by {}: one kdlq replay of a ledger at a time", describe(),
                       holder);
  };
  if (db_->postgres()) return take_postgres_state_lock(*db_, name, false, busy);
  auto held = StateLock::take(db_->path(), name, busy);
  if (!held) return held.take_error();
  lock_ = std::move(*held);
  return {};
}

std::string StoredReplayPositions::describe() const {
  return fmt::format("replay ledger '{}' in '{}'", ledger_, db_->path());
}

Expected<ReplayPositions::Saved> StoredReplayPositions::load() {
  Saved saved;
  if (empty_) return saved;
  auto positions = db_->prepare(
      "SELECT partition, \"offset\", sequence FROM replay_positions WHERE ledger = ?1 AND log = "
      "?2");
  if (!positions) return positions.take_error();
  positions->bind_text(1, ledger_).bind_text(2, log_);
  for (auto row = positions->step();; row = positions->step()) {
    if (!row) return row.take_error();
    if (!*row) break;
    auto partition = static_cast<int32_t>(positions->column_int(0));
    auto at = column_position(*positions, 1, "replay_positions");
    if (!at) return at.take_error();
    saved.next[partition] = std::move(*at);
  }
  auto batch = db_->prepare("SELECT metadata FROM replay_batches WHERE ledger = ?1 AND log = ?2");
  if (!batch) return batch.take_error();
  batch->bind_text(1, ledger_).bind_text(2, log_);
  auto row = batch->step();
  if (!row) return row.take_error();
  if (*row) saved.metadata = batch->column_text(0);
  return saved;
}

Status StoredReplayPositions::save(const Saved& saved) {
  if (empty_) return failure("{}: opened to read only", describe());
  auto tx = Transaction::begin(*db_);
  if (!tx) return tx.take_error();
  for (const char* table : {"replay_positions", "replay_batches"}) {
    auto clear = db_->prepare(fmt::format("DELETE FROM {} WHERE ledger = ?1 AND log = ?2", table));
    if (!clear) return clear.take_error();
    clear->bind_text(1, ledger_).bind_text(2, log_);
    KPIPE_TRY(clear->run());
  }
  auto put = db_->prepare(
      "INSERT INTO replay_positions (ledger, log, partition, \"offset\", sequence) "
      "VALUES (?1, ?2, ?3, ?4, ?5)");
  if (!put) return put.take_error();
  for (const auto& [partition, at] : saved.next) {
    put->bind_text(1, ledger_).bind_text(2, log_).bind(3, partition);
    bind_position(*put, 4, 5, at);
    KPIPE_TRY(put->run());
  }
  if (!saved.metadata.empty()) {
    auto batch =
        db_->prepare("INSERT INTO replay_batches (ledger, log, metadata) VALUES (?1, ?2, ?3)");
    if (!batch) return batch.take_error();
    batch->bind_text(1, ledger_).bind_text(2, log_).bind_text(3, saved.metadata);
    KPIPE_TRY(batch->run());
  }
  return tx->commit();
}

}  // namespace kpipe
