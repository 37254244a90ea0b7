#include "kpipe/store/sql.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "helpers.h"

using namespace kpipe;
using kpipe::test::TempDir;

TEST_CASE("sql: the seal is written as each dialect computes it", "[sql]") {
  CHECK(seal_call(Dialect::kSqlite, {"?1", "NULL"}) == "kpipe_seal(?1, NULL)");
  CHECK(seal_call(Dialect::kPostgres, {"?1", "NULL"}) ==
        "kpipe_seal(CAST(?1 AS text), CAST(NULL AS text))");
}

TEST_CASE("sql: names are quoted as data", "[sql]") {
  CHECK(quote_identifier("plain") == "\"plain\"");
  CHECK(quote_identifier("a\"b; DROP") == "\"a\"\"b; DROP\"");
}

TEST_CASE("sql: a database is named by any path of its file, and by no other", "[sql]") {
  TempDir dir;
  REQUIRE(::mkdir(dir.file("sub").c_str(), 0700) == 0);
  REQUIRE(::symlink(dir.file("sub").c_str(), dir.file("link").c_str()) == 0);
  std::string path = dir.file("sub/one.db");
  auto db = Database::open(path);
  REQUIRE(db);
  CHECK(*(*db)->is_named_by(path));
  CHECK(*(*db)->is_named_by(dir.file("link/one.db")));
  CHECK(*(*db)->is_named_by(dir.file("link/../sub/./one.db")));
  // Another file, one not there (which opening would create) and a server
  // are other databases; so is one in memory, even to itself.
  auto other = Database::open(dir.file("two.db"));
  REQUIRE(other);
  CHECK_FALSE(*(*db)->is_named_by(dir.file("two.db")));
  CHECK_FALSE(*(*db)->is_named_by(dir.file("three.db")));
  CHECK_FALSE(*(*db)->is_named_by("postgresql://kpipe@127.0.0.1:1/x"));
  auto memory = Database::open(":memory:");
  REQUIRE(memory);
  CHECK_FALSE(*(*memory)->is_named_by(":memory:"));
}
