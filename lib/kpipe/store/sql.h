// The stores' one face over two databases (kpipe(7), STORES): an SQLite
// file or a PostgreSQL server, behind the same Database, Statement and
// Transaction. The stores write their SQL once, in the words both dialects
// share ("?" or "?N" for values, ON CONFLICT, RETURNING, IS DISTINCT FROM),
// and ask dialect() only where the two differ (column types, the seal).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/position.h"
#include "kpipe/status.h"

namespace kpipe {

class PgConnection;

enum class Dialect { kSqlite, kPostgres };

class Statement {
 public:
  enum class Type { kInteger, kFloat, kText, kBlob, kNull };

  // What a backend does; Statement forwards to it.
  class Impl {
   public:
    virtual ~Impl() = default;
    virtual void bind_int(int i, int64_t v) = 0;
    virtual void bind_double(int i, double v) = 0;
    // `copy` false: `v` stays valid until the statement is reset.
    virtual void bind_text(int i, std::string_view v, bool copy) = 0;
    virtual void bind_blob(int i, std::string_view v) = 0;
    virtual void bind_null(int i) = 0;
    virtual Expected<bool> step() = 0;
    virtual void reset() = 0;  // and clears the bindings
    virtual const std::string& refusal() const = 0;
    virtual Type column_type(int i) const = 0;
    virtual int64_t column_int(int i) const = 0;
    virtual double column_double(int i) const = 0;
    virtual std::string_view column_text(int i) const = 0;
    // See Statement::column_json. A backend whose Types say all there is
    // (SQLite's storage classes) keeps this default.
    virtual std::string_view column_json(int i) const {
      (void)i;
      return {};
    }
    virtual int column_count() const = 0;
    virtual std::string_view column_name(int i) const = 0;
  };

  Statement() = default;
  explicit Statement(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

  // Parameters are 1-based, as in SQLite.
  Statement& bind(int i, int64_t v) { return impl_->bind_int(i, v), *this; }
  Statement& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Statement& bind(int i, double v) { return impl_->bind_double(i, v), *this; }
  Statement& bind_text(int i, std::string_view v) { return impl_->bind_text(i, v, true), *this; }
  // Without a copy: `v` must stay valid and unchanged until the statement
  // is reset (run() resets it). For hot loops that bind from a buffer.
  Statement& bind_text_static(int i, std::string_view v) {
    return impl_->bind_text(i, v, false), *this;
  }
  Statement& bind_blob(int i, std::string_view v) { return impl_->bind_blob(i, v), *this; }
  Statement& bind_null(int i) { return impl_->bind_null(i), *this; }
  Statement& bind(int i, const std::optional<int64_t>& v) { return v ? bind(i, *v) : bind_null(i); }

  // True while rows come, false when done.
  Expected<bool> step() { return impl_->step(); }
  // Runs a statement that returns no rows, then resets it.
  Status run();
  void reset() { impl_->reset(); }
  // After step() or run() failed: the database's reason when it was the
  // row's values that were refused (a constraint, a value of the wrong
  // type, one too big), so that the caller can treat the row as bad input;
  // empty when the failure was the database's.
  const std::string& refusal() const { return impl_->refusal(); }

  Type column_type(int i) const { return impl_->column_type(i); }
  int64_t column_int(int i) const { return impl_->column_int(i); }
  double column_double(int i) const { return impl_->column_double(i); }
  std::string_view column_text(int i) const { return impl_->column_text(i); }  // blobs as bytes
  // The value as a JSON literal, where the column's type says more than
  // its Type: a number the database keeps exactly in decimal, digit for
  // digit as it writes it (PostgreSQL's smallint, integer, bigint and
  // numeric: a double would round a 20-digit id, and a JSON reader that
  // keys by text would then match nothing), and true or false for a
  // boolean. Empty for any other value, NULL and numeric's NaN and
  // infinities among them: read those by column_type().
  std::string_view column_json(int i) const { return impl_->column_json(i); }
  std::optional<int64_t> column_optional_int(int i) const;
  std::optional<std::string> column_optional_text(int i) const;
  int column_count() const { return impl_->column_count(); }
  std::string_view column_name(int i) const { return impl_->column_name(i); }

 private:
  std::unique_ptr<Impl> impl_;
};

struct OpenOptions {
  bool create = true;  // SQLite: new files get mode 0600
  bool read_only = false;
  bool wal = true;  // SQLite
  int busy_timeout_ms = 10000;
  // PostgreSQL: the program the server shows for the connection (empty:
  // the running program's name).
  std::string application;
  // SQLite: how a fault of the file itself (full, read-only, damaged, not
  // a database) names it, for an operator who must act on it: "state
  // database 'p.db': cannot write: the file system is full (...)", and
  // what a file that is not a database is not ("a kpipe state database").
  std::string kind = "database";
  std::string not_kind = "an SQLite database";
};

class Database {
 public:
  virtual ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // A PostgreSQL target (target.h: is_postgres_target) connects to the
  // server; anything else is an SQLite file (":memory:" for tests).
  static Expected<std::unique_ptr<Database>> open(const std::string& target,
                                                  OpenOptions options = {});

  virtual Dialect dialect() const = 0;
  bool postgres() const { return dialect() == Dialect::kPostgres; }
  // The file, or the server without its password: how messages name it.
  const std::string& path() const { return path_; }

  // Statements that return nothing worth reading (several may be given).
  virtual Status exec(std::string_view sql) = 0;
  virtual Expected<Statement> prepare(std::string_view sql) = 0;
  // Rows the last statement changed.
  virtual int64_t changes() const = 0;
  // The most columns a table may have.
  virtual int max_columns() const = 0;
  // BEGIN a write transaction (SQLite takes the write lock up front), and
  // COMMIT it: an error when the database rolled it back instead.
  virtual Status begin_write() = 0;
  virtual Status commit_write() { return exec("COMMIT"); }

  // Brings a component's tables to the newest schema. migrations[i] takes
  // the component from version i to i + 1; each runs in its own transaction
  // with its version bump, so an interrupted upgrade leaves a known version.
  Status migrate(std::string_view component, const std::vector<std::string>& migrations);
  // The version migrate() left, 0 when the component has no tables yet.
  // Reads only, so that a database opened read-only can be asked.
  Expected<int64_t> schema_version(std::string_view component);
  // Whether the component's tables are there at all, without creating any.
  Expected<bool> has_table(std::string_view table);

  // What tells this database from every other, however its target is
  // spelled: an SQLite file's device and inode; a PostgreSQL database's
  // server (its system identifier and start time) and name, asked once.
  // Empty for a database in memory. Ask it outside a transaction.
  virtual Expected<std::string> identity();
  // Whether `target` names this very database, however it is spelled: a
  // file by another path, a server as 127.0.0.1 and as localhost, a query
  // string in another order. A PostgreSQL target is asked over a
  // connection of its own (opened with `options`); a file that is not
  // there is another database.
  Expected<bool> is_named_by(const std::string& target, const OpenOptions& options = {});

  // SQLite's PRAGMA integrity_check: empty when the file is sound. A
  // PostgreSQL server keeps its own: nothing to report here.
  virtual Expected<std::vector<std::string>> integrity_check() = 0;

  // The connection under a PostgreSQL database (kupsert writes through it
  // with COPY); null for SQLite.
  virtual PgConnection* connection() { return nullptr; }

 protected:
  explicit Database(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// BEGIN ... COMMIT, rolled back unless committed. On SQLite, BEGIN
// IMMEDIATE: writers take the write lock up front, so two processes never
// deadlock on an upgrade.
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

// The SQL function both backends define: kpipe_seal(v1, v2, ...), an
// integer hash of its arguments' values, for rows whose changes by other
// programs should show (the state tables' seal columns). Call it through
// seal_call(), which writes it as each dialect needs.
inline constexpr const char* kSealFunction = "kpipe_seal";
std::string seal_call(Dialect dialect, const std::vector<std::string_view>& args);

// Migrations written once for both dialects: each text with {int} (a
// 64-bit integer column), {blob} (bytes) and the caller's own words (NAME,
// SQL) put in as `dialect` spells them.
using SqlWords = std::vector<std::pair<std::string, std::string>>;
std::vector<std::string> dialect_migrations(Dialect dialect, const std::vector<const char*>& texts,
                                            const SqlWords& words);

// A store's target as messages show it: a file as given, a PostgreSQL
// target without its password (kpipe(7), STORES).
std::string display_target(std::string_view target);

// Quotes an identifier for SQL ("a""b"). Callers validate identifiers
// first; quoting makes any name data, never SQL.
std::string quote_identifier(std::string_view name);

// A position in two columns (kpipe(7), LOGS): a Kafka offset in "offset",
// a Kinesis position (a sequence number's digits, "@" and a time) in
// sequence, with "offset" 0. Bound at parameters `offset` and `sequence`.
void bind_position(Statement& stmt, int offset, int sequence, const Position& p);
// The columns `offset` and `offset + 1` ("offset", sequence) of `table`.
Expected<Position> column_position(const Statement& stmt, int offset, std::string_view table);

}  // namespace kpipe
