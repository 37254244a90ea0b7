#include "kpipe/store/lag_history.h"

#include <catch2/catch.hpp>

#include <unistd.h>

using namespace kpipe;

namespace {

constexpr Millis kT0 = 1'795'946'400'000;

const LagSubject kGroup{LagSubject::Kind::kGroup, "billing"};

LagSample sample(Millis at, int64_t committed, int64_t end,
                 std::optional<int64_t> members = std::nullopt) {
  LagSample s;
  s.subject = kGroup;
  s.at = at;
  s.members = members;
  s.partitions.push_back({"events", 0, committed, end, std::nullopt, 1.5});
  s.partitions.push_back({"events", 1, std::nullopt, end + 1, std::nullopt, std::nullopt});
  return s;
}

std::unique_ptr<LagHistory> memory_history() {
  auto h = LagHistory::open(":memory:");
  REQUIRE(h);
  return std::move(*h);
}

}  // namespace

TEST_CASE("LagHistory keeps samples and gives back the newest, oldest first", "[lag_history]") {
  auto h = memory_history();
  for (int i = 0; i < 5; ++i)
    REQUIRE(h->append(sample(kT0 + i * kMinute, 10 * i, 100 + i, i), 0).ok());
  auto recent = h->recent(kGroup, 3);
  REQUIRE(recent);
  REQUIRE(recent->size() == 3);
  CHECK((*recent)[0].at == kT0 + 2 * kMinute);
  CHECK((*recent)[2].at == kT0 + 4 * kMinute);
  const LagSample& last = recent->back();
  CHECK(last.subject == kGroup);
  CHECK(*last.members == 4);
  REQUIRE(last.partitions.size() == 2);
  CHECK(last.partitions[0].topic == "events");
  CHECK(*last.partitions[0].committed == 40);
  CHECK(last.partitions[0].end == 104);
  CHECK(*last.partitions[0].lag_seconds == 1.5);
  CHECK_FALSE(last.partitions[0].committed_at);
  // Nothing committed and no time lag come back as nothing.
  CHECK_FALSE(last.partitions[1].committed);
  CHECK_FALSE(last.partitions[1].lag_seconds);
  CHECK(last.partitions[1].end == 105);
}

TEST_CASE("LagHistory keeps subjects apart", "[lag_history]") {
  auto h = memory_history();
  REQUIRE(h->append(sample(kT0, 1, 2), 0).ok());
  LagSample state = sample(kT0 + 1, 5, 6);
  state.subject = {LagSubject::Kind::kState, "billing"};
  state.partitions[0].committed_at = kT0 - kSecond;
  REQUIRE(h->append(state, 0).ok());
  auto groups = h->recent(kGroup, 10);
  REQUIRE(groups);
  REQUIRE(groups->size() == 1);
  CHECK(*groups->front().partitions[0].committed == 1);
  CHECK_FALSE(groups->front().members);
  auto states = h->recent(state.subject, 10);
  REQUIRE(states);
  REQUIRE(states->size() == 1);
  CHECK(*states->front().partitions[0].committed_at == kT0 - kSecond);
  auto other = h->recent({LagSubject::Kind::kGroup, "other"}, 10);
  REQUIRE(other);
  CHECK(other->empty());
}

TEST_CASE("LagHistory drops samples older than --keep", "[lag_history]") {
  auto h = memory_history();
  REQUIRE(h->append(sample(kT0, 1, 2), 0).ok());
  REQUIRE(h->append(sample(kT0 + kHour, 2, 3), 0).ok());
  REQUIRE(h->append(sample(kT0 + 2 * kHour, 3, 4), 90 * kMinute).ok());
  auto all = h->recent(kGroup, 10);
  REQUIRE(all);
  REQUIRE(all->size() == 2);
  CHECK(all->front().at == kT0 + kHour);
  // Their partitions went with them: the end offset 2 is seen no more.
  auto seen = h->end_offsets_around({"events", 0}, 2);
  REQUIRE(seen);
  REQUIRE(seen->size() == 2);
  CHECK(seen->front().offset == 3);
}

TEST_CASE("LagHistory::end_offsets_around finds the neighbours of an offset", "[lag_history]") {
  auto h = memory_history();
  // The end stood at 100 for two samples, then 200, 300, 400.
  REQUIRE(h->append(sample(kT0, 0, 100), 0).ok());
  REQUIRE(h->append(sample(kT0 + kMinute, 0, 100), 0).ok());
  REQUIRE(h->append(sample(kT0 + 2 * kMinute, 0, 200), 0).ok());
  REQUIRE(h->append(sample(kT0 + 3 * kMinute, 0, 300), 0).ok());
  REQUIRE(h->append(sample(kT0 + 4 * kMinute, 0, 400), 0).ok());
  auto seen = h->end_offsets_around({"events", 0}, 150);
  REQUIRE(seen);
  REQUIRE(seen->size() == 3);
  CHECK((*seen)[0].offset == 100);
  CHECK((*seen)[0].first_seen == kT0);
  CHECK((*seen)[0].last_seen == kT0 + kMinute);
  CHECK((*seen)[1].offset == 200);
  CHECK((*seen)[2].offset == 300);
  CHECK(*estimate_produce_time(*seen, 150) == kT0 + kMinute + kMinute / 2);
  // Below every end offset seen: the first two, for extrapolation.
  auto below = h->end_offsets_around({"events", 0}, 50);
  REQUIRE(below);
  REQUIRE(below->size() == 2);
  CHECK((*below)[0].offset == 100);
  CHECK((*below)[1].offset == 200);
  // Another partition's end offsets are not this one's.
  auto other = h->end_offsets_around({"events", 7}, 150);
  REQUIRE(other);
  CHECK(other->empty());
}

TEST_CASE("LagHistory::open refuses a missing file when it must exist", "[lag_history]") {
  char dir[] = "/tmp/kpipe-lag-history-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  std::string path = std::string(dir) + "/missing.db";
  auto h = LagHistory::open(path, true);
  REQUIRE_FALSE(h);
  CHECK(h.error().message == "history file '" + path + "' does not exist");
  CHECK(access(path.c_str(), F_OK) != 0);
  // Without must_exist it is created, and then opens either way.
  REQUIRE(LagHistory::open(path));
  REQUIRE(LagHistory::open(path, true));
  unlink(path.c_str());
  unlink((path + "-wal").c_str());
  unlink((path + "-shm").c_str());
  rmdir(dir);
}

TEST_CASE("LagHistory keeps what --uncommitted assumed, with committed NULL", "[lag_history]") {
  auto h = memory_history();
  LagSample s = sample(kT0, 10, 100);
  s.partitions[0].start = 3;
  s.partitions[1].assumed = Uncommitted::kEarliest;
  s.partitions[1].start = 4;
  s.partitions.push_back({"events", 2, std::nullopt, 50, std::nullopt, 0.0});
  s.partitions.back().assumed = Uncommitted::kLatest;
  REQUIRE(h->append(s, 0).ok());
  auto back = h->recent(kGroup, 1);
  REQUIRE(back);
  REQUIRE(back->size() == 1);
  const auto& parts = back->front().partitions;
  REQUIRE(parts.size() == 3);
  CHECK(*parts[0].committed == 10);
  CHECK_FALSE(parts[0].is_assumed());
  CHECK(*parts[0].start == 3);
  CHECK_FALSE(parts[1].committed);
  CHECK(parts[1].assumed == Uncommitted::kEarliest);
  CHECK(*parts[1].lag() == 97);  // from the log start, 4, to the end, 101
  CHECK(parts[2].assumed == Uncommitted::kLatest);
  CHECK(*parts[2].lag() == 0);
  CHECK_FALSE(parts[2].start);
}

TEST_CASE("LagHistory migrates a history an older klag wrote", "[lag_history]") {
  char dir[] = "/tmp/kpipe-lag-history-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  std::string path = std::string(dir) + "/old.db";
  {
    // Schema version 1, as klag wrote it before --uncommitted.
    auto db = open_sqlite(path, {});
    REQUIRE(db);
    REQUIRE(
        (*db)
            ->migrate("lag",
                      {"CREATE TABLE lag_samples (id INTEGER PRIMARY KEY, subject_kind TEXT NOT "
                       "NULL, subject TEXT NOT NULL, at INTEGER NOT NULL, members INTEGER, "
                       "group_state TEXT);"
                       "CREATE TABLE lag_partitions (sample INTEGER NOT NULL REFERENCES "
                       "lag_samples(id) ON DELETE CASCADE, topic TEXT NOT NULL, partition "
                       "INTEGER NOT NULL, committed INTEGER, end_offset INTEGER NOT NULL, "
                       "lag_seconds REAL, committed_at INTEGER, at INTEGER NOT NULL, PRIMARY "
                       "KEY (sample, topic, partition)) WITHOUT ROWID;"
                       "INSERT INTO lag_samples VALUES (1, 'group', 'billing', 1000, NULL, "
                       "NULL);"
                       "INSERT INTO lag_partitions VALUES (1, 'events', 0, 5, 9, NULL, NULL, "
                       "1000), (1, 'events', 1, NULL, 7, NULL, NULL, 1000);"})
            .ok());
  }
  auto h = LagHistory::open(path, true);
  REQUIRE(h);
  auto old = (*h)->recent(kGroup, 10);
  REQUIRE(old);
  REQUIRE(old->size() == 1);
  const auto& parts = old->front().partitions;
  REQUIRE(parts.size() == 2);
  CHECK(*parts[0].lag() == 4);
  // Nothing committed, and nothing assumed then: no lag, as it was shown.
  CHECK_FALSE(parts[1].is_assumed());
  CHECK_FALSE(parts[1].lag());
  // New samples go on in the same file.
  REQUIRE((*h)->append(sample(kT0, 1, 2), 0).ok());
  h->reset();
  for (const char* f : {"/old.db", "/old.db-wal", "/old.db-shm"})
    unlink((std::string(dir) + f).c_str());
  rmdir(dir);
}

TEST_CASE("LagHistory::subjects names the groups it has samples of", "[lag_history]") {
  auto h = memory_history();
  CHECK(h->subjects(LagSubject::Kind::kGroup)->empty());
  LagSample s = sample(kT0, 1, 2);
  for (const char* name : {"payments", "billing", "payments"}) {
    s.subject = {LagSubject::Kind::kGroup, name};
    REQUIRE(h->append(s, 0).ok());
  }
  s.subject = {LagSubject::Kind::kState, "pipe.db"};
  REQUIRE(h->append(s, 0).ok());
  auto groups = h->subjects(LagSubject::Kind::kGroup);
  REQUIRE(groups);
  CHECK(*groups == std::vector<std::string>{"billing", "payments"});
  CHECK(*h->subjects(LagSubject::Kind::kState) == std::vector<std::string>{"pipe.db"});
}

TEST_CASE("LagHistory::all gives back every sample of a subject, oldest first", "[lag_history]") {
  auto h = memory_history();
  // Appended out of time order, with another subject's samples between.
  for (int i : {2, 0, 3, 1}) {
    LagSample s = sample(kT0 + i * kMinute, 10 * i, 100 + i, i);
    s.group_state = i == 3 ? "Stable" : "";
    s.partitions.push_back({"audit", 4, 7, 9, kT0 - kSecond, 0.25});
    s.partitions.back().start = 2;
    REQUIRE(h->append(s, 0).ok());
    LagSample other = sample(kT0 + i * kMinute, 99, 999);
    other.subject = {LagSubject::Kind::kGroup, "other"};
    REQUIRE(h->append(other, 0).ok());
  }
  LagSample empty = sample(kT0 + 4 * kMinute, 0, 0);
  empty.partitions.clear();
  REQUIRE(h->append(empty, 0).ok());
  auto all = h->all(kGroup);
  REQUIRE(all);
  REQUIRE(all->size() == 5);
  for (int i = 0; i < 4; ++i) {
    const LagSample& s = (*all)[static_cast<size_t>(i)];
    CHECK(s.at == kT0 + i * kMinute);
    CHECK(s.subject == kGroup);
    CHECK(*s.members == i);
    CHECK(s.group_state == (i == 3 ? "Stable" : ""));
    REQUIRE(s.partitions.size() == 3);
    // By topic, then partition.
    CHECK(s.partitions[0].topic == "audit");
    CHECK(*s.partitions[0].committed_at == kT0 - kSecond);
    CHECK(*s.partitions[0].start == 2);
    CHECK(*s.partitions[0].lag_seconds == 0.25);
    CHECK(*s.partitions[1].committed == 10 * i);
    CHECK(s.partitions[1].end == 100 + i);
    CHECK_FALSE(s.partitions[2].committed);
    CHECK_FALSE(s.partitions[2].lag_seconds);
  }
  // A sample without partitions is still a sample.
  CHECK(all->back().at == kT0 + 4 * kMinute);
  CHECK(all->back().partitions.empty());
  // The same samples recent() reads, one by one.
  auto recent = h->recent(kGroup, 10);
  REQUIRE(recent);
  REQUIRE(recent->size() == all->size());
  for (size_t i = 0; i < all->size(); ++i) {
    CHECK((*recent)[i].at == (*all)[i].at);
    CHECK((*recent)[i].partitions.size() == (*all)[i].partitions.size());
  }
  auto none = h->all({LagSubject::Kind::kState, "billing"});
  REQUIRE(none);
  CHECK(none->empty());
}

TEST_CASE("LagHistory keeps a Kinesis shard's sequence number whole", "[lag_history]") {
  auto h = memory_history();
  const std::string seq = "49590338271490256608559692538361571095921575989136588898";
  LagSample s = sample(kT0, 10, 100);
  s.partitions.clear();
  PartitionSample shard{"clicks", 3, *Position::sequence(seq), 0, kT0 - 1000, 2.5};
  shard.by_time = true;
  s.partitions.push_back(shard);
  PartitionSample started{"clicks", 4, Position::arrived_at(kT0 - 5000), 0, kT0 - 1000, 0.0};
  started.by_time = true;
  s.partitions.push_back(started);
  REQUIRE(h->append(s, 0).ok());
  auto back = h->recent(kGroup, 1);
  REQUIRE(back);
  REQUIRE(back->size() == 1);
  const auto& parts = back->front().partitions;
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].by_time);
  CHECK(parts[0].committed->digits() == seq);
  CHECK(*parts[0].lag_seconds == 2.5);
  CHECK_FALSE(parts[0].lag());
  CHECK(*parts[1].committed == Position::arrived_at(kT0 - 5000));
}
