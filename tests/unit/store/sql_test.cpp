#include "kpipe/store/sql.h"

#include <catch2/catch.hpp>

using namespace kpipe;

TEST_CASE("sql: the seal is written as each dialect computes it", "[sql]") {
  CHECK(seal_call(Dialect::kSqlite, {"?1", "NULL"}) == "kpipe_seal(?1, NULL)");
  CHECK(seal_call(Dialect::kPostgres, {"?1", "NULL"}) ==
        "kpipe_seal(CAST(?1 AS text), CAST(NULL AS text))");
}

TEST_CASE("sql: names are quoted as data", "[sql]") {
  CHECK(quote_identifier("plain") == "\"plain\"");
  CHECK(quote_identifier("a\"b; DROP") == "\"a\"\"b; DROP\"");
}
