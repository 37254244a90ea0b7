#include "kpipe/store/table_rows.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "helpers.h"
#include "kpipe/store/sql.h"

// read_table_rows on SQLite (PostgreSQL: tests/integration/join_postgres.sh):
// the columns are told before the first row, also of a table with no rows,
// so that kjoin can refuse a column that is not there; a table or a file
// that is not there is a usage error naming what is (kjoin(1), Table
// problems).

using namespace kpipe;
using kpipe::test::TempDir;

namespace {

std::string sqlite_file(const TempDir& dir, const std::string& sql) {
  std::string path = dir.file("t.db");
  auto db = Database::open(path, OpenOptions{});
  REQUIRE(db.ok());
  REQUIRE((*db)->exec(sql).ok());
  return path;
}

struct Read {
  Status status;
  std::vector<std::string> calls;  // "columns: a, b" and the rows, in order
};

Read read(const std::string& target, const std::string& table, Status columns_say = {}) {
  Read r;
  r.status = read_table_rows(
      target, table,
      [&](const std::vector<std::string>& names) {
        std::string call = "columns:";
        for (const std::string& n : names) call += " " + n;
        r.calls.push_back(call);
        return columns_say;
      },
      [&](std::string_view row) {
        r.calls.emplace_back(row);
        return Status{};
      });
  return r;
}

}  // namespace

TEST_CASE("read_table_rows: the columns before the first row, also with none", "[table]") {
  TempDir dir;
  std::string db = sqlite_file(dir,
                               "CREATE TABLE t (id INTEGER, name TEXT);"
                               "INSERT INTO t VALUES (1, 'a'), (NULL, 'b');"
                               "CREATE TABLE empty (key INTEGER, v REAL);");
  Read r = read(db, "t");
  REQUIRE(r.status.ok());
  CHECK(r.calls == std::vector<std::string>{"columns: id name", R"({"id":1,"name":"a"})",
                                            R"({"id":null,"name":"b"})"});
  Read none = read(db, "empty");
  REQUIRE(none.status.ok());
  CHECK(none.calls == std::vector<std::string>{"columns: key v"});
}

TEST_CASE("read_table_rows: an error of the columns' callback stops before any row", "[table]") {
  TempDir dir;
  std::string db = sqlite_file(dir, "CREATE TABLE t (id INTEGER); INSERT INTO t VALUES (1);");
  Read r = read(db, "t", usage_error("no such column"));
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.error().status == ExitStatus::kUsage);
  CHECK(r.status.error().message == "no such column");
  CHECK(r.calls == std::vector<std::string>{"columns: id"});
}

TEST_CASE("read_table_rows: a table that is not there is a usage error naming the tables",
          "[table]") {
  TempDir dir;
  std::string db = sqlite_file(dir,
                               "CREATE TABLE b (x INTEGER); CREATE TABLE a (y TEXT);"
                               "CREATE VIEW v AS SELECT * FROM a;"
                               "CREATE INDEX b_x ON b (x);");
  Read r = read(db, "nosuch");
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.error().status == ExitStatus::kUsage);
  CHECK(r.status.error().message == "--table: " + db + " has no table 'nosuch' (it has a, b, v)");
  CHECK(r.calls.empty());
  // A database without tables says so.
  std::string bare = dir.file("bare.db");
  {
    auto created = Database::open(bare, OpenOptions{});
    REQUIRE(created.ok());
  }
  Read none = read(bare, "t");
  REQUIRE_FALSE(none.status.ok());
  CHECK(none.status.error().status == ExitStatus::kUsage);
  CHECK(none.status.error().message == "--table: " + bare + " has no table 't' (it has none)");
}

TEST_CASE("read_table_rows: an SQLite file that is not there is a usage error", "[table]") {
  TempDir dir;
  Read r = read(dir.file("no-such.db"), "t");
  REQUIRE_FALSE(r.status.ok());
  CHECK(r.status.error().status == ExitStatus::kUsage);
  CHECK(r.status.error().message ==
        "--table: there is no SQLite file '" + dir.file("no-such.db") + "'");
  CHECK(r.calls.empty());
}
