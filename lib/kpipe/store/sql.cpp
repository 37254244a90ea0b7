#include "kpipe/store/sql.h"

#include <sys/stat.h>

#include <fmt/args.h>

#include "kpipe/store/postgres.h"
#include "kpipe/store/sqlite.h"
#include "kpipe/target.h"

namespace kpipe {

Status Statement::run() {
  auto r = impl_->step();
  impl_->reset();
  if (!r) return r.take_error();
  return {};
}

std::optional<int64_t> Statement::column_optional_int(int i) const {
  if (column_type(i) == Type::kNull) return std::nullopt;
  return column_int(i);
}

std::optional<std::string> Statement::column_optional_text(int i) const {
  if (column_type(i) == Type::kNull) return std::nullopt;
  return std::string(column_text(i));
}

Database::~Database() = default;

namespace {

std::string file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return fmt::format("file {}:{}", st.st_dev, st.st_ino);
}

}  // namespace

Expected<std::string> Database::identity() {
  return file_identity(path_);
}

Expected<bool> Database::is_named_by(const std::string& target, const OpenOptions& options) {
  if (is_postgres_target(target) != postgres()) return false;
  auto mine = identity();
  if (!mine) return mine.take_error();
  if (mine->empty()) return false;
  if (!postgres()) return file_identity(target) == *mine;
  auto other = Database::open(target, options);
  if (!other) return other.take_error();
  auto theirs = (*other)->identity();
  if (!theirs) return theirs.take_error();
  return *theirs == *mine;
}

Expected<std::unique_ptr<Database>> Database::open(const std::string& target, OpenOptions options) {
  if (is_postgres_target(target)) return open_postgres(target, options);
  return open_sqlite(target, options);
}

Expected<bool> Database::has_table(std::string_view table) {
  auto stmt = prepare(postgres() ? "SELECT 1 WHERE to_regclass(?) IS NOT NULL"
                                 : "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
  if (!stmt) return stmt.take_error();
  stmt->bind_text(1, postgres() ? quote_identifier(table) : std::string(table));
  return stmt->step();
}

Expected<int64_t> Database::schema_version(std::string_view component) {
  // Asked of a database opened read-only too: nothing is created here.
  auto kept = has_table("kpipe_schema");
  if (!kept) return kept.take_error();
  if (!*kept) return int64_t{0};
  auto stmt = prepare("SELECT version FROM kpipe_schema WHERE component = ?");
  if (!stmt) return stmt.take_error();
  stmt->bind_text(1, component);
  auto row = stmt->step();
  if (!row) return row.take_error();
  return *row ? stmt->column_int(0) : int64_t{0};
}

Status Database::migrate(std::string_view component, const std::vector<std::string>& migrations) {
  for (;;) {
    auto tx = Transaction::begin(*this);
    if (!tx) return tx.take_error();
    // PostgreSQL's BEGIN takes no lock: processes that open one database
    // at once (the stages of a pipeline) upgrade it one after the other.
    if (postgres()) KPIPE_TRY(exec("SELECT pg_advisory_xact_lock(7021781806061282931)"));
    KPIPE_TRY(
        exec("CREATE TABLE IF NOT EXISTS kpipe_schema (component TEXT PRIMARY KEY, version INTEGER "
             "NOT NULL)"));
    auto version = schema_version(component);
    if (!version) return version.take_error();
    auto target = static_cast<int64_t>(migrations.size());
    if (*version > target)
      return failure(
          "{}: the '{}' tables are at schema version {}, newer than this program knows ({}); "
          "upgrade kpipe",
          path_, component, *version, target);
    if (*version == target) return tx->commit();
    KPIPE_TRY(exec(migrations[static_cast<size_t>(*version)]));
    auto bump = prepare(
        "INSERT INTO kpipe_schema (component, version) VALUES (?, ?) "
        "ON CONFLICT(component) DO UPDATE SET version = excluded.version");
    if (!bump) return bump.take_error();
    bump->bind_text(1, component).bind(2, *version + 1);
    KPIPE_TRY(bump->run());
    KPIPE_TRY(tx->commit());
  }
}

Expected<Transaction> Transaction::begin(Database& db) {
  KPIPE_TRY(db.begin_write());
  return Transaction(&db);
}

Transaction::Transaction(Transaction&& other) noexcept : db_(other.db_) {
  other.db_ = nullptr;
}

Transaction::~Transaction() {
  if (db_ != nullptr) (void)db_->exec("ROLLBACK");
}

Status Transaction::commit() {
  Database* db = db_;
  db_ = nullptr;
  Status s = db->commit_write();
  // A COMMIT that failed for the file's sake (its disk full) can leave
  // the transaction open on SQLite, holding the write lock: end it, so
  // that nothing of it stays and the other writers go on.
  if (!s.ok() && !db->postgres()) (void)db->exec("ROLLBACK");
  return s;
}

std::string seal_call(Dialect dialect, const std::vector<std::string_view>& args) {
  std::string out = kSealFunction;
  out.push_back('(');
  for (size_t i = 0; i < args.size(); ++i) {
    if (i > 0) out.append(", ");
    // PostgreSQL's kpipe_seal takes text (postgres.cpp): each value as
    // its text, the column's type being fixed.
    if (dialect == Dialect::kPostgres) {
      out.append("CAST(").append(args[i]).append(" AS text)");
    } else {
      out.append(args[i]);
    }
  }
  out.push_back(')');
  return out;
}

std::vector<std::string> dialect_migrations(Dialect dialect, const std::vector<const char*>& texts,
                                            const SqlWords& words) {
  bool pg = dialect == Dialect::kPostgres;
  fmt::dynamic_format_arg_store<fmt::format_context> args;
  args.push_back(fmt::arg("int", pg ? "BIGINT" : "INTEGER"));
  args.push_back(fmt::arg("blob", pg ? "BYTEA" : "BLOB"));
  for (const auto& [name, sql] : words) args.push_back(fmt::arg(name.c_str(), sql));
  std::vector<std::string> out;
  for (const char* text : texts) out.push_back(fmt::vformat(text, args));
  return out;
}

std::string display_target(std::string_view target) {
  return is_postgres_target(target) ? redact_postgres_target(target) : std::string(target);
}

std::string quote_identifier(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

void bind_position(Statement& stmt, int offset, int sequence, const Position& p) {
  if (!p.is_offset()) {
    stmt.bind(offset, int64_t{0}).bind_text(sequence, p.text());
  } else {
    stmt.bind(offset, p.offset()).bind_null(sequence);
  }
}

Expected<Position> column_position(const Statement& stmt, int offset, std::string_view table) {
  if (stmt.column_type(offset + 1) == Statement::Type::kNull)
    return Position(stmt.column_int(offset));
  auto p = Position::from_string(stmt.column_text(offset + 1));
  if (!p)
    return failure("{}: sequence '{}' is not a Kinesis position (changed outside kpipe?)", table,
                   stmt.column_text(offset + 1));
  return std::move(*p);
}

}  // namespace kpipe
