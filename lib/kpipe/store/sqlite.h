// The only door to SQLite: a database handle, prepared statements and
// transactions, with errors as values. No other file includes sqlite3.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace kpipe {

class Statement {
 public:
  Statement() = default;
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Parameters are 1-based, as in SQLite.
  Statement& bind(int i, int64_t v);
  Statement& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Statement& bind(int i, double v);
  Statement& bind_text(int i, std::string_view v);
  // Without a copy: `v` must stay valid and unchanged until the statement
  // is reset (run() resets it). For hot loops that bind from a buffer.
  Statement& bind_text_static(int i, std::string_view v);
  Statement& bind_blob(int i, std::string_view v);
  Statement& bind_null(int i);
  Statement& bind(int i, const std::optional<int64_t>& v) { return v ? bind(i, *v) : bind_null(i); }
  Statement& bind_optional_text(int i, const std::optional<std::string>& v) {
    return v ? bind_text(i, *v) : bind_null(i);
  }

  // True while rows come, false when done.
  Expected<bool> step();
  // Runs a statement that returns no rows, then resets it.
  Status run();
  void reset();
  // After step() or run() failed: SQLite's reason when it was the row's
  // values that were refused (a constraint, a datatype mismatch, a value
  // too big), so that the caller can treat the row as bad input; empty
  // when the failure was the database's.
  const std::string& refusal() const { return refusal_; }

  enum class Type { kInteger, kFloat, kText, kBlob, kNull };
  Type column_type(int i) const;
  int64_t column_int(int i) const;
  double column_double(int i) const;
  std::string_view column_text(int i) const;  // also blobs, as bytes
  std::optional<int64_t> column_optional_int(int i) const;
  std::optional<std::string> column_optional_text(int i) const;
  int column_count() const;
  std::string_view column_name(int i) const;

 private:
  friend class Database;
  Statement(sqlite3_stmt* stmt, sqlite3* db, std::string path);
  sqlite3_stmt* stmt_ = nullptr;
  sqlite3* db_ = nullptr;
  std::string path_;
  int bind_error_ = 0;
  std::string refusal_;
};

struct OpenOptions {
  bool create = true;  // new files get mode 0600
  bool read_only = false;
  bool wal = true;
  int busy_timeout_ms = 10000;
};

class Database {
 public:
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // ":memory:" for tests.
  static Expected<std::unique_ptr<Database>> open(const std::string& path,
                                                  OpenOptions options = {});

  Status exec(std::string_view sql);
  Expected<Statement> prepare(std::string_view sql);
  int64_t last_insert_rowid() const;
  int64_t changes() const;
  // SQLITE_LIMIT_COLUMN: the most columns a table may have.
  int max_columns() const;

  // Makes `fn` the SQL function NAME(x) on this connection: deterministic,
  // given the bytes of a text or blob, an integer back (NULL for NULL).
  // For values that SQL cannot compute, such as a hash, that a migration
  // must fill in for the rows already there.
  using BytesFunction = int64_t (*)(std::string_view bytes);
  Status define_function(const std::string& name, BytesFunction fn);
  const std::string& path() const { return path_; }

  // Brings a component's tables to the newest schema. migrations[i] takes
  // the component from version i to i + 1; each runs in its own transaction
  // with its version bump, so an interrupted upgrade leaves a known version.
  Status migrate(std::string_view component, const std::vector<std::string>& migrations);
  // The version migrate() left, 0 when the component has no tables yet.
  Expected<int64_t> schema_version(std::string_view component);

  // PRAGMA integrity_check: empty when the file is sound.
  Expected<std::vector<std::string>> integrity_check();

  // A fresh error for the database's last failure, prefixed with `what`.
  Error error(std::string_view what) const;

 private:
  Database(sqlite3* db, std::string path);
  sqlite3* db_;
  std::string path_;
};

// BEGIN IMMEDIATE ... COMMIT, rolled back unless committed: writers take
// the write lock up front, so two processes never deadlock on an upgrade.
class Transaction {
 public:
  static Expected<Transaction> begin(Database& db);
  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();
  Status commit();

 private:
  explicit Transaction(Database* db) : db_(db) {}
  Database* db_;
};

// The SQL function every Database defines: kpipe_seal(v1, v2, ...), an
// integer hash of its arguments' types and values, for rows whose changes
// by other programs should show (the state tables' seal columns).
inline constexpr const char* kSealFunction = "kpipe_seal";

// Quotes an identifier for SQL ("a""b"). Callers validate identifiers
// first; quoting makes any name data, never SQL.
std::string quote_identifier(std::string_view name);

}  // namespace kpipe
