// The PostgreSQL backend of kupsert's table (postgres_upsert.cpp), against
// a real server: ctest "unit/postgres" runs these ([postgres-server]) with
// KPIPE_TEST_POSTGRES_URL naming a database of their own on the server
// scripts/postgres started (tests/unit/postgres.sh).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "kpipe/store/upsert_writer.h"
#include "store/upsert_fixtures.h"

using namespace kpipe;
using namespace kpipe::upsert_test;

namespace {

std::unique_ptr<Database> pg_db() {
  const char* url = std::getenv("KPIPE_TEST_POSTGRES_URL");
  if (url == nullptr || *url == '\0')
    FAIL("KPIPE_TEST_POSTGRES_URL is not set: run these through ctest's unit/postgres");
  auto db = Database::open(url);
  if (!db.ok()) FAIL(db.error().message);
  return std::move(*db);
}

// A table of its own for each test case, dropped if a run before left it.
std::string fresh_table(Database& db, const std::string& name) {
  REQUIRE(db.exec("DROP TABLE IF EXISTS " + quote_identifier(name)).ok());
  return name;
}

// The first column of each row `stmt` gives, a line each.
std::string lines_of(Statement& stmt) {
  std::string out;
  for (;;) {
    auto row = stmt.step();
    REQUIRE(row.ok());
    if (!*row) break;
    out.append(stmt.column_text(0)).append("\n");
  }
  return out;
}

std::string column_types(Database& db, const std::string& table) {
  auto stmt = db.prepare(
      "SELECT column_name || ' ' || data_type || CASE WHEN is_nullable = 'NO' THEN ' not null' "
      "ELSE '' END FROM information_schema.columns WHERE table_name = ? ORDER BY "
      "ordinal_position");
  REQUIRE(stmt.ok());
  stmt->bind_text(1, table);
  return lines_of(*stmt);
}

// The rows as PostgreSQL prints them, in key order.
std::string rows_as_text(Database& db, const std::string& table, const std::string& columns) {
  auto stmt = db.prepare(fmt::format("SELECT concat_ws('|', {}) FROM {} ORDER BY 1", columns,
                                     quote_identifier(table)));
  REQUIRE(stmt.ok());
  return lines_of(*stmt);
}

}  // namespace

TEST_CASE("postgres upsert: a new table typed by the first values, its key the primary key",
          "[postgres-server]") {
  auto db = pg_db();
  std::string t = fresh_table(*db, "pu_types");
  auto w = writer(*db, spec(t, {"id"}));
  Lines lines;
  load(*w, lines,
       {R"({"id":1,"n":7,"x":2.5,"s":"a","b":true,"o":{"k":[1,2]},"z":null})",
        R"({"id":2,"n":8,"x":3,"s":"b","b":false,"o":[],"z":null})"});
  CHECK(column_types(*db, t) ==
        "id bigint not null\nn bigint\nx double precision\ns text\nb boolean\no jsonb\nz text\n");
  CHECK(rows_as_text(*db, t, "id, n, x, s, b, o, coalesce(z, 'null')") ==
        "1|7|2.5|a|t|{\"k\": [1, 2]}|null\n2|8|3|b|f|[]|null\n");
}

TEST_CASE("postgres upsert: the last write wins, a field a row lacks keeps its value",
          "[postgres-server]") {
  auto db = pg_db();
  std::string t = fresh_table(*db, "pu_last");
  auto w = writer(*db, spec(t, {"user", "day"}));
  Lines lines;
  load(*w, lines,
       {R"({"user":"u1","day":"mon","clicks":1,"tier":"gold"})",
        R"({"user":"u2","day":"mon","clicks":5})"});
  load(*w, lines,
       {R"({"user":"u1","day":"mon","clicks":3})", R"({"user":"u1","day":"tue","clicks":9})"});
  CHECK(rows_as_text(*db, t, "\"user\", day, clicks, coalesce(tier, '-')") ==
        "u1|mon|3|gold\nu1|tue|9|-\nu2|mon|5|-\n");
}

TEST_CASE("postgres upsert: a replay leaves every row as it was, not even a new version",
          "[postgres-server]") {
  auto db = pg_db();
  std::string t = fresh_table(*db, "pu_replay");
  auto w = writer(*db, spec(t, {"id"}));
  Lines lines;
  std::vector<std::string> input;
  for (int i = 0; i < 300; ++i) input.push_back(fmt::format(R"({{"id":{},"v":"x{}"}})", i, i));
  load(*w, lines, input);
  std::string versions = rows_as_text(*db, t, "id, xmin::text");
  load(*w, lines, input);
  CHECK(rows_as_text(*db, t, "id, xmin::text") == versions);
  CHECK(count(*db, "SELECT count(*) FROM pu_replay") == 300);
}

TEST_CASE("postgres upsert: a bigint column meeting a fraction becomes double precision",
          "[postgres-server]") {
  auto db = pg_db();
  std::string t = fresh_table(*db, "pu_widen");
  auto w = writer(*db, spec(t, {"id"}));
  Lines lines;
  load(*w, lines, {R"({"id":1,"avg":250000})"});
  CHECK(column_types(*db, t) == "id bigint not null\navg bigint\n");
  load(*w, lines, {R"({"id":2,"avg":2.5})"});
  CHECK(column_types(*db, t) == "id bigint not null\navg double precision\n");
  CHECK(rows_as_text(*db, t, "id, avg") == "1|250000\n2|2.5\n");
}
