#include "kpipe/store/replay_positions.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "helpers.h"

namespace kpipe {
namespace {

const char* kSeq = "49590338271490256608559692538361571095921575989136588898";

// What a ledger saves and loads, in one database: positions of either
// kind, the batch in flight, ledgers and logs kept apart, and a save
// replacing what was there.
void check_round_trip(const std::string& target) {
  auto a = StoredReplayPositions::open(target, "kdlq-replay.dead", "kinesis:dead", false);
  REQUIRE(a.ok());
  auto empty = (*a)->load();
  REQUIRE(empty.ok());
  CHECK(empty->next.empty());
  CHECK(empty->metadata.empty());

  ReplayPositions::Saved saved;
  saved.next[0] = *Position::sequence(kSeq);
  saved.next[3] = Position(int64_t{41});
  saved.metadata = R"({"target":"kafka:fixed","mark":"[[0,12]]"})";
  REQUIRE((*a)->save(saved).ok());
  auto other = StoredReplayPositions::open(target, "only-late", "kinesis:dead", false);
  REQUIRE(other.ok());
  REQUIRE((*other)->save({{{1, *Position::sequence("17")}}, ""}).ok());
  auto elsewhere = StoredReplayPositions::open(target, "kdlq-replay.dead", "kinesis:other", false);
  REQUIRE(elsewhere.ok());
  CHECK((*elsewhere)->load()->next.empty());

  auto back = (*a)->load();
  REQUIRE(back.ok());
  CHECK(back->next == saved.next);
  CHECK(back->next.at(0).is_sequence());
  CHECK(back->metadata == saved.metadata);

  saved.next.erase(3);
  saved.metadata.clear();
  REQUIRE((*a)->save(saved).ok());
  back = (*a)->load();
  CHECK(back->next == saved.next);
  CHECK(back->metadata.empty());
  CHECK((*other)->load()->next.at(1) == *Position::sequence("17"));
  CHECK((*a)->describe().starts_with("replay ledger 'kdlq-replay.dead' in '"));
}

// One replay of a ledger at a time: a second is refused, naming what
// holds it, while list and stats (read-only) and other ledgers are not;
// the ledger is free again once the first is closed.
void check_one_replay_at_a_time(const std::string& target) {
  auto first = StoredReplayPositions::open(target, "kdlq-replay.dead", "kinesis:dead", false);
  REQUIRE(first.ok());
  auto second = StoredReplayPositions::open(target, "kdlq-replay.dead", "kinesis:dead", false);
  REQUIRE_FALSE(second.ok());
  CHECK_THAT(second.error().message,
             Catch::Matches("replay ledger 'kdlq-replay.dead' in '.*' is in use by .*: one kdlq "
                            "replay of a ledger at a time"));
  CHECK(StoredReplayPositions::open(target, "only-late", "kinesis:dead", false).ok());
  CHECK(StoredReplayPositions::open(target, "kdlq-replay.dead", "kinesis:other", false).ok());
  CHECK(StoredReplayPositions::open(target, "kdlq-replay.dead", "kinesis:dead", true).ok());
  first->reset();
  CHECK(StoredReplayPositions::open(target, "kdlq-replay.dead", "kinesis:dead", false).ok());
}

TEST_CASE("a replay position and its batch in flight kept in an SQLite state store",
          "[replay_positions]") {
  test::TempDir dir;
  std::string path = dir.file("state.db");
  check_round_trip(path);
  // Read-only (kdlq list): what is there is read, nothing can be saved.
  auto reader = StoredReplayPositions::open(path, "kdlq-replay.dead", "kinesis:dead", true);
  REQUIRE(reader.ok());
  CHECK((*reader)->load()->next.at(0) == *Position::sequence(kSeq));
}

TEST_CASE("one replay of a ledger at a time in an SQLite state store", "[replay_positions]") {
  test::TempDir dir;
  check_one_replay_at_a_time(dir.file("state.db"));
}

TEST_CASE("a state store without the table has replayed nothing, and is not changed by a read",
          "[replay_positions]") {
  test::TempDir dir;
  std::string path = dir.file("state.db");
  {
    auto db = Database::open(path);
    REQUIRE(db.ok());
  }
  auto reader = StoredReplayPositions::open(path, "kdlq-replay.dead", "kinesis:dead", true);
  REQUIRE(reader.ok());
  auto saved = (*reader)->load();
  REQUIRE(saved.ok());
  CHECK(saved->next.empty());
  REQUIRE_FALSE((*reader)->save({}).ok());
  auto db = Database::open(path);
  REQUIRE(db.ok());
  CHECK(*(*db)->schema_version("replay") == 0);
  auto missing =
      StoredReplayPositions::open(dir.file("none.db"), "kdlq-replay.dead", "kinesis:dead", true);
  CHECK_FALSE(missing.ok());
}

TEST_CASE("a replay position kept in a PostgreSQL state store", "[postgres-server]") {
  const char* url = std::getenv("KPIPE_TEST_POSTGRES_URL");
  if (url == nullptr || *url == '\0')
    FAIL("KPIPE_TEST_POSTGRES_URL is not set: run these through ctest's unit/postgres");
  // tests/unit/postgres.sh gives each run a database of its own.
  check_round_trip(url);
  check_one_replay_at_a_time(url);
}

}  // namespace
}  // namespace kpipe
