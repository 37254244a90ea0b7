#include "kpipe/store/key_samples.h"

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "helpers.h"

// The store's co-partition check (kpipe(7), MANY INSTANCES): two
// instances, each with a connection of its own to one state file, record
// the keys they sampled; a key one recorded under another partition shows.

namespace kpipe {
namespace {

const std::vector<std::string> kEvents{"events"};

std::unique_ptr<Database> open(const std::string& path) {
  auto db = Database::open(path);
  REQUIRE(db.ok());
  return std::move(*db);
}

int64_t count(Database& db, const std::string& where = "1 = 1") {
  auto stmt = db.prepare("SELECT COUNT(*) FROM kpipe_key_samples WHERE " + where);
  REQUIRE(stmt.ok());
  auto row = stmt->step();
  REQUIRE(row.ok());
  return stmt->column_int(0);
}

KeySample sample(int32_t partition, uint64_t hash, std::string key = "",
                 std::string topic = "events") {
  if (key.empty()) key = fmt::format("\"u{}\"", hash);
  return {{topic, partition}, hash, key};
}

TEST_CASE("key samples: a key another instance recorded under another partition shows",
          "[copartition]") {
  test::TempDir dir;
  auto db_a = open(dir.file("p.db"));
  auto db_b = open(dir.file("p.db"));
  KeySamples a(*db_a), b(*db_b);
  auto first = a.record("kdedup", {sample(0, 7), sample(0, 8)}, kEvents, 1);
  REQUIRE(first.ok());
  CHECK_FALSE(first->has_value());
  // The same partition again (its next owner, say) is no split.
  auto same = b.record("kdedup", {sample(0, 7)}, kEvents, 2);
  REQUIRE(same.ok());
  CHECK_FALSE(same->has_value());
  // Another stage's keys are its own.
  auto other_stage = b.record("kwindow", {sample(1, 8)}, kEvents, 2);
  REQUIRE(other_stage.ok());
  CHECK_FALSE(other_stage->has_value());

  auto split = b.record("kdedup", {sample(1, 3), sample(1, 8)}, kEvents, 3);
  REQUIRE(split.ok());
  REQUIRE(split->has_value());
  CHECK((*split)->key == "\"u8\"");
  CHECK((*split)->recorded == TopicPartition{"events", 0});
  CHECK((*split)->seen == TopicPartition{"events", 1});
}

TEST_CASE("key samples: the same hash of another key, or of a topic not read now, is no split",
          "[copartition]") {
  test::TempDir dir;
  auto db = open(dir.file("p.db"));
  KeySamples samples(*db);
  REQUIRE(samples.record("kdedup", {sample(0, 7, "\"a\"")}, kEvents, 1).ok());
  auto collision = samples.record("kdedup", {sample(1, 7, "\"b\"")}, kEvents, 2);
  REQUIRE(collision.ok());
  CHECK_FALSE(collision->has_value());
  // A topic read before it was re-keyed says nothing of the new one.
  REQUIRE(samples.record("kdedup", {sample(0, 9, "", "old")}, {"old"}, 3).ok());
  auto rekeyed = samples.record("kdedup", {sample(0, 9, "", "new")}, {"new"}, 4);
  REQUIRE(rekeyed.ok());
  CHECK_FALSE(rekeyed->has_value());
  // Read together, two topics' partitions are two partitions.
  auto both = samples.record("kdedup", {sample(1, 9, "", "new")}, {"new", "old"}, 5);
  REQUIRE(both.ok());
  CHECK(both->has_value());
}

TEST_CASE("key samples: two partitions of one batch holding one key show", "[copartition]") {
  test::TempDir dir;
  auto db = open(dir.file("p.db"));
  KeySamples samples(*db);
  auto split = samples.record("kdedup", {sample(0, 7), sample(1, 5), sample(1, 7)}, kEvents, 1);
  REQUIRE(split.ok());
  REQUIRE(split->has_value());
  CHECK((*split)->recorded == TopicPartition{"events", 0});
  CHECK((*split)->seen == TopicPartition{"events", 1});
}

TEST_CASE("key samples: each partition keeps a ring of its newest samples", "[copartition]") {
  test::TempDir dir;
  auto db_a = open(dir.file("p.db"));
  auto db_b = open(dir.file("p.db"));
  {
    KeySamples a(*db_a);
    uint64_t hash = 0;
    for (int64_t c = 1; c <= 70; ++c) {
      std::vector<KeySample> batch;
      for (int i = 0; i < 16; ++i) batch.push_back(sample(0, ++hash));
      batch.push_back(sample(2, 100000 + static_cast<uint64_t>(c)));
      REQUIRE(a.record("kdedup", batch, kEvents, c).ok());
    }
  }
  // 1120 samples of partition 0 were written: the first 96 are gone.
  CHECK(count(*db_a, "partition = 0") == kKeySamplesKept);
  CHECK(count(*db_a, "partition = 0 AND hash <= 96") == 0);
  CHECK(count(*db_a, "partition = 2") == 70);
  // The partition's next owner (another process) goes on from the oldest.
  KeySamples b(*db_b);
  REQUIRE(b.record("kdedup", {sample(0, 5000)}, kEvents, 71).ok());
  CHECK(count(*db_b, "partition = 0") == kKeySamplesKept);
  CHECK(count(*db_b, "partition = 0 AND hash = 97") == 0);
  CHECK(count(*db_b, "partition = 0 AND hash = 98") == 1);
  // The oldest sample of partition 0 is gone: no split with it.
  auto gone = b.record("kdedup", {sample(1, 97)}, kEvents, 72);
  REQUIRE(gone.ok());
  CHECK_FALSE(gone->has_value());
  auto kept = b.record("kdedup", {sample(1, 98)}, kEvents, 73);
  REQUIRE(kept.ok());
  CHECK(kept->has_value());
}

TEST_CASE("key samples: nothing to record asks nothing", "[copartition]") {
  test::TempDir dir;
  auto db = open(dir.file("p.db"));
  KeySamples samples(*db);
  auto none = samples.record("kdedup", {}, kEvents, 1);
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  auto table = db->has_table("kpipe_key_samples");
  REQUIRE(table.ok());
  CHECK_FALSE(*table);
}

}  // namespace
}  // namespace kpipe
