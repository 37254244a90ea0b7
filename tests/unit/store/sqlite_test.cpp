#include "kpipe/store/sqlite.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "helpers.h"

using namespace kpipe;
using kpipe::test::TempDir;

namespace {

std::unique_ptr<Database> open_db(const std::string& path, OpenOptions o = {}) {
  auto db = Database::open(path, o);
  if (!db) FAIL("cannot open: " << db.error().message);
  return std::move(*db);
}

int64_t count(Database& db, const std::string& table) {
  auto s = db.prepare("SELECT count(*) FROM " + quote_identifier(table));
  REQUIRE(s.ok());
  REQUIRE(*s->step());
  return s->column_int(0);
}

bool has_table(Database& db, const std::string& name) {
  auto s = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
  REQUIRE(s.ok());
  s->bind_text(1, name);
  return *s->step();
}

mode_t mode_of(const std::string& path) {
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 0777;
}

const std::vector<std::string> kTwo = {
    "CREATE TABLE a (x INTEGER);",
    "CREATE TABLE b (y TEXT); INSERT INTO a VALUES (1);",
};

}  // namespace

TEST_CASE("Statement: binds and reads back every type", "[sqlite]") {
  auto db = open_db(":memory:");
  REQUIRE(db->exec("CREATE TABLE t (i INTEGER, d REAL, s TEXT, b BLOB, n INTEGER)").ok());
  auto ins = db->prepare("INSERT INTO t VALUES (?, ?, ?, ?, ?)");
  REQUIRE(ins.ok());
  std::string blob("\x00\xff\x01 bytes", 9);
  ins->bind(1, int64_t{-9223372036854775807 - 1})
      .bind(2, 2.5)
      .bind_text(3, "é text")
      .bind_blob(4, blob)
      .bind_null(5);
  REQUIRE(ins->run().ok());
  CHECK(db->changes() == 1);
  // run() reset the statement: it can run again with new values.
  ins->bind(1, 7).bind(2, -0.5).bind_text(3, "").bind_blob(4, "").bind(5, std::optional<int64_t>{});
  REQUIRE(ins->run().ok());
  CHECK(db->changes() == 1);

  auto sel = db->prepare("SELECT i, d, s, b, n FROM t ORDER BY rowid");
  REQUIRE(sel.ok());
  CHECK(sel->column_count() == 5);
  CHECK(sel->column_name(2) == "s");
  REQUIRE(*sel->step());
  CHECK(sel->column_type(0) == Statement::Type::kInteger);
  CHECK(sel->column_int(0) == -9223372036854775807 - 1);
  CHECK(sel->column_type(1) == Statement::Type::kFloat);
  CHECK(sel->column_double(1) == 2.5);
  CHECK(sel->column_type(2) == Statement::Type::kText);
  CHECK(sel->column_text(2) == "é text");
  CHECK(sel->column_type(3) == Statement::Type::kBlob);
  CHECK(sel->column_text(3) == blob);
  CHECK(sel->column_type(4) == Statement::Type::kNull);
  CHECK_FALSE(sel->column_optional_int(4));
  CHECK_FALSE(sel->column_optional_text(4));
  CHECK(sel->column_optional_int(0) == -9223372036854775807 - 1);
  REQUIRE(*sel->step());
  CHECK(sel->column_int(0) == 7);
  CHECK(sel->column_optional_text(2) == std::string());
  CHECK(sel->column_text(3).empty());
  CHECK_FALSE(*sel->step());
}

TEST_CASE("Statement and Database: errors are values naming the database", "[sqlite]") {
  TempDir dir;
  std::string path = dir.file("e.db");
  auto db = open_db(path);
  auto bad = db->prepare("SELEKT 1");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().status == ExitStatus::kFailure);
  CHECK(bad.error().message == path + ": cannot prepare statement: near \"SELEKT\": syntax error");
  CHECK(db->exec("CREATE TABLE u (k TEXT PRIMARY KEY)").ok());
  auto ins = db->prepare("INSERT INTO u VALUES (?)");
  REQUIRE(ins.ok());
  ins->bind_text(1, "k");
  REQUIRE(ins->run().ok());
  ins->bind_text(1, "k");
  Status dup = ins->run();
  REQUIRE_FALSE(dup.ok());
  CHECK(dup.error().message == path + ": statement failed: UNIQUE constraint failed: u.k");
  // A bad bind is reported by the next step, and the statement recovers.
  ins->bind_text(2, "no such parameter");
  Status bind = ins->run();
  REQUIRE_FALSE(bind.ok());
  CHECK(bind.error().message == path + ": bind: column index out of range");
  ins->bind_text(1, "other");
  CHECK(ins->run().ok());
  CHECK(count(*db, "u") == 2);
  Status exec = db->exec("DROP TABLE nope");
  REQUIRE_FALSE(exec.ok());
  CHECK(exec.error().message == path + ": no such table: nope");
}

TEST_CASE("Database: a new file is created with mode 0600, whatever the umask", "[sqlite]") {
  TempDir dir;
  std::string path = dir.file("state.db");
  mode_t old = ::umask(0);
  {
    auto db = open_db(path);
    REQUIRE(db->exec("CREATE TABLE t (x); INSERT INTO t VALUES (1)").ok());
    CHECK(mode_of(path) == 0600);
    // WAL and shared-memory files take the database's mode.
    CHECK(mode_of(path + "-wal") == 0600);
    CHECK(mode_of(path + "-shm") == 0600);
  }
  ::umask(old);
}

TEST_CASE("Database: read-only and no-create openings do not create files", "[sqlite]") {
  TempDir dir;
  std::string path = dir.file("missing.db");
  OpenOptions ro;
  ro.read_only = true;
  auto a = Database::open(path, ro);
  REQUIRE_FALSE(a.ok());
  CHECK(a.error().message == "database '" + path +
                                 "': cannot open: No such file or directory (unable to open "
                                 "database file)");
  OpenOptions no_create;
  no_create.create = false;
  CHECK_FALSE(Database::open(path, no_create).ok());
  struct stat st;
  CHECK(::stat(path.c_str(), &st) != 0);
  auto in_missing_dir = Database::open(dir.file("no/such/dir.db"));
  REQUIRE_FALSE(in_missing_dir.ok());
  CHECK(in_missing_dir.error().message ==
        "database '" + dir.file("no/such/dir.db") + "': cannot open: No such file or directory");
  // A read-only connection cannot write.
  { open_db(path); }
  auto reader = open_db(path, ro);
  CHECK_FALSE(reader->exec("CREATE TABLE t (x)").ok());
}

TEST_CASE("migrate: from nothing to the newest version, once", "[sqlite]") {
  auto db = open_db(":memory:");
  CHECK(*db->schema_version("comp") == 0);
  REQUIRE(db->migrate("comp", kTwo).ok());
  CHECK(*db->schema_version("comp") == 2);
  CHECK(has_table(*db, "a"));
  CHECK(has_table(*db, "b"));
  CHECK(count(*db, "a") == 1);
  // Again: nothing runs (CREATE TABLE a would fail if it did).
  REQUIRE(db->migrate("comp", kTwo).ok());
  CHECK(count(*db, "a") == 1);
  // Components keep versions of their own.
  CHECK(*db->schema_version("other") == 0);
}

TEST_CASE("migrate: a newer program adds only its new steps", "[sqlite]") {
  auto db = open_db(":memory:");
  REQUIRE(db->migrate("comp", {kTwo[0]}).ok());
  CHECK(*db->schema_version("comp") == 1);
  CHECK_FALSE(has_table(*db, "b"));
  REQUIRE(db->migrate("comp", kTwo).ok());
  CHECK(*db->schema_version("comp") == 2);
  CHECK(count(*db, "a") == 1);
}

TEST_CASE("migrate: a failed step is rolled back and leaves the version before it", "[sqlite]") {
  auto db = open_db(":memory:");
  std::vector<std::string> steps = {kTwo[0], "CREATE TABLE c (z); INSERT INTO nosuch VALUES (1);"};
  Status s = db->migrate("comp", steps);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message == ":memory:: no such table: nosuch");
  CHECK(*db->schema_version("comp") == 1);
  CHECK(has_table(*db, "a"));
  CHECK_FALSE(has_table(*db, "c"));
  // The database is usable afterwards: no transaction was left open.
  REQUIRE(db->migrate("comp", kTwo).ok());
  CHECK(*db->schema_version("comp") == 2);
}

TEST_CASE("migrate: a version newer than the program knows is refused", "[sqlite]") {
  TempDir dir;
  std::string path = dir.file("state.db");
  {
    auto db = open_db(path);
    std::vector<std::string> three = kTwo;
    three.push_back("CREATE TABLE d (w);");
    REQUIRE(db->migrate("comp", three).ok());
  }
  auto db = open_db(path);
  Status s = db->migrate("comp", kTwo);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().status == ExitStatus::kFailure);
  CHECK(s.error().message ==
        path +
            ": the 'comp' tables are at schema version 3, newer than this program knows (2); "
            "upgrade kpipe");
  CHECK(*db->schema_version("comp") == 3);
  CHECK(has_table(*db, "d"));
  CHECK(db->exec("INSERT INTO d VALUES (1)").ok());  // and no transaction was left open
}

TEST_CASE("Transaction: rolled back unless committed", "[sqlite]") {
  auto db = open_db(":memory:");
  REQUIRE(db->exec("CREATE TABLE t (x)").ok());
  {
    auto tx = Transaction::begin(*db);
    REQUIRE(tx.ok());
    REQUIRE(db->exec("INSERT INTO t VALUES (1)").ok());
    CHECK(count(*db, "t") == 1);
  }
  CHECK(count(*db, "t") == 0);
  {
    auto tx = Transaction::begin(*db);
    REQUIRE(tx.ok());
    REQUIRE(db->exec("INSERT INTO t VALUES (2)").ok());
    Transaction moved = std::move(*tx);  // the moved-from one must not roll back
    REQUIRE(moved.commit().ok());
  }
  CHECK(count(*db, "t") == 1);
  auto outer = Transaction::begin(*db);
  REQUIRE(outer.ok());
  auto inner = Transaction::begin(*db);
  REQUIRE_FALSE(inner.ok());
  CHECK(inner.error().message == ":memory:: cannot start a transaction within a transaction");
}

TEST_CASE("Transaction: a second writer waits, then fails when the lock is held", "[sqlite]") {
  TempDir dir;
  std::string path = dir.file("w.db");
  auto first = open_db(path);
  REQUIRE(first->exec("CREATE TABLE t (x)").ok());
  OpenOptions impatient;
  impatient.busy_timeout_ms = 0;
  auto second = open_db(path, impatient);
  auto held = Transaction::begin(*first);
  REQUIRE(held.ok());
  auto blocked = Transaction::begin(*second);
  REQUIRE_FALSE(blocked.ok());
  CHECK(blocked.error().message == path + ": database is locked");
  // Readers are not blocked by a writer (WAL).
  CHECK(count(*second, "t") == 0);
  REQUIRE(held->commit().ok());
  CHECK(Transaction::begin(*second).ok());
}

TEST_CASE("integrity_check and quote_identifier", "[sqlite]") {
  auto db = open_db(":memory:");
  auto problems = db->integrity_check();
  REQUIRE(problems.ok());
  CHECK(problems->empty());
  CHECK(quote_identifier("plain") == "\"plain\"");
  CHECK(quote_identifier("a\"b") == "\"a\"\"b\"");
  CHECK(quote_identifier("") == "\"\"");
  // Quoted, any name is data: a table whose name is SQL.
  std::string evil = "x\"; DROP TABLE t; --";
  REQUIRE(db->exec("CREATE TABLE t (x)").ok());
  REQUIRE(db->exec("CREATE TABLE " + quote_identifier(evil) + " (y)").ok());
  CHECK(has_table(*db, evil));
  CHECK(has_table(*db, "t"));
}

// Faults of the file itself, named for an operator (kpipe(7), STORES): what
// the file is, which file, what happened, and SQLite's own words after it.

TEST_CASE("Database: a file that is not a database is named as what it is not", "[sqlite]") {
  TempDir dir;
  std::string path = dir.write("notes.db", "meeting notes, not a database\n");
  OpenOptions o;
  o.kind = "state database";
  o.not_kind = "a kpipe state database";
  auto db = Database::open(path, o);
  REQUIRE_FALSE(db.ok());
  CHECK(db.error().status == ExitStatus::kFailure);
  CHECK(db.error().message == "'" + path + "' is not a kpipe state database");
  // Without a kind: any SQLite database would do.
  o = {};
  o.read_only = true;
  auto reader = Database::open(path, o);
  REQUIRE(reader.ok());  // SQLite reads nothing until asked
  auto stmt = (*reader)->prepare("SELECT 1 FROM sqlite_master");
  REQUIRE_FALSE(stmt.ok());
  CHECK(stmt.error().message == "'" + path + "' is not an SQLite database");
}

TEST_CASE("Database: a full database is named, with the file and the fault", "[sqlite]") {
  TempDir dir;
  std::string path = dir.file("full.db");
  OpenOptions o;
  o.kind = "dead-letter store";
  auto db = open_db(path, o);
  REQUIRE(db->exec("CREATE TABLE t (x BLOB)").ok());
  // A file that may not grow is what a full disk looks like to SQLite.
  REQUIRE(db->exec("PRAGMA max_page_count = 3").ok());
  auto ins = db->prepare("INSERT INTO t VALUES (randomblob(100000))");
  REQUIRE(ins.ok());
  Status s = ins->run();
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message ==
        "dead-letter store '" + path +
            "': cannot write: the file system is full (database or disk is full)");
  CHECK(ins->refusal().empty());  // the database's failure, not the row's
  Status e = db->exec("INSERT INTO t VALUES (randomblob(100000))");
  CHECK(e.error().message == s.error().message);
}

TEST_CASE("Database: writing through a read-only connection says the file is read-only",
          "[sqlite]") {
  TempDir dir;
  std::string path = dir.file("ro.db");
  { REQUIRE(open_db(path)->exec("CREATE TABLE t (x)").ok()); }
  OpenOptions ro;
  ro.read_only = true;
  auto db = open_db(path, ro);
  Status s = db->exec("INSERT INTO t VALUES (1)");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message == "database '" + path +
                                 "': cannot write: the file or its file system is read-only "
                                 "(attempt to write a readonly database)");
}

TEST_CASE("Database: a damaged file is named as damaged", "[sqlite]") {
  TempDir dir;
  std::string path = dir.file("damaged.db");
  {
    auto db = open_db(path);
    REQUIRE(db->exec("CREATE TABLE t (x); INSERT INTO t VALUES (1)").ok());
  }
  // The table's page (the second) overwritten with noise.
  std::string noise(4096, '\xa5');
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::pwrite(fd, noise.data(), noise.size(), 4096) == 4096);
  ::close(fd);
  OpenOptions o;
  o.read_only = true;
  o.kind = "state database";
  auto db = open_db(path, o);
  auto stmt = db->prepare("SELECT x FROM t");
  REQUIRE(stmt.ok());
  auto row = stmt->step();
  REQUIRE_FALSE(row.ok());
  CHECK(row.error().message ==
        "state database '" + path + "': the file is damaged (database disk image is malformed)");
  auto problems = db->integrity_check();
  REQUIRE(problems.ok());
  CHECK_FALSE(problems->empty());
}

TEST_CASE("Database: an existing file it may not write is read-only to it", "[sqlite]") {
  TempDir dir;
  std::string path = dir.file("locked.db");
  { open_db(path); }
  REQUIRE(::chmod(path.c_str(), 0444) == 0);
  if (::access(path.c_str(), W_OK) == 0) return;  // root writes a file of mode 0444
  auto db = Database::open(path);
  REQUIRE_FALSE(db.ok());
  CHECK(db.error().message == "database '" + path +
                                  "': cannot write: the file or its file system is read-only "
                                  "(Permission denied)");
}

TEST_CASE("Transaction: a COMMIT that fails leaves no transaction open", "[sqlite]") {
  auto db = open_db(":memory:");
  REQUIRE(db->exec("CREATE TABLE p (id INTEGER PRIMARY KEY);"
                   "CREATE TABLE c (p INTEGER REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED)")
              .ok());
  {
    auto tx = Transaction::begin(*db);
    REQUIRE(tx.ok());
    REQUIRE(db->exec("INSERT INTO c VALUES (7)").ok());
    // A deferred constraint fails at COMMIT, which leaves SQLite's
    // transaction open: so does a COMMIT on a full disk.
    CHECK_FALSE(tx->commit().ok());
  }
  CHECK(count(*db, "c") == 0);
  auto next = Transaction::begin(*db);
  REQUIRE(next.ok());
  REQUIRE(db->exec("INSERT INTO p VALUES (7); INSERT INTO c VALUES (7)").ok());
  CHECK(next->commit().ok());
  CHECK(count(*db, "c") == 1);
}
