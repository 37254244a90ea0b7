#include "kpipe/store/sqlite.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <sqlite3.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kpipe {

namespace {

// How messages name a database: its file, what it is, and what a file
// that is not a database is not (OpenOptions).
struct Naming {
  std::string path;
  std::string kind;
  std::string not_kind;
};

// A fault of the file itself in the words of an operator who must act on
// it (kpipe(7), STORES); empty for the failure of a statement (a
// constraint, a syntax error, a lock held), which SQLite's message says
// well enough. `rc` is the extended result code. The system's errno tells
// a full or read-only file system from other I/O errors: SQLite reports a
// write that fails for want of space as SQLITE_FULL, but the
// shared-memory file it cannot extend as an I/O error.
std::string fault_words(int rc, int sys_errno) {
  int primary = rc & 0xff;
  bool io = primary == SQLITE_IOERR || primary == SQLITE_CANTOPEN || primary == SQLITE_FULL;
  if (primary == SQLITE_FULL || (io && (sys_errno == ENOSPC || sys_errno == EDQUOT)))
    return "cannot write: the file system is full";
  if (primary == SQLITE_READONLY || (io && sys_errno == EROFS))
    return "cannot write: the file or its file system is read-only";
  if (primary == SQLITE_CORRUPT) return "the file is damaged";
  if (primary != SQLITE_CANTOPEN && primary != SQLITE_IOERR) return {};
  std::string words = primary == SQLITE_CANTOPEN ? "cannot open" : "an I/O error";
  if (sys_errno != 0) words += fmt::format(": {}", std::strerror(sys_errno));
  return words;
}

// A damaged file that is shorter than its header says (a copy cut short,
// a file truncated by hand) is told apart: its header records how many
// pages it has (valid while its change counter matches the version it was
// written at), and a WAL database's file is never shorter than that.
std::string cut_short(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  unsigned char h[100];
  struct stat st {};
  bool read_all = ::pread(fd, h, sizeof h, 0) == static_cast<ssize_t>(sizeof h);
  bool stated = ::fstat(fd, &st) == 0;
  ::close(fd);
  if (!read_all || !stated || std::memcmp(h, "SQLite format 3", 16) != 0) return {};
  auto be32 = [&h](int at) {
    return (uint32_t{h[at]} << 24) | (uint32_t{h[at + 1]} << 16) | (uint32_t{h[at + 2]} << 8) |
           uint32_t{h[at + 3]};
  };
  uint64_t page = (uint32_t{h[16]} << 8) | h[17];
  if (page == 1) page = 65536;
  uint64_t want = page * be32(28);
  if (be32(24) != be32(92) || want == 0 || static_cast<uint64_t>(st.st_size) >= want) return {};
  return fmt::format("cut short at {} bytes of the {} its header records", st.st_size, want);
}

// The same, with SQLite's message after the words; a file that is not a
// database is named as what it is not.
std::string fault_message(const Naming& n, int rc, int sys_errno, const char* msg) {
  if ((rc & 0xff) == SQLITE_NOTADB) return fmt::format("'{}' is not {}", n.path, n.not_kind);
  std::string words = fault_words(rc, sys_errno);
  if (words.empty()) return {};
  if ((rc & 0xff) == SQLITE_CORRUPT && n.path != ":memory:") {
    std::string cut = cut_short(n.path);
    if (!cut.empty()) words += ": " + cut;
  }
  return fmt::format("{} '{}': {} ({})", n.kind, n.path, words, msg);
}

// The error of the last call on `db`: a fault of the file in an operator's
// words, or "PATH: WHAT: SQLite's message".
Error sqlite_error(sqlite3* db, const Naming& n, std::string_view what) {
  if (db == nullptr) return failure("{}: {}: out of memory", n.path, what);
  const char* msg = sqlite3_errmsg(db);
  std::string fault = fault_message(n, sqlite3_extended_errcode(db), sqlite3_system_errno(db), msg);
  if (!fault.empty()) return failure(std::move(fault));
  if (what.empty()) return failure("{}: {}", n.path, msg);
  return failure("{}: {}: {}", n.path, what, msg);
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

class SqliteStatement final : public Statement::Impl {
 public:
  SqliteStatement(sqlite3_stmt* stmt, sqlite3* db, const Naming& naming)
      : stmt_(stmt), db_(db), naming_(naming) {}
  ~SqliteStatement() override { sqlite3_finalize(stmt_); }

  void bind_int(int i, int64_t v) override { check(sqlite3_bind_int64(stmt_, i, v)); }
  void bind_double(int i, double v) override { check(sqlite3_bind_double(stmt_, i, v)); }
  void bind_text(int i, std::string_view v, bool copy) override {
    check(sqlite3_bind_text64(stmt_, i, v.data(), v.size(), copy ? SQLITE_TRANSIENT : SQLITE_STATIC,
                              SQLITE_UTF8));
  }
  void bind_blob(int i, std::string_view v) override {
    check(sqlite3_bind_blob64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT));
  }
  void bind_null(int i) override { check(sqlite3_bind_null(stmt_, i)); }

  Expected<bool> step() override {
    if (bind_error_ != 0) {
      int rc = bind_error_;
      bind_error_ = 0;
      sqlite3_reset(stmt_);
      if ((rc & 0xff) == SQLITE_TOOBIG) refusal_ = sqlite3_errstr(rc);
      return failure("{}: bind: {}", naming_.path, sqlite3_errstr(rc));
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
    Error e = sqlite_error(db_, naming_, "statement failed");
    sqlite3_reset(stmt_);
    return e;
  }

  void reset() override {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  const std::string& refusal() const override { return refusal_; }

  Statement::Type column_type(int i) const override {
    switch (sqlite3_column_type(stmt_, i)) {
      case SQLITE_INTEGER:
        return Statement::Type::kInteger;
      case SQLITE_FLOAT:
        return Statement::Type::kFloat;
      case SQLITE_TEXT:
        return Statement::Type::kText;
      case SQLITE_BLOB:
        return Statement::Type::kBlob;
      default:
        return Statement::Type::kNull;
    }
  }
  int64_t column_int(int i) const override { return sqlite3_column_int64(stmt_, i); }
  double column_double(int i) const override { return sqlite3_column_double(stmt_, i); }
  std::string_view column_text(int i) const override {
    const void* p = sqlite3_column_blob(stmt_, i);
    int n = sqlite3_column_bytes(stmt_, i);
    if (p == nullptr) return {};
    return {static_cast<const char*>(p), static_cast<size_t>(n)};
  }
  int column_count() const override { return sqlite3_column_count(stmt_); }
  std::string_view column_name(int i) const override { return sqlite3_column_name(stmt_, i); }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) bind_error_ = rc;
  }
  sqlite3_stmt* stmt_;
  sqlite3* db_;
  const Naming& naming_;  // the database's, which outlives its statements
  int bind_error_ = 0;
  std::string refusal_;
};

class SqliteDatabase final : public Database {
 public:
  SqliteDatabase(sqlite3* db, Naming naming)
      : Database(naming.path), db_(db), naming_(std::move(naming)) {}
  ~SqliteDatabase() override { sqlite3_close_v2(db_); }

  Dialect dialect() const override { return Dialect::kSqlite; }

  Status exec(std::string_view sql) override {
    std::string text(sql);
    char* msg = nullptr;
    int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &msg);
    if (rc == SQLITE_OK) return {};
    sqlite3_free(msg);  // sqlite3_errmsg() says the same
    return sqlite_error(db_, naming_, "");
  }

  Expected<Statement> prepare(std::string_view sql) override {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) return sqlite_error(db_, naming_, "cannot prepare statement");
    return Statement(std::make_unique<SqliteStatement>(stmt, db_, naming_));
  }

  int64_t changes() const override { return sqlite3_changes64(db_); }
  int max_columns() const override { return sqlite3_limit(db_, SQLITE_LIMIT_COLUMN, -1); }
  Status begin_write() override { return exec("BEGIN IMMEDIATE"); }

  Expected<std::vector<std::string>> integrity_check() override {
    auto stmt = prepare("PRAGMA integrity_check");
    if (!stmt) return stmt.take_error();
    std::vector<std::string> problems;
    for (;;) {
      auto row = stmt->step();
      // SQLite's check can stop at a page too damaged to read: what it
      // found before that is worth more than the error alone.
      if (!row && problems.empty()) return row.take_error();
      if (!row) {
        problems.push_back(fmt::format("the check stopped early: {}", row.error().message));
        break;
      }
      if (!*row) break;
      // A row may hold several problems, a line each, after a heading.
      std::string_view text = stmt->column_text(0);
      while (!text.empty()) {
        size_t end = text.find('\n');
        std::string_view line = text.substr(0, end);
        text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
        if (line != "ok" && !(line.starts_with("*** ") && line.ends_with(" ***")))
          problems.emplace_back(line);
      }
    }
    return problems;
  }

  sqlite3* handle() { return db_; }
  const Naming& naming() const { return naming_; }

 private:
  sqlite3* db_;
  Naming naming_;
};

void call_bytes_function(sqlite3_context* context, int, sqlite3_value** args) {
  if (sqlite3_value_type(args[0]) == SQLITE_NULL) {
    sqlite3_result_null(context);
    return;
  }
  auto fn = *static_cast<BytesFunction*>(sqlite3_user_data(context));
  const auto* bytes = static_cast<const char*>(sqlite3_value_blob(args[0]));
  auto size = static_cast<size_t>(sqlite3_value_bytes(args[0]));
  std::string_view view = bytes == nullptr ? std::string_view() : std::string_view(bytes, size);
  sqlite3_result_int64(context, fn(view));
}

// A reader of a WAL database needs its shared-memory file, which SQLite
// cannot make on a read-only file system, nor in a directory the user may
// not write (a store of another user's, which the commands that only read
// promise to read): there the file is read as immutable instead. Not when
// a WAL file with frames is beside it: an immutable reader would ignore
// them. Without frames the file holds every commit; a writer that starts
// while this reader reads adds its own to a WAL this reader does not see,
// as any reader's snapshot would not.
bool unchangeable(const std::string& path) {
  struct stat wal {};
  if (::stat((path + "-wal").c_str(), &wal) == 0 && wal.st_size > 0) return false;
  struct statvfs fs {};
  if (::statvfs(path.c_str(), &fs) == 0 && (fs.f_flag & ST_RDONLY) != 0) return true;
  // A shared-memory file there already, which this user may use, serves.
  if (::faccessat(AT_FDCWD, (path + "-shm").c_str(), R_OK | W_OK, AT_EACCESS) == 0) return false;
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  return ::faccessat(AT_FDCWD, dir.c_str(), W_OK, AT_EACCESS) != 0;
}

// file:PATH?immutable=1, with the characters a URI gives meaning escaped.
std::string immutable_uri(const std::string& path) {
  std::string uri = "file:";
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      uri += fmt::format("%{:02x}", static_cast<unsigned char>(c));
      continue;
    }
    uri.push_back(c);
  }
  return uri + "?immutable=1";
}

}  // namespace

Expected<std::unique_ptr<Database>> open_sqlite(const std::string& path, OpenOptions options) {
  // Memory statistics take a global mutex on every allocation SQLite makes,
  // and kpipe never reads them. Only possible before SQLite initialises
  // (the first open); later calls are refused harmlessly.
  static const bool kConfigured = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK;
  (void)kConfigured;
  bool memory = path == ":memory:" || path.empty();
  Naming naming{memory ? ":memory:" : path, std::move(options.kind), std::move(options.not_kind)};
  if (!memory && options.create && !options.read_only) {
    // SQLite would create the file with the umask's mode; state and dead
    // letters may hold private data, so the file is made 0600 first.
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
      int err = errno;
      // A file there already that may not be written (its mode, or an
      // immutable attribute, which binds root too) is read-only to us.
      struct stat st {};
      if (err == EROFS || ((err == EACCES || err == EPERM) && ::stat(path.c_str(), &st) == 0))
        return failure("{} '{}': {} ({})", naming.kind, path, fault_words(SQLITE_CANTOPEN, EROFS),
                       std::strerror(err));
      return failure("{} '{}': {}", naming.kind, path, fault_words(SQLITE_CANTOPEN, err));
    }
    ::close(fd);
  }
  int flags = SQLITE_OPEN_NOMUTEX;
  flags |= options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
  if (!options.read_only && options.create) flags |= SQLITE_OPEN_CREATE;
  std::string name = memory ? ":memory:" : path;
  if (!memory && options.read_only && unchangeable(path)) {
    name = immutable_uri(path);
    flags |= SQLITE_OPEN_URI;
  }
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(name.c_str(), &raw, flags, nullptr);
  if (rc != SQLITE_OK) {
    Error e = raw != nullptr ? sqlite_error(raw, naming, "cannot open")
                             : failure("{}: cannot open: {}", path, sqlite3_errstr(rc));
    sqlite3_close_v2(raw);
    return e;
  }
  auto db = std::make_unique<SqliteDatabase>(raw, std::move(naming));
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
  if (rc != SQLITE_OK) return sqlite_error(raw, db->naming(), "cannot define function");
  return std::unique_ptr<Database>(std::move(db));
}

Status define_sqlite_function(Database& db, const std::string& name, BytesFunction fn) {
  auto* sqlite = dynamic_cast<SqliteDatabase*>(&db);
  if (sqlite == nullptr) return failure("{}: not an SQLite database", db.path());
  auto* slot = new BytesFunction(fn);
  int rc = sqlite3_create_function_v2(sqlite->handle(), name.c_str(), 1,
                                      SQLITE_UTF8 | SQLITE_DETERMINISTIC, slot, call_bytes_function,
                                      nullptr, nullptr,
                                      [](void* p) { delete static_cast<BytesFunction*>(p); });
  // SQLite calls the destructor itself when the function cannot be made.
  if (rc != SQLITE_OK)
    return sqlite_error(sqlite->handle(), sqlite->naming(), "cannot define function");
  return {};
}

}  // namespace kpipe
