// The SQLite dead-letter store (--dlq FILE.db): one row per bad line, the
// line kept byte for byte. kdlq reads it; every program writes it through
// DeadLetterSink.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kpipe/dead_letter.h"
#include "kpipe/sqlite.h"

namespace kpipe {

class DlqStore {
 public:
  static Expected<std::unique_ptr<DlqStore>> open(const std::string& path, bool read_only = false);

  // Inside the open batch; commit() makes the batch durable. A line from
  // an envelope already stored by the same stage (a replay after a crash)
  // is not stored twice.
  Status add(const DeadLetter& letter);
  Status commit();

  Database& db() { return *db_; }
  const std::string& path() const { return db_->path(); }

 private:
  explicit DlqStore(std::unique_ptr<Database> db) : db_(std::move(db)) {}
  std::unique_ptr<Database> db_;
  std::optional<Transaction> batch_;
  std::optional<Statement> insert_;
};

std::unique_ptr<DeadLetterSink> make_store_sink(std::unique_ptr<DlqStore> store);

}  // namespace kpipe
