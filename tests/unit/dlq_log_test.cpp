#include "kpipe/dlq_log.h"

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "fake_replay_target.h"

namespace kpipe {
namespace {

// The sequence number of a stream's n-th entry in a partition.
std::string log_sequence(size_t n) {
  return "4959033827149025660855969253836157109592157598913" + std::to_string(1000 + n * 7);
}

// A dead-letter log in memory, its partitions (two unless given) read in
// turn. As a Kinesis
// stream: positions are sequence numbers with gaps, and a partition
// resumes after the one kept. As a Kafka topic: offsets, resuming at the
// next.
class FakeLog final : public DeadLetterLog {
 public:
  FakeLog(size_t entries, bool stream, int32_t partitions = 2) : stream_(stream) {
    for (size_t i = 0; i < entries; ++i) {
      DlqEntry e;
      e.at = static_cast<Millis>(1000 + i);
      e.stage = i % 3 == 0 ? "kdedup" : "kwindow";
      e.reason = "line 1: late";
      e.payload = "line " + std::to_string(i + 1);
      auto p = static_cast<int32_t>(i % static_cast<size_t>(partitions));
      size_t n = partitions_[p].size();
      Position at =
          stream_ ? *Position::sequence(log_sequence(n)) : Position(static_cast<int64_t>(n));
      e.position = PartitionOffset{"dead", p, at};
      partitions_[p].push_back(std::move(e));
    }
  }

  std::string name() const override { return stream_ ? "kinesis:dead" : "kafka:dead"; }

  Status start(const std::map<int32_t, Position>& from) override {
    ++starts;
    cursor_.clear();
    for (const auto& [p, entries] : partitions_) {
      size_t i = 0;
      auto it = from.find(p);
      while (it != from.end() && i < entries.size() &&
             after(entries[i].position->offset) <= it->second)
        ++i;
      cursor_[p] = i;
    }
    return {};
  }

  Expected<std::vector<DlqEntry>> read(size_t max) override {
    std::vector<DlqEntry> out;
    bool more = true;
    while (out.size() < max && more) {
      more = false;
      for (auto& [p, i] : cursor_) {
        if (out.size() >= max || i >= partitions_[p].size()) continue;
        out.push_back(partitions_[p][i++]);
        more = true;
      }
    }
    return out;
  }

  Position after(const Position& at) const override {
    return stream_ ? at : Position(at.offset() + 1);
  }
  std::optional<Position> parse_position(std::string_view text) const override {
    if (stream_) return Position::sequence(text);
    return Position::from_text(text);
  }
  std::map<int32_t, Position> origin() const override {
    if (stream_) return {};
    return {{0, Position(0)}, {1, Position(0)}};
  }

  int starts = 0;

 private:
  bool stream_;
  std::map<int32_t, std::vector<DlqEntry>> partitions_;
  std::map<int32_t, size_t> cursor_;
};

// Where the position is kept: in memory, as a group's offsets or a table
// of --state would keep it.
class FakePositions final : public ReplayPositions {
 public:
  Expected<Saved> load() override { return kept; }
  Status save(const Saved& saved) override {
    kept = saved;
    ++saves;
    longest = std::max(longest, saved.metadata.size());
    return {};
  }
  std::string describe() const override { return "ledger 'fake'"; }
  Saved kept;
  int saves = 0;
  size_t longest = 0;  // the longest metadata saved
};

Expected<ReplayReport> replay(FakeLog& log, FakePositions& positions, ReplayTarget& target,
                              size_t batch, const DlqFilter& filter = {}, bool again = false) {
  auto saved = positions.load();
  REQUIRE(saved.ok());
  auto ledger = make_log_ledger(log, positions, *saved, filter, 0);
  ReplaySettings settings;
  settings.batch = batch;
  settings.again = again;
  return run_replay(*ledger, target, settings);
}

size_t pending(FakeLog& log, FakePositions& positions, const DlqFilter& filter = {}) {
  size_t n = 0;
  REQUIRE(scan_dead_letter_log(log, &positions.kept, filter, 0, [&](const DlqEntry& e) {
            if (!e.replayed) ++n;
            return Expected<bool>(true);
          }).ok());
  return n;
}

TEST_CASE("a log's replay killed anywhere and run again delivers every entry exactly once",
          "[dlq_log]") {
  const size_t n = 7;
  for (bool stream : {true, false}) {
    for (size_t batch : {size_t{1}, size_t{3}, n}) {
      for (size_t arrivals = 0; arrivals <= n; ++arrivals) {
        for (size_t acks = 0; acks <= arrivals; ++acks) {
          INFO((stream ? "stream" : "topic") << ", batch " << batch << ", killed after " << arrivals
                                             << " arrived and " << acks << " acknowledged");
          FakeLog log(n, stream);
          FakePositions positions;
          FakeTopic topic;
          topic.arrivals = arrivals;
          topic.acks = acks;
          auto first = replay(log, positions, topic, batch);
          CHECK(first.ok() == (arrivals == n && acks == n));
          topic.arrivals = topic.acks = SIZE_MAX;
          auto second = replay(log, positions, topic, batch);
          REQUIRE(second.ok());
          check_exactly_once(topic, n);
          for (const auto& [id, payload] : topic.records)
            CHECK(id.starts_with(stream ? "kinesis:dead:" : "kafka:dead:"));
          CHECK(pending(log, positions) == 0);
          CHECK(positions.kept.metadata.empty());
          // A third run finds nothing to do.
          auto third = replay(log, positions, topic, batch);
          REQUIRE(third.ok());
          CHECK(third->replayed == 0);
          CHECK(third->batches_in_doubt == 0);
        }
      }
    }
  }
}

TEST_CASE("a log's position is kept with the batch in flight, and read back by a new ledger",
          "[dlq_log]") {
  FakeLog log(6, true);
  FakePositions positions;
  FakeTopic topic;
  topic.arrivals = 4;  // batch 1 (2) acknowledged; batch 2 arrived, never acknowledged
  topic.acks = 2;
  REQUIRE_FALSE(replay(log, positions, topic, 2).ok());
  // FakeTopic's mark: records so far; "through": the newest entry handed
  // out in each partition since.
  CHECK(positions.kept.metadata == "{\"target\":\"kafka:fake\",\"mark\":\"2\",\"through\":[[0,\"" +
                                       log_sequence(1) + "\"],[1,\"" + log_sequence(1) + "\"]]}");
  // Each partition resumes after the last entry delivered in it.
  REQUIRE(positions.kept.next.size() == 2);
  CHECK(positions.kept.next.at(0).is_sequence());
  CHECK(pending(log, positions) == 4);
  topic.arrivals = topic.acks = SIZE_MAX;
  auto second = replay(log, positions, topic, 2);
  REQUIRE(second.ok());
  CHECK(second->batches_in_doubt == 1);
  CHECK(second->found_delivered == 2);
  CHECK(second->replayed == 2);
  check_exactly_once(topic, 6);
}

TEST_CASE("a filtered replay passes over the rest in its own ledger; --again starts over",
          "[dlq_log]") {
  FakeLog log(9, true);
  FakePositions filtered;
  FakeTopic topic;
  DlqFilter f;
  f.stage = "kdedup";
  auto r = replay(log, filtered, topic, 2, f);
  REQUIRE(r.ok());
  CHECK(r->replayed == 3);
  // Passed over counts as replayed for this ledger, and for no other.
  CHECK(pending(log, filtered) == 0);
  FakePositions other;
  CHECK(pending(log, other) == 9);
  auto again = replay(log, filtered, topic, 4, f, true);
  REQUIRE(again.ok());
  CHECK(again->replayed == 3);
  CHECK(topic.records.size() == 6);
}

TEST_CASE("a log's scan says replayed from the position, and nothing without one", "[dlq_log]") {
  FakeLog log(5, true);
  FakePositions positions;
  FakeTopic out(false);  // standard output's way: marked as each line is read
  out.close_after = 2;
  auto r = replay(log, positions, out, 10);
  REQUIRE(r.ok());
  CHECK(r->target_closed);
  CHECK(r->replayed == 2);
  std::vector<std::pair<std::string, bool>> seen;
  REQUIRE(scan_dead_letter_log(log, &positions.kept, {}, 0, [&](const DlqEntry& e) {
            seen.emplace_back(e.payload, e.replayed);
            return Expected<bool>(true);
          }).ok());
  CHECK(seen == std::vector<std::pair<std::string, bool>>{{"line 1", true},
                                                          {"line 2", true},
                                                          {"line 3", false},
                                                          {"line 4", false},
                                                          {"line 5", false}});
  size_t shown = 0;
  REQUIRE(scan_dead_letter_log(log, nullptr, {}, 3, [&](const DlqEntry& e) {
            CHECK_FALSE(e.replayed);
            ++shown;
            return Expected<bool>(true);
          }).ok());
  CHECK(shown == 3);
}

// A Kinesis stream as the target: records keep no replay id, and a
// killed replay's entries are found by their content.
FakeTopic content_target() {
  FakeTopic t;
  t.by_content = true;
  t.name = "kinesis:fake";
  return t;
}

TEST_CASE("a log's replay into a stream killed anywhere, twice, delivers every entry exactly once",
          "[dlq_log]") {
  // Three partitions read in turn, and a filter that passes one entry in
  // three over: a killed replay's entries in doubt span partitions. An
  // entry lost before others of its partition arrived keeps the first
  // mark in force while those are found and pending, over several batches.
  const size_t n = 8;
  DlqFilter kwindow;
  kwindow.stage = "kwindow";
  const size_t matching = 5;  // entries 2, 3, 5, 6, 8
  for (bool stream : {true, false}) {
    for (bool filtered : {false, true}) {
      const size_t want = filtered ? matching : n;
      const DlqFilter filter = filtered ? kwindow : DlqFilter{};
      for (size_t batch : {size_t{1}, size_t{3}, size_t{5}}) {
        for (size_t lose : {SIZE_MAX, size_t{0}, size_t{3}}) {
          for (size_t a1 = 0; a1 <= want; ++a1) {
            for (size_t k1 = 0; k1 <= a1; ++k1) {
              for (size_t a2 = 0; a2 <= want - k1; a2 += 2) {
                INFO((stream ? "stream" : "topic")
                     << (filtered ? ", filtered" : "") << ", batch " << batch << ", send " << lose
                     << " lost, killed after " << a1 << " arrived and " << k1
                     << " acknowledged, then after " << a2 << " arrived and none acknowledged");
                FakeLog log(n, stream, 3);
                FakePositions positions;
                FakeTopic target = content_target();
                target.lose = lose;
                target.arrivals = a1;
                target.acks = k1;
                auto first = replay(log, positions, target, batch, filter);
                target.lose = SIZE_MAX;
                if (!first.ok()) {
                  // The entries in doubt are told, never a list of them.
                  CHECK(positions.kept.metadata.find("\"through\":[") != std::string::npos);
                  target.arrivals = a2;
                  target.acks = 0;
                  (void)replay(log, positions, target, batch, filter);
                }
                target.arrivals = target.acks = SIZE_MAX;
                auto last = replay(log, positions, target, batch, filter);
                REQUIRE(last.ok());
                check_exactly_once(target, want);
                CHECK(pending(log, positions, filter) == 0);
                CHECK(positions.kept.metadata.empty());
                auto again = replay(log, positions, target, batch, filter);
                REQUIRE(again.ok());
                CHECK(again->replayed == 0);
                CHECK(again->batches_in_doubt == 0);
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("a log's replay metadata stays within a Kafka commit's for batches of 1000",
          "[dlq_log]") {
  // Few partitions: one batch of 1000 entries; many: a batch ends before
  // "through" would outgrow offset.metadata.max.bytes (4096 by default).
  for (bool stream : {true, false}) {
    for (int32_t partitions : {2, 400}) {
      INFO((stream ? "stream" : "topic") << ", " << partitions << " partitions");
      const size_t n = 3000;
      FakeLog log(n, stream, partitions);
      FakePositions positions;
      FakeTopic target = content_target();
      target.lose = 1001;      // the rest of its partition found pending after it
      target.arrivals = 1500;  // killed in the second batch, or later
      target.acks = 1000;
      REQUIRE_FALSE(replay(log, positions, target, 1000).ok());
      CHECK_FALSE(positions.kept.metadata.empty());
      target.arrivals = 700;  // and again while settling's finds are pending
      target.acks = 0;
      REQUIRE_FALSE(replay(log, positions, target, 1000).ok());
      target.arrivals = target.acks = SIZE_MAX;
      REQUIRE(replay(log, positions, target, 1000).ok());
      check_exactly_once(target, n);
      CAPTURE(positions.longest, positions.saves);
      CHECK(positions.longest > 0);
      CHECK(positions.longest <= 4096);
    }
  }
}

// Why a replay that must be refused was, once it is sure nothing was sent.
std::string refusal(FakeLog& log, FakePositions& positions, FakeTopic& target) {
  auto r = replay(log, positions, target, 2);
  REQUIRE_FALSE(r.ok());
  CHECK(target.records.empty());
  return r.error().message;
}

TEST_CASE("a position an older kdlq kept mid-batch settles into its topic, not into a stream",
          "[dlq_log]") {
  for (bool stream : {true, false}) {
    INFO((stream ? "stream" : "topic"));
    FakeLog log(6, stream);
    FakePositions positions;
    FakeTopic topic;
    topic.arrivals = 4;
    topic.acks = 2;
    REQUIRE_FALSE(replay(log, positions, topic, 2).ok());
    // As the previous version wrote it: no "through".
    positions.kept.metadata = "{\"target\":\"kafka:fake\",\"mark\":\"2\"}";

    FakeTopic other = content_target();
    CHECK(refusal(log, positions, other) ==
          "a replay to 'kafka:fake' was interrupted before its deliveries were acknowledged: "
          "replay to 'kafka:fake' again first, so that it can tell what arrived and send nothing "
          "twice");
    CHECK(other.scans == 0);

    // Into a stream it was bound for, the entries in doubt are unknown.
    positions.kept.metadata = "{\"target\":\"kinesis:fake\",\"mark\":\"2\"}";
    CHECK(refusal(log, positions, other)
              .starts_with("'kinesis:fake' is searched for an interrupted"));

    positions.kept.metadata = "{\"target\":\"kafka:fake\",\"mark\":\"2\"}";
    topic.arrivals = topic.acks = SIZE_MAX;
    auto settled = replay(log, positions, topic, 2);
    REQUIRE(settled.ok());
    CHECK(settled->found_delivered == 2);
    check_exactly_once(topic, 6);
    CHECK(positions.kept.metadata.empty());
  }
}

TEST_CASE("a log's unreadable \"through\" is said so", "[dlq_log]") {
  FakeLog log(4, false);
  FakePositions positions;
  positions.kept.metadata = "{\"target\":\"kinesis:fake\",\"mark\":\"2\",\"through\":[[0,3]]}";
  FakeTopic target = content_target();
  CHECK(refusal(log, positions, target) ==
        "ledger 'fake' holds unreadable replay metadata "
        "'{\"target\":\"kinesis:fake\",\"mark\":\"2\",\"through\":[[0,3]]}'");
}

TEST_CASE("the default replay ledger is named after the log", "[dlq_log]") {
  CHECK(default_replay_ledger("dead") == "kdlq-replay.dead");
}

}  // namespace
}  // namespace kpipe
