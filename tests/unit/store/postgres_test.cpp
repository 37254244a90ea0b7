#include "kpipe/store/postgres.h"

#include <catch2/catch.hpp>

using namespace kpipe;

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

TEST_CASE("postgres: a password is not shown even where a URI holds it unencoded", "[postgres]") {
  // A '/' in it: libpq reads "app:se" as host and port, kpipe hides it all.
  CHECK(redact_postgres_target("postgresql://app:se/cret@db/x") == "postgresql://app@db/x");
  // A database name with an '@' after a port is no password.
  CHECK(redact_postgres_target("postgresql://db:5432/x@y") == "postgresql://db:5432/x@y");
  CHECK(redact_postgres_target("postgresql://db/x?password=s3cret&sslmode=disable") ==
        "postgresql://db/x?sslmode=disable");
  // An '&' in a password that is not percent-encoded: up to the next
  // keyword of libpq's.
  CHECK(redact_postgres_target("postgresql://db/x?password=s3&cret&sslmode=disable") ==
        "postgresql://db/x?sslmode=disable");
  CHECK(redact_postgres_target("postgresql://db/x?pass%77ord=s3cret") == "postgresql://db/x");
}

// The message libpq gives for a target it cannot parse, as a program
// shows it: no server is asked, libpq refuses before it connects.
static std::string refusal(const std::string& target) {
  auto conn = PgConnection::connect(target, "test");
  REQUIRE_FALSE(conn.ok());
  return conn.error().message;
}

TEST_CASE("postgres: what libpq quotes of a target it cannot parse hides the password",
          "[postgres]") {
  // The URI whole: shown as the target is everywhere.
  CHECK(refusal("postgresql://u:SECRET@[bad/p") ==
        "postgresql://u@[bad/p: cannot connect: end of string reached when looking for matching "
        "\"]\" in IPv6 host address in URI: \"postgresql://u@[bad/p\"");
  // A bad percent-escape in the password, in userinfo or in the query.
  CHECK(refusal("postgresql://u:PW_A%zz@h/db") ==
        "postgresql://u@h/db: cannot connect: invalid percent-encoded token: \"***\"");
  CHECK(refusal("postgresql://u@h/db?password=PW_B%zz") ==
        "postgresql://u@h/db: cannot connect: invalid percent-encoded token: \"***\"");
  // An '&' in a password libpq reads as the start of a parameter.
  CHECK(refusal("postgresql://u@h/db?password=PW_C&D") ==
        "postgresql://u@h/db: cannot connect: missing key/value separator \"=\" in URI query "
        "parameter: \"***\"");
  // A conninfo: a blank in the password, or a quote left open.
  CHECK(refusal("postgresql:host=x password=abc defSECRET") ==
        "postgresql:(a conninfo libpq cannot read): cannot connect: missing \"=\" after \"***\" "
        "in connection info string");
  CHECK(refusal("postgresql:password=abc defSECRET=x host=y") ==
        "postgresql:(a conninfo libpq cannot read): cannot connect: invalid connection option "
        "\"***\"");
  CHECK(refusal("postgresql:host=x password='a SECRET") ==
        "postgresql:(a conninfo libpq cannot read): cannot connect: unterminated quoted string in "
        "connection info string");
}

TEST_CASE("postgres: libpq's messages keep what is not the password", "[postgres]") {
  std::string target = "postgresql://app:s3cret@db/x";
  CHECK(redact_postgres_message("FATAL:  password authentication failed for user \"app\"\n",
                                target) == "password authentication failed for user \"app\"");
  CHECK(redact_postgres_message("could not translate host name \"db\" to address", target) ==
        "could not translate host name \"db\" to address");
  // A quoted text that holds a '"' of the password's is hidden whole.
  CHECK(redact_postgres_message("in URI: \"postgresql://app:s3\"cret@[db\"",
                                "postgresql://app:s3\"cret@[db") ==
        "in URI: \"postgresql://app@[db\"");
  // The password, decoded, is hidden wherever it stands.
  CHECK(redact_postgres_message("no such user: p@ss-word", "postgresql://app:p%40ss-word@db") ==
        "no such user: ***");
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
