#include "kpipe/target.h"

#include <catch2/catch.hpp>

using namespace kpipe;

TEST_CASE("target: which targets are PostgreSQL's", "[target]") {
  CHECK(is_postgres_target("postgresql://app@db/x"));
  CHECK(is_postgres_target("postgres://db"));
  CHECK(is_postgres_target("postgresql:host=db dbname=x"));
  CHECK(is_postgres_target("postgresql:"));
  CHECK_FALSE(is_postgres_target("state.db"));
  CHECK_FALSE(is_postgres_target("./postgresql:x"));
  CHECK_FALSE(is_postgres_target("kafka:dead"));
  CHECK(is_postgres_uri("postgresql://app@db/x"));
  CHECK(is_postgres_uri("postgres://db"));
  CHECK_FALSE(is_postgres_uri("postgresql:host=db"));
}

TEST_CASE("target: libpq's dbname is a URI whole, a conninfo without its prefix", "[target]") {
  CHECK(postgres_conninfo("postgresql://app@db/x") == "postgresql://app@db/x");
  CHECK(postgres_conninfo("postgres://db") == "postgres://db");
  CHECK(postgres_conninfo("postgresql:host=db dbname=x") == "host=db dbname=x");
  CHECK(postgres_conninfo("postgres:host=db") == "host=db");
  CHECK(postgres_conninfo("postgresql:").empty());
  CHECK(postgres_conninfo("state.db") == "state.db");
}

TEST_CASE("target: a store or sink is a topic, a database or a file", "[target]") {
  Target t = parse_target("kafka:dead");
  CHECK(t.kind == TargetKind::kKafka);
  CHECK(t.location == "dead");
  CHECK(t.table.empty());
  CHECK(is_kafka_target("kafka:dead"));

  // The topic missing is the option's to refuse, in its own words.
  t = parse_target("kafka:");
  CHECK(t.kind == TargetKind::kKafka);
  CHECK(t.location.empty());

  t = parse_target("postgresql://app@db/x");
  CHECK(t.kind == TargetKind::kPostgres);
  CHECK(t.location == "postgresql://app@db/x");
  t = parse_target("postgresql:host=db");
  CHECK(t.kind == TargetKind::kPostgres);
  CHECK(t.location == "postgresql:host=db");

  // Everything else is a path, prefixes of kjoin's --table included.
  for (const char* file : {"state.db", "./kafka:x", "sqlite:a.db:t", "", "dir/postgresql:x"}) {
    t = parse_target(file);
    CHECK(t.kind == TargetKind::kFile);
    CHECK(t.location == file);
    CHECK_FALSE(is_kafka_target(file));
  }
}

TEST_CASE("target: kjoin's --table names a file, a topic or a table in a database", "[target]") {
  auto t = parse_table_target("users.ndjson", "users.ndjson");
  REQUIRE(t);
  CHECK(t->kind == TargetKind::kFile);
  CHECK(t->location == "users.ndjson");
  CHECK(t->table.empty());

  t = parse_table_target("kafka:users", "kafka:users");
  REQUIRE(t);
  CHECK(t->kind == TargetKind::kKafka);
  CHECK(t->location == "users");

  // The table is after the last ':', so the file's name may hold one.
  t = parse_table_target("sqlite:dir/a:b.db:users", "sqlite:dir/a:b.db:users");
  REQUIRE(t);
  CHECK(t->kind == TargetKind::kSqlite);
  CHECK(t->location == "dir/a:b.db");
  CHECK(t->table == "users");

  t = parse_table_target("postgresql://app:pw@db/x#public.users", "shown");
  REQUIRE(t);
  CHECK(t->kind == TargetKind::kPostgres);
  CHECK(t->location == "postgresql://app:pw@db/x");
  CHECK(t->table == "public.users");

  t = parse_table_target("postgres:host=db dbname=x#users", "shown");
  REQUIRE(t);
  CHECK(t->kind == TargetKind::kPostgres);
  CHECK(t->location == "postgres:host=db dbname=x");
  CHECK(t->table == "users");
}

TEST_CASE("target: a --table that names nothing whole is refused as a usage error", "[target]") {
  auto refused = [](std::string_view text, std::string_view shown) {
    auto t = parse_table_target(text, shown);
    REQUIRE_FALSE(t);
    CHECK(t.error().status == ExitStatus::kUsage);
    return t.error().message;
  };
  CHECK(refused("", "") == "--table: empty");
  CHECK(refused("kafka:", "kafka:") == "--table kafka:TOPIC: the topic is missing");
  for (const char* text : {"sqlite:a.db", "sqlite::users", "sqlite:a.db:", "sqlite:"})
    CHECK(refused(text, text) == std::string("--table '") + text + "': write sqlite:FILE:TABLE");
  // The PostgreSQL target is shown as the caller says (without its password).
  CHECK(refused("postgresql://app:pw@db/x", "postgresql://app@db/x") ==
        "--table 'postgresql://app@db/x': name the table after '#': postgresql://...#TABLE");
  CHECK(refused("postgresql://app@db/x#", "postgresql://app@db/x#") ==
        "--table 'postgresql://app@db/x#': name the table after '#': postgresql://...#TABLE");
}
