#include "kpipe/dlq_replay.h"

#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>

#include "fake_replay_target.h"
#include "fakes.h"
#include "kpipe/store/dlq_store.h"

namespace kpipe {
namespace {

std::unique_ptr<DlqStore> memory_store(size_t entries) {
  auto s = DlqStore::open(":memory:");
  REQUIRE(s.ok());
  std::vector<std::string> payloads;
  for (size_t i = 0; i < entries; ++i) payloads.push_back("line " + std::to_string(i + 1));
  std::vector<DeadLetter> letters;
  for (size_t i = 0; i < entries; ++i) {
    DeadLetter d;
    d.at = static_cast<Millis>(i);
    d.stage = i % 2 == 0 ? "kdedup" : "kwindow";
    d.reason = i % 3 == 0 ? "line 1: late" : "line 1: field '.ts' is missing";
    d.payload = payloads[i];
    letters.push_back(d);
  }
  REQUIRE((*s)->add(letters).ok());
  return std::move(*s);
}

Expected<ReplayReport> replay(DlqStore& store, ReplayTarget& target, size_t batch,
                              bool again = false, const DlqFilter& filter = {}, size_t limit = 0) {
  FakeClock clock(5000);
  auto ledger = make_store_ledger(store, filter, limit, clock);
  REQUIRE(ledger.ok());
  ReplaySettings settings;
  settings.batch = batch;
  settings.again = again;
  return run_replay(**ledger, target, settings);
}

size_t pending(DlqStore& store) {
  DlqFilter f;
  f.pending_only = true;
  size_t n = 0;
  REQUIRE(store
              .scan(f, 0, false,
                    [&](const DlqEntry&) -> Status {
                      ++n;
                      return {};
                    })
              .ok());
  return n;
}

// A target that finds entries by their replay ids, and one that finds
// them by what their records hold (a Kinesis stream): the same guarantee.
TEST_CASE("a replay killed anywhere and run again delivers every entry exactly once",
          "[dlq_replay]") {
  const size_t n = 7;
  for (bool by_content : {false, true}) {
    for (size_t batch : {1, 3, 10}) {
      for (size_t arrivals = 0; arrivals <= n; ++arrivals) {
        for (size_t acks = 0; acks <= arrivals; ++acks) {
          INFO((by_content ? "found by content, " : "found by replay id, ")
               << "batch " << batch << ", killed after " << arrivals << " arrived and " << acks
               << " acknowledged");
          auto store = memory_store(n);
          FakeTopic topic;
          topic.by_content = by_content;
          topic.arrivals = arrivals;
          topic.acks = acks;
          auto first = replay(*store, topic, batch);
          bool complete = arrivals == n && acks == n;
          CHECK(first.ok() == complete);
          if (!first.ok()) CHECK(first.error().message.find("killed") != std::string::npos);
          topic.arrivals = topic.acks = SIZE_MAX;
          size_t arrived = topic.arrived_count;
          size_t acked = topic.acked_count;
          CHECK(n - pending(*store) == acked);
          auto second = replay(*store, topic, batch);
          REQUIRE(second.ok());
          // What the first run delivered without knowing is found, not re-sent.
          CHECK(second->found_delivered == arrived - acked);
          CHECK(second->replayed == n - arrived);
          check_exactly_once(topic, n);
          CHECK(pending(*store) == 0);
          CHECK(store->in_doubt()->empty());
          auto third = replay(*store, topic, batch);
          REQUIRE(third.ok());
          CHECK(third->replayed == 0);
          CHECK(topic.records.size() == n);
        }
      }
    }
  }
}

TEST_CASE("a target found by content: identical entries take a record each, the batch's own",
          "[dlq_replay]") {
  auto s = DlqStore::open(":memory:");
  REQUIRE(s.ok());
  DlqStore& store = **s;
  std::vector<DeadLetter> letters(4);
  for (auto& d : letters) {
    d.stage = "kdedup";
    d.reason = "line 1: late";
    d.payload = "same line";
  }
  REQUIRE(store.add(letters).ok());
  FakeTopic topic;
  topic.by_content = true;
  // Batch 1 (2 entries) delivered; batch 2: one arrived, none acknowledged.
  topic.arrivals = 3;
  topic.acks = 2;
  REQUIRE_FALSE(replay(store, topic, 2).ok());
  CHECK(pending(store) == 2);
  topic.arrivals = topic.acks = SIZE_MAX;
  auto second = replay(store, topic, 2);
  REQUIRE(second.ok());
  // The records of batch 1, before the mark, are not taken for batch 2's.
  CHECK(second->found_delivered == 1);
  CHECK(second->replayed == 1);
  CHECK(topic.records.size() == 4);
  CHECK(pending(store) == 0);
}

// A ledger that keeps a position, not which entries were in flight (a
// Kafka dead-letter topic's group).
class PositionLedger final : public ReplayLedger {
 public:
  std::string id_prefix() const override { return "p:"; }
  Expected<std::vector<InDoubt>> in_doubt() override {
    return std::vector<InDoubt>{{"kafka:fake", "0", 0, 0}};
  }
  Expected<size_t> settle(const InDoubt&, const std::set<std::string>&) override { return 0; }
  Status reset() override { return {}; }
  Expected<std::vector<ReplayItem>> next(size_t) override { return std::vector<ReplayItem>(); }
  Status begin(const std::vector<ReplayItem>&, const std::string&, const std::string&) override {
    return {};
  }
  Status delivered(const std::vector<const ReplayItem*>&) override { return {}; }
};

TEST_CASE("a target found by content cannot settle with a ledger that keeps no entries",
          "[dlq_replay]") {
  PositionLedger ledger;
  FakeTopic topic;
  topic.by_content = true;
  auto r = run_replay(ledger, topic, ReplaySettings{});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message ==
        "'kafka:fake' is searched for an interrupted replay's records by their content, and "
        "this store keeps no list of the entries it left in doubt");
  CHECK(topic.scans == 0);
}

TEST_CASE("a killed replay killed again while settling still ends exactly once", "[dlq_replay]") {
  auto store = memory_store(10);
  FakeTopic topic;
  topic.arrivals = 6;
  topic.acks = 2;
  REQUIRE_FALSE(replay(*store, topic, 4).ok());  // batch 1: 4 arrived, 2 acked; batch 2 never began
  topic.arrivals = 3;                            // the second run dies too, after settling
  topic.acks = 0;
  REQUIRE_FALSE(replay(*store, topic, 4).ok());
  topic.arrivals = topic.acks = SIZE_MAX;
  REQUIRE(replay(*store, topic, 4).ok());
  check_exactly_once(topic, 10);
  CHECK(pending(*store) == 0);
}

TEST_CASE("standard output: each entry is marked as its write returns; a closed pipe stops",
          "[dlq_replay]") {
  auto store = memory_store(5);
  FakeTopic out(false);
  out.close_after = 3;
  auto first = replay(*store, out, 2);
  REQUIRE(first.ok());
  CHECK(first->target_closed);
  CHECK(first->replayed == 3);
  CHECK(pending(*store) == 2);
  out.close_after = SIZE_MAX;
  auto second = replay(*store, out, 2);
  REQUIRE(second.ok());
  CHECK(second->replayed == 2);
  check_exactly_once(out, 5);
  CHECK(out.scans == 0);
}

TEST_CASE("a batch in doubt is settled only by its own target", "[dlq_replay]") {
  auto store = memory_store(3);
  FakeTopic topic;
  topic.arrivals = 1;
  topic.acks = 0;
  REQUIRE_FALSE(replay(*store, topic, 10).ok());
  FakeTopic out(false);
  auto elsewhere = replay(*store, out, 10);
  REQUIRE_FALSE(elsewhere.ok());
  CHECK(elsewhere.error().message ==
        "a replay to 'kafka:fake' was interrupted before its deliveries were acknowledged: replay "
        "to 'kafka:fake' "
        "again first, so that it can tell what arrived and send nothing twice");
  CHECK(out.records.empty());
}

TEST_CASE("replay --again sends replayed entries once more, and resumes without --again",
          "[dlq_replay]") {
  auto store = memory_store(6);
  FakeTopic topic;
  REQUIRE(replay(*store, topic, 4).ok());
  topic.records.clear();
  topic.arrivals = 3;
  topic.acks = 3;
  REQUIRE_FALSE(replay(*store, topic, 2, true).ok());
  topic.arrivals = topic.acks = SIZE_MAX;
  auto resumed = replay(*store, topic, 2);
  REQUIRE(resumed.ok());
  check_exactly_once(topic, 6);
}

TEST_CASE("filters and --limit choose what is replayed; the rest stays pending", "[dlq_replay]") {
  auto store = memory_store(9);
  FakeTopic topic;
  DlqFilter f;
  f.stage = "kdedup";  // entries 1, 3, 5, 7, 9
  auto r = replay(*store, topic, 2, false, f, 3);
  REQUIRE(r.ok());
  CHECK(r->replayed == 3);
  REQUIRE(topic.records.size() == 3);
  CHECK(topic.records[0].second == "line 1");
  CHECK(topic.records[2].second == "line 5");
  CHECK(pending(*store) == 6);
  CHECK(topic.records[0].first.ends_with(":1"));
  CHECK(topic.records[0].first.size() == 16 + 2);  // STORE_ID:ID
}

TEST_CASE("lines that fail again during a replay wait for the next one", "[dlq_replay]") {
  auto store = memory_store(2);
  FakeTopic out(false);
  out.on_send = [&] {
    DeadLetter d;
    d.stage = "kdedup";
    d.reason = "line 1: again";
    d.payload = "failed again";
    REQUIRE(store->add(d).ok());
  };
  auto r = replay(*store, out, 10);
  REQUIRE(r.ok());
  CHECK(r->replayed == 2);
  CHECK(pending(*store) == 2);
}

TEST_CASE("a stop request ends the replay after the entry or batch in hand", "[dlq_replay]") {
  auto store = memory_store(5);
  FakeTopic out(false);
  std::atomic<bool> stop{false};
  out.on_send = [&] { stop = true; };
  FakeClock clock;
  auto ledger = make_store_ledger(*store, {}, 0, clock);
  REQUIRE(ledger.ok());
  ReplaySettings settings;
  settings.stop = &stop;
  auto r = run_replay(**ledger, out, settings);
  REQUIRE(r.ok());
  CHECK(r->stopped);
  CHECK(r->replayed == 1);
  CHECK(pending(*store) == 4);
}

}  // namespace

TEST_CASE("a replay tells its progress: replayed so far, of how many", "[dlq_replay]") {
  auto store = memory_store(9);
  FakeTopic topic;
  FakeClock clock(5000);
  DlqFilter f;
  f.stage = "kdedup";  // entries 1, 3, 5, 7, 9
  auto ledger = make_store_ledger(*store, f, 0, clock);
  REQUIRE(ledger.ok());
  ReplaySettings settings;
  settings.batch = 2;
  std::vector<std::pair<uint64_t, std::optional<uint64_t>>> seen;
  settings.on_progress = [&](uint64_t replayed, std::optional<uint64_t> total) {
    seen.emplace_back(replayed, total);
  };
  auto r = run_replay(**ledger, topic, settings);
  REQUIRE(r.ok());
  CHECK(r->replayed == 5);
  using P = std::pair<uint64_t, std::optional<uint64_t>>;
  // Before each batch, and before finding there is none left.
  CHECK(seen == std::vector<P>{{0, 5}, {2, 5}, {4, 5}, {5, 5}});
  // With --limit the total is at most the limit.
  auto store2 = memory_store(9);
  auto limited = make_store_ledger(*store2, {}, 4, clock);
  REQUIRE(limited.ok());
  CHECK(*(*limited)->pending() == std::optional<uint64_t>(4));
}

}  // namespace kpipe
