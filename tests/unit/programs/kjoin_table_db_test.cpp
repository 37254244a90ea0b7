#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "fakes.h"
#include "helpers.h"
#include "kjoin_table_run.h"
#include "kpipe/programs/kjoin_internal.h"
#include "kpipe/store/sql.h"

// kjoin's table in a database, on its own, in an SQLite file: read whole,
// and read again every --refresh, the table read before kept when a new
// read fails. (The problems of a table, its columns and duplicates, are in
// kjoin_test.cpp, through the command line's options.)

namespace kpipe {
namespace {

using kjoin_internal::JoinPlan;
using kjoin_internal::TableSource;
using test::TempDir;

struct DbTableRun : TableRun {
  DbTableRun(const std::string& db, const std::string& table, Millis refresh) : TableRun(false) {
    plan.table = Target{TargetKind::kSqlite, db, table};
    plan.kind = &kjoin_internal::kDbTable;
    plan.refresh = refresh;
    plan.table_key_slots.push_back(plan.table_fields.add(*FieldPath::parse(".id")));
    options.table_keys = {"id"};
    auto opened = plan.kind->open(plan, options, io);
    REQUIRE(opened.ok());
    source = std::move(*opened);
  }
  std::unique_ptr<TableSource> source;
};

void exec(const std::string& db, const std::string& sql) {
  auto opened = Database::open(db, OpenOptions{});
  REQUIRE(opened.ok());
  REQUIRE((*opened)->exec(sql).ok());
}

TEST_CASE("kjoin database table: read again every --refresh, a failed read keeps the table",
          "[kjoin][kjoin_table_db]") {
  TempDir dir;
  std::string db = dir.file("table.db");
  exec(db, "CREATE TABLE people (id INTEGER, name TEXT); INSERT INTO people VALUES (1, 'old');");
  DbTableRun t(db, "people", 5000);
  REQUIRE(t.source->load(t.engine).ok());
  CHECK(t.engine.rows() == 1);
  CHECK(t.row("1") == "{\"id\":1,\"name\":\"old\"}");
  CHECK_FALSE(t.source->rows_saved());
  CHECK(t.source->kafka_log() == nullptr);

  exec(db, "UPDATE people SET name = 'new'; INSERT INTO people VALUES (2, 'new');");
  t.clock.advance(4999);
  REQUIRE(t.source->poll(t.engine, 0).ok());
  CHECK(t.row("1") == "{\"id\":1,\"name\":\"old\"}");
  t.clock.advance(1);
  REQUIRE(t.source->poll(t.engine, 0).ok());
  CHECK(t.engine.rows() == 2);
  CHECK(t.row("1") == "{\"id\":1,\"name\":\"new\"}");

  exec(db, "INSERT INTO people VALUES (2, 'twice');");
  t.clock.advance(5000);
  REQUIRE(t.source->poll(t.engine, 0).ok());
  CHECK(t.engine.rows() == 2);
  CHECK(t.row("2") == "{\"id\":2,\"name\":\"new\"}");
  CHECK(t.reporter.warnings ==
        std::vector<std::string>{"kept the table read before: table people of " + db +
                                 ": key 2 is in 2 rows (again at row 3): a table has one row "
                                 "per key"});
}

TEST_CASE("kjoin database table: without --refresh it is read once", "[kjoin][kjoin_table_db]") {
  TempDir dir;
  std::string db = dir.file("table.db");
  exec(db, "CREATE TABLE people (id INTEGER, name TEXT); INSERT INTO people VALUES (1, 'old');");
  DbTableRun t(db, "people", 0);
  REQUIRE(t.source->load(t.engine).ok());
  exec(db, "UPDATE people SET name = 'new';");
  t.clock.advance(3'600'000);
  REQUIRE(t.source->poll(t.engine, 0).ok());
  CHECK(t.row("1") == "{\"id\":1,\"name\":\"old\"}");
}

}  // namespace
}  // namespace kpipe
