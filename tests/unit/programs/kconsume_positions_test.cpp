// kconsume's positions: where each partition is read to, where --until
// ends it, and what is paused and finished; no broker (the lookups by time
// are answered here).
#include "kpipe/programs/kconsume_positions.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace kpipe;

namespace {

EndPosition until_offset(int64_t offset) {
  EndPosition e;
  e.kind = EndPosition::Kind::kOffset;
  e.value = offset;
  return e;
}

// A lookup by time that must not be asked.
Expected<std::vector<Position>> no_lookup(const std::vector<TopicPartition>&, Millis) {
  FAIL("a lookup by time without --until @TIME");
  return std::vector<Position>{};
}

// Tracks `parts` from their offsets, their --until ends resolved first.
void track_all(ConsumePositions& positions, const std::vector<PartitionOffset>& parts) {
  REQUIRE(positions.resolve_ends(parts, no_lookup).ok());
  for (const auto& p : parts) positions.track(p);
}

}  // namespace

TEST_CASE("kconsume positions: a record moves its partition to the offset after it", "[consume]") {
  ConsumePositions positions{EndPosition{}};
  track_all(positions, {{"t", 0, 5}, {"t", 1, 0}});
  CHECK(positions.size() == 2);
  ConsumePosition* p = positions.find("t", 0);
  REQUIRE(p != nullptr);
  CHECK(p->next == 5);
  CHECK(p->end == kNoEnd);
  CHECK(positions.read(*p, 5, 6));
  CHECK(p->next == 6);
  CHECK(positions.read(*p, 9, 10));  // compacted offsets between are passed
  CHECK(p->next == 10);
  CHECK_FALSE(p->ended);
  CHECK(positions.find("t", 2) == nullptr);
  CHECK(positions.find("u", 0) == nullptr);
  CHECK(positions.find("t", 1)->next == 0);
  CHECK_FALSE(positions.take_ended().has_value());
}

TEST_CASE("kconsume positions: the end of a partition passes transaction markers, not --until",
          "[consume]") {
  std::vector<Position> skipped;
  ConsumePositions positions{until_offset(20)};
  positions.on_skipped([&](ConsumePosition& pos) { skipped.push_back(pos.next); });
  track_all(positions, {{"t", 0, 3}, {"t", 1, 0}});
  ConsumePosition& p = *positions.find("t", 0);
  REQUIRE(positions.read(p, 3, 4));
  // The end the fetcher saw is past markers: the position follows it.
  positions.at_partition_end(p, 7);
  CHECK(p.at_end);
  CHECK(p.next == 7);
  CHECK_FALSE(p.ended);
  CHECK(skipped == std::vector<Position>{7});
  // An end no further than the position moves nothing.
  positions.at_partition_end(p, 7);
  CHECK(skipped.size() == 1);
  // An end past --until's stops there, and the partition is done.
  positions.at_partition_end(p, 30);
  CHECK(p.next == 20);
  CHECK(p.ended);
  CHECK(skipped == std::vector<Position>{7, 20});
  // A record after the end was seen clears it.
  ConsumePosition& q = *positions.find("t", 1);
  positions.at_partition_end(q, 0);
  CHECK(q.at_end);
  REQUIRE(positions.read(q, 0, 1));
  CHECK_FALSE(q.at_end);
}

TEST_CASE("kconsume positions: --until ends a partition at its last record, or past it",
          "[consume]") {
  std::vector<Position> skipped;
  ConsumePositions positions{until_offset(10)};
  positions.on_skipped([&](ConsumePosition& pos) { skipped.push_back(pos.next); });
  track_all(positions, {{"t", 0, 8}, {"t", 1, 8}, {"t", 2, 8}});
  CHECK(positions.end_of({"t", 0}) == 10);

  // The last record before the end: done without waiting for one past it.
  ConsumePosition& a = *positions.find("t", 0);
  CHECK(positions.read(a, 8, 9));
  CHECK_FALSE(a.ended);
  CHECK(positions.read(a, 9, 10));
  CHECK(a.ended);
  CHECK(a.next == 10);
  CHECK(skipped.empty());

  // A record past the end (a compacted last one) is not written; the
  // position is the end.
  ConsumePosition& b = *positions.find("t", 1);
  CHECK_FALSE(positions.read(b, 12, 13));
  CHECK(b.ended);
  CHECK(b.next == 10);
  CHECK(skipped == std::vector<Position>{10});

  // Paused once, the partitions that ended since the last time.
  auto ended = positions.take_ended();
  REQUIRE(ended.has_value());
  CHECK(*ended == std::vector<TopicPartition>{{"t", 0}, {"t", 1}});
  CHECK(a.paused);
  CHECK(b.paused);
  CHECK_FALSE(positions.take_ended().has_value());
  CHECK_FALSE(positions.finished(false));
  ConsumePosition& c = *positions.find("t", 2);
  positions.reach_end(c);
  ended = positions.take_ended();
  REQUIRE(ended.has_value());
  CHECK(*ended == std::vector<TopicPartition>{{"t", 2}});
  CHECK(positions.finished(false));
}

TEST_CASE("kconsume positions: a partition that starts at its --until end is done at once",
          "[consume]") {
  int skipped = 0;
  ConsumePositions positions{until_offset(4)};
  positions.on_skipped([&](ConsumePosition&) { ++skipped; });
  track_all(positions, {{"t", 0, 4}, {"t", 1, 9}});
  CHECK(positions.find("t", 0)->ended);
  CHECK(positions.find("t", 0)->next == 4);
  // Started past its end (a stored position): it stays there.
  CHECK(positions.find("t", 1)->ended);
  CHECK(positions.find("t", 1)->next == 9);
  CHECK(skipped == 0);
  CHECK(positions.finished(false));
  auto ended = positions.take_ended();
  REQUIRE(ended.has_value());
  CHECK(ended->size() == 2);
}

TEST_CASE("kconsume positions: -e finishes at each partition's end, --until at its own",
          "[consume]") {
  ConsumePositions positions{EndPosition{}};
  track_all(positions, {{"t", 0, 0}, {"t", 1, 0}});
  CHECK_FALSE(positions.finished(true));
  positions.at_partition_end(*positions.find("t", 0), 0);
  CHECK_FALSE(positions.finished(true));
  positions.at_partition_end(*positions.find("t", 1), 0);
  CHECK(positions.finished(true));
  CHECK_FALSE(positions.finished(false));  // no --until: never done without -e
}

TEST_CASE("kconsume positions: --until @TIME asks the broker once per partition", "[consume]") {
  EndPosition at;
  at.kind = EndPosition::Kind::kTime;
  at.value = 1795947330123;
  ConsumePositions positions{at};
  std::vector<std::vector<TopicPartition>> asked;
  auto lookup = [&](const std::vector<TopicPartition>& tps,
                    Millis when) -> Expected<std::vector<Position>> {
    CHECK(when == 1795947330123);
    asked.push_back(tps);
    std::vector<Position> out;
    for (const auto& tp : tps) out.push_back(tp.partition == 0 ? 42 : -1);
    return out;
  };
  REQUIRE(positions.resolve_ends({{"t", 0, 0}, {"t", 1, 0}}, lookup).ok());
  CHECK(positions.end_of({"t", 0}) == 42);
  CHECK(positions.end_of({"t", 1}) == 0);  // no offset for the time: resolve_end's rule
  // Assigned again (a rebalance), a partition ends where it first would:
  // only the new one is looked up.
  REQUIRE(positions.resolve_ends({{"t", 0, 0}, {"t", 2, 0}}, lookup).ok());
  REQUIRE(asked.size() == 2);
  CHECK(asked[1] == std::vector<TopicPartition>{{"t", 2}});
  CHECK(positions.end_of({"t", 0}) == 42);
  REQUIRE(positions.resolve_ends({{"t", 1, 0}}, lookup).ok());
  CHECK(asked.size() == 2);
  // A lookup that fails fails the resolution.
  auto failing = [](const std::vector<TopicPartition>&, Millis) -> Expected<std::vector<Position>> {
    return failure("broker out of reach");
  };
  Status s = positions.resolve_ends({{"t", 3, 0}}, failing);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message == "broker out of reach");
}

TEST_CASE("kconsume positions: without --until nothing is looked up and nothing ends",
          "[consume]") {
  ConsumePositions positions{EndPosition{}};
  CHECK_FALSE(positions.has_until());
  track_all(positions, {{"t", 0, 0}});
  ConsumePosition& p = *positions.find("t", 0);
  CHECK(positions.read(p, 1000000, 1000001));
  CHECK_FALSE(p.ended);
  CHECK_FALSE(positions.finished(false));
}

TEST_CASE("kconsume positions: a partition taken away and assigned again starts anew",
          "[consume]") {
  std::vector<const ConsumePosition*> forgotten;
  ConsumePositions positions{until_offset(100)};
  positions.on_forgotten([&](const ConsumePosition& gone) { forgotten.push_back(&gone); });
  track_all(positions, {{"t", 0, 0}, {"t", 1, 0}});
  ConsumePosition* p = positions.find("t", 0);
  REQUIRE(positions.read(*p, 10, 11));
  p->committed = 11;
  positions.forget({"t", 0});
  CHECK(forgotten == std::vector<const ConsumePosition*>{p});
  CHECK(positions.find("t", 0) == nullptr);
  CHECK_FALSE(positions.contains({"t", 0}));
  positions.forget({"t", 0});  // not held: nothing to forget
  CHECK(forgotten.size() == 1);

  // Tracked again, at another epoch: its old position is forgotten first.
  PartitionOffset again{"t", 1, 50};
  again.epoch = 3;
  positions.track(again);
  CHECK(forgotten.size() == 2);
  ConsumePosition* q = positions.find("t", 1);
  REQUIRE(q != nullptr);
  CHECK(q->next == 50);
  CHECK(q->epoch == 3);
  CHECK(q->end == 100);
  CHECK(q->committed == -1);
  CHECK(positions.size() == 1);
}

// A Kinesis shard's --until @TIME (kpipe(7), LOGS): its sequence numbers
// say nothing of time, so a record's arrival time ends it; a shard kept at
// a time past the end is done at once; a shard's sequence number never
// counts as past a time end, nor moves to it.
TEST_CASE("kconsume positions: a Kinesis shard ends at its first record at or after --until",
          "[consume]") {
  EndPosition until;
  until.kind = EndPosition::Kind::kTime;
  until.value = 5000;
  ConsumePositions positions{until};
  std::vector<PartitionOffset> parts{{"s", 0, LogStart::kEarliest},
                                     {"s", 1, *Position::sequence("49590338271490256608")},
                                     {"s", 2, Position::arrived_at(6000)}};
  // The log's answer for the time: the time itself (KinesisLog).
  REQUIRE(positions
              .resolve_ends(parts,
                            [](const std::vector<TopicPartition>& tps,
                               Millis at) -> Expected<std::vector<Position>> {
                              return std::vector<Position>(tps.size(), Position::arrived_at(at));
                            })
              .ok());
  for (const auto& p : parts) positions.track(p);
  ConsumePosition& zero = positions[{"s", 0}];
  ConsumePosition& one = positions[{"s", 1}];
  CHECK_FALSE(zero.ended);
  CHECK_FALSE(one.ended);            // a sequence number is no time: not past the end
  CHECK(positions[{"s", 2}].ended);  // started at 6 s, past the end at 5 s
  const Position a = *Position::sequence("49590338271490256609");
  const Position b = *Position::sequence("49590338271490256610");
  CHECK(positions.read(zero, a, a, 4999));
  CHECK(zero.next == a);
  CHECK_FALSE(zero.ended);
  CHECK_FALSE(positions.read(zero, b, b, 5000));  // arrived at the end: not written
  CHECK(zero.ended);
  CHECK(zero.next == a);  // resumes after the last record written, not at the time
  // At its tip before the end: at its end for -e, not at --until's.
  positions.at_partition_end(one, one.next);
  CHECK(one.at_end);
  CHECK_FALSE(one.ended);
  CHECK_FALSE(positions.finished(false));
  CHECK(positions.finished(true));
}
