// The only door to PostgreSQL: a connection, queries with bound values,
// COPY and transactions, with errors as values. No other file includes
// libpq-fe.h. How a target is written (kpipe(7), STORES): a URI
// (postgresql://user@host:port/db?sslmode=require, or postgres://...),
// or "postgresql:" followed by a keyword=value conninfo ("postgresql:"
// alone: everything from the PG* environment variables and ~/.pgpass).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/status.h"
#include "kpipe/store/sql.h"

struct pg_conn;
struct pg_result;

namespace kpipe {

// How long the server lets a session of kpipe's sit idle inside a
// transaction before it ends it (PgConnection::connect).
constexpr int64_t kIdleInTransactionTimeout = 30000;

// The target as it may be shown: the password, where one is written in
// it, left out ("postgresql://app@db/x", "postgresql:host=db user=app").
std::string redact_postgres_target(std::string_view target);

// A message of libpq's (or the server's) about `target`, as kpipe shows
// it: one line, and whatever it quotes of the target's password, a piece
// of it shown as "***", the target whole as redact_postgres_target's.
// Every message from libpq passes through it: libpq quotes what it cannot
// parse, a password included.
std::string redact_postgres_message(std::string_view message, std::string_view target);

// One query's result, freed with it.
class PgResult {
 public:
  PgResult() = default;
  explicit PgResult(pg_result* r) : r_(r) {}
  ~PgResult();
  PgResult(PgResult&& other) noexcept : r_(other.r_) { other.r_ = nullptr; }
  PgResult& operator=(PgResult&& other) noexcept;
  PgResult(const PgResult&) = delete;
  PgResult& operator=(const PgResult&) = delete;

  int rows() const;
  int columns() const;
  bool is_null(int row, int column) const;
  std::string_view text(int row, int column) const;
  int64_t integer(int row, int column) const;
  // A column's type (PostgreSQL's oid) and name.
  unsigned type(int column) const;
  std::string_view name(int column) const;
  // The command tag ("INSERT 0 5", "COMMIT", "ROLLBACK").
  std::string_view command() const;
  // Rows an INSERT, UPDATE or DELETE touched.
  int64_t affected() const;

 private:
  pg_result* r_ = nullptr;
};

// A value bound to a query's $1, $2, ...: text in PostgreSQL's input
// syntax, or NULL. Never spliced into SQL.
using PgParam = std::optional<std::string>;

class PgConnection {
 public:
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Connects as `application` (empty: the running program; shown in
  // pg_stat_activity as APPLICATION[PID]), with the
  // client encoding UTF8 and, unless the target or PGCONNECT_TIMEOUT says
  // otherwise, a 10 s connect timeout. Errors name the redacted target.
  static Expected<std::unique_ptr<PgConnection>> connect(const std::string& target,
                                                         const std::string& application);

  // The target without its password, for messages.
  const std::string& display() const { return display_; }

  // Statements that return nothing worth reading (several may be given).
  Status exec(std::string_view sql);
  // One statement with its values bound.
  Expected<PgResult> query(std::string_view sql, const std::vector<PgParam>& params = {});
  // One statement, its values given as libpq takes them (PQexecParams).
  Expected<PgResult> run_params(const std::string& sql, int n, const unsigned* types,
                                const char* const* values, const int* lengths, const int* formats);
  // COMMIT: an error when the server rolled the transaction back instead.
  Status commit();
  // COPY ... FROM STDIN, fed `data` in COPY's text format.
  Status copy_in(std::string_view copy_sql, std::string_view data);

  // After a query failed: the failure's SQLSTATE (empty when the server
  // sent none) and its message without the "ERROR:" prefix.
  const std::string& sqlstate() const { return sqlstate_; }
  const std::string& reason() const { return reason_; }
  // Whether the last failure was the row's values (SQLSTATE classes 22,
  // data exception, and 23, integrity constraint violation): the caller
  // may treat the row as bad input. Otherwise it was the database's.
  bool refused_values() const;
  // Whether the connection is gone: every later query fails too.
  bool broken() const;

 private:
  PgConnection(pg_conn* conn, std::string target, std::string display);
  // Reads the outcome of the query just sent, turning a failure into an
  // error naming the target (and remembering sqlstate() and reason()).
  Expected<PgResult> outcome(pg_result* r, std::string_view what);
  pg_conn* conn_;
  // The target as given, password and all: what the messages hide.
  std::string target_;
  std::string display_;
  std::string sqlstate_;
  std::string reason_;
  // When the last reply came, whether it left a transaction open, and the
  // longest wait between replies in that transaction: a connection lost
  // after a wait past kIdleInTransactionTimeout says why.
  std::chrono::steady_clock::time_point last_reply_ = std::chrono::steady_clock::now();
  bool in_transaction_ = false;
  int64_t transaction_pause_ = 0;
};

// The Database of sql.h on a PostgreSQL server: statements written with
// SQLite's "?" and "?N" placeholders run with PostgreSQL's "$N".
Expected<std::unique_ptr<Database>> open_postgres(const std::string& target, OpenOptions options);

// "?" and "?N" placeholders as PostgreSQL's "$N"; quoted text left alone.
std::string postgres_placeholders(std::string_view sql);

// Appends `value` to a COPY text-format row: backslash, tab, newline and
// carriage return escaped. The caller adds the tabs between columns and
// the newline after the row; NULL is written as \N.
void append_copy_text(std::string& out, std::string_view value);

}  // namespace kpipe
