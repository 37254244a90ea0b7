#include "kpipe/store/postgres.h"

#include <catch2/catch.hpp>

using namespace kpipe;

TEST_CASE("postgres: which targets are PostgreSQL's", "[postgres]") {
  CHECK(is_postgres_target("postgresql://app@db/x"));
  CHECK(is_postgres_target("postgres://db"));
  CHECK(is_postgres_target("postgresql:host=db dbname=x"));
  CHECK(is_postgres_target("postgresql:"));
  CHECK_FALSE(is_postgres_target("state.db"));
  CHECK_FALSE(is_postgres_target("./postgresql:x"));
  CHECK_FALSE(is_postgres_target("kafka:dead"));
}

TEST_CASE("postgres: a target is shown without its password", "[postgres]") {
  CHECK(redact_postgres_target("postgresql://app:s3cret@db:5433/x?sslmode=require") ==
        "postgresql://app@db:5433/x?sslmode=require");
  CHECK(redact_postgres_target("postgresql://app@db/x") == "postgresql://app@db/x");
  CHECK(redact_postgres_target("postgres://db") == "postgres://db");
  // A password with '@' in it is percent-encoded, so the last '@' ends it.
  CHECK(redact_postgres_target("postgresql://app:p%40ss@db/x") == "postgresql://app@db/x");
  CHECK(redact_postgres_target("postgresql:///x?user=app&password=s3cret&sslmode=disable") ==
        "postgresql:///x?user=app&sslmode=disable");
  CHECK(redact_postgres_target("postgresql://db/x?password=s3cret") == "postgresql://db/x");
  CHECK(redact_postgres_target("postgresql:host=db user=app password=s3cret dbname='my db'") ==
        "postgresql:user=app dbname='my db' host=db");
  CHECK(redact_postgres_target("postgresql:") == "postgresql:");
  std::string broken = redact_postgres_target("postgresql:host='db password=s3cret");
  CHECK(broken.find("s3cret") == std::string::npos);
}

TEST_CASE("postgres: COPY's text format escapes what ends a field or a row", "[postgres]") {
  std::string out;
  append_copy_text(out, "a\tb\nc\rd\\e");
  CHECK(out == "a\\tb\\nc\\rd\\\\e");
  out.clear();
  append_copy_text(out, "plain \xc3\xa9");
  CHECK(out == "plain \xc3\xa9");
}

TEST_CASE("postgres: a server that is not there is one clear error", "[postgres]") {
  // Port 1 on loopback: nothing listens there, and nothing is waited for.
  auto conn = PgConnection::connect("postgresql://app:s3cret@127.0.0.1:1/x", "test");
  REQUIRE_FALSE(conn.ok());
  const std::string& message = conn.error().message;
  CHECK(message.starts_with("postgresql://app@127.0.0.1:1/x: cannot connect: "));
  CHECK(message.find("s3cret") == std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
}

TEST_CASE("postgres: SQLite's placeholders become PostgreSQL's", "[postgres]") {
  CHECK(postgres_placeholders("SELECT ? + ?") == "SELECT $1 + $2");
  CHECK(postgres_placeholders("VALUES (?1, ?2, kpipe_seal(?1, ?2))") ==
        "VALUES ($1, $2, kpipe_seal($1, $2))");
  // Quoted text and names are left alone: '?' there is data.
  CHECK(postgres_placeholders("SELECT '?', \"a?\" FROM t WHERE x = ?") ==
        "SELECT '?', \"a?\" FROM t WHERE x = $1");
  CHECK(postgres_placeholders("SELECT 'it''s ?' WHERE y = ?") == "SELECT 'it''s ?' WHERE y = $1");
  CHECK(postgres_placeholders("no placeholders") == "no placeholders");
}
