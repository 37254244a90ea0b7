#include "kpipe/lag.h"
#include "fakes.h"

#include <catch2/catch.hpp>

#include <set>

#include "kpipe/log.h"
#include "lag_fixtures.h"

using namespace kpipe;
using namespace kpipe::lag_test;

namespace {

// A partition's points: committed offsets and log end offsets, one sample a
// minute apart starting at t0.
std::vector<PartitionPoint> points(const std::vector<std::pair<int64_t, int64_t>>& committed_end) {
  std::vector<PartitionPoint> out;
  Millis at = kT0;
  for (const auto& [c, e] : committed_end) {
    out.push_back({at, c, std::max<int64_t>(0, e - c), std::nullopt});
    at += kMinute;
  }
  return out;
}

RuleSettings window(size_t n, int64_t allowed = 0) {
  return {n, allowed};
}

LagStatus judge(const std::vector<PartitionPoint>& p, std::optional<int64_t> members = std::nullopt,
                RuleSettings rules = window(10)) {
  auto v = judge_partition(p, members, rules);
  REQUIRE(v);
  return v->status;
}

}  // namespace

TEST_CASE("lag status names and --fail-on", "[lag]") {
  CHECK(std::string(lag_status_name(LagStatus::kStall)) == "STALL");
  CHECK(*parse_fail_on("STOP") == LagStatus::kStop);
  CHECK(*parse_fail_on("rewind") == LagStatus::kRewind);
  CHECK(*parse_fail_on("Warn") == LagStatus::kWarn);
  auto typo = parse_fail_on("STAL");
  REQUIRE_FALSE(typo);
  CHECK(typo.error().message == "unknown status 'STAL', did you mean 'STALL'?");
  CHECK(typo.error().status == ExitStatus::kUsage);
  // OK is no failure to ask for.
  CHECK_FALSE(parse_fail_on("OK"));
  // Severity: the group's status is the worst, --fail-on S fires at S or worse.
  CHECK(LagStatus::kOk < LagStatus::kWarn);
  CHECK(LagStatus::kWarn < LagStatus::kStall);
  CHECK(LagStatus::kStall < LagStatus::kStop);
  CHECK(LagStatus::kStop < LagStatus::kRewind);
}

TEST_CASE("partition lag in records", "[lag]") {
  PartitionSample p{"t", 0, 100, 150, std::nullopt, std::nullopt};
  CHECK(*p.lag() == 50);
  p.committed = 150;
  CHECK(*p.lag() == 0);
  // A committed offset past the end (a topic recreated) is not negative lag.
  p.committed = 160;
  CHECK(*p.lag() == 0);
  p.committed.reset();
  CHECK_FALSE(p.lag());
}

TEST_CASE("rule OK: the latest lag within --allowed-lag", "[lag][rules]") {
  // The offset moves and the lag never decreases: WARN, unless small enough.
  auto p = points({{10, 13}, {20, 24}, {30, 35}});
  CHECK(judge(p, std::nullopt, window(10, 0)) == LagStatus::kWarn);
  CHECK(judge(p, std::nullopt, window(10, 4)) == LagStatus::kWarn);
  CHECK(judge(p, std::nullopt, window(10, 5)) == LagStatus::kOk);
  // Only the latest lag counts: an allowed lag does not excuse a stall.
  auto stalled = points({{10, 12}, {10, 20}, {10, 30}});
  CHECK(judge(stalled, std::nullopt, window(10, 5)) == LagStatus::kStall);
  CHECK(judge(stalled, std::nullopt, window(10, 20)) == LagStatus::kOk);
}

TEST_CASE("rule OK: any zero lag in the window", "[lag][rules]") {
  auto p = points({{10, 10}, {10, 20}, {10, 30}});
  CHECK(judge(p) == LagStatus::kOk);
  // The same zero out of a window of two no longer counts.
  CHECK(judge(p, 1, window(2)) == LagStatus::kStall);
}

TEST_CASE("rule REWIND: the committed offset went backwards", "[lag][rules]") {
  auto p = points({{10, 40}, {20, 50}, {15, 60}});
  auto v = judge_partition(p, 3, window(10));
  REQUIRE(v);
  CHECK(v->status == LagStatus::kRewind);
  CHECK(v->reason == "the committed offset went back from 20 to 15");
  // REWIND outranks what the trend says, and needs the window to see it.
  auto later = points({{10, 40}, {20, 50}, {15, 60}, {16, 70}, {17, 80}});
  CHECK(judge(later, 3, window(5)) == LagStatus::kRewind);
  CHECK(judge(later, 3, window(2)) == LagStatus::kWarn);
}

TEST_CASE("rule STOP: unmoved for longer than the window, no active member", "[lag][rules]") {
  // Unmoved in the window of 3, and in the sample before it.
  auto p = points({{10, 20}, {10, 25}, {10, 30}, {10, 35}});
  auto none = judge_partition(p, 0, window(3));
  REQUIRE(none);
  CHECK(none->status == LagStatus::kStop);
  CHECK(none->reason ==
        "offset 10 has not moved for longer than the window (3 samples over 2m), lag 25, and the "
        "group has no "
        "active member");
  CHECK_FALSE(none->stop_without_members);
  // Members still in the group: stuck, not stopped.
  CHECK(judge(p, 2, window(3)) == LagStatus::kStall);
  // The broker cannot tell (kbroker): the offsets decide, and say so.
  auto unknown = judge_partition(p, std::nullopt, window(3));
  REQUIRE(unknown);
  CHECK(unknown->status == LagStatus::kStop);
  CHECK(unknown->stop_without_members);
  CHECK(unknown->reason ==
        "offset 10 has not moved for longer than the window (3 samples over 2m), lag 25 (the "
        "broker cannot tell "
        "whether the group has active members)");
}

TEST_CASE("rule STOP: a state file's commit times tell whether it still commits", "[lag][rules]") {
  auto p = points({{10, 20}, {10, 25}, {10, 30}, {10, 35}});
  // The window spans 2 minutes; the pipeline last committed 10 minutes
  // before the latest sample: stopped.
  for (auto& point : p) point.committed_at = p.back().at - 10 * kMinute;
  auto v = judge_partition(p, std::nullopt, window(3));
  REQUIRE(v);
  CHECK(v->status == LagStatus::kStop);
  CHECK(v->reason ==
        "offset 10 has not moved for longer than the window (3 samples over 2m), lag 25, and "
        "nothing was committed "
        "for 10m");
  // Committing (the same offset) a minute ago: running, but stuck.
  p.back().committed_at = p.back().at - kMinute;
  CHECK(judge(p, std::nullopt, window(3)) == LagStatus::kStall);
  // The commit time outranks a member count.
  CHECK(judge(p, 0, window(3)) == LagStatus::kStall);
}

TEST_CASE("rule STALL: the offset never moved while lag stayed above zero", "[lag][rules]") {
  auto p = points({{10, 20}, {10, 25}, {10, 30}});
  auto v = judge_partition(p, std::nullopt, window(3));
  REQUIRE(v);
  CHECK(v->status == LagStatus::kStall);
  CHECK(v->reason ==
        "offset 10 did not move in 3 samples over 2m while lag stayed above 0 (now 20)");
  // It moved just before the window: stalled, not stopped.
  auto moved = points({{5, 20}, {10, 20}, {10, 25}, {10, 30}});
  CHECK(judge(moved, std::nullopt, window(3)) == LagStatus::kStall);
  CHECK(judge(moved, 0, window(3)) == LagStatus::kStall);
  // A lag that stays the same is a stall too.
  CHECK(judge(points({{10, 20}, {10, 20}}), 1) == LagStatus::kStall);
}

TEST_CASE("rule WARN: the offset moved but the lag never decreased", "[lag][rules]") {
  auto p = points({{10, 15}, {20, 25}, {30, 40}});
  auto v = judge_partition(p, 1, window(10));
  REQUIRE(v);
  CHECK(v->status == LagStatus::kWarn);
  CHECK(
      v->reason ==
      "the offset moved from 10 to 30 in 3 samples over 2m but the lag never decreased (5 to 10)");
  // One decrease anywhere in the window: OK.
  CHECK(judge(points({{10, 15}, {20, 24}, {30, 40}}), 1) == LagStatus::kOk);
  CHECK(judge(points({{10, 20}, {20, 26}, {30, 40}}), 1) == LagStatus::kOk);
}

TEST_CASE("rules: the window is the last N points with a committed offset", "[lag][rules]") {
  // A decrease, then three samples of growing lag: the window of 3 sees
  // only the growth.
  auto p = points({{10, 50}, {45, 50}, {50, 60}, {60, 75}, {70, 90}});
  CHECK(judge(p, 1, window(10)) == LagStatus::kOk);
  CHECK(judge(p, 1, window(3)) == LagStatus::kWarn);
  // Points without a committed offset are not samples of the partition.
  auto gaps = points({{10, 15}, {0, 0}, {20, 25}, {30, 40}});
  gaps[1].committed.reset();
  CHECK(judge(gaps, 1, window(3)) == LagStatus::kWarn);
}

TEST_CASE("rules: too few points, or none committed", "[lag][rules]") {
  // One sample shows no trend: OK whatever the lag.
  CHECK(judge(points({{10, 1000}})) == LagStatus::kOk);
  std::vector<PartitionPoint> never = points({{0, 10}, {0, 20}});
  for (auto& p : never) p.committed.reset();
  CHECK_FALSE(judge_partition(never, std::nullopt, window(10)));
  CHECK_FALSE(judge_partition({}, std::nullopt, window(10)));
}

TEST_CASE("estimate_produce_time interpolates the end offsets seen", "[lag][time]") {
  // The end stood at 100 until t=1400 and had reached 200 by t=2000: the
  // record at 150 came halfway between.
  CHECK(*estimate_produce_time({{100, 1000, 1400}, {200, 2000, 2600}}, 150) == 1700);
  CHECK(*estimate_produce_time({{100, 1000, 1400}, {200, 2000, 2600}}, 100) == 1400);
  // Unsorted, and the same offset seen by several samples.
  CHECK(*estimate_produce_time(
            {{200, 2500, 2600}, {100, 1000, 1000}, {200, 2000, 2000}, {100, 1200, 1400}}, 150) ==
        1700);
  // Older than every sight: the first two points' rate, extrapolated.
  CHECK(*estimate_produce_time({{100, 1000, 1900}, {200, 2000, 2000}, {400, 9000, 9000}}, 50) ==
        500);
  // Not yet produced when last seen, or too few points to tell.
  CHECK_FALSE(estimate_produce_time({{100, 1000, 1000}, {200, 2000, 2000}}, 200));
  CHECK_FALSE(estimate_produce_time({{200, 2000, 2000}}, 100));
  CHECK_FALSE(estimate_produce_time({}, 100));
}

TEST_CASE("LagEngine::sample stamps the clock's time and measures lag in seconds", "[lag][time]") {
  FakeClock clock(kT0);
  LagEngine engine(clock, {});
  std::vector<PartitionReading> readings = {
      {"events", 1, 100, 150, std::nullopt, kT0 - 2500},            // 2.5 s behind
      {"events", 0, 150, 150, std::nullopt, std::nullopt},          // caught up
      {"audit", 0, 10, 20, std::nullopt, kT0 + 5000},               // a timestamp from the future
      {"events", 2, std::nullopt, 80, std::nullopt, std::nullopt},  // nothing committed
      {"events", 3, 40, 60, std::nullopt, std::nullopt},            // not fetched, no history
  };
  LagSample s = engine.sample({LagSubject::Kind::kGroup, "g"}, 2, "Stable", readings);
  CHECK(s.at == kT0);
  CHECK(*s.members == 2);
  CHECK(s.group_state == "Stable");
  REQUIRE(s.partitions.size() == 5);
  // Sorted by topic, then partition.
  CHECK(s.partitions[0].topic == "audit");
  CHECK(*s.partitions[0].lag_seconds == 0.0);
  CHECK(s.partitions[1].partition == 0);
  CHECK(*s.partitions[1].lag_seconds == 0.0);
  CHECK(*s.partitions[2].lag_seconds == 2.5);
  CHECK_FALSE(s.partitions[3].lag_seconds);
  CHECK_FALSE(s.partitions[3].lag());
  CHECK_FALSE(s.partitions[4].lag_seconds);
}

TEST_CASE("LagEngine::sample estimates lag seconds from the history (--no-fetch)", "[lag][time]") {
  FakeClock clock(kT0 + 10 * kSecond);
  LagEngine engine(clock, {});
  // The end was 100 at t0 and is 200 now (the current sample is a point
  // too): the record at 150 came 5 s ago.
  std::map<TopicPartition, std::vector<EndOffsetSeen>> timelines;
  timelines[{"events", 0}] = {{100, kT0, kT0}};
  LagSample s = engine.sample({LagSubject::Kind::kGroup, "g"}, std::nullopt, "",
                              {{"events", 0, 150, 200, std::nullopt, std::nullopt}}, timelines);
  REQUIRE(s.partitions[0].lag_seconds);
  CHECK(*s.partitions[0].lag_seconds == 5.0);
}

TEST_CASE("LagEngine::report judges each partition and takes the worst", "[lag]") {
  FakeClock clock(kT0);
  LagEngine engine(clock, {3, 0});
  GroupReport r = engine.report(billing_history());
  CHECK(r.subject.name == "billing");
  CHECK(r.at == kT0 + 2 * kMinute);
  REQUIRE(r.partitions.size() == 3);
  CHECK_FALSE(r.partitions[0].status);
  CHECK(*r.partitions[1].status == LagStatus::kStall);
  CHECK(*r.partitions[2].status == LagStatus::kOk);
  CHECK(r.partitions[1].recent_lags == std::vector<int64_t>{10, 20, 30});
  CHECK(r.partitions[0].recent_lags.empty());
  CHECK(r.total_lag == 30);
  CHECK(*r.max_lag_seconds == 125.5);
  CHECK(r.status == LagStatus::kStall);
  CHECK(
      r.reason ==
      "events [0]: offset 10 did not move in 3 samples over 2m while lag stayed above 0 (now 30)");
}

TEST_CASE("check_alerts: thresholds each way", "[lag][alerts]") {
  FakeClock clock(kT0);
  LagEngine engine(clock, {3, 0});
  std::vector<GroupReport> reports = {engine.report(billing_history())};
  CHECK(check_alerts(reports, {}).empty());
  CHECK(check_alerts(reports, {30, std::nullopt, std::nullopt}).empty());
  CHECK(check_alerts(reports, {29, std::nullopt, std::nullopt}) ==
        std::vector<std::string>{"group 'billing': lag 30 is over --max-lag 29"});
  CHECK(check_alerts(reports, {std::nullopt, 125.5, std::nullopt}).empty());
  CHECK(check_alerts(reports, {std::nullopt, 60, std::nullopt}) ==
        std::vector<std::string>{
            "group 'billing': events [0] is 125.5s behind, over --max-lag-seconds 60"});
  CHECK(check_alerts(reports, {std::nullopt, std::nullopt, LagStatus::kStop}).empty());
  auto stall = check_alerts(reports, {std::nullopt, std::nullopt, LagStatus::kWarn});
  REQUIRE(stall.size() == 1);
  CHECK(stall[0] ==
        "group 'billing' is STALL (--fail-on WARN): events [0]: offset 10 did not move in 3 "
        "samples over 2m while lag "
        "stayed above 0 (now 30)");
  CHECK(check_alerts(reports, {1, 1, LagStatus::kStall}).size() == 3);
}

TEST_CASE("klag --uncommitted: names and a mistyped mode", "[lag][uncommitted]") {
  CHECK(*parse_uncommitted("earliest") == Uncommitted::kEarliest);
  CHECK(*parse_uncommitted("latest") == Uncommitted::kLatest);
  CHECK(*parse_uncommitted("ignore") == Uncommitted::kIgnore);
  CHECK(std::string(uncommitted_name(Uncommitted::kEarliest)) == "earliest");
  auto typo = parse_uncommitted("earlist");
  REQUIRE_FALSE(typo);
  CHECK(typo.error().status == ExitStatus::kUsage);
  CHECK(typo.error().message == "unknown --uncommitted 'earlist', did you mean 'earliest'?");
}

TEST_CASE("partition lag without a committed offset counts from the assumed offset",
          "[lag][uncommitted]") {
  PartitionSample p{"t", 0, std::nullopt, 150, std::nullopt, std::nullopt};
  p.start = 20;
  CHECK_FALSE(p.lag());  // kIgnore: nothing to count from
  CHECK_FALSE(p.is_assumed());
  p.assumed = Uncommitted::kEarliest;
  CHECK(p.is_assumed());
  CHECK(*p.position() == 20);
  CHECK(*p.lag() == 130);
  p.assumed = Uncommitted::kLatest;
  CHECK(*p.position() == 150);
  CHECK(*p.lag() == 0);
  // A committed offset wins over any assumption.
  p.committed = 100;
  CHECK_FALSE(p.is_assumed());
  CHECK(*p.lag() == 50);
  // Earliest without a known log start: nothing to count.
  PartitionSample unknown{"t", 0, std::nullopt, 150, std::nullopt, std::nullopt};
  unknown.assumed = Uncommitted::kEarliest;
  CHECK_FALSE(unknown.lag());
}

TEST_CASE("read_offset: the record whose timestamp is the lag in seconds", "[lag][uncommitted]") {
  PartitionReading r{"t", 0, 40, 100, std::nullopt, std::nullopt};
  r.start = 10;
  CHECK(*read_offset(r, Uncommitted::kIgnore) == 40);
  // Deleted by retention: the oldest record left.
  r.committed = 5;
  CHECK(*read_offset(r, Uncommitted::kEarliest) == 10);
  r.committed = 100;
  CHECK_FALSE(read_offset(r, Uncommitted::kEarliest));  // caught up
  r.committed.reset();
  CHECK(*read_offset(r, Uncommitted::kEarliest) == 10);
  CHECK_FALSE(read_offset(r, Uncommitted::kLatest));
  CHECK_FALSE(read_offset(r, Uncommitted::kIgnore));
  r.start = 100;  // an empty log: nothing to read
  CHECK_FALSE(read_offset(r, Uncommitted::kEarliest));
}

TEST_CASE("a partition never committed on is lag, not nothing (issue 22)", "[lag][uncommitted]") {
  FakeClock clock(kT0);
  LagEngine engine(clock, {3, 0});
  REQUIRE(engine.uncommitted() == Uncommitted::kEarliest);  // the default
  LagSample s =
      engine.sample({LagSubject::Kind::kGroup, "g"}, std::nullopt, "", never_committed_readings());
  REQUIRE(s.partitions.size() == 4);
  CHECK(s.partitions[2].assumed == Uncommitted::kEarliest);
  CHECK_FALSE(s.partitions[2].committed);
  CHECK(*s.partitions[2].lag() == 162);
  // Behind by the age of the oldest record, read at the log start.
  CHECK(*s.partitions[3].lag_seconds == 40.0);
  GroupReport r = engine.report({s});
  CHECK(r.total_lag == 400);
  CHECK(r.assumed_lag == 324);
  CHECK(r.assumed_partitions == 2);
  CHECK(*r.max_lag_seconds == 40.0);
  // Judged like committed partitions: one sample is OK.
  CHECK(*r.partitions[3].status == LagStatus::kOk);
  CHECK(check_alerts({r}, {100, std::nullopt, std::nullopt}) ==
        std::vector<std::string>{
            "group 'g': lag 400 is over --max-lag 100 (324 of it on 2 partitions without a "
            "committed offset)"});
  CHECK(
      check_alerts({r}, {std::nullopt, 35, std::nullopt}) ==
      std::vector<std::string>{"group 'g': events [3] is 40.0s behind, over --max-lag-seconds 35"});

  // --uncommitted ignore: the figure klag gave before, and no alert.
  LagEngine ignoring(clock, {3, 0}, Uncommitted::kIgnore);
  GroupReport old = ignoring.report({ignoring.sample({LagSubject::Kind::kGroup, "g"}, std::nullopt,
                                                     "", never_committed_readings())});
  CHECK(old.total_lag == 76);
  CHECK(old.assumed_partitions == 0);
  CHECK_FALSE(old.partitions[2].status);
  CHECK_FALSE(old.partitions[2].sample.lag_seconds);
  CHECK(*old.max_lag_seconds == 5.0);
  CHECK(check_alerts({old}, {100, 35, std::nullopt}).empty());

  // --uncommitted latest: no lag, but marked.
  LagEngine latest(clock, {3, 0}, Uncommitted::kLatest);
  GroupReport at_end = latest.report({latest.sample({LagSubject::Kind::kGroup, "g"}, std::nullopt,
                                                    "", never_committed_readings())});
  CHECK(at_end.total_lag == 76);
  CHECK(at_end.assumed_lag == 0);
  CHECK(at_end.assumed_partitions == 2);
  CHECK(at_end.partitions[2].sample.is_assumed());
  CHECK(*at_end.partitions[2].sample.lag_seconds == 0.0);
  CHECK(*at_end.partitions[2].status == LagStatus::kOk);
}

TEST_CASE("an uncommitted partition whose records wait unread stalls, then stops",
          "[lag][uncommitted][rules]") {
  FakeClock clock(kT0);
  LagEngine engine(clock, {3, 0});
  std::vector<LagSample> history;
  for (int i = 0; i < 4; ++i) {
    PartitionReading r{"events", 2, std::nullopt, 100 + 10 * i, std::nullopt, std::nullopt};
    r.start = 0;
    history.push_back(engine.sample({LagSubject::Kind::kGroup, "g"}, 1, "Stable", {r}));
    clock.advance(kMinute);
  }
  std::vector<LagSample> window(history.begin(), history.begin() + 3);
  GroupReport stall = engine.report(window);
  CHECK(stall.status == LagStatus::kStall);
  CHECK(stall.reason ==
        "events [2]: offset 0 (nothing committed: the log start) did not move in 3 samples over "
        "2m while lag stayed above 0 (now 120)");
  CHECK(stall.partitions[0].recent_lags == std::vector<int64_t>{100, 110, 120});
  for (auto& s : history) s.members = 0;
  GroupReport stop = engine.report(history);
  CHECK(stop.status == LagStatus::kStop);
  CHECK(stop.reason.starts_with(
      "events [2]: offset 0 (nothing committed: the log start) has not moved for longer"));
}

TEST_CASE("a committed offset that disappears is a REWIND to the log start",
          "[lag][uncommitted][rules]") {
  FakeClock clock(kT0);
  LagEngine engine(clock, {3, 0});
  PartitionReading r{"events", 0, 50, 80, std::nullopt, std::nullopt};
  r.start = 10;
  std::vector<LagSample> history;
  history.push_back(engine.sample({LagSubject::Kind::kGroup, "g"}, 1, "Stable", {r}));
  clock.advance(kMinute);
  r.committed.reset();  // the group's offsets expired
  history.push_back(engine.sample({LagSubject::Kind::kGroup, "g"}, 1, "Stable", {r}));
  GroupReport rewind = engine.report(history);
  CHECK(rewind.status == LagStatus::kRewind);
  CHECK(rewind.reason ==
        "events [0]: the offset went back from 50 to 10 (nothing committed: the log start)");
}

TEST_CASE("GroupSelector: names, and patterns matching whole group ids", "[lag][groups]") {
  CHECK_FALSE(GroupSelector::is_pattern("billing"));
  CHECK_FALSE(GroupSelector::is_pattern("billing.v2"));  // a dotted name, not a pattern
  CHECK(GroupSelector::is_pattern("billing-.*"));
  CHECK(GroupSelector::is_pattern("a|b"));
  CHECK(GroupSelector::is_pattern("^billing$"));
  auto g = GroupSelector::create({"payments", "billing-.*", "payments", "aud[i]t"}, false);
  REQUIRE(g);
  CHECK(g->lists());
  CHECK(g->names() == std::vector<std::string>{"payments"});
  CHECK(g->describe() == "-g 'billing-.*', -g 'aud[i]t'");
  // The names first, then what the patterns match, sorted, each once; a
  // pattern matches the whole id, not a part of it.
  CHECK(g->select({"billing-b", "payments", "xbilling-c", "audit", "billing-a", "audits"}) ==
        std::vector<std::string>{"payments", "audit", "billing-a", "billing-b"});
  // A name is sampled whether or not the cluster lists it.
  CHECK(g->select({}) == std::vector<std::string>{"payments"});

  auto names = GroupSelector::create({"a", "b.c"}, false);
  REQUIRE(names);
  CHECK_FALSE(names->lists());
  CHECK(names->select({"x", "bxc"}) == std::vector<std::string>{"a", "b.c"});

  auto all = GroupSelector::create({}, true);
  REQUIRE(all);
  CHECK(all->lists());
  CHECK(all->describe() == "--all-groups");
  CHECK(all->select({"z", "a", "a"}) == std::vector<std::string>{"a", "z"});

  auto bad = GroupSelector::create({"billing-(.*"}, false);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().status == ExitStatus::kUsage);
  CHECK(bad.error().message.starts_with("-g 'billing-(.*' is not a regular expression: "));
  auto empty = GroupSelector::create({""}, false);
  REQUIRE_FALSE(empty);
  CHECK(empty.error().message == "-g: the group name is empty");
}

namespace {

// A group's 160 samples a minute apart that go through every verdict: on
// events [0], phases of 20 samples (keeping up, falling behind, stalled
// with members, stopped without any, a rewind, stalled where the broker
// cannot tell the members, and noise); events [1] missing from some
// samples and uncommitted in others; audit [0] appearing later, first
// counted from its log start, then committed with commit times.
std::vector<LagSample> varied_history() {
  uint64_t seed = 38;
  auto next = [&](int64_t n) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int64_t>((seed >> 33) % static_cast<uint64_t>(n));
  };
  std::vector<LagSample> out;
  int64_t c0 = 0, e0 = 0, c1 = 0, e1 = 0, c2 = 0, e2 = 0;
  for (int i = 0; i < 160; ++i) {
    Millis at = kT0 + i * kMinute;
    int phase = i / 20;
    std::optional<int64_t> members = i % 13 == 0 ? 0 : 2;
    switch (phase) {
      case 0:
        e0 += next(5);
        c0 = std::max(c0, e0 - next(2));
        break;
      case 1:
        e0 += 5 + next(3);
        c0 += 1 + next(2);
        break;
      case 2:
        e0 += 1 + next(3);
        members = 3;
        break;
      case 3:
        e0 += next(2);
        members = 0;
        break;
      case 4:
        if (i == 80) c0 -= 5;
        e0 += next(3);
        c0 = std::min(c0 + next(10), e0);
        break;
      case 6:
        e0 += 1;
        members = std::nullopt;
        break;
      default:
        e0 += next(10);
        c0 = std::min(c0 + next(10), e0);
    }
    std::vector<PartitionSample> parts = {part("events", 0, c0, e0, double(e0 - c0) / 2)};
    e1 += next(4);
    c1 = std::min(c1 + next(4), e1);
    if (i % 7 != 3)
      parts.push_back(part("events", 1, i % 11 == 5 ? std::nullopt : std::optional(c1), e1));
    if (i >= 30) {
      e2 += next(3);
      PartitionSample a = part("audit", 0, std::nullopt, e2);
      a.start = 0;
      a.assumed = Uncommitted::kEarliest;
      if (i >= 60) {
        c2 = i % 9 == 0 ? c2 : std::min(c2 + next(4), e2);
        a.committed = c2;
        a.committed_at = at - next(8) * kMinute;
      }
      parts.insert(parts.begin(), a);
    }
    out.push_back(sample_at(at, std::move(parts), members));
  }
  return out;
}

}  // namespace

TEST_CASE("LagEngine::statuses: report()'s verdict after each sample, from the last depth samples",
          "[lag][statuses]") {
  FakeClock clock(kT0);
  const auto history = varied_history();
  std::set<LagStatus> seen;
  for (RuleSettings rules : {window(3), window(5, 2), window(10)}) {
    LagEngine engine(clock, rules);
    for (size_t depth : {rules.window + 1, size_t{7}, size_t{30}, size_t{0}}) {
      INFO("window " << rules.window << ", depth " << depth);
      auto statuses = engine.statuses(history, depth);
      REQUIRE(statuses.size() == history.size());
      for (size_t i = 0; i < history.size(); ++i) {
        INFO("sample " << i);
        size_t from = depth == 0 || i + 1 < depth ? 0 : i + 1 - depth;
        std::vector<LagSample> judged(history.begin() + static_cast<long>(from),
                                      history.begin() + static_cast<long>(i) + 1);
        CHECK(statuses[i] == engine.report(judged).status);
        seen.insert(statuses[i]);
      }
    }
  }
  // The history is varied enough to show every verdict.
  CHECK(seen.size() == std::size(kLagStatuses));
  FakeClock c(kT0);
  CHECK(LagEngine(c, window(3)).statuses({}, 30).empty());
}

namespace {

// A Kinesis shard's reading (klag(1), Kinesis): its position, and the
// arrival time of the first record after it, none when caught up.
PartitionReading shard_reading(int32_t shard, std::optional<std::string> sequence,
                               std::optional<Millis> next_arrival) {
  PartitionReading r;
  r.topic = "clicks";
  r.partition = shard;
  if (sequence) r.committed = *Position::sequence(*sequence);
  r.record_timestamp = next_arrival;
  r.by_time = true;
  return r;
}

const std::string kSeq1 = "49590338271490256608559692538361571095921575989136588898";
const std::string kSeq2 = "49590338271490256608559692540925702759324208523137515618";

}  // namespace

TEST_CASE("a Kinesis shard's lag is in time: none in records, its sequence number kept whole",
          "[lag][kinesis]") {
  FakeClock clock(kT0);
  LagEngine engine(clock, {});
  LagSample s =
      engine.sample({LagSubject::Kind::kState, "p.db"}, std::nullopt, "",
                    {shard_reading(0, kSeq1, kT0 - 90 * kSecond),
                     shard_reading(1, kSeq2, std::nullopt), shard_reading(2, {}, kT0 - kMinute)});
  REQUIRE(s.partitions.size() == 3);
  const PartitionSample& behind = s.partitions[0];
  CHECK(behind.committed->digits() == kSeq1);
  CHECK(*behind.lag_seconds == 90.0);
  CHECK_FALSE(behind.lag());
  CHECK(*behind.judged_lag() == 90'000);
  // Nothing after its position: caught up.
  CHECK(*s.partitions[1].lag_seconds == 0.0);
  CHECK(*s.partitions[1].judged_lag() == 0);
  // Never committed on (a child shard not read yet): from its start, as
  // --uncommitted earliest says.
  CHECK(s.partitions[2].is_assumed());
  CHECK(*s.partitions[2].position() == Position(LogStart::kEarliest));
  CHECK(*s.partitions[2].lag_seconds == 60.0);

  // --uncommitted latest: such a shard counts as caught up.
  LagEngine latest(clock, {}, Uncommitted::kLatest);
  LagSample l = latest.sample({LagSubject::Kind::kState, "p.db"}, std::nullopt, "",
                              {shard_reading(2, {}, kT0 - kMinute)});
  CHECK(*l.partitions[0].lag_seconds == 0.0);

  // The report has no lag in records to total.
  GroupReport r = engine.report({s});
  CHECK(r.by_time);
  CHECK(*r.max_lag_seconds == 90.0);
}

TEST_CASE("Burrow's rules judge a Kinesis shard by its lag in time and its sequence numbers",
          "[lag][kinesis][rules]") {
  auto shard = [](Millis at, const std::string& seq, int64_t lag_ms) {
    PartitionPoint p;
    p.at = at;
    p.committed = *Position::sequence(seq);
    p.lag = lag_ms;
    p.by_time = true;
    return p;
  };
  // Unmoved while the oldest unread record ages: STALL, said in time.
  std::vector<PartitionPoint> stalled = {shard(kT0, kSeq1, 1000),
                                         shard(kT0 + kMinute, kSeq1, 61'000),
                                         shard(kT0 + 2 * kMinute, kSeq1, 121'000)};
  auto v = judge_partition(stalled, std::nullopt, window(10, 500'000));
  REQUIRE(v);
  // --allowed-lag counts records: a shard behind is never within it.
  CHECK(v->status == LagStatus::kStall);
  CHECK(v->reason == "position " + kSeq1 +
                         " did not move in 3 samples over 2m while lag stayed above 0 (now 2m1s)");
  // Moving on while the lag grows: WARN; then one lower lag: OK.
  std::vector<PartitionPoint> slow = {shard(kT0, kSeq1, 1000), shard(kT0 + kMinute, kSeq2, 5000)};
  CHECK(judge(slow, std::nullopt) == LagStatus::kWarn);
  slow.push_back(shard(kT0 + 2 * kMinute, kSeq2 + "0", 2000));
  CHECK(judge(slow, std::nullopt) == LagStatus::kOk);
  // A sequence number lower than the one before: REWIND, by value, not
  // as text ("9" < "10").
  std::vector<PartitionPoint> back = {shard(kT0, kSeq2, 1000), shard(kT0 + kMinute, kSeq1, 2000)};
  CHECK(judge(back, std::nullopt) == LagStatus::kRewind);
  std::vector<PartitionPoint> longer = {shard(kT0, "9", 1000), shard(kT0 + kMinute, "10", 2000)};
  CHECK(judge(longer, std::nullopt) == LagStatus::kWarn);

  // statuses() agrees with report() over the same samples.
  FakeClock clock(kT0);
  LagEngine engine(clock, {});
  std::vector<LagSample> history;
  for (int i = 0; i < 3; ++i) {
    clock.set(kT0 + i * kMinute);
    history.push_back(engine.sample({LagSubject::Kind::kState, "p.db"}, std::nullopt, "",
                                    {shard_reading(0, kSeq1, kT0 - kSecond)}));
  }
  CHECK(engine.report(history).status == LagStatus::kStall);
  CHECK(engine.statuses(history, 0).back() == LagStatus::kStall);
}
