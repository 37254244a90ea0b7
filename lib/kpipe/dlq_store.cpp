#include "kpipe/dlq_store.h"

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
};

class StoreSink final : public DeadLetterSink {
 public:
  explicit StoreSink(std::unique_ptr<DlqStore> store) : store_(std::move(store)) {}
  Status write(const DeadLetter& letter) override { return store_->add(letter); }
  Status sync() override { return store_->commit(); }
  std::string describe() const override { return store_->path(); }

 private:
  std::unique_ptr<DlqStore> store_;
};

}  // namespace

Expected<std::unique_ptr<DlqStore>> DlqStore::open(const std::string& path, bool read_only) {
  OpenOptions options;
  options.read_only = read_only;
  options.create = !read_only;
  auto db = Database::open(path, options);
  if (!db) return db.take_error();
  if (!read_only) KPIPE_TRY((*db)->migrate("dlq", kMigrations));
  return std::unique_ptr<DlqStore>(new DlqStore(std::move(*db)));
}

Status DlqStore::add(const DeadLetter& d) {
  if (!insert_) {
    auto stmt = db_->prepare(
        "INSERT OR IGNORE INTO dead_letters (at, stage, reason, input, line, source_topic, source_partition,"
        " source_offset, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
    if (!stmt) return stmt.take_error();
    insert_.emplace(std::move(*stmt));
  }
  if (!batch_) {
    auto tx = Transaction::begin(*db_);
    if (!tx) return tx.take_error();
    batch_.emplace(std::move(*tx));
  }
  Statement& s = *insert_;
  s.bind(1, d.at).bind_text(2, d.stage).bind_text(3, d.reason).bind_text(4, d.input);
  s.bind(5, static_cast<int64_t>(d.line));
  if (d.source) {
    s.bind_text(6, d.source->topic).bind(7, static_cast<int64_t>(d.source->partition)).bind(8, d.source->offset);
  } else {
    s.bind_null(6).bind_null(7).bind_null(8);
  }
  s.bind_blob(9, d.payload);
  return s.run();
}

Status DlqStore::commit() {
  if (!batch_) return {};
  Status s = batch_->commit();
  batch_.reset();
  return s;
}

std::unique_ptr<DeadLetterSink> make_store_sink(std::unique_ptr<DlqStore> store) {
  return std::make_unique<StoreSink>(std::move(store));
}

}  // namespace kpipe
