#include "kpipe/store/sqlite.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <sqlite3.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kpipe {

namespace {

Error sqlite_error(sqlite3* db, const std::string& path, std::string_view what) {
  const char* msg = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
  return failure("{}: {}: {}", path, what, msg);
}

// kpipe_seal(v1, v2, ...): a hash of a row's values, each with its type, so
// that kpipe can tell a row it wrote from one changed by another program
// (kpipe(7), CONTROL LINES AND CHECKPOINTS). Only kpipe's connections
// define it: a writer such as the sqlite3 shell cannot keep a seal right.
// A check against mistakes, not against someone set on forging rows.
void seal_function(sqlite3_context* context, int argc, sqlite3_value** args) {
  constexpr XXH64_hash_t kSeed = 0x6b70697065736561;  // "kpipesea"
  std::string bytes;  // each value as its type, then its size and bytes
  auto append = [&bytes](const void* p, size_t n) { bytes.append(static_cast<const char*>(p), n); };
  for (int i = 0; i < argc; ++i) {
    auto type = static_cast<char>(sqlite3_value_type(args[i]));
    bytes.push_back(type);
    switch (type) {
      case SQLITE_INTEGER: {
        sqlite3_int64 v = sqlite3_value_int64(args[i]);
        append(&v, sizeof v);
        break;
      }
      case SQLITE_FLOAT: {
        double v = sqlite3_value_double(args[i]);
        append(&v, sizeof v);
        break;
      }
      case SQLITE_TEXT:
      case SQLITE_BLOB: {
        const void* p = sqlite3_value_blob(args[i]);
        auto size = static_cast<uint64_t>(sqlite3_value_bytes(args[i]));
        append(&size, sizeof size);
        if (p != nullptr) append(p, size);
        break;
      }
      default:
        break;
    }
  }
  auto seal = XXH3_64bits_withSeed(bytes.data(), bytes.size(), kSeed);
  sqlite3_result_int64(context, static_cast<sqlite3_int64>(seal));
}

}  // namespace

Statement::Statement(sqlite3_stmt* stmt, sqlite3* db, std::string path)
    : stmt_(stmt), db_(db), path_(std::move(path)) {}

Statement::~Statement() {
  if (stmt_ != nullptr) sqlite3_finalize(stmt_);
}

Statement::Statement(Statement&& other) noexcept
    : stmt_(other.stmt_),
      db_(other.db_),
      path_(std::move(other.path_)),
      bind_error_(other.bind_error_),
      refusal_(std::move(other.refusal_)) {
  other.stmt_ = nullptr;
}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    if (stmt_ != nullptr) sqlite3_finalize(stmt_);
    stmt_ = other.stmt_;
    db_ = other.db_;
    path_ = std::move(other.path_);
    bind_error_ = other.bind_error_;
    refusal_ = std::move(other.refusal_);
    other.stmt_ = nullptr;
  }
  return *this;
}

Statement& Statement::bind(int i, int64_t v) {
  int rc = sqlite3_bind_int64(stmt_, i, v);
  if (rc != SQLITE_OK) bind_error_ = rc;
  return *this;
}

Statement& Statement::bind(int i, double v) {
  int rc = sqlite3_bind_double(stmt_, i, v);
  if (rc != SQLITE_OK) bind_error_ = rc;
  return *this;
}

Statement& Statement::bind_text(int i, std::string_view v) {
  int rc = sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) bind_error_ = rc;
  return *this;
}

Statement& Statement::bind_text_static(int i, std::string_view v) {
  int rc = sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_STATIC, SQLITE_UTF8);
  if (rc != SQLITE_OK) bind_error_ = rc;
  return *this;
}

Statement& Statement::bind_blob(int i, std::string_view v) {
  int rc = sqlite3_bind_blob64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) bind_error_ = rc;
  return *this;
}

Statement& Statement::bind_null(int i) {
  int rc = sqlite3_bind_null(stmt_, i);
  if (rc != SQLITE_OK) bind_error_ = rc;
  return *this;
}

Expected<bool> Statement::step() {
  if (bind_error_ != 0) {
    int rc = bind_error_;
    bind_error_ = 0;
    sqlite3_reset(stmt_);
    if ((rc & 0xff) == SQLITE_TOOBIG) refusal_ = sqlite3_errstr(rc);
    return failure("{}: bind: {}", path_, sqlite3_errstr(rc));
  }
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  switch (rc & 0xff) {
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_TOOBIG:
      refusal_ = sqlite3_errmsg(db_);
      break;
    default:
      refusal_.clear();
  }
  Error e = sqlite_error(db_, path_, "statement failed");
  sqlite3_reset(stmt_);
  return e;
}

Status Statement::run() {
  auto r = step();
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  if (!r) return r.take_error();
  return {};
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

Statement::Type Statement::column_type(int i) const {
  switch (sqlite3_column_type(stmt_, i)) {
    case SQLITE_INTEGER:
      return Type::kInteger;
    case SQLITE_FLOAT:
      return Type::kFloat;
    case SQLITE_TEXT:
      return Type::kText;
    case SQLITE_BLOB:
      return Type::kBlob;
    default:
      return Type::kNull;
  }
}

int64_t Statement::column_int(int i) const {
  return sqlite3_column_int64(stmt_, i);
}
double Statement::column_double(int i) const {
  return sqlite3_column_double(stmt_, i);
}

std::string_view Statement::column_text(int i) const {
  const void* p = sqlite3_column_blob(stmt_, i);
  int n = sqlite3_column_bytes(stmt_, i);
  if (p == nullptr) return {};
  return {static_cast<const char*>(p), static_cast<size_t>(n)};
}

std::optional<int64_t> Statement::column_optional_int(int i) const {
  if (sqlite3_column_type(stmt_, i) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_int64(stmt_, i);
}

std::optional<std::string> Statement::column_optional_text(int i) const {
  if (sqlite3_column_type(stmt_, i) == SQLITE_NULL) return std::nullopt;
  return std::string(column_text(i));
}

int Statement::column_count() const {
  return sqlite3_column_count(stmt_);
}
std::string_view Statement::column_name(int i) const {
  return sqlite3_column_name(stmt_, i);
}

Database::Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

Database::~Database() {
  sqlite3_close_v2(db_);
}

Expected<std::unique_ptr<Database>> Database::open(const std::string& path, OpenOptions options) {
  // Memory statistics take a global mutex on every allocation SQLite makes,
  // and kpipe never reads them. Only possible before SQLite initialises
  // (the first open); later calls are refused harmlessly.
  static const bool kConfigured = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK;
  (void)kConfigured;
  bool memory = path == ":memory:" || path.empty();
  if (!memory && options.create && !options.read_only) {
    // SQLite would create the file with the umask's mode; state and dead
    // letters may hold private data, so the file is made 0600 first.
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return failure("cannot open '{}': {}", path, std::strerror(errno));
    ::close(fd);
  }
  int flags = SQLITE_OPEN_NOMUTEX;
  flags |= options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
  if (!options.read_only && options.create) flags |= SQLITE_OPEN_CREATE;
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(memory ? ":memory:" : path.c_str(), &raw, flags, nullptr);
  if (rc != SQLITE_OK) {
    Error e = failure("cannot open database '{}': {}", path,
                      raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc));
    sqlite3_close_v2(raw);
    return e;
  }
  std::unique_ptr<Database> db(new Database(raw, memory ? ":memory:" : path));
  sqlite3_busy_timeout(raw, options.busy_timeout_ms);
  sqlite3_extended_result_codes(raw, 1);
  if (!memory && !options.read_only && options.wal) {
    // Switching a new file to WAL takes an exclusive lock, and SQLite does
    // not call the busy handler for it: when the stages of a pipeline open
    // a new state file together, all but one see SQLITE_BUSY. Retry for as
    // long as the busy timeout would have waited.
    for (int waited = 0;; waited += 10) {
      Status wal = db->exec("PRAGMA journal_mode=WAL");
      if (wal.ok()) break;
      if (sqlite3_errcode(raw) != SQLITE_BUSY || waited >= options.busy_timeout_ms)
        return wal.take_error();
      sqlite3_sleep(10);
    }
    // WAL with synchronous=NORMAL is durable across process crashes (what
    // a SIGKILLed pipeline needs); FULL adds power-loss durability at the
    // cost of an fsync per commit.
    KPIPE_TRY(db->exec("PRAGMA synchronous=NORMAL"));
  }
  KPIPE_TRY(db->exec("PRAGMA foreign_keys=ON"));
  // On every connection: any of them may write or verify the state tables,
  // whose rows carry a seal (kpipe(7), CONTROL LINES AND CHECKPOINTS).
  rc = sqlite3_create_function_v2(raw, kSealFunction, -1, SQLITE_UTF8 | SQLITE_DETERMINISTIC,
                                  nullptr, seal_function, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return sqlite_error(raw, db->path(), "cannot define function");
  return db;
}

Status Database::exec(std::string_view sql) {
  std::string text(sql);
  char* msg = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &msg);
  if (rc == SQLITE_OK) return {};
  std::string m = msg != nullptr ? msg : sqlite3_errstr(rc);
  sqlite3_free(msg);
  return failure("{}: {}", path_, m);
}

Expected<Statement> Database::prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) return sqlite_error(db_, path_, "cannot prepare statement");
  return Statement(stmt, db_, path_);
}

int64_t Database::last_insert_rowid() const {
  return sqlite3_last_insert_rowid(db_);
}
int64_t Database::changes() const {
  return sqlite3_changes64(db_);
}
int Database::max_columns() const {
  return sqlite3_limit(db_, SQLITE_LIMIT_COLUMN, -1);
}

namespace {

void call_bytes_function(sqlite3_context* context, int, sqlite3_value** args) {
  if (sqlite3_value_type(args[0]) == SQLITE_NULL) {
    sqlite3_result_null(context);
    return;
  }
  auto fn = *static_cast<Database::BytesFunction*>(sqlite3_user_data(context));
  const auto* bytes = static_cast<const char*>(sqlite3_value_blob(args[0]));
  auto size = static_cast<size_t>(sqlite3_value_bytes(args[0]));
  std::string_view view = bytes == nullptr ? std::string_view() : std::string_view(bytes, size);
  sqlite3_result_int64(context, fn(view));
}

}  // namespace

Status Database::define_function(const std::string& name, BytesFunction fn) {
  auto* slot = new BytesFunction(fn);
  int rc = sqlite3_create_function_v2(db_, name.c_str(), 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC,
                                      slot, call_bytes_function, nullptr, nullptr,
                                      [](void* p) { delete static_cast<BytesFunction*>(p); });
  // SQLite calls the destructor itself when the function cannot be made.
  if (rc != SQLITE_OK) return sqlite_error(db_, path_, "cannot define function");
  return {};
}

Error Database::error(std::string_view what) const {
  return sqlite_error(db_, path_, what);
}

Expected<int64_t> Database::schema_version(std::string_view component) {
  KPIPE_TRY(
      exec("CREATE TABLE IF NOT EXISTS kpipe_schema (component TEXT PRIMARY KEY, version INTEGER "
           "NOT NULL)"));
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

Expected<std::vector<std::string>> Database::integrity_check() {
  auto stmt = prepare("PRAGMA integrity_check");
  if (!stmt) return stmt.take_error();
  std::vector<std::string> problems;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.take_error();
    if (!*row) break;
    std::string line(stmt->column_text(0));
    if (line != "ok") problems.push_back(std::move(line));
  }
  return problems;
}

Expected<Transaction> Transaction::begin(Database& db) {
  KPIPE_TRY(db.exec("BEGIN IMMEDIATE"));
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
  return db->exec("COMMIT");
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

}  // namespace kpipe
